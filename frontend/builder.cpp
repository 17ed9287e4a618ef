#include "frontend/builder.h"

#include <limits>

#include "ir/infer.h"

namespace kiln::frontend {

GraphBuilder::GraphBuilder(std::string graph_name) { graph_.name = std::move(graph_name); }

void GraphBuilder::record(std::string message) { errors_.push_back(std::move(message)); }

Value GraphBuilder::add_node(ir::Node node) {
  const bool user_named = !node.name.empty();
  if (user_named) {
    if (!names_.insert(node.name)) {
      record("the name '" + node.name + "' is already used");
      return Value{};
    }
  } else {
    node.name = names_.fresh(node.op == ir::OpKind::kConstant ? "const" : ir::op_name(node.op));
  }
  Status status = ir::infer_node(graph_, node);
  if (!status.is_ok()) {
    std::string op = node.op == ir::OpKind::kInput ? "input" : std::string(ir::op_name(node.op));
    record("node '" + node.name + "' (" + op + "): " + status.message());
    return Value{};
  }
  ir::NodeId id = graph_.add_node(std::move(node));
  user_named_.resize(graph_.num_nodes(), false);
  user_named_[id] = user_named;
  return Value{id};
}

bool GraphBuilder::check_operand(Value v, ir::OpKind kind, size_t position) {
  if (v.valid() && v.id < graph_.num_nodes()) return true;
  // An invalid operand after an earlier error is that error's consequence: stay silent.
  if (errors_.empty()) {
    record("operand " + std::to_string(position) + " of '" + std::string(ir::op_name(kind)) +
           "' is not a value of this builder");
  }
  return false;
}

Value GraphBuilder::input(const std::string& name, ir::DType dtype, ir::Shape shape) {
  ir::Node node;
  node.op = ir::OpKind::kInput;
  node.name = name;
  node.attrs = ir::InputAttrs{int64_t(graph_.inputs().size())};
  node.type = ir::TensorType{dtype, std::move(shape)};
  if (name.empty()) {
    record("an input needs a name");
    return Value{};
  }
  Value v = add_node(std::move(node));
  if (v.valid()) graph_.inputs().push_back(v.id);
  return v;
}

Value GraphBuilder::constant(ir::Tensor data, const std::string& name, const std::string& weight_name) {
  ir::Node node;
  node.op = ir::OpKind::kConstant;
  node.name = name;
  node.type = data.type();
  node.attrs = ir::ConstantAttrs{graph_.add_constant(std::move(data)), weight_name};
  return add_node(std::move(node));
}

Value GraphBuilder::full(double value, ir::DType dtype, std::vector<int64_t> shape) {
  Result<ir::Tensor> t = ir::Tensor::zeros(dtype, std::move(shape));
  if (!t) {
    record("constant: " + t.status().message());
    return Value{};
  }
  if (dtype == ir::DType::kBool) value = value != 0 ? 1 : 0;
  for (int64_t i = 0; i < t->num_elements(); ++i) t->set_element_from_double(i, value);
  return constant(std::move(t).value());
}

Value GraphBuilder::scalar(double value, ir::DType dtype) { return full(value, dtype, {}); }

Value GraphBuilder::op(ir::OpKind kind, const std::vector<Value>& inputs) {
  return op(kind, inputs, ir::default_attrs(kind));
}

Value GraphBuilder::op(ir::OpKind kind, const std::vector<Value>& inputs, ir::Attrs attrs,
                       const std::string& name) {
  if (kind == ir::OpKind::kInput || kind == ir::OpKind::kConstant) {
    record("use input() or constant() to create '" + std::string(ir::op_name(kind)) + "' nodes");
    return Value{};
  }
  ir::Node node;
  node.op = kind;
  node.name = name;
  node.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!check_operand(inputs[i], kind, i)) return Value{};
    node.inputs.push_back(inputs[i].id);
  }
  const ir::OpInfo& info = ir::op_info(kind);
  int count = int(inputs.size());
  if (count < info.min_inputs || (info.max_inputs >= 0 && count > info.max_inputs)) {
    record("'" + std::string(info.name) + "' takes " + std::to_string(info.min_inputs) +
           (info.max_inputs < 0 ? " or more" : info.max_inputs == info.min_inputs ? "" : " to " + std::to_string(info.max_inputs)) +
           " operands, got " + std::to_string(count));
    return Value{};
  }
  return add_node(std::move(node));
}

