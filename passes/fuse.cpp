// Pass fuse: groups the graph's ops into kernels (graph.kernels()). See docs/fusion.md for the
// rules with examples; in short:
//
// * Kernels are built consumer-first: nodes are visited in reverse topological order, and a
//   producer joins the kernel of its consumers when *all* its consumers are in that one kernel
//   and the kernel can compute it in its index space. Every kernel therefore has exactly one
//   root (its only output) and kernels can never form a cycle.
// * Elementwise ops join when their output shape equals the index space in which their
//   consumer is computed: the consumer's own shape for an elementwise consumer (a chain or DAG
//   over one shape; smaller operands and scalar constants are read from memory with
//   broadcasting), the operand shape for a reduction, softmax, log_softmax or layer_norm (x)
//   consumer (a prologue).
// * An anchor op (reduction, argmax, softmax, log_softmax, layer_norm, matmul, conv2d) joins a
//   purely elementwise kernel whose nodes that read it have exactly the anchor's output shape:
//   that kernel becomes the anchor's epilogue (bias add + activation after a matmul, ...).
// * Layout ops, pooling, and graph outputs start their own kernels; a reshape that is not an
//   output is a view of its operand (no kernel, Storage::kAlias in the plan).
// * Multi-consumer rule: a value read by several kernels is recomputed in each of them (the
//   node is cloned under a fresh name, so no node is in two kernels) when it is cheap: a single
//   non-transcendental elementwise op, not a graph output, that reads at most one operand of
//   its own shape and that operand is already in memory (a graph input, constant or the result
//   of a non-elementwise op), read by at most kMaxRecomputeKernels kernels, each of which can
//   compute it. Recomputing then reads what reading the materialized value would and saves a
//   write and a launch. Otherwise the value is materialized: it roots its own kernel.
#include <algorithm>
#include <vector>

#include "passes/graph_edit.h"
#include "passes/passes.h"
#include "support/check.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Kernel;
using ir::KernelKind;
using ir::kNoNode;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

constexpr int kNoGroup = -1;
constexpr int kAliasGroup = -2;  // a reshape view: in no kernel
constexpr size_t kMaxRecomputeKernels = 4;

using ir::FusionClass;

FusionClass fusion_class(OpKind op) { return ir::op_info(op).fusion; }

// Reductions (argmax included) and normalizations take an elementwise prologue on the operand
// they reduce or normalize.
bool takes_prologue(OpKind op) { return fusion_class(op) == FusionClass::kPrologueAnchor; }

// Ops a kernel can be built around, taking elementwise prologues and/or epilogues.
bool is_anchor_op(OpKind op) {
  return takes_prologue(op) || fusion_class(op) == FusionClass::kEpilogueAnchor;
}

// Elementwise ops cheap enough to recompute: one ALU instruction or so, no transcendentals.
bool is_cheap_elementwise(OpKind op) { return fusion_class(op) == FusionClass::kCheap; }

struct Group {
  NodeId root = kNoNode;
  NodeId anchor = kNoNode;
  KernelKind kind = KernelKind::kElementwise;
  std::vector<NodeId> members;
};

class Fuser {
 public:
  explicit Fuser(Graph& graph) : graph_(graph), names_(graph) {}

  Status run() {
    const size_t n = graph_.num_nodes();
    is_output_ = output_mask(graph_);
    group_of_.assign(n, kNoGroup);
    first_clone_id_ = n;
    users_ = graph_.users();
    for (NodeId id = NodeId(n); id-- > 0;) visit(id);
    return build_kernels();
  }

 private:
  void visit(NodeId id) {
    OpKind op = graph_.node(id).op;
    if (is_source(op)) return;
    if (is_alias_reshape(graph_, id, is_output_, /*opt_level=*/2)) {
      group_of_[id] = kAliasGroup;
      return;
    }
    if (is_output_[id] || users_[id].empty()) {
      start_group(id);
      return;
    }
    std::vector<int> consumers;
    bool read_outside_kernels = false;
    for (NodeId user : users_[id]) {
      int gid = group_of_[user];
      if (gid < 0) {
        read_outside_kernels = true;
      } else if (std::find(consumers.begin(), consumers.end(), gid) == consumers.end()) {
        consumers.push_back(gid);
      }
    }
    if (!read_outside_kernels && consumers.size() == 1 && can_join(consumers[0], id)) {
      join(consumers[0], id);
      return;
    }
    if (!read_outside_kernels && consumers.size() >= 2 &&
        consumers.size() <= kMaxRecomputeKernels && is_recomputable(id)) {
      bool all_accept = true;
      for (int gid : consumers) all_accept &= can_join(gid, id);
      if (all_accept) {
        recompute(id, consumers);
        return;
      }
    }
    start_group(id);
  }

