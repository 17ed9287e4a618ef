// Unit tests of the C++ GraphBuilder: it builds the same graphs as the parser, checks shapes as
// it goes, and reports errors (naming the node) from finish().
#include <doctest/doctest.h>

#include <algorithm>

#include "frontend/builder.h"
#include "frontend/parser.h"

namespace {

using namespace kiln;
using frontend::GraphBuilder;
using frontend::Value;
using ir::Dim;

ir::Tensor filled(std::vector<int64_t> shape, double v) {
  ir::Tensor t = ir::Tensor::zeros(ir::DType::kF32, shape).value();
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_element_from_double(i, v);
  return t;
}

}  // namespace

TEST_CASE("frontend builder: an MLP matches the parsed .graph") {
  GraphBuilder b("mlp");
  Value x = b.input("x", ir::DType::kF32, {Dim::symbol("N"), Dim::of(8)});
  Value w1 = b.constant(filled({8, 16}, 0.1), "w1");
  Value b1 = b.constant(filled({16}, 0.0), "b1");
  Value h = b.gelu(b.add(b.matmul(x, w1), b1), /*tanh_approximation=*/true);
  Value logits = b.matmul(h, b.constant(filled({16, 4}, 0.2), "w2"));
  Value probs = b.softmax(logits, -1);
  REQUIRE(b.type_of(probs) != nullptr);
  CHECK(b.type_of(probs)->to_string() == "f32[N, 4]");
  b.output("probs", probs);
  Result<ir::Graph> g = std::move(b).finish();
  REQUIRE(g.is_ok());
  CHECK(g->name == "mlp");
  REQUIRE(g->inputs().size() == 1);
  REQUIRE(g->outputs().size() == 1);
  CHECK(g->outputs()[0].name == "probs");
  CHECK(g->node(g->outputs()[0].node).name == "probs");
  CHECK(g->outputs()[0].declared.to_string() == "f32[N, 4]");
  CHECK(g->node(g->find("gelu.1")).op == ir::OpKind::kGelu);
  CHECK(std::get<ir::GeluAttrs>(g->node(g->find("gelu.1")).attrs).tanh_approximation);

  Diagnostics diags;
  Result<ir::Graph> parsed = frontend::parse_graph_text(R"(
graph mlp(x: f32[N, 8]) -> (probs: f32[N, 4]) {
  w1 = const f32[8, 16] 0.1
  b1 = const f32[16] 0
  h = gelu(add(matmul(x, w1), b1), approximate="tanh")
  w2 = const f32[16, 4] 0.2
  probs = softmax(matmul(h, w2), axis=-1)
}
)",
                                                        "mlp.graph", "", diags);
  REQUIRE(parsed.is_ok());
  // Same ops in the same order with the same types.
  REQUIRE(parsed->num_nodes() == g->num_nodes());
  std::vector<std::pair<ir::OpKind, std::string>> built, from_text;
  for (const ir::Node& n : g->nodes()) built.emplace_back(n.op, n.type.to_string());
  for (const ir::Node& n : parsed->nodes()) from_text.emplace_back(n.op, n.type.to_string());
  std::sort(built.begin(), built.end());
  std::sort(from_text.begin(), from_text.end());
  CHECK(built == from_text);
}

