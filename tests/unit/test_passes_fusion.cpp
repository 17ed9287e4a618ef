// Unit tests of the fusion pass and the unfused kernel lists (-O0, -O1, -fno-fuse).
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "test_passes_helpers.h"

namespace kiln::passes {
namespace {

using ir::KernelKind;
using ir::NodeId;
using ir::OpKind;
using testing::compile;
using testing::GraphBuilder;
using testing::options_at;

// The spec's 8-op elementwise chain on one tensor with broadcast operands:
// y = tanh(add(mul(sub(div(add(mul(x, s), b), d), e), f), g))
GraphBuilder ew_chain() {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 256");
  NodeId s = b.constant("s", {}, {0.5});
  NodeId bias = b.input("bias", "256");
  NodeId d = b.constant("d", {256}, {2.0});
  NodeId e = b.constant("e", {1, 256}, {0.25});
  NodeId f = b.input("f", "N, 1");
  NodeId g = b.constant("g", {}, {-1.0});
  NodeId t1 = b.op(OpKind::kMul, "t1", {x, s});
  NodeId t2 = b.op(OpKind::kAdd, "t2", {t1, bias});
  NodeId t3 = b.op(OpKind::kDiv, "t3", {t2, d});
  NodeId t4 = b.op(OpKind::kSub, "t4", {t3, e});
  NodeId t5 = b.op(OpKind::kMul, "t5", {t4, f});
  NodeId t6 = b.op(OpKind::kAdd, "t6", {t5, g});
  NodeId t7 = b.op(OpKind::kExp, "t7", {t6});
  b.output(b.op(OpKind::kTanh, "y", {t7}));
  return b;
}

std::vector<std::string> kernel_names(const ir::Graph& graph) {
  std::vector<std::string> names;
  for (const ir::Kernel& k : graph.kernels()) names.push_back(k.name);
  return names;
}

TEST_CASE("passes fusion: the 8-op elementwise chain is exactly one kernel at -O2") {
  GraphBuilder b = ew_chain();
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 1);
  const ir::Kernel& k = b.graph.kernels()[0];
  CHECK(k.kind == KernelKind::kElementwise);
  CHECK(k.nodes.size() == 8);
  CHECK(k.anchor == ir::kNoNode);
  CHECK(k.name == "fused_mul_add_div_sub_exp_tanh_0");
  CHECK(k.outputs == std::vector<NodeId>{b.graph.outputs()[0].node});
  CHECK(k.inputs.size() == 7);  // x, s, bias, d, e, f, g
  REQUIRE(plan.launches.size() == 1);
  CHECK(plan.launches[0].launch_shape == testing::dims("N, 256"));
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: a sum of 60 inputs splits into kernels of at most 24 operands") {
  GraphBuilder b;
  NodeId sum = b.input("x0", "4, 8");
  for (int i = 1; i < 60; ++i) {
    NodeId x = b.input("x" + std::to_string(i), "4, 8");
    sum = b.op(OpKind::kAdd, "s" + std::to_string(i), {sum, x});
  }
  b.output(sum);
  compile(b.graph, options_at(2));
  // Vulkan devices bind as few as 32 buffers per kernel (lavapipe); one kernel would need 61.
  CHECK(b.graph.kernels().size() == 3);
  for (const ir::Kernel& k : b.graph.kernels()) CHECK(k.inputs.size() <= 24);
}

TEST_CASE("passes fusion: a concat of 60 inputs becomes a tree of concats of at most 24, at -O0 and -O2") {
  for (int level : {0, 2}) {
    CAPTURE(level);
    GraphBuilder b;
    std::vector<NodeId> parts;
    for (int i = 0; i < 60; ++i) parts.push_back(b.input("x" + std::to_string(i), "2, 3"));
    b.output(b.op(OpKind::kConcat, "y", parts));
    compile(b.graph, options_at(level));
    CHECK(b.graph.kernels().size() == 4);  // three of 24, 24 and 12 operands, then their concat
    for (const ir::Kernel& k : b.graph.kernels()) CHECK(k.inputs.size() <= 24);
    CHECK(b.graph.node(b.graph.outputs()[0].node).type.shape == testing::dims("120, 3"));  // the default axis is 0
  }
}

TEST_CASE("passes fusion: -O0 gives one kernel per op, named after the op") {
  GraphBuilder b = ew_chain();
  compile(b.graph, options_at(0));
  CHECK(kernel_names(b.graph) == std::vector<std::string>{"mul_0", "add_1", "div_2", "sub_3",
                                                          "mul_4", "add_5", "exp_6", "tanh_7"});
  for (const ir::Kernel& k : b.graph.kernels()) CHECK(k.nodes.size() == 1);
}

TEST_CASE("passes fusion: -fno-fuse and -O1 keep one kernel per op") {
  for (PipelineOptions options : {options_at(2, /*fuse=*/false), options_at(1)}) {
    GraphBuilder b = ew_chain();
    compile(b.graph, options);
    CHECK(b.graph.kernels().size() == 8);
  }
}

TEST_CASE("passes fusion: elementwise producers fuse into a reduction and its epilogue") {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 64");
  NodeId bias = b.input("bias", "N");
  NodeId e = b.op(OpKind::kExp, "e", {x});
  NodeId sq = b.op(OpKind::kMul, "sq", {e, e});
  NodeId r = b.op(OpKind::kReduceSum, "r", {sq}, ir::ReduceAttrs{{1}, false, false});
  NodeId a = b.op(OpKind::kAdd, "a", {r, bias});
  b.output(b.op(OpKind::kSqrt, "y", {a}));
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 1);
  const ir::Kernel& k = b.graph.kernels()[0];
  CHECK(k.kind == KernelKind::kReduction);
  CHECK(b.graph.node(k.anchor).op == OpKind::kReduceSum);
  CHECK(k.nodes.size() == 5);
  CHECK(k.name == "fused_exp_mul_reduce_sum_add_sqrt_0");
  CHECK(plan.launches[0].launch_shape == testing::dims("N, 1"));
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: an epilogue over a different index space is not fused") {
  GraphBuilder b;
  NodeId x = b.input("x", "8, 64");
  NodeId r = b.op(OpKind::kReduceMax, "r", {x}, ir::ReduceAttrs{{1}, false, true});  // [8, 1]
  b.output(b.op(OpKind::kSub, "y", {x, r}));                                           // [8, 64]
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 2);
  CHECK(b.graph.kernels()[0].kind == KernelKind::kReduction);
  CHECK(b.graph.kernels()[1].kind == KernelKind::kElementwise);
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: softmax, log_softmax and layer_norm are one kernel with a prologue") {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 32");
  NodeId scale = b.constant("scale", {32}, {1.5});
  NodeId shift = b.constant("shift", {32}, {0.1});
  NodeId two = b.constant("two", {}, {2});
  NodeId m = b.op(OpKind::kMul, "m", {x, two});
  NodeId sm = b.op(OpKind::kSoftmax, "sm", {m}, ir::AxisAttrs{-1});
  b.output(sm);
  NodeId n = b.op(OpKind::kNeg, "n", {x});
  b.output(b.op(OpKind::kLogSoftmax, "lsm", {n}, ir::AxisAttrs{-1}));
  NodeId t = b.op(OpKind::kTanh, "t", {x});
  b.output(b.op(OpKind::kLayerNorm, "ln", {t, scale, shift}, ir::LayerNormAttrs{-1, 1e-5}));
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 3);
  for (const ir::Kernel& k : b.graph.kernels()) {
    CHECK(k.kind == KernelKind::kNormalization);
    CHECK(k.nodes.size() == 2);
  }
  CHECK(kernel_names(b.graph) == std::vector<std::string>{"fused_mul_softmax_0",
                                                          "fused_neg_log_softmax_1",
                                                          "fused_tanh_layer_norm_2"});
  CHECK(plan.launches[0].launch_shape == testing::dims("N, 1"));
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: matmul takes a bias + activation epilogue") {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 16");
  NodeId w = b.constant("w", {16, 8}, {0.125});
  NodeId bias = b.constant("bias", {8}, {0.5});
  NodeId mm = b.op(OpKind::kMatMul, "mm", {x, w});
  NodeId a = b.op(OpKind::kAdd, "a", {mm, bias});
  b.output(b.op(OpKind::kRelu, "y", {a}));
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 1);
  const ir::Kernel& k = b.graph.kernels()[0];
  CHECK(k.kind == KernelKind::kMatMul);
  CHECK(b.graph.node(k.anchor).op == OpKind::kMatMul);
  CHECK(k.name == "fused_matmul_add_relu_0");
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: matmul operands are not fused as prologues") {
  GraphBuilder b;
  NodeId x = b.input("x", "4, 16");
  NodeId w = b.input("w", "16, 8");
  NodeId e = b.op(OpKind::kExp, "e", {x});
  b.output(b.op(OpKind::kMatMul, "y", {e, w}));
  compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 2);
  CHECK(b.graph.kernels()[0].name == "exp_0");
  CHECK(b.graph.kernels()[1].name == "matmul_1");
}

