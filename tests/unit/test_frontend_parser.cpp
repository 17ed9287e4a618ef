// Unit tests of the .graph lexer and parser: every construct of the grammar, nested literals,
// attributes, symbolic sizes, and the diagnostics with their locations.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "frontend/lexer.h"
#include "frontend/parser.h"

namespace {

using namespace kiln;
using kiln::frontend::parse_graph_text;

struct Parsed {
  Result<ir::Graph> graph;
  std::string errors;  // all diagnostics, one per line
};

Parsed parse(const std::string& text) {
  Diagnostics diags(50);
  Result<ir::Graph> g = parse_graph_text(text, "t.graph", "", diags);
  return Parsed{std::move(g), diags.to_string()};
}

// Parses a graph that must be valid and returns it.
ir::Graph parse_ok(const std::string& text) {
  Parsed p = parse(text);
  INFO(p.errors);
  REQUIRE(p.graph.is_ok());
  CHECK(p.errors.empty());
  return std::move(p.graph).value();
}

const ir::Node& node_named(const ir::Graph& g, const std::string& name) {
  ir::NodeId id = g.find(name);
  REQUIRE_MESSAGE(id != ir::kNoNode, "no node " << name);
  return g.node(id);
}

// Wraps statements in a signature with one input x: f32[N, 4] and output y.
std::string body(const std::string& stmts, const std::string& out_type = "f32[N, 4]") {
  return "graph g(x: f32[N, 4]) -> (y: " + out_type + ") {\n" + stmts + "}\n";
}

}  // namespace

TEST_CASE("frontend lexer: tokens, positions and line starts") {
  frontend::Lexer lex("graph g(x: f32[N]) -> {\n  a = -1.5e-3 # c\n\"s\\\"q\"}");
  std::vector<frontend::Token> toks;
  for (;;) {
    frontend::Token t = lex.next();
    toks.push_back(t);
    if (t.kind == frontend::TokenKind::kEnd) break;
  }
  using K = frontend::TokenKind;
  std::vector<K> kinds;
  for (auto& t : toks) kinds.push_back(t.kind);
  std::vector<K> expected = {K::kIdent, K::kIdent, K::kLParen, K::kIdent, K::kColon, K::kIdent,
                             K::kLBracket, K::kIdent, K::kRBracket, K::kRParen, K::kArrow, K::kLBrace,
                             K::kIdent, K::kEquals, K::kMinus, K::kFloat, K::kString, K::kRBrace, K::kEnd};
  CHECK(kinds == expected);
  CHECK(toks[12].text == "a");
  CHECK(toks[12].line == 2);
  CHECK(toks[12].column == 3);
  CHECK(toks[12].first_on_line);
  CHECK_FALSE(toks[13].first_on_line);
  CHECK(toks[15].text == "1.5e-3");
  CHECK(frontend::decode_string(toks[16]) == "s\"q");
}

TEST_CASE("frontend lexer: garbage runs are one token; NUL bytes are safe") {
  std::string text("a \x01\x02\xff\xfe b", 8);
  text += std::string("\0\0", 2);
  frontend::Lexer lex(text);
  CHECK(lex.next().kind == frontend::TokenKind::kIdent);
  frontend::Token bad = lex.next();
  CHECK(bad.kind == frontend::TokenKind::kError);
  CHECK(bad.text.size() == 4);
  CHECK(lex.next().text == "b");
  CHECK(lex.next().kind == frontend::TokenKind::kError);
  CHECK(lex.next().kind == frontend::TokenKind::kEnd);
  CHECK(lex.next().kind == frontend::TokenKind::kEnd);
}