TEST_CASE("frontend builder: every op family has a typed helper") {
  GraphBuilder b("all");
  Value x = b.input("x", ir::DType::kF32, {Dim::of(2), Dim::of(3), Dim::of(4), Dim::of(4)});
  Value idx = b.input("idx", ir::DType::kI64, {Dim::of(2)});
  Value two = b.scalar(2.0);
  CHECK(b.type_of(two)->to_string() == "f32[]");
  Value e = b.exp(b.neg(b.abs(x)));
  Value m = b.maximum(b.mul(e, two), b.sqrt(b.relu(x)));
  Value cmp = b.greater(m, b.full(0.5, ir::DType::kF32, {4}));
  CHECK(b.type_of(cmp)->dtype == ir::DType::kBool);
  Value sel = b.where(b.logical_and(cmp, b.logical_not(cmp)), m, x);
  Value cast = b.cast(sel, ir::DType::kF16);
  CHECK(b.type_of(cast)->dtype == ir::DType::kF16);
  Value cl = b.clamp(sel, -1.0, std::nullopt);
  CHECK(b.type_of(b.reduce_sum(cl, {1}, true))->to_string() == "f32[2, 1, 4, 4]");
  CHECK(b.type_of(b.reduce_mean(cl))->to_string() == "f32[]");
  CHECK(b.type_of(b.argmax(cl, 1))->to_string() == "i64[2, 4, 4]");
  Value ln = b.layer_norm(cl, b.full(1, ir::DType::kF32, {4}), b.full(0, ir::DType::kF32, {4}));
  CHECK(b.type_of(b.log_softmax(ln, 1))->to_string() == "f32[2, 3, 4, 4]");
  CHECK(b.type_of(b.reshape(ln, {Dim::of(2), Dim::of(-1)}))->to_string() == "f32[2, 48]");
  CHECK(b.type_of(b.transpose(ln, {0, 2, 3, 1}))->to_string() == "f32[2, 4, 4, 3]");
  CHECK(b.type_of(b.slice(ln, {0}, {2}, {1}))->to_string() == "f32[2, 2, 4, 4]");
  CHECK(b.type_of(b.concat({ln, ln}, 1))->to_string() == "f32[2, 6, 4, 4]");
  CHECK(b.type_of(b.gather(ln, idx, 2))->to_string() == "f32[2, 3, 2, 4]");
  CHECK(b.type_of(b.broadcast_to(b.scalar(1), {Dim::of(3), Dim::of(2)}))->to_string() == "f32[3, 2]");
  Value conv = b.conv2d(ln, b.full(0.1, ir::DType::kF32, {5, 3, 3, 3}), b.full(0, ir::DType::kF32, {5}),
                        ir::Conv2dAttrs{.strides = {1, 1}, .pads = {1, 1, 1, 1}});
  CHECK(b.type_of(conv)->to_string() == "f32[2, 5, 4, 4]");
  ir::Pool2dAttrs pool{.kernel = {2, 2}, .strides = {2, 2}};
  CHECK(b.type_of(b.max_pool2d(conv, pool))->to_string() == "f32[2, 5, 2, 2]");
  CHECK(b.type_of(b.avg_pool2d(conv, pool))->to_string() == "f32[2, 5, 2, 2]");
  Value out = b.global_avg_pool2d(conv);
  CHECK(b.type_of(out)->to_string() == "f32[2, 5, 1, 1]");
  b.output("y", out);
  CHECK(b.ok());
  Result<ir::Graph> g = std::move(b).finish();
  REQUIRE(g.is_ok());
  CHECK(g->node(g->outputs()[0].node).name == "y");
}

TEST_CASE("frontend builder: errors accumulate, name the node, and do not cascade") {
  GraphBuilder b("bad");
  Value x = b.input("x", ir::DType::kF32, {Dim::symbol("N"), Dim::of(4)});
  Value bad = b.add(x, b.full(1, ir::DType::kF32, {3}));
  CHECK_FALSE(bad.valid());
  Value later = b.neg(b.exp(bad));  // silent: depends on the failed value
  CHECK_FALSE(later.valid());
  Value bad2 = b.matmul(x, b.full(1, ir::DType::kF32, {5, 2}));
  CHECK_FALSE(bad2.valid());
  b.output("y", later);
  CHECK(b.errors().size() == 2);
  Result<ir::Graph> g = std::move(b).finish();
  REQUIRE_FALSE(g.is_ok());
  const std::string& msg = g.status().message();
  INFO(msg);
  CHECK(msg.find("node 'add.1' (add): cannot broadcast f32[N, 4] with f32[3]") != std::string::npos);
  CHECK(msg.find("node 'matmul.1' (matmul)") != std::string::npos);
}

TEST_CASE("frontend builder: names, outputs and misuse") {
  GraphBuilder b("names");
  Value x = b.input("x", ir::DType::kF32, {Dim::of(2)});
  Value h = b.named(b.neg(x), "h");
  CHECK(h.valid());
  b.output("y", h);  // h already has a user name: not renamed
  CHECK(b.errors().size() == 1);
  GraphBuilder c("dup");
  Value cx = c.input("x", ir::DType::kF32, {Dim::of(2)});
  c.input("x", ir::DType::kF32, {Dim::of(2)});
  c.output("x", cx);
  CHECK(c.errors().size() == 1);
  CHECK(c.errors()[0].find("already used") != std::string::npos);
  GraphBuilder d("empty");
  d.input("x", ir::DType::kF32, {Dim::of(2)});
  CHECK_FALSE(std::move(d).finish().is_ok());
  GraphBuilder e("foreign");
  Value stray = e.neg(Value{});
  CHECK_FALSE(stray.valid());
  CHECK(e.errors().size() == 1);
}