TEST_CASE("passes fusion: a cheap value read by several kernels is recomputed in each") {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 8");
  NodeId two = b.constant("two", {}, {2});
  NodeId a = b.op(OpKind::kMul, "a", {x, two});
  b.output(b.op(OpKind::kExp, "y1", {a}));
  b.output(b.op(OpKind::kTanh, "y2", {a}));
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 2);
  std::set<NodeId> seen;
  for (const ir::Kernel& k : b.graph.kernels()) {
    CHECK(k.nodes.size() == 2);
    CHECK(b.graph.node(k.nodes[0]).op == OpKind::kMul);
    for (NodeId id : k.nodes) CHECK(seen.insert(id).second);  // no node in two kernels
  }
  CHECK(b.graph.find("a") != ir::kNoNode);
  CHECK(b.graph.find("a.1") != ir::kNoNode);  // the clone, under a fresh name
  CHECK(plan.arena_bytes == ir::SizeExpr());   // nothing materialized in the arena
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: an expensive value read by several kernels is materialized") {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 8");
  NodeId one = b.constant("one", {}, {1});
  NodeId a = b.op(OpKind::kExp, "a", {x});
  b.output(b.op(OpKind::kAdd, "y1", {a, one}));
  b.output(b.op(OpKind::kSub, "y2", {a, one}));
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 3);
  CHECK(b.graph.kernels()[0].name == "exp_0");
  const ir::BufferAssignment* buffer = plan.find_buffer(b.graph.find("a"));
  REQUIRE(buffer != nullptr);
  CHECK(buffer->storage == ir::Storage::kArena);
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: a value read in one kernel twice is computed once there") {
  GraphBuilder b;
  NodeId x = b.input("x", "8");
  NodeId a = b.op(OpKind::kExp, "a", {x});
  NodeId s = b.op(OpKind::kSigmoid, "s", {a});
  b.output(b.op(OpKind::kMul, "y", {a, s}));
  compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 1);
  CHECK(b.graph.kernels()[0].nodes.size() == 3);
}

