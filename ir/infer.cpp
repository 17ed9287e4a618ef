// Shape and dtype inference: the dispatcher, the elementwise / reduce / normalize families and
// the whole-graph driver. Layout, matmul and convolution live in infer_shapes.cpp.
#include "ir/infer.h"

#include <algorithm>
#include <cmath>

#include "ir/infer_internal.h"

namespace kiln::ir {
namespace infer_detail {

std::string ints_to_string(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

}  // namespace infer_detail

namespace {

using infer_detail::Operands;

// True when the static part of the shape multiplies out past int64 (symbols count as >= 1).
bool static_product_overflows(const Shape& shape) {
  int64_t product = 1;
  for (const Dim& d : shape) {
    if (d.is_symbolic() || d.size() == 0) continue;
    if (__builtin_mul_overflow(product, d.size(), &product)) return true;
  }
  return false;
}

// Checks a type written by the user (graph input, constant): static dims non-negative, symbols
// non-empty, element count representable.
Status check_declared_type(const TensorType& type) {
  for (const Dim& d : type.shape) {
    if (d.is_static() && d.size() < 0) {
      return invalid_argument("negative size " + std::to_string(d.size()) + " in " + type.to_string());
    }
  }
  if (type.rank() > kMaxRank) {
    return invalid_argument("a shape of rank " + std::to_string(type.rank()) + ": Kiln's tensors have at most " +
                            std::to_string(kMaxRank) + " dimensions");
  }
  if (static_product_overflows(type.shape)) {
    return invalid_argument("shape " + type.to_string() + " has too many elements (overflows 64 bits)");
  }
  return Status::ok();
}

}  // namespace

bool dtype_in_class(DTypeClass dtypes, DType dtype) {
  switch (dtypes) {
    case DTypeClass::kAny: return true;
    case DTypeClass::kNumeric: return is_numeric(dtype);
    case DTypeClass::kFloat: return is_float(dtype);
    case DTypeClass::kFloatOrSigned: return is_float(dtype) || is_signed_integer(dtype);
    case DTypeClass::kInteger: return is_integer(dtype);
    case DTypeClass::kBool: return dtype == DType::kBool;
  }
  return false;
}

namespace infer_detail {

// The operand dtype check of the op's row (DTypeClass), for one-operand rules.
Status check_operand_dtype(OpKind op, const TensorType& x) {
  const DTypeClass dtypes = op_info(op).operand_dtypes;
  if (dtype_in_class(dtypes, x.dtype)) return Status::ok();
  switch (dtypes) {
    case DTypeClass::kAny: break;
    case DTypeClass::kNumeric: return invalid_argument(quoted_op(op) + " needs a numeric operand, got " + x.to_string());
    case DTypeClass::kFloat:
      return invalid_argument(quoted_op(op) + " needs a floating-point operand, got " + x.to_string() +
                              " (use cast)");
    case DTypeClass::kFloatOrSigned:
      return invalid_argument(quoted_op(op) + " needs a floating-point or signed integer operand, got " +
                              x.to_string());
    case DTypeClass::kInteger:
      return invalid_argument(quoted_op(op) + " needs an integer operand, got " + x.to_string());
    case DTypeClass::kBool: return invalid_argument(quoted_op(op) + " needs a bool operand, got " + x.to_string());
  }
  return internal_error("dtype class without a message");
}

Result<TensorType> infer_unary(OpKind op, const Operands& in, Attrs&) {
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, in[0]));
  return in[0];
}

// Broadcasts operand shapes pairwise, reporting the full types of the pair that disagrees.
Result<Shape> broadcast_all(const Operands& in) {
  Shape shape = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    Result<Shape> next = broadcast_shapes(shape, in[i].shape);
    if (!next) {
      const TensorType& left = i == 1 ? in[0] : TensorType{in[0].dtype, shape};
      return invalid_argument("cannot broadcast " + left.to_string() + " with " + in[i].to_string());
    }
    shape = std::move(next).value();
  }
  return shape;
}

Status require_same_dtype(OpKind op, const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype) {
    return invalid_argument(quoted_op(op) + " operands must have the same dtype, got " + a.to_string() +
                            " and " + b.to_string() + " (use cast)");
  }
  return Status::ok();
}

Result<TensorType> infer_binary(OpKind op, const Operands& in, Attrs&) {
  KILN_RETURN_IF_ERROR(require_same_dtype(op, in[0], in[1]));
  if (!is_numeric(in[0].dtype)) {
    return invalid_argument(quoted_op(op) + " needs numeric operands, got " + in[0].to_string() + " and " +
                            in[1].to_string());
  }
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, in[0]));
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcast_all(in));
  return TensorType{in[0].dtype, std::move(shape)};
}

