// Pass plan-memory: turns the kernel list into an ir::ExecutionPlan.
//
// * Launches: one per kernel, in kernel order (the fusion passes put kernels in a valid
//   execution order). Launch shapes (the index space each kernel iterates):
//     elementwise                 the output's shape
//     reduction / argmax          the reduced operand's shape with every reduced axis set to 1
//                                 (the keepdims output shape: one work item per output element,
//                                 each looping over the reduced extent)
//     softmax / log_softmax       the operand's shape with the normalized axis set to 1 (rows)
//     layer_norm                  the operand's shape with the axes from `axis` on set to 1
//     matmul, conv, pool, layout  the anchor op's output shape
// * Buffers: graph inputs kInput, constants kConstant, graph outputs kOutput, reshape views
//   kAlias (alias_of = the viewed buffer, following chains to the value that owns memory), every
//   other kernel output kArena.
// * Arena: a greedy liveness walk over the launches. Before launch k, its arena outputs are
//   placed; after launch k, every arena value whose last reader (directly or through a view) is
//   launch k is freed. A new value takes the first freed slot whose capacity dominates its size
//   for every binding of the symbols (SizeExpr::dominates; an exact fit is preferred), else it
//   grows the top slot if that is free and smaller, else it goes at the top of the arena.
//   Slot capacities are exact SizeExprs (symbolic sizes such as 1024*N work); the runtime lays
//   the slots out 64-byte aligned once symbols are bound (ir/plan.h). The upper-bound offsets
//   and arena_bytes round coefficients instead. The top never moves down, so the final top is
//   the peak.
#include <algorithm>
#include <optional>
#include <vector>

#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

using ir::BufferAssignment;
using ir::Graph;
using ir::Kernel;
using ir::KernelKind;
using ir::kNoNode;
using ir::Node;
using ir::NodeId;
using ir::OpKind;
using ir::SizeExpr;
using ir::Storage;

int64_t axis_in(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

ir::Shape launch_shape(const Graph& graph, const Kernel& kernel) {
  NodeId root = kernel.outputs.empty() ? kernel.nodes.back() : kernel.outputs.front();
  if (kernel.anchor == kNoNode) return graph.node(root).type.shape;
  const Node& anchor = graph.node(kernel.anchor);
  if (kernel.kind != KernelKind::kReduction && kernel.kind != KernelKind::kNormalization) {
    return anchor.type.shape;
  }
  ir::Shape rows = graph.node(anchor.inputs[0]).type.shape;
  auto set_one = [&](int64_t axis) {
    axis = axis_in(axis, rows.size());
    if (axis >= 0 && size_t(axis) < rows.size()) rows[size_t(axis)] = ir::Dim::of(1);
  };
  // By the anchor's attribute struct, as codegen's kernel model reads the reduced axes.
  if (const auto* argmax = std::get_if<ir::ArgMaxAttrs>(&anchor.attrs)) {
    set_one(argmax->axis);
  } else if (const auto* axis = std::get_if<ir::AxisAttrs>(&anchor.attrs)) {
    set_one(axis->axis);
  } else if (const auto* norm = std::get_if<ir::LayerNormAttrs>(&anchor.attrs)) {
    int64_t first = axis_in(norm->axis, rows.size());
    for (int64_t a = std::max<int64_t>(first, 0); a < int64_t(rows.size()); ++a) set_one(a);
  } else if (const auto* reduce = std::get_if<ir::ReduceAttrs>(&anchor.attrs)) {
    if (reduce->all_axes && reduce->axes.empty()) {
      for (ir::Dim& d : rows) d = ir::Dim::of(1);
    }
    for (int64_t axis : reduce->axes) set_one(axis);
  }
  return rows;
}

SizeExpr bytes_of(const Node& node) {
  return SizeExpr::of_shape(node.type.shape, int64_t(ir::dtype_size(node.type.dtype)));
}

// A place in the arena: its index in ExecutionPlan::slots and its compile-time upper-bound
// offset (earlier slots with coefficient-aligned sizes; see ir/plan.h).
struct Slot {
  uint32_t index = 0;
  SizeExpr offset;
};

// The greedy arena allocator described at the top of the file. Slot capacities are exact byte
// counts; the runtime aligns them once symbols are bound.
class Arena {
 public:
  explicit Arena(int64_t alignment) : alignment_(alignment) {}

  Slot allocate(const SizeExpr& size) {
    std::optional<size_t> pick;
    for (size_t i = 0; i < free_.size(); ++i) {
      const SizeExpr& capacity = capacities_[free_[i].index];
      if (capacity == size) { pick = i; break; }
      if (!pick && capacity.dominates(size)) pick = i;
    }
    if (pick) {
      Slot slot = free_[*pick];
      free_.erase(free_.begin() + std::ptrdiff_t(*pick));
      return slot;
    }
    for (size_t i = 0; i < free_.size(); ++i) {
      // The free slot at the top can grow in place when the new value needs more.
      uint32_t index = free_[i].index;
      if (index + 1 == capacities_.size() && size.dominates(capacities_[index])) {
        Slot slot = free_[i];
        free_.erase(free_.begin() + std::ptrdiff_t(i));
        capacities_[index] = size;
        top_ = slot.offset + size.align_up(alignment_);
        return slot;
      }
    }
    Slot slot{uint32_t(capacities_.size()), top_};
    capacities_.push_back(size);
    top_ = top_ + size.align_up(alignment_);
    return slot;
  }

  void release(const Slot& slot) { free_.push_back(slot); }
  const SizeExpr& top() const { return top_; }
  const std::vector<SizeExpr>& capacities() const { return capacities_; }

 private:
  int64_t alignment_;
  SizeExpr top_;
  std::vector<SizeExpr> capacities_;
  std::vector<Slot> free_;
};

}  // namespace

