// Compiles graph text for the unit tests: frontend and the default pass pipeline (the codegen
// and target tests), then every codegen target this build has into one artifact (the tests that
// run real kernels on devices: the HAL conformance suite, the C API device tests), and checks
// device outputs against the reference interpreter.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "artifact/targets.h"
#include "artifact/writer.h"
#include "codegen/target.h"
#include "frontend/parser.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"
#include "runtime/device_registry.h"

namespace kiln::testing {

// A graph parsed from text (diagnostics name `file_name`) and its plan after the default pipeline.
struct PlannedGraph {
  ir::Graph graph;
  ir::ExecutionPlan plan;
};

inline PlannedGraph parse_and_plan(const std::string& text, const std::string& file_name = "test.graph") {
  Diagnostics diags;
  Result<ir::Graph> g = frontend::parse_graph_text(text, file_name, "", diags);
  REQUIRE_MESSAGE(g.is_ok(), diags.to_string());
  PlannedGraph c{std::move(g).value(), {}};
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(c.graph, passes::PipelineOptions{});
  REQUIRE_MESSAGE(plan.is_ok(), plan.status().to_string());
  c.plan = std::move(plan).value();
  return c;
}

// Whether this build has the cpu codegen target; reports the skip when it has not.
inline bool cpu_target_available() {
  if (codegen::target_available(artifact::kCpuTarget)) return true;
  MESSAGE("[skip] cpu target not in this build: " << codegen::unavailable_targets_note());
  return false;
}

// The artifact bytes of `graph_text` with the kernels of every available codegen target.
inline std::vector<uint8_t> compile_for_every_target(const char* graph_text) {
  PlannedGraph planned = parse_and_plan(graph_text);
  const ir::Graph& graph = planned.graph;
  const ir::ExecutionPlan* plan = &planned.plan;
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

// Every output element within rtol * (1 + |expected|) of the reference interpreter's result on
// the same inputs, in the mode that computes as `device` does (faithful for kernels, exact for
// the reference device); reports the first three wrong elements of each output.
inline void check_close_to_interpreter(const artifact::LoadedArtifact& artifact, const runtime::hal::DeviceInfo& device,
                                       const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& actual,
                                       double rtol) {
  Result<std::vector<ir::Tensor>> expected =
      ir::interpret(artifact.graph, inputs, runtime::matching_interpreter_precision(device));
  REQUIRE(expected.is_ok());
  REQUIRE(actual.size() == expected->size());
  for (size_t o = 0; o < actual.size(); ++o) {
    REQUIRE(actual[o].shape() == (*expected)[o].shape());
    int wrong = 0;
    for (int64_t i = 0; i < actual[o].num_elements(); ++i) {
      const double want = (*expected)[o].element_as_double(i);
      const double got = actual[o].element_as_double(i);
      if (std::fabs(got - want) <= rtol * (1.0 + std::fabs(want))) continue;
      if (++wrong <= 3) FAIL_CHECK("output " << o << " element " << i << ": " << got << ", expected " << want);
    }
    CHECK(wrong == 0);
  }
}

}  // namespace kiln::testing
