// The IR verifier: structural invariants every pass must preserve.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::ir {

// Checks: node ids and input ids in range and not erased; inputs defined before use (in node
// order) once `require_topological` is set; unique names; attrs variant matches the op kind;
// input counts within op_info limits; types match what inference would compute; constants
// exist and match their node's type; graph outputs point at live nodes with the declared type;
// kernels reference live nodes, name their inputs/outputs correctly, and cover no node twice.
// The message names the node, the op and what is wrong.
Status verify_graph(const Graph& graph, bool require_topological = true);

}  // namespace kiln::ir
