#include "support/vendor_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace kiln {

Result<VendorLibrary> open_vendor_library(std::initializer_list<const char*> sonames, const char* what,
                                          const char* switch_variable) {
  const char* disabled = std::getenv(switch_variable);
  if (disabled && std::strcmp(disabled, "0") == 0)
    return Status(ErrorCode::kUnavailable, std::string(what) + " is disabled by " + switch_variable + "=0");
  std::string tried;
  for (const char* name : sonames) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return VendorLibrary{handle, name};
    const char* why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + name + ": " + (why ? why : "not found");
  }
  return Status(ErrorCode::kUnavailable, std::string(what) + " not found (" + tried + ")");
}

Status load_entry_point(const VendorLibrary& library, const char* name, void** entry) {
  *entry = dlsym(library.handle, name);
  if (!*entry) return Status(ErrorCode::kUnavailable, library.name + " lacks the entry point " + name);
  return Status::ok();
}

}  // namespace kiln
