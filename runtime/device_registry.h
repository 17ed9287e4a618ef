// DeviceRegistry: every driver this build can use, and the devices they see.
//
// Built-in now: the reference driver. Later issues add the CUDA, Vulkan and OpenCL drivers,
// loaded with dlopen so that a machine without those APIs still lists the reference device
// (and the registry reports why a driver is unavailable).
//
// Ownership: the registry owns its drivers; keep it alive while any Device it opened is in use.
// Thread-safety: add_driver needs exclusive access; the const methods are safe to call
// concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/hal/device.h"
#include "runtime/hal/driver.h"
#include "support/status.h"

namespace kiln::runtime {

class DeviceRegistry {
 public:
  // A registry holding every built-in driver.
  DeviceRegistry();
  DeviceRegistry(const DeviceRegistry&) = delete;
  DeviceRegistry& operator=(const DeviceRegistry&) = delete;

  void add_driver(std::unique_ptr<hal::Driver> driver);
  const std::vector<std::unique_ptr<hal::Driver>>& drivers() const { return drivers_; }

  // Every device of every driver, fastest first (by DeviceInfo::priority, then driver order).
  std::vector<hal::DeviceInfo> list_devices() const;
  // The id of the fastest available device ("reference" when no GPU driver sees a device).
  std::string default_device_id() const;
  // Opens a device by id; "" opens the default device. An unknown id is kNotFound with a
  // message listing the available ids.
  Result<std::unique_ptr<hal::Device>> open_device(std::string_view id) const;

 private:
  std::vector<std::unique_ptr<hal::Driver>> drivers_;
};

}  // namespace kiln::runtime
