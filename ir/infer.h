// Shape and dtype inference for every op kind.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::ir {

// Computes the output type of `node` from its inputs' types (already inferred) and attributes,
// and normalizes attributes where the op allows defaults (reduce axes, slice axes/steps,
// negative axes). On failure returns kInvalidArgument with a message that says what is wrong
// in user terms (e.g. "cannot broadcast f32[3, 4] with f32[5]"); the caller adds the location.
// Attribute normalization is written back into node.attrs only on success.
Status infer_node(const Graph& graph, Node& node);

// Runs infer_node over every live node in order and checks graph outputs against their
// declared types. Errors carry the node's SourceLoc and name the node.
Status infer_graph(Graph& graph);

// Checks that one graph output's value has the type declared in the signature, with the
// spec's message ("output 'probs' is declared f32[N, 10] but defined as f32[N, 12]") at the
// output's location. Precondition: out.node is a live node of `graph`.
Status check_output_type(const Graph& graph, const GraphOutput& out);

// Whether an operand of `dtype` belongs to the class `dtypes` of an op's row (the check every
// rule makes of its operands; kilnc --list-ops lists each op's dtypes with it).
bool dtype_in_class(DTypeClass dtypes, DType dtype);

}  // namespace kiln::ir
