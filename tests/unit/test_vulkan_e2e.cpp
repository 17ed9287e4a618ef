// Vulkan end to end: examples/*.graph through the pipeline and codegen's Vulkan target, written
// and read back as an artifact, run on the first Vulkan device and compared with the reference
// interpreter (skipped without a device unless KILN_REQUIRE_DRIVERS names vulkan).
#include <doctest/doctest.h>

#ifdef KILN_HAVE_SPIRV_COMPILER

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "artifact/reader.h"
#include "artifact/writer.h"
#include "codegen/target.h"
#include "frontend/parser.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"
#include "runtime/device_registry.h"
#include "runtime/drivers/vulkan/vulkan_driver.h"
#include "runtime/session.h"

using namespace kiln;

namespace {

// Compiles an example for the vulkan target and returns the artifact as read back from bytes.
std::shared_ptr<const artifact::LoadedArtifact> compile_example(const std::string& name) {
  Diagnostics diags;
  Result<ir::Graph> parsed = frontend::parse_graph_file(std::string(KILN_SOURCE_DIR) + "/examples/" + name, diags);
  REQUIRE_MESSAGE(parsed.is_ok(), parsed.status().message());
  ir::Graph graph = std::move(parsed).value();
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(graph, passes::PipelineOptions{});
  REQUIRE_MESSAGE(plan.is_ok(), plan.status().message());
  Result<std::unique_ptr<codegen::Target>> target = codegen::create_target("vulkan");
  REQUIRE_MESSAGE(target.is_ok(), target.status().message());
  Result<codegen::CompiledKernels> compiled = codegen::compile_graph(**target, graph, *plan, codegen::TargetOptions{});
  REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().message());
  artifact::WriteOptions options;
  options.kernels = compiled->kernels;
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(graph, *plan, options);
  REQUIRE_MESSAGE(bytes.is_ok(), bytes.status().message());
  Result<artifact::LoadedArtifact> loaded =
      artifact::read_artifact(std::make_shared<const std::vector<uint8_t>>(std::move(bytes).value()));
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
  return std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value());
}

// Deterministic inputs in [-1, 1) for the given symbol sizes.
std::vector<ir::Tensor> inputs_for(const ir::Graph& graph, const ir::SymbolBindings& sizes) {
  std::vector<ir::Tensor> inputs;
  uint32_t state = 12345;
  for (ir::NodeId id : graph.inputs()) {
    const ir::Node& node = graph.node(id);
    Result<std::vector<int64_t>> shape = ir::resolve_shape(node.type.shape, sizes);
    REQUIRE(shape.is_ok());
    Result<ir::Tensor> t = ir::Tensor::zeros(node.type.dtype, *shape);
    REQUIRE(t.is_ok());
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      state = state * 1664525u + 1013904223u;
      t->set_element_from_double(i, double(state >> 8) / double(1 << 24) * 2.0 - 1.0);
    }
    inputs.push_back(std::move(t).value());
  }
  return inputs;
}

}  // namespace

TEST_CASE("vulkan: examples compiled for vulkan match the reference interpreter") {
  std::unique_ptr<runtime::hal::Driver> driver = runtime::vulkan::create_vulkan_driver();
  if (driver->devices().empty()) {
    const char* required = std::getenv("KILN_REQUIRE_DRIVERS");
    if (required && std::string(required).find("vulkan") != std::string::npos)
      FAIL("no Vulkan device: " << driver->unavailable_reason());
    std::cout << "[skip] vulkan examples: " << driver->unavailable_reason() << "\n";
    return;
  }
  Result<std::unique_ptr<runtime::hal::Device>> device = driver->open_device(driver->devices().front().id);
  REQUIRE_MESSAGE(device.is_ok(), device.status().message());

  struct Case {
    const char* file;
    ir::SymbolBindings sizes;
  };
  const Case cases[] = {{"ew_chain.graph", {{"N", 7}}}, {"mlp.graph", {{"N", 5}}}};
  for (const Case& c : cases) {
    CAPTURE(c.file);
    std::shared_ptr<const artifact::LoadedArtifact> art = compile_example(c.file);
    Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(art, **device);
    REQUIRE_MESSAGE(session.is_ok(), session.status().message());
    std::vector<ir::Tensor> inputs = inputs_for(art->graph, c.sizes);
    Result<std::vector<ir::Tensor>> expected =
        ir::interpret(art->graph, inputs, runtime::matching_interpreter_precision((*device)->info()));
    REQUIRE(expected.is_ok());
    for (int run = 0; run < 2; ++run) {  // the second run resubmits the recorded commands
      Result<std::vector<ir::Tensor>> got = (*session)->run(inputs);
      REQUIRE_MESSAGE(got.is_ok(), got.status().message());
      REQUIRE(got->size() == expected->size());
      for (size_t o = 0; o < got->size(); ++o) {
        REQUIRE((*got)[o].shape() == (*expected)[o].shape());
        for (int64_t i = 0; i < (*got)[o].num_elements(); ++i) {
          const double want = (*expected)[o].element_as_double(i);
          const double have = (*got)[o].element_as_double(i);
          // f32 kernels with a different summation order / transcendental implementations.
          REQUIRE(std::abs(have - want) <= 1e-5 + 1e-4 * std::abs(want));
        }
      }
    }
  }
}

#endif  // KILN_HAVE_SPIRV_COMPILER
