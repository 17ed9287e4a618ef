// Writes the .kiln artifact: a FlatBuffers file (schema: artifact/kiln.fbs) holding the format
// version, the I/O signature, the optimized graph with its constants (each stored 64-byte
// aligned so the runtime can use it in place), the execution plan, and kernels per target.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::artifact {

Result<std::vector<uint8_t>> write_artifact(const ir::Graph& graph, const ir::ExecutionPlan& plan);

}  // namespace kiln::artifact
