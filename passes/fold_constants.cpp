// Pass fold-constants: evaluates every op whose operands are all constants with the reference
// interpreter (ir::evaluate_node, so folding computes exactly what the runtime would) and turns
// the node into a constant holding the result.
//
// Limits, to keep artifacts small: a result with more than kMaxFoldedElements elements (or a
// symbolic shape) is never folded, so a large param is never copied into a new huge constant
// (e.g. transpose(w) of a 4096x4096 weight stays an op). A node the interpreter refuses to
// evaluate is left for the runtime, which reports the problem with its inputs.
#include <vector>

#include "ir/interpreter.h"
#include "passes/passes.h"

namespace kiln::passes {

Status fold_constants_pass(ir::Graph& graph, const PassContext&) {
  bool folded_any = false;
  const ir::SymbolBindings no_symbols;
  for (ir::NodeId id = 0; id < graph.num_nodes(); ++id) {
    ir::Node& node = graph.node(id);
    // Sources are what folding produces; an op without operands (iota) folds like any other.
    if (node.erased || node.op == ir::OpKind::kInput || node.op == ir::OpKind::kConstant) continue;
    bool all_constant = true;
    for (ir::NodeId in : node.inputs) all_constant &= graph.node(in).op == ir::OpKind::kConstant;
    if (!all_constant) continue;
    std::optional<int64_t> elements = ir::static_num_elements(node.type.shape);
    if (!elements || *elements > kMaxFoldedElements) continue;

    std::vector<const ir::Tensor*> operands;
    for (ir::NodeId in : node.inputs) operands.push_back(&graph.constant_of(in));
    Result<ir::Tensor> value = ir::evaluate_node(graph, node, operands, no_symbols);
    if (!value.is_ok()) continue;
    if (value->type() != node.type) {
      return internal_error("constant folding of '" + node.name + "' (" +
                            std::string(ir::op_name(node.op)) + ") gave " +
                            value->type().to_string() + ", expected " + node.type.to_string());
    }
    uint32_t index = graph.add_constant(std::move(value).value());
    node.op = ir::OpKind::kConstant;
    node.inputs.clear();
    node.attrs = ir::ConstantAttrs{index, ""};
    folded_any = true;
  }
  // Drops constant data that only the folded nodes referred to.
  if (folded_any) graph.compact();
  return Status::ok();
}

}  // namespace kiln::passes
