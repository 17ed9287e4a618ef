#include "codegen/kernel_model.h"

#include <algorithm>
#include <set>

namespace kiln::codegen {

using ir::Node;
using ir::NodeId;
using ir::OpKind;

int KernelModel::buffer_index(NodeId value) const {
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].value == value) return int(i);
  }
  return -1;
}

std::string sanitize_identifier(const std::string& name) {
  std::string out = "k_";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out;
}

namespace {

// The kernel template follows the anchor's fusion class: reductions and normalizations are row
// kernels, matmul its tiled template, attention its own; everything else (conv2d, pooling,
// layout, elementwise) computes one output element per work item.
KernelTemplate template_of(OpKind op) {
  if (ir::op_info(op).family == ir::OpFamily::kAttention) return KernelTemplate::kAttention;
  switch (ir::op_info(op).fusion) {
    case ir::FusionClass::kPrologueAnchor: return KernelTemplate::kRowReduce;
    case ir::FusionClass::kEpilogueAnchor:
      return ir::op_info(op).family == ir::OpFamily::kLinalg ? KernelTemplate::kMatMul : KernelTemplate::kPointwise;
    case ir::FusionClass::kSource: case ir::FusionClass::kCheap: case ir::FusionClass::kElementwise:
    case ir::FusionClass::kOwnKernel: return KernelTemplate::kPointwise;
  }
  return KernelTemplate::kPointwise;
}

// The product of the dims of `shape` whose flag in `pick` is `want` (all dims when pick is empty).
ir::SizeExpr product(const ir::Shape& shape, const std::vector<bool>& pick, bool want) {
  ir::SizeExpr total = ir::SizeExpr::constant(1);
  ir::Shape kept;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (pick.empty() || pick[d] == want) kept.push_back(shape[d]);
  }
  return ir::SizeExpr::of_shape(kept, 1);
}

}  // namespace

