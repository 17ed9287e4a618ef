// The CUDA side of codegen: the GEMM-call and conv-call matchers (codegen/gemm_call.h,
// conv_call.h), the kCuda dialect's
// templates and dispatch (codegen/cuda/c_family_cuda.cpp), and — when this build has NVRTC — the
// cuda target producing one PTX module plus a cubin per architecture. Running the kernels needs
// a GPU: tests/backends and tests/cuda cover that on GPU machines.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <string>

#include "artifact/reader.h"
#include "artifact/targets.h"
#include "artifact/writer.h"
#include "codegen/c_family.h"
#include "codegen/conv_call.h"
#include "codegen/gemm_call.h"
#include "codegen/kernel_model.h"
#include "codegen/target.h"
#include "frontend/parser.h"
#include "passes/pipeline.h"
#include "support/diagnostics.h"
#include "test_compile_util.h"

using namespace kiln;

namespace {

using Compiled = kiln::testing::PlannedGraph;

Compiled compile(const std::string& text) { return kiln::testing::parse_and_plan(text, "test.graph"); }

// The model of the graph's only kernel of `kind`.
codegen::KernelModel model_of_kind(const Compiled& c, ir::KernelKind kind) {
  for (uint32_t k = 0; k < c.graph.kernels().size(); ++k) {
    if (c.graph.kernels()[k].kind != kind) continue;
    Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, k);
    REQUIRE(m.is_ok());
    return std::move(m).value();
  }
  FAIL("the graph has no kernel of kind " << ir::kernel_kind_name(kind));
  return {};
}

codegen::KernelModel matmul_model(const Compiled& c) { return model_of_kind(c, ir::KernelKind::kMatMul); }
codegen::KernelModel conv_model(const Compiled& c) { return model_of_kind(c, ir::KernelKind::kConv); }

std::string cuda_source(const Compiled& c, uint32_t k) {
  Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, k);
  REQUIRE(m.is_ok());
  Result<codegen::RenderedKernel> r = codegen::render_c_family(*m, codegen::Dialect::kCuda);
  REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
  return r->source;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("gemm call: matmul + bias + tanh-gelu with shared weights is one GEMM call") {
  Compiled c = compile(
      "graph g(x: f32[B, S, 64], w: f32[64, 32], b: f32[32]) -> (y: f32[B, S, 32]) {\n"
      "  y = gelu(add(matmul(x, w), b), approximate=\"tanh\")\n}\n");
  codegen::KernelModel m = matmul_model(c);
  std::optional<artifact::GemmCall> call = codegen::match_gemm_call(m, /*allow_tf32=*/true);
  REQUIRE(call.has_value());
  auto value_of = [&](uint32_t arg) { return c.graph.node(m.args[arg].value).name; };
  CHECK(value_of(call->a_arg) == "x");
  CHECK(value_of(call->b_arg) == "w");
  REQUIRE(call->bias_arg >= 0);
  CHECK(value_of(uint32_t(call->bias_arg)) == "b");
  CHECK(value_of(call->out_arg) == "y");
  CHECK(call->dtype == ir::DType::kF32);
  CHECK(call->batch == ir::SizeExpr::symbol("B"));
  CHECK(call->m == ir::SizeExpr::symbol("S"));
  CHECK(call->k == ir::SizeExpr::constant(64));
  CHECK(call->n == ir::SizeExpr::constant(32));
  CHECK(call->a_batched);
  CHECK_FALSE(call->b_batched);
  CHECK(call->epilogue == artifact::GemmCall::Epilogue::kGeluTanh);
  CHECK(call->allow_tf32);
  CHECK(artifact::check_gemm_call(*call, m.args).is_ok());
}

TEST_CASE("gemm call: plain, relu, f16 and fully batched products match") {
  {
    Compiled c = compile("graph g(a: f16[8, 16], b: f16[16, 4]) -> (y: f16[8, 4]) {\n  y = matmul(a, b)\n}\n");
    std::optional<artifact::GemmCall> call = codegen::match_gemm_call(matmul_model(c), true);
    REQUIRE(call.has_value());
    CHECK(call->dtype == ir::DType::kF16);
    CHECK(call->bias_arg == -1);
    CHECK(call->epilogue == artifact::GemmCall::Epilogue::kNone);
    CHECK(call->batch == ir::SizeExpr::constant(1));
    CHECK_FALSE(call->allow_tf32);  // TF32 is an f32 matter only
  }
  {
    Compiled c = compile(
        "graph g(a: f32[N, 16], b: f32[16, 4], c: f32[4]) -> (y: f32[N, 4]) {\n  y = relu(add(c, matmul(a, b)))\n}\n");
    std::optional<artifact::GemmCall> call = codegen::match_gemm_call(matmul_model(c), false);
    REQUIRE(call.has_value());
    CHECK(call->epilogue == artifact::GemmCall::Epilogue::kRelu);
    CHECK(call->bias_arg >= 0);
    CHECK_FALSE(call->allow_tf32);
  }
  {
    Compiled c = compile("graph g(a: f32[3, 8, 16], b: f32[3, 16, 4]) -> (y: f32[3, 8, 4]) {\n  y = matmul(a, b)\n}\n");
    std::optional<artifact::GemmCall> call = codegen::match_gemm_call(matmul_model(c), false);
    REQUIRE(call.has_value());
    CHECK(call->a_batched);
    CHECK(call->b_batched);
    CHECK(call->batch == ir::SizeExpr::constant(3));
  }
}

