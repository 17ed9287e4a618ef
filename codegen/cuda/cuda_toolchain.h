// NVRTC and nvJitLink, the CUDA target's compilers, loaded with dlopen on first use.
//
// Why not linked: kilnc must start (and compile for Vulkan and OpenCL) on machines without the
// CUDA toolkit, and the two libraries cost about 55 MB of resident memory and 20 ms to load,
// which a compile that does not target CUDA should not pay (docs/performance.md, peak memory).
//
// Where they are looked for: $KILN_NVRTC_LIBRARY / $KILN_NVJITLINK_LIBRARY when set (and nowhere
// else then); otherwise the libraries CMake found at configure time, then their file names on the
// loader's search path (LD_LIBRARY_PATH, ldconfig).
//
// Thread-safety: cuda_toolchain() loads once per process (later and concurrent calls get the same
// result); the libraries stay loaded until exit. The function pointers are NVRTC's and
// nvJitLink's own, thread-safe per program / handle as their documentation says.
#pragma once

#include <nvJitLink.h>
#include <nvrtc.h>

#include <string>

#include "support/status.h"

namespace kiln::codegen {

struct CudaToolchain {
  std::string nvrtc_path, nvjitlink_path;  // what was loaded, as given to dlopen

  decltype(&::nvrtcVersion) nvrtcVersion = nullptr;
  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;
  decltype(&::nvrtcGetPTXSize) nvrtcGetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) nvrtcGetPTX = nullptr;

  decltype(&::nvJitLinkVersion) nvJitLinkVersion = nullptr;
  decltype(&::nvJitLinkCreate) nvJitLinkCreate = nullptr;
  decltype(&::nvJitLinkDestroy) nvJitLinkDestroy = nullptr;
  decltype(&::nvJitLinkAddData) nvJitLinkAddData = nullptr;
  decltype(&::nvJitLinkComplete) nvJitLinkComplete = nullptr;
  decltype(&::nvJitLinkGetErrorLogSize) nvJitLinkGetErrorLogSize = nullptr;
  decltype(&::nvJitLinkGetErrorLog) nvJitLinkGetErrorLog = nullptr;
  decltype(&::nvJitLinkGetLinkedCubinSize) nvJitLinkGetLinkedCubinSize = nullptr;
  decltype(&::nvJitLinkGetLinkedCubin) nvJitLinkGetLinkedCubin = nullptr;
};

// Whether both libraries can be found, for target lists: a file check when an override or the
// configured library exists; otherwise a load and unload by file name (the loader's search).
bool cuda_toolchain_present();

// The loaded toolchain, or kUnavailable saying which library is missing or incomplete.
Result<const CudaToolchain*> cuda_toolchain();

}  // namespace kiln::codegen
