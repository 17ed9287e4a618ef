// Pass infer-shapes: recomputes every value's dtype and shape (and normalizes attributes) with
// ir::infer_graph, which also checks the graph outputs against their declared types.
#include "ir/infer.h"
#include "passes/passes.h"

namespace kiln::passes {

Status infer_shapes_pass(ir::Graph& graph, const PassContext&) { return ir::infer_graph(graph); }

}  // namespace kiln::passes
