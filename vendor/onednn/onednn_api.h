// oneDNN (Debian's libdnnl.so.2), opened with dlopen so that nothing Kiln builds needs it to run:
// the entry points Kiln uses, for the cpu driver, which runs convolutions and matrix products as
// its primitives (runtime/drivers/cpu/onednn.h), and for the cpu target, which asks it at compile
// time in which layout a convolution's primitive reads its weights (onednn_conv.h).
//
// Threads: oneDNN parallelizes with OpenMP. Unless the environment sets OMP_WAIT_POLICY or
// GOMP_SPINCOUNT, or libgomp was loaded before, load_onednn sets GOMP_SPINCOUNT=10000 before the
// library (and OpenMP) starts: idle OpenMP threads spin for some tens of microseconds after a
// call, then sleep. Back-to-back library calls then find them awake, and the cpu device's own
// pool does not run against threads that spin for long. Measured on 2 cores: never spinning
// (passive) took MobileNetV2 at batch 1 from 5.3 to 6.8 ms; 1,000,000 (nearer libgomp's
// default) took the BERT encoder at batch 8 from 458 to 529 ms. The variable is added with
// add_to_environment (support/environment.h), not setenv, which may free the environment that
// other threads are reading.
//
// Thread-safety: the API is loaded once per process and immutable afterwards.
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <string>
#include <utility>

#include "support/status.h"

namespace kiln::onednn {

// dnnl.h's functions, by pointer (the header only gives their types: the library is dlopened).
struct OneDnnApi {
  std::string library;
#define KILN_DNNL_FUNCTIONS(X)                                                                             \
  X(dnnl_sgemm) X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_stream_wait) X(dnnl_stream_destroy)     \
  X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_get_size) X(dnnl_memory_desc_equal)                   \
  X(dnnl_memory_create) X(dnnl_memory_destroy) X(dnnl_dilated_convolution_forward_desc_init)               \
  X(dnnl_matmul_desc_init) X(dnnl_primitive_attr_set_output_scales) X(dnnl_post_ops_append_binary)         \
  X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_destroy) X(dnnl_primitive_attr_set_post_ops)         \
  X(dnnl_post_ops_create) X(dnnl_post_ops_destroy) X(dnnl_post_ops_append_sum)                             \
  X(dnnl_post_ops_append_eltwise) X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_destroy)             \
  X(dnnl_primitive_desc_query_md) X(dnnl_reorder_primitive_desc_create) X(dnnl_primitive_create)           \
  X(dnnl_primitive_destroy) X(dnnl_primitive_execute)
#define KILN_DNNL_DECLARE(name) decltype(&::name) name = nullptr;
  KILN_DNNL_FUNCTIONS(KILN_DNNL_DECLARE)
#undef KILN_DNNL_DECLARE
  dnnl_engine_t engine = nullptr;  // the CPU engine, for the process
  void (*omp_set_num_threads)(int) = nullptr;  // libgomp's, which oneDNN runs on (null: another runtime)
};

// The library, loaded once per process; kUnavailable saying why when it cannot be (KILN_ONEDNN=0
// in the environment turns it off, to compare with and test the generated kernels).
Result<const OneDnnApi*> load_onednn();

// The most threads oneDNN's calls from the calling thread run on (OpenMP's per-thread setting).
// No effect when oneDNN does not run on libgomp.
void set_onednn_threads(const OneDnnApi& api, int threads);

// Ok, or an internal error naming `what` and the status.
Status dnnl_check(dnnl_status_t status, const char* what);

// Destroys a oneDNN handle when it goes out of scope. Move-only.
template <class Handle>
class Owned {
 public:
  using Destroy = dnnl_status_t (*)(Handle);
  explicit Owned(Destroy destroy) : destroy_(destroy) {}
  Owned(Owned&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)), destroy_(other.destroy_) {}
  Owned& operator=(Owned&& other) noexcept {
    std::swap(handle_, other.handle_);
    std::swap(destroy_, other.destroy_);
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (handle_) destroy_(handle_);
  }
  Handle get() const { return handle_; }
  Handle* out() { return &handle_; }  // for the dnnl_*_create call that fills it

 private:
  Handle handle_ = nullptr;
  Destroy destroy_;
};

}  // namespace kiln::onednn
