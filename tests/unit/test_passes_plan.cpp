// Unit tests of memory planning and the plan's text form.
#include <doctest/doctest.h>

#include "test_passes_helpers.h"

namespace kiln::passes {
namespace {

using ir::NodeId;
using ir::OpKind;
using ir::SizeExpr;
using ir::Storage;
using testing::compile;
using testing::GraphBuilder;
using testing::options_at;

// x -> exp -> transpose -> exp -> transpose -> exp (output): four arena values, each dead two
// launches after it is written, so the third reuses the first's slot.
GraphBuilder transposed_chain(std::string_view rows) {
  GraphBuilder b;
  NodeId x = b.input("x", std::string(rows) + ", 256");
  NodeId e1 = b.op(OpKind::kExp, "e1", {x});
  NodeId t1 = b.op(OpKind::kTranspose, "t1", {e1}, ir::TransposeAttrs{{1, 0}});
  NodeId e2 = b.op(OpKind::kExp, "e2", {t1});
  NodeId t2 = b.op(OpKind::kTranspose, "t2", {e2}, ir::TransposeAttrs{{1, 0}});
  b.output(b.op(OpKind::kExp, "y", {t2}));
  return b;
}

TEST_CASE("passes plan: arena slots are reused after a value's last reader") {
  GraphBuilder b = transposed_chain("4");
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(plan.launches.size() == 5);
  const int64_t size = 4 * 256 * 4;
  auto offset = [&](const char* name) {
    const ir::BufferAssignment* buffer = plan.find_buffer(b.graph.find(name));
    REQUIRE(buffer != nullptr);
    REQUIRE(buffer->storage == Storage::kArena);
    CHECK(buffer->size == SizeExpr::constant(size));
    return buffer->offset;
  };
  CHECK(offset("e1") == SizeExpr::constant(0));
  CHECK(offset("t1") == SizeExpr::constant(size));
  CHECK(offset("e2") == SizeExpr::constant(0));  // e1 died after launch 1
  CHECK(offset("t2") == SizeExpr::constant(size));
  CHECK(plan.arena_bytes == SizeExpr::constant(2 * size));
  CHECK(plan.find_buffer(b.graph.find("x"))->storage == Storage::kInput);
  CHECK(plan.find_buffer(b.graph.find("y"))->storage == Storage::kOutput);
  for (size_t i = 0; i < plan.launches.size(); ++i) CHECK(plan.launches[i].kernel == i);
}

TEST_CASE("passes plan: symbolic sizes and the text form") {
  GraphBuilder b = transposed_chain("N");
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  CHECK(plan.arena_bytes.to_string() == "2048*N");
  std::string text = print_plan(b.graph, plan);
  CHECK(text.find("launch exp_0 in(x) out(e1@arena+0) shape=[N, 256]") != std::string::npos);
  CHECK(text.find("launch transpose_1 in(e1) out(t1@arena+1024*N) shape=[256, N]") !=
        std::string::npos);
  CHECK(text.find("launch exp_4 in(t2) out(y@output) shape=[N, 256]") != std::string::npos);
  CHECK(text.find("buffer e2 arena offset=0 size=1024*N\n") != std::string::npos);
  CHECK(text.find("buffer x input size=1024*N\n") != std::string::npos);
  CHECK(text.find("peak arena bytes: 2048*N\n") != std::string::npos);
  // Every launch line begins with the word "launch".
  size_t launches = 0;
  for (size_t at = text.find("launch "); at != std::string::npos; at = text.find("launch ", at + 1)) {
    CHECK((at == 0 || text[at - 1] == '\n'));
    ++launches;
  }
  CHECK(launches == 5);
}

TEST_CASE("passes plan: sizes are aligned to 64 bytes; a larger value grows a free top slot") {
  // -fno-fuse: one kernel per op, so every intermediate is in the arena.
  GraphBuilder b;
  NodeId x = b.input("x", "1, 3");                       // 12 bytes
  NodeId a = b.op(OpKind::kExp, "a", {x});
  NodeId n = b.op(OpKind::kNeg, "n", {a});
  NodeId t = b.op(OpKind::kTanh, "t", {n});
  NodeId big = b.op(OpKind::kBroadcastTo, "big", {t}, ir::BroadcastToAttrs{testing::dims("100, 3")});
  b.output(b.op(OpKind::kNeg, "y", {big}));
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2, /*fuse=*/false));
  auto offset = [&](const char* name) { return plan.find_buffer(b.graph.find(name))->offset; };
  CHECK(offset("a") == SizeExpr::constant(0));
  CHECK(offset("n") == SizeExpr::constant(64));   // 12 bytes, aligned up to 64
  CHECK(offset("t") == SizeExpr::constant(0));    // a is dead after n
  // n's slot is free and at the top of the arena: the 1200-byte value grows it in place.
  CHECK(offset("big") == SizeExpr::constant(64));
  CHECK(plan.arena_bytes == SizeExpr::constant(64 + 1216));
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes plan: views share their buffer and extend its lifetime") {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 4");
  NodeId e = b.op(OpKind::kExp, "e", {x});
  NodeId t = b.op(OpKind::kTranspose, "t", {e}, ir::TransposeAttrs{{1, 0}});
  NodeId r = b.op(OpKind::kReshape, "r", {t}, ir::ReshapeAttrs{testing::dims("2, 2, N")});
  NodeId t2 = b.op(OpKind::kTranspose, "t2", {x}, ir::TransposeAttrs{{1, 0}});  // reads x only
  NodeId n = b.op(OpKind::kNeg, "n", {t2});
  NodeId r2 = b.op(OpKind::kReshape, "r2", {n}, ir::ReshapeAttrs{testing::dims("2, 2, N")});
  b.output(b.op(OpKind::kAdd, "y", {r, r2}));
  ir::Graph original = b.graph.clone();
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  const ir::BufferAssignment* view = plan.find_buffer(b.graph.find("r"));
  REQUIRE(view != nullptr);
  CHECK(view->storage == Storage::kAlias);
  CHECK(view->alias_of == b.graph.find("t"));
  const ir::BufferAssignment* viewed = plan.find_buffer(b.graph.find("t"));
  CHECK(view->offset == viewed->offset);
  // t stays alive (through r) until the last launch, so nothing written after it overlaps it.
  const ir::BufferAssignment* neg = plan.find_buffer(b.graph.find("n"));
  CHECK(!(neg->offset == viewed->offset));
  testing::check_same_results(original, b.graph);
}

TEST_CASE("passes plan: reductions launch over the kept dims") {
  GraphBuilder b;
  NodeId x = b.input("x", "N, 5, 7");
  b.output(b.op(OpKind::kReduceMean, "y", {x}, ir::ReduceAttrs{{0, 2}, false, false}));
  NodeId am = b.op(OpKind::kArgMax, "am", {x}, ir::ArgMaxAttrs{1, false});
  b.output(am);
  ir::ExecutionPlan plan = compile(b.graph, options_at(2));
  REQUIRE(plan.launches.size() == 2);
  CHECK(plan.launches[0].launch_shape == testing::dims("1, 5, 1"));
  CHECK(plan.launches[1].launch_shape == testing::dims("N, 1, 7"));
}

}  // namespace
}  // namespace kiln::passes
