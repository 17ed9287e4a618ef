// Recognizes a matmul kernel that a vendor GEMM library can run (artifact::GemmCall): matmul,
// optionally scaled by a one-element constant, plus a bias broadcast over rows and a residual
// shaped as the output (either order), then optionally relu or tanh-gelu, with one float dtype
// throughout. The CUDA target records the match beside the generated kernel; the CUDA driver
// runs it through cuBLASLt when that library loads, else the generated kernel.
//
// When the kernel's epilogue goes on past that (exact gelu, a sigmoid, ...), the library still
// runs what it can and an in-place epilogue kernel finishes the rest (library_epilogue.h).
//
// Thread-safety: pure functions.
#pragma once

#include <memory>
#include <optional>

#include "artifact/artifact.h"
#include "codegen/library_epilogue.h"
#include "codegen/kernel_model.h"

namespace kiln::codegen {

// The GemmCall for `model`, or nullopt when the kernel does not start with the pattern above or
// its rest cannot run as an epilogue kernel (its args indices refer to model.args).
std::optional<artifact::GemmCall> match_gemm_call(const KernelModel& model, bool allow_tf32);

// The in-place epilogue kernel for `model`, or nullptr when the library covers it whole or the
// kernel is no GEMM call at all.
std::unique_ptr<LibraryEpilogueKernel> gemm_epilogue_kernel(const KernelModel& model);

}  // namespace kiln::codegen
