// Unit tests for ir/printer.h: exact .graph text (signature, statements, attributes, literals,
// kernel groups, output aliases) and Graphviz output.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "frontend/parser.h"
#include "ir/printer.h"
#include "ir_test_graphs.h"
#include "support/half.h"

using namespace kiln::ir;
using namespace kiln::ir::testing;

namespace {

// The MLP of the spec, built node by node.
GraphBuilder build_mlp() {
  GraphBuilder b;
  b.graph.name = "mlp";
  b.graph.weights_path = "mlp.safetensors";
  NodeId x = b.input("x", "f32[N, 784]");
  NodeId w1 = b.constant("w1", Tensor::zeros(DType::kF32, {784, 256}).value(), "fc1.weight");
  NodeId b1 = b.constant("b1", Tensor::zeros(DType::kF32, {256}).value(), "fc1.bias");
  NodeId h = b.op(OpKind::kMatMul, "h", {x, w1});
  NodeId a1 = b.op(OpKind::kAdd, "a.1", {h, b1});
  NodeId a = b.op(OpKind::kGelu, "a", {a1}, GeluAttrs{true});
  NodeId b2 = b.constant("b2", Tensor::zeros(DType::kF32, {256}).value());
  NodeId logits = b.op(OpKind::kAdd, "logits", {a, b2});
  NodeId probs = b.op(OpKind::kSoftmax, "probs", {logits}, AxisAttrs{-1});
  b.output("probs", probs);
  return b;
}

Tensor tensor_of(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  auto t = Tensor::zeros(dtype, std::move(shape));
  REQUIRE(t.is_ok());
  for (size_t i = 0; i < values.size(); ++i) t->set_element_from_double(int64_t(i), values[i]);
  return std::move(t).value();
}

// Prints a graph holding one constant and returns its statement line.
std::string constant_line(Tensor data, PrintOptions options = {}) {
  GraphBuilder b;
  b.graph.name = "g";
  NodeId c = b.constant("c", std::move(data));
  b.output("c", c);
  std::string text = print_graph(b.graph, options);
  size_t start = text.find("  c = ");
  REQUIRE(start != std::string::npos);
  return text.substr(start + 2, text.find('\n', start) - start - 2);
}

}  // namespace

TEST_CASE("ir.printer: the spec's MLP prints as flat, typed statements") {
  GraphBuilder b = build_mlp();
  CHECK(print_graph(b.graph) ==
        "weights \"mlp.safetensors\"\n"
        "\n"
        "graph mlp(x: f32[N, 784]) -> (probs: f32[N, 256]) {\n"
        "  w1 = param f32[784, 256] \"fc1.weight\"\n"
        "  b1 = param f32[256] \"fc1.bias\"\n"
        "  h = matmul(x, w1) : f32[N, 256]\n"
        "  a.1 = add(h, b1) : f32[N, 256]\n"
        "  a = gelu(a.1, approximate=\"tanh\") : f32[N, 256]\n"
        "  b2 = const f32[256] 0.0\n"
        "  logits = add(a, b2) : f32[N, 256]\n"
        "  probs = softmax(logits) : f32[N, 256]\n"
        "}\n");
}

TEST_CASE("ir.printer: no weights directive without a weights file; erased nodes are skipped") {
  GraphBuilder b;
  b.graph.name = "g";
  NodeId x = b.input("x", "f32[2]");
  NodeId y = b.input("y", "f32[2]");
  NodeId dead = b.op(OpKind::kMul, "dead", {x, y});
  NodeId s = b.op(OpKind::kSub, "s", {x, y});
  b.graph.node(dead).erased = true;
  b.output("s", s);
  CHECK(print_graph(b.graph) ==
        "graph g(x: f32[2], y: f32[2]) -> (s: f32[2]) {\n"
        "  s = sub(x, y) : f32[2]\n"
        "}\n");
}

