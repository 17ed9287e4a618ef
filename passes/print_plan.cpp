// Text form of an ExecutionPlan (--emit=plan):
//
//   launch fused_mul_add_tanh_3 in(x, b) out(t@arena+0) shape=[N, 256] kind=elementwise nodes(m, a, t)
//   ...
//   buffer x input size=1024*N
//   buffer t arena offset=0 size=1024*N
//   buffer r alias of=t offset=0 size=1024*N
//   peak arena bytes: 2048*N
//
// Each launch line begins with the word `launch`, then the kernel's provenance name, the values
// it reads, the values it writes with where they live, its launch shape, its kind and the source
// nodes it computes (in execution order).
#include <string>
#include <unordered_map>

#include "passes/pipeline.h"

namespace kiln::passes {

std::string print_plan(const ir::Graph& graph, const ir::ExecutionPlan& plan) {
  std::unordered_map<ir::NodeId, const ir::BufferAssignment*> buffer_of;
  for (const ir::BufferAssignment& b : plan.buffers) buffer_of[b.value] = &b;
  auto name_of = [&](ir::NodeId id) -> const std::string& { return graph.node(id).name; };
  auto where = [&](ir::NodeId id) {
    auto it = buffer_of.find(id);
    if (it == buffer_of.end()) return name_of(id) + "@?";
    const ir::BufferAssignment& b = *it->second;
    if (b.storage == ir::Storage::kArena) return name_of(id) + "@arena+" + plan.arena_offset_string(b);
    return name_of(id) + "@" + std::string(ir::storage_name(b.storage));
  };

  std::string out;
  for (const ir::Launch& launch : plan.launches) {
    if (launch.kernel >= graph.kernels().size()) {
      out += "launch <missing kernel " + std::to_string(launch.kernel) + ">\n";
      continue;
    }
    const ir::Kernel& kernel = graph.kernels()[launch.kernel];
    out += "launch " + kernel.name + " in(";
    for (size_t i = 0; i < kernel.inputs.size(); ++i) {
      out += (i ? ", " : "") + name_of(kernel.inputs[i]);
    }
    out += ") out(";
    for (size_t i = 0; i < kernel.outputs.size(); ++i) {
      out += (i ? ", " : "") + where(kernel.outputs[i]);
    }
    out += ") shape=" + ir::shape_to_string(launch.launch_shape);
    out += " kind=" + std::string(ir::kernel_kind_name(kernel.kind)) + " nodes(";
    for (size_t i = 0; i < kernel.nodes.size(); ++i) {
      out += (i ? ", " : "") + name_of(kernel.nodes[i]);
    }
    out += ")\n";
  }
  for (const ir::BufferAssignment& b : plan.buffers) {
    out += "buffer " + name_of(b.value) + " " + std::string(ir::storage_name(b.storage));
    if (b.storage == ir::Storage::kAlias && b.alias_of != ir::kNoNode) {
      out += " of=" + name_of(b.alias_of);
      auto it = buffer_of.find(b.alias_of);
      if (it != buffer_of.end() && it->second->storage == ir::Storage::kArena) {
        out += " offset=" + plan.arena_offset_string(b);
      }
    }
    if (b.storage == ir::Storage::kArena) out += " offset=" + plan.arena_offset_string(b);
    out += " size=" + b.size.to_string() + "\n";
  }
  out += "peak arena bytes: " + plan.arena_size_string() + "\n";
  return out;
}

}  // namespace kiln::passes
