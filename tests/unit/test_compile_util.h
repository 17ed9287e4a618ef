// Compiles graph text for the unit tests that run real kernels on devices (the HAL conformance
// suite, the C API device tests): frontend, the default pass pipeline, then every codegen
// target this build has, into one artifact.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "artifact/writer.h"
#include "codegen/target.h"
#include "frontend/parser.h"
#include "passes/pipeline.h"

namespace kiln::testing {

// The artifact bytes of `graph_text` with the kernels of every available codegen target.
inline std::vector<uint8_t> compile_for_every_target(const char* graph_text) {
  Diagnostics diags;
  Result<ir::Graph> parsed = frontend::parse_graph_text(graph_text, "test.graph", ".", diags);
  INFO(diags.to_string());
  REQUIRE(parsed.is_ok());
  ir::Graph graph = std::move(parsed).value();
  passes::PipelineOptions options;
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(graph, options);
  REQUIRE(plan.is_ok());
  artifact::WriteOptions write;
  for (const std::string& name : codegen::available_targets()) {
    Result<std::unique_ptr<codegen::Target>> target = codegen::create_target(name);
    REQUIRE(target.is_ok());
    Result<codegen::CompiledKernels> compiled = codegen::compile_graph(**target, graph, *plan, codegen::TargetOptions{});
    INFO(name << ": " << (compiled.is_ok() ? std::string() : compiled.status().message()));
    REQUIRE(compiled.is_ok());
    for (artifact::KernelBinary& k : compiled->kernels) write.kernels.push_back(std::move(k));
    for (artifact::ModuleBinary& m : compiled->modules) write.modules.push_back(std::move(m));  // cuda
  }
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(graph, *plan, write);
  REQUIRE(bytes.is_ok());
  return std::move(bytes).value();
}

// The same, read back as a shared LoadedArtifact.
inline std::shared_ptr<const artifact::LoadedArtifact> load_for_every_target(const char* graph_text) {
  auto bytes = std::make_shared<const std::vector<uint8_t>>(compile_for_every_target(graph_text));
  Result<artifact::LoadedArtifact> loaded = artifact::read_artifact(bytes);
  INFO((loaded.is_ok() ? std::string() : loaded.status().message()));
  REQUIRE(loaded.is_ok());
  return std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value());
}

}  // namespace kiln::testing