TEST_CASE("ir.printer: attributes print unless they equal the spec default") {
  GraphBuilder b;
  b.graph.name = "attrs";
  NodeId x = b.input("x", "f32[N, 3, 8, 8]");
  NodeId w = b.constant("w", Tensor::zeros(DType::kF32, {4, 3, 3, 3}).value(), "conv.w");
  Conv2dAttrs conv;
  conv.pads = {1, 1, 1, 1};
  conv.strides = {2, 2};
  NodeId c = b.op(OpKind::kConv2d, "c", {x, w}, conv);
  NodeId c0 = b.op(OpKind::kConv2d, "c0", {x, w});
  Pool2dAttrs pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  NodeId mp = b.op(OpKind::kMaxPool2d, "mp", {c}, pool);
  pool.count_include_pad = true;
  pool.pads = {1, 1, 0, 0};
  NodeId ap = b.op(OpKind::kAvgPool2d, "ap", {c}, pool);
  NodeId g = b.op(OpKind::kGlobalAvgPool2d, "g", {c});
  NodeId flat = b.op(OpKind::kReshape, "flat", {g}, ReshapeAttrs{{Dim::symbol("N"), Dim::of(-1)}});
  ReduceAttrs r;
  r.axes = {-1};
  r.all_axes = false;
  r.keepdims = true;
  NodeId rs = b.op(OpKind::kReduceSum, "rs", {flat}, r);
  NodeId rm = b.op(OpKind::kReduceMean, "rm", {flat});
  NodeId am = b.op(OpKind::kArgMax, "am", {flat}, ArgMaxAttrs{-1, false});
  NodeId am0 = b.op(OpKind::kArgMax, "am0", {flat}, ArgMaxAttrs{0, true});
  NodeId sm = b.op(OpKind::kLogSoftmax, "sm", {c}, AxisAttrs{1});
  NodeId ln_s = b.constant("ln_s", Tensor::zeros(DType::kF32, {4}).value(), "ln.s");
  NodeId ln = b.op(OpKind::kLayerNorm, "ln", {flat, ln_s, ln_s}, LayerNormAttrs{-1, 1e-6});
  NodeId ln2 = b.op(OpKind::kLayerNorm, "ln2", {flat, ln_s, ln_s}, LayerNormAttrs{1, 1e-5});
  NodeId cl = b.op(OpKind::kClamp, "cl", {ln}, ClampAttrs{0.0, 6.0});
  NodeId cl2 = b.op(OpKind::kClamp, "cl2", {ln}, ClampAttrs{std::nullopt, -0.5});
  NodeId ca = b.op(OpKind::kCast, "ca", {cl}, CastAttrs{DType::kF16});
  NodeId tr = b.op(OpKind::kTranspose, "tr", {c}, TransposeAttrs{{0, 2, 3, 1}});
  NodeId bt = b.op(OpKind::kBroadcastTo, "bt", {g}, BroadcastToAttrs{{Dim::symbol("N"), Dim::of(4), Dim::of(2), Dim::of(2)}});
  NodeId sl = b.op(OpKind::kSlice, "sl", {c}, SliceAttrs{{0}, {2}, {1}, {}});
  NodeId st = b.input("s", "f32[4, 6]");
  NodeId sl2 = b.op(OpKind::kSlice, "sl2", {st}, SliceAttrs{{0, 3}, {2, -4}, {}, {1, -1}});
  NodeId cs = b.op(OpKind::kConcat, "cs", {st, st});
  NodeId cc = b.op(OpKind::kConcat, "cc", {c, c}, AxisAttrs{1});
  NodeId cc0 = b.op(OpKind::kConcat, "cc0", {flat, flat}, AxisAttrs{1});
  NodeId idx = b.input("idx", "i64[5]");  // a second input, declared after the first nodes
  NodeId ga = b.op(OpKind::kGather, "ga", {c, idx}, AxisAttrs{1});
  for (NodeId id : {c0, mp, ap, rs, rm, am, am0, sm, ln2, cl2, ca, tr, bt, sl, sl2, cs, cc, cc0, ga}) {
    b.output(b.graph.node(id).name, id);
  }
  const std::string text = print_graph(b.graph);
  auto has = [&](const std::string& line) {
    INFO(text);
    CHECK(text.find("  " + line + "\n") != std::string::npos);
  };
  has("c = conv2d(x, w, strides=[2, 2], pads=[1, 1, 1, 1]) : f32[N, 4, 4, 4]");
  has("c0 = conv2d(x, w) : f32[N, 4, 6, 6]");
  has("mp = max_pool2d(c, kernel=[2, 2], strides=[2, 2]) : f32[N, 4, 2, 2]");
  has("ap = avg_pool2d(c, kernel=[2, 2], strides=[2, 2], pads=[1, 1, 0, 0], count_include_pad=true) : f32[N, 4, 2, 2]");
  has("g = global_avg_pool2d(c) : f32[N, 4, 1, 1]");
  has("flat = reshape(g, shape=[N, -1]) : f32[N, 4]");
  has("rs = reduce_sum(flat, axes=[1], keepdims=true) : f32[N, 1]");
  has("rm = reduce_mean(flat) : f32[]");
  has("am = argmax(flat, axis=1) : i64[N]");
  has("am0 = argmax(flat, keepdims=true) : i64[1, 4]");
  has("sm = log_softmax(c, axis=1) : f32[N, 4, 4, 4]");
  has("ln = layer_norm(flat, ln_s, ln_s, epsilon=1e-06) : f32[N, 4]");
  has("ln2 = layer_norm(flat, ln_s, ln_s) : f32[N, 4]");
  has("cl = clamp(ln, min=0.0, max=6.0) : f32[N, 4]");
  has("cl2 = clamp(ln, max=-0.5) : f32[N, 4]");
  has("ca = cast(cl, to=f16) : f16[N, 4]");
  has("tr = transpose(c, perm=[0, 2, 3, 1]) : f32[N, 4, 4, 4]");
  has("bt = broadcast_to(g, shape=[N, 4, 2, 2]) : f32[N, 4, 2, 2]");
  has("sl = slice(c, starts=[0], ends=[2], axes=[1]) : f32[N, 2, 4, 4]");
  has("sl2 = slice(s, starts=[0, 3], ends=[2, -4], steps=[1, -1]) : f32[2, 1]");
  has("cs = concat(s, s) : f32[8, 6]");
  has("cc = concat(c, c, axis=1) : f32[N, 8, 4, 4]");
  has("cc0 = concat(flat, flat, axis=1) : f32[N, 8]");
  has("ga = gather(c, idx, axis=1) : f32[N, 5, 4, 4]");
  CHECK(text.find("graph attrs(x: f32[N, 3, 8, 8], s: f32[4, 6], idx: i64[5]) -> (c0: f32[N, 4, 6, 6], ") == 0);
}

