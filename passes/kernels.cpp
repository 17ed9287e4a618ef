// Pass one-kernel-per-op: the unfused kernel list, used at -O0, -O1 and with -fno-fuse. Every
// op is its own kernel named "<op>_<index>" (e.g. "add_3"). At -O0 a reshape is a copy kernel
// (kLayout) like any other op; from -O1 on, a reshape that is not a graph output is a view of
// its operand and gets no kernel (Storage::kAlias in the plan), as with fusion.
#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace kiln::passes {

Status one_kernel_per_op_pass(ir::Graph& graph, const PassContext& context) {
  // Outputs defined directly by a constant or input need a kernel writing the output buffer.
  KILN_RETURN_IF_ERROR(split_wide_concats(graph));
  fix_output_names(graph);
  std::vector<bool> is_output = output_mask(graph);
  std::vector<ir::Kernel>& kernels = graph.kernels();
  kernels.clear();
  for (ir::NodeId id = 0; id < graph.num_nodes(); ++id) {
    const ir::Node& node = graph.node(id);
    if (node.erased || is_source(node.op)) continue;
    if (is_alias_reshape(graph, id, is_output, context.options.opt_level)) continue;
    ir::Kernel kernel;
    kernel.kind = kernel_kind_for(node.op);
    kernel.nodes = {id};
    kernel.anchor = ir::is_elementwise(node.op) ? ir::kNoNode : id;
    kernels.push_back(std::move(kernel));
  }
  finalize_kernels(graph);
  return Status::ok();
}

}  // namespace kiln::passes
