// The reference interpreter's driver: input binding, the node walk with value lifetimes, and the
// per-node dispatch to the evaluator in the op's table row (ir/interp_*.cpp).
#include "ir/interpreter.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "ir/interp_internal.h"

namespace kiln::ir {
namespace {

std::string given_type_string(const Tensor& t) {
  std::string s(dtype_name(t.dtype()));
  return s + interp::sizes_to_string(t.shape());
}

// The output shape the graph declares for `node`, when every symbol in it is bound.
std::optional<std::vector<int64_t>> declared_sizes(const Node& node, const SymbolBindings& bindings) {
  Result<std::vector<int64_t>> r = resolve_shape(node.type.shape, bindings);
  if (!r.is_ok()) return std::nullopt;
  return std::move(r).value();
}

}  // namespace

std::string_view interpreter_precision_name(InterpreterPrecision precision) {
  switch (precision) {
    case InterpreterPrecision::kExact: return "exact";
    case InterpreterPrecision::kDeviceFaithful: return "faithful";
  }
  return "exact";
}

std::optional<InterpreterPrecision> parse_interpreter_precision(std::string_view name) {
  for (InterpreterPrecision p : {InterpreterPrecision::kExact, InterpreterPrecision::kDeviceFaithful}) {
    if (name == interpreter_precision_name(p)) return p;
  }
  return std::nullopt;
}

Result<SymbolBindings> bind_inputs(const Graph& graph, std::span<const Tensor> inputs) {
  const std::vector<NodeId>& input_ids = graph.inputs();
  if (inputs.size() != input_ids.size()) {
    return invalid_argument("graph '" + graph.name + "' takes " + std::to_string(input_ids.size()) +
                            " input(s), got " + std::to_string(inputs.size()));
  }
  SymbolBindings bindings;
  std::map<std::string, std::string> bound_by;  // symbol -> name of the input that bound it
  for (size_t i = 0; i < input_ids.size(); ++i) {
    const Node& node = graph.node(input_ids[i]);
    const Tensor& given = inputs[i];
    const TensorType& expected = node.type;
    auto mismatch = [&]() {
      return invalid_argument("input '" + node.name + "': expected " + expected.to_string() +
                              ", got " + given_type_string(given));
    };
    if (given.dtype() != expected.dtype || given.rank() != expected.rank()) return mismatch();
    for (size_t d = 0; d < expected.shape.size(); ++d) {
      const Dim& dim = expected.shape[d];
      const int64_t size = given.shape()[d];
      if (dim.is_static()) {
        if (dim.size() != size) return mismatch();
        continue;
      }
      auto [it, inserted] = bindings.emplace(dim.symbol_name(), size);
      if (inserted) {
        bound_by[dim.symbol_name()] = node.name;
      } else if (it->second != size) {
        return invalid_argument("symbol " + dim.symbol_name() + " is " + std::to_string(it->second) +
                                " from input '" + bound_by[dim.symbol_name()] + "' but " +
                                std::to_string(size) + " from input '" + node.name + "'");
      }
    }
  }
  return bindings;
}

Result<Tensor> evaluate_node(const Graph& graph, const Node& node,
                             std::span<const Tensor* const> inputs,
                             const SymbolBindings& bindings, InterpreterPrecision precision) {
  interp::EvalContext ctx{graph, node, inputs, bindings, node.type.dtype, precision};
  const OpInfo& info = op_info(node.op);
  if (node.op == OpKind::kInput) {
    return interp::node_error(ctx, "graph inputs are bound by interpret(), not evaluated");
  }
  if (node.op == OpKind::kConstant) {
    const auto* attrs = std::get_if<ConstantAttrs>(&node.attrs);
    if (attrs == nullptr || attrs->constant_index >= graph.constants().size()) {
      return interp::node_error(ctx, "constant refers to no stored tensor");
    }
    return graph.constant(attrs->constant_index);
  }
  if (int(inputs.size()) < info.min_inputs ||
      (info.max_inputs >= 0 && int(inputs.size()) > info.max_inputs)) {
    return interp::node_error(ctx, "takes " + std::to_string(info.min_inputs) + ".." +
                                       std::to_string(info.max_inputs) + " operands, got " +
                                       std::to_string(inputs.size()));
  }
  for (const Tensor* t : inputs) {
    if (t == nullptr) return interp::node_error(ctx, "an operand has no value");
  }

  // The evaluators read the attribute struct of their kind (std::get): check it first.
  if (node.attrs.index() != info.default_attrs().index()) {
    return interp::node_error(ctx, "has attributes of the wrong kind");
  }
  Result<Tensor> result = info.eval(ctx);
  if (!result.is_ok()) return result;

  // The evaluators compute shapes from the actual operands (as NumPy would); where the graph's
  // inferred type is fully bound, it must agree, or inference and evaluation disagree.
  if (result->dtype() != node.type.dtype) {
    return Status(ErrorCode::kInternal,
                  "node '" + node.name + "' (" + std::string(op_name(node.op)) + "): computed " +
                      given_type_string(*result) + " but the graph says " + node.type.to_string(),
                  node.loc);
  }
  if (std::optional<std::vector<int64_t>> declared = declared_sizes(node, bindings)) {
    if (*declared != result->shape()) {
      return Status(ErrorCode::kInternal,
                    "node '" + node.name + "' (" + std::string(op_name(node.op)) + "): computed " +
                        given_type_string(*result) + " but the graph says " + node.type.to_string(),
                    node.loc);
    }
  }
  return result;
}

Result<std::vector<Tensor>> interpret(const Graph& graph, std::span<const Tensor> inputs,
                                      InterpreterPrecision precision) {
  KILN_ASSIGN_OR_RETURN(SymbolBindings bindings, bind_inputs(graph, inputs));
  const std::vector<Node>& nodes = graph.nodes();

  // last_use[v] = position of the last live node reading v; values read by graph outputs live
  // to the end. A value is dropped right after its last use so peak memory tracks liveness.
  constexpr size_t kKeepToEnd = ~size_t(0);
  std::vector<size_t> last_use(nodes.size());
  for (size_t pos = 0; pos < nodes.size(); ++pos) last_use[pos] = pos;  // unused: drop at once
  for (size_t pos = 0; pos < nodes.size(); ++pos) {
    if (nodes[pos].erased) continue;
    for (NodeId in : nodes[pos].inputs) {
      if (in >= nodes.size() || nodes[in].erased) {
        return invalid_argument("node '" + nodes[pos].name + "' reads a value that does not exist",
                                nodes[pos].loc);
      }
      if (last_use[in] != kKeepToEnd) last_use[in] = std::max(last_use[in], pos);
    }
  }
  for (const GraphOutput& out : graph.outputs()) {
    if (out.node >= nodes.size() || nodes[out.node].erased) {
      return invalid_argument("output '" + out.name + "' is not defined by a live node", out.loc);
    }
    last_use[out.node] = kKeepToEnd;
  }

  std::vector<std::optional<Tensor>> values(nodes.size());
  std::vector<const Tensor*> operands;
  for (size_t pos = 0; pos < nodes.size(); ++pos) {
    const Node& node = nodes[pos];
    if (node.erased) continue;
    if (node.op == OpKind::kInput) {
      const auto* attrs = std::get_if<InputAttrs>(&node.attrs);
      int64_t index = attrs ? attrs->index : -1;
      if (index < 0 || size_t(index) >= inputs.size()) {
        return invalid_argument("input node '" + node.name + "' has no matching input", node.loc);
      }
      values[pos] = inputs[index];  // shares storage; inputs are only read
    } else {
      operands.clear();
      for (NodeId in : node.inputs) {
        if (!values[in]) {
          return invalid_argument("node '" + node.name + "' reads '" + nodes[in].name +
                                      "' before it is computed (the graph is not in execution order)",
                                  node.loc);
        }
        operands.push_back(&*values[in]);
      }
      KILN_ASSIGN_OR_RETURN(Tensor value, evaluate_node(graph, node, operands, bindings, precision));
      values[pos] = std::move(value);
    }
    for (NodeId in : node.inputs) {
      if (last_use[in] == pos) values[in].reset();
    }
    if (last_use[pos] == pos) values[pos].reset();
  }

  std::vector<Tensor> outputs;
  outputs.reserve(graph.outputs().size());
  for (const GraphOutput& out : graph.outputs()) outputs.push_back(*values[out.node]);
  return outputs;
}

}  // namespace kiln::ir
