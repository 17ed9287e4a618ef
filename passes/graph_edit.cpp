// Shared editing helpers of the passes (see graph_edit.h).
#include "passes/graph_edit.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <unordered_map>

#include "ir/infer.h"
#include "support/check.h"

namespace kiln::passes {

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != int64_t(i)) return false;
  }
  return true;
}

using ir::Graph;
using ir::Kernel;
using ir::KernelKind;
using ir::kNoNode;
using ir::Node;
using ir::NodeId;
using ir::OpFamily;
using ir::OpKind;

NodeId add_constant_node(Graph& graph, ir::Tensor data, ir::TensorType type, const std::string& base,
                         const SourceLoc& loc) {
  Node node;
  node.op = OpKind::kConstant;
  node.name = graph.unique_name(base);
  node.type = std::move(type);
  node.loc = loc;
  node.attrs = ir::ConstantAttrs{graph.add_constant(std::move(data)), ""};
  return graph.add_node(std::move(node));
}

Result<NodeId> add_inferred_node(Graph& graph, OpKind op, std::vector<NodeId> inputs, ir::Attrs attrs,
                                 const std::string& base, const SourceLoc& loc) {
  Node node;
  node.op = op;
  node.name = graph.unique_name(base);
  node.loc = loc;
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  KILN_RETURN_IF_ERROR(ir::infer_node(graph, node));
  return graph.add_node(std::move(node));
}

std::vector<int64_t> compose_perms(const std::vector<int64_t>& inner, const std::vector<int64_t>& outer) {
  std::vector<int64_t> composed;
  for (int64_t p : outer) composed.push_back(inner[size_t(p)]);
  return composed;
}

KernelKind kernel_kind_for(OpKind op) {
  switch (ir::op_info(op).family) {
    case OpFamily::kReduce: return KernelKind::kReduction;
    case OpFamily::kNormalize: return KernelKind::kNormalization;
    case OpFamily::kLinalg: return KernelKind::kMatMul;
    case OpFamily::kAttention: return KernelKind::kAttention;
    case OpFamily::kLayout: return KernelKind::kLayout;
    case OpFamily::kConv: return KernelKind::kConv;
    case OpFamily::kSource:
    case OpFamily::kUnary:
    case OpFamily::kBinary:
    case OpFamily::kCompare:
    case OpFamily::kLogic:
    case OpFamily::kSelect:
    case OpFamily::kConvert: return KernelKind::kElementwise;
  }
  return KernelKind::kElementwise;
}

// ---- UseCounts -----------------------------------------------------------------------------

UseCounts::UseCounts(const Graph& graph) : counts_(graph.num_nodes(), 0) {
  for (const Node& node : graph.nodes())
    if (!node.erased)
      for (NodeId in : node.inputs) ++counts_[in];
  for (const ir::GraphOutput& out : graph.outputs()) ++counts_[out.node];
}

void UseCounts::set(NodeId id, int64_t count) {
  if (id >= counts_.size()) counts_.resize(size_t(id) + 1, 0);
  counts_[id] = count;
}

void UseCounts::drop(Graph& graph, NodeId id) {
  set(id, count(id) - 1);
  Node& node = graph.node(id);
  if (count(id) > 0 || node.op != OpKind::kConstant || node.erased) return;
  graph.constants()[std::get<ir::ConstantAttrs>(node.attrs).constant_index] = ir::Tensor();
  node.erased = true;
}

// ---- ValueRemap ----------------------------------------------------------------------------

ValueRemap::ValueRemap(size_t num_nodes) : target_(num_nodes) {
  std::iota(target_.begin(), target_.end(), NodeId(0));
}

void ValueRemap::replace(NodeId from, NodeId to) {
  if (from >= target_.size()) {
    size_t old = target_.size();
    target_.resize(from + 1);
    std::iota(target_.begin() + old, target_.end(), NodeId(old));
  }
  target_[from] = to;
  changed_ = true;
}

NodeId ValueRemap::resolve(NodeId id) {
  NodeId root = id;
  while (root < target_.size() && target_[root] != root) root = target_[root];
  // Path compression keeps chains of replacements cheap.
  while (id < target_.size() && target_[id] != root) {
    NodeId next = target_[id];
    target_[id] = root;
    id = next;
  }
  return root;
}

void ValueRemap::rewrite_operands(Node& node) {
  if (!changed_) return;
  for (NodeId& in : node.inputs) in = resolve(in);
}

void ValueRemap::rewrite_outputs(Graph& graph) {
  if (!changed_) return;
  for (ir::GraphOutput& out : graph.outputs()) out.node = resolve(out.node);
}

void ValueRemap::finish(Graph& graph) {
  if (!changed_) return;
  rewrite_outputs(graph);
  fix_output_names(graph);
  graph.compact();
}

// ---- outputs invariant ---------------------------------------------------------------------

