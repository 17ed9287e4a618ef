// The target interface (codegen/target.h) and its driver, compile_graph: a limited fake target
// shows that every node a target cannot run is reported, with its file:line:col, before anything
// is rendered; a supported graph goes through render, the default compile and package once per
// kernel; -S (sources_only) packages nothing; the real targets accept every dtype.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "artifact/targets.h"
#include "codegen/target.h"
#include "frontend/parser.h"
#include "passes/pipeline.h"
#include "support/diagnostics.h"
#include "test_compile_util.h"

using namespace kiln;

namespace {

using Compiled = kiln::testing::PlannedGraph;

Compiled compile_text(const std::string& text) { return kiln::testing::parse_and_plan(text, "limits.graph"); }

// A target without i64 whose "source" is the kernel's entry point. It counts its renders.
class LimitedTarget final : public codegen::Target {
 public:
  mutable std::atomic<int> renders{0};

  std::string_view name() const override { return "limited"; }
  std::string_view source_suffix() const override { return ".src"; }
  bool has_dtype(ir::DType dtype) const override { return dtype != ir::DType::kI64; }

  Result<std::vector<codegen::KernelSource>> render(const codegen::KernelModel& model,
                                                    const codegen::TargetOptions&) const override {
    ++renders;
    std::vector<codegen::KernelSource> out;
    out.push_back({"", "kernel " + model.entry_point + "\n", {"feature_" + model.entry_point}});
    return out;
  }
  void package(const codegen::KernelModel& model, codegen::CompiledVariant code, const codegen::TargetOptions&,
               artifact::KernelBinary& record) const override {
    record.format = "text";
    record.entry_point = model.entry_point;
    record.blob = std::move(code.blob);
    record.dispatch = model.dispatch;
  }
};

}  // namespace

TEST_CASE("compile_graph: every node a target cannot run is reported with its location, nothing rendered") {
  Compiled c = compile_text(
      "graph g(x: i64[4], z: f32[4]) -> (y: i64[4], w: f32[4], v: i64[4]) {\n"
      "  y = add(x, x)\n"
      "  w = exp(z)\n"
      "  v = mul(y, x)\n"
      "}\n");
  LimitedTarget target;

  Diagnostics diags;
  Status status = codegen::check_supported(target, c.graph, diags);
  CHECK(status.code() == ErrorCode::kUnsupported);
  REQUIRE(diags.error_count() == 3);  // x, y and v; not z or w
  CHECK(diags.errors()[0].to_string() ==
        "limits.graph:1:9: error: the limited target cannot run 'x' (input of i64): it has no i64 support");
  CHECK(diags.errors()[1].to_string() ==
        "limits.graph:2:7: error: the limited target cannot run 'y' (add of i64): it has no i64 support");
  CHECK(diags.errors()[2].to_string() ==
        "limits.graph:4:7: error: the limited target cannot run 'v' (mul of i64): it has no i64 support");
  CHECK(status.to_string() ==
        "limits.graph:1:9: error: the limited target cannot run 'x' (input of i64): it has no i64 support "
        "(and 2 more unsupported nodes)");

  Result<codegen::CompiledKernels> compiled = codegen::compile_graph(target, c.graph, c.plan, codegen::TargetOptions{});
  REQUIRE_FALSE(compiled.is_ok());
  CHECK(compiled.status().to_string() == status.to_string());
  CHECK(target.renders == 0);
}

TEST_CASE("compile_graph: render, compile and package once per kernel; sources_only packages nothing") {
  Compiled c = compile_text(
      "graph g(x: f32[4, 8]) -> (y: f32[4, 8], s: f32[4]) {\n"
      "  y = exp(x)\n"
      "  s = reduce_sum(x, axes=[1])\n"
      "}\n");
  REQUIRE(c.graph.kernels().size() == 2);
  LimitedTarget target;
  Diagnostics diags;
  CHECK(codegen::check_supported(target, c.graph, diags).is_ok());
  CHECK_FALSE(diags.has_errors());

  Result<codegen::CompiledKernels> compiled = codegen::compile_graph(target, c.graph, c.plan, codegen::TargetOptions{});
  REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().to_string());
  CHECK(target.renders == 2);
  REQUIRE(compiled->kernels.size() == 2);
  REQUIRE(compiled->sources.size() == 2);
  CHECK(compiled->modules.empty());
  for (uint32_t k = 0; k < 2; ++k) {
    const artifact::KernelBinary& bin = compiled->kernels[k];
    CHECK(bin.target == "limited");
    CHECK(bin.kernel_index == k);
    CHECK(bin.kernel_name == c.graph.kernels()[k].name);
    CHECK(bin.format == "text");
    // The default compile: the source text is the blob.
    CHECK(std::string(bin.blob.begin(), bin.blob.end()) == "kernel " + bin.entry_point + "\n");
    CHECK(bin.required_features == std::vector<std::string>{"feature_" + bin.entry_point});
    CHECK_FALSE(bin.args.empty());
    // The default -S files: <kernel><source_suffix>.
    CHECK(compiled->sources[k].kernel_name == c.graph.kernels()[k].name);
    CHECK(compiled->sources[k].suffix == ".src");
    CHECK(compiled->sources[k].text == "kernel " + bin.entry_point + "\n");
  }

  codegen::TargetOptions sources_only;
  sources_only.sources_only = true;
  compiled = codegen::compile_graph(target, c.graph, c.plan, sources_only);
  REQUIRE(compiled.is_ok());
  CHECK(compiled->kernels.empty());
  CHECK(compiled->sources.size() == 2);
}

TEST_CASE("targets: one list of names; every target of this build runs every dtype") {
  for (const std::string& name : codegen::available_targets()) {
    CAPTURE(name);
    CHECK(artifact::is_known_target(name));
    Result<std::unique_ptr<codegen::Target>> target = codegen::create_target(name);
    REQUIRE(target.is_ok());
    CHECK((*target)->name() == name);
  }
  CHECK_FALSE(artifact::is_known_target("metal"));

  Compiled c = compile_text(
      "graph t(a: f32[4], b: f16[4], c: bf16[4], d: i64[4], e: i32[4], f: i8[4], g: u8[4], h: bool[4])\n"
      "    -> (y: f32[4]) {\n"
      "  y = add(add(add(a, cast(b, to=f32)), add(cast(c, to=f32), cast(d, to=f32))),\n"
      "          add(add(cast(e, to=f32), cast(f, to=f32)), add(cast(g, to=f32), cast(h, to=f32))))\n"
      "}\n");
  for (const std::string& name : codegen::available_targets()) {
    CAPTURE(name);
    Result<std::unique_ptr<codegen::Target>> target = codegen::create_target(name);
    REQUIRE(target.is_ok());
    Diagnostics diags;
    CHECK(codegen::check_supported(**target, c.graph, diags).is_ok());
    CHECK_MESSAGE(!diags.has_errors(), diags.to_string());
  }
}
