// oneDNN for the cpu driver (Debian's libdnnl.so.2, opened with dlopen so that the runtime runs
// without it): the kernels whose artifact record carries a library call (artifact.h) —
//   GemmCall (f32): out = activation(alpha * a @ w + residual + bias), batched or not, through
//                   a matmul primitive made once per (kernel, sizes) with the additions and the
//                   activation as its post-ops and constant weights packed once (dnnl_sgemm
//                   for the forms the primitive cannot take);
//   ConvCall (f32, NCHW or NHWC): out = activation(conv(x, w) + bias + residual), through a
//                   convolution primitive made once per (kernel, batch size), its weights
//                   reordered once into the layout the primitive prefers.
// What follows those patterns in the kernel (the call's in_place_epilogue) is the caller's: it
// runs the generated <entry>_epilogue function afterwards. The generated kernel stays in the
// artifact and runs wherever the library does not: KILN_ONEDNN=0 turns the library off, to
// compare and to test the generated code.
//
// Threads: oneDNN parallelizes with OpenMP, on as many threads as the device's pool has
// (set_onednn_threads, before every call). Unless the environment sets OMP_WAIT_POLICY or
// GOMP_SPINCOUNT, or libgomp was loaded before, load_onednn sets GOMP_SPINCOUNT=10000 before the
// library (and OpenMP) starts: idle OpenMP threads spin for some tens of microseconds after a
// call, then sleep. Back-to-back library calls then find them awake, and the driver's own pool
// does not run against threads that spin for long. Measured on 2 cores: never spinning
// (passive) took MobileNetV2 at batch 1 from 5.3 to 6.8 ms; 1,000,000 (nearer libgomp's
// default) took the BERT encoder at batch 8 from 458 to 529 ms. The variable is added with
// add_to_environment (support/environment.h), not setenv, which may free the environment that
// other threads are reading.
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

namespace kiln::runtime::cpu {

struct OneDnnApi;  // the entry points (onednn.cpp)

// The library, loaded once per process; kUnavailable saying why when it cannot be.
Result<const OneDnnApi*> load_onednn();

// The most threads oneDNN's calls from the calling thread run on (OpenMP's per-thread setting):
// the cpu device's thread count, so that cpu.threads bounds the library too. No effect when
// oneDNN does not run on libgomp.
void set_onednn_threads(const OneDnnApi& api, int threads);

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
