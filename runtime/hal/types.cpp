#include "runtime/hal/types.h"

namespace kiln::runtime::hal {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kDiscreteGpu: return "gpu";
    case DeviceType::kIntegratedGpu: return "integrated-gpu";
    case DeviceType::kCpu: return "cpu";
  }
  return "unknown";
}

}  // namespace kiln::runtime::hal