TEST_CASE("frontend parser: the spec's MLP with nested calls and checked types") {
  ir::Graph g = parse_ok(R"(
graph mlp(x: f32[N, 784]) -> (probs: f32[N, 10]) {
  w1 = const f32[784, 256] 0.01
  b1 = const f32[256] 0.0
  w2 = const f32[256, 10] 0.02
  b2 = const f32[10] 0.0                      # a single number fills the tensor
  h = matmul(x, w1) : f32[N, 256]
  a = gelu(add(h, b1), approximate="tanh")    # calls nest
  logits = add(matmul(a, w2), b2)
  probs = softmax(logits, axis=-1)
}
)");
  CHECK(g.name == "mlp");
  REQUIRE(g.inputs().size() == 1);
  const ir::Node& x = g.node(g.inputs()[0]);
  CHECK(x.op == ir::OpKind::kInput);
  CHECK(std::get<ir::InputAttrs>(x.attrs).index == 0);
  CHECK(x.type.to_string() == "f32[N, 784]");
  REQUIRE(g.outputs().size() == 1);
  CHECK(g.outputs()[0].name == "probs");
  CHECK(g.node(g.outputs()[0].node).name == "probs");
  CHECK(g.outputs()[0].declared.to_string() == "f32[N, 10]");

  const ir::Node& nested = node_named(g, "a.1");
  CHECK(nested.op == ir::OpKind::kAdd);
  CHECK(nested.loc.line == 8);
  CHECK(nested.loc.column == 12);
  const ir::Node& a = node_named(g, "a");
  CHECK(a.op == ir::OpKind::kGelu);
  CHECK(std::get<ir::GeluAttrs>(a.attrs).tanh_approximation);
  CHECK(a.inputs.size() == 1);
  CHECK(g.node(a.inputs[0]).name == "a.1");
  CHECK(a.loc.file == "t.graph");
  CHECK(a.loc.column == 7);
  // Nested nodes come before the node that uses them.
  CHECK(a.inputs[0] < g.find("a"));
  CHECK(node_named(g, "logits.1").op == ir::OpKind::kMatMul);
  CHECK(std::get<ir::AxisAttrs>(node_named(g, "probs").attrs).axis == 1);  // normalized by inference
  CHECK(node_named(g, "probs").type.to_string() == "f32[N, 10]");
}

