// Codegen (codegen/): the kernel model's calling convention and dispatch, the C-family emitter's
// output for both dialects, and the target registry. Execution on real devices is covered by
// tests/backends (kiln-run --check on every OpenCL / Vulkan device).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "codegen/c_family.h"
#include "codegen/kernel_model.h"
#include "codegen/target.h"
#include "frontend/parser.h"
#include "passes/pipeline.h"
#include "support/diagnostics.h"

using namespace kiln;

namespace {

struct Compiled {
  ir::Graph graph;
  ir::ExecutionPlan plan;
};

Compiled compile_text(const std::string& text, int opt_level = 2) {
  Diagnostics diags;
  Result<ir::Graph> g = frontend::parse_graph_text(text, "test.graph", "", diags);
  REQUIRE_MESSAGE(g.is_ok(), diags.to_string());
  Compiled c{std::move(g).value(), {}};
  passes::PipelineOptions options;
  options.opt_level = opt_level;
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(c.graph, options);
  REQUIRE_MESSAGE(plan.is_ok(), plan.status().to_string());
  c.plan = std::move(plan).value();
  return c;
}

}  // namespace

TEST_CASE("codegen: a fused elementwise kernel's args are its buffers, then its symbols") {
  Compiled c = compile_text(
      "graph g(x: f32[N, 37], b: f32[37]) -> (y: f32[N, 37]) {\n"
      "  y = tanh(add(mul(x, b), const f32[] 0.5))\n}\n");
  REQUIRE(c.graph.kernels().size() == 1);
  Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, 0);
  REQUIRE(m.is_ok());
  CHECK(m->kind == codegen::KernelTemplate::kPointwise);
  const ir::Kernel& k = c.graph.kernels()[0];
  REQUIRE(m->args.size() == k.inputs.size() + k.outputs.size() + 1);
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    CHECK(m->args[i].kind == artifact::KernelArg::Kind::kBuffer);
    CHECK(m->args[i].value == k.inputs[i]);
  }
  CHECK(m->args[k.inputs.size()].value == k.outputs[0]);
  CHECK(m->args.back().kind == artifact::KernelArg::Kind::kSymbol);
  CHECK(m->args.back().symbol == "N");
  // One work item per output element, 64 per group.
  CHECK(m->dispatch.work_items == ir::SizeExpr::symbol("N") * 37);
  CHECK(m->dispatch.items_per_group == codegen::kPointwiseGroupSize);
  CHECK(m->dispatch.workgroup_size == codegen::kPointwiseGroupSize);
  CHECK(m->entry_point == codegen::sanitize_identifier(k.name));
}

TEST_CASE("codegen: reductions dispatch one work-group per row; matmul per output tile") {
  Compiled c = compile_text(
      "graph g(x: f32[N, 300], w: f32[300, 20]) -> (s: f32[N], y: f32[N, 20]) {\n"
      "  s = reduce_sum(exp(x), axes=[1])\n  y = matmul(x, w)\n}\n");
  REQUIRE(c.graph.kernels().size() == 2);
  for (uint32_t k = 0; k < 2; ++k) {
    Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, k);
    REQUIRE(m.is_ok());
    if (c.graph.kernels()[k].kind == ir::KernelKind::kReduction) {
      CHECK(m->kind == codegen::KernelTemplate::kRowReduce);
      CHECK(m->dispatch.work_items == ir::SizeExpr::symbol("N"));
      CHECK(m->dispatch.items_per_group == 1);
      CHECK(m->prologue.size() == 1);  // exp
      CHECK(m->reduced_axes == std::vector<bool>{false, true});
    } else {
      CHECK(m->kind == codegen::KernelTemplate::kMatMul);
      CHECK(m->dispatch.work_items == ir::SizeExpr::symbol("N") * 20);
      CHECK(m->dispatch.items_per_group == codegen::kMatMulTile * codegen::kMatMulTile);
    }
  }
}

TEST_CASE("codegen: the OpenCL C and GLSL dialects differ where the languages do") {
  Compiled c = compile_text(
      "graph g(x: f16[N, 8], i: i8[N, 8]) -> (y: f16[N, 8], s: f32[N]) {\n"
      "  y = add(x, cast(i, to=f16))\n  s = reduce_max(cast(x, to=f32), axes=[1])\n}\n");
  for (uint32_t k = 0; k < c.graph.kernels().size(); ++k) {
    Result<codegen::KernelModel> m = codegen::build_kernel_model(c.graph, c.plan, k);
    REQUIRE(m.is_ok());
    Result<codegen::RenderedKernel> cl = codegen::render_c_family(*m, codegen::Dialect::kOpenCL);
    Result<codegen::RenderedKernel> gl = codegen::render_c_family(*m, codegen::Dialect::kGlsl);
    REQUIRE(cl.is_ok());
    REQUIRE(gl.is_ok());
    CHECK(cl->source.find("__kernel") != std::string::npos);
    CHECK(cl->source.find("void " + m->entry_point + "(") != std::string::npos);
    CHECK(cl->source.find("long k_N") != std::string::npos);  // the symbol argument
    CHECK(gl->source.rfind("#version 450", 0) == 0);
    CHECK(gl->source.find("layout(push_constant)") != std::string::npos);
    CHECK(cl->required_features.empty());
    if (c.graph.kernels()[k].kind == ir::KernelKind::kReduction) {
      CHECK(cl->source.find("__local float") != std::string::npos);  // the tree's shared memory
      CHECK(gl->source.find("shared float") != std::string::npos);
    } else {
      CHECK(cl->source.find("vstore_half_rte") != std::string::npos);
      CHECK(gl->source.find("float16_t") != std::string::npos);
      CHECK(gl->required_features == std::vector<std::string>{"shader_float16", "shader_int8", "storage_buffer_16bit", "storage_buffer_8bit"});
    }
  }
}

TEST_CASE("codegen: the target registry always has opencl and refuses unknown targets") {
  std::vector<std::string> targets = codegen::available_targets();
  CHECK(std::find(targets.begin(), targets.end(), "opencl") != targets.end());
  Result<std::unique_ptr<codegen::Target>> cl = codegen::create_target("opencl");
  REQUIRE(cl.is_ok());
  CHECK((*cl)->name() == "opencl");
  CHECK(codegen::create_target("metal").status().code() == ErrorCode::kUnsupported);

  Compiled c = compile_text("graph g(x: f32[4]) -> (y: f32[4]) {\n  y = exp(x)\n}\n");
  Result<codegen::CompiledKernels> out = codegen::compile_graph(**cl, c.graph, c.plan, codegen::TargetOptions{});
  REQUIRE(out.is_ok());
  REQUIRE(out->kernels.size() == 1);
  const artifact::KernelBinary& k = out->kernels[0];
  CHECK(k.target == "opencl");
  CHECK(k.format == "opencl-c");
  CHECK(k.kernel_index == 0);
  // The blob is the OpenCL C source that -S writes.
  codegen::TargetOptions sources_only;
  sources_only.sources_only = true;
  Result<codegen::CompiledKernels> sources = codegen::compile_graph(**cl, c.graph, c.plan, sources_only);
  REQUIRE(sources.is_ok());
  REQUIRE(sources->sources.size() == 1);
  CHECK(std::string(k.blob.begin(), k.blob.end()) == sources->sources[0].text);
  CHECK(sources->sources[0].suffix == ".cl");
}
