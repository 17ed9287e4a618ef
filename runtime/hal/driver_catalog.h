// hal::CatalogDriver: the part every driver over a fixed device list shares, written once.
// A driver enumerates its devices into records (a DeviceCatalog: one Record per device, each
// with its hal::DeviceInfo, plus why the list is empty) and opens one record; CatalogDriver
// implements devices(), unavailable_reason() and open_device(id, options): the lookup by id,
// kNotFound naming the driver's ids (or why it has none), and the check of the driver's own
// device options (device_options.h).
//
// A new driver: derive from CatalogDriver<YourRecord>, return the catalog from catalog() (the
// same object on every call: enumerate once, e.g. in a function-local static or under
// std::call_once), open a record in open(), and add the driver to DeviceRegistry's constructor.
// The HAL conformance suite (tests/unit/test_hal_conformance.cpp) then runs on its devices.
//
// Ownership: the catalog belongs to the driver (or to the process, for APIs whose device list
// is fixed per process) and outlives every call; records are copied into opened devices as the
// driver needs. Thread-safety: all methods are safe to call concurrently; catalog() must be too.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/hal/device.h"
#include "runtime/hal/device_options.h"
#include "runtime/hal/driver.h"
#include "runtime/hal/types.h"
#include "support/status.h"

namespace kiln::runtime::hal {

// What a driver enumerated: Record is the driver's own per-device record, holding at least a
// `hal::DeviceInfo info` member.
template <class Record>
struct DeviceCatalog {
  std::vector<Record> devices;
  std::string unavailable_reason;  // why `devices` is empty, or ""
};

namespace detail {
// kInvalidArgument for an option "<driver>.X" whose X is not in `known` (naming the driver's
// options); ok otherwise (options of other drivers are not this driver's business).
Status check_driver_options(std::string_view driver, const std::vector<std::string>& known,
                            const DeviceOptions& options);
// kNotFound: "the <api> driver has no device '<id>' (its devices: a, b)" or "(<reason>)".
Status no_such_device(std::string_view api_name, std::string_view id, const std::vector<DeviceInfo>& listed,
                      const std::string& unavailable_reason);
}  // namespace detail

template <class Record>
class CatalogDriver : public Driver {
 public:
  using Driver::open_device;

  std::string_view name() const final { return name_; }
  std::vector<DeviceInfo> devices() const final {
    std::vector<DeviceInfo> out;
    for (const Record& record : catalog().devices) out.push_back(record.info);
    return out;
  }
  std::string unavailable_reason() const final { return catalog().unavailable_reason; }
  Result<std::unique_ptr<Device>> open_device(std::string_view id, const DeviceOptions& options) const final {
    KILN_RETURN_IF_ERROR(detail::check_driver_options(name_, option_names_, options));
    const DeviceCatalog<Record>& listed = catalog();
    for (const Record& record : listed.devices)
      if (record.info.id == id) return open(record, options);
    return detail::no_such_device(api_name_, id, devices(), listed.unavailable_reason);
  }

 protected:
  // `name`: the driver's name ("cuda"); `api_name`: how messages name it ("CUDA");
  // `option_names`: its device options without the "<name>." prefix ("graphs").
  CatalogDriver(std::string name, std::string api_name, std::vector<std::string> option_names = {})
      : name_(std::move(name)), api_name_(std::move(api_name)), option_names_(std::move(option_names)) {}

  // The enumerated devices; the same object on every call (enumerated once).
  virtual const DeviceCatalog<Record>& catalog() const = 0;
  // Opens the device of `record` (one of catalog().devices) with `options`, whose names were
  // checked (values are the driver's to parse).
  virtual Result<std::unique_ptr<Device>> open(const Record& record, const DeviceOptions& options) const = 0;

 private:
  std::string name_;
  std::string api_name_;
  std::vector<std::string> option_names_;
};

}  // namespace kiln::runtime::hal
