#include "runtime/device_registry.h"

#include <algorithm>

#include "runtime/drivers/reference/reference_driver.h"

namespace kiln::runtime {

DeviceRegistry::DeviceRegistry() { add_driver(reference::create_reference_driver()); }

void DeviceRegistry::add_driver(std::unique_ptr<hal::Driver> driver) {
  if (driver) drivers_.push_back(std::move(driver));
}

std::vector<hal::DeviceInfo> DeviceRegistry::list_devices() const {
  std::vector<hal::DeviceInfo> out;
  for (const auto& driver : drivers_) {
    std::vector<hal::DeviceInfo> devices = driver->devices();
    out.insert(out.end(), devices.begin(), devices.end());
  }
  std::stable_sort(out.begin(), out.end(), [](const hal::DeviceInfo& a, const hal::DeviceInfo& b) {
    return a.priority > b.priority;
  });
  return out;
}

std::string DeviceRegistry::default_device_id() const {
  std::vector<hal::DeviceInfo> devices = list_devices();
  return devices.empty() ? std::string() : devices.front().id;
}

Result<std::unique_ptr<hal::Device>> DeviceRegistry::open_device(std::string_view id) const {
  std::string wanted = id.empty() ? default_device_id() : std::string(id);
  std::string available;
  for (const auto& driver : drivers_) {
    for (const hal::DeviceInfo& info : driver->devices()) {
      if (info.id == wanted) return driver->open_device(wanted);
      available += (available.empty() ? "" : ", ") + info.id;
    }
  }
  if (wanted.empty()) return Status(ErrorCode::kUnavailable, "no device is available");
  return not_found("unknown device '" + wanted + "'; available devices: " +
                   (available.empty() ? std::string("none") : available));
}

}  // namespace kiln::runtime
