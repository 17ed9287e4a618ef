// Unit tests of the pass manager and the graph-cleaning passes (folding, simplification, CSE,
// DCE, topological sort) on graphs built in code.
#include <doctest/doctest.h>

#include <set>
#include <sstream>

#include "passes/graph_edit.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"
#include "test_passes_helpers.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::NodeId;
using ir::OpKind;
using testing::compile;
using testing::count_op;
using testing::GraphBuilder;
using testing::options_at;
using testing::output_node;

// y = tanh(add(mul(x, 2), b))
GraphBuilder small_graph() {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 4");
  NodeId two = b.constant("two", {}, {2.0});
  NodeId bias = b.constant("bias", {4}, {0.5, -1, 2, 3});
  NodeId m = b.op(OpKind::kMul, "m", {x, two});
  NodeId a = b.op(OpKind::kAdd, "a", {m, bias});
  b.output(b.op(OpKind::kTanh, "y", {a}));
  return b;
}

TEST_CASE("passes: list_passes names every pass once, in pipeline order") {
  const auto& passes = list_passes();
  std::vector<std::string_view> names;
  for (const PassInfo& p : passes) {
    names.push_back(p.name);
    CHECK(!p.description.empty());
  }
  std::vector<std::string_view> expected = {"infer-shapes", "topo-sort",         "fold-constants",
                                            "simplify",     "cse",               "fold-conv-affine",
                                            "channels-last", "fuse-attention",   "dce", "fuse",
                                            "one-kernel-per-op", "plan-memory"};
  CHECK(names == expected);
}

TEST_CASE("passes: unknown --print-ir-after name is a user error listing the valid names") {
  GraphBuilder b = small_graph();
  PipelineOptions options;
  options.print_after = {"simplfy"};
  std::ostringstream log;
  options.log = &log;
  Result<ir::ExecutionPlan> plan = run_pipeline(b.graph, options);
  REQUIRE(!plan.is_ok());
  CHECK(plan.status().code() == ErrorCode::kInvalidArgument);
  CHECK(plan.status().message().find("'simplfy'") != std::string::npos);
  CHECK(plan.status().message().find("fold-constants") != std::string::npos);
  CHECK(b.graph.kernels().empty());  // checked before running anything
  CHECK(log.str().empty());
}

TEST_CASE("passes: --print-ir-after prints the IR after the named passes only") {
  GraphBuilder b = small_graph();
  PipelineOptions options;
  options.print_after = {"simplify", "fuse"};
  std::ostringstream log;
  options.log = &log;
  compile(b.graph, options);
  std::string text = log.str();
  CHECK(text.find("// ----- IR after simplify -----\n") != std::string::npos);
  CHECK(text.find("// ----- IR after fuse -----\n") != std::string::npos);
  CHECK(text.find("IR after cse") == std::string::npos);
  CHECK(text.find("tanh(") != std::string::npos);
}

TEST_CASE("passes: --print-ir-after-all prints after every pass of the pipeline") {
  for (int level : {0, 1, 2}) {
    GraphBuilder b = small_graph();
    PipelineOptions options = options_at(level);
    options.print_after_all = true;
    std::ostringstream log;
    options.log = &log;
    compile(b.graph, options);
    std::string text = log.str();
    size_t headers = 0;
    for (size_t at = text.find("// ----- IR after "); at != std::string::npos;
         at = text.find("// ----- IR after ", at + 1)) {
      ++headers;
    }
    CHECK(headers == (level == 0 ? 4u : 11u));
    CHECK(text.find("IR after plan-memory") != std::string::npos);
    CHECK((text.find("IR after fuse -----") != std::string::npos) == (level == 2));
  }
}