TEST_CASE("frontend parser: nested literals, splats, negative numbers, inf and nan") {
  ir::Graph g = parse_ok(body(R"(  c = const f32[2, 3] [[1, -2, 3.5], [1e-5, -inf, nan]]
  s = const f32[] -7
  i = const i64[2] [-9223372036854775808, 9223372036854775807]
  b = const bool[2, 2] [[true, false], [false, true]]
  h = const f16[3] [0.5, 65504, -1]
  u = const u8[2] 255
  e = const f32[0] 0
  y = add(x, const f32[4] [1, 2, 3, 4])
)"));
  const ir::Tensor& c = g.constant_of(g.find("c"));
  CHECK(c.shape() == std::vector<int64_t>{2, 3});
  CHECK(c.element_as_double(1) == -2.0);
  CHECK(c.element_as_double(2) == 3.5);
  CHECK(c.element_as_double(3) == doctest::Approx(1e-5));
  CHECK(std::isinf(c.element_as_double(4)));
  CHECK(c.element_as_double(4) < 0);
  CHECK(std::isnan(c.element_as_double(5)));
  CHECK(g.constant_of(g.find("s")).element_as_double(0) == -7.0);
  const ir::Tensor& i = g.constant_of(g.find("i"));
  CHECK(i.data_as<int64_t>()[0] == INT64_MIN);
  CHECK(i.data_as<int64_t>()[1] == INT64_MAX);
  const ir::Tensor& b = g.constant_of(g.find("b"));
  CHECK(b.element_as_int(0) == 1);
  CHECK(b.element_as_int(1) == 0);
  CHECK(b.element_as_int(3) == 1);
  const ir::Tensor& h = g.constant_of(g.find("h"));
  CHECK(h.element_as_double(1) == 65504.0);
  const ir::Tensor& u = g.constant_of(g.find("u"));
  CHECK(u.element_as_int(0) == 255);
  CHECK(u.element_as_int(1) == 255);
  CHECK(g.constant_of(g.find("e")).num_elements() == 0);
  const ir::Tensor& nested = g.constant_of(g.find("y.1"));
  CHECK(nested.element_as_double(3) == 4.0);
}

TEST_CASE("frontend parser: attributes of every kind") {
  ir::Graph g = parse_ok(R"(
graph g(x: f32[N, 3, 8, 8], i: i64[5]) -> (y: f32[N, 3, 4, 4]) {
  c = cast(x, to=f16)
  cl = clamp(x, min=-1, max=2.5)
  r = reduce_sum(x, axes=[1, -1], keepdims=true)
  ra = reduce_mean(x)
  am = argmax(x, axis=1)
  ln = layer_norm(x, const f32[8] 1, const f32[8] 0, axis=-1, epsilon=1e-3)
  rs = reshape(x, shape=[N, -1])
  tr = transpose(x, perm=[0, 2, 3, 1])
  bt = broadcast_to(const f32[1] 2, shape=[N, 3])
  sl = slice(x, starts=[0, 1], ends=[9223372036854775807, 3], axes=[1, 2], steps=[1, 2])
  cc = concat(x, x, x, axis=1)
  ga = gather(x, i, axis=2)
  cv = conv2d(x, const f32[6, 3, 3, 3] 0.1, const f32[6] 0, strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=1)
  cv2 = conv2d(x, const f32[3, 1, 3, 3] 0.1, groups=3)
  mp = max_pool2d(x, kernel=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0])
  y = avg_pool2d(x, kernel=[2, 2], strides=[2, 2], count_include_pad=true)
  gp = global_avg_pool2d(x)
}
)");
  CHECK(std::get<ir::CastAttrs>(node_named(g, "c").attrs).to == ir::DType::kF16);
  CHECK(node_named(g, "c").type.dtype == ir::DType::kF16);
  const auto& cl = std::get<ir::ClampAttrs>(node_named(g, "cl").attrs);
  CHECK(cl.min == -1.0);
  CHECK(cl.max == 2.5);
  const auto& r = std::get<ir::ReduceAttrs>(node_named(g, "r").attrs);
  CHECK_FALSE(r.all_axes);
  CHECK(r.keepdims);
  CHECK(r.axes == std::vector<int64_t>{1, 3});
  CHECK(node_named(g, "r").type.to_string() == "f32[N, 1, 8, 1]");
  CHECK(std::get<ir::ReduceAttrs>(node_named(g, "ra").attrs).all_axes);
  CHECK(node_named(g, "ra").type.to_string() == "f32[]");
  CHECK(node_named(g, "am").type.to_string() == "i64[N, 8, 8]");
  CHECK(std::get<ir::LayerNormAttrs>(node_named(g, "ln").attrs).epsilon == 1e-3);
  const auto& rs = std::get<ir::ReshapeAttrs>(node_named(g, "rs").attrs);
  REQUIRE(rs.shape.size() == 2);
  CHECK(rs.shape[0] == ir::Dim::symbol("N"));
  CHECK(rs.shape[1] == ir::Dim::of(-1));
  CHECK(node_named(g, "rs").type.to_string() == "f32[N, 192]");
  CHECK(std::get<ir::TransposeAttrs>(node_named(g, "tr").attrs).perm == std::vector<int64_t>{0, 2, 3, 1});
  CHECK(node_named(g, "bt").type.to_string() == "f32[N, 3]");
  CHECK(std::get<ir::SliceAttrs>(node_named(g, "sl").attrs).steps == std::vector<int64_t>{1, 2});
  CHECK(node_named(g, "cc").inputs.size() == 3);
  CHECK(node_named(g, "cc").type.to_string() == "f32[N, 9, 8, 8]");
  CHECK(node_named(g, "ga").type.to_string() == "f32[N, 3, 5, 8]");
  CHECK(node_named(g, "cv").inputs.size() == 3);
  CHECK(std::get<ir::Conv2dAttrs>(node_named(g, "cv").attrs).pads == std::array<int64_t, 4>{1, 1, 1, 1});
  CHECK(node_named(g, "cv").type.to_string() == "f32[N, 6, 8, 8]");
  CHECK(node_named(g, "cv2").inputs.size() == 2);
  CHECK(std::get<ir::Conv2dAttrs>(node_named(g, "cv2").attrs).groups == 3);
  CHECK(node_named(g, "mp").type.to_string() == "f32[N, 3, 4, 4]");
  CHECK(std::get<ir::Pool2dAttrs>(node_named(g, "y").attrs).count_include_pad);
  CHECK(node_named(g, "gp").type.to_string() == "f32[N, 3, 1, 1]");
}

TEST_CASE("frontend parser: statements on one line, scalar types, unicode-free names with dots") {
  ir::Graph g = parse_ok("graph g() -> (y.out: f32[]) { a = const f32[] 1 y.out = neg(a) }");
  CHECK(g.inputs().empty());
  CHECK(g.outputs()[0].name == "y.out");
}