Status plan_memory_pass(Graph& graph, const PassContext& context) {
  if (context.plan == nullptr) return internal_error("plan-memory has no plan to write");
  ir::ExecutionPlan plan;
  const size_t n = graph.num_nodes();
  const std::vector<Kernel>& kernels = graph.kernels();
  std::vector<bool> is_output = output_mask(graph);

  std::vector<int64_t> kernel_of(n, -1);
  std::vector<int64_t> produced_by(n, -1);
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (NodeId id : kernels[k].nodes) {
      if (kernel_of[id] >= 0) {
        return internal_error("node '" + graph.node(id).name + "' is in kernels '" +
                              kernels[size_t(kernel_of[id])].name + "' and '" + kernels[k].name + "'");
      }
      kernel_of[id] = int64_t(k);
    }
    for (NodeId id : kernels[k].outputs) produced_by[id] = int64_t(k);
  }

  // Views: a reshape outside every kernel aliases the buffer of its (root) operand.
  std::vector<NodeId> owner(n);
  for (NodeId id = 0; id < n; ++id) {
    owner[id] = id;
    const Node& node = graph.node(id);
    if (is_source(node.op) || kernel_of[id] >= 0) continue;
    if (node.op != OpKind::kReshape) {
      return internal_error("node '" + node.name + "' (" + std::string(ir::op_name(node.op)) +
                            ") is in no kernel");
    }
    owner[id] = owner[node.inputs[0]];
  }
  for (const ir::GraphOutput& out : graph.outputs()) {
    if (produced_by[out.node] < 0) {
      return internal_error("graph output '" + out.name + "' is written by no kernel");
    }
  }

  // Last launch reading each memory-owning value (through views too).
  std::vector<int64_t> last_read(n, -1);
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (NodeId in : kernels[k].inputs) {
      NodeId root = owner[in];
      if (!is_source(graph.node(root).op) && (produced_by[root] < 0 || produced_by[root] >= int64_t(k))) {
        return internal_error("kernel '" + kernels[k].name + "' reads '" + graph.node(in).name +
                              "' before any kernel writes it");
      }
      last_read[root] = std::max(last_read[root], int64_t(k));
    }
  }

  for (size_t k = 0; k < kernels.size(); ++k) {
    plan.launches.push_back({uint32_t(k), launch_shape(graph, kernels[k])});
  }

  // Arena placement in launch order.
  Arena arena(plan.alignment);
  std::vector<std::optional<Slot>> slot_of(n);
  std::vector<std::vector<NodeId>> released_after(kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (NodeId out : kernels[k].outputs) {
      if (is_output[out]) continue;
      slot_of[out] = arena.allocate(bytes_of(graph.node(out)));
      size_t dies = size_t(std::max(last_read[out], int64_t(k)));
      released_after[dies].push_back(out);
    }
    for (NodeId dead : released_after[k]) arena.release(*slot_of[dead]);
  }
  plan.arena_bytes = arena.top();
  plan.slots = arena.capacities();

  // One buffer per materialized value, in graph order.
  for (NodeId id = 0; id < n; ++id) {
    const Node& node = graph.node(id);
    BufferAssignment buffer;
    buffer.value = id;
    buffer.size = bytes_of(node);
    if (node.op == OpKind::kInput) {
      buffer.storage = Storage::kInput;
    } else if (node.op == OpKind::kConstant) {
      buffer.storage = Storage::kConstant;
    } else if (owner[id] != id) {
      buffer.storage = Storage::kAlias;
      buffer.alias_of = owner[id];
      if (slot_of[owner[id]]) {
        buffer.offset = slot_of[owner[id]]->offset;
        buffer.slot = slot_of[owner[id]]->index;
      }
    } else if (produced_by[id] < 0) {
      continue;  // computed inside a kernel, never in memory
    } else if (is_output[id]) {
      buffer.storage = Storage::kOutput;
    } else {
      buffer.storage = Storage::kArena;
      buffer.offset = slot_of[id]->offset;
      buffer.slot = slot_of[id]->index;
    }
    plan.buffers.push_back(std::move(buffer));
  }
  *context.plan = std::move(plan);
  return Status::ok();
}

}  // namespace kiln::passes