Result<TensorType> infer_compare(OpKind op, const Operands& in, Attrs&) {
  KILN_RETURN_IF_ERROR(require_same_dtype(op, in[0], in[1]));
  if (op_info(op).operand_dtypes == DTypeClass::kNumeric && !is_numeric(in[0].dtype)) {
    return invalid_argument(quoted_op(op) + " needs numeric operands, got " + in[0].to_string() + " and " +
                            in[1].to_string());
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcast_all(in));
  return TensorType{DType::kBool, std::move(shape)};
}

Result<TensorType> infer_logic(OpKind op, const Operands& in, Attrs&) {
  if (in[0].dtype != DType::kBool || in[1].dtype != DType::kBool) {
    return invalid_argument(quoted_op(op) + " needs bool operands, got " + in[0].to_string() + " and " +
                            in[1].to_string());
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcast_all(in));
  return TensorType{DType::kBool, std::move(shape)};
}

Result<TensorType> infer_where(OpKind, const Operands& in, Attrs&) {
  if (in[0].dtype != DType::kBool) {
    return invalid_argument("where needs a bool condition, got " + in[0].to_string());
  }
  if (in[1].dtype != in[2].dtype) {
    return invalid_argument("where branches must have the same dtype, got " + in[1].to_string() + " and " +
                            in[2].to_string() + " (use cast)");
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcast_all(in));
  return TensorType{in[1].dtype, std::move(shape)};
}

Result<TensorType> infer_clamp(OpKind op, const Operands& in, Attrs& node_attrs) {
  const auto& attrs = std::get<ClampAttrs>(node_attrs);
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, in[0]));
  if ((attrs.min && std::isnan(*attrs.min)) || (attrs.max && std::isnan(*attrs.max))) {
    return invalid_argument("clamp bounds must not be NaN");
  }
  return in[0];
}

Result<TensorType> infer_cast(OpKind, const Operands& in, Attrs& node_attrs) {
  return TensorType{std::get<CastAttrs>(node_attrs).to, in[0].shape};
}

// Normalizes a list of axes against `rank`: non-negative, sorted, no duplicates.
Result<std::vector<int64_t>> normalize_axes(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  out.reserve(axes.size());
  for (int64_t axis : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t a, normalize_axis(axis, rank));
    if (std::find(out.begin(), out.end(), a) != out.end()) {
      return invalid_argument("axis " + std::to_string(axis) + " appears more than once in axes=" +
                              infer_detail::ints_to_string(axes));
    }
    out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<TensorType> infer_reduce(OpKind op, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<ReduceAttrs>(node_attrs);
  const TensorType& x = in[0];
  if (!is_numeric(x.dtype)) {
    return invalid_argument(quoted_op(op) + " needs a numeric operand, got " + x.to_string());
  }
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, x));  // reduce_mean: floats only
  // An omitted (or empty) axes list reduces over every axis, as in ONNX. An explicit list that
  // names a strict subset of the axes wins over a stale all_axes flag.
  std::vector<int64_t> every_axis;
  for (int64_t i = 0; i < x.rank(); ++i) every_axis.push_back(i);
  if (attrs.axes.empty()) {
    attrs.all_axes = true;
    attrs.axes = every_axis;
  } else {
    KILN_ASSIGN_OR_RETURN(attrs.axes, normalize_axes(attrs.axes, x.rank()));
    if (attrs.axes != every_axis) attrs.all_axes = false;
  }
  Shape shape;
  for (int64_t i = 0; i < x.rank(); ++i) {
    const bool reduced = std::binary_search(attrs.axes.begin(), attrs.axes.end(), i);
    if (!reduced) {
      shape.push_back(x.shape[i]);
      continue;
    }
    const Dim& d = x.shape[i];
    if (op_info(op).reduce.needs_elements && d.is_static() && d.size() == 0) {
      return invalid_argument(quoted_op(op) + " over axis " + std::to_string(i) + " of " + x.to_string() +
                              ", which is empty");
    }
    if (attrs.keepdims) shape.push_back(Dim::of(1));
  }
  return TensorType{x.dtype, std::move(shape)};
}

Result<TensorType> infer_argmax(OpKind op, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<ArgMaxAttrs>(node_attrs);
  const TensorType& x = in[0];
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, x));
  KILN_ASSIGN_OR_RETURN(attrs.axis, normalize_axis(attrs.axis, x.rank()));
  const Dim& d = x.shape[attrs.axis];
  if (d.is_static() && d.size() == 0) {
    return invalid_argument("argmax over axis " + std::to_string(attrs.axis) + " of " + x.to_string() +
                            ", which is empty");
  }
  Shape shape;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != attrs.axis) {
      shape.push_back(x.shape[i]);
    } else if (attrs.keepdims) {
      shape.push_back(Dim::of(1));
    }
  }
  return TensorType{DType::kI64, std::move(shape)};
}

Result<TensorType> infer_softmax(OpKind op, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<AxisAttrs>(node_attrs);
  const TensorType& x = in[0];
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, x));
  KILN_ASSIGN_OR_RETURN(attrs.axis, normalize_axis(attrs.axis, x.rank()));
  return x;
}

