#include "tools/common/json_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln::tools {

Status write_json_file(const std::string& path, const nlohmann::json& value) {
  // Non-finite numbers (a NaN median of zero runs) become null instead of invalid JSON; invalid
  // UTF-8 in a name is replaced rather than thrown.
  const std::string text = value.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? Status::ok() : invalid_argument("cannot write JSON to stdout");
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return invalid_argument("cannot open '" + path + "' for writing: " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) return invalid_argument("cannot write '" + path + "'");
  return Status::ok();
}

}  // namespace kiln::tools
