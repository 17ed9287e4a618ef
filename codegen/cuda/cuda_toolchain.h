// NVRTC and nvJitLink, the CUDA target's compilers, loaded with dlopen when they have work.
//
// Why not linked: kilnc must start (and compile for Vulkan and OpenCL) on machines without the
// CUDA toolkit; and the two libraries cost about 55 MB of resident memory and 20 ms to load,
// which compiles that do not target CUDA, or find all of its code in the compile cache, should
// not pay. Each is loaded for its phase of the CUDA target's compile and unloaded after it
// (docs/performance.md, peak memory).
//
// Where they are looked for: $KILN_NVRTC_LIBRARY / $KILN_NVJITLINK_LIBRARY when set (and nowhere
// else then); otherwise the libraries CMake found at configure time, then their file names on the
// loader's search path (LD_LIBRARY_PATH, ldconfig).
//
// Ownership and thread-safety: every function may be called from any thread. A loaded library
// stays loaded while a shared_ptr to its API lives, and is unloaded with the last one. The
// function pointers are NVRTC's and nvJitLink's own, thread-safe per program / handle as their
// documentation says.
#pragma once

#include <nvJitLink.h>
#include <nvrtc.h>

#include <memory>
#include <string>

#include "support/status.h"

namespace kiln::codegen {

struct NvrtcApi {
  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;
  decltype(&::nvrtcGetPTXSize) nvrtcGetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) nvrtcGetPTX = nullptr;
};

struct NvJitLinkApi {
  decltype(&::nvJitLinkCreate) nvJitLinkCreate = nullptr;
  decltype(&::nvJitLinkDestroy) nvJitLinkDestroy = nullptr;
  decltype(&::nvJitLinkAddData) nvJitLinkAddData = nullptr;
  decltype(&::nvJitLinkComplete) nvJitLinkComplete = nullptr;
  decltype(&::nvJitLinkGetErrorLogSize) nvJitLinkGetErrorLogSize = nullptr;
  decltype(&::nvJitLinkGetErrorLog) nvJitLinkGetErrorLog = nullptr;
  decltype(&::nvJitLinkGetLinkedCubinSize) nvJitLinkGetLinkedCubinSize = nullptr;
  decltype(&::nvJitLinkGetLinkedCubin) nvJitLinkGetLinkedCubin = nullptr;
};

// The two library files, and their identities for compile-cache keys (path, size and
// modification time: a reinstalled or upgraded toolkit changes every key, as for ccache).
struct CudaToolchainFiles {
  std::string nvrtc, nvjitlink;
  std::string nvrtc_identity, nvjitlink_identity;
};

// Finds both files without loading them, except when only the loader's search can tell (then
// it loads and unloads the library once). kUnavailable names the missing library.
Result<CudaToolchainFiles> locate_cuda_toolchain();

// Loads one library (kUnavailable when it does not load or lacks an entry point).
Result<std::shared_ptr<const NvrtcApi>> load_nvrtc(const std::string& path);
Result<std::shared_ptr<const NvJitLinkApi>> load_nvjitlink(const std::string& path);

}  // namespace kiln::codegen
