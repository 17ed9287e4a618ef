// Recognizes a matmul kernel that a vendor GEMM library can run (artifact::GemmCall): matmul,
// optionally scaled by a one-element constant, plus a bias broadcast over rows and a residual
// shaped as the output (either order), then optionally relu or tanh-gelu, with one float dtype
// throughout. The CUDA target records the match beside the generated kernel; the CUDA driver
// runs it through cuBLASLt when that library loads, else the generated kernel.
//
// When the kernel's epilogue goes on past that (exact gelu, a sigmoid, ...), the library still
// runs what it can and an epilogue kernel finishes the rest in place: gemm_epilogue_kernel()
// models that kernel, which the CUDA target renders beside the main one as the function
// <entry_point><artifact::kGemmEpilogueSuffix>. It applies when the rest reads, besides the
// library's result, only values in memory, and writes one output of the product's dtype and
// shape (the library's result goes there first).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "artifact/artifact.h"
#include "codegen/kernel_model.h"

namespace kiln::codegen {

// The epilogue kernel of a partly matched matmul kernel. `model` points at `kernel` (the rest of
// the epilogue as an elementwise kernel), so the struct stays where it was made (unique_ptr).
// args[i] is the main kernel's arg index that the epilogue kernel's parameter i takes; its first
// parameter is the library's result, read from the main kernel's output.
struct GemmEpilogueKernel {
  ir::Kernel kernel;
  KernelModel model;
  std::vector<uint32_t> args;
};

// The GemmCall for `model`, or nullopt when the kernel does not start with the pattern above or
// its rest cannot run as an epilogue kernel (its args indices refer to model.args).
std::optional<artifact::GemmCall> match_gemm_call(const KernelModel& model, bool allow_tf32);

// The epilogue kernel for `model`, or nullptr when the library covers it whole or the kernel is
// no GEMM call at all.
std::unique_ptr<GemmEpilogueKernel> gemm_epilogue_kernel(const KernelModel& model);

}  // namespace kiln::codegen
