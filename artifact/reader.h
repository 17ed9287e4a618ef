// Reads a .kiln artifact (schema artifact/kiln.fbs) back into an ir::Graph, an ir::ExecutionPlan
// and the kernel binaries per target.
//
// Loading never trusts the file: it checks the identifier and the format version, runs the
// FlatBuffers Verifier over the whole buffer, then checks the meaning of everything it converts
// (enum values, node and kernel ids in range, attributes matching each op kind, constant sizes
// matching their types, plan references, the recorded file size) and finally runs
// ir::verify_graph. A truncated, corrupted or foreign file gives kCorrupt, a newer format
// version kInvalidArgument, each with a message saying what is wrong; it never crashes or reads
// out of bounds.
//
// Ownership: the LoadedArtifact keeps the file bytes alive (`bytes`); constants whose data is
// suitably aligned in memory are ir::Tensor views into those bytes (no copy), the others are
// copied. A LoadedArtifact is immutable after loading: share it as
// std::shared_ptr<const LoadedArtifact> between sessions and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::artifact {

struct LoadedArtifact {
  uint32_t format_version = 0;
  std::string producer;
  ir::Graph graph;  // the optimized graph with its kernels and constants
  ir::ExecutionPlan plan;
  std::vector<KernelBinary> kernels;  // every target's compiled kernels
  std::vector<ModuleBinary> modules;  // every target's shared modules (CUDA: PTX, cubins)
  std::shared_ptr<const std::vector<uint8_t>> bytes;  // the file; constant views point into it

  // Names of the targets that have compiled kernels, in file order.
  std::vector<std::string> targets() const;
};

// Parses an artifact held in memory. `bytes` may be null or empty (an error, not a crash).
Result<LoadedArtifact> read_artifact(std::shared_ptr<const std::vector<uint8_t>> bytes);

// Reads a file and parses it. A missing or unreadable file is kNotFound / kInvalidArgument
// naming the path.
Result<LoadedArtifact> read_artifact_file(const std::string& path);

}  // namespace kiln::artifact