TEST_CASE("gemm call: a constant scale (alpha) and a residual (cuBLASLt's C) join the call") {
  {  // attention scores: (q @ k) / 8, batched
    Compiled c = compile(
        "graph g(q: f16[2, 4, 16, 8], k: f16[2, 4, 8, 16]) -> (s: f16[2, 4, 16, 16]) {\n"
        "  s = div(matmul(q, k), const f16[] 8.0)\n}\n");
    std::optional<artifact::GemmCall> call = codegen::match_gemm_call(matmul_model(c), false);
    REQUIRE(call.has_value());
    CHECK(call->alpha == 0.125f);
    CHECK(call->residual_arg == -1);
  }
  {  // x / 3 is not x * (1/3) in float (the last bit differs, a whole quantum after a
     // QuantizeLinear's rounding): the division stays in the epilogue kernel
    Compiled c = compile(
        "graph g(a: f32[8, 16], b: f32[16, 4]) -> (y: f32[8, 4]) {\n  y = round(div(matmul(a, b), const f32[] 3.0))\n}\n");
    std::optional<artifact::GemmCall> call = codegen::match_gemm_call(matmul_model(c), false);
    REQUIRE(call.has_value());
    CHECK(call->alpha == 1.0f);
  }
  {  // a transformer's output projection: x + (h @ w + b), then relu
    Compiled c = compile(
        "graph g(h: f32[N, 16], w: f32[16, 4], b: f32[4], x: f32[N, 4]) -> (y: f32[N, 4]) {\n"
        "  y = relu(add(x, add(matmul(h, w), b)))\n}\n");
    codegen::KernelModel m = matmul_model(c);
    std::optional<artifact::GemmCall> call = codegen::match_gemm_call(m, false);
    REQUIRE(call.has_value());
    CHECK(call->alpha == 1.0f);
    REQUIRE(call->residual_arg >= 0);
    REQUIRE(call->bias_arg >= 0);
    CHECK(m.args[size_t(call->residual_arg)].value == c.graph.find("x"));
    CHECK(m.args[size_t(call->bias_arg)].value == c.graph.find("b"));
    CHECK(call->epilogue == artifact::GemmCall::Epilogue::kRelu);
    CHECK(artifact::check_gemm_call(*call, m.args).is_ok());
  }
}

TEST_CASE("gemm call: an epilogue the library lacks runs in an epilogue kernel after it") {
  const char* graphs[] = {
      // an epilogue op cuBLASLt has no epilogue for
      "graph g(a: f32[8, 16], b: f32[16, 4]) -> (y: f32[8, 4]) {\n  y = tanh(matmul(a, b))\n}\n",
      // exact (erf) gelu after the bias: BERT's feed-forward
      "graph g(a: f16[N, 16], b: f16[16, 4], c: f16[4]) -> (y: f16[N, 4]) {\n  y = gelu(add(matmul(a, b), c))\n}\n",
      // a bias broadcast over columns, not rows
      "graph g(a: f32[8, 16], b: f32[16, 4], c: f32[8, 1]) -> (y: f32[8, 4]) {\n  y = add(matmul(a, b), c)\n}\n",
      // relu before the bias
      "graph g(a: f32[8, 16], b: f32[16, 4], c: f32[4]) -> (y: f32[8, 4]) {\n  y = add(relu(matmul(a, b)), c)\n}\n",
      // a scale after the bias (cuBLASLt's alpha scales the product only)
      "graph g(a: f32[8, 16], b: f32[16, 4], c: f32[4]) -> (y: f32[8, 4]) {\n  y = mul(add(matmul(a, b), c), const f32[] 2.0)\n}\n",
      // a scale that is not a constant
      "graph g(a: f32[8, 16], b: f32[16, 4], s: f32[]) -> (y: f32[8, 4]) {\n  y = mul(matmul(a, b), s)\n}\n",
      // two residuals
      "graph g(a: f32[8, 16], b: f32[16, 4], r: f32[8, 4], t: f32[8, 4]) -> (y: f32[8, 4]) {\n  y = add(add(matmul(a, b), r), t)\n}\n",
  };
  for (const char* text : graphs) {
    INFO(text);
    Compiled c = compile(text);
    codegen::KernelModel m = matmul_model(c);
    std::optional<artifact::GemmCall> call = codegen::match_gemm_call(m, true);
    REQUIRE(call.has_value());
    CHECK(artifact::check_gemm_call(*call, m.args).is_ok());
    REQUIRE(call->in_place_epilogue.args.size() >= 2);
    // The epilogue kernel reads the library's result from the output and writes the output.
    CHECK(call->in_place_epilogue.args.front() == call->out_arg);
    CHECK(m.args[call->out_arg].value == c.graph.find("y"));
    std::unique_ptr<codegen::LibraryEpilogueKernel> e = codegen::gemm_epilogue_kernel(m);
    REQUIRE(e);
    CHECK(e->call == call->in_place_epilogue);
    CHECK(e->model.entry_point == m.entry_point + artifact::kLibraryEpilogueSuffix);
    CHECK(e->model.in_place);
    Result<codegen::RenderedKernel> r = codegen::render_c_family(e->model, codegen::Dialect::kCuda);
    REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
    CHECK(has(r->source, e->model.entry_point + "("));
  }
  // The library covers the whole kernel: no epilogue kernel.
  Compiled c = compile("graph g(a: f32[8, 16], b: f32[16, 4], c: f32[4]) -> (y: f32[8, 4]) {\n  y = relu(add(matmul(a, b), c))\n}\n");
  CHECK(codegen::match_gemm_call(matmul_model(c), false)->in_place_epilogue.empty());
  CHECK_FALSE(codegen::gemm_epilogue_kernel(matmul_model(c)));
}

