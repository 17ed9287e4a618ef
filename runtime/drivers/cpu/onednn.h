// oneDNN for the cpu driver (Debian's libdnnl.so.2, opened with dlopen so that the runtime runs
// without it): the kernels whose artifact record carries a library call (artifact.h) —
//   GemmCall (f32): out = activation(alpha * a @ w + residual + bias), batched or not, through
//                   a matmul primitive made once per (kernel, sizes) with the additions and the
//                   activation as its post-ops and constant weights packed once (dnnl_sgemm
//                   for the forms the primitive cannot take);
//   ConvCall (f32, NCHW or NHWC): out = activation(conv(x, w) + bias + residual), through a
//                   convolution primitive made once per (kernel, batch size) (described as
//                   the cpu target described it: vendor/onednn/onednn_conv.h). Its weights
//                   are the artifact's packed weights, in place, when they are in the layout
//                   the primitive asks for; else w reordered once into that layout.
// What follows those patterns in the kernel (the call's in_place_epilogue) is the caller's: it
// runs the generated <entry>_epilogue function afterwards. The generated kernel stays in the
// artifact and runs wherever the library does not: KILN_ONEDNN=0 turns the library off, to
// compare and to test the generated code.
//
// Threads: oneDNN parallelizes with OpenMP, on as many threads as the device's pool has
// (set_onednn_threads, before every call); vendor/onednn/onednn_api.h says how OpenMP's idle
// threads are set to wait.
// Thread-safety: the API is immutable once loaded; run_onednn_gemm and OneDnnConvolution::run
// may run concurrently on different outputs.
#pragma once

#include <cstdint>
#include <compare>
#include <memory>
#include <span>

#include "artifact/artifact.h"
#include "ir/plan.h"
#include "support/status.h"
#include "vendor/onednn/onednn_api.h"

namespace kiln::runtime::cpu {

using onednn::load_onednn;
using onednn::OneDnnApi;
using onednn::set_onednn_threads;

// Whether run_onednn_gemm / OneDnnConvolution run `call` (f32 only).
bool onednn_runs(const artifact::GemmCall& call);
bool onednn_runs(const artifact::ConvCall& call);

// One GemmCall at one set of sizes: a matmul primitive with the bias, the residual and the
// activation fused into it, and b reordered once into the primitive's packed layout when it is a
// constant shared by the batch.
class OneDnnMatmul {
 public:
  // What a primitive is made for: the sizes, and whether the residual is the output's own memory
  // (then summed in place, else added from its buffer).
  struct Key {
    int64_t batch = 1, m = 0, n = 0, k = 0;
    bool residual_in_place = false;
    auto operator<=>(const Key&) const = default;
  };
  // The call's sizes at `bindings`, and whether its residual is the output's memory in `args`.
  static Result<Key> key(const artifact::GemmCall& call, std::span<void* const> args, const ir::SymbolBindings& bindings);
  // Whether a primitive runs `call` at `key` (else run_onednn_gemm does).
  static bool applies(const artifact::GemmCall& call, const Key& key);
  // `constant_b`: b's data when it is a constant (read once here), else null (read at each run).
  static Result<std::unique_ptr<OneDnnMatmul>> create(const OneDnnApi& api, const artifact::GemmCall& call,
                                                      const Key& key, const void* constant_b);
  ~OneDnnMatmul();
  OneDnnMatmul(const OneDnnMatmul&) = delete;
  OneDnnMatmul& operator=(const OneDnnMatmul&) = delete;

  // `args[i]` is the host address of KernelBinary::args[i] (null for symbol args); the sizes are
  // the key's.
  Status run(std::span<void* const> args) const;

 private:
  struct State;
  explicit OneDnnMatmul(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Runs `call` at `sizes` (OneDnnMatmul::key's) through dnnl_sgemm, with the additions and the
// activation as separate passes: for the calls OneDnnMatmul does not apply to. `args[i]` is the
// host address of KernelBinary::args[i] (null for symbol args).
Status run_onednn_gemm(const OneDnnApi& api, const artifact::GemmCall& call, std::span<void* const> args,
                       const OneDnnMatmul::Key& sizes);

// One ConvCall at one batch size: the primitive and its reordered weights (owned).
class OneDnnConvolution {
 public:
  // `weights` are the call's w (the executable's constant), read once here unless the call's
  // packed weights are in the primitive's layout (then they are used in place, and neither is
  // copied). The artifact owning both outlives the instance.
  static Result<std::unique_ptr<OneDnnConvolution>> create(const OneDnnApi& api, const artifact::ConvCall& call,
                                                           int64_t batch, const void* weights);
  // Whether the primitive reads the artifact's packed weights in place (no reorder at load).
  bool uses_packed_weights() const;
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
