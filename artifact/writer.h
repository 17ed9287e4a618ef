// Writes the .kiln artifact: a FlatBuffers file (schema: artifact/kiln.fbs) holding the format
// version, the I/O signature, the optimized graph with its constants (each stored 64-byte
// aligned so the runtime can use it in place), the execution plan, and kernels per target.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::artifact {

struct WriteOptions {
  std::string producer = "kiln";       // recorded in the file, e.g. "kilnc 0.1.0"
  std::vector<KernelBinary> kernels;   // compiled kernels for every target (may be empty)
  std::vector<ModuleBinary> modules;   // shared modules for every target (may be empty)
};

// The graph must be compacted (no erased nodes). Fails with kInvalidArgument if the graph or
// plan reference something out of range, and kUnsupported if it exceeds FlatBuffers' 2 GiB limit.
Result<std::vector<uint8_t>> write_artifact(const ir::Graph& graph, const ir::ExecutionPlan& plan);
Result<std::vector<uint8_t>> write_artifact(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                            const WriteOptions& options);
// The same file, written to `path` ('-': stdout) straight from the builder, so that the
// artifact is never held twice in memory (kilnc's peak memory on large models).
Status write_artifact_file(const std::string& path, const ir::Graph& graph, const ir::ExecutionPlan& plan,
                           const WriteOptions& options);

}  // namespace kiln::artifact
