#include "runtime/drivers/cpu/onednn.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/drivers/vendor_library.h"
#include "support/environment.h"

namespace kiln::runtime::cpu {

// dnnl.h's functions, by pointer (the header only gives their types: the library is dlopened).
struct OneDnnApi {
  std::string library;
#define KILN_DNNL_FN(name) decltype(&::name) name = nullptr;
  KILN_DNNL_FN(dnnl_sgemm)
  KILN_DNNL_FN(dnnl_engine_create)
  KILN_DNNL_FN(dnnl_stream_create)
  KILN_DNNL_FN(dnnl_stream_wait)
  KILN_DNNL_FN(dnnl_stream_destroy)
  KILN_DNNL_FN(dnnl_memory_desc_init_by_tag)
  KILN_DNNL_FN(dnnl_memory_desc_get_size)
  KILN_DNNL_FN(dnnl_memory_create)
  KILN_DNNL_FN(dnnl_memory_destroy)
  KILN_DNNL_FN(dnnl_dilated_convolution_forward_desc_init)
  KILN_DNNL_FN(dnnl_matmul_desc_init)
  KILN_DNNL_FN(dnnl_primitive_attr_set_output_scales)
  KILN_DNNL_FN(dnnl_post_ops_append_binary)
  KILN_DNNL_FN(dnnl_primitive_attr_create)
  KILN_DNNL_FN(dnnl_primitive_attr_destroy)
  KILN_DNNL_FN(dnnl_primitive_attr_set_post_ops)
  KILN_DNNL_FN(dnnl_post_ops_create)
  KILN_DNNL_FN(dnnl_post_ops_destroy)
  KILN_DNNL_FN(dnnl_post_ops_append_sum)
  KILN_DNNL_FN(dnnl_post_ops_append_eltwise)
  KILN_DNNL_FN(dnnl_primitive_desc_create)
  KILN_DNNL_FN(dnnl_primitive_desc_destroy)
  KILN_DNNL_FN(dnnl_primitive_desc_query_md)
  KILN_DNNL_FN(dnnl_reorder_primitive_desc_create)
  KILN_DNNL_FN(dnnl_primitive_create)
  KILN_DNNL_FN(dnnl_primitive_destroy)
  KILN_DNNL_FN(dnnl_primitive_execute)
#undef KILN_DNNL_FN
  dnnl_engine_t engine = nullptr;  // the CPU engine, for the process
  void (*omp_set_num_threads)(int) = nullptr;  // libgomp's, which oneDNN runs on (null: another runtime)
};

Result<const OneDnnApi*> load_onednn() {
  static std::once_flag once;
  static OneDnnApi api;
  static Status status = Status::ok();
  std::call_once(once, [] {
    // Before OpenMP starts (see the header): a short spin unless the user chose a policy. Once
    // libgomp is loaded it has read its settings, and changing the environment would do nothing.
    // Not with setenv, which may free the environment other threads are reading.
    void* started_gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (started_gomp) dlclose(started_gomp);
    else if (!std::getenv("OMP_WAIT_POLICY")) add_to_environment("GOMP_SPINCOUNT=10000");
    status = load_vendor_api({"libdnnl.so.3", "libdnnl.so.2"}, "oneDNN", "KILN_ONEDNN", api, [](auto load) {
#define KILN_DNNL_LOAD(name) load(#name, api.name);
      KILN_DNNL_LOAD(dnnl_sgemm)
      KILN_DNNL_LOAD(dnnl_engine_create)
      KILN_DNNL_LOAD(dnnl_stream_create)
      KILN_DNNL_LOAD(dnnl_stream_wait)
      KILN_DNNL_LOAD(dnnl_stream_destroy)
      KILN_DNNL_LOAD(dnnl_memory_desc_init_by_tag)
      KILN_DNNL_LOAD(dnnl_memory_desc_get_size)
      KILN_DNNL_LOAD(dnnl_memory_create)
      KILN_DNNL_LOAD(dnnl_memory_destroy)
      KILN_DNNL_LOAD(dnnl_dilated_convolution_forward_desc_init)
      KILN_DNNL_LOAD(dnnl_matmul_desc_init)
      KILN_DNNL_LOAD(dnnl_primitive_attr_set_output_scales)
      KILN_DNNL_LOAD(dnnl_post_ops_append_binary)
      KILN_DNNL_LOAD(dnnl_primitive_attr_create)
      KILN_DNNL_LOAD(dnnl_primitive_attr_destroy)
      KILN_DNNL_LOAD(dnnl_primitive_attr_set_post_ops)
      KILN_DNNL_LOAD(dnnl_post_ops_create)
      KILN_DNNL_LOAD(dnnl_post_ops_destroy)
      KILN_DNNL_LOAD(dnnl_post_ops_append_sum)
      KILN_DNNL_LOAD(dnnl_post_ops_append_eltwise)
      KILN_DNNL_LOAD(dnnl_primitive_desc_create)
      KILN_DNNL_LOAD(dnnl_primitive_desc_destroy)
      KILN_DNNL_LOAD(dnnl_primitive_desc_query_md)
      KILN_DNNL_LOAD(dnnl_reorder_primitive_desc_create)
      KILN_DNNL_LOAD(dnnl_primitive_create)
      KILN_DNNL_LOAD(dnnl_primitive_destroy)
      KILN_DNNL_LOAD(dnnl_primitive_execute)
#undef KILN_DNNL_LOAD
    });
    if (status.is_ok() && api.dnnl_engine_create(&api.engine, dnnl_cpu, 0) != dnnl_success)
      status = Status(ErrorCode::kUnavailable, "oneDNN: cannot create its CPU engine");
    // Debian's oneDNN runs on libgomp, loaded with it (the handle stays open with the library).
    if (void* gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD))
      api.omp_set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_set_num_threads"));
  });
  if (!status.is_ok()) return status;
  return &api;
}