TEST_CASE("passes: -ftime-report prints a per-pass table") {
  GraphBuilder b = small_graph();
  PipelineOptions options;
  options.time_report = true;
  std::ostringstream log;
  options.log = &log;
  compile(b.graph, options);
  std::string text = log.str();
  CHECK(text.find("timing report") != std::string::npos);
  for (std::string_view pass : {"infer-shapes", "cse", "fuse", "plan-memory", "total"}) {
    CHECK(text.find(std::string(pass)) != std::string::npos);
  }
}

Status break_a_type(ir::Graph& graph, const PassContext&) {
  graph.node(graph.outputs()[0].node).type.dtype = DType::kI32;
  return Status::ok();
}

TEST_CASE("passes: verification after each pass names the pass that broke the graph") {
  GraphBuilder b = small_graph();
  PipelineOptions options;
  PassContext context{options, nullptr};
  const Pass broken{"break-types", "a deliberately wrong pass", break_a_type};
  std::vector<Pass> pipeline = {broken};
  Status status = run_passes(b.graph, pipeline, context);
  REQUIRE(!status.is_ok());
  CHECK(status.code() == ErrorCode::kInternal);
  CHECK(status.message().find("'break-types'") != std::string::npos);

  options.verify_each = false;
  GraphBuilder again = small_graph();
  CHECK(run_passes(again.graph, pipeline, PassContext{options, nullptr}).is_ok());
}