Result<TensorType> infer_layer_norm(OpKind op, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<LayerNormAttrs>(node_attrs);
  const TensorType& x = in[0];
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, x));
  KILN_ASSIGN_OR_RETURN(attrs.axis, normalize_axis(attrs.axis, x.rank()));
  if (!(attrs.epsilon >= 0.0) || std::isinf(attrs.epsilon)) {
    return invalid_argument("layer_norm epsilon must be a finite number >= 0");
  }
  const Shape trailing(x.shape.begin() + attrs.axis, x.shape.end());
  const char* roles[] = {"scale", "bias"};
  for (size_t i = 1; i < in.size(); ++i) {
    const TensorType expected{x.dtype, trailing};
    if (in[i] != expected) {
      return invalid_argument(std::string("layer_norm ") + roles[i - 1] + " must be " + expected.to_string() +
                              " (the dims of " + x.to_string() + " from axis " +
                              std::to_string(attrs.axis) + "), got " + in[i].to_string());
    }
  }
  return x;
}

}  // namespace infer_detail

namespace {

Result<TensorType> infer_source(const Graph& graph, const Node& node) {
  if (node.op == OpKind::kInput) {
    KILN_RETURN_IF_ERROR(check_declared_type(node.type));
    return node.type;
  }
  const auto& attrs = std::get<ConstantAttrs>(node.attrs);
  if (attrs.constant_index >= graph.constants().size()) {
    return invalid_argument("constant refers to missing data #" + std::to_string(attrs.constant_index));
  }
  return graph.constant(attrs.constant_index).type();
}

std::string count_phrase(int n) { return std::to_string(n) + (n == 1 ? " operand" : " operands"); }

}  // namespace

Status infer_node(const Graph& graph, Node& node) {
  if (int(node.op) >= kNumOpKinds) {
    return invalid_argument("unknown op kind " + std::to_string(int(node.op)));
  }
  const OpInfo& info = op_info(node.op);
  if (node.attrs.index() != default_attrs(node.op).index()) {
    return invalid_argument(std::string(info.name) + " has attributes of the wrong kind");
  }
  const int count = int(node.inputs.size());
  if (count < info.min_inputs || (info.max_inputs >= 0 && count > info.max_inputs)) {
    std::string expected = info.min_inputs == info.max_inputs ? count_phrase(info.min_inputs)
                           : info.max_inputs < 0
                               ? "at least " + count_phrase(info.min_inputs)
                               : std::to_string(info.min_inputs) + " to " + count_phrase(info.max_inputs);
    return invalid_argument(std::string(info.name) + " takes " + expected + ", got " + std::to_string(count));
  }
  Operands in;
  in.reserve(node.inputs.size());
  for (NodeId id : node.inputs) {
    if (id >= graph.num_nodes() || graph.node(id).erased) {
      return invalid_argument(std::string(info.name) + " refers to a value that does not exist (#" +
                              std::to_string(id) + ")");
    }
    in.push_back(graph.node(id).type);
  }
  Attrs attrs = node.attrs;
  KILN_ASSIGN_OR_RETURN(TensorType type, info.infer ? info.infer(node.op, in, attrs) : infer_source(graph, node));
  if (type.rank() > kMaxRank) {
    return invalid_argument("the result of rank " + std::to_string(type.rank()) + ": Kiln's tensors have at most " +
                            std::to_string(kMaxRank) + " dimensions");
  }
  if (static_product_overflows(type.shape)) {
    return invalid_argument("result " + type.to_string() + " has too many elements (overflows 64 bits)");
  }
  node.type = std::move(type);
  node.attrs = std::move(attrs);
  return Status::ok();
}

Status infer_graph(Graph& graph) {
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    Node& node = graph.node(id);
    if (node.erased) continue;
    Status status = infer_node(graph, node);
    if (!status.is_ok()) {
      std::string op = node.op == OpKind::kInput ? "input" : std::string(op_name(node.op));
      return Status(status.code(), "'" + node.name + "' (" + op + "): " + status.message(), node.loc);
    }
  }
  for (const GraphOutput& out : graph.outputs()) {
    if (out.node >= graph.num_nodes() || graph.node(out.node).erased) {
      return Status(ErrorCode::kInvalidArgument, "output '" + out.name + "' is not defined", out.loc);
    }
    KILN_RETURN_IF_ERROR(check_output_type(graph, out));
  }
  return Status::ok();
}

Status check_output_type(const Graph& graph, const GraphOutput& out) {
  const TensorType& defined = graph.node(out.node).type;
  if (defined == out.declared) return Status::ok();
  return Status(ErrorCode::kInvalidArgument,
                "output '" + out.name + "' is declared " + out.declared.to_string() +
                    " but defined as " + defined.to_string(),
                out.loc);
}

}  // namespace kiln::ir