Result<KernelModel> build_kernel_model(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                       uint32_t kernel_index) {
  if (kernel_index >= graph.kernels().size())
    return invalid_argument("kernel index " + std::to_string(kernel_index) + " out of range");
  const ir::Kernel& kernel = graph.kernels()[kernel_index];
  KernelModel m;
  m.graph = &graph;
  m.kernel = &kernel;
  m.plan = &plan;
  m.kernel_index = kernel_index;
  m.entry_point = sanitize_identifier(kernel.name);
  if (kernel.outputs.empty() || kernel.nodes.empty())
    return internal_error("kernel '" + kernel.name + "' has no nodes or no outputs");

  // Buffers: every value read from memory, then every value written.
  auto add_buffer = [&](NodeId v, bool written) -> Status {
    if (plan.find_buffer(v) == nullptr)
      return internal_error("kernel '" + kernel.name + "': value '" + graph.node(v).name +
                            "' has no buffer in the plan");
    m.buffers.push_back({v, graph.node(v).type.dtype, graph.node(v).type.shape, written});
    return Status::ok();
  };
  for (NodeId v : kernel.inputs) KILN_RETURN_IF_ERROR(add_buffer(v, false));
  for (NodeId v : kernel.outputs) KILN_RETURN_IF_ERROR(add_buffer(v, true));

  // Anchor and the elementwise nodes around it.
  m.anchor = kernel.anchor;
  if (m.anchor == ir::kNoNode) {
    for (NodeId n : kernel.nodes) {
      if (!ir::is_elementwise(graph.node(n).op)) m.anchor = n;  // e.g. a lone layout op at -O0
    }
  }
  // The prologue is what the anchor reads, directly or through other prologue nodes (computed
  // in the operand's space). Every other node is epilogue (the output's space), also one that
  // comes before the anchor in kernel order because it reads only kernel inputs: e.g. fusion
  // puts `sq = pow(mean, 2)` before `var = reduce_mean(x*x) - sq`'s reduction.
  std::set<NodeId> feeds_anchor;
  if (m.anchor != ir::kNoNode) {
    const std::set<NodeId> in_kernel(kernel.nodes.begin(), kernel.nodes.end());
    std::vector<NodeId> stack = {m.anchor};
    while (!stack.empty()) {
      const NodeId n = stack.back();
      stack.pop_back();
      for (NodeId in : graph.node(n).inputs)
        if (in != m.anchor && in_kernel.count(in) && feeds_anchor.insert(in).second) stack.push_back(in);
    }
  }
  for (NodeId n : kernel.nodes) {
    if (n == m.anchor) continue;
    if (!ir::is_elementwise(graph.node(n).op))
      return unsupported("kernel '" + kernel.name + "': more than one non-elementwise op");
    (m.anchor == ir::kNoNode || feeds_anchor.count(n) ? m.prologue : m.epilogue).push_back(n);
  }

  // Parameters: the buffers above, then the symbols (artifact::kernel_signature, the calling
  // convention the reader checks every binary against).
  m.args = artifact::kernel_signature(graph, kernel);
  for (const artifact::KernelArg& arg : m.args)
    if (arg.kind == artifact::KernelArg::Kind::kSymbol) m.symbols.push_back(arg.symbol);

  // Template, index space and dispatch.
  const Node* anchor = m.anchor == ir::kNoNode ? nullptr : &graph.node(m.anchor);
  m.kind = anchor ? template_of(anchor->op) : KernelTemplate::kPointwise;
  switch (m.kind) {
    case KernelTemplate::kPointwise: {
      // The index space is the output of the anchor (or of the last node: elementwise kernels
      // iterate their output's shape).
      m.space = anchor ? anchor->type.shape : graph.node(kernel.nodes.back()).type.shape;
      m.dispatch.work_items = product(m.space, {}, true);
      m.dispatch.items_per_group = kPointwiseGroupSize;
      m.dispatch.workgroup_size = kPointwiseGroupSize;
      break;
    }
    case KernelTemplate::kRowReduce: {
      const Node& x = graph.node(anchor->inputs[0]);
      m.space = x.type.shape;
      const int64_t rank = int64_t(m.space.size());
      m.reduced_axes.assign(m.space.size(), false);
      // The reduced axes come from the anchor's attribute struct: any reduction with
      // ReduceAttrs, argmax, softmax / log_softmax (AxisAttrs) or layer_norm.
      if (const auto* a = std::get_if<ir::ReduceAttrs>(&anchor->attrs)) {
        for (int64_t axis : a->axes) {
          if (axis < 0 || axis >= rank) return internal_error("reduce axis out of range");
          m.reduced_axes[size_t(axis)] = true;
        }
      } else if (const auto* a = std::get_if<ir::ArgMaxAttrs>(&anchor->attrs)) {
        KILN_ASSIGN_OR_RETURN(int64_t axis, ir::normalize_axis(a->axis, rank));
        m.reduced_axes[size_t(axis)] = true;
      } else if (const auto* a = std::get_if<ir::AxisAttrs>(&anchor->attrs)) {
        KILN_ASSIGN_OR_RETURN(int64_t axis, ir::normalize_axis(a->axis, rank));
        m.reduced_axes[size_t(axis)] = true;
      } else if (const auto* a = std::get_if<ir::LayerNormAttrs>(&anchor->attrs)) {
        KILN_ASSIGN_OR_RETURN(int64_t axis, ir::normalize_axis(a->axis, rank));
        for (int64_t d = axis; d < rank; ++d) m.reduced_axes[size_t(d)] = true;
      } else {
        return internal_error("kernel '" + kernel.name + "': row anchor '" + anchor->name +
                              "' has no reduced axes");
      }
      m.dispatch.work_items = product(m.space, m.reduced_axes, false);
      m.dispatch.items_per_group = 1;
      m.dispatch.workgroup_size = kRowGroupSize;
      break;
    }
    case KernelTemplate::kMatMul: {
      m.space = anchor->type.shape;
      m.dispatch.work_items = product(m.space, {}, true);
      m.dispatch.items_per_group = kMatMulTile * kMatMulTile;
      m.dispatch.workgroup_size = kMatMulTile * kMatMulTile;
      break;
    }
    case KernelTemplate::kAttention: {
      m.space = anchor->type.shape;
      // One work item per query row: every output element but the head's.
      m.dispatch.work_items = product(ir::Shape(m.space.begin(), m.space.end() - 1), {}, true);
      m.dispatch.items_per_group = kAttentionGroupSize;
      m.dispatch.workgroup_size = kAttentionGroupSize;
      break;
    }
  }
  return m;
}

}  // namespace kiln::codegen