TEST_CASE("passes: an invalid optimization level is a user error") {
  GraphBuilder b = small_graph();
  Result<ir::ExecutionPlan> plan = run_pipeline(b.graph, options_at(3));
  REQUIRE(!plan.is_ok());
  CHECK(plan.status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("passes: UseCounts drops a constant at its last use, never one still read") {
  GraphBuilder b;
  NodeId x = b.input("x", "4");
  NodeId shared = b.constant("shared", {4}, {1, 2, 3, 4});
  NodeId single = b.constant("single", {4}, {5, 6, 7, 8});
  NodeId out = b.constant("out", {4}, {9, 9, 9, 9});
  NodeId a = b.op(OpKind::kAdd, "a", {x, shared});
  NodeId m = b.op(OpKind::kMul, "m", {a, shared});
  b.output(b.op(OpKind::kSub, "y", {m, single}));
  b.graph.outputs().push_back({"out", out, b.graph.node(out).type});  // an output is a use too
  UseCounts uses(b.graph);
  CHECK(uses.count(shared) == 2);
  CHECK(uses.count(out) == 1);
  uses.drop(b.graph, shared);
  CHECK_FALSE(b.graph.node(shared).erased);  // m still reads it
  CHECK(b.graph.constant_of(shared).num_elements() == 4);
  uses.drop(b.graph, single);
  CHECK(b.graph.node(single).erased);
  CHECK(b.graph.constants()[std::get<ir::ConstantAttrs>(b.graph.node(single).attrs).constant_index].data() == nullptr);  // freed
  uses.add(x);  // a non-constant without uses is left for dce
  uses.drop(b.graph, x);
  uses.drop(b.graph, x);
  CHECK_FALSE(b.graph.node(x).erased);
  CHECK(uses.count(out) == 1);
}

TEST_CASE("passes: fold-constants evaluates constant subgraphs") {
  GraphBuilder b;
  NodeId x = b.input("x", "3");
  NodeId c1 = b.constant("c1", {3}, {1, 2, 3});
  NodeId c2 = b.constant("c2", {}, {10});
  NodeId s = b.op(OpKind::kMul, "s", {c1, c2});   // [10, 20, 30]
  NodeId e = b.op(OpKind::kNeg, "e", {s});        // [-10, -20, -30]
  b.output(b.op(OpKind::kAdd, "y", {x, e}));
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(1));
  CHECK(count_op(b.graph, OpKind::kMul) == 0);
  CHECK(count_op(b.graph, OpKind::kNeg) == 0);
  NodeId folded = b.graph.find("e");
  REQUIRE(folded != ir::kNoNode);
  REQUIRE(b.graph.node(folded).op == OpKind::kConstant);
  const ir::Tensor& data = b.graph.constant_of(folded);
  CHECK(data.element_as_double(0) == -10);
  CHECK(data.element_as_double(2) == -30);
  CHECK(b.graph.constants().size() == 1);  // the inputs' data is gone with them
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes: fold-constants leaves results over 1M elements as ops") {
  GraphBuilder b;
  NodeId x = b.input("x", "2048, 1024");
  NodeId one = b.constant("one", {}, {1.5});
  ir::Shape big = testing::dims("2048, 1024");
  NodeId wide = b.op(OpKind::kBroadcastTo, "wide", {one}, ir::BroadcastToAttrs{big});
  b.output(b.op(OpKind::kAdd, "y", {x, wide}));
  compile(b.graph, options_at(1));
  CHECK(count_op(b.graph, OpKind::kBroadcastTo) == 1);
  for (const ir::Tensor& t : b.graph.constants()) CHECK(t.num_elements() <= kMaxFoldedElements);
}

TEST_CASE("passes: simplify removes x*1, x+0, x-0, x/1 when the type is unchanged") {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 4");
  NodeId one = b.constant("one", {}, {1});
  NodeId ones = b.constant("ones", {4}, {1});
  NodeId zero = b.constant("zero", {1, 4}, {0});
  NodeId t = b.op(OpKind::kExp, "t", {x});
  NodeId a = b.op(OpKind::kMul, "a", {t, one});
  NodeId c = b.op(OpKind::kMul, "c", {ones, a});
  NodeId d = b.op(OpKind::kAdd, "d", {c, zero});
  NodeId e = b.op(OpKind::kSub, "e", {d, zero});
  NodeId f = b.op(OpKind::kDiv, "f", {e, one});
  b.output(b.op(OpKind::kTanh, "y", {f}));
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(1));
  CHECK(count_op(b.graph, OpKind::kMul) == 0);
  CHECK(count_op(b.graph, OpKind::kAdd) == 0);
  CHECK(count_op(b.graph, OpKind::kSub) == 0);
  CHECK(count_op(b.graph, OpKind::kDiv) == 0);
  const ir::Node& y = output_node(b.graph, 0);
  REQUIRE(y.op == OpKind::kTanh);
  CHECK(b.graph.node(y.inputs[0]).op == OpKind::kExp);
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes: simplify keeps x*1 when the 1 broadcasts x to a bigger shape") {
  GraphBuilder b;
  NodeId x = b.input("x", "4");
  NodeId ones = b.constant("ones", {3, 4}, {1});
  NodeId t = b.op(OpKind::kExp, "t", {x});
  b.output(b.op(OpKind::kMul, "y", {t, ones}));
  compile(b.graph, options_at(1));
  CHECK(count_op(b.graph, OpKind::kMul) == 1);
  CHECK(output_node(b.graph, 0).type.shape == testing::dims("3, 4"));
}