TEST_CASE("gemm call: anything other than the pattern is not a GEMM call") {
  const char* graphs[] = {
      // integer matmul
      "graph g(a: i32[8, 16], b: i32[16, 4]) -> (y: i32[8, 4]) {\n  y = matmul(a, b)\n}\n",
      // a partial batch broadcast ([2,1] x [1,3])
      "graph g(a: f32[2, 1, 8, 16], b: f32[1, 3, 16, 4]) -> (y: f32[2, 3, 8, 4]) {\n  y = matmul(a, b)\n}\n",
      // a 1-D operand
      "graph g(a: f32[16], b: f32[16, 4]) -> (y: f32[4]) {\n  y = matmul(a, b)\n}\n",
      // a cast in the epilogue changes the dtype (the library's result would not fit the output)
      "graph g(a: f32[8, 16], b: f32[16, 4]) -> (y: f16[8, 4]) {\n  y = cast(matmul(a, b), to=f16)\n}\n",
      // the epilogue reads the bare product after the library added a bias to it
      "graph g(a: f32[8, 16], b: f32[16, 4], c: f32[4]) -> (y: f32[8, 4]) {\n"
      "  p = matmul(a, b)\n  y = mul(add(p, c), p)\n}\n",
  };
  for (const char* text : graphs) {
    INFO(text);
    Compiled c = compile(text);
    CHECK_FALSE(codegen::match_gemm_call(matmul_model(c), true).has_value());
    CHECK_FALSE(codegen::gemm_epilogue_kernel(matmul_model(c)));
  }
  // Not a matmul kernel at all.
  Compiled c = compile("graph g(a: f32[8, 16]) -> (y: f32[8, 16]) {\n  y = exp(a)\n}\n");
  Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, 0);
  REQUIRE(m.is_ok());
  CHECK_FALSE(codegen::match_gemm_call(*m, true).has_value());
}

TEST_CASE("conv call: conv + bias + residual + relu (a ResNet block's tail) is one cuDNN call") {
  Compiled c = compile(
      "graph g(x: f16[N, 16, 9, 9], w: f16[32, 8, 3, 3], b: f16[32], r: f16[N, 32, 5, 5]) -> (y: f16[N, 32, 5, 5]) {\n"
      "  y = relu(add(r, conv2d(x, w, b, strides=[2, 2], pads=[1, 1, 1, 1], groups=2)))\n}\n");
  codegen::KernelModel m = conv_model(c);
  std::optional<artifact::ConvCall> call = codegen::match_conv_call(m, /*allow_tf32=*/true, /*fuse_clamp=*/false);
  REQUIRE(call.has_value());
  CHECK(call->dtype == ir::DType::kF16);
  CHECK(call->batch == ir::SizeExpr::symbol("N"));
  CHECK(call->channels == 16);
  CHECK(call->height == 9);
  CHECK(call->out_channels == 32);
  CHECK(call->kernel_h == 3);
  CHECK(call->groups == 2);
  CHECK(call->pad_h == 1);
  CHECK(call->stride_w == 2);
  CHECK(call->out_height() == 5);
  CHECK(call->out_width() == 5);
  CHECK(call->activation == artifact::ConvCall::Activation::kRelu);
  CHECK_FALSE(call->allow_tf32);  // f16: TF32 does not apply
  REQUIRE(call->bias_arg >= 0);
  REQUIRE(call->residual_arg >= 0);
  CHECK(m.args[size_t(call->x_arg)].value == c.graph.find("x"));
  CHECK(m.args[size_t(call->w_arg)].value == c.graph.find("w"));
  CHECK(m.args[size_t(call->bias_arg)].value == c.graph.find("b"));
  CHECK(m.args[size_t(call->residual_arg)].value == c.graph.find("r"));
  CHECK(m.args[call->out_arg].value == c.graph.find("y"));
  CHECK(artifact::check_conv_call(*call, m.args).is_ok());
}

TEST_CASE("conv call: a bare conv, an epilogue bias [C,1,1] and f32 with and without TF32") {
  {
    Compiled c = compile("graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3]) -> (y: f32[1, 4, 6, 6]) {\n  y = conv2d(x, w)\n}\n");
    std::optional<artifact::ConvCall> call = codegen::match_conv_call(conv_model(c), false, false);
    REQUIRE(call.has_value());
    CHECK(call->bias_arg == -1);
    CHECK(call->residual_arg == -1);
    CHECK(call->activation == artifact::ConvCall::Activation::kNone);
    CHECK_FALSE(call->allow_tf32);
    CHECK(codegen::match_conv_call(conv_model(c), true, false)->allow_tf32);
  }
  {
    Compiled c = compile(
        "graph g(x: f32[2, 3, 8, 8], w: f32[4, 3, 1, 1], b: f32[1, 4, 1, 1]) -> (y: f32[2, 4, 8, 8]) {\n"
        "  y = add(conv2d(x, w), b)\n}\n");
    std::optional<artifact::ConvCall> call = codegen::match_conv_call(conv_model(c), false, false);
    REQUIRE(call.has_value());
    CHECK(c.graph.node(conv_model(c).args[size_t(call->bias_arg)].value).name == "b");
  }
}