TEST_CASE("ir.printer: constant literals") {
  CHECK(constant_line(tensor_of(DType::kF32, {2, 2}, {1, 2, 3, 4.5})) == "c = const f32[2, 2] [[1.0, 2.0], [3.0, 4.5]]");
  CHECK(constant_line(tensor_of(DType::kF32, {10}, std::vector<double>(10, 0.0))) == "c = const f32[10] 0.0");
  CHECK(constant_line(tensor_of(DType::kF32, {}, {-2.5})) == "c = const f32[] -2.5");
  CHECK(constant_line(tensor_of(DType::kF32, {3}, {0.1, 1e-5, 3e20})) == "c = const f32[3] [0.1, 1e-05, 3e+20]");
  CHECK(constant_line(tensor_of(DType::kI64, {3}, {-1, 0, 1e15})) == "c = const i64[3] [-1, 0, 1000000000000000]");
  CHECK(constant_line(tensor_of(DType::kU8, {2}, {255, 7})) == "c = const u8[2] [255, 7]");
  CHECK(constant_line(tensor_of(DType::kBool, {2, 1}, {1, 0})) == "c = const bool[2, 1] [[true], [false]]");
  CHECK(constant_line(tensor_of(DType::kBool, {4}, {1, 1, 1, 1})) == "c = const bool[4] true");
  CHECK(constant_line(tensor_of(DType::kF32, {0, 3}, {})) == "c = const f32[0, 3] 0.0");
  CHECK(constant_line(tensor_of(DType::kI32, {1, 2, 2}, {1, 2, 3, 4})) == "c = const i32[1, 2, 2] [[[1, 2], [3, 4]]]");
  // -0.0 and 0.0 differ in bits, so this is not a splat.
  CHECK(constant_line(tensor_of(DType::kF32, {2}, {0.0, -0.0})) == "c = const f32[2] [0.0, -0.0]");
  // Non-finite values print as identifiers.
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(constant_line(tensor_of(DType::kF32, {3}, {inf, -inf, std::nan("")})) == "c = const f32[3] [inf, -inf, nan]");
  // f16 / bf16 print their shortest round-tripping decimal.
  CHECK(constant_line(tensor_of(DType::kF16, {3}, {0.1, 100, 65504})) == "c = const f16[3] [0.1, 100.0, 65500.0]");
  CHECK(constant_line(tensor_of(DType::kBF16, {2}, {0.1, 3.0})) == "c = const bf16[2] [0.1, 3.0]");
  // So do the 8-bit floats (0.1 is 0.1015625 in f8e4m3fn, 0.09375 in f8e5m2; 450 reads back as
  // 448, 60000 as 57344); NaN and inf as above.
  CHECK(constant_line(tensor_of(DType::kF8E4M3FN, {4}, {0.1, 448, -0.0, std::nan("")})) ==
        "c = const f8e4m3fn[4] [0.1, 450.0, -0.0, nan]");
  CHECK(constant_line(tensor_of(DType::kF8E5M2, {3}, {0.1, 57344, -inf})) == "c = const f8e5m2[3] [0.09, 60000.0, -inf]");
  // Elided above the limit.
  std::vector<double> many(20);
  for (size_t i = 0; i < many.size(); ++i) many[i] = double(i);
  CHECK(constant_line(tensor_of(DType::kF32, {20}, many), PrintOptions{10}) ==
        "c = const f32[20] [...]  # 20 elements elided (not parseable); first: 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0");
  CHECK(constant_line(tensor_of(DType::kF32, {20}, many), PrintOptions{0}).find("19.0]") != std::string::npos);
}

