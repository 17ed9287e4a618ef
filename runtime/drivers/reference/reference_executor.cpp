#include "runtime/drivers/reference/reference_executor.h"

#include <chrono>
#include <optional>
#include <string>

#include "ir/interpreter.h"

namespace kiln::runtime::reference {

Result<std::vector<ir::Tensor>> interpret_with_profile(const ir::Graph& graph,
                                                       std::span<const ir::Tensor> inputs,
                                                       hal::Profile& profile) {
  using Clock = std::chrono::steady_clock;
  KILN_ASSIGN_OR_RETURN(ir::SymbolBindings bindings, ir::bind_inputs(graph, inputs));
  const std::vector<ir::Node>& nodes = graph.nodes();

  // node -> kernel containing it (the fusion pass puts each node in at most one kernel).
  std::vector<uint32_t> kernel_of(nodes.size(), hal::kNoKernel);
  for (size_t k = 0; k < graph.kernels().size(); ++k)
    for (ir::NodeId id : graph.kernels()[k].nodes)
      if (id < nodes.size()) kernel_of[id] = uint32_t(k);

  // Values are dropped after their last reader, as in ir::interpret, so memory tracks liveness.
  constexpr size_t kKeepToEnd = ~size_t(0);
  std::vector<size_t> last_use(nodes.size());
  for (size_t pos = 0; pos < nodes.size(); ++pos) last_use[pos] = pos;
  for (size_t pos = 0; pos < nodes.size(); ++pos)
    for (ir::NodeId in : nodes[pos].inputs)
      if (in < nodes.size() && last_use[in] != kKeepToEnd && pos > last_use[in]) last_use[in] = pos;
  for (const ir::GraphOutput& out : graph.outputs())
    if (out.node < nodes.size()) last_use[out.node] = kKeepToEnd;

  profile.clock = "host wall time (reference interpreter, node by node)";
  profile.kernels.clear();
  // kernel index -> position in profile.kernels
  std::vector<std::optional<size_t>> entry_of_kernel(graph.kernels().size());

  std::vector<std::optional<ir::Tensor>> values(nodes.size());
  std::vector<const ir::Tensor*> operands;
  for (size_t pos = 0; pos < nodes.size(); ++pos) {
    const ir::Node& node = nodes[pos];
    if (node.erased) continue;
    if (node.op == ir::OpKind::kInput) {
      const auto* attrs = std::get_if<ir::InputAttrs>(&node.attrs);
      const int64_t index = attrs ? attrs->index : -1;
      if (index < 0 || size_t(index) >= inputs.size())
        return internal_error("input node '" + node.name + "' has no matching input");
      values[pos] = inputs[size_t(index)];
    } else {
      operands.clear();
      for (ir::NodeId in : node.inputs) {
        if (in >= nodes.size() || !values[in])
          return internal_error("node '" + node.name + "' reads a value that is not computed");
        operands.push_back(&*values[in]);
      }
      const Clock::time_point start = Clock::now();
      Result<ir::Tensor> value = ir::evaluate_node(graph, node, operands, bindings);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (!value.is_ok()) return std::move(value).status();
      values[pos] = std::move(value).value();

      if (node.op != ir::OpKind::kConstant) {
        const uint32_t k = kernel_of[pos];
        if (k == hal::kNoKernel) {
          hal::KernelTiming t;
          t.kernel_index = hal::kNoKernel;
          t.name = node.name;
          t.kind = std::string(ir::op_name(node.op));
          t.source_nodes = {node.name};
          t.seconds = seconds;
          profile.kernels.push_back(std::move(t));
        } else {
          if (!entry_of_kernel[k]) {
            const ir::Kernel& kernel = graph.kernels()[k];
            hal::KernelTiming t;
            t.kernel_index = k;
            t.name = kernel.name;
            t.kind = std::string(ir::kernel_kind_name(kernel.kind));
            for (ir::NodeId id : kernel.nodes)
              if (id < nodes.size()) t.source_nodes.push_back(nodes[id].name);
            entry_of_kernel[k] = profile.kernels.size();
            profile.kernels.push_back(std::move(t));
          }
          profile.kernels[*entry_of_kernel[k]].seconds += seconds;
        }
      }
    }
    for (ir::NodeId in : node.inputs)
      if (in < nodes.size() && last_use[in] == pos) values[in].reset();
    if (last_use[pos] == pos) values[pos].reset();
  }

  std::vector<ir::Tensor> outputs;
  outputs.reserve(graph.outputs().size());
  for (const ir::GraphOutput& out : graph.outputs()) {
    if (out.node >= nodes.size() || !values[out.node])
      return internal_error("output '" + out.name + "' was not computed");
    outputs.push_back(*values[out.node]);
  }
  return outputs;
}

}  // namespace kiln::runtime::reference
