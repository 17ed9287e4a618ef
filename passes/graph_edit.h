// Editing helpers shared by the passes: value replacement without O(nodes) rescans, the
// graph-outputs naming invariant, node reordering, and kernel bookkeeping.
//
// Not thread-safe: each helper mutates the graph it is given.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::passes {

inline bool is_source(ir::OpKind op) {
  return op == ir::OpKind::kInput || op == ir::OpKind::kConstant;
}

// True when `perm` (a transpose's, normalized: non-negative) maps every axis to itself.
bool is_identity_perm(const std::vector<int64_t>& perm);

// The one permutation of two transposes in a row: transpose(transpose(x, inner), outer) equals
// transpose(x, compose_perms(inner, outer)), whose element i is inner[outer[i]]. Both complete,
// non-negative and of one rank.
std::vector<int64_t> compose_perms(const std::vector<int64_t>& inner, const std::vector<int64_t>& outer);

// Appends a constant node holding `data` (of `type`), named graph.unique_name(base).
ir::NodeId add_constant_node(ir::Graph& graph, ir::Tensor data, ir::TensorType type, const std::string& base,
                             const SourceLoc& loc);

// Appends a node computing `op` on `inputs` with its type inferred, named graph.unique_name(base);
// when inference fails, returns its error and leaves the graph as it was.
Result<ir::NodeId> add_inferred_node(ir::Graph& graph, ir::OpKind op, std::vector<ir::NodeId> inputs, ir::Attrs attrs,
                                     const std::string& base, const SourceLoc& loc);

// A kernel reads each operand it does not compute through one buffer argument, and devices bound
// how many one kernel may take: Vulkan's maxPerStageDescriptorStorageBuffers is 32 on lavapipe
// (the specification guarantees only 4; desktop GPUs allow thousands). Kernel formation keeps
// every kernel at or below this many operands.
inline constexpr size_t kMaxKernelOperands = 24;

// Rewrites every concat of more than kMaxKernelOperands operands into a tree of concats of at
// most that many (the root keeps the node's id and name), then restores the topological order.
// Both kernel-forming passes start with it.
Status split_wide_concats(ir::Graph& graph);

// The kernel kind that runs a single op of this kind.
ir::KernelKind kernel_kind_for(ir::OpKind op);

// A union-find-like replacement map: replace(a, b) says "uses of a now read b". Passes that walk
// the graph in topological order call rewrite_operands() on each node before looking at it, so a
// pass is O(nodes) instead of O(nodes^2) with Graph::replace_all_uses.
class ValueRemap {
 public:
  explicit ValueRemap(size_t num_nodes);
  void replace(ir::NodeId from, ir::NodeId to);
  ir::NodeId resolve(ir::NodeId id);
  void rewrite_operands(ir::Node& node);
  void rewrite_outputs(ir::Graph& graph);
  bool changed() const { return changed_; }
  // Ends a rewriting pass: when anything was replaced, points the graph outputs at the
  // replacements, restores the outputs invariant (fix_output_names) and compacts the graph.
  void finish(ir::Graph& graph);

 private:
  std::vector<ir::NodeId> target_;
  bool changed_ = false;
};

// How many uses each value has (operands of live nodes, graph outputs), kept by a pass that
// rewires operands, so that a constant whose last use goes is dropped at once (its node erased,
// its data freed) instead of at dce: a pass that replaces every weight (permuting or scaling it)
// then holds them once, not twice. Uses from nodes the pass adds must be add()ed; values added
// after construction start with none.
class UseCounts {
 public:
  explicit UseCounts(const ir::Graph& graph);
  int64_t count(ir::NodeId id) const { return id < counts_.size() ? counts_[id] : 0; }
  void set(ir::NodeId id, int64_t count);
  void add(ir::NodeId id) { set(id, count(id) + 1); }
  // One use fewer; a constant left with none is erased and its tensor freed.
  void drop(ir::Graph& graph, ir::NodeId id);

 private:
  std::vector<int64_t> counts_;
};

// Restores the outputs invariant: graph.outputs()[i].name equals the name of the node it points
// to, and that node is computed by an op (not a graph input or constant, which have no kernel
// to write the output buffer). When an output was redirected to another node, that node is
// renamed to the output's name if it is free to take it (not a source, not already named after
// another output); otherwise a `reshape` to the same shape (a copy into the output buffer) named
// as the output is inserted. Any other node holding the name is renamed to a fresh name.
void fix_output_names(ir::Graph& graph);

// Reorders the nodes into a topological order. Among the nodes whose operands are all placed,
// the one with the smallest (priority, old id) goes next; with priority == nullptr the old id
// alone decides, which keeps the existing order wherever it is valid (a stable sort). Remaps
// ids everywhere (operands, graph inputs and outputs, kernels). Erased nodes are compacted
// away first. A cycle is an internal error naming a node on it.
Status reorder_topologically(ir::Graph& graph, const std::vector<uint64_t>* priority = nullptr);

// Fills each kernel's inputs, outputs and provenance name from its node list, sorting the nodes
// into graph order. Kernels must already be in execution order. Names: "<op>_<index>" for one
// node, "fused_<distinct ops in order>_<index>" otherwise (the op list is truncated to keep
// names short).
void finalize_kernels(ir::Graph& graph);

// Provenance name of kernel `index` holding `nodes` (in execution order).
std::string kernel_name(const ir::Graph& graph, const std::vector<ir::NodeId>& nodes, size_t index);

// True for reshapes that stay out of every kernel at -O1 and above: a reshape of a contiguous
// value is a view (Storage::kAlias), unless it is a graph output (which needs its own buffer).
bool is_alias_reshape(const ir::Graph& graph, ir::NodeId id, const std::vector<bool>& is_output,
                      int opt_level);

// is_output[id]: node id is some graph output.
std::vector<bool> output_mask(const ir::Graph& graph);

}  // namespace kiln::passes