TEST_CASE("ir.printer: f32 literals round-trip exactly") {
  const float values[] = {0.1f, 1.0f / 3.0f, 16777217.0f, 1e-45f, 3.4028235e38f, -123.456f, 1e-7f};
  for (float v : values) {
    std::string line = constant_line(tensor_of(DType::kF32, {}, {v}));
    std::string literal = line.substr(line.rfind(' ') + 1);
    CHECK(std::strtof(literal.c_str(), nullptr) == v);
    CHECK(literal.find_first_of(".e") != std::string::npos);
  }
  // Every f16 value reads back to itself.
  for (uint32_t bits = 0; bits < 0x7c00; bits += 7) {
    float v = kiln::f16_to_f32(uint16_t(bits));
    std::string line = constant_line(tensor_of(DType::kF16, {}, {v}));
    std::string literal = line.substr(line.rfind(' ') + 1);
    CHECK(kiln::f32_to_f16(std::strtof(literal.c_str(), nullptr)) == bits);
  }
}

TEST_CASE("ir.printer: fused graphs print kernel groups") {
  GraphBuilder b = build_mlp();
  Graph& g = b.graph;
  auto id = [&](const char* name) { return g.find(name); };
  Kernel mm{"matmul_0", KernelKind::kMatMul, {id("h")}, id("h"), {id("x"), id("w1")}, {id("h")}};
  Kernel ew{"fused_add_gelu_add_1", KernelKind::kElementwise, {id("a.1"), id("a"), id("logits")}, kNoNode,
            {id("h"), id("b1"), id("b2")}, {id("logits")}};
  Kernel sm{"softmax_2", KernelKind::kNormalization, {id("probs")}, id("probs"), {id("logits")}, {id("probs")}};
  // Kernel order, not node order, decides the grouping.
  g.kernels() = {mm, ew, sm};
  CHECK(print_graph(g) ==
        "weights \"mlp.safetensors\"\n"
        "\n"
        "graph mlp(x: f32[N, 784]) -> (probs: f32[N, 256]) {\n"
        "  w1 = param f32[784, 256] \"fc1.weight\"\n"
        "  b1 = param f32[256] \"fc1.bias\"\n"
        "  b2 = const f32[256] 0.0\n"
        "  # kernel matmul_0 (matmul) from: h -> writes: h\n"
        "  h = matmul(x, w1) : f32[N, 256]\n"
        "  # kernel fused_add_gelu_add_1 (elementwise) from: a.1, a, logits -> writes: logits\n"
        "  a.1 = add(h, b1) : f32[N, 256]\n"
        "  a = gelu(a.1, approximate=\"tanh\") : f32[N, 256]\n"
        "  logits = add(a, b2) : f32[N, 256]\n"
        "  # kernel softmax_2 (normalization) from: probs -> writes: probs\n"
        "  probs = softmax(logits) : f32[N, 256]\n"
        "}\n");

  // A node outside every kernel prints as soon as its operands exist.
  NodeId r = b.op(OpKind::kReshape, "r", {id("logits")}, ReshapeAttrs{{Dim::symbol("N"), Dim::of(16), Dim::of(16)}});
  b.output("r", r);
  std::string text = print_graph(g);
  CHECK(text.find("  logits = add(a, b2) : f32[N, 256]\n  r = reshape(logits, shape=[N, 16, 16]) : f32[N, 16, 16]\n"
                  "  # kernel softmax_2") != std::string::npos);
}

