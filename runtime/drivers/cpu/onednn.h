// oneDNN for the cpu driver (Debian's libdnnl.so.2, opened with dlopen so that the runtime runs
// without it): the kernels whose artifact record carries a library call (artifact.h) —
//   GemmCall (f32): out = activation(alpha * a @ w + residual + bias), batched or not, through
//                   dnnl_sgemm;
//   ConvCall (f32, NCHW or NHWC): out = activation(conv(x, w) + bias + residual), through a
//                   convolution primitive made once per (kernel, batch size), its weights
//                   reordered once into the layout the primitive prefers.
// What follows those patterns in the kernel (the call's in_place_epilogue) is the caller's: it
// runs the generated <entry>_epilogue function afterwards. The generated kernel stays in the
// artifact and runs wherever the library does not: KILN_ONEDNN=0 turns the library off, to
// compare and to test the generated code.
//
// Threads: oneDNN parallelizes with OpenMP over every core (OMP_NUM_THREADS limits it). Unless
// the environment says otherwise, load_onednn sets OMP_WAIT_POLICY=passive before the library
// (and OpenMP) starts, so that idle OpenMP threads sleep instead of spinning against the
// driver's own pool between library calls.
//
// Thread-safety: the API is immutable once loaded; run_onednn_gemm and OneDnnConvolution::run
// may run concurrently on different outputs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "artifact/artifact.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::runtime::cpu {

struct OneDnnApi;  // the entry points (onednn.cpp)

// The library, loaded once per process; kUnavailable saying why when it cannot be.
Result<const OneDnnApi*> load_onednn();

// Whether run_onednn_gemm / OneDnnConvolution run `call` (f32 only).
bool onednn_runs(const artifact::GemmCall& call);
bool onednn_runs(const artifact::ConvCall& call);

// Runs `call`; `args[i]` is the host address of KernelBinary::args[i] (null for symbol args).
Status run_onednn_gemm(const OneDnnApi& api, const artifact::GemmCall& call, std::span<void* const> args,
                       const ir::SymbolBindings& bindings);

// One ConvCall at one batch size: the primitive and its reordered weights (owned).
class OneDnnConvolution {
 public:
  // `weights` are the call's w (the executable's constant), read once here.
  static Result<std::unique_ptr<OneDnnConvolution>> create(const OneDnnApi& api, const artifact::ConvCall& call,
                                                           int64_t batch, const void* weights);
  ~OneDnnConvolution();
  OneDnnConvolution(const OneDnnConvolution&) = delete;
  OneDnnConvolution& operator=(const OneDnnConvolution&) = delete;

  // `args` as for run_onednn_gemm.
  Status run(std::span<void* const> args) const;

 private:
  struct State;
  explicit OneDnnConvolution(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::runtime::cpu