TEST_CASE("conv call: an epilogue cuDNN lacks runs in an in-place epilogue kernel after it") {
  const char* graphs[] = {
      // MobileNet's relu6 after the folded batch norm's bias
      "graph g(x: f16[1, 3, 8, 8], w: f16[4, 3, 3, 3], b: f16[4]) -> (y: f16[1, 4, 6, 6]) {\n"
      "  y = clamp(conv2d(x, w, b), min=0.0, max=6.0)\n}\n",
      // EfficientNet's SiLU: x * sigmoid(x)
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3]) -> (y: f32[1, 4, 6, 6]) {\n"
      "  c = conv2d(x, w)\n  y = mul(c, sigmoid(c))\n}\n",
      // relu before the bias
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3], b: f32[4, 1, 1]) -> (y: f32[1, 4, 6, 6]) {\n  y = add(relu(conv2d(x, w)), b)\n}\n",
      // a per-channel scale that is an input (fold-conv-affine folds only constants)
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3], s: f32[4, 1, 1]) -> (y: f32[1, 4, 6, 6]) {\n  y = mul(conv2d(x, w), s)\n}\n",
      // a bias that varies along the width, not the channels
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3], b: f32[6]) -> (y: f32[1, 4, 6, 6]) {\n  y = add(conv2d(x, w), b)\n}\n",
      // two biases
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3], b: f32[4, 1, 1], d: f32[4, 1, 1]) -> (y: f32[1, 4, 6, 6]) {\n  y = add(add(conv2d(x, w), b), d)\n}\n",
  };
  for (const char* text : graphs) {
    INFO(text);
    Compiled c = compile(text);
    codegen::KernelModel m = conv_model(c);
    std::optional<artifact::ConvCall> call = codegen::match_conv_call(m, false, false);
    REQUIRE(call.has_value());
    CHECK(artifact::check_conv_call(*call, m.args).is_ok());
    REQUIRE(call->in_place_epilogue.args.size() >= 2);
    CHECK(call->in_place_epilogue.args.front() == call->out_arg);
    CHECK(m.args[call->out_arg].value == c.graph.find("y"));
    std::unique_ptr<codegen::LibraryEpilogueKernel> e = codegen::conv_epilogue_kernel(m, false);
    REQUIRE(e);
    CHECK(e->call == call->in_place_epilogue);
    Result<codegen::RenderedKernel> r = codegen::render_c_family(e->model, codegen::Dialect::kCuda);
    REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
  }
  // cuDNN covers conv + bias + residual + relu whole.
  Compiled c = compile(
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3], b: f32[4], r: f32[1, 4, 6, 6]) -> (y: f32[1, 4, 6, 6]) {\n"
      "  y = relu(add(conv2d(x, w, b), r))\n}\n");
  CHECK(codegen::match_conv_call(conv_model(c), false, false)->in_place_epilogue.empty());
  CHECK_FALSE(codegen::conv_epilogue_kernel(conv_model(c), false));
}

TEST_CASE("conv call: anything other than the pattern is not a conv call") {
  const char* graphs[] = {
      // asymmetric padding (cuDNN's descriptors pad both sides alike)
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3]) -> (y: f32[1, 4, 7, 7]) {\n  y = conv2d(x, w, pads=[1, 1, 0, 0])\n}\n",
      // a cast in the epilogue changes the dtype (cuDNN's result would not fit the output)
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3]) -> (y: f16[1, 4, 6, 6]) {\n  y = cast(conv2d(x, w), to=f16)\n}\n",
      // the epilogue reads the bare convolution after the library added the bias
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3], b: f32[4, 1, 1]) -> (y: f32[1, 4, 6, 6]) {\n"
      "  c = conv2d(x, w)\n  y = mul(add(c, b), c)\n}\n",
  };
  for (const char* text : graphs) {
    INFO(text);
    Compiled c = compile(text);
    CHECK_FALSE(codegen::match_conv_call(conv_model(c), true, false).has_value());
    CHECK_FALSE(codegen::conv_epilogue_kernel(conv_model(c), false));
  }
  // Pooling is a conv-kind kernel too, but not a convolution.
  Compiled c = compile("graph g(x: f32[1, 3, 8, 8]) -> (y: f32[1, 3, 4, 4]) {\n  y = max_pool2d(x, kernel=[2, 2], strides=[2, 2])\n}\n");
  CHECK_FALSE(codegen::match_conv_call(conv_model(c), true, false).has_value());
}