void set_onednn_threads(const OneDnnApi& api, int threads) {
  if (api.omp_set_num_threads && threads > 0) api.omp_set_num_threads(threads);
}

bool onednn_runs(const artifact::GemmCall& call) { return call.dtype == ir::DType::kF32; }
bool onednn_runs(const artifact::ConvCall& call) { return call.dtype == ir::DType::kF32; }

namespace {

Status dnnl_check(dnnl_status_t s, const char* what) {
  if (s == dnnl_success) return Status::ok();
  return internal_error(std::string("oneDNN: ") + what + " failed (dnnl_status_t " + std::to_string(int(s)) + ")");
}

float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}

// Frees a oneDNN handle when it goes out of scope.
template <class Handle, class Destroy>
struct Owned {
  Handle handle = nullptr;
  Destroy destroy = nullptr;
  ~Owned() {
    if (handle) destroy(handle);
  }
};

using Memory = Owned<dnnl_memory_t, dnnl_status_t (*)(dnnl_memory_t)>;

struct FreeHost {
  void operator()(float* p) const { std::free(p); }
};
// Host memory, 64-byte aligned, that a primitive reads its constant weights from.
using WeightBuffer = std::unique_ptr<float[], FreeHost>;

// One argument of a primitive's execution: its DNNL_ARG_* index, layout and host address.
struct ExecArg {
  int arg;
  const dnnl_memory_desc_t* md;
  void* data;
};

// Runs `primitive` once over `args` on a stream of its own, and waits for it.
Status execute(const OneDnnApi& api, dnnl_primitive_t primitive, std::span<const ExecArg> args, const char* what) {
  std::vector<Memory> memories;
  memories.reserve(args.size());
  std::vector<dnnl_exec_arg_t> exec;
  for (const ExecArg& a : args) {
    memories.push_back(Memory{nullptr, api.dnnl_memory_destroy});
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_create(&memories.back().handle, a.md, api.engine, a.data), what));
    exec.push_back({a.arg, memories.back().handle});
  }
  Owned<dnnl_stream_t, decltype(api.dnnl_stream_destroy)> stream{nullptr, api.dnnl_stream_destroy};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_stream_create(&stream.handle, api.engine, dnnl_stream_default_flags), "stream"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_execute(primitive, stream.handle, int(exec.size()), exec.data()), what));
  return dnnl_check(api.dnnl_stream_wait(stream.handle), what);
}

