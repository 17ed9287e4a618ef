// The load-time cross-check of an artifact's execution plan and kernel binaries against its
// graph (reader_internal.h). The FlatBuffers verifier and the conversion functions make every
// reference point at something that exists; this file checks that the pieces agree, so that an
// artifact whose plan was edited (a launch removed, a buffer relabelled, an arena slot shared by
// two live values, a kernel argument redirected at a constant) is refused before a driver binds
// device memory from it. See docs/security.md for what these checks do and do not defend.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "artifact/reader_internal.h"

namespace kiln::artifact::detail {

namespace {

Status bad(const std::string& message) { return corrupt("corrupt Kiln artifact: " + message); }

std::string value_label(const ir::Graph& graph, ir::NodeId id) {
  return "value " + std::to_string(id) + " '" + graph.node(id).name + "'";
}

ir::SizeExpr bytes_of(const ir::Node& node) {
  return ir::SizeExpr::of_shape(node.type.shape, int64_t(ir::dtype_size(node.type.dtype)));
}

class PlanCheck {
 public:
  PlanCheck(const ir::Graph& graph, const ir::ExecutionPlan& plan) : graph_(graph), plan_(plan) {}

  Status run(const std::vector<KernelBinary>& binaries) {
    // A graph without kernels (interpreted node by node) has nothing to launch.
    if (graph_.kernels().empty() && plan_.launches.empty() && plan_.buffers.empty()) return Status::ok();
    KILN_RETURN_IF_ERROR(index_buffers());
    KILN_RETURN_IF_ERROR(check_roles());
    KILN_RETURN_IF_ERROR(check_launches());
    KILN_RETURN_IF_ERROR(check_arena());
    return check_binaries(binaries);
  }

 private:
  // At most one buffer per value; who writes each value.
  Status index_buffers() {
    for (const ir::BufferAssignment& b : plan_.buffers) {
      if (!buffer_of_.emplace(b.value, &b).second)
        return bad("the plan gives " + value_label(graph_, b.value) + " two buffers");
    }
    writer_.assign(graph_.num_nodes(), -1);
    for (size_t k = 0; k < graph_.kernels().size(); ++k)
      for (ir::NodeId out : graph_.kernels()[k].outputs) writer_[out] = int64_t(k);
    for (const ir::GraphOutput& out : graph_.outputs()) outputs_.insert(out.node);
    return Status::ok();
  }

