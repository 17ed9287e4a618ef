// The target interface (codegen/target.h) and its driver, compile_graph: a limited fake target
// shows that every node a target cannot run is reported, with its file:line:col, before anything
// is rendered; a supported graph goes through render, the default compile and package once per
// kernel; kernels that differ only in their names are compiled once; -S (sources_only) packages
// nothing; the output does not depend on -j, and a warm compile cache gives the same bytes; the
// real targets accept every dtype.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>

#include "artifact/targets.h"
#include "codegen/compile_cache.h"
#include "codegen/target.h"
#include "frontend/parser.h"
#include "passes/pipeline.h"
#include "support/diagnostics.h"
#include "test_compile_util.h"

using namespace kiln;

namespace {

using Compiled = kiln::testing::PlannedGraph;

Compiled compile_text(const std::string& text) { return kiln::testing::parse_and_plan(text, "limits.graph"); }

// check_supported of the build's target `name` on `graph`, its diagnostics in `diags`.
Status check_on_target(const std::string& name, const ir::Graph& graph, Diagnostics& diags) {
  Result<std::unique_ptr<codegen::Target>> target = codegen::create_target(name);
  REQUIRE(target.is_ok());
  return codegen::check_supported(**target, graph, diags);
}

// A target without i64 whose "source" is the kernel's entry point and its kind. It counts its
// renders and compiles.
class LimitedTarget final : public codegen::Target {
 public:
  mutable std::atomic<int> renders{0};
  mutable std::atomic<int> compiles{0};

  std::string_view name() const override { return "limited"; }
  std::string_view source_suffix() const override { return ".src"; }
  bool has_dtype(ir::DType dtype) const override { return dtype != ir::DType::kI64; }

  Result<std::vector<codegen::KernelSource>> render(const codegen::KernelModel& model,
                                                    const codegen::TargetOptions&) const override {
    ++renders;
    std::vector<codegen::KernelSource> out;
    out.push_back({"", "kernel " + model.entry_point + " " + std::string(ir::kernel_kind_name(model.kernel->kind)) + "\n",
                   {"feature_a"}});
    return out;
  }
  void package(const codegen::KernelModel& model, codegen::CompiledVariant code, const codegen::TargetOptions&,
               artifact::KernelBinary& record) const override {
    record.format = "text";
    record.entry_point = model.entry_point;
    record.blob = std::move(code.blob);
    record.dispatch = model.dispatch;
  }

