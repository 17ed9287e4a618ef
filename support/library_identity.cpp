#include "support/library_identity.h"

#include <dlfcn.h>
#include <sys/stat.h>

namespace kiln {

std::string loaded_library_identity(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "unknown library";
  std::string identity = info.dli_fname;
  struct stat st {};
  if (stat(info.dli_fname, &st) == 0)
    identity += " size " + std::to_string(st.st_size) + " mtime " + std::to_string(st.st_mtim.tv_sec) + "." +
                std::to_string(st.st_mtim.tv_nsec);
  return identity;
}

}  // namespace kiln