TEST_CASE("passes fusion: layout ops get their own kernels; reshape is a view") {
  GraphBuilder b;
  NodeId x = b.input("x", "4, 6");
  NodeId e = b.op(OpKind::kExp, "e", {x});
  NodeId t = b.op(OpKind::kTranspose, "t", {e}, ir::TransposeAttrs{{1, 0}});
  NodeId r = b.op(OpKind::kReshape, "r", {t}, ir::ReshapeAttrs{testing::dims("24")});
  b.output(b.op(OpKind::kNeg, "y", {r}));
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  CHECK(kernel_names(b.graph) == std::vector<std::string>{"exp_0", "transpose_1", "neg_2"});
  const ir::BufferAssignment* view = plan.find_buffer(b.graph.find("r"));
  REQUIRE(view != nullptr);
  CHECK(view->storage == ir::Storage::kAlias);
  CHECK(view->alias_of == b.graph.find("t"));
  testing::check_same_results(original, b.graph);

  // At -O0 the reshape is a copy kernel.
  GraphBuilder o0;
  NodeId x0 = o0.input("x", "4, 6");
  NodeId r0 = o0.op(OpKind::kReshape, "r", {x0}, ir::ReshapeAttrs{testing::dims("24")});
  o0.output(o0.op(OpKind::kNeg, "y", {r0}));
  compile(o0.graph, options_at(0));
  CHECK(kernel_names(o0.graph) == std::vector<std::string>{"reshape_0", "neg_1"});
  CHECK(o0.graph.kernels()[0].kind == KernelKind::kLayout);
}