TEST_CASE("cuda dialect: pure elementwise kernels move 16-byte vectors with a scalar tail") {
  Compiled c = compile(
      "graph g(x: f32[N, 64], b: f32[64], s: f32[]) -> (y: f32[N, 64]) {\n  y = tanh(add(mul(x, b), s))\n}\n");
  REQUIRE(c.graph.kernels().size() == 1);
  const std::string src = cuda_source(c, 0);
  CHECK(has(src, "extern \"C\" __global__ void __launch_bounds__(256) "));
  CHECK(has(src, "long long k_N"));
  CHECK(has(src, "const float* __restrict__ b0"));
  CHECK(has(src, "*(const uint4*)(b0 + lin)"));          // x: contiguous
  CHECK(has(src, "*(const uint4*)(b1 + (lin % "));       // b: broadcast along the leading axis
  CHECK(has(src, "= make_uint4("));                        // the vector store
  CHECK(has(src, "& 15ull) == 0ull"));                     // run-time alignment check
  CHECK(has(src, "for (IDX lin = nvec * TO_IDX(4)"));    // the scalar tail
  Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, 0);
  REQUIRE(m.is_ok());
  const artifact::KernelDispatch d = codegen::cuda_dispatch(*m);
  CHECK(d.workgroup_size == 256);
  CHECK(d.items_per_group == 256 * 4);
  CHECK(d.work_items == ir::SizeExpr::symbol("N") * 64);

  // f16 moves 8 elements per thread; a column broadcast ([N, 1]) has no vector path.
  Compiled half = compile("graph g(x: f16[N, 64]) -> (y: f16[N, 64]) {\n  y = neg(x)\n}\n");
  CHECK(has(cuda_source(half, 0), "for (IDX lin = nvec * TO_IDX(8)"));
  Compiled column = compile("graph g(x: f32[N, 64], c: f32[N, 1]) -> (y: f32[N, 64]) {\n  y = sub(x, c)\n}\n");
  CHECK_FALSE(has(cuda_source(column, 0), "uint4"));
}

TEST_CASE("cuda dialect: rows reduce with warp shuffles; the block size follows the row length") {
  Compiled c = compile(
      "graph g(x: f32[N, 4096], z: f32[N, 100], w: f32[64, N]) -> (y: f32[N, 4096], s: f32[N], t: f32[N]) {\n"
      "  y = softmax(x, axis=-1)\n  s = reduce_max(z, axes=[1])\n  t = reduce_sum(w, axes=[0])\n}\n");
  for (uint32_t k = 0; k < c.graph.kernels().size(); ++k) {
    Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, k);
    REQUIRE(m.is_ok());
    const std::string src = cuda_source(c, k);
    const artifact::KernelDispatch d = codegen::cuda_dispatch(*m);
    const std::string& name = c.graph.kernels()[k].name;
    INFO(name << "\n" << src);
    if (name.find("softmax") != std::string::npos) {
      // 4096 elements: 512 threads keep 8 each in registers; shuffles, then 16 warps' partials.
      CHECK(d.workgroup_size == 512);
      CHECK(d.items_per_group == 1);
      CHECK(has(src, "__launch_bounds__(512)"));
      CHECK(has(src, "float xr[8];"));
      CHECK(has(src, "__shfl_xor_sync(0xffffffffu"));
      CHECK(has(src, "__shared__ float part"));
    } else if (name.find("reduce_max") != std::string::npos) {
      CHECK(d.workgroup_size == 256);  // one warp per 100-element row, 8 rows per block
      CHECK(d.items_per_group == 8);
      CHECK(has(src, "__shfl_xor_sync"));
      CHECK_FALSE(has(src, "__syncthreads"));
    } else {
      CHECK(d.items_per_group == 256);  // the reduced axis is not innermost: a thread per output
      CHECK_FALSE(has(src, "__shfl_xor_sync"));
    }
  }
}

TEST_CASE("conv call: a target whose library fuses a clamp (cpu: oneDNN) takes relu6 into the call") {
  Compiled c = compile(
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3], b: f32[4]) -> (y: f32[1, 4, 6, 6]) {\n"
      "  y = clamp(conv2d(x, w, b), min=0.0, max=6.0)\n}\n");
  codegen::KernelModel m = conv_model(c);
  std::optional<artifact::ConvCall> call = codegen::match_conv_call(m, false, /*fuse_clamp=*/true);
  REQUIRE(call.has_value());
  CHECK(call->activation == artifact::ConvCall::Activation::kClamp);
  CHECK(call->clamp_min == 0.0f);
  CHECK(call->clamp_max == 6.0f);
  CHECK(call->in_place_epilogue.empty());
  CHECK_FALSE(codegen::conv_epilogue_kernel(m, true));
  // Without the library's clamp, the clamp is the in-place epilogue's.
  CHECK(codegen::match_conv_call(m, false, false)->activation == artifact::ConvCall::Activation::kNone);

  // A one-sided clamp leaves the other bound infinite.
  Compiled upper = compile(
      "graph g(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3]) -> (y: f32[1, 4, 6, 6]) {\n  y = clamp(conv2d(x, w), max=2.5)\n}\n");
  std::optional<artifact::ConvCall> one_sided = codegen::match_conv_call(conv_model(upper), false, true);
  REQUIRE(one_sided.has_value());
  CHECK(one_sided->clamp_min == -std::numeric_limits<float>::infinity());
  CHECK(one_sided->clamp_max == 2.5f);

  // The cpu target records it, and the clamp and its bounds survive the artifact.
  Result<std::unique_ptr<codegen::Target>> cpu = codegen::create_target(std::string(artifact::kCpuTarget));
  if (!cpu.is_ok()) {
    MESSAGE("cpu target not in this build: the artifact round trip is not checked");
    return;
  }
  Result<codegen::CompiledKernels> compiled = codegen::compile_graph(**cpu, c.graph, c.plan, codegen::TargetOptions{});
  REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().to_string());
  REQUIRE(compiled->kernels.size() == 1);
  CHECK(compiled->kernels[0].conv == call);
  artifact::WriteOptions write;
  write.kernels = compiled->kernels;
  write.modules = compiled->modules;
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(c.graph, c.plan, write);
  REQUIRE_MESSAGE(bytes.is_ok(), bytes.status().to_string());
  Result<artifact::LoadedArtifact> loaded =
      artifact::read_artifact(std::make_shared<const std::vector<uint8_t>>(std::move(bytes).value()));
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().to_string());
  REQUIRE(loaded->kernels.size() == 1);
  CHECK(loaded->kernels[0].conv == call);
}

