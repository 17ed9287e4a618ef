// Internal to the artifact reader: conversion of verified FlatBuffers tables into ir:: objects.
// Every function assumes the FlatBuffers Verifier has accepted the buffer (so every offset and
// vector is in bounds) and checks everything else: enum values, ids, attribute shapes, sizes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "artifact/artifact.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "kiln_generated.h"
#include "support/status.h"

namespace kiln::artifact::detail {

// `bytes` owns the buffer `graph` points into; constants become views that keep it alive.
Result<ir::Graph> convert_graph(const fb::Graph& graph,
                                const std::shared_ptr<const std::vector<uint8_t>>& bytes);

// Checks every reference of the plan against the converted graph.
Result<ir::ExecutionPlan> convert_plan(const fb::Plan* plan, const ir::Graph& graph);

// Every target's kernels and shared modules, with their formats, checksums, module references
// and GEMM calls checked.
struct ConvertedTargets {
  std::vector<KernelBinary> kernels;
  std::vector<ModuleBinary> modules;
};
Result<ConvertedTargets> convert_targets(
    const flatbuffers::Vector<flatbuffers::Offset<fb::Target>>* targets, const ir::Graph& graph);

}  // namespace kiln::artifact::detail
