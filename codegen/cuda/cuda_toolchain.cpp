#include "codegen/cuda/cuda_toolchain.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "support/library_identity.h"

namespace kiln::codegen {
namespace {

// The libraries CMake found (codegen/CMakeLists.txt), symlinks resolved.
constexpr const char* kConfiguredNvrtc = KILN_NVRTC_LIBRARY_PATH;
constexpr const char* kConfiguredNvJitLink = KILN_NVJITLINK_LIBRARY_PATH;

std::string file_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The file of one library: the override alone when it is set (the user named that library);
// else the configured path when it exists; else whatever the loader finds under its file name.
Result<std::string> locate(const char* override_variable, const std::string& configured, const char* what) {
  const char* override_path = std::getenv(override_variable);
  if (override_path && *override_path) {
    if (access(override_path, R_OK) == 0) return std::string(override_path);
    return Status(ErrorCode::kUnavailable, std::string("the cuda target needs ") + what + ", and " + override_variable +
                                               " names '" + override_path + "', which cannot be read");
  }
  if (access(configured.c_str(), R_OK) == 0) return configured;
  const std::string name = file_name(configured);
  void* library = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!library)
    return Status(ErrorCode::kUnavailable, std::string("the cuda target needs ") + what + " from the CUDA toolkit, and " +
                                               name + " is neither at " + configured +
                                               " nor on the loader's path (" + override_variable + " names it)");
  std::string path = name;
  link_map* map = nullptr;
  if (dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) path = map->l_name;
  dlclose(library);
  return path;
}

// Owns a dlopen handle and the API read from it; unloads the library when destroyed.
template <class Api>
struct Library {
  Api api;
  void* handle = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

template <class Api>
Result<std::shared_ptr<Library<Api>>> open_library(const std::string& path) {
  auto library = std::make_shared<Library<Api>>();
  // RTLD_LOCAL: the toolkit's symbols stay out of the process's global namespace.
  library->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library->handle) {
    const char* why = dlerror();
    return Status(ErrorCode::kUnavailable, "cannot load " + path + ": " + (why ? why : "dlopen failed"));
  }
  return library;
}

#define KILN_TOOLCHAIN_LOAD(name)                                                                          \
  library->api.name = reinterpret_cast<decltype(library->api.name)>(dlsym(library->handle, #name));      \
  if (!library->api.name)                                                                                  \
    return Status(ErrorCode::kUnavailable,                                                                 \
                  path + " lacks " #name " (a CUDA toolkit older than the one kilnc was built with?)");

}  // namespace

Result<CudaToolchainFiles> locate_cuda_toolchain() {
  CudaToolchainFiles files;
  KILN_ASSIGN_OR_RETURN(files.nvrtc, locate("KILN_NVRTC_LIBRARY", kConfiguredNvrtc, "NVRTC"));
  KILN_ASSIGN_OR_RETURN(files.nvjitlink, locate("KILN_NVJITLINK_LIBRARY", kConfiguredNvJitLink, "nvJitLink"));
  files.nvrtc_identity = "nvrtc " + library_file_identity(files.nvrtc);
  files.nvjitlink_identity = "nvJitLink " + library_file_identity(files.nvjitlink);
  return files;
}

Result<std::shared_ptr<const NvrtcApi>> load_nvrtc(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Library<NvrtcApi>> library, open_library<NvrtcApi>(path));
  KILN_TOOLCHAIN_LOAD(nvrtcGetErrorString)
  KILN_TOOLCHAIN_LOAD(nvrtcCreateProgram)
  KILN_TOOLCHAIN_LOAD(nvrtcDestroyProgram)
  KILN_TOOLCHAIN_LOAD(nvrtcCompileProgram)
  KILN_TOOLCHAIN_LOAD(nvrtcGetProgramLogSize)
  KILN_TOOLCHAIN_LOAD(nvrtcGetProgramLog)
  KILN_TOOLCHAIN_LOAD(nvrtcGetPTXSize)
  KILN_TOOLCHAIN_LOAD(nvrtcGetPTX)
  return std::shared_ptr<const NvrtcApi>(library, &library->api);  // shares the library's ownership
}

Result<std::shared_ptr<const NvJitLinkApi>> load_nvjitlink(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Library<NvJitLinkApi>> library, open_library<NvJitLinkApi>(path));
  // nvJitLink.h maps these names to versioned symbols with inline wrappers; the library also
  // exports them under their plain names, which are what dlsym finds here.
  KILN_TOOLCHAIN_LOAD(nvJitLinkCreate)
  KILN_TOOLCHAIN_LOAD(nvJitLinkDestroy)
  KILN_TOOLCHAIN_LOAD(nvJitLinkAddData)
  KILN_TOOLCHAIN_LOAD(nvJitLinkComplete)
  KILN_TOOLCHAIN_LOAD(nvJitLinkGetErrorLogSize)
  KILN_TOOLCHAIN_LOAD(nvJitLinkGetErrorLog)
  KILN_TOOLCHAIN_LOAD(nvJitLinkGetLinkedCubinSize)
  KILN_TOOLCHAIN_LOAD(nvJitLinkGetLinkedCubin)
  return std::shared_ptr<const NvJitLinkApi>(library, &library->api);
}

#undef KILN_TOOLCHAIN_LOAD

}  // namespace kiln::codegen
