// Internal to the reference driver: runs a graph with the reference interpreter, optionally
// node by node with per-kernel wall-time attribution.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/hal/types.h"
#include "support/status.h"

namespace kiln::runtime::reference {

// Evaluates `graph` node by node (ir::evaluate_node), timing each node with the host clock and
// adding the time to the kernel that contains it (graph.kernels()); nodes outside every kernel
// (inputs, constants, unfused graphs) are reported per node as kNoKernel entries. Entries come
// in first-execution order. Returns the outputs in signature order.
Result<std::vector<ir::Tensor>> interpret_with_profile(const ir::Graph& graph,
                                                       std::span<const ir::Tensor> inputs,
                                                       hal::Profile& profile);

}  // namespace kiln::runtime::reference
