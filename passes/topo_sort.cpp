// Pass topo-sort: a stable topological sort. Frontends already produce a valid order, so on their
// graphs this is a no-op; graphs built in code (or edited by tools) may not be. Later passes rely
// on the order (they walk nodes once, operands before users) and keep it.
#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace kiln::passes {

Status topo_sort_pass(ir::Graph& graph, const PassContext&) {
  return reorder_topologically(graph);
}

}  // namespace kiln::passes