TEST_CASE("cuda dialect: matmul uses register-blocked shared-memory tiles") {
  Compiled c = compile("graph g(a: f32[N, 256], b: f32[256, 96]) -> (y: f32[N, 96]) {\n  y = matmul(a, b)\n}\n");
  codegen::KernelModel m = matmul_model(c);
  Result<codegen::RenderedKernel> r = codegen::render_c_family(m, codegen::Dialect::kCuda);
  REQUIRE(r.is_ok());
  CHECK(has(r->source, "__shared__ float tile_a"));
  CHECK(has(r->source, "float acc[4][4];"));
  const artifact::KernelDispatch d = codegen::cuda_dispatch(m);
  CHECK(d.workgroup_size == 256);
  // Symbolic rows: (N + 63) units of 1/64 tile per 2 column tiles.
  CHECK(d.items_per_group == 64);
  CHECK(d.work_items == ir::SizeExpr::symbol("N") * 2 + ir::SizeExpr::constant(63 * 2));
}

#ifdef KILN_HAVE_CUDA
namespace {

// Writes the compiled kernels and modules into an artifact, reads it back and compares.
void check_artifact_round_trip(const Compiled& c, const codegen::CompiledKernels& compiled) {
  artifact::WriteOptions write;
  write.kernels = compiled.kernels;
  write.modules = compiled.modules;
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(c.graph, c.plan, write);
  REQUIRE(bytes.is_ok());
  Result<artifact::LoadedArtifact> loaded =
      artifact::read_artifact(std::make_shared<const std::vector<uint8_t>>(std::move(bytes).value()));
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().to_string());
  CHECK(loaded->modules == compiled.modules);
  CHECK(loaded->kernels == compiled.kernels);
}

}  // namespace

TEST_CASE("cuda target: one PTX module and a cubin per architecture; kernels are module functions") {
  Compiled c = compile(
      "graph g(x: f32[N, 64], w: f32[64, 32], b: f32[32]) -> (y: f32[N, 32], s: f32[N]) {\n"
      "  y = relu(add(matmul(x, w), b))\n  s = reduce_sum(exp(x), axes=[1])\n}\n");
  Result<std::unique_ptr<codegen::Target>> target = codegen::create_target("cuda");
  REQUIRE(target.is_ok());
  codegen::TargetOptions options;
  options.gpu_archs = {"sm_80", "sm_90"};
  Result<codegen::CompiledKernels> compiled = codegen::compile_graph(**target, c.graph, c.plan, options);
  REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().to_string());
  REQUIRE(compiled->modules.size() == 3);
  CHECK(compiled->modules[0].format == "ptx");
  CHECK(compiled->modules[1].format == "cubin:sm_80");
  CHECK(compiled->modules[2].format == "cubin:sm_90");
  for (int m : {1, 2}) {  // nvJitLink's cubins are ELF images
    const artifact::Blob& cubin = compiled->modules[m].blob;
    REQUIRE(cubin.size() > 4);
    CHECK((cubin[0] == 0x7f && cubin[1] == 'E' && cubin[2] == 'L' && cubin[3] == 'F'));
  }
  const std::string ptx(compiled->modules[0].blob.begin(), compiled->modules[0].blob.end());
  CHECK(has(ptx, ".target sm_80"));
  CHECK(ptx.back() != '\0');
  REQUIRE(compiled->kernels.size() == c.graph.kernels().size());
  int gemms = 0;
  for (const artifact::KernelBinary& k : compiled->kernels) {
    CHECK(k.target == "cuda");
    CHECK(k.format == "module");
    CHECK(k.blob.empty());
    CHECK(has(ptx, ".entry " + k.entry_point + "("));
    gemms += k.gemm.has_value() ? 1 : 0;
  }
  CHECK(gemms == 1);
  // -S: the program and its PTX, no cubins.
  options.sources_only = true;
  compiled = codegen::compile_graph(**target, c.graph, c.plan, options);
  REQUIRE(compiled.is_ok());
  CHECK(compiled->modules.size() == 1);
  REQUIRE(compiled->sources.size() == 2);
  CHECK(compiled->sources[0].suffix == ".cu");
  CHECK(compiled->sources[0].kernel_name.empty());
  CHECK(compiled->sources[1].suffix == ".ptx");

  // The artifact keeps the modules and GEMM calls.
  options.sources_only = false;
  compiled = codegen::compile_graph(**target, c.graph, c.plan, options);
  REQUIRE(compiled.is_ok());
  check_artifact_round_trip(c, *compiled);
}

