// Helpers shared by the artifact and runtime unit tests (test_artifact*.cpp, test_runtime*.cpp):
// a small fused graph with a symbolic batch and a hand-written plan, plan comparison, and
// in-place edits of artifact bytes for the version and corruption tests.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "artifact/reader.h"
#include "artifact/writer.h"
#include "ir/plan.h"
#include "ir_test_graphs.h"

namespace kiln::artifact::testing {

struct SampleModel {
  ir::Graph graph;
  ir::ExecutionPlan plan;
};

// x, y: f32[N, 4]; w: const f32[4]
// r = relu(mul(add(x, w), y)) ; s = reduce_sum(r, axes=[1]) ; outputs r: f32[N, 4], s: f32[N]
// Kernels: fused_add_mul_relu_0 (elementwise) and reduce_sum_1 (reduction).
inline SampleModel sample_model() {
  ir::testing::GraphBuilder b;
  b.graph.name = "sample";
  ir::NodeId x = b.input("x", "f32[N, 4]");
  ir::NodeId y = b.input("y", "f32[N, 4]");
  ir::NodeId w = b.constant("w", ir::testing::f32_tensor({4}, {0.5f, -1.0f, 2.0f, 0.25f}));
  ir::NodeId a = b.op(ir::OpKind::kAdd, "a", {x, w});
  ir::NodeId m = b.op(ir::OpKind::kMul, "m", {a, y});
  ir::NodeId r = b.op(ir::OpKind::kRelu, "r", {m});
  ir::NodeId s = b.op(ir::OpKind::kReduceSum, "s", {r}, ir::ReduceAttrs{{1}, false, false});
  b.output("r", r);
  b.output("s", s);

  ir::Kernel k0;
  k0.name = "fused_add_mul_relu_0";
  k0.kind = ir::KernelKind::kElementwise;
  k0.nodes = {a, m, r};
  k0.inputs = {x, w, y};
  k0.outputs = {r};
  ir::Kernel k1;
  k1.name = "reduce_sum_1";
  k1.kind = ir::KernelKind::kReduction;
  k1.nodes = {s};
  k1.anchor = s;
  k1.inputs = {r};
  k1.outputs = {s};
  b.graph.kernels() = {k0, k1};

  SampleModel model;
  ir::ExecutionPlan& plan = model.plan;
  plan.launches = {ir::Launch{0, {ir::Dim::symbol("N"), ir::Dim::of(4)}},
                   ir::Launch{1, {ir::Dim::symbol("N"), ir::Dim::of(1)}}};
  auto buffer = [](ir::NodeId v, ir::Storage st, ir::SizeExpr offset, ir::SizeExpr size) {
    ir::BufferAssignment ba;
    ba.value = v;
    ba.storage = st;
    ba.offset = std::move(offset);
    ba.size = std::move(size);
    return ba;
  };
  const ir::SizeExpr row = ir::SizeExpr::symbol("N") * 16;
  plan.buffers = {buffer(x, ir::Storage::kInput, {}, row), buffer(y, ir::Storage::kInput, {}, row),
                  buffer(w, ir::Storage::kConstant, {}, ir::SizeExpr::constant(16)),
                  buffer(r, ir::Storage::kOutput, {}, row),
                  buffer(s, ir::Storage::kOutput, {}, ir::SizeExpr::symbol("N") * 4)};
  // A term with two symbols and a power, to exercise the term-list encoding.
  plan.arena_bytes = row + ir::SizeExpr::constant(64);
  plan.arena_bytes.mutable_terms()[{"B", "N", "N"}] = 3;
  plan.alignment = 64;
  model.graph = std::move(b.graph);
  return model;
}

inline void require_plans_equal(const ir::ExecutionPlan& a, const ir::ExecutionPlan& b) {
  REQUIRE(a.launches.size() == b.launches.size());
  for (size_t i = 0; i < a.launches.size(); ++i) {
    CHECK(a.launches[i].kernel == b.launches[i].kernel);
    CHECK(a.launches[i].launch_shape == b.launches[i].launch_shape);
  }
  REQUIRE(a.buffers.size() == b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    INFO("buffer " << i);
    CHECK(a.buffers[i].value == b.buffers[i].value);
    CHECK(a.buffers[i].storage == b.buffers[i].storage);
    CHECK(a.buffers[i].offset == b.buffers[i].offset);
    CHECK(a.buffers[i].size == b.buffers[i].size);
    CHECK(a.buffers[i].alias_of == b.buffers[i].alias_of);
  }
  CHECK(a.arena_bytes == b.arena_bytes);
  CHECK(a.alignment == b.alignment);
}

inline std::vector<uint8_t> write_or_fail(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                          const WriteOptions& options = {}) {
  Result<std::vector<uint8_t>> bytes = write_artifact(graph, plan, options);
  INFO((bytes.is_ok() ? std::string() : bytes.status().message()));
  REQUIRE(bytes.is_ok());
  return std::move(bytes).value();
}

inline Result<LoadedArtifact> read_bytes(std::vector<uint8_t> bytes) {
  return read_artifact(std::make_shared<const std::vector<uint8_t>>(std::move(bytes)));
}

// Overwrites the root table's field 0 (format_version) in place, following the FlatBuffers
// layout: root uoffset -> table; table's soffset -> vtable; vtable[2 + 0] = field offset.
inline void set_format_version(std::vector<uint8_t>& bytes, uint32_t version) {
  auto u32 = [&](size_t at) { uint32_t v; std::memcpy(&v, &bytes[at], 4); return v; };
  auto u16 = [&](size_t at) { uint16_t v; std::memcpy(&v, &bytes[at], 2); return v; };
  const size_t table = u32(0);
  int32_t soffset;
  std::memcpy(&soffset, &bytes[table], 4);
  const size_t vtable = size_t(int64_t(table) - soffset);
  REQUIRE(u16(vtable) >= 6);
  const uint16_t field = u16(vtable + 4);
  REQUIRE(field != 0);
  std::memcpy(&bytes[table + field], &version, 4);
}

}  // namespace kiln::artifact::testing