  // Every buffer's storage matches what its value is, and its size is the value's byte count.
  Status check_roles() {
    for (const ir::BufferAssignment& b : plan_.buffers) {
      const ir::Node& node = graph_.node(b.value);
      const std::string where =
          "plan buffer of " + value_label(graph_, b.value) + " (" + std::string(ir::storage_name(b.storage)) + ")";
      if (!(b.size == bytes_of(node)))
        return bad(where + " has " + b.size.to_string() + " bytes, but the value needs " +
                   bytes_of(node).to_string());
      const bool is_input = node.op == ir::OpKind::kInput, is_constant = node.op == ir::OpKind::kConstant;
      const bool written = writer_[b.value] >= 0, is_output = outputs_.count(b.value) > 0;
      bool fits = false;
      switch (b.storage) {
        case ir::Storage::kInput: fits = is_input; break;
        case ir::Storage::kConstant: fits = is_constant; break;
        case ir::Storage::kOutput: fits = written && is_output; break;
        case ir::Storage::kArena: fits = written && !is_output; break;
        case ir::Storage::kAlias: {
          // A view (a reshape outside every kernel) of a value that owns its memory.
          const auto target = buffer_of_.find(b.alias_of);
          fits = !written && !is_input && !is_constant && !is_output && target != buffer_of_.end() &&
                 target->second->storage != ir::Storage::kAlias && target->second->size == b.size &&
                 target->second->slot == b.slot;
          break;
        }
      }
      if (!fits) return bad(where + ": the value is not stored that way (its op is " +
                            std::string(ir::op_name(node.op)) + (written ? ", written by a kernel" : "") +
                            (is_output ? ", a graph output" : "") + ")");
      if ((b.storage == ir::Storage::kInput || b.storage == ir::Storage::kConstant) && b.slot != ir::kNoSlot)
        return bad(where + " has an arena slot");
    }
    // Every value a kernel reads or writes is in memory; a kernel writes only outputs and arena
    // values (never an input, a constant or a view of one).
    for (const ir::Kernel& kernel : graph_.kernels()) {
      for (ir::NodeId in : kernel.inputs)
        if (!buffer_of_.count(in)) return bad("kernel '" + kernel.name + "' reads " + value_label(graph_, in) +
                                              ", which has no buffer in the plan");
      for (ir::NodeId out : kernel.outputs) {
        const auto found = buffer_of_.find(out);
        if (found == buffer_of_.end())
          return bad("kernel '" + kernel.name + "' writes " + value_label(graph_, out) + ", which has no buffer");
        const ir::Storage s = found->second->storage;
        if (s != ir::Storage::kArena && s != ir::Storage::kOutput)
          return bad("kernel '" + kernel.name + "' writes " + value_label(graph_, out) + ", stored as " +
                     std::string(ir::storage_name(s)));
      }
    }
    for (ir::NodeId out : outputs_)
      if (!buffer_of_.count(out) || buffer_of_.at(out)->storage != ir::Storage::kOutput)
        return bad("graph output " + value_label(graph_, out) + " has no output buffer");
    return Status::ok();
  }

  // The value whose memory `value` is (through a view).
  ir::NodeId root(ir::NodeId value) const {
    const auto found = buffer_of_.find(value);
    return found != buffer_of_.end() && found->second->storage == ir::Storage::kAlias ? found->second->alias_of
                                                                                        : value;
  }

  // Each kernel is launched once, after the launches that write what it reads; so every graph
  // output is written by the time the run ends.
  Status check_launches() {
    const size_t num_kernels = graph_.kernels().size();
    if (plan_.launches.size() != num_kernels)
      return bad("the plan has " + std::to_string(plan_.launches.size()) + " launches for " +
                 std::to_string(num_kernels) + " kernels");
    launch_of_.assign(num_kernels, -1);
    std::vector<bool> ready(graph_.num_nodes(), false);
    for (const ir::BufferAssignment& b : plan_.buffers)
      if (b.storage == ir::Storage::kInput || b.storage == ir::Storage::kConstant) ready[b.value] = true;
    for (size_t l = 0; l < plan_.launches.size(); ++l) {
      const uint32_t k = plan_.launches[l].kernel;
      const ir::Kernel& kernel = graph_.kernels()[k];
      if (launch_of_[k] >= 0) return bad("kernel '" + kernel.name + "' is launched twice");
      launch_of_[k] = int64_t(l);
      for (ir::NodeId in : kernel.inputs)
        if (!ready[root(in)])
          return bad("launch " + std::to_string(l) + " (kernel '" + kernel.name + "') reads " +
                     value_label(graph_, in) + " before any launch writes it");
      for (ir::NodeId out : kernel.outputs) ready[out] = true;
    }
    return Status::ok();
  }

