// The C-family emitter: renders a KernelModel as source text in one of several closely related
// dialects: OpenCL C, GLSL 450 compute and CUDA C. They differ in the kernel prefix,
// address-space qualifiers, thread-index builtins, barriers, shared-memory declarations, casts
// and a few intrinsics, all of which the emitter asks the Dialect for (c_family_internal.h);
// CUDA also has its own templates tuned for NVIDIA GPUs (cuda/c_family_cuda.cpp).
//
// Numerics follow the reference interpreter (ir/interp_internal.h): floats compute in f32
// (f16/bf16 are storage formats), integers wrap two's-complement at every node's dtype, float ->
// int stores truncate with saturation (NaN -> 0), bool is 0/1.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_model.h"
#include "support/status.h"

namespace kiln::codegen {

// kCpu: C++ for the host (the cpu target, codegen/cpu/): each kernel is one function over a range
// of its work units, `extern "C" void entry(void* const* buffers, const long long* symbols,
// long long begin, long long end)` (the cpu driver's calling convention, artifact.h), and its
// templates run one work unit per loop iteration instead of one per thread.
enum class Dialect : uint8_t { kOpenCL, kGlsl, kCuda, kCpu };

struct RenderedKernel {
  std::string source;
  // Device features the source needs (GLSL: "shader_int64", "storage_buffer_16bit",
  // "storage_buffer_8bit"; OpenCL C: none so far, f16 goes through vload_half/vstore_half).
  std::vector<std::string> required_features;
};

// kCuda renders the kernel function alone (`extern "C" __global__ ...`): every kernel of a graph
// goes into one NVRTC program, which starts once with cuda_program_prelude(). The CUDA templates
// (cuda/c_family_cuda.cpp) have their own block sizes; the kernel is rendered for cuda_dispatch(model),
// whatever model.dispatch holds, and that dispatch must be the one recorded for it.
Result<RenderedKernel> render_c_family(const KernelModel& model, Dialect dialect);

// CUDA: the helper definitions (macros, conversions, wrap-safe integer ops) every program starts
// with; it needs NVRTC's -default-device (its helpers carry no __device__).
std::string cuda_program_prelude();
// CUDA: the dispatch the kCuda templates are written for (threads per block, work units per
// block per pass of the grid-stride loop).
artifact::KernelDispatch cuda_dispatch(const KernelModel& model);

// GLSL only: the same kernel with every 1- and 2-byte buffer (f16, bf16, i8, u8, bool) declared
// as 32-bit words (`uint d[]`), read by bit extraction and written with word atomics
// (codegen/c_family_glsl_words.cpp). It needs no 8/16-bit storage or arithmetic feature, so its
// required_features hold at most "shader_int64": the Vulkan target's fallback variant.
Result<RenderedKernel> render_glsl_word_storage(const KernelModel& model);

}  // namespace kiln::codegen
