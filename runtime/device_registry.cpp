#include "runtime/device_registry.h"

#include <algorithm>
#include <cstdlib>

#include "runtime/drivers/cpu/cpu_driver.h"
#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/drivers/opencl/opencl_driver.h"
#include "runtime/drivers/reference/reference_driver.h"
#include "runtime/drivers/vulkan/vulkan_driver.h"

namespace kiln::runtime {

DeviceRegistry::DeviceRegistry() {
  add_driver(reference::create_reference_driver());
  add_driver(opencl::create_opencl_driver());
  add_driver(vulkan::create_vulkan_driver());
  add_driver(cuda::create_cuda_driver());
  add_driver(cpu::create_cpu_driver());
}

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

Result<std::string> DeviceRegistry::default_device(const artifact::LoadedArtifact& artifact) const {
  const std::vector<std::string> targets = artifact.targets();
  if (targets.empty()) return std::string("reference");
  const std::vector<hal::DeviceInfo> devices = list_devices();
  for (const hal::DeviceInfo& info : devices)
    if (std::find(targets.begin(), targets.end(), info.driver) != targets.end()) return info.id;
  std::string target_list, device_list;
  for (const std::string& t : targets) target_list += (target_list.empty() ? "" : ", ") + t;
  for (const hal::DeviceInfo& info : devices) device_list += (device_list.empty() ? "" : ", ") + info.id;
  return Status(ErrorCode::kUnavailable,
                "the artifact has kernels for " + target_list + " only, and no device here runs them (devices: " +
                    (device_list.empty() ? std::string("none") : device_list) +
                    "); choose the reference interpreter explicitly (--device=reference, device id \"reference\") "
                    "or compile the artifact for one of these devices' targets");
}

Status DeviceRegistry::check_required_drivers(std::string_view comma_list) const {
  size_t start = 0;
  while (start <= comma_list.size()) {
    size_t end = comma_list.find(',', start);
    if (end == std::string_view::npos) end = comma_list.size();
    std::string_view name = comma_list.substr(start, end - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    start = end + 1;
    if (name.empty()) continue;
    const hal::Driver* found = nullptr;
    std::string built_in;
    for (const auto& driver : drivers_) {
      built_in += (built_in.empty() ? "" : ", ") + std::string(driver->name());
      if (driver->name() == name) found = driver.get();
    }
    if (!found)
      return Status(ErrorCode::kUnavailable,
                    "KILN_REQUIRE_DRIVERS requires the " + std::string(name) +
                        " driver, which this build does not have (drivers: " + built_in + ")");
    if (found->devices().empty()) {
      std::string reason = found->unavailable_reason();
      return Status(ErrorCode::kUnavailable,
                    "KILN_REQUIRE_DRIVERS requires the " + std::string(name) +
                        " driver, which has no usable device: " +
                        (reason.empty() ? std::string("it lists no devices") : reason));
    }
  }
  return Status::ok();
}

Status DeviceRegistry::check_required_drivers_from_env() const {
  const char* required = std::getenv("KILN_REQUIRE_DRIVERS");
  return required ? check_required_drivers(required) : Status::ok();
}

Result<std::unique_ptr<hal::Device>> DeviceRegistry::open_device(std::string_view id,
                                                                 const hal::DeviceOptions& options) const {
  KILN_RETURN_IF_ERROR(check_required_drivers_from_env());
  for (const auto& [key, value] : options.entries()) {
    const size_t dot = key.find('.');
    bool known = false;
    std::string names;
    for (const auto& driver : drivers_) {
      known = known || (dot != std::string::npos && key.compare(0, dot, driver->name()) == 0 &&
                        dot == driver->name().size());
      names += (names.empty() ? "" : ", ") + std::string(driver->name());
    }
    if (!known)
      return invalid_argument("device option '" + key + "' names no driver: options are named " +
                              "<driver>.<option>, e.g. cuda.graphs (drivers: " + names + ")");
  }
  std::string wanted = id.empty() ? default_device_id() : std::string(id);
  // Ids are "<driver>:<n>" (or a driver's name): ask that driver first, so that opening cuda:0
  // does not start every other GPU API; then every driver, for ids of another form.
  const std::string_view driver_name = std::string_view(wanted).substr(0, wanted.find(':'));
  for (const auto& driver : drivers_) {
    if (driver->name() != driver_name) continue;
    for (const hal::DeviceInfo& info : driver->devices())
      if (info.id == wanted) return driver->open_device(wanted, options);
  }
  for (const auto& driver : drivers_) {
    for (const hal::DeviceInfo& info : driver->devices())
      if (info.id == wanted) return driver->open_device(wanted, options);
  }
  std::string available;  // fastest first, like list_devices()
  for (const hal::DeviceInfo& info : list_devices())
    available += (available.empty() ? "" : ", ") + info.id;
  if (wanted.empty()) return Status(ErrorCode::kUnavailable, "no device is available");
  return not_found("unknown device '" + wanted + "'; available devices: " +
                   (available.empty() ? std::string("none") : available));
}

ir::InterpreterPrecision matching_interpreter_precision(const hal::DeviceInfo& device) {
  return device.id == reference::kReferenceDeviceId ? ir::InterpreterPrecision::kExact
                                                     : ir::InterpreterPrecision::kDeviceFaithful;
}

}  // namespace kiln::runtime
