#include "runtime/drivers/cpu/onednn.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "vendor/onednn/onednn_conv.h"

namespace kiln::runtime::cpu {

using onednn::dnnl_check;
using onednn::Owned;

bool onednn_runs(const artifact::GemmCall& call) { return call.dtype == ir::DType::kF32; }
bool onednn_runs(const artifact::ConvCall& call) { return call.dtype == ir::DType::kF32; }

namespace {

float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}

using Memory = Owned<dnnl_memory_t>;

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
    memories.emplace_back(api.dnnl_memory_destroy);
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_create(memories.back().out(), a.md, api.engine, a.data), what));
    exec.push_back({a.arg, memories.back().get()});
  }
  Owned<dnnl_stream_t> stream(api.dnnl_stream_destroy);
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_stream_create(stream.out(), api.engine, dnnl_stream_default_flags), "stream"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_execute(primitive, stream.get(), int(exec.size()), exec.data()), what));
  return dnnl_check(api.dnnl_stream_wait(stream.get()), what);
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
  Owned<dnnl_primitive_desc_t> pd(api.dnnl_primitive_desc_destroy);
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_reorder_primitive_desc_create(pd.out(), &from_md, api.engine, &to_md,
                                                                         api.engine, nullptr),
                                  "weights reorder descriptor"));
  Owned<dnnl_primitive_t> reorder(api.dnnl_primitive_destroy);
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_create(reorder.out(), pd.get()), "weights reorder"));
  const ExecArg args[] = {{DNNL_ARG_FROM, &from_md, const_cast<void*>(data)}, {DNNL_ARG_TO, &to_md, out.get()}};
  KILN_RETURN_IF_ERROR(execute(api, reorder.get(), args, "weights reorder"));
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
  Owned<dnnl_post_ops_t> post_ops(api.dnnl_post_ops_destroy);
  Owned<dnnl_primitive_attr_t> attr(api.dnnl_primitive_attr_destroy);
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_create(post_ops.out()), "post-ops"));
  if (call.residual_arg >= 0) {
    if (key.residual_in_place) KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_sum(post_ops.get(), 1.0f), "sum post-op"));
    else KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_binary(post_ops.get(), dnnl_binary_add, &s->out), "residual post-op"));
  }
  switch (call.epilogue) {
    case artifact::GemmCall::Epilogue::kNone: break;
    case artifact::GemmCall::Epilogue::kRelu:
      KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_eltwise(post_ops.get(), 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "relu post-op"));
      break;
    case artifact::GemmCall::Epilogue::kGeluTanh:
      KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_eltwise(post_ops.get(), 1.0f, dnnl_eltwise_gelu_tanh, 0.0f, 0.0f), "gelu post-op"));
      break;
  }
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_create(attr.out()), "attributes"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_set_post_ops(attr.get(), post_ops.get()), "attributes"));
  if (call.alpha != 1.0f)
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_set_output_scales(attr.get(), 1, 0, &call.alpha), "output scale"));
  Owned<dnnl_primitive_desc_t> pd(api.dnnl_primitive_desc_destroy);
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_desc_create(pd.out(), &desc, attr.get(), api.engine, nullptr),
                                  "matmul primitive descriptor"));
  if (constant_b && flat) {
    s->b = *api.dnnl_primitive_desc_query_md(pd.get(), dnnl_query_weights_md, 0);
    KILN_ASSIGN_OR_RETURN(s->packed_b, reorder_once(api, plain_b, s->b, constant_b));
  }
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_create(&s->primitive, pd.get()), "matmul primitive"));
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
  WeightBuffer reordered_weights;  // w reordered; null when the primitive reads call.packed_weights
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
  s->call = call;  // holds the packed weights' view of the artifact
  KILN_ASSIGN_OR_RETURN(const onednn::ConvolutionDescription described,
                        onednn::describe_convolution(api, call, batch));
  s->src = described.src;
  s->dst = described.dst;
  s->bias = described.bias;
  s->weights = described.weights;
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_create(&s->primitive, described.primitive_desc.get()),
                                  "convolution primitive"));
  s->out_bytes = api.dnnl_memory_desc_get_size(&s->dst);
  // The packed weights fit when the compiling machine's oneDNN chose the layout this one does
  // (the same instruction set; for the batch size the artifact was compiled for); else w is
  // reordered.
  const artifact::Blob& packed = s->call.packed_weights;
  const bool packed_fits = s->call.packed_layout && onednn::layout_is(api, *s->call.packed_layout, s->weights) &&
                           packed.size() == api.dnnl_memory_desc_get_size(&s->weights) &&
                           reinterpret_cast<uintptr_t>(packed.data()) % 64 == 0;
  if (!packed_fits) {
    KILN_ASSIGN_OR_RETURN(s->reordered_weights, reorder_once(api, described.plain_weights, s->weights, weights));
  }
  return std::unique_ptr<OneDnnConvolution>(new OneDnnConvolution(std::move(s)));
}

bool OneDnnConvolution::uses_packed_weights() const { return !state_->reordered_weights; }

Status OneDnnConvolution::run(std::span<void* const> args) const {
  const State& s = *state_;
  const artifact::ConvCall& call = s.call;
  void* out = args[call.out_arg];
  if (call.residual_arg >= 0 && args[size_t(call.residual_arg)] != out)
    std::memcpy(out, args[size_t(call.residual_arg)], s.out_bytes);
  void* weights = s.reordered_weights ? static_cast<void*>(s.reordered_weights.get())
                                      : const_cast<uint8_t*>(call.packed_weights.data());
  std::vector<ExecArg> exec = {{DNNL_ARG_SRC, &s.src, args[call.x_arg]},
                               {DNNL_ARG_WEIGHTS, &s.weights, weights},
                               {DNNL_ARG_DST, &s.dst, out}};
  if (call.bias_arg >= 0) exec.push_back({DNNL_ARG_BIAS, &s.bias, args[size_t(call.bias_arg)]});
  return execute(*s.api, s.primitive, exec, "convolution");
}

}  // namespace kiln::runtime::cpu