TEST_CASE("ir.printer: outputs rewired by a pass still print as valid text") {
  GraphBuilder b;
  b.graph.name = "g";
  NodeId x = b.input("x", "f32[N, 4]");
  NodeId e = b.op(OpKind::kExp, "e", {x});
  NodeId t = b.op(OpKind::kTanh, "t", {e});
  b.output("y", t);  // the value is named t, the output y: t prints as y
  b.output("z", x);  // an input cannot be renamed: an identity reshape defines z
  b.output("w", t);  // t is already y: another alias
  CHECK(print_graph(b.graph) ==
        "graph g(x: f32[N, 4]) -> (y: f32[N, 4], z: f32[N, 4], w: f32[N, 4]) {\n"
        "  e = exp(x) : f32[N, 4]\n"
        "  y = tanh(e) : f32[N, 4]\n"
        "  z = reshape(x, shape=[N, 4]) : f32[N, 4]  # output alias\n"
        "  w = reshape(y, shape=[N, 4]) : f32[N, 4]  # output alias\n"
        "}\n");
}

TEST_CASE("ir.printer: strings are escaped") {
  GraphBuilder b;
  b.graph.name = "g";
  b.graph.weights_path = "dir with \"quotes\"\\w.safetensors";
  NodeId c = b.constant("c", Tensor::zeros(DType::kF32, {1}).value(), "we\"ird");
  b.output("c", c);
  std::string text = print_graph(b.graph);
  CHECK(text.find("weights \"dir with \\\"quotes\\\"\\\\w.safetensors\"\n") == 0);
  CHECK(text.find("  c = param f32[1] \"we\\\"ird\"\n") != std::string::npos);
}