  // Arena values fit their slots (or the arena, for a plan without slots), and values that are
  // alive at the same time never share a slot.
  Status check_arena() {
    // Launch interval [written, last read] of every arena value, by slot.
    std::map<ir::NodeId, std::pair<int64_t, int64_t>> alive;
    for (const ir::BufferAssignment& b : plan_.buffers) {
      if (b.storage != ir::Storage::kArena) continue;
      const std::string where = "plan buffer of " + value_label(graph_, b.value);
      if (plan_.slots.empty()) {
        if (b.slot != ir::kNoSlot) return bad(where + " names an arena slot, but the plan has none");
        if (!plan_.arena_bytes.dominates(b.offset + b.size))
          return bad(where + " at offset " + b.offset.to_string() + " does not fit the " +
                     plan_.arena_bytes.to_string() + "-byte arena");
      } else {
        if (b.slot == ir::kNoSlot) return bad(where + " has no arena slot");
        if (!plan_.slots[b.slot].dominates(b.size))
          return bad(where + " (" + b.size.to_string() + " bytes) does not fit arena slot " + std::to_string(b.slot) +
                     " (" + plan_.slots[b.slot].to_string() + " bytes)");
      }
      const int64_t written = launch_of_[size_t(writer_[b.value])];
      alive[b.value] = {written, written};
    }
    for (size_t k = 0; k < graph_.kernels().size(); ++k)
      for (ir::NodeId in : graph_.kernels()[k].inputs) {
        const auto found = alive.find(root(in));
        if (found != alive.end()) found->second.second = std::max(found->second.second, launch_of_[k]);
      }
    // Without slots, values share bytes through their offsets; that layout is checked by the
    // bounds above only (the planner of every current kilnc writes slots).
    if (plan_.slots.empty()) return Status::ok();
    std::map<uint32_t, std::vector<std::pair<std::pair<int64_t, int64_t>, ir::NodeId>>> by_slot;
    for (const auto& [value, interval] : alive) by_slot[buffer_of_.at(value)->slot].push_back({interval, value});
    for (auto& [slot, intervals] : by_slot) {
      std::sort(intervals.begin(), intervals.end());
      // A slot is reused only by a value written after the last launch that reads the previous
      // one (the planner frees a slot after its last reader has run).
      size_t latest = 0;  // the interval reaching furthest so far
      for (size_t i = 1; i < intervals.size(); ++i) {
        if (intervals[i].first.first <= intervals[latest].first.second)
          return bad("arena slot " + std::to_string(slot) + " holds " + value_label(graph_, intervals[latest].second) +
                     " and " + value_label(graph_, intervals[i].second) + ", which are alive at the same time");
        if (intervals[i].first.second > intervals[latest].first.second) latest = i;
      }
    }
    return Status::ok();
  }

  // Each binary's parameters are its kernel's calling convention, and a library call writes the
  // kernel's output.
  Status check_binaries(const std::vector<KernelBinary>& binaries) {
    for (const KernelBinary& binary : binaries) {
      const ir::Kernel& kernel = graph_.kernels()[binary.kernel_index];
      const std::string where = "target '" + binary.target + "' kernel '" + binary.kernel_name + "'";
      if (binary.kernel_name != kernel.name)
        return bad(where + " is recorded for graph kernel '" + kernel.name + "'");
      if (binary.args != kernel_signature(graph_, kernel))
        return bad(where + ": its arguments are not its kernel's inputs, outputs and sizes");
      const size_t first_output = kernel.inputs.size(), end_outputs = first_output + kernel.outputs.size();
      auto writes_output = [&](int64_t arg) { return uint64_t(arg) >= first_output && uint64_t(arg) < end_outputs; };
      if (binary.gemm && !writes_output(binary.gemm->out_arg))
        return bad(where + ": its GEMM call writes an argument that is not a kernel output");
      if (binary.conv && !writes_output(binary.conv->out_arg))
        return bad(where + ": its conv call writes an argument that is not a kernel output");
    }
    return Status::ok();
  }

  const ir::Graph& graph_;
  const ir::ExecutionPlan& plan_;
  std::map<ir::NodeId, const ir::BufferAssignment*> buffer_of_;
  std::vector<int64_t> writer_;      // node -> index of the kernel writing it, -1 none
  std::vector<int64_t> launch_of_;   // kernel -> its launch's position
  std::set<ir::NodeId> outputs_;
};

}  // namespace

Status check_plan_against_graph(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                const std::vector<KernelBinary>& binaries) {
  return PlanCheck(graph, plan).run(binaries);
}

}  // namespace kiln::artifact::detail
