// Unit tests for ir/plan.h: SizeExpr polynomial arithmetic and ExecutionPlan lookups.
#include <doctest/doctest.h>

#include "ir/plan.h"

using namespace kiln::ir;

TEST_CASE("ir.plan: SizeExpr constants and symbols") {
  CHECK(SizeExpr().to_string() == "0");
  CHECK(SizeExpr::constant(0).is_constant());
  CHECK(SizeExpr::constant(0) == SizeExpr());
  CHECK(SizeExpr::constant(1024).to_string() == "1024");
  CHECK(SizeExpr::constant(1024).constant_value() == 1024);
  CHECK(SizeExpr::symbol("N").to_string() == "N");
  CHECK_FALSE(SizeExpr::symbol("N").is_constant());
  CHECK(SizeExpr::symbol("N").constant_value() == 0);
}

TEST_CASE("ir.plan: SizeExpr of a shape, sums and scaling") {
  Shape shape{Dim::symbol("N"), Dim::of(784)};
  SizeExpr bytes = SizeExpr::of_shape(shape, 4);
  CHECK(bytes.to_string() == "3136*N");
  SizeExpr total = bytes + SizeExpr::constant(1024);
  CHECK(total.to_string() == "3136*N + 1024");
  CHECK((total * 2).to_string() == "6272*N + 2048");
  CHECK((total + bytes * -1).to_string() == "1024");
  CHECK((total + bytes * -1).is_constant());
  CHECK(SizeExpr::of_shape({Dim::symbol("N"), Dim::symbol("T"), Dim::symbol("N")}, 2).to_string() == "2*N*N*T");
  CHECK(SizeExpr::of_shape({Dim::of(0), Dim::symbol("N")}, 4) == SizeExpr());
  CHECK((SizeExpr::constant(5) + SizeExpr::symbol("N") * -3).to_string() == "-3*N + 5");
  CHECK((SizeExpr::constant(-5) + SizeExpr::symbol("N") * -1).to_string() == "-N - 5");
  // Monomials are order-independent: N*T == T*N.
  CHECK(SizeExpr::of_shape({Dim::symbol("T"), Dim::symbol("N")}, 1) ==
        SizeExpr::of_shape({Dim::symbol("N"), Dim::symbol("T")}, 1));
}

TEST_CASE("ir.plan: SizeExpr evaluation, dominance and alignment") {
  SizeExpr e = SizeExpr::of_shape({Dim::symbol("N"), Dim::of(10)}, 4) + SizeExpr::constant(3);
  CHECK(*e.evaluate({{"N", 5}}) == 203);
  auto unbound = e.evaluate({});
  REQUIRE_FALSE(unbound.is_ok());
  CHECK(unbound.status().message().find("'N'") != std::string::npos);
  CHECK_FALSE(SizeExpr::of_shape({Dim::symbol("N"), Dim::symbol("N")}, 1).evaluate({{"N", int64_t(1) << 40}}).is_ok());

  SizeExpr small = SizeExpr::of_shape({Dim::symbol("N")}, 8);
  SizeExpr large = SizeExpr::of_shape({Dim::symbol("N")}, 16) + SizeExpr::constant(4);
  CHECK(large.dominates(small));
  CHECK_FALSE(small.dominates(large));
  CHECK(small.dominates(small));
  CHECK_FALSE(SizeExpr::constant(100).dominates(SizeExpr::symbol("N")));

  CHECK(SizeExpr::constant(100).align_up(64).to_string() == "128");
  CHECK(SizeExpr::constant(128).align_up(64).to_string() == "128");
  SizeExpr aligned = (SizeExpr::of_shape({Dim::symbol("N")}, 12) + SizeExpr::constant(1)).align_up(64);
  CHECK(aligned.to_string() == "64*N + 64");
  CHECK(aligned.dominates(SizeExpr::of_shape({Dim::symbol("N")}, 12) + SizeExpr::constant(1)));
  CHECK(*aligned.evaluate({{"N", 3}}) % 64 == 0);
}

TEST_CASE("ir.plan: find_buffer") {
  ExecutionPlan plan;
  plan.buffers.push_back({3, Storage::kArena, SizeExpr::constant(0), SizeExpr::constant(64), kNoNode});
  plan.buffers.push_back({5, Storage::kOutput, SizeExpr(), SizeExpr::constant(16), kNoNode});
  REQUIRE(plan.find_buffer(5) != nullptr);
  CHECK(plan.find_buffer(5)->storage == Storage::kOutput);
  CHECK(plan.find_buffer(3)->size.constant_value() == 64);
  CHECK(plan.find_buffer(4) == nullptr);
}

TEST_CASE("ir.plan: arena slots are laid out with exact alignment at run time") {
  // Two slots of 4*S*S bytes (f32 [S, S]) then one of 1024*S: compile-time rounding of the
  // coefficients would reserve 64*S*S per small slot; the runtime aligns the evaluated sizes.
  ExecutionPlan plan;
  SizeExpr small = SizeExpr::of_shape({Dim::symbol("S"), Dim::symbol("S")}, 4);
  SizeExpr big = SizeExpr::of_shape({Dim::symbol("S")}, 1024);
  plan.slots = {small, small, big};
  BufferAssignment third{7, Storage::kArena, SizeExpr(), big, kNoNode, 2};
  plan.buffers.push_back(third);
  const SymbolBindings s5{{"S", 5}};  // 4*25 = 100 bytes -> 128 aligned
  CHECK(*plan.arena_offset(third, s5) == 256);
  CHECK(*plan.arena_size(s5) == 256 + 1024 * 5);
  CHECK(*plan.arena_offset(third, {{"S", 8}}) == 2 * 256);  // 256 bytes, already aligned
  CHECK(plan.arena_offset_string(third) == "align64(4*S*S) + align64(4*S*S)");
  CHECK(plan.arena_size_string() == "1024*S + align64(4*S*S) + align64(4*S*S)");
  // A plan without slots (hand-built) falls back to the upper-bound offsets.
  ExecutionPlan bare;
  BufferAssignment b{1, Storage::kArena, SizeExpr::constant(128), SizeExpr::constant(64), kNoNode};
  bare.arena_bytes = SizeExpr::constant(192);
  CHECK(*bare.arena_offset(b, {}) == 128);
  CHECK(*bare.arena_size({}) == 192);
}