// `data` (laid out as `from`) reordered into a new buffer laid out as `to`. The buffer is not
// zeroed first, as std::vector did: the reorder writes every byte, and zeroing faulted in and
// wrote ResNet-50's 100 MB of weights once more, 25-30 ms of its first run on the cpu device.
// (Transparent huge pages, to cut the 4 KiB page faults, were tried and not kept: where the
// kernel compacts memory on such a fault, the reorders took 150-190 ms instead of 45.)
Result<WeightBuffer> reorder_once(const OneDnnApi& api, const dnnl_memory_desc_t& from_md,
                                  const dnnl_memory_desc_t& to_md, const void* data) {
  const size_t bytes = api.dnnl_memory_desc_get_size(&to_md);
  WeightBuffer out(static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  if (!out)
    return Status(ErrorCode::kOutOfMemory,
                  "oneDNN: no host memory for " + std::to_string(bytes) + " bytes of reordered weights");
  Owned<dnnl_primitive_desc_t, decltype(api.dnnl_primitive_desc_destroy)> pd{nullptr, api.dnnl_primitive_desc_destroy};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_reorder_primitive_desc_create(&pd.handle, &from_md, api.engine, &to_md,
                                                                         api.engine, nullptr),
                                  "weights reorder descriptor"));
  Owned<dnnl_primitive_t, decltype(api.dnnl_primitive_destroy)> reorder{nullptr, api.dnnl_primitive_destroy};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_create(&reorder.handle, pd.handle), "weights reorder"));
  const ExecArg args[] = {{DNNL_ARG_FROM, &from_md, const_cast<void*>(data)}, {DNNL_ARG_TO, &to_md, out.get()}};
  KILN_RETURN_IF_ERROR(execute(api, reorder.handle, args, "weights reorder"));
  return out;
}

}  // namespace

Status run_onednn_gemm(const OneDnnApi& api, const artifact::GemmCall& call, std::span<void* const> args,
                       const OneDnnMatmul::Key& sizes) {
  const int64_t batch = sizes.batch, m = sizes.m, n = sizes.n, k = sizes.k;
  const auto* a = static_cast<const float*>(args[call.a_arg]);
  const auto* w = static_cast<const float*>(args[call.b_arg]);
  auto* out = static_cast<float*>(args[call.out_arg]);
  const auto* bias = call.bias_arg >= 0 ? static_cast<const float*>(args[size_t(call.bias_arg)]) : nullptr;
  const auto* residual = call.residual_arg >= 0 ? static_cast<const float*>(args[size_t(call.residual_arg)]) : nullptr;
  if (batch == 0 || m == 0 || n == 0) return Status::ok();
  for (int64_t b = 0; b < batch; ++b) {
    float* c = out + b * m * n;
    // The additions go into C first, and sgemm adds the product to them (beta = 1).
    float beta = 0.0f;
    if (residual) {
      std::memcpy(c, residual + b * m * n, size_t(m * n) * sizeof(float));
      beta = 1.0f;
    }
    if (bias) {
      for (int64_t i = 0; i < m; ++i) {
        float* row = c + i * n;
        if (beta == 0.0f) std::memcpy(row, bias, size_t(n) * sizeof(float));
        else for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
      }
      beta = 1.0f;
    }
    if (k == 0) {
      if (beta == 0.0f) std::fill(c, c + m * n, 0.0f);
      continue;
    }
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_sgemm('N', 'N', m, n, k, call.alpha, a + (call.a_batched ? b * m * k : 0), k,
                                                   w + (call.b_batched ? b * k * n : 0), n, beta, c, n),
                                    "sgemm"));
  }
  const int64_t total = batch * m * n;
  switch (call.epilogue) {
    case artifact::GemmCall::Epilogue::kNone: break;
    case artifact::GemmCall::Epilogue::kRelu:
      for (int64_t i = 0; i < total; ++i) out[i] = std::isnan(out[i]) ? out[i] : std::max(out[i], 0.0f);
      break;
    case artifact::GemmCall::Epilogue::kGeluTanh:
      for (int64_t i = 0; i < total; ++i) out[i] = gelu_tanh(out[i]);
      break;
  }
  return Status::ok();
}

// ---- Matrix product --------------------------------------------------------------------------

bool OneDnnMatmul::applies(const artifact::GemmCall& call, const Key& key) {
  // oneDNN's bias is added after its output scale, the call's after alpha; a product that
  // neither operand's batch varies cannot be broadcast to the batch by the primitive; empty
  // products are sgemm's (which fills a k = 0 product with its additions); and so are small
  // ones, which sgemm runs on the calling thread while the primitive wakes every OpenMP thread
  // (measured with those threads asleep between calls: the transformer example's products took
  // 10x longer through primitives).
  constexpr double kMinFlops = 1 << 22;
  const double flops = 2.0 * double(key.batch) * double(key.m) * double(key.n) * double(key.k);
  return (call.alpha == 1.0f || call.bias_arg < 0) && (call.a_batched || call.b_batched || key.batch == 1) &&
         flops >= kMinFlops;
}

