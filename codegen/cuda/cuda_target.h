// Factory for the CUDA target (see codegen/target.h): every kernel of a graph is rendered as
// CUDA C (Dialect::kCuda) into NVRTC programs of about 16 KiB of source, each compiled once to PTX
// (compute_80, always) and assembled per --gpu-arch into a cubin (default sm_80 and sm_90). Built only when CMake finds
// the CUDA toolkit (KILN_HAVE_CUDA); NVRTC and nvJitLink are loaded only while they have work
// (cuda_toolchain.h). The runtime never uses them.
#pragma once

#include <memory>
#include <string_view>

#include "codegen/target.h"

namespace kiln::codegen {
// The oldest GPU architecture the generated code runs on: every program is compiled as
// compute_<N> PTX, which nvJitLink can assemble for sm_<N> and newer only.
inline constexpr int kCudaMinimumArch = 80;
// Checks one --gpu-arch value ("sm_90"): kInvalidArgument, naming the accepted forms, for a
// malformed name or an architecture older than kCudaMinimumArch.
Status check_cuda_arch(std::string_view arch);
// kUnavailable when NVRTC or nvJitLink cannot be found.
Result<std::unique_ptr<Target>> make_cuda_target();
// Whether make_cuda_target would succeed.
bool cuda_target_present();
}  // namespace kiln::codegen
