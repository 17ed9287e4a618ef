#include "runtime/hal/device_options.h"

#include <algorithm>

namespace kiln::runtime::hal {

DeviceOptions& DeviceOptions::set(std::string key, std::string value) {
  for (auto& [k, v] : entries_) {
    if (k != key) continue;
    v = std::move(value);
    return *this;
  }
  entries_.emplace_back(std::move(key), std::move(value));
  return *this;
}

std::optional<std::string_view> DeviceOptions::get(std::string_view key) const {
  for (const auto& [k, v] : entries_)
    if (k == key) return std::string_view(v);
  return std::nullopt;
}

std::string DeviceOptions::to_string() const {
  std::vector<std::pair<std::string, std::string>> sorted = entries_;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (const auto& [k, v] : sorted) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

Result<std::optional<bool>> DeviceOptions::get_switch(std::string_view key) const {
  std::optional<std::string_view> value = get(key);
  if (!value) return std::optional<bool>();
  if (*value == "on" || *value == "1" || *value == "true") return std::optional<bool>(true);
  if (*value == "off" || *value == "0" || *value == "false") return std::optional<bool>(false);
  return invalid_argument("device option '" + std::string(key) + "' is on or off, not '" +
                          std::string(*value) + "'");
}

}  // namespace kiln::runtime::hal