TEST_CASE("passes fusion: graph outputs are written even when another kernel reads them") {
  GraphBuilder b;
  NodeId x = b.input("x", "8");
  NodeId a = b.op(OpKind::kExp, "a", {x});
  b.output(a);
  b.output(b.op(OpKind::kNeg, "y", {a}));
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 2);
  CHECK(plan.find_buffer(b.graph.find("a"))->storage == ir::Storage::kOutput);
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: conv2d takes an epilogue, pooling stays alone") {
  GraphBuilder b;
  NodeId x = b.input("x", "1, 2, 6, 6");
  NodeId w = b.constant("w", {3, 2, 3, 3}, {0.1});
  NodeId bias = b.input("bias", "3, 1, 1");  // an input: fold-conv-affine would fold a constant
  NodeId c = b.op(OpKind::kConv2d, "c", {x, w});
  NodeId a = b.op(OpKind::kAdd, "a", {c, bias});
  NodeId r = b.op(OpKind::kRelu, "r", {a});
  ir::Pool2dAttrs pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  b.output(b.op(OpKind::kMaxPool2d, "y", {r}, pool));
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(2));
  CHECK(kernel_names(b.graph) == std::vector<std::string>{"fused_conv2d_add_relu_0", "max_pool2d_1"});
  CHECK(b.graph.kernels()[0].kind == KernelKind::kConv);
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes fusion: an output defined by a constant gets a copy kernel") {
  GraphBuilder b;
  b.input("x", "2");
  NodeId c = b.constant("y", {2}, {1, 2});
  b.output(c);
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(b.graph.kernels().size() == 1);
  const ir::Node& y = testing::output_node(b.graph, 0);
  CHECK(y.name == "y");
  CHECK(y.op == OpKind::kReshape);
  CHECK(plan.find_buffer(b.graph.outputs()[0].node)->storage == ir::Storage::kOutput);
}