Value GraphBuilder::reduce(ir::OpKind kind, Value x, std::vector<int64_t> axes, bool keepdims) {
  ir::ReduceAttrs attrs;
  attrs.all_axes = axes.empty();
  attrs.axes = std::move(axes);
  attrs.keepdims = keepdims;
  return op(kind, {x}, attrs);
}

Value GraphBuilder::reduce_sum(Value x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(ir::OpKind::kReduceSum, x, std::move(axes), keepdims);
}
Value GraphBuilder::reduce_mean(Value x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(ir::OpKind::kReduceMean, x, std::move(axes), keepdims);
}
Value GraphBuilder::reduce_max(Value x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(ir::OpKind::kReduceMax, x, std::move(axes), keepdims);
}
Value GraphBuilder::reduce_min(Value x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(ir::OpKind::kReduceMin, x, std::move(axes), keepdims);
}
Value GraphBuilder::reduce_prod(Value x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(ir::OpKind::kReduceProd, x, std::move(axes), keepdims);
}

Value GraphBuilder::conv2d(Value x, Value w, std::optional<Value> bias, ir::Conv2dAttrs attrs) {
  std::vector<Value> inputs = {x, w};
  if (bias) inputs.push_back(*bias);
  return op(ir::OpKind::kConv2d, inputs, attrs);
}

Value GraphBuilder::named(Value v, const std::string& name) {
  if (!v.valid() || v.id >= graph_.num_nodes()) {
    if (errors_.empty()) record("cannot name an invalid value '" + name + "'");
    return Value{};
  }
  ir::Node& node = graph_.node(v.id);
  if (node.name == name) {
    user_named_[v.id] = true;
    return v;
  }
  if (name.empty() || !names_.insert(name)) {
    record("cannot rename '" + node.name + "' to '" + name + "': the name is " +
           (name.empty() ? "empty" : "already used"));
    return Value{};
  }
  node.name = name;
  user_named_[v.id] = true;
  return v;
}

void GraphBuilder::output(const std::string& name, Value v) {
  if (!v.valid() || v.id >= graph_.num_nodes()) {
    if (errors_.empty()) record("output '" + name + "' is not a value of this builder");
    return;
  }
  for (const ir::GraphOutput& out : graph_.outputs()) {
    if (out.name == name) {
      record("duplicate output '" + name + "'");
      return;
    }
  }
  const ir::Node& node = graph_.node(v.id);
  if (node.name != name) {
    if (user_named_[v.id]) {
      record("output '" + name + "' is the value '" + node.name +
             "', which already has a name (outputs name their values; use the same name)");
      return;
    }
    if (!named(v, name).valid()) return;
  }
  user_named_[v.id] = true;
  graph_.outputs().push_back(ir::GraphOutput{name, v.id, graph_.node(v.id).type, {}});
}

const ir::TensorType* GraphBuilder::type_of(Value v) const {
  if (!v.valid() || v.id >= graph_.num_nodes()) return nullptr;
  return &graph_.node(v.id).type;
}

Result<ir::Graph> GraphBuilder::finish() && {
  if (errors_.empty() && graph_.outputs().empty()) record("graph '" + graph_.name + "' has no outputs");
  if (!errors_.empty()) {
    std::string message = "cannot build graph '" + graph_.name + "': " + errors_.front();
    for (size_t i = 1; i < errors_.size(); ++i) message += "\n  " + errors_[i];
    return invalid_argument(std::move(message));
  }
  return std::move(graph_);
}

}  // namespace kiln::frontend
