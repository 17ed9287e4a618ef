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
  uint32_t format_version = 0;  // the file's: its checksums' algorithm (blob_checksum); format 4 on, constants have one
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> owner;
};

// `checks` (the targets' blobs, target_blob_checks) and, format 4 on, the constants are being
// checked in `started` when this returns: item i < checks.size() is checks[i], item
// checks.size() + j is constant j. The caller asks it for the result before anything reads the
// constants' values or runs a blob.
Result<ir::Graph> convert_graph(const fb::Graph& graph, const DataSegment& segment,
                                std::vector<ChecksumCheck::Item> checks, std::unique_ptr<ChecksumCheck>& started);

// Every target's module and kernel blobs, and the packed weights of its conv calls (in
// `segment`), with the checksums the file states, in file order (each target's modules, then its
// kernels, each followed by its packed weights), so that they are hashed on the checking threads
// rather than one by one while the targets are converted. The file has passed the FlatBuffers
// verifier.
std::vector<ChecksumCheck::Item> target_blob_checks(const flatbuffers::Vector<flatbuffers::Offset<fb::Target>>* targets,
                                                    const DataSegment& segment);
// The error for item `index` of target_blob_checks(targets) not matching its checksum.
Status damaged_target_blob(const flatbuffers::Vector<flatbuffers::Offset<fb::Target>>* targets, size_t index);

// Checks every reference of the plan against the converted graph.
Result<ir::ExecutionPlan> convert_plan(const fb::Plan* plan, const ir::Graph& graph);

// Every target's kernels and shared modules, with their formats, checksums, module references
// and GEMM calls checked.
struct ConvertedTargets {
  std::vector<KernelBinary> kernels;
  std::vector<ModuleBinary> modules;
};
// The blobs' checksums are not checked here (target_blob_checks). Blobs are views of the file
// where aligned, kept alive by `owner` (the file's bytes); packed weights are views of `segment`.
Result<ConvertedTargets> convert_targets(
    const flatbuffers::Vector<flatbuffers::Offset<fb::Target>>* targets, const ir::Graph& graph,
    const std::shared_ptr<const void>& owner, const DataSegment& segment);

// Cross-checks the converted plan and binaries against the verified graph (each buffer's role
// and size, launch order, arena slots, every binary's arguments = kernel_signature, library
// calls writing an output). kCorrupt naming the first disagreement.
Status check_plan_against_graph(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                const std::vector<KernelBinary>& binaries);

}  // namespace kiln::artifact::detail
