// Internal to the artifact reader: conversion of verified FlatBuffers tables into ir:: objects.
// Every function assumes the FlatBuffers Verifier has accepted the buffer (so every offset and
// vector is in bounds) and checks everything else: enum values, ids, attribute shapes, sizes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/checksum_check.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "kiln_generated.h"
#include "support/status.h"

namespace kiln::artifact::detail {

// `bytes` owns the buffer `graph` points into; constants become views that keep it alive.
// Where a file's constants are: inline in their ConstantData (formats 1-2), or `bytes`, the data
// segment (format 3). `owner` keeps the file's bytes alive; constants are views into them.
struct DataSegment {
  bool inline_data = false;
  uint32_t format_version = 0;  // format 4 on: each constant's checksum is checked (blob_checksum)
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> owner;
};

// Format 4 on, the constants' checksums are being checked in `constant_checks` when this returns
// (blob i is constant i); the caller asks it for the result before anything reads their values.
Result<ir::Graph> convert_graph(const fb::Graph& graph, const DataSegment& segment,
                                std::unique_ptr<ChecksumCheck>& constant_checks);

// Checks every reference of the plan against the converted graph.
Result<ir::ExecutionPlan> convert_plan(const fb::Plan* plan, const ir::Graph& graph);

// Every target's kernels and shared modules, with their formats, checksums, module references
// and GEMM calls checked.
struct ConvertedTargets {
  std::vector<KernelBinary> kernels;
  std::vector<ModuleBinary> modules;
};
// Blob checksums are checked with the file's format version's algorithm (blob_checksum). Blobs
// are views of the file where aligned, kept alive by `owner` (the file's bytes).
Result<ConvertedTargets> convert_targets(
    const flatbuffers::Vector<flatbuffers::Offset<fb::Target>>* targets, const ir::Graph& graph,
    uint32_t format_version, const std::shared_ptr<const void>& owner);

// Cross-checks the converted plan and binaries against the verified graph (each buffer's role
// and size, launch order, arena slots, every binary's arguments = kernel_signature, library
// calls writing an output). kCorrupt naming the first disagreement.
Status check_plan_against_graph(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                const std::vector<KernelBinary>& binaries);

}  // namespace kiln::artifact::detail