TEST_CASE("passes: simplify folds neg(neg x), casts, broadcasts and reshape chains") {
  GraphBuilder b;
  NodeId x = b.input("x", "2, 3, 4");
  NodeId n1 = b.op(OpKind::kNeg, "n1", {x});
  NodeId n2 = b.op(OpKind::kNeg, "n2", {n1});
  NodeId c = b.op(OpKind::kCast, "c", {n2}, ir::CastAttrs{DType::kF32});
  NodeId bc = b.op(OpKind::kBroadcastTo, "bc", {c}, ir::BroadcastToAttrs{testing::dims("2, 3, 4")});
  NodeId r1 = b.op(OpKind::kReshape, "r1", {bc}, ir::ReshapeAttrs{testing::dims("6, 4")});
  NodeId r2 = b.op(OpKind::kReshape, "r2", {r1}, ir::ReshapeAttrs{testing::dims("24")});
  NodeId r3 = b.op(OpKind::kReshape, "r3", {r2}, ir::ReshapeAttrs{testing::dims("4, 6")});
  NodeId same = b.op(OpKind::kReshape, "same", {r3}, ir::ReshapeAttrs{testing::dims("4, 6")});
  b.output(b.op(OpKind::kExp, "y", {same}));
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(1));
  CHECK(count_op(b.graph, OpKind::kNeg) == 0);
  CHECK(count_op(b.graph, OpKind::kCast) == 0);
  CHECK(count_op(b.graph, OpKind::kBroadcastTo) == 0);
  CHECK(count_op(b.graph, OpKind::kReshape) == 1);
  const ir::Node& y = output_node(b.graph, 0);
  const ir::Node& reshape = b.graph.node(y.inputs[0]);
  REQUIRE(reshape.op == OpKind::kReshape);
  CHECK(reshape.inputs[0] == b.graph.inputs()[0]);
  CHECK(reshape.type.shape == testing::dims("4, 6"));
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes: simplify composes transposes and drops identities") {
  GraphBuilder b;
  NodeId x = b.input("x", "2, 3, 4");
  NodeId t1 = b.op(OpKind::kTranspose, "t1", {x}, ir::TransposeAttrs{{1, 2, 0}});
  NodeId t2 = b.op(OpKind::kTranspose, "t2", {t1}, ir::TransposeAttrs{{1, 0, 2}});
  NodeId e = b.op(OpKind::kExp, "e", {t2});
  NodeId u1 = b.op(OpKind::kTranspose, "u1", {x}, ir::TransposeAttrs{{2, 0, 1}});
  NodeId u2 = b.op(OpKind::kTranspose, "u2", {u1}, ir::TransposeAttrs{{1, 2, 0}});  // identity
  NodeId f = b.op(OpKind::kExp, "f", {u2});
  b.output(e);
  b.output(f);
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(1));
  CHECK(count_op(b.graph, OpKind::kTranspose) == 1);
  const ir::Node& composed = b.graph.node(output_node(b.graph, 0).inputs[0]);
  REQUIRE(composed.op == OpKind::kTranspose);
  CHECK(std::get<ir::TransposeAttrs>(composed.attrs).perm == std::vector<int64_t>{2, 1, 0});
  CHECK(output_node(b.graph, 1).inputs[0] == b.graph.inputs()[0]);
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes: outputs keep their names when simplification redirects them") {
  GraphBuilder b;
  NodeId x = b.input("x", "4");
  NodeId one = b.constant("one", {}, {1});
  NodeId t = b.op(OpKind::kExp, "t", {x});
  b.output(b.op(OpKind::kMul, "y", {t, one}));      // y -> t: t takes the name y
  b.output(b.op(OpKind::kMul, "z", {x, one}));      // z -> x (an input): a copy named z
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(2));
  const ir::Node& y = output_node(b.graph, 0);
  CHECK(y.name == "y");
  CHECK(y.op == OpKind::kExp);
  const ir::Node& z = output_node(b.graph, 1);
  CHECK(z.name == "z");
  CHECK(z.op == OpKind::kReshape);
  CHECK(z.inputs[0] == b.graph.inputs()[0]);
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes: cse merges equal ops and equal constants but not different attributes") {
  GraphBuilder b;
  NodeId x = b.input("x", "3, 4");
  NodeId c1 = b.constant("c1", {4}, {1, 2, 3, 4});
  NodeId c2 = b.constant("c2", {4}, {1, 2, 3, 4}, DType::kF32, "weights.c2");
  NodeId a1 = b.op(OpKind::kAdd, "a1", {x, c1});
  NodeId a2 = b.op(OpKind::kAdd, "a2", {x, c2});  // same as a1 once c2 merges into c1
  NodeId e1 = b.op(OpKind::kExp, "e1", {a1});
  NodeId e2 = b.op(OpKind::kExp, "e2", {a2});
  NodeId s0 = b.op(OpKind::kSoftmax, "s0", {e1}, ir::AxisAttrs{0});
  NodeId s1 = b.op(OpKind::kSoftmax, "s1", {e2}, ir::AxisAttrs{1});
  b.output(b.op(OpKind::kAdd, "y", {s0, s1}));
  ir::Graph original = b.graph.clone();
  compile(b.graph, options_at(1));
  CHECK(count_op(b.graph, OpKind::kConstant) == 1);
  CHECK(count_op(b.graph, OpKind::kAdd) == 2);
  CHECK(count_op(b.graph, OpKind::kExp) == 1);
  CHECK(count_op(b.graph, OpKind::kSoftmax) == 2);
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes: cse does not merge graph inputs") {
  GraphBuilder b;
  NodeId x1 = b.input("x1", "4");
  NodeId x2 = b.input("x2", "4");
  b.output(b.op(OpKind::kAdd, "y", {x1, x2}));
  compile(b.graph, options_at(1));
  CHECK(b.graph.inputs().size() == 2);
  CHECK(output_node(b.graph, 0).inputs[0] != output_node(b.graph, 0).inputs[1]);
}

