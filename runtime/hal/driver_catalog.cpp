#include "runtime/hal/driver_catalog.h"

namespace kiln::runtime::hal::detail {

Status check_driver_options(std::string_view driver, const std::vector<std::string>& known,
                            const DeviceOptions& options) {
  const std::string prefix = std::string(driver) + ".";
  for (const auto& [key, value] : options.entries()) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string option = key.substr(prefix.size());
    bool found = false;
    std::string list;
    for (const std::string& k : known) {
      found = found || k == option;
      list += (list.empty() ? "" : ", ") + prefix + k;
    }
    if (!found)
      return invalid_argument("the " + std::string(driver) + " driver has no device option '" + key + "' (" +
                              (list.empty() ? std::string("it has none") : "its options: " + list) + ")");
  }
  return Status::ok();
}

Status no_such_device(std::string_view api_name, std::string_view id, const std::vector<DeviceInfo>& listed,
                      const std::string& unavailable_reason) {
  std::string ids;
  for (const DeviceInfo& info : listed) ids += (ids.empty() ? "" : ", ") + info.id;
  std::string why = !ids.empty() ? " (its devices: " + ids + ")"
                    : unavailable_reason.empty() ? std::string()
                                                 : " (" + unavailable_reason + ")";
  return not_found("the " + std::string(api_name) + " driver has no device '" + std::string(id) + "'" + why);
}

}  // namespace kiln::runtime::hal::detail
