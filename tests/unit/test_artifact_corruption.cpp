// Loading damaged artifacts: every truncation and thousands of random byte flips must give a
// clean error or a valid artifact, never a crash or an out-of-bounds read (run this binary
// under AddressSanitizer to check the latter).
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "test_artifact_util.h"

using namespace kiln;
using namespace kiln::artifact::testing;

TEST_CASE("artifact corruption: every truncation is a clear error") {
  SampleModel model = sample_model();
  const std::vector<uint8_t> bytes = write_or_fail(model.graph, model.plan);
  REQUIRE(bytes.size() > 64);
  for (size_t k = 0; k < 64; ++k) {
    const size_t size = bytes.size() * k / 64;
    INFO("truncated to " << size << " of " << bytes.size() << " bytes");
    Result<artifact::LoadedArtifact> r = read_bytes(std::vector<uint8_t>(bytes.begin(), bytes.begin() + long(size)));
    REQUIRE_FALSE(r.is_ok());
    CHECK((r.status().code() == ErrorCode::kCorrupt || r.status().code() == ErrorCode::kInvalidArgument));
    CHECK(r.status().message().find("artifact") != std::string::npos);
  }
  // Dropping only the last byte is also caught.
  Result<artifact::LoadedArtifact> r = read_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1));
  CHECK_FALSE(r.is_ok());
  // So is data appended after the end.
  std::vector<uint8_t> longer = bytes;
  longer.resize(bytes.size() + 64, 0);
  r = read_bytes(longer);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("truncated or with data appended") != std::string::npos);
}

TEST_CASE("artifact corruption: random byte flips never crash") {
  SampleModel model = sample_model();
  const std::vector<uint8_t> original = write_or_fail(model.graph, model.plan);
  std::mt19937 rng(20240611);
  int loaded = 0, rejected = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::vector<uint8_t> bytes = original;
    const int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % bytes.size();
      bytes[at] = uint8_t(bytes[at] ^ (1u << (rng() % 8)));
    }
    Result<artifact::LoadedArtifact> r = read_bytes(std::move(bytes));
    if (!r.is_ok()) {
      ++rejected;
      const ErrorCode code = r.status().code();
      CHECK((code == ErrorCode::kCorrupt || code == ErrorCode::kInvalidArgument));
      CHECK_FALSE(r.status().message().empty());
      continue;
    }
    ++loaded;
    // Whatever loads is a valid graph (the reader ran the verifier), so it can be executed.
    CHECK(ir::verify_graph(r->graph).is_ok());
    std::vector<ir::Tensor> inputs;
    bool runnable = true;
    for (ir::NodeId id : r->graph.inputs()) {
      std::vector<int64_t> sizes;
      for (const ir::Dim& d : r->graph.node(id).type.shape) sizes.push_back(d.is_static() ? d.size() : 2);
      Result<ir::Tensor> t = ir::Tensor::zeros(r->graph.node(id).type.dtype, sizes);
      if (!t.is_ok() || t->num_elements() > (1 << 20)) {
        runnable = false;
        break;
      }
      inputs.push_back(std::move(t).value());
    }
    if (runnable) (void)ir::interpret(r->graph, inputs);  // must return, ok or not
  }
  MESSAGE("byte flips: " << loaded << " loaded, " << rejected << " rejected");
  CHECK(loaded + rejected == 2000);
  CHECK(rejected > 0);
}

TEST_CASE("artifact corruption: flips in a larger real graph never crash") {
  // The all-ops graph has every attribute table, so flips reach every conversion path.
  ir::testing::GraphBuilder b;
  ir::NodeId x = b.input("x", "f32[N, 3, 8, 8]");
  ir::NodeId w = b.constant("w", ir::testing::f32_tensor({4, 3, 1, 1}, std::vector<float>(12, 0.5f)));
  ir::NodeId conv = b.op(ir::OpKind::kConv2d, "conv", {x, w});
  ir::NodeId pool = b.op(ir::OpKind::kMaxPool2d, "pool", {conv},
                         ir::Pool2dAttrs{{2, 2}, {2, 2}, {0, 0, 0, 0}, false});
  ir::NodeId t = b.op(ir::OpKind::kTranspose, "t", {pool}, ir::TransposeAttrs{{0, 2, 3, 1}});
  ir::NodeId r = b.op(ir::OpKind::kReshape, "r", {t},
                      ir::ReshapeAttrs{{ir::Dim::symbol("N"), ir::Dim::of(-1)}});
  ir::NodeId c = b.op(ir::OpKind::kClamp, "c", {r}, ir::ClampAttrs{-1.0, std::nullopt});
  ir::NodeId s = b.op(ir::OpKind::kSoftmax, "s", {c}, ir::AxisAttrs{-1});
  ir::NodeId cast = b.op(ir::OpKind::kCast, "cast", {s}, ir::CastAttrs{ir::DType::kF16});
  b.output("cast", cast);
  const std::vector<uint8_t> original = write_or_fail(b.graph, ir::ExecutionPlan{});
  Result<artifact::LoadedArtifact> clean = read_bytes(original);
  REQUIRE(clean.is_ok());
  std::mt19937 rng(7);
  int rejected = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::vector<uint8_t> bytes = original;
    const size_t at = rng() % bytes.size();
    bytes[at] = uint8_t(rng());
    Result<artifact::LoadedArtifact> r = read_bytes(std::move(bytes));
    if (!r.is_ok()) ++rejected;
  }
  CHECK(rejected > 0);
}