std::vector<bool> output_mask(const Graph& graph) {
  std::vector<bool> mask(graph.num_nodes(), false);
  for (const ir::GraphOutput& out : graph.outputs()) {
    if (out.node < mask.size()) mask[out.node] = true;
  }
  return mask;
}

void fix_output_names(Graph& graph) {
  std::vector<ir::GraphOutput>& outputs = graph.outputs();
  // Fast path: nothing to do (the common case; avoids building a name table).
  bool all_fine = true;
  for (const ir::GraphOutput& out : outputs) {
    const Node& n = graph.node(out.node);
    if (n.name != out.name || is_source(n.op)) all_fine = false;
  }
  if (all_fine) return;

  ir::NameTable names(graph);
  for (size_t i = 0; i < outputs.size(); ++i) {
    NodeId target = outputs[i].node;
    const std::string out_name = outputs[i].name;
    Node& target_node = graph.node(target);
    if (target_node.name == out_name && !is_source(target_node.op)) continue;

    // The node is free to take the name unless it is a source or already owns another output.
    bool owns_other_output = false;
    for (size_t j = 0; j < outputs.size(); ++j) {
      if (j != i && outputs[j].node == target && outputs[j].name == target_node.name) {
        owns_other_output = true;
      }
    }
    bool can_rename = !is_source(target_node.op) && !owns_other_output;

    // Whoever holds the name now (an erased or bypassed node, or the source itself) gives it up.
    for (NodeId id = 0; id < graph.num_nodes(); ++id) {
      Node& holder = graph.node(id);
      if (holder.name == out_name && !(can_rename && id == target)) {
        holder.name = names.fresh(out_name);
      }
    }
    if (can_rename) {
      graph.node(target).name = out_name;
      continue;
    }
    // A reshape to the same shape: a copy into the output's own buffer.
    Node copy;
    copy.op = OpKind::kReshape;
    copy.name = out_name;
    copy.inputs = {target};
    copy.attrs = ir::ReshapeAttrs{graph.node(target).type.shape};
    copy.type = graph.node(target).type;
    copy.loc = outputs[i].loc;
    names.insert(out_name);
    outputs[i].node = graph.add_node(std::move(copy));
  }
}

// ---- reordering ----------------------------------------------------------------------------

Status reorder_topologically(Graph& graph, const std::vector<uint64_t>* priority) {
  bool any_erased = false;
  for (const Node& n : graph.nodes()) any_erased |= n.erased;
  if (any_erased) {
    KILN_CHECK(priority == nullptr, "reorder with priorities needs a compacted graph");
    graph.compact();
  }
  const size_t n = graph.num_nodes();
  if (priority == nullptr) {
    // Fast path: already topological (every frontend's order is), nothing to do.
    bool sorted = true;
    for (NodeId id = 0; id < n && sorted; ++id) {
      for (NodeId in : graph.node(id).inputs) sorted &= in < id;
    }
    if (sorted) return Status::ok();
  }
  std::vector<uint32_t> pending(n, 0);
  std::vector<std::vector<NodeId>> users(n);
  for (NodeId id = 0; id < n; ++id) {
    for (NodeId in : graph.node(id).inputs) {
      if (in >= n) return internal_error("node '" + graph.node(id).name + "' reads a missing node");
      ++pending[id];
      users[in].push_back(id);
    }
  }
  auto key = [&](NodeId id) { return priority ? (*priority)[id] : uint64_t(id); };
  using Entry = std::pair<uint64_t, NodeId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (NodeId id = 0; id < n; ++id) {
    if (pending[id] == 0) ready.push({key(id), id});
  }
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    NodeId id = ready.top().second;
    ready.pop();
    order.push_back(id);
    for (NodeId user : users[id]) {
      if (--pending[user] == 0) ready.push({key(user), user});
    }
  }
  if (order.size() != n) {
    for (NodeId id = 0; id < n; ++id) {
      if (pending[id] != 0) {
        return internal_error("the graph has a cycle through node '" + graph.node(id).name + "'");
      }
    }
  }
  bool identity = true;
  for (NodeId i = 0; i < n; ++i) identity &= order[i] == i;
  if (identity) return Status::ok();

  std::vector<NodeId> new_id(n);
  for (NodeId i = 0; i < n; ++i) new_id[order[i]] = i;
  std::vector<Node> nodes;
  nodes.reserve(n);
  for (NodeId old : order) nodes.push_back(std::move(graph.node(old)));
  for (Node& node : nodes) {
    for (NodeId& in : node.inputs) in = new_id[in];
  }
  graph.nodes() = std::move(nodes);
  for (NodeId& id : graph.inputs()) id = new_id[id];
  for (ir::GraphOutput& out : graph.outputs()) out.node = new_id[out.node];
  for (Kernel& k : graph.kernels()) {
    for (NodeId& id : k.nodes) id = new_id[id];
    for (NodeId& id : k.inputs) id = new_id[id];
    for (NodeId& id : k.outputs) id = new_id[id];
    if (k.anchor != kNoNode) k.anchor = new_id[k.anchor];
  }
  return Status::ok();
}

