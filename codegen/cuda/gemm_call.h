// Recognizes a matmul kernel that a vendor GEMM library can run whole (artifact::GemmCall):
// matmul, optionally + a bias broadcast over rows, optionally followed by relu or tanh-gelu, with
// one float dtype throughout. The CUDA target records the match beside the generated kernel; the
// CUDA driver runs it through cuBLASLt when that library loads, else the generated kernel.
//
// Thread-safety: a pure function.
#pragma once

#include <optional>

#include "artifact/artifact.h"
#include "codegen/kernel_model.h"

namespace kiln::codegen {

// The GemmCall for `model`, or nullopt when the kernel is anything more or other than the
// pattern above (its args indices refer to model.args).
std::optional<artifact::GemmCall> match_gemm_call(const KernelModel& model, bool allow_tf32);

}  // namespace kiln::codegen