// A conv network in NCHW with f16 convolutions: -O2 with the cuda target's channels-last policy
// (16-bit convs) runs it in NHWC with one transpose at the input, one back for the output that
// must stay NCHW, and none between the convolutions, pooling, bias, residual and mean.
TEST_CASE("passes: channels-last runs a conv block in NHWC with transposes only at its edges") {
  auto values = [](size_t n, double scale) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(double(i) * 1.3 + 0.7);
    return v;
  };
  for (ir::DType dtype : {ir::DType::kF16, ir::DType::kF32}) {
    CAPTURE(ir::dtype_name(dtype));
    GraphBuilder b;
    NodeId x = b.input("x", "2, 3, 8, 8", dtype);
    ir::Conv2dAttrs same;
    same.pads = {1, 1, 1, 1};
    NodeId c1 = b.op(OpKind::kConv2d, "c1", {x, b.constant("w1", {4, 3, 3, 3}, values(108, 0.4), dtype)}, same);
    NodeId a = b.op(OpKind::kRelu, "a", {b.op(OpKind::kAdd, "t", {c1, b.constant("s", {4, 1, 1}, {0.1, 0.2, -0.3, 0.4}, dtype)})});
    NodeId c2 = b.op(OpKind::kConv2d, "c2", {a, b.constant("w2", {4, 4, 3, 3}, values(144, 0.3), dtype)}, same);
    NodeId shortcut = b.op(OpKind::kConv2d, "sc", {x, b.constant("ws", {4, 3, 1, 1}, values(12, 0.5), dtype)});
    NodeId block = b.op(OpKind::kRelu, "block", {b.op(OpKind::kAdd, "r", {c2, shortcut})});
    ir::Pool2dAttrs pool;
    pool.kernel = {2, 2};
    pool.strides = {2, 2};
    NodeId p = b.op(OpKind::kMaxPool2d, "p", {block}, pool);
    b.output(p);  // read as NCHW: one transpose back
    ir::ReduceAttrs mean;
    mean.axes = {2, 3};
    mean.keepdims = true;
    ir::ReshapeAttrs flat;
    flat.shape = {ir::Dim::of(2), ir::Dim::of(4)};
    b.output(b.op(OpKind::kReshape, "y", {b.op(OpKind::kReduceMean, "m", {p}, mean)}, flat));
    // Against the same pipeline without the pass, the NHWC graph computes exactly the same
    // values (same roundings, same summation orders); against the source, fold-conv-affine's
    // moved roundings show at f16 precision.
    ir::Graph original = b.graph.clone();
    ir::Graph nchw = b.graph.clone();
    compile(nchw, options_at(2));
    PipelineOptions options = options_at(2);
    options.channels_last = PipelineOptions::Floats::k16Bit;
    compile(b.graph, options);
    const bool nhwc = dtype == ir::DType::kF16;
    int convs_last = 0;
    for (const ir::Node& n : b.graph.nodes())
      if (!n.erased && n.op == OpKind::kConv2d) convs_last += std::get<ir::Conv2dAttrs>(n.attrs).channels_last;
    CHECK(convs_last == (nhwc ? 3 : 0));
    CHECK(testing::count_op(b.graph, OpKind::kTranspose) == (nhwc ? 2 : 0));
    testing::check_same_results(nchw, b.graph, 1e-12);
    testing::check_same_results(original, b.graph, nhwc ? 2e-2 : 1e-6);
  }
}

// A mean over a large H x W after an NHWC conv would walk 256 elements per thread with the
// channels innermost: it reads the NCHW view (a transpose) and reduces contiguous rows instead,
// while the elementwise op after the conv still runs in NHWC.
TEST_CASE("passes: channels-last leaves long spatial reductions on the NCHW view") {
  GraphBuilder b;
  NodeId x = b.input("x", "1, 3, 16, 16", ir::DType::kF16);
  NodeId c = b.op(OpKind::kConv2d, "c", {x, b.constant("w", {8, 3, 1, 1}, {0.5}, ir::DType::kF16)});
  NodeId s = b.op(OpKind::kSigmoid, "s", {c});
  ir::ReduceAttrs mean;
  mean.axes = {2, 3};
  mean.keepdims = true;
  b.output(b.op(OpKind::kReduceMean, "m", {s}, mean));
  ir::Graph original = b.graph.clone();
  PipelineOptions options = options_at(1);
  options.channels_last = PipelineOptions::Floats::kAll;
  compile(b.graph, options);
  const ir::Node& m = testing::output_node(b.graph, 0);
  REQUIRE(m.op == OpKind::kReduceMean);
  CHECK(std::get<ir::ReduceAttrs>(m.attrs).axes == std::vector<int64_t>{2, 3});
  const ir::Node& view = b.graph.node(m.inputs[0]);
  CHECK(view.op == OpKind::kTranspose);
  CHECK(b.graph.node(view.inputs[0]).op == OpKind::kSigmoid);
  CHECK(b.graph.node(view.inputs[0]).type.shape == ir::Shape{ir::Dim::of(1), ir::Dim::of(16), ir::Dim::of(16), ir::Dim::of(8)});
  testing::check_same_results(original, b.graph, 1e-12);
}

}  // namespace
}  // namespace kiln::passes