 protected:
  Result<codegen::CompiledVariant> compile_variant(const codegen::KernelVariants& kernel,
                                                   const codegen::KernelSource& source,
                                                   const codegen::TargetOptions& options,
                                                   codegen::CompileContext& context) const override {
    ++compiles;
    return Target::compile_variant(kernel, source, options, context);
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

TEST_CASE("targets: a tensor of 2^31 elements is unsupported on vulkan only (32-bit indexing)") {
  Compiled c = compile_text(
      "graph g(x: f32[65536, 32768], s: f32[4]) -> (y: f32[65536, 32768], t: f32[4]) {\n"
      "  y = exp(x)\n"
      "  t = exp(s)\n"
      "}\n");
  for (const std::string& name : codegen::available_targets()) {
    CAPTURE(name);
    Diagnostics diags;
    Status status = check_on_target(name, c.graph, diags);
    if (name != artifact::kVulkanTarget) {
      CHECK(status.is_ok());
      continue;
    }
    CHECK(status.code() == ErrorCode::kUnsupported);
    REQUIRE(diags.error_count() == 2);  // x and y; not s or t
    CHECK(diags.errors()[1].to_string().find("limits.graph:2:7: error: the vulkan target cannot run 'y' (exp): its "
                                             "tensors reach 2^31 elements") == 0);
  }
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
  CHECK(target.compiles == 2);
  CHECK(compiled->kernel_count == 2);
  CHECK(compiled->compiled_kernel_count == 2);
  REQUIRE(compiled->kernels.size() == 2);
  CHECK(compiled->sources.empty());  // only -S needs them
  CHECK(compiled->modules.empty());
  for (uint32_t k = 0; k < 2; ++k) {
    const artifact::KernelBinary& bin = compiled->kernels[k];
    CHECK(bin.target == "limited");
    CHECK(bin.kernel_index == k);
    CHECK(bin.kernel_name == c.graph.kernels()[k].name);
    CHECK(bin.format == "text");
    // The default compile: the source text is the blob.
    CHECK(std::string(bin.blob.begin(), bin.blob.end()).rfind("kernel " + bin.entry_point + " ", 0) == 0);
    CHECK(bin.required_features == std::vector<std::string>{"feature_a"});
    CHECK_FALSE(bin.args.empty());
  }

  codegen::TargetOptions sources_only;
  sources_only.sources_only = true;
  compiled = codegen::compile_graph(target, c.graph, c.plan, sources_only);
  REQUIRE(compiled.is_ok());
  CHECK(compiled->kernels.empty());
  REQUIRE(compiled->sources.size() == 2);
  for (uint32_t k = 0; k < 2; ++k) {
    // The default -S files: <kernel><source_suffix>.
    CHECK(compiled->sources[k].kernel_name == c.graph.kernels()[k].name);
    CHECK(compiled->sources[k].suffix == ".src");
    CHECK(compiled->sources[k].text.rfind("kernel " + codegen::sanitize_identifier(c.graph.kernels()[k].name), 0) == 0);
  }
}

TEST_CASE("compile_graph: kernels that differ only in their names are compiled once and share the code") {
  // Two identical exp kernels (same shapes, same code, different names) and a reduction.
  Compiled c = compile_text(
      "graph g(x: f32[4, 8], z: f32[4, 8]) -> (y: f32[4, 8], w: f32[4, 8], s: f32[4]) {\n"
      "  y = exp(x)\n"
      "  w = exp(z)\n"
      "  s = reduce_sum(x, axes=[1])\n"
      "}\n");
  REQUIRE(c.graph.kernels().size() == 3);
  LimitedTarget target;
  Result<codegen::CompiledKernels> compiled = codegen::compile_graph(target, c.graph, c.plan, codegen::TargetOptions{});
  REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().to_string());
  CHECK(target.renders == 3);
  CHECK(target.compiles == 2);
  CHECK(compiled->compiled_kernel_count == 2);
  REQUIRE(compiled->kernels.size() == 3);
  // Find the two exp kernels: the second runs the first's code (its entry point) with its own
  // name, index and arguments.
  std::vector<const artifact::KernelBinary*> exps;
  for (const artifact::KernelBinary& bin : compiled->kernels)
    if (std::string(bin.blob.begin(), bin.blob.end()).find("elementwise") != std::string::npos) exps.push_back(&bin);
  REQUIRE(exps.size() == 2);
  CHECK(exps[0]->kernel_name != exps[1]->kernel_name);
  CHECK(exps[0]->kernel_index != exps[1]->kernel_index);
  CHECK(exps[0]->entry_point == exps[1]->entry_point);
  CHECK(exps[0]->blob == exps[1]->blob);
  CHECK(exps[0]->args != exps[1]->args);  // x -> y, z -> w
  CHECK(exps[0]->args.size() == exps[1]->args.size());

  // -S shows every kernel compiled alone.
  target.compiles = 0;
  codegen::TargetOptions sources_only;
  sources_only.sources_only = true;
  compiled = codegen::compile_graph(target, c.graph, c.plan, sources_only);
  REQUIRE(compiled.is_ok());
  CHECK(target.compiles == 3);
  CHECK(compiled->sources.size() == 3);
}

TEST_CASE("compile_graph on every target of this build: one output for any -j, the same from a warm cache") {
  // Four identical residual blocks (ResNet-like), whose kernels differ only in their names.
  std::string text = "graph g(x: f32[8, 32], w: f32[32, 32], b: f32[32]) -> (y: f32[8, 32]) {\n  h0 = tanh(x)\n";
  for (int i = 1; i <= 4; ++i) {
    const std::string prev = "h" + std::to_string(i - 1), cur = "h" + std::to_string(i);
    text += "  " + cur + " = relu(add(add(matmul(" + prev + ", w), b), " + prev + "))\n";
  }
  text += "  y = tanh(h4)\n}\n";
  Compiled c = compile_text(text);
  const std::filesystem::path cache_dir =
      std::filesystem::temp_directory_path() / ("kiln-test-target-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(cache_dir);
  for (const std::string& name : codegen::available_targets()) {
    CAPTURE(name);
    Result<std::unique_ptr<codegen::Target>> target = codegen::create_target(name);
    REQUIRE(target.is_ok());
    auto compile = [&](codegen::CompileContext& context) {
      Result<codegen::CompiledKernels> compiled =
          codegen::compile_graph(**target, c.graph, c.plan, codegen::TargetOptions{}, &context);
      REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().to_string());
      return std::move(compiled).value();
    };
    codegen::CompileContext serial(1), parallel(4);
    const codegen::CompiledKernels one = compile(serial), four = compile(parallel);
    CHECK(one.compiled_kernel_count < one.kernel_count);  // the repeated blocks share code
    CHECK(one.kernels == four.kernels);
    CHECK(one.modules == four.modules);

    Result<std::unique_ptr<codegen::CompileCache>> cache = codegen::CompileCache::open((cache_dir / name).string(), 1 << 30);
    REQUIRE(cache.is_ok());
    codegen::CompileContext cold(2, cache->get()), warm(2, cache->get());
    const codegen::CompiledKernels from_cold = compile(cold), from_warm = compile(warm);
    CHECK(from_cold.kernels == one.kernels);
    CHECK(from_warm.kernels == one.kernels);
    CHECK(from_warm.modules == one.modules);
    CHECK(cold.counts().cache_hits == 0);
    CHECK(warm.counts().cache_misses == 0);
    CHECK(warm.counts().cache_hits == cold.counts().units);
    // OpenCL C is built by the driver: nothing to compile, nothing to cache.
    CHECK((cold.counts().units > 0) == (name != artifact::kOpenClTarget));
  }
  std::filesystem::remove_all(cache_dir);
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
    Diagnostics diags;
    CHECK(check_on_target(name, c.graph, diags).is_ok());
    CHECK_MESSAGE(!diags.has_errors(), diags.to_string());
  }
}