struct OneDnnMatmul::State {
  const OneDnnApi* api = nullptr;
  artifact::GemmCall call;
  Key key;
  dnnl_memory_desc_t a{}, b{}, bias{}, out{};  // b: the primitive's layout when packed
  dnnl_primitive_t primitive = nullptr;
  WeightBuffer packed_b;  // b reordered once, when it is a constant (else null)
  ~State() {
    if (primitive) api->dnnl_primitive_destroy(primitive);
  }
};

OneDnnMatmul::OneDnnMatmul(std::unique_ptr<State> state) : state_(std::move(state)) {}
OneDnnMatmul::~OneDnnMatmul() = default;

Result<OneDnnMatmul::Key> OneDnnMatmul::key(const artifact::GemmCall& call, std::span<void* const> args,
                                             const ir::SymbolBindings& bindings) {
  Key k;
  KILN_ASSIGN_OR_RETURN(k.batch, call.batch.evaluate(bindings));
  KILN_ASSIGN_OR_RETURN(k.m, call.m.evaluate(bindings));
  KILN_ASSIGN_OR_RETURN(k.n, call.n.evaluate(bindings));
  KILN_ASSIGN_OR_RETURN(k.k, call.k.evaluate(bindings));
  k.residual_in_place = call.residual_arg >= 0 && args[size_t(call.residual_arg)] == args[call.out_arg];
  return k;
}

Result<std::unique_ptr<OneDnnMatmul>> OneDnnMatmul::create(const OneDnnApi& api, const artifact::GemmCall& call,
                                                           const Key& key, const void* constant_b) {
  auto s = std::make_unique<State>();
  s->api = &api;
  s->call = call;
  s->key = key;
  // A b shared by the batch makes the batch part of the rows: one [batch * m, k] x [k, n]
  // product, whose b the primitive may keep packed. Otherwise a batched product, in which a
  // batch of one is broadcast.
  const bool flat = !call.b_batched;
  dnnl_memory_desc_t plain_b{};
  if (flat) {
    const dnnl_dims_t a_dims = {key.batch * key.m, key.k}, b_dims = {key.k, key.n}, out_dims = {key.batch * key.m, key.n};
    const dnnl_dims_t bias_dims = {1, key.n};
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->a, 2, a_dims, dnnl_f32, dnnl_ab), "a layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&plain_b, 2, b_dims, dnnl_f32, dnnl_ab), "b layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->b, 2, b_dims, dnnl_f32,
                                                                     constant_b ? dnnl_format_tag_any : dnnl_ab), "b layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->out, 2, out_dims, dnnl_f32, dnnl_ab), "output layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->bias, 2, bias_dims, dnnl_f32, dnnl_ab), "bias layout"));
  } else {
    const dnnl_dims_t a_dims = {call.a_batched ? key.batch : 1, key.m, key.k}, b_dims = {key.batch, key.k, key.n};
    const dnnl_dims_t out_dims = {key.batch, key.m, key.n}, bias_dims = {1, 1, key.n};
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->a, 3, a_dims, dnnl_f32, dnnl_abc), "a layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->b, 3, b_dims, dnnl_f32, dnnl_abc), "b layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->out, 3, out_dims, dnnl_f32, dnnl_abc), "output layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->bias, 3, bias_dims, dnnl_f32, dnnl_abc), "bias layout"));
  }
  dnnl_matmul_desc_t desc;
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_matmul_desc_init(&desc, &s->a, &s->b, call.bias_arg >= 0 ? &s->bias : nullptr, &s->out),
                                  "matmul descriptor"));

  // out = activation(alpha * a @ b + bias + residual): alpha as the output scale (only without
  // a bias: applies()), the residual summed into an output that already holds it, or added from
  // its own buffer.
  Owned<dnnl_post_ops_t, decltype(api.dnnl_post_ops_destroy)> post_ops{nullptr, api.dnnl_post_ops_destroy};
  Owned<dnnl_primitive_attr_t, decltype(api.dnnl_primitive_attr_destroy)> attr{nullptr, api.dnnl_primitive_attr_destroy};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_create(&post_ops.handle), "post-ops"));
  if (call.residual_arg >= 0) {
    if (key.residual_in_place) KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_sum(post_ops.handle, 1.0f), "sum post-op"));
    else KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_binary(post_ops.handle, dnnl_binary_add, &s->out), "residual post-op"));
  }
  switch (call.epilogue) {
    case artifact::GemmCall::Epilogue::kNone: break;
    case artifact::GemmCall::Epilogue::kRelu:
      KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_eltwise(post_ops.handle, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "relu post-op"));
      break;
    case artifact::GemmCall::Epilogue::kGeluTanh:
      KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_eltwise(post_ops.handle, 1.0f, dnnl_eltwise_gelu_tanh, 0.0f, 0.0f), "gelu post-op"));
      break;
  }
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_create(&attr.handle), "attributes"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_set_post_ops(attr.handle, post_ops.handle), "attributes"));
  if (call.alpha != 1.0f)
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_set_output_scales(attr.handle, 1, 0, &call.alpha), "output scale"));
  Owned<dnnl_primitive_desc_t, decltype(api.dnnl_primitive_desc_destroy)> pd{nullptr, api.dnnl_primitive_desc_destroy};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_desc_create(&pd.handle, &desc, attr.handle, api.engine, nullptr),
                                  "matmul primitive descriptor"));
  if (constant_b && flat) {
    s->b = *api.dnnl_primitive_desc_query_md(pd.handle, dnnl_query_weights_md, 0);
    KILN_ASSIGN_OR_RETURN(s->packed_b, reorder_once(api, plain_b, s->b, constant_b));
  }
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_create(&s->primitive, pd.handle), "matmul primitive"));
  return std::unique_ptr<OneDnnMatmul>(new OneDnnMatmul(std::move(s)));
}

