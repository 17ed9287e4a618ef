// The pass manager: runs a plain list of passes in order, optionally verifying, printing and
// timing each one (Halide's Lower.cpp style: the pipeline is a readable list, not a framework).
//
// Ownership: a Pass is a plain value (two string views into static storage and a function
// pointer). The manager borrows the graph and the context for the duration of run_passes().
// Thread-safety: run_passes() mutates the graph; callers give it exclusive access.
#pragma once

#include <span>
#include <string_view>

#include "ir/graph.h"
#include "ir/plan.h"
#include "passes/pipeline.h"
#include "support/status.h"

namespace kiln::passes {

// What every pass can see besides the graph.
struct PassContext {
  const PipelineOptions& options;
  // Where the memory-planning pass writes its result (null for pipelines without planning).
  ir::ExecutionPlan* plan = nullptr;
};

using PassFunction = Status (*)(ir::Graph& graph, const PassContext& context);

struct Pass {
  std::string_view name;         // as used by --print-ir-after and shown by --list-passes
  std::string_view description;  // one line
  PassFunction run = nullptr;
  // True for the pass that establishes a topological node order; every pass after it keeps the
  // order, so verification after it also checks that operands are defined before use.
  bool sorts_nodes = false;
};

// Checks that every name in options.print_after names a pass of `known` (kInvalidArgument
// listing the valid names otherwise). Run before any pass, so a typo costs nothing.
Status check_print_after_names(const PipelineOptions& options, std::span<const Pass> known);

// Runs `pipeline` in order on `graph`. After each pass: verifies the graph when
// options.verify_each (a failure is kInternal naming the pass), prints
// "// ----- IR after <pass> -----" and the IR to the log when asked. With options.time_report,
// prints a table of per-pass wall times to the log at the end. A pass's own error stops the
// pipeline and is returned unchanged.
Status run_passes(ir::Graph& graph, std::span<const Pass> pipeline, const PassContext& context);

}  // namespace kiln::passes
