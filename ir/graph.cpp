#include "ir/graph.h"

#include <unordered_set>

#include "support/check.h"

namespace kiln::ir {

std::string_view kernel_kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::kElementwise: return "elementwise";
    case KernelKind::kReduction: return "reduction";
    case KernelKind::kNormalization: return "normalization";
    case KernelKind::kMatMul: return "matmul";
    case KernelKind::kLayout: return "layout";
    case KernelKind::kConv: return "conv";
    case KernelKind::kAttention: return "attention";
  }
  return "?";
}

NodeId Graph::add_node(Node node) {
  nodes_.push_back(std::move(node));
  return NodeId(nodes_.size() - 1);
}

NodeId Graph::find(std::string_view name) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].erased && nodes_[i].name == name) return NodeId(i);
  }
  return kNoNode;
}

uint32_t Graph::add_constant(Tensor data) {
  constants_.push_back(std::move(data));
  return uint32_t(constants_.size() - 1);
}

const Tensor& Graph::constant_of(NodeId id) const {
  const Node& n = nodes_[id];
  KILN_CHECK(n.op == OpKind::kConstant, "constant_of() on a non-constant node");
  return constants_[std::get<ConstantAttrs>(n.attrs).constant_index];
}

void Graph::replace_all_uses(NodeId from, NodeId to) {
  for (Node& n : nodes_) {
    if (n.erased) continue;
    for (NodeId& in : n.inputs) {
      if (in == from) in = to;
    }
  }
  for (GraphOutput& out : outputs_) {
    if (out.node == from) out.node = to;
  }
}

std::vector<std::vector<NodeId>> Graph::users() const {
  std::vector<std::vector<NodeId>> result(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].erased) continue;
    for (NodeId in : nodes_[i].inputs) {
      std::vector<NodeId>& list = result[in];
      if (list.empty() || list.back() != NodeId(i)) list.push_back(NodeId(i));
    }
  }
  return result;
}

void Graph::compact() {
  std::vector<NodeId> remap(nodes_.size(), kNoNode);
  std::vector<Node> kept;
  kept.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].erased) continue;
    remap[i] = NodeId(kept.size());
    kept.push_back(std::move(nodes_[i]));
  }
  for (Node& n : kept) {
    for (NodeId& in : n.inputs) {
      KILN_CHECK(remap[in] != kNoNode, "a live node reads an erased node");
      in = remap[in];
    }
  }
  nodes_ = std::move(kept);

  std::vector<NodeId> new_inputs;
  for (NodeId id : inputs_) {
    if (remap[id] != kNoNode) new_inputs.push_back(remap[id]);
  }
  inputs_ = std::move(new_inputs);
  for (GraphOutput& out : outputs_) {
    KILN_CHECK(remap[out.node] != kNoNode, "a graph output was erased");
    out.node = remap[out.node];
  }

  // Drop kernels that lost a node; renumber the rest.
  std::vector<Kernel> kernels;
  for (Kernel& k : kernels_) {
    bool intact = true;
    auto remap_list = [&](std::vector<NodeId>& ids) {
      for (NodeId& id : ids) {
        if (remap[id] == kNoNode) intact = false; else id = remap[id];
      }
    };
    remap_list(k.nodes);
    remap_list(k.inputs);
    remap_list(k.outputs);
    if (k.anchor != kNoNode) {
      if (remap[k.anchor] == kNoNode) intact = false; else k.anchor = remap[k.anchor];
    }
    if (intact) kernels.push_back(std::move(k));
  }
  kernels_ = std::move(kernels);

  // Drop unreferenced constants and renumber constant indices.
  std::vector<uint32_t> const_remap(constants_.size(), ~0u);
  std::vector<Tensor> constants;
  for (Node& n : nodes_) {
    if (n.op != OpKind::kConstant) continue;
    auto& attrs = std::get<ConstantAttrs>(n.attrs);
    uint32_t& slot = const_remap[attrs.constant_index];
    if (slot == ~0u) {
      slot = uint32_t(constants.size());
      constants.push_back(std::move(constants_[attrs.constant_index]));
    }
    attrs.constant_index = slot;
  }
  constants_ = std::move(constants);
}

std::string Graph::unique_name(std::string_view base) const {
  std::unordered_set<std::string_view> used;
  used.reserve(nodes_.size());
  for (const Node& n : nodes_) used.insert(n.name);
  for (uint64_t i = 1;; ++i) {
    std::string candidate = std::string(base) + "." + std::to_string(i);
    if (!used.count(candidate)) return candidate;
  }
}

NameTable::NameTable(const Graph& graph) {
  used_.reserve(graph.num_nodes() * 2);
  for (const Node& n : graph.nodes()) used_.insert(n.name);
}

std::string NameTable::fresh(std::string_view base) {
  std::string key(base);
  uint64_t& next = next_suffix_[key];
  for (;;) {
    std::string candidate = key + "." + std::to_string(++next);
    if (used_.insert(candidate).second) return candidate;
  }
}

}  // namespace kiln::ir