  void start_group(NodeId id) {
    Group group;
    group.root = id;
    OpKind op = graph_.node(id).op;
    group.kind = kernel_kind_for(op);
    if (!ir::is_elementwise(op)) group.anchor = id;
    group.members = {id};
    group_of_[id] = int(groups_.size());
    groups_.push_back(std::move(group));
  }

  void join(int gid, NodeId id) {
    Group& group = groups_[size_t(gid)];
    OpKind op = graph_.node(id).op;
    if (!ir::is_elementwise(op)) {
      group.anchor = id;
      group.kind = kernel_kind_for(op);
    }
    group.members.push_back(id);
    group_of_[id] = gid;
  }

  // Can the elementwise `producer` be computed inside the kernel for its reader `user`?
  bool accepts_elementwise(const Group& group, NodeId user, NodeId producer) const {
    const Node& u = graph_.node(user);
    const ir::Shape& shape = graph_.node(producer).type.shape;
    if (ir::is_elementwise(u.op)) return u.type.shape == shape;
    if (user != group.anchor) return false;
    // matmul, conv, pooling and layout ops read their operands from memory.
    if (!takes_prologue(u.op)) return false;
    // A prologue: only the normalized/reduced operand (not layer_norm's scale or bias).
    for (size_t j = 1; j < u.inputs.size(); ++j) {
      if (u.inputs[j] == producer) return false;
    }
    return u.inputs[0] == producer && graph_.node(u.inputs[0]).type.shape == shape;
  }

  // Whether group `gid` with `producer` joined reads at most kMaxKernelOperands values it does
  // not compute (graph_edit.h): a chain over many tensors (a pooling window unrolled into
  // slices, a sum of many inputs) splits into several kernels rather than one that a device
  // cannot bind.
  bool within_operand_limit(int gid, NodeId producer) const {
    const Group& group = groups_[size_t(gid)];
    auto computed = [&](NodeId n) {
      return n == producer || std::find(group.members.begin(), group.members.end(), n) != group.members.end();
    };
    std::vector<NodeId> operands;
    auto add_operands_of = [&](NodeId n) {
      for (NodeId in : graph_.node(n).inputs) {
        if (!computed(in) && std::find(operands.begin(), operands.end(), in) == operands.end()) operands.push_back(in);
      }
    };
    for (NodeId member : group.members) add_operands_of(member);
    add_operands_of(producer);
    return operands.size() <= kMaxKernelOperands;
  }

  // Can `producer`, all of whose in-kernel readers are in group `gid`, be computed there?
  bool can_join(int gid, NodeId producer) const {
    const Group& group = groups_[size_t(gid)];
    const Node& p = graph_.node(producer);
    if (!within_operand_limit(gid, producer)) return false;
    if (ir::is_elementwise(p.op)) {
      for (NodeId user : users_[producer]) {
        if (group_of_[user] == gid && !accepts_elementwise(group, user, producer)) return false;
      }
      return true;
    }
    if (is_anchor_op(p.op) && group.anchor == kNoNode && group.kind == KernelKind::kElementwise) {
      // An epilogue: the readers compute over exactly the anchor's output index space.
      for (NodeId user : users_[producer]) {
        const Node& u = graph_.node(user);
        if (!ir::is_elementwise(u.op) || u.type.shape != p.type.shape) return false;
      }
      return true;
    }
    return false;
  }

  bool is_recomputable(NodeId id) const {
    const Node& node = graph_.node(id);
    if (!is_cheap_elementwise(node.op) || is_output_[id]) return false;
    std::vector<NodeId> full_size_operands;
    for (NodeId in : node.inputs) {
      const Node& operand = graph_.node(in);
      // Smaller operands can never be fused into this node's readers (the shapes differ), so
      // they are in memory already; an operand of the same shape must be known to be.
      if (operand.type.shape != node.type.shape) continue;
      if (ir::is_elementwise(operand.op)) return false;
      if (std::find(full_size_operands.begin(), full_size_operands.end(), in) ==
          full_size_operands.end()) {
        full_size_operands.push_back(in);
      }
    }
    return full_size_operands.size() <= 1;
  }

