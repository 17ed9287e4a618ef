// Pass dce: dead-code elimination. A node is live when a graph output depends on it; graph
// inputs are always kept (they are the signature). Dead nodes are erased and the graph is
// compacted, which also drops constants nothing refers to any more.
#include <vector>

#include "passes/passes.h"

namespace kiln::passes {

Status dce_pass(ir::Graph& graph, const PassContext&) {
  const size_t n = graph.num_nodes();
  std::vector<bool> live(n, false);
  std::vector<ir::NodeId> stack;
  for (const ir::GraphOutput& out : graph.outputs()) stack.push_back(out.node);
  for (ir::NodeId id : graph.inputs()) stack.push_back(id);
  while (!stack.empty()) {
    ir::NodeId id = stack.back();
    stack.pop_back();
    if (live[id]) continue;
    live[id] = true;
    for (ir::NodeId in : graph.node(id).inputs) {
      if (!live[in]) stack.push_back(in);
    }
  }
  bool removed = false;
  for (ir::NodeId id = 0; id < n; ++id) {
    if (!live[id]) {
      graph.node(id).erased = true;
      removed = true;
    }
  }
  if (removed) graph.compact();
  return Status::ok();
}

}  // namespace kiln::passes