TEST_CASE("cuda target: a large graph is split into several NVRTC programs; each kernel names its module") {
  // 48 reductions of rows of different lengths: distinct kernels (the lengths are literals in
  // their code), more source than one program holds.
  std::string inputs, outputs, body;
  for (int i = 0; i < 48; ++i) {
    const std::string n = std::to_string(i);
    inputs += std::string(i ? ", " : "") + "x" + n + ": f32[16, " + std::to_string(64 + i) + "]";
    outputs += std::string(i ? ", " : "") + "s" + n + ": f32[16]";
    body += "  s" + n + " = reduce_max(tanh(x" + n + "), axes=[1])\n";
  }
  Compiled c = compile("graph g(" + inputs + ") -> (" + outputs + ") {\n" + body + "}\n");
  REQUIRE(c.graph.kernels().size() == 48);
  Result<std::unique_ptr<codegen::Target>> target = codegen::create_target("cuda");
  REQUIRE(target.is_ok());
  codegen::TargetOptions options;
  options.gpu_archs = {"sm_90"};
  Result<codegen::CompiledKernels> compiled = codegen::compile_graph(**target, c.graph, c.plan, options);
  REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().to_string());
  CHECK(compiled->compiled_kernel_count == 48);
  // Two formats per program, program-major.
  REQUIRE(compiled->modules.size() % 2 == 0);
  const uint32_t programs = uint32_t(compiled->modules.size() / 2);
  CHECK(programs > 1);
  for (uint32_t p = 0; p < programs; ++p) {
    CHECK(compiled->modules[2 * p].id == p);
    CHECK(compiled->modules[2 * p].format == "ptx");
    CHECK(compiled->modules[2 * p + 1].id == p);
    CHECK(compiled->modules[2 * p + 1].format == "cubin:sm_90");
  }
  std::vector<int> kernels_per_program(programs);
  for (const artifact::KernelBinary& k : compiled->kernels) {
    REQUIRE(k.module_id < programs);
    ++kernels_per_program[k.module_id];
    const artifact::Blob& blob = compiled->modules[2 * k.module_id].blob;
    CHECK(has(std::string(blob.begin(), blob.end()), ".entry " + k.entry_point + "("));
  }
  for (uint32_t p = 0; p < programs; ++p) CHECK(kernels_per_program[p] > 0);

  // The artifact keeps the module ids.
  check_artifact_round_trip(c, *compiled);
}
#endif

TEST_CASE("cuda dialect: short rows of run-time length take a warp each; f16 rows move 16-byte vectors") {
  Compiled c = compile(
      "graph g(x: f16[N, S], z: f16[M, 4096], s: f16[4096], b: f16[4096]) -> (y: f16[N, S], w: f16[M, 4096]) {\n"
      "  y = softmax(x, axis=-1)\n  w = layer_norm(z, s, b, axis=-1, epsilon=1e-5)\n}\n");
  for (uint32_t k = 0; k < c.graph.kernels().size(); ++k) {
    Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, k);
    REQUIRE(m.is_ok());
    const std::string src = cuda_source(c, k);
    const artifact::KernelDispatch d = codegen::cuda_dispatch(*m);
    const std::string& name = c.graph.kernels()[k].name;
    INFO(name << "\n" << src);
    if (name.find("softmax") != std::string::npos) {
      // A run-time branch: a warp per row (8 per block, 16 elements per lane) for short rows,
      // the block path otherwise; one row per block in the dispatch suits both (grid-stride).
      CHECK(d.workgroup_size == 256);
      CHECK(d.items_per_group == 1);
      CHECK(has(src, "if (K <= TO_IDX(512))"));
      CHECK(has(src, "row += ngroups * TO_IDX(8)"));
      CHECK(has(src, "float xr[16];"));
      CHECK(has(src, "__syncthreads"));  // the long-row branch
    } else {
      // 4096 f16 elements: 256 threads hold two 8-element vectors each; scale and bias too.
      CHECK(d.workgroup_size == 256);
      CHECK(has(src, "float xr[16];"));
      CHECK(has(src, "K % TO_IDX(8) == TO_IDX(0)"));  // the run-time check, with a scalar path
    }
    CHECK(has(src, "uint4 raw"));
    CHECK(has(src, "*(uint4*)(b"));
    CHECK(has(src, "else {"));
  }
}

namespace {

// The model and CUDA source of the graph's only conv kernel.
std::pair<codegen::KernelModel, std::string> conv_kernel(const Compiled& c) {
  for (uint32_t k = 0; k < c.graph.kernels().size(); ++k) {
    if (c.graph.kernels()[k].kind != ir::KernelKind::kConv) continue;
    Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, k);
    REQUIRE(m.is_ok());
    return {std::move(m).value(), cuda_source(c, k)};
  }
  FAIL("the graph has no conv kernel");
  return {};
}

}  // namespace

