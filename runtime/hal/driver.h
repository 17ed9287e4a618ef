// hal::Driver: one compute API (reference, CUDA, Vulkan, OpenCL). A driver enumerates the
// devices its API can see and opens them. Drivers for real APIs are loaded at run time (dlopen)
// so that the runtime links and runs on machines without those APIs; such a driver reports no
// devices (and says why through `unavailable_reason`) instead of failing.
//
// Ownership: drivers are owned by the DeviceRegistry (runtime/device_registry.h) and outlive the
// devices they open only as long as the registry does: keep the registry alive while devices
// are in use. Thread-safety: all methods are safe to call concurrently.
//
// A driver over a fixed list of devices (every driver of this build) derives from
// CatalogDriver (driver_catalog.h), which implements listing and opening by id once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/hal/device.h"
#include "runtime/hal/device_options.h"
#include "runtime/hal/types.h"
#include "support/status.h"

namespace kiln::runtime::hal {

class Driver {
 public:
  virtual ~Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  virtual std::string_view name() const = 0;
  // Every device this driver can open now (empty when its API is not installed).
  virtual std::vector<DeviceInfo> devices() const = 0;
  // Why devices() is empty ("libcuda.so.1 not found"), or "" when the driver is usable.
  virtual std::string unavailable_reason() const { return ""; }
  // Opens the device with this id (one of devices()); kNotFound otherwise. `options` holds
  // device options (device_options.h); those of other drivers are ignored, and one of this
  // driver's that it does not have is kInvalidArgument.
  virtual Result<std::unique_ptr<Device>> open_device(std::string_view id,
                                                      const DeviceOptions& options) const = 0;
  // open_device(id) with no options.
  Result<std::unique_ptr<Device>> open_device(std::string_view id) const {
    return open_device(id, DeviceOptions());
  }

 protected:
  Driver() = default;
};

}  // namespace kiln::runtime::hal
