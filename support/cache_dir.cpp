#include "support/cache_dir.h"

#include <cstdlib>
#include <filesystem>

namespace kiln {
namespace {

std::string getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::string kiln_cache_dir() {
  namespace fs = std::filesystem;
  if (std::string dir = getenv_or_empty("KILN_CACHE_DIR"); !dir.empty()) return dir;
  // XDG Base Directory spec: a relative $XDG_CACHE_HOME is invalid and must be ignored.
  if (std::string xdg = getenv_or_empty("XDG_CACHE_HOME"); !xdg.empty() && xdg.front() == '/')
    return (fs::path(xdg) / "kiln").string();
  if (std::string home = getenv_or_empty("HOME"); !home.empty()) return (fs::path(home) / ".cache" / "kiln").string();
  return "";
}

}  // namespace kiln