TEST_CASE("passes: dce removes unused values but keeps every graph input") {
  GraphBuilder b;
  NodeId x = b.input("x", "4");
  b.input("unused", "2");
  NodeId dead = b.op(OpKind::kExp, "dead", {x});
  b.op(OpKind::kTanh, "dead2", {dead});
  b.output(b.op(OpKind::kNeg, "y", {x}));
  compile(b.graph, options_at(1));
  CHECK(b.graph.find("dead") == ir::kNoNode);
  CHECK(b.graph.find("dead2") == ir::kNoNode);
  CHECK(b.graph.inputs().size() == 2);
  CHECK(b.graph.find("unused") != ir::kNoNode);

  // -O0 keeps dead code (and still gives it a kernel).
  GraphBuilder o0;
  NodeId x0 = o0.input("x", "4");
  o0.op(OpKind::kExp, "dead", {x0});
  o0.output(o0.op(OpKind::kNeg, "y", {x0}));
  compile(o0.graph, options_at(0));
  CHECK(o0.graph.find("dead") != ir::kNoNode);
  CHECK(o0.graph.kernels().size() == 2);
}

TEST_CASE("passes: topo-sort orders operands first and keeps a valid order unchanged") {
  GraphBuilder b;
  NodeId x = b.input("x", "4");
  NodeId a = b.op(OpKind::kExp, "a", {x});
  NodeId c = b.op(OpKind::kNeg, "c", {a});
  b.output(b.op(OpKind::kTanh, "y", {c}));
  std::vector<std::string> before;
  for (const ir::Node& n : b.graph.nodes()) before.push_back(n.name);
  PipelineOptions options;
  PassContext context{options, nullptr};
  REQUIRE(topo_sort_pass(b.graph, context).is_ok());
  std::vector<std::string> after;
  for (const ir::Node& n : b.graph.nodes()) after.push_back(n.name);
  CHECK(before == after);

  // Now make "a" read a node placed after it: a = exp(late), late = neg(x).
  ir::Node late;
  late.op = OpKind::kNeg;
  late.name = "late";
  late.inputs = {x};
  late.attrs = ir::NoAttrs{};
  late.type = b.graph.node(x).type;
  NodeId late_id = b.graph.add_node(std::move(late));
  b.graph.node(a).inputs = {late_id};
  CHECK(!ir::verify_graph(b.graph, true).is_ok());
  REQUIRE(topo_sort_pass(b.graph, context).is_ok());
  CHECK(ir::verify_graph(b.graph, true).is_ok());
  std::vector<std::string> sorted;
  for (const ir::Node& n : b.graph.nodes()) sorted.push_back(n.name);
  CHECK(sorted == std::vector<std::string>{"x", "late", "a", "c", "y"});
}

}  // namespace
}  // namespace kiln::passes