TEST_CASE("ir.printer: dot output") {
  GraphBuilder b = build_mlp();
  std::string plain = print_dot(b.graph);
  CHECK(plain.rfind("digraph \"mlp\" {\n", 0) == 0);
  CHECK(plain.find("label=\"h\\nmatmul\\nf32[N, 256]\"") != std::string::npos);
  CHECK(plain.find("label=\"x\\ninput\\nf32[N, 784]\", shape=invhouse") != std::string::npos);
  CHECK(plain.find("label=\"probs\\noutput\\nf32[N, 256]\", shape=house") != std::string::npos);
  CHECK(plain.find("label=\"w1\\nparam fc1.weight\\nf32[784, 256]\", shape=note") != std::string::npos);
  const NodeId h = b.graph.find("h");
  const NodeId x = b.graph.find("x");
  CHECK(plain.find("  n" + std::to_string(x) + " -> n" + std::to_string(h) + ";\n") != std::string::npos);
  CHECK(plain.find("subgraph") == std::string::npos);
  CHECK(plain.substr(plain.size() - 2) == "}\n");

  Graph& g = b.graph;
  g.kernels() = {Kernel{"fused_add_gelu_add_1", KernelKind::kElementwise,
                        {g.find("a.1"), g.find("a"), g.find("logits")}, kNoNode,
                        {g.find("h"), g.find("b1"), g.find("b2")}, {g.find("logits")}}};
  std::string fused = print_dot(g);
  const size_t cluster = fused.find("  subgraph cluster_0 {\n    label=\"fused_add_gelu_add_1\";\n");
  REQUIRE(cluster != std::string::npos);
  const size_t cluster_end = fused.find("  }\n", cluster);
  const std::string body = fused.substr(cluster, cluster_end - cluster);
  CHECK(body.find("label=\"a\\ngelu\\nf32[N, 256]\"") != std::string::npos);
  CHECK(body.find("label=\"logits\\nadd") != std::string::npos);
  CHECK(body.find("label=\"h\\n") == std::string::npos);

  g.name = "we\"ird";
  CHECK(print_dot(g).rfind("digraph \"we\\\"ird\" {", 0) == 0);
}

TEST_CASE("ir.printer: print and parse reach a fixpoint over every op family") {
  const std::string source = R"(
graph t(x: f32[N, 784], m: bool[N, 1], idx: i64[3], img: f32[N, 3, 8, 8]) -> (probs: f32[N, 10], x: f32[N, 784], s: f32[N, 2, 2], y: f32[N, 784]) {
  w = const f32[784, 10] 0.5
  c = const f32[2, 2] [[1.0, -2.5], [inf, nan]]
  h = const f16[3] [0.1, -inf, 65504]
  probs = softmax(add(matmul(x, w), const f32[10] 1e-5), axis=-1) : f32[N, 10]
  r = reduce_sum(x)
  r2 = reduce_max(x, axes=[-1], keepdims=true)
  s = reshape(slice(x, starts=[0], ends=[4], axes=[1]), shape=[N, 2, 2])
  am = argmax(x, axis=-1)
  cl = clamp(gelu(x, approximate="tanh"), min=0, max=6.5)
  y = where(m, cl, neg(x))
  cv = conv2d(img, const f32[4, 3, 3, 3] 0.25, strides=[2, 2], pads=[1, 1, 1, 1])
  ln = layer_norm(x, const f32[784] 1.0, const f32[784] 0.0, epsilon=1e-6)
  t = transpose(x, perm=[1, 0])
  ca = cast(x, to=bf16)
  cc = concat(x, x, axis=1)
  ga = gather(w, idx)
  mp = max_pool2d(img, kernel=[2, 2], strides=[2, 2])
  ap = avg_pool2d(img, kernel=[3, 3], pads=[1, 1, 1, 1], count_include_pad=true)
  gp = global_avg_pool2d(img)
  bt = broadcast_to(const f32[1] 2.0, shape=[N, 3])
  sl = slice(x, starts=[5, 0], ends=[1, 9223372036854775807], axes=[1, 0], steps=[-2, 1])
  lg = and(not(m), less(const f32[] 0.0, reduce_mean(x, axes=[1], keepdims=true)))
}
)";
  auto parse = [](const std::string& text) {
    kiln::Diagnostics diags;
    auto g = kiln::frontend::parse_graph_text(text, "t.graph", "", diags);
    INFO(diags.to_string() << text);
    REQUIRE(g.is_ok());
    return std::move(g).value();
  };
  Graph first = parse(source);
  const std::string once = print_graph(first);
  const std::string twice = print_graph(parse(once));
  CHECK(once == twice);
  CHECK(once.find("  c = const f32[2, 2] [[1.0, -2.5], [inf, nan]]\n") != std::string::npos);
  CHECK(once.find("  probs = softmax(probs.3) : f32[N, 10]\n") != std::string::npos);
  CHECK(once.find("  ln = layer_norm(x, ln.1, ln.2, epsilon=1e-06) : f32[N, 784]\n") != std::string::npos);
}