TEST_CASE("frontend parser: an output may be an input") {
  ir::Graph g = parse_ok("graph g(x: f32[2]) -> (x: f32[2]) {\n}\n");
  REQUIRE(g.outputs().size() == 1);
  CHECK(g.outputs()[0].node == g.inputs()[0]);
}

TEST_CASE("frontend parser: a user name that a nested call took first wins") {
  ir::Graph g = parse_ok(body("  a = neg(neg(x))\n  a.1 = abs(x)\n  y = add(a, a.1)\n"));
  CHECK(node_named(g, "a.1").op == ir::OpKind::kAbs);
  CHECK(g.node(node_named(g, "a").inputs[0]).op == ir::OpKind::kNeg);
  CHECK(g.node(node_named(g, "a").inputs[0]).name != "a.1");
}

TEST_CASE("frontend parser: diagnostics name the place and the problem") {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {body("  y = relux(x)\n"), "t.graph:2:7: error: unknown operator 'relux'"},
      {body("  y = add(h2, x)\n  h2 = neg(x)\n"), "t.graph:2:11: error: 'h2' is used before it is defined"},
      {body("  y = add(q, x)\n"), "t.graph:2:11: error: undefined value 'q'"},
      {body("  y = neg(x)\n  y = neg(x)\n"), "t.graph:3:3: error: 'y' is already defined"},
      {body("  y = softmax(x, axs=1)\n"), "t.graph:2:18: error: unknown attribute 'axs' for operator 'softmax'"},
      {body("  y = softmax(x, axis=1.5)\n"),
       "t.graph:2:23: error: attribute 'axis' of 'softmax' must be an integer, found a floating-point number"},
      {body("  y = add(x)\n"), "t.graph:2:7: error: 'add' expects 2 operands, got 1"},
      {body("  y = add(x, const f32[3] 1)\n"), "t.graph:2:7: error: cannot broadcast f32[N, 4] with f32[3]"},
      {body("  y = add(x, const f32[2, 2] [[1, 2], [3]])\n"),
       "t.graph:2:39: error: literal has 1 element in dimension 1 but f32[2, 2] needs 2"},
      {body("  y = neg(x) : f32[N, 5]\n"), "t.graph:2:16: error: 'y' is declared f32[N, 5] but its value is f32[N, 4]"},
      {body("  y = neg(x)\n", "f32[N, 5]"), "t.graph:2:3: error: output 'y' is declared f32[N, 5] but defined as f32[N, 4]"},
      {body("  z = neg(x)\n"), "t.graph:1:27: error: output 'y' is not defined"},
      {body("  y = gelu(x, approximate=\"fast\")\n"), "t.graph:2:27: error: attribute 'approximate' of 'gelu': must be"},
      {body("  y = neg(x) \"abc\n"), "t.graph:2:14: error: unterminated string"},
      {body("  y = neg(x)\n  z = const i64[1] 99999999999999999999\n"),
       "t.graph:3:20: error: integer 99999999999999999999 does not fit in 64 bits"},
      {body("  y = neg(x)\n  z = const f32[1] 1e999\n"), "t.graph:3:20: error: number 1e999 is out of range"},
      {body("  y = neg(x)\n  z = const f32[4611686018427387904, 4] 0\n"),
       "t.graph:3:13: error: shape f32[4611686018427387904, 4] has too many elements"},
      {body("  y = reshape(x, shape=[M, 4])\n"), "t.graph:2:25: error: symbolic size 'M' is not bound by any graph input"},
      {body("  y = neg(x)\n  p = param f32[2] \"w\"\n"), "t.graph:3:7: error: 'param' needs a 'weights"},
      {body("  y = neg(x)\n  z = reshape(x)\n"), "t.graph:3:7: error: 'reshape' needs the attribute 'shape'"},
      {body("  y = neg(x)\n  z = neg(x) \x01\x02\x03\n"), "t.graph:3:14: error: invalid character '\\x01'"},
      {"graph g(x: f32[4]) -> (y: f32[4]) {\n  y = add(x, neg(", "t.graph:2:18: error: unexpected end of file"},
      {"weights \"/nonexistent/w.safetensors\"\ngraph g(x: f32[4]) -> (y: f32[4]) {\n  y = neg(x)\n}\n",
       "t.graph:1:9: error: cannot open safetensors file '/nonexistent/w.safetensors'"},
      {body("  y = neg(x)\n}\nextra"), "t.graph:4:1: error: unexpected 'extra' after the end of the graph"},
      {body("  y = const i8[2] [1, 300]\n"), "t.graph:2:23: error: integer 300 is out of range for i8"},
      // 8-bit floats: a finite number that rounds beyond the largest value (464 still rounds to
      // 448), and inf where the type has none.
      {body("  y = neg(x)\n  z = const f8e4m3fn[1] 465.0\n"), "t.graph:3:25: error: number 465.0 is out of range for f8e4m3fn"},
      {body("  y = neg(x)\n  z = const f8e4m3fnuz[1] -inf\n"), "t.graph:3:27: error: f8e4m3fnuz has no infinity"},
  };
  for (const Case& c : cases) {
    Parsed p = parse(c.text);
    INFO("input:\n" << c.text << "\ndiagnostics:\n" << p.errors);
    CHECK_FALSE(p.graph.is_ok());
    CHECK(p.errors.find(c.expected) != std::string::npos);
  }
}