  // The first consumer kernel keeps the node; each other one gets a clone with a fresh name.
  void recompute(NodeId id, const std::vector<int>& consumers) {
    std::vector<NodeId> original_users = users_[id];
    users_[id].clear();
    for (size_t k = 0; k < consumers.size(); ++k) {
      int gid = consumers[k];
      NodeId copy_id = id;
      if (k > 0) {
        Node copy;
        copy.op = graph_.node(id).op;
        copy.name = names_.fresh(graph_.node(id).name);
        copy.inputs = graph_.node(id).inputs;
        copy.attrs = graph_.node(id).attrs;
        copy.type = graph_.node(id).type;
        copy.loc = graph_.node(id).loc;
        copy_id = graph_.add_node(std::move(copy));
        group_of_.push_back(kNoGroup);
        is_output_.push_back(false);
        users_.emplace_back();
        for (NodeId in : graph_.node(copy_id).inputs) users_[in].push_back(copy_id);
      }
      for (NodeId user : original_users) {
        if (group_of_[user] != gid) continue;
        if (copy_id != id) {
          for (NodeId& in : graph_.node(user).inputs) {
            if (in == id) in = copy_id;
          }
        }
        if (users_[copy_id].empty() || users_[copy_id].back() != user) {
          users_[copy_id].push_back(user);
        }
      }
      join(gid, copy_id);
    }
  }

  Status build_kernels() {
    std::vector<Kernel> kernels;
    kernels.reserve(groups_.size());
    for (Group& group : groups_) {
      Kernel kernel;
      kernel.kind = group.kind;
      kernel.anchor = group.anchor;
      kernel.nodes = std::move(group.members);
      kernel.outputs = {group.root};
      kernels.push_back(std::move(kernel));
    }
    graph_.kernels() = std::move(kernels);
    // Clones were appended at the end; move each just before its first reader, so kernels keep
    // the user's order. Clones are created consumer-first: a clone's readers are original nodes
    // or clones created before it, whose priority is known by then.
    const size_t num_original = first_clone_id_;
    const uint64_t spacing = uint64_t(graph_.num_nodes() - num_original) + 2;
    std::vector<uint64_t> first_order(graph_.num_nodes());
    for (NodeId id = 0; id < num_original; ++id) first_order[id] = (uint64_t(id) + 1) * spacing;
    for (NodeId id = NodeId(num_original); id < graph_.num_nodes(); ++id) {
      uint64_t earliest = ~uint64_t(0);
      for (NodeId user : users_[id]) earliest = std::min(earliest, first_order[user]);
      first_order[id] = earliest - 1;
    }
    KILN_RETURN_IF_ERROR(reorder_topologically(graph_, &first_order));

    // Kernels run in the order of their roots: a kernel only reads roots of kernels whose
    // roots come earlier (and sources and views of them).
    std::vector<Kernel>& ordered = graph_.kernels();
    std::sort(ordered.begin(), ordered.end(),
              [](const Kernel& a, const Kernel& b) { return a.outputs[0] < b.outputs[0]; });

    // Regroup the nodes so each kernel's nodes are contiguous and in kernel order, with graph
    // inputs first and every constant or view just before the first kernel that reads it.
    const size_t n = graph_.num_nodes();
    const uint64_t stride = uint64_t(n) + 1;
    std::vector<int64_t> kernel_of(n, -1);
    for (size_t k = 0; k < ordered.size(); ++k) {
      for (NodeId id : ordered[k].nodes) kernel_of[id] = int64_t(k);
    }
    std::vector<uint64_t> slot(n, ordered.size());  // kernel index a node is placed with
    std::vector<uint64_t> priority(n, 0);
    std::vector<std::vector<NodeId>> users = graph_.users();
    for (NodeId id = NodeId(n); id-- > 0;) {
      const Node& node = graph_.node(id);
      if (kernel_of[id] >= 0) {
        slot[id] = uint64_t(kernel_of[id]);
        priority[id] = (slot[id] + 1) * stride + 1 + id;
        continue;
      }
      for (NodeId user : users[id]) slot[id] = std::min(slot[id], slot[user]);
      priority[id] = node.op == OpKind::kInput ? 0 : (slot[id] + 1) * stride;
    }
    KILN_RETURN_IF_ERROR(reorder_topologically(graph_, &priority));
    finalize_kernels(graph_);
    return Status::ok();
  }

  Graph& graph_;
  ir::NameTable names_;
  std::vector<bool> is_output_;
  std::vector<int> group_of_;
  std::vector<std::vector<NodeId>> users_;
  std::vector<Group> groups_;
  size_t first_clone_id_ = 0;  // nodes with ids from here on are clones made by recompute()
};

}  // namespace

Status fuse_pass(Graph& graph, const PassContext&) {
  // Outputs defined directly by a constant or input need a kernel writing the output buffer.
  KILN_RETURN_IF_ERROR(split_wide_concats(graph));
  fix_output_names(graph);
  return Fuser(graph).run();
}

}  // namespace kiln::passes