Status OneDnnMatmul::run(std::span<void* const> args) const {
  const State& s = *state_;
  const artifact::GemmCall& call = s.call;
  void* b = s.packed_b ? s.packed_b.get() : args[call.b_arg];
  std::vector<ExecArg> exec = {{DNNL_ARG_SRC, &s.a, args[call.a_arg]}, {DNNL_ARG_WEIGHTS, &s.b, b},
                               {DNNL_ARG_DST, &s.out, args[call.out_arg]}};
  if (call.bias_arg >= 0) exec.push_back({DNNL_ARG_BIAS, &s.bias, args[size_t(call.bias_arg)]});
  if (call.residual_arg >= 0 && !s.key.residual_in_place)
    exec.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, &s.out, args[size_t(call.residual_arg)]});
  return execute(*s.api, s.primitive, exec, "matmul");
}

// ---- Convolution ----------------------------------------------------------------------------

struct OneDnnConvolution::State {
  const OneDnnApi* api = nullptr;
  artifact::ConvCall call;
  dnnl_memory_desc_t src{}, dst{}, bias{}, weights{};  // weights: the primitive's own layout
  dnnl_primitive_t primitive = nullptr;
  WeightBuffer reordered_weights;
  size_t out_bytes = 0;

  ~State() {
    if (primitive) api->dnnl_primitive_destroy(primitive);
  }
};

OneDnnConvolution::OneDnnConvolution(std::unique_ptr<State> state) : state_(std::move(state)) {}
OneDnnConvolution::~OneDnnConvolution() = default;

