// hal::DeviceOptions: settings given when a device is opened (DeviceRegistry::open_device,
// hal::Driver::open_device, kiln_session_create_with_options), as "<driver>.<option>" = value
// pairs, e.g. {"cuda.graphs", "off"}.
//
// An option belongs to the driver its prefix names and is read only by that driver: opening a
// device of another driver ignores it, so a tool can pass the same options whatever device it
// opens. The driver an option names rejects an option it does not have, or a value it cannot
// parse, with kInvalidArgument (the driver catalog, driver_catalog.h, checks the names); the
// registry rejects an option whose prefix names no registered driver.
//
// Options the drivers have:
//   cuda.graphs = on | off   capture and replay CUDA graphs in the device's streams (default on,
//                            or off when the environment variable KILN_CUDA_GRAPHS is "0")
//   cpu.threads = N          threads a cpu-driver launch runs on, the caller's included, 0 to 1024
//                            (0 or unset: one per hardware thread)
//
// Thread-safety: a plain value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/status.h"

namespace kiln::runtime::hal {

class DeviceOptions {
 public:
  DeviceOptions() = default;

  // Sets one option, replacing an earlier value of the same key.
  DeviceOptions& set(std::string key, std::string value);
  // The value of `key`, or nullopt when it is not set.
  std::optional<std::string_view> get(std::string_view key) const;
  // Every option in the order first set.
  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  // "key=value,key=value" sorted by key ("" when empty): equal for equal option sets.
  std::string to_string() const;

  // The value of the on/off option `key`: "on", "1", "true" -> true; "off", "0", "false" -> false;
  // nullopt when unset; kInvalidArgument naming the key for any other value.
  Result<std::optional<bool>> get_switch(std::string_view key) const;

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

}  // namespace kiln::runtime::hal
