#include "support/library_identity.h"

#include <dlfcn.h>
#include <sys/stat.h>

namespace kiln {

std::string library_file_identity(const std::string& path) {
  std::string identity = path;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0)
    identity += " size " + std::to_string(st.st_size) + " mtime " + std::to_string(st.st_mtim.tv_sec) + "." +
                std::to_string(st.st_mtim.tv_nsec);
  return identity;
}

std::string loaded_library_identity(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "unknown library";
  return library_file_identity(info.dli_fname);
}

}  // namespace kiln