Result<std::unique_ptr<OneDnnConvolution>> OneDnnConvolution::create(const OneDnnApi& api,
                                                                     const artifact::ConvCall& call, int64_t batch,
                                                                     const void* weights) {
  auto s = std::make_unique<State>();
  s->api = &api;
  s->call = call;
  const int64_t g = call.groups;
  const dnnl_format_tag_t act_tag = call.channels_last ? dnnl_nhwc : dnnl_nchw;
  dnnl_dims_t src_dims = {batch, call.channels, call.height, call.width};
  dnnl_dims_t dst_dims = {batch, call.out_channels, call.out_height(), call.out_width()};
  dnnl_dims_t bias_dims = {call.out_channels};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->src, 4, src_dims, dnnl_f32, act_tag), "source layout"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->dst, 4, dst_dims, dnnl_f32, act_tag), "output layout"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&s->bias, 1, bias_dims, dnnl_f32, dnnl_a), "bias layout"));
  // The artifact's weights: [OC, C/g, KH, KW] (NHWC: [OC, KH, KW, C/g]); grouped, [g, OC/g, ...].
  dnnl_memory_desc_t user_weights{}, any_weights{};
  if (g == 1) {
    dnnl_dims_t w_dims = {call.out_channels, call.channels, call.kernel_h, call.kernel_w};
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&user_weights, 4, w_dims, dnnl_f32,
                                                                     call.channels_last ? dnnl_ohwi : dnnl_oihw), "weights layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&any_weights, 4, w_dims, dnnl_f32, dnnl_format_tag_any), "weights layout"));
  } else {
    dnnl_dims_t w_dims = {g, call.out_channels / g, call.channels / g, call.kernel_h, call.kernel_w};
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&user_weights, 5, w_dims, dnnl_f32,
                                                                     call.channels_last ? dnnl_gohwi : dnnl_goihw), "weights layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&any_weights, 5, w_dims, dnnl_f32, dnnl_format_tag_any), "weights layout"));
  }
  dnnl_dims_t strides = {call.stride_h, call.stride_w};
  dnnl_dims_t dilates = {call.dilation_h - 1, call.dilation_w - 1};  // oneDNN counts the gaps
  dnnl_dims_t padding = {call.pad_h, call.pad_w};
  dnnl_convolution_desc_t desc;
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_dilated_convolution_forward_desc_init(
                                      &desc, dnnl_forward_inference, dnnl_convolution_direct, &s->src, &any_weights,
                                      call.bias_arg >= 0 ? &s->bias : nullptr, &s->dst, strides, dilates, padding, padding),
                                  "convolution descriptor"));

  // Post-ops: the residual is summed into the output, which holds it before the primitive runs.
  Owned<dnnl_post_ops_t, decltype(api.dnnl_post_ops_destroy)> post_ops{nullptr, api.dnnl_post_ops_destroy};
  Owned<dnnl_primitive_attr_t, decltype(api.dnnl_primitive_attr_destroy)> attr{nullptr, api.dnnl_primitive_attr_destroy};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_create(&post_ops.handle), "post-ops"));
  if (call.residual_arg >= 0) KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_sum(post_ops.handle, 1.0f), "sum post-op"));
  switch (call.activation) {
    case artifact::ConvCall::Activation::kNone: break;
    case artifact::ConvCall::Activation::kRelu:
      KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_eltwise(post_ops.handle, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "relu post-op"));
      break;
    case artifact::ConvCall::Activation::kClamp:  // clip(x) = max(alpha, min(beta, x))
      KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_eltwise(post_ops.handle, 1.0f, dnnl_eltwise_clip, call.clamp_min,
                                                                       call.clamp_max), "clamp post-op"));
      break;
  }
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_create(&attr.handle), "attributes"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_set_post_ops(attr.handle, post_ops.handle), "attributes"));
  Owned<dnnl_primitive_desc_t, decltype(api.dnnl_primitive_desc_destroy)> pd{nullptr, api.dnnl_primitive_desc_destroy};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_desc_create(&pd.handle, &desc, attr.handle, api.engine, nullptr),
                                  "convolution primitive descriptor"));
  s->weights = *api.dnnl_primitive_desc_query_md(pd.handle, dnnl_query_weights_md, 0);
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_create(&s->primitive, pd.handle), "convolution primitive"));
  s->out_bytes = api.dnnl_memory_desc_get_size(&s->dst);
  KILN_ASSIGN_OR_RETURN(s->reordered_weights, reorder_once(api, user_weights, s->weights, weights));
  return std::unique_ptr<OneDnnConvolution>(new OneDnnConvolution(std::move(s)));
}

Status OneDnnConvolution::run(std::span<void* const> args) const {
  const State& s = *state_;
  const artifact::ConvCall& call = s.call;
  void* out = args[call.out_arg];
  if (call.residual_arg >= 0 && args[size_t(call.residual_arg)] != out)
    std::memcpy(out, args[size_t(call.residual_arg)], s.out_bytes);
  std::vector<ExecArg> exec = {{DNNL_ARG_SRC, &s.src, args[call.x_arg]},
                               {DNNL_ARG_WEIGHTS, &s.weights, s.reordered_weights.get()},
                               {DNNL_ARG_DST, &s.dst, out}};
  if (call.bias_arg >= 0) exec.push_back({DNNL_ARG_BIAS, &s.bias, args[size_t(call.bias_arg)]});
  return execute(*s.api, s.primitive, exec, "convolution");
}

}  // namespace kiln::runtime::cpu