TEST_CASE("cuda dialect: typical convs run as an implicit GEMM with their epilogue") {
  struct Case {
    const char* graph;
    const char* acc;  // the register tile chosen
  };
  const Case cases[] = {
      // 7x7 stride-2 stem, bias and relu, symbolic batch.
      {"graph g(x: f32[N, 3, 224, 224], w: f32[64, 3, 7, 7], b: f32[64]) -> (y: f32[N, 64, 112, 112]) {\n"
       "  y = relu(conv2d(x, w, b, strides=[2, 2], pads=[3, 3, 3, 3]))\n}\n",
       "float acc[4][4];"},
      // 3x3 pad 1 with a broadcast bias add, f16 storage.
      {"graph g(x: f16[N, 64, 17, 15], w: f16[96, 64, 3, 3], b: f16[96, 1, 1]) -> (y: f16[N, 96, 17, 15]) {\n"
       "  y = relu(add(conv2d(x, w, pads=[1, 1, 1, 1]), b))\n}\n",
       "float acc[4][4];"},
      // 1x1 with few output channels: 128-pixel x 32-channel tiles.
      {"graph g(x: f32[N, 64, 28, 28], w: f32[32, 64, 1, 1]) -> (y: f32[N, 32, 28, 28]) {\n"
       "  y = conv2d(x, w)\n}\n",
       "float acc[8][2];"},
      // A ResNet 3x3 layer at batch 32: enough 128x128 tiles for two waves.
      {"graph g(x: f32[32, 128, 56, 56], w: f32[128, 128, 3, 3]) -> (y: f32[32, 128, 56, 56]) {\n"
       "  y = conv2d(x, w, pads=[1, 1, 1, 1])\n}\n",
       "float acc[8][8];"},
      // Grouped (2 groups of 32 channels) and dilated.
      {"graph g(x: f32[2, 64, 20, 20], w: f32[64, 32, 3, 3]) -> (y: f32[2, 64, 16, 16]) {\n"
       "  y = conv2d(x, w, dilations=[2, 2], groups=2)\n}\n",
       "float acc[8][2];"},
  };
  for (const Case& tc : cases) {
    Compiled c = compile(tc.graph);
    auto [m, src] = conv_kernel(c);
    INFO(tc.graph << "\n" << src);
    CHECK(has(src, "// implicit GEMM"));
    CHECK(has(src, "__shared__ float tile_a"));
    CHECK(has(src, tc.acc));
    const artifact::KernelDispatch d = codegen::cuda_dispatch(m);
    CHECK(d.workgroup_size == 256);
  }
  // The epilogue runs at each output's coordinates; the bias joins the accumulator.
  {
    Compiled c = compile(cases[0].graph);
    auto [m, src] = conv_kernel(c);
    CHECK(has(src, "y += TO_F(b2[oc]);"));
    CHECK(has(src, "k_relu("));
    // Symbolic batch: (N*112*112 + 63) units of 1/64 pixel tile, one channel tile.
    const artifact::KernelDispatch d = codegen::cuda_dispatch(m);
    CHECK(d.items_per_group == 64);
    CHECK(d.work_items == ir::SizeExpr::symbol("N") * (112 * 112) + ir::SizeExpr::constant(63));
  }
  {
    // Static batch: the tile count itself (2 groups x 1 channel tile x ceil(512 / 128) pixel tiles).
    Compiled c = compile(cases[4].graph);
    const artifact::KernelDispatch d = codegen::cuda_dispatch(conv_kernel(c).first);
    CHECK(d.items_per_group == 1);
    CHECK(d.work_items == ir::SizeExpr::constant(2 * 4));
  }
}

TEST_CASE("cuda dialect: convs a GEMM tile would mostly waste keep the direct template") {
  const char* graphs[] = {
      // depthwise: one channel per group
      "graph g(x: f32[N, 32, 16, 16], w: f32[32, 1, 3, 3]) -> (y: f32[N, 32, 16, 16]) {\n"
      "  y = conv2d(x, w, pads=[1, 1, 1, 1], groups=32)\n}\n",
      // fewer than 16 output channels
      "graph g(x: f32[N, 16, 8, 8], w: f32[8, 16, 3, 3]) -> (y: f32[N, 8, 6, 6]) {\n  y = conv2d(x, w)\n}\n",
      // a reduction of 9 (one input channel, 3x3)
      "graph g(x: f32[N, 1, 28, 28], w: f32[32, 1, 3, 3]) -> (y: f32[N, 32, 26, 26]) {\n  y = conv2d(x, w)\n}\n",
      // 16 output pixels in all
      "graph g(x: f32[1, 64, 4, 4], w: f32[64, 64, 1, 1]) -> (y: f32[1, 64, 4, 4]) {\n  y = conv2d(x, w)\n}\n",
  };
  for (const char* graph : graphs) {
    Compiled c = compile(graph);
    auto [m, src] = conv_kernel(c);
    INFO(graph << "\n" << src);
    CHECK_FALSE(has(src, "implicit GEMM"));
    CHECK_FALSE(has(src, "__shared__"));
    const artifact::KernelDispatch d = codegen::cuda_dispatch(m);
    CHECK(d.items_per_group == 256);  // one thread per output element
    CHECK(d.work_items == ir::SizeExpr::of_shape(m.space, 1));
  }
}