// ---- kernels -------------------------------------------------------------------------------

std::string kernel_name(const Graph& graph, const std::vector<NodeId>& nodes, size_t index) {
  if (nodes.size() == 1) {
    return std::string(ir::op_name(graph.node(nodes[0]).op)) + "_" + std::to_string(index);
  }
  // Distinct op names in execution order; stop adding once the list is long (names stay
  // readable in profiles; the plan lists every source node anyway).
  constexpr size_t kMaxOpListChars = 40;
  std::vector<std::string_view> seen;
  std::string ops;
  bool truncated = false;
  for (NodeId id : nodes) {
    std::string_view op = ir::op_name(graph.node(id).op);
    if (std::find(seen.begin(), seen.end(), op) != seen.end()) continue;
    seen.push_back(op);
    if (!ops.empty() && ops.size() + 1 + op.size() > kMaxOpListChars) {
      truncated = true;
      continue;
    }
    if (!ops.empty()) ops += "_";
    ops += op;
  }
  if (truncated) ops += "_etc";
  return "fused_" + ops + "_" + std::to_string(index);
}

void finalize_kernels(Graph& graph) {
  const size_t n = graph.num_nodes();
  std::vector<int64_t> kernel_of(n, -1);
  std::vector<Kernel>& kernels = graph.kernels();
  for (size_t k = 0; k < kernels.size(); ++k) {
    std::sort(kernels[k].nodes.begin(), kernels[k].nodes.end());
    for (NodeId id : kernels[k].nodes) kernel_of[id] = int64_t(k);
  }
  std::vector<bool> is_output = output_mask(graph);
  // used_outside[id]: some node of another kernel (or no kernel: an alias) reads id.
  std::vector<bool> used_outside(n, false);
  for (NodeId id = 0; id < n; ++id) {
    for (NodeId in : graph.node(id).inputs) {
      if (kernel_of[in] != kernel_of[id] || kernel_of[id] < 0) used_outside[in] = true;
    }
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    Kernel& kernel = kernels[k];
    kernel.inputs.clear();
    kernel.outputs.clear();
    for (NodeId id : kernel.nodes) {
      for (NodeId in : graph.node(id).inputs) {
        if (kernel_of[in] != int64_t(k) &&
            std::find(kernel.inputs.begin(), kernel.inputs.end(), in) == kernel.inputs.end()) {
          kernel.inputs.push_back(in);
        }
      }
      if (used_outside[id] || is_output[id]) kernel.outputs.push_back(id);
    }
    // A dead op (only at -O0, which keeps them) is still computed; its value goes to a scratch
    // buffer so that every kernel writes something.
    if (kernel.outputs.empty() && !kernel.nodes.empty()) kernel.outputs.push_back(kernel.nodes.back());
    kernel.name = kernel_name(graph, kernel.nodes, k);
  }
}

bool is_alias_reshape(const Graph& graph, NodeId id, const std::vector<bool>& is_output,
                      int opt_level) {
  return opt_level >= 1 && graph.node(id).op == OpKind::kReshape && !is_output[id];
}

Status split_wide_concats(ir::Graph& graph) {
  bool changed = false;
  const size_t count = graph.num_nodes();
  for (ir::NodeId id = 0; id < count; ++id) {
    if (graph.node(id).erased || graph.node(id).op != ir::OpKind::kConcat ||
        graph.node(id).inputs.size() <= kMaxKernelOperands) {
      continue;
    }
    // Copies: appending nodes may move the node table.
    std::vector<ir::NodeId> operands = graph.node(id).inputs;
    const ir::Attrs attrs = graph.node(id).attrs;
    const std::string base = graph.node(id).name + "_part";
    const SourceLoc loc = graph.node(id).loc;
    while (operands.size() > kMaxKernelOperands) {
      std::vector<ir::NodeId> parts;
      for (size_t first = 0; first < operands.size(); first += kMaxKernelOperands) {
        const size_t last = std::min(operands.size(), first + kMaxKernelOperands);
        if (last - first == 1) {
          parts.push_back(operands[first]);
          continue;
        }
        std::vector<ir::NodeId> chunk(operands.begin() + std::ptrdiff_t(first), operands.begin() + std::ptrdiff_t(last));
        KILN_ASSIGN_OR_RETURN(ir::NodeId part, add_inferred_node(graph, ir::OpKind::kConcat, std::move(chunk), attrs, base, loc));
        parts.push_back(part);
      }
      operands = std::move(parts);
    }
    graph.node(id).inputs = std::move(operands);
    changed = true;
  }
  if (!changed) return Status::ok();
  return reorder_topologically(graph);
}

}  // namespace kiln::passes
