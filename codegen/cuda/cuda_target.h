// Factory for the CUDA target (see codegen/target.h): every kernel of a graph is rendered as
// CUDA C (Dialect::kCuda) into one NVRTC program, compiled once to PTX (compute_80, always) and
// once per --gpu-arch to a cubin (default sm_80 and sm_90). Built only when CMake finds NVRTC
// (KILN_HAVE_CUDA); the runtime never links NVRTC.
#pragma once

#include <memory>

#include "codegen/target.h"

namespace kiln::codegen {
std::unique_ptr<Target> make_cuda_target();
}  // namespace kiln::codegen