TEST_CASE("frontend parser: recovery reports several errors without cascades") {
  Parsed p = parse(body(R"(  a = relux(x)
  b = add(a, x)
  c = neg(b)
  d = add(x, const f32[3] 1)
  e = neg(d)
  f = neg(q)
  y = neg(x)
)"));
  CHECK_FALSE(p.graph.is_ok());
  CHECK(p.errors ==
        "t.graph:2:7: error: unknown operator 'relux'\n"
        "t.graph:5:7: error: cannot broadcast f32[N, 4] with f32[3]\n"
        "t.graph:7:11: error: undefined value 'q'\n");
}

TEST_CASE("frontend parser: deep nesting is an error, not a stack overflow") {
  const int depth = 100000;
  std::string expr;
  for (int i = 0; i < depth; ++i) expr += "neg(";
  expr += "x";
  for (int i = 0; i < depth; ++i) expr += ")";
  Parsed p = parse(body("  y = " + expr + "\n"));
  CHECK_FALSE(p.graph.is_ok());
  CHECK(p.errors.find("nesting too deep") != std::string::npos);
  // A depth within the limit is fine.
  std::string ok_expr;
  for (int i = 0; i < 200; ++i) ok_expr += "neg(";
  ok_expr += "x";
  for (int i = 0; i < 200; ++i) ok_expr += ")";
  parse_ok(body("  y = " + ok_expr + "\n"));
}

TEST_CASE("frontend parser: garbage and truncation never crash") {
  std::string garbage;
  uint32_t state = 12345;
  for (int i = 0; i < 50000; ++i) {
    state = state * 1103515245u + 12345u;
    garbage += char(state >> 24);
  }
  Parsed p = parse(garbage);
  CHECK_FALSE(p.graph.is_ok());
  CHECK_FALSE(p.errors.empty());
  // Every prefix of a valid file is either valid or a clean error.
  const std::string full = body("  a = const f32[2, 2] [[1, 2], [3, 4]]\n  y = add(x, reshape(a, shape=[4]))\n");
  for (size_t n = 0; n + 2 < full.size(); ++n) {  // the last 2 bytes are "}\n"
    Parsed q = parse(full.substr(0, n));
    CHECK_FALSE(q.graph.is_ok());
  }
}

TEST_CASE("frontend parser: error limit stops the parse") {
  std::string stmts;
  for (int i = 0; i < 100; ++i) stmts += "  v" + std::to_string(i) + " = relux(x)\n";
  Diagnostics diags(5);
  Result<ir::Graph> g = parse_graph_text(body(stmts), "t.graph", "", diags);
  CHECK_FALSE(g.is_ok());
  CHECK(diags.error_count() == 5);
}

TEST_CASE("frontend parser: inline constants are bounded") {
  // Just over 1 GiB of f32: rejected before anything is allocated.
  Parsed q = parse(body("  y = neg(x)\n  c = const f32[16384, 16385] 0\n"));
  CHECK(q.errors.find("t.graph:3:7: error: const f32[16384, 16385] is too large") != std::string::npos);
}
