#include "codegen/cuda/cuda_toolchain.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace kiln::codegen {
namespace {

// The libraries CMake found (codegen/CMakeLists.txt), symlinks resolved.
constexpr const char* kConfiguredNvrtc = KILN_NVRTC_LIBRARY_PATH;
constexpr const char* kConfiguredNvJitLink = KILN_NVJITLINK_LIBRARY_PATH;

std::string file_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Where to look for one library: only the override when it is set (the user named that library),
// else the configured path, then its file name.
std::vector<std::string> candidates(const char* override_variable, const std::string& configured) {
  std::vector<std::string> out;
  if (const char* path = std::getenv(override_variable); path && *path) return {path};
  out.push_back(configured);
  out.push_back(file_name(configured));
  return out;
}

bool findable(const char* override_variable, const std::string& configured) {
  for (const std::string& path : candidates(override_variable, configured)) {
    if (path.find('/') != std::string::npos) {
      if (access(path.c_str(), R_OK) == 0) return true;
      continue;
    }
    if (void* library = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(library);
      return true;
    }
  }
  return false;
}

// dlopens the first candidate that loads; sets `loaded_path`. Null with `why` when none does.
void* open_first(const char* override_variable, const std::string& configured, std::string& loaded_path,
                 std::string& why) {
  for (const std::string& path : candidates(override_variable, configured)) {
    // RTLD_LOCAL: the toolkit's symbols stay out of the process's global namespace.
    if (void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      loaded_path = path;
      return library;
    }
    const char* error = dlerror();
    if (why.empty()) why = error ? error : "dlopen failed";
  }
  return nullptr;
}

struct Loaded {
  CudaToolchain toolchain;
  Status status;
};

Loaded load() {
  Loaded out;
  CudaToolchain& t = out.toolchain;
  std::string why;
  void* nvrtc = open_first("KILN_NVRTC_LIBRARY", kConfiguredNvrtc, t.nvrtc_path, why);
  if (!nvrtc) {
    out.status = Status(ErrorCode::kUnavailable, "the cuda target needs NVRTC from the CUDA toolkit, and " +
                                                     file_name(kConfiguredNvrtc) + " cannot be loaded (" + why +
                                                     "; set KILN_NVRTC_LIBRARY to its path)");
    return out;
  }
  why.clear();
  void* nvjitlink = open_first("KILN_NVJITLINK_LIBRARY", kConfiguredNvJitLink, t.nvjitlink_path, why);
  if (!nvjitlink) {
    out.status = Status(ErrorCode::kUnavailable, "the cuda target needs nvJitLink from the CUDA toolkit, and " +
                                                     file_name(kConfiguredNvJitLink) + " cannot be loaded (" + why +
                                                     "; set KILN_NVJITLINK_LIBRARY to its path)");
    return out;
  }
#define KILN_TOOLCHAIN_LOAD(library, path, name)                                                         \
  t.name = reinterpret_cast<decltype(t.name)>(dlsym(library, #name));                                  \
  if (!t.name) {                                                                                        \
    out.status = Status(ErrorCode::kUnavailable, path + " lacks " #name " (a CUDA toolkit older than " \
                                                        "the one kilnc was built with?)");               \
    return out;                                                                                         \
  }
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcVersion)
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcGetErrorString)
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcCreateProgram)
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcDestroyProgram)
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcCompileProgram)
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcGetProgramLogSize)
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcGetProgramLog)
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcGetPTXSize)
  KILN_TOOLCHAIN_LOAD(nvrtc, t.nvrtc_path, nvrtcGetPTX)
  // nvJitLink.h maps these names to versioned symbols with inline wrappers; the library also
  // exports them under their plain names, which are what dlsym finds here.
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkVersion)
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkCreate)
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkDestroy)
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkAddData)
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkComplete)
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkGetErrorLogSize)
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkGetErrorLog)
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkGetLinkedCubinSize)
  KILN_TOOLCHAIN_LOAD(nvjitlink, t.nvjitlink_path, nvJitLinkGetLinkedCubin)
#undef KILN_TOOLCHAIN_LOAD
  return out;
}

}  // namespace

bool cuda_toolchain_present() {
  return findable("KILN_NVRTC_LIBRARY", kConfiguredNvrtc) && findable("KILN_NVJITLINK_LIBRARY", kConfiguredNvJitLink);
}

Result<const CudaToolchain*> cuda_toolchain() {
  static const Loaded loaded = load();  // C++ guarantees one thread-safe initialization
  if (!loaded.status.is_ok()) return loaded.status;
  return &loaded.toolchain;
}

}  // namespace kiln::codegen
