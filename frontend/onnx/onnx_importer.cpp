// The ONNX import driver: parses the ModelProto, checks the opset, creates graph inputs and
// initializer constants, converts every node through the converter tables (collecting every
// unsupported node before giving up) and sets the graph outputs. Also the Importer helpers.
#include "frontend/onnx/onnx_importer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include <google/protobuf/io/zero_copy_stream.h>

#include "frontend/onnx/onnx_internal.h"
#include "ir/infer.h"
#include "ir/interpreter.h"
#include "ir/names.h"
#include "ir/verifier.h"
#include "support/file_io.h"

namespace kiln::onnx_import {
namespace {

using ir::NodeId;

// Opsets 7-28 are the supported range: every converter handles each change its operator went
// through up to opset 28 (ONNX 1.23; the converters branch on Importer::opset where the meaning
// changed, and refuse forms they do not implement). A later opset may change any operator, so it
// is refused until the converters are checked against it. Older models (as the ONNX node tests
// write them: each test declares the opset its operator last changed in) are accepted when every
// operator they use has the same semantics in their opset as in opset 7; see min_opset_of().
constexpr int64_t kMinOpset = 1;
constexpr int64_t kFullOpset = 7;
constexpr int64_t kMaxOpset = 28;
// The newest ONNX IR version read (onnx 1.23's); a newer file may use what this reader misreads.
constexpr int64_t kMaxIrVersion = 14;
// Folding creates constants; past this size a node stays in the graph for the pipeline to fold.
constexpr int64_t kMaxFoldElements = int64_t(1) << 22;

const std::map<std::string, Converter>& converters() {
  static const std::map<std::string, Converter> table = [] {
    std::map<std::string, Converter> t;
    register_elementwise_ops(t);
    register_tensor_ops(t);
    register_nn_ops(t);
    register_extra_ops(t);
    register_norm_ops(t);
    register_loss_ops(t);
    register_attention_ops(t);
    register_resize_ops(t);
    register_quantization_ops(t);
    register_roi_ops(t);
    register_rnn_ops(t);
    register_grid_ops(t);
    register_control_flow_ops(t);
    register_signal_ops(t);
    register_transformer_ops(t);
    return t;
  }();
  return table;
}

// The oldest opset whose form of the operator the converters handle: operators whose inputs,
// attributes or broadcasting changed meaning before opset 7 are refused in older models.
int64_t min_opset_of(const std::string& op) {
  static const std::map<std::string, int64_t> table = {
      // v6 dropped consumed_inputs (legacy in-place hints).
      {"Abs", 6}, {"Neg", 6}, {"Exp", 6}, {"Log", 6}, {"Sqrt", 6}, {"Reciprocal", 6}, {"Relu", 6},
      {"Sigmoid", 6}, {"Tanh", 6}, {"Floor", 6}, {"Ceil", 6}, {"Elu", 6}, {"HardSigmoid", 6},
      {"LeakyRelu", 6}, {"Selu", 6}, {"Clip", 6}, {"Cast", 6}, {"Max", 6}, {"Min", 6}, {"Sum", 6},
      {"Mean", 6},
      // v7 replaced the legacy broadcast/axis attributes by NumPy broadcasting.
      {"Add", 7}, {"Sub", 7}, {"Mul", 7}, {"Div", 7}, {"Pow", 7}, {"And", 7}, {"Or", 7}, {"Xor", 7},
      {"Equal", 7}, {"Less", 7}, {"Greater", 7}, {"PRelu", 7}, {"Gemm", 7}, {"BatchNormalization", 7},
      {"Dropout", 7}, {"Sin", 7}, {"Cos", 7},
      {"Concat", 4}, {"Reshape", 5}, {"Expand", 8}, {"Erf", 9}, {"Sign", 9}, {"Where", 9},
      {"ConstantOfShape", 9}, {"Constant", 9}, {"Tan", 7}, {"InstanceNormalization", 6},
      {"Split", 2}, {"Pad", 2}, {"Tile", 6}, {"Shrink", 9}, {"Sinh", 9}, {"Cosh", 9},
      {"IsNaN", 9}, {"IsInf", 10}, {"EyeLike", 9}, {"Asinh", 9}, {"Acosh", 9}, {"Atanh", 9},
      // v7 dropped v1's output_sequence attribute (and GRU's v3 form).
      {"RNN", 7}, {"GRU", 7}, {"LSTM", 7},
  };
  auto it = table.find(op);
  return it == table.end() ? 1 : it->second;
}

std::string node_label(const onnx::NodeProto& node, int64_t opset) {
  return "node '" + (node.name().empty() ? (node.output_size() > 0 ? node.output(0) : std::string("?"))
                                         : node.name()) +
         "' (" + node.op_type() + ", opset " + std::to_string(opset) + ")";
}

Result<ir::TensorType> value_type(Importer& im, const onnx::ValueInfoProto& info) {
  if (!info.type().has_tensor_type()) {
    return unsupported("input '" + info.name() + "' is not a tensor (sequences, maps and optionals are not supported)");
  }
  const auto& tt = info.type().tensor_type();
  const std::optional<ir::DType> dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype) {
    return unsupported("input '" + info.name() + "' has element type " + onnx_type_name(tt.elem_type()) +
                       ", which Kiln does not support");
  }
  if (!tt.has_shape()) return unsupported("input '" + info.name() + "' has no shape (unknown rank)");
  if (tt.shape().dim_size() > ir::kMaxRank)
    return unsupported("input '" + info.name() + "' has rank " + std::to_string(tt.shape().dim_size()) +
                       " (Kiln's tensors have at most " + std::to_string(ir::kMaxRank) + " dimensions)");
  ir::TensorType type{*dtype, {}};
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) return corrupt("input '" + info.name() + "' has a negative dim");
      type.shape.push_back(ir::Dim::of(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      std::string sym;
      for (char c : d.dim_param()) sym += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      if (!ir::is_identifier_start(sym[0])) sym = "d_" + sym;
      if (ir::is_graph_keyword(sym)) sym = "d_" + sym;
      type.shape.push_back(ir::Dim::symbol(sym));
    } else {
      type.shape.push_back(ir::Dim::symbol(im.fresh_symbol()));
    }
  }
  return type;
}

}  // namespace

// ---- Importer helpers -------------------------------------------------------------------

std::string sanitize_name(std::string_view onnx_name) {
  std::string s;
  for (char c : onnx_name) {
    s += ir::is_identifier_char(c) ? c : '_';
  }
  if (s.empty() || !ir::is_identifier_start(s[0])) s = "v_" + s;
  if (ir::is_graph_keyword(s)) s = "v_" + s;
  // Room for the suffix that keeps a shortened name unique (NameTable::fresh).
  if (s.size() > ir::kMaxNameLength - 32) s.resize(ir::kMaxNameLength - 32);
  return s;
}

std::string Importer::kiln_name(std::string_view onnx_name) {
  std::string s = sanitize_name(onnx_name);
  if (names.insert(s)) return s;
  return names.fresh(s);
}

std::string Importer::fresh_symbol() {
  for (;;) {
    std::string s = "dyn" + std::to_string(next_symbol++);
    if (!names.contains(s)) return s;
  }
}

Status Importer::error(std::string message) const {
  return invalid_argument(node_label(*current, opset) + ": " + message);
}
Status Importer::unsupported(std::string message) const {
  return kiln::unsupported(node_label(*current, opset) + ": " + message);
}

const ir::Tensor* Importer::const_data(NodeId id) const {
  if (id == ir::kNoNode || graph.node(id).op != ir::OpKind::kConstant) return nullptr;
  return &graph.constant_of(id);
}

NodeId Importer::add_constant(ir::Tensor data, std::string_view base) {
  ir::Node node;
  node.op = ir::OpKind::kConstant;
  node.name = kiln_name(base);
  node.type = data.type();
  node.attrs = ir::ConstantAttrs{graph.add_constant(std::move(data)), ""};
  node.loc = SourceLoc{filename, 0, 0};
  return graph.add_node(std::move(node));
}

Result<NodeId> Importer::scalar(double v, ir::DType dtype) {
  KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(dtype, {}));
  t.set_element_from_double(0, v);
  return add_constant(std::move(t));
}

Result<NodeId> Importer::iota(ir::Dim n, int64_t axis, int64_t rank) {
  ir::Shape shape(size_t(rank), ir::Dim::of(1));
  shape[size_t(axis)] = n;
  if (n.is_symbolic()) return add(ir::OpKind::kIota, {}, ir::IotaAttrs{shape, axis, ir::DType::kI64});
  KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(ir::DType::kI64, ir::static_sizes(shape)));
  for (int64_t i = 0; i < n.size(); ++i) t.mutable_data_as<int64_t>()[i] = i;
  return add_constant(std::move(t), "iota");
}

Result<NodeId> Importer::wrap_negative(NodeId indices, ir::Dim extent) {
  if (type(indices).dtype != ir::DType::kI64) {
    KILN_ASSIGN_OR_RETURN(indices, add(ir::OpKind::kCast, {indices}, ir::CastAttrs{ir::DType::kI64}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId zero, scalar(0, ir::DType::kI64));
  KILN_ASSIGN_OR_RETURN(NodeId extent_node, size_value(extent));
  KILN_ASSIGN_OR_RETURN(NodeId negative, apply(ir::OpKind::kLess, {indices, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId wrapped, apply(ir::OpKind::kAdd, {indices, extent_node}));
  return add(ir::OpKind::kWhere, {negative, wrapped, indices}, ir::NoAttrs{});
}

Result<NodeId> Importer::ints_constant(const std::vector<int64_t>& v) {
  KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(ir::DType::kI64, {int64_t(v.size())}));
  std::copy(v.begin(), v.end(), t.mutable_data_as<int64_t>());
  return add_constant(std::move(t));
}

Result<std::vector<int64_t>> Importer::const_ints(NodeId id, std::string_view what) const {
  const ir::Tensor* t = const_data(id);
  if (t == nullptr) return unsupported(std::string(what) + " must be a constant (computed at import)");
  if (!ir::is_integer(t->dtype())) return error(std::string(what) + " must be integers");
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t->num_elements(); ++i) out.push_back(t->element_as_int(i));
  return out;
}

Result<NodeId> Importer::add(ir::OpKind op, std::vector<NodeId> inputs, ir::Attrs attrs) {
  ir::Node node;
  node.op = op;
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  node.name = kiln_name(current != nullptr && current->output_size() > 0 && !current->output(0).empty()
                            ? current->output(0)
                            : std::string(ir::op_name(op)));
  node.loc = SourceLoc{filename, 0, 0};
  Status inferred = ir::infer_node(graph, node);
  if (!inferred.is_ok()) return error(inferred.message());
  bool all_constant = !node.inputs.empty();
  for (NodeId in : node.inputs) all_constant = all_constant && const_data(in) != nullptr;
  const std::optional<int64_t> numel = ir::static_num_elements(node.type.shape);
  if (all_constant && numel && *numel <= kMaxFoldElements) {
    std::vector<const ir::Tensor*> args;
    for (NodeId in : node.inputs) args.push_back(const_data(in));
    Result<ir::Tensor> folded = ir::evaluate_node(graph, node, args, {});
    if (folded.is_ok()) return add_constant(std::move(folded).value(), node.name);
  }
  return graph.add_node(std::move(node));
}

Result<NodeId> Importer::reshape(NodeId x, ir::Shape shape) {
  if (type(x).shape == shape) return x;
  return add(ir::OpKind::kReshape, {x}, ir::ReshapeAttrs{std::move(shape)});
}

Result<Value> Importer::input_value(int i) {
  if (!has_input(i)) return error("input " + std::to_string(i) + " is missing");
  auto it = values.find(current->input(i));
  if (it == values.end()) return error("input '" + current->input(i) + "' is not defined before use");
  return it->second;
}

Result<NodeId> Importer::input(int i) {
  KILN_ASSIGN_OR_RETURN(Value v, input_value(i));
  if (v.node != ir::kNoNode) return v.node;
  // An import-time shape vector used as data: a constant when it is static, else its entries
  // computed at run time (index arithmetic such as b * seq + k in PyTorch's exports).
  NodeId id = ir::kNoNode;
  if (ir::is_static(*v.dims)) {
    KILN_ASSIGN_OR_RETURN(id, ints_constant(ir::static_sizes(*v.dims)));
  } else {
    std::vector<NodeId> entries;
    for (const ir::Dim& d : *v.dims) {
      KILN_ASSIGN_OR_RETURN(NodeId entry, size_value(d));
      KILN_ASSIGN_OR_RETURN(entry, reshape(entry, {ir::Dim::of(1)}));
      entries.push_back(entry);
    }
    id = entries.size() == 1 ? entries[0] : ir::kNoNode;
    if (id == ir::kNoNode) {
      KILN_ASSIGN_OR_RETURN(id, add(ir::OpKind::kConcat, entries, ir::AxisAttrs{0}));
    }
  }
  if (v.dims_scalar) {
    KILN_ASSIGN_OR_RETURN(id, reshape(id, {}));
  }
  values[current->input(i)].node = id;
  return id;
}

Result<NodeId> Importer::times_size(NodeId term, const ir::Dim& size) {
  if (size.is_one()) return term;
  KILN_ASSIGN_OR_RETURN(NodeId s, size_value(size));
  return apply(ir::OpKind::kMul, {term, s});
}

Result<std::pair<std::vector<ir::Dim>, ir::Dim>> Importer::row_major_strides(const ir::Shape& shape) const {
  std::vector<ir::Dim> strides(shape.size(), ir::Dim::of(1));
  ir::Dim count = ir::Dim::of(1);
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = count;
    std::optional<ir::Dim> grown = ir::Dim::product(count, shape[d]);
    if (!grown) return error("the tensor is too large");
    count = *grown;
  }
  return std::make_pair(std::move(strides), count);
}

Result<NodeId> Importer::size_value(const ir::Dim& d) {
  if (d.is_static()) return scalar(double(d.size()), ir::DType::kI64);
  // The number of elements of a [d] tensor of ones: the size as i64 data, without Kiln needing
  // an op that reads a symbol's binding.
  KILN_ASSIGN_OR_RETURN(NodeId one, scalar(1.0, ir::DType::kI64));
  KILN_ASSIGN_OR_RETURN(NodeId ones, add(ir::OpKind::kBroadcastTo, {one}, ir::BroadcastToAttrs{{d}}));
  return add(ir::OpKind::kReduceSum, {ones}, ir::ReduceAttrs{.axes = {0}, .all_axes = false, .keepdims = false});
}

Result<ir::Shape> Importer::input_dims(int i, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(Value v, input_value(i));
  if (v.dims) return *v.dims;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ints, const_ints(v.node, what));
  return ir::shape_of(ints);
}

Result<std::vector<int64_t>> Importer::input_ints(int i, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(NodeId id, input(i));
  return const_ints(id, what);
}

Status Importer::set_output(int i, NodeId id) {
  if (i >= current->output_size() || current->output(i).empty()) return Status::ok();
  Value v;
  v.node = id;
  values[current->output(i)] = v;
  return Status::ok();
}

Status Importer::set_output_dims(int i, ir::Shape dims, bool scalar) {
  if (i >= current->output_size() || current->output(i).empty()) return Status::ok();
  if (ir::is_static(dims)) {
    KILN_ASSIGN_OR_RETURN(NodeId id, ints_constant(ir::static_sizes(dims)));
    if (scalar) {
      KILN_ASSIGN_OR_RETURN(id, reshape(id, {}));
    }
    return set_output(i, id);
  }
  Value v;
  v.dims = std::move(dims);
  v.dims_scalar = scalar;
  values[current->output(i)] = v;
  return Status::ok();
}

Status Importer::only_first_outputs(int count) {
  for (int i = count; i < current->output_size(); ++i) {
    if (!current->output(i).empty()) {
      return unsupported("output " + std::to_string(i) + " ('" + current->output(i) + "') is not supported");
    }
  }
  return Status::ok();
}

const onnx::AttributeProto* Importer::attr(std::string_view name) const {
  for (const auto& a : current->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
namespace {
// `a` when it has type `expected`; otherwise null, with the mismatch noted for the driver.
const onnx::AttributeProto* typed(const onnx::AttributeProto* a, onnx::AttributeProto::AttributeType expected,
                                  std::string& error) {
  if (a == nullptr || a->type() == expected) return a;
  // Old exporters leave `type` unset (UNDEFINED) and fill the right field: accepted.
  if (a->type() == onnx::AttributeProto::UNDEFINED) return a;
  if (error.empty())
    error = "attribute '" + a->name() + "' is " + onnx::AttributeProto::AttributeType_Name(a->type()) + ", expected " +
            onnx::AttributeProto::AttributeType_Name(expected);
  return nullptr;
}
}  // namespace

int64_t Importer::attr_int(std::string_view name, int64_t fallback) const {
  const auto* a = typed(attr(name), onnx::AttributeProto::INT, attr_type_error);
  return a != nullptr ? a->i() : fallback;
}
double Importer::attr_float(std::string_view name, double fallback) const {
  const auto* a = typed(attr(name), onnx::AttributeProto::FLOAT, attr_type_error);
  return a != nullptr ? double(a->f()) : fallback;
}
std::string Importer::attr_string(std::string_view name, std::string fallback) const {
  const auto* a = typed(attr(name), onnx::AttributeProto::STRING, attr_type_error);
  return a != nullptr ? a->s() : fallback;
}
std::optional<std::vector<int64_t>> Importer::attr_ints(std::string_view name) const {
  const auto* a = typed(attr(name), onnx::AttributeProto::INTS, attr_type_error);
  if (a == nullptr) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
std::optional<std::vector<double>> Importer::attr_floats(std::string_view name) const {
  const auto* a = typed(attr(name), onnx::AttributeProto::FLOATS, attr_type_error);
  if (a == nullptr) return std::nullopt;
  return std::vector<double>(a->floats().begin(), a->floats().end());
}
std::optional<std::vector<std::string>> Importer::attr_strings(std::string_view name) const {
  const auto* a = typed(attr(name), onnx::AttributeProto::STRINGS, attr_type_error);
  if (a == nullptr) return std::nullopt;
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}

Status check_import_size(const Importer& im, const ir::Shape& shape, std::string_view what) {
  const std::optional<int64_t> n = ir::static_num_elements(shape);
  if (!n) return im.unsupported(std::string(what) + " needs static dims");
  if (*n > kMaxImportElements) {
    return im.unsupported(std::string(what) + " of more than 2^26 elements is not supported");
  }
  return Status::ok();
}

// ---- subgraphs and local functions -------------------------------------------------------

namespace {

// The local function a node calls, or null.
const onnx::FunctionProto* called_function(const Importer& im, const onnx::NodeProto& node) {
  if (im.functions == nullptr) return nullptr;
  for (const onnx::FunctionProto& f : *im.functions) {
    if (f.name() == node.op_type() && f.domain() == node.domain()) return &f;
  }
  return nullptr;
}

// A unique name for a value defined inside an inlined body: `label`/`name`, counted on collision.
std::string unique_value_name(const Importer& im, const std::string& label, const std::string& name) {
  std::string unique = label + "/" + name;
  for (int n = 2; im.values.count(unique); ++n) unique = label + "/" + name + "#" + std::to_string(n);
  return unique;
}

// The unique name `name` has in `values`: its binding in the innermost scope that binds it, else
// the name itself (a value of the model graph).
const std::string& resolve_name(const Importer& im, const std::string& name) {
  for (auto scope = im.scopes.rbegin(); scope != im.scopes.rend(); ++scope) {
    auto it = scope->find(name);
    if (it != scope->end()) return it->second;
  }
  return name;
}

// Opens a name scope for an inlined body and closes it when it goes out of scope. Bodies nest at
// most 64 deep, so that a model whose functions or subgraphs recurse is refused, not followed.
class InlineScope {
 public:
  // `what` names the bodies in the diagnostic ("subgraphs", "local functions").
  static Result<InlineScope> open(Importer& im, const char* what,
                                  std::unordered_map<std::string, std::string> bindings = {}) {
    if (im.scopes.size() >= 64) return im.error(std::string(what) + " nest more than 64 deep");
    im.scopes.push_back(std::move(bindings));
    return InlineScope(im);
  }
  InlineScope(InlineScope&& other) noexcept : im_(std::exchange(other.im_, nullptr)) {}
  InlineScope(const InlineScope&) = delete;
  InlineScope& operator=(const InlineScope&) = delete;
  InlineScope& operator=(InlineScope&&) = delete;
  ~InlineScope() {
    if (im_ != nullptr) im_->scopes.pop_back();
  }

 private:
  explicit InlineScope(Importer& im) : im_(&im) {}
  Importer* im_;
};

// `node` with its input names resolved through the scopes and its outputs renamed to unique
// names bound in the innermost scope (when one is open).
onnx::NodeProto scoped_copy(Importer& im, const onnx::NodeProto& node, const std::string& label) {
  onnx::NodeProto copy = node;
  for (int i = 0; i < copy.input_size(); ++i) copy.set_input(i, resolve_name(im, copy.input(i)));
  for (int i = 0; i < copy.output_size(); ++i) {
    if (copy.output(i).empty()) continue;
    const std::string unique = unique_value_name(im, label, copy.output(i));
    im.scopes.back()[copy.output(i)] = unique;
    copy.set_output(i, unique);
  }
  return copy;
}

// Inlines a call of local function `f`: its inputs bound to the node's, attribute references
// in its body replaced by the node's attributes (an attribute the call leaves out is absent
// there: Debian's ONNX 1.12 protobuf has no field for a function's attribute defaults).
Status inline_function(Importer& im, const onnx::NodeProto& node, const onnx::FunctionProto& f) {
  std::map<std::string, onnx::AttributeProto> attributes;
  for (const onnx::AttributeProto& a : node.attribute()) attributes[a.name()] = a;
  const std::string label = node.output_size() > 0 && !node.output(0).empty() ? node.output(0) : node.op_type();
  std::unordered_map<std::string, std::string> bindings;
  for (int i = 0; i < f.input_size(); ++i) {
    if (i < node.input_size() && !node.input(i).empty()) bindings[f.input(i)] = node.input(i);
  }
  KILN_ASSIGN_OR_RETURN(InlineScope scope, InlineScope::open(im, "local functions", std::move(bindings)));
  for (const onnx::NodeProto& inner : f.node()) {
    onnx::NodeProto copy = scoped_copy(im, inner, label);
    for (onnx::AttributeProto& a : *copy.mutable_attribute()) {
      if (a.ref_attr_name().empty()) continue;
      auto it = attributes.find(a.ref_attr_name());
      const std::string name = a.name();
      if (it == attributes.end()) {
        a.Clear();  // an optional attribute the call leaves out: absent
        a.set_name("");
        continue;
      }
      a = it->second;
      a.set_name(name);
    }
    // Drop the attributes cleared above.
    auto* attrs = copy.mutable_attribute();
    for (int k = attrs->size(); k-- > 0;) {
      if (attrs->Get(k).name().empty()) attrs->DeleteSubrange(k, 1);
    }
    KILN_RETURN_IF_ERROR(convert_node(im, copy));
  }
  // A function body sees only its own values: its outputs resolve in its scope alone.
  const std::unordered_map<std::string, std::string>& inner_scope = im.scopes.back();
  for (int i = 0; i < node.output_size() && i < f.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    auto it = inner_scope.find(f.output(i));
    const std::string& inner_name = it == inner_scope.end() ? f.output(i) : it->second;
    auto value = im.values.find(inner_name);
    if (value == im.values.end()) return im.error("function output '" + f.output(i) + "' is never computed");
    im.values[node.output(i)] = value->second;
  }
  return Status::ok();
}

}  // namespace

Status convert_node(Importer& im, const onnx::NodeProto& node) {
  const onnx::NodeProto* saved = im.current;
  im.current = &node;
  struct Restore {
    Importer& im;
    const onnx::NodeProto* saved;
    ~Restore() { im.current = saved; }
  } restore{im, saved};
  if (const onnx::FunctionProto* f = called_function(im, node)) return inline_function(im, node, *f);
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return unsupported(node_label(node, im.opset) + ": operators of domain '" + node.domain() + "' are not supported");
  }
  const auto& table = converters();
  auto it = table.find(node.op_type());
  if (it == table.end()) return unsupported(node_label(node, im.opset) + ": unsupported operator");
  if (im.opset < min_opset_of(node.op_type())) {
    return unsupported(node_label(node, im.opset) + ": the opset " + std::to_string(im.opset) + " form of " +
                       node.op_type() + " is not supported (Kiln supports it from opset " +
                       std::to_string(std::max(min_opset_of(node.op_type()), im.opset)) + ")");
  }
  im.attr_type_error.clear();
  Status s = it->second(im);
  if (!im.attr_type_error.empty()) return invalid_argument(node_label(node, im.opset) + ": " + im.attr_type_error);
  return s;
}

Result<std::vector<Value>> inline_graph(Importer& im, const onnx::GraphProto& body, const std::string& label,
                                        const std::vector<Value>& bound) {
  if (size_t(body.input_size()) != bound.size()) {
    return im.error("the subgraph takes " + std::to_string(body.input_size()) + " inputs, " +
                    std::to_string(bound.size()) + " are given");
  }
  KILN_ASSIGN_OR_RETURN(InlineScope scope, InlineScope::open(im, "subgraphs"));
  for (int i = 0; i < body.input_size(); ++i) {
    const std::string unique = unique_value_name(im, label, body.input(i).name());
    im.values[unique] = bound[size_t(i)];
    im.scopes.back()[body.input(i).name()] = unique;
  }
  for (const onnx::TensorProto& init : body.initializer()) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, tensor_from_proto(init, im.base_dir));
    const std::string unique = unique_value_name(im, label, init.name());
    Value v;
    v.node = im.add_constant(std::move(t), init.name());
    im.values[unique] = v;
    im.scopes.back()[init.name()] = unique;
  }
  for (const onnx::NodeProto& node : body.node()) {
    onnx::NodeProto copy = scoped_copy(im, node, label);
    KILN_RETURN_IF_ERROR(convert_node(im, copy));
  }
  std::vector<Value> results;
  for (const onnx::ValueInfoProto& out : body.output()) {
    auto it = im.values.find(resolve_name(im, out.name()));
    if (it == im.values.end()) return im.error("subgraph output '" + out.name() + "' is never computed");
    results.push_back(it->second);
  }
  return results;
}

// ---- the driver -------------------------------------------------------------------------

namespace {

constexpr const char* kTooLarge = "the model is larger than 2 GiB; keep large weights in external data files";
constexpr const char* kMalformed = "not a valid ONNX model (malformed or truncated protobuf)";

Result<ir::Graph> report(Diagnostics& diags, const std::string& filename, const Status& s) {
  diags.error(SourceLoc{filename, 0, 0}, s.message());
  return s;
}

// The parsed model -> IR. Takes the initializers' bytes out of `model` (no copy).
Result<ir::Graph> import_model(onnx::ModelProto& model, const std::string& filename, const std::string& base_dir,
                               Diagnostics& diags, const ImportOptions& options) {
  const SourceLoc file_loc{filename, 0, 0};
  auto fail = [&](const Status& s) -> Result<ir::Graph> { return report(diags, filename, s); };
  if (!model.has_graph()) return fail(corrupt("the model has no graph"));
  int64_t opset = -1;
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  }
  if (opset < 0) return fail(kiln::unsupported("the model imports no version of the default ONNX opset (operators of other domains are not supported)"));
  if (opset < kMinOpset || opset > kMaxOpset) {
    return fail(kiln::unsupported("opset " + std::to_string(opset) + " is not supported (Kiln imports opsets " +
                                  std::to_string(kFullOpset) + " to " + std::to_string(kMaxOpset) + ")"));
  }
  if (model.ir_version() > kMaxIrVersion) {
    return fail(kiln::unsupported("ir_version " + std::to_string(model.ir_version()) +
                                  " is newer than Kiln reads (up to " + std::to_string(kMaxIrVersion) + ")"));
  }
  const onnx::GraphProto& g = model.graph();
  // Every value is defined once: by an initializer, a graph input (which may repeat an
  // initializer's name, as older exporters write), or one node output.
  {
    std::set<std::string> initializers, defined;
    for (const auto& init : g.initializer())
      if (!initializers.insert(init.name()).second)
        diags.error(file_loc, "initializer '" + init.name() + "' is defined twice");
    defined = initializers;
    std::set<std::string> inputs;
    for (const auto& info : g.input()) {
      if (!inputs.insert(info.name()).second) diags.error(file_loc, "graph input '" + info.name() + "' is listed twice");
      defined.insert(info.name());
    }
    for (const auto& node : g.node())
      for (const auto& out : node.output())
        if (!out.empty() && !defined.insert(out).second)
          diags.error(file_loc, node_label(node, opset) + ": output '" + out + "' is already defined");
    if (diags.has_errors()) return diags.to_status();
  }
  Importer im(filename, base_dir, opset);
  im.graph.name = im.kiln_name(g.name().empty() ? "model" : g.name());

  // Initializers first (older exporters also list them as graph inputs).
  for (onnx::TensorProto& init : *model.mutable_graph()->mutable_initializer()) {
    Result<ir::Tensor> t = take_tensor_from_proto(init, base_dir);
    if (!t.is_ok()) {
      diags.error(file_loc, "initializer '" + init.name() + "': " + t.status().message());
      continue;
    }
    Value v;
    v.node = im.add_constant(std::move(t).value(), init.name());
    im.values[init.name()] = v;
  }
  size_t position = 0;
  for (const auto& info : g.input()) {
    if (im.values.count(info.name())) continue;
    const size_t this_position = position++;
    Result<ir::TensorType> type = value_type(im, info);
    if (!type.is_ok()) {
      diags.error(file_loc, type.status().message());
      continue;
    }
    auto frozen = options.frozen_inputs.find(this_position);
    if (frozen != options.frozen_inputs.end()) {
      const ir::Tensor& t = frozen->second;
      bool matches = t.dtype() == type->dtype && t.rank() == type->rank();
      for (int64_t i = 0; matches && i < t.rank(); ++i) {
        const ir::Dim& d = type->shape[size_t(i)];
        matches = d.is_symbolic() || d.size() == t.shape()[size_t(i)];
      }
      if (!matches) {
        diags.error(file_loc, "input '" + info.name() + "' is " + type->to_string() + ", its frozen value is " +
                                  t.type().to_string());
        continue;
      }
      Value v;
      v.node = im.add_constant(t.clone(), info.name());
      im.values[info.name()] = v;
      continue;
    }
    ir::Node node;
    node.op = ir::OpKind::kInput;
    node.name = im.kiln_name(info.name());
    node.type = *type;
    node.attrs = ir::InputAttrs{int64_t(im.graph.inputs().size())};
    node.loc = file_loc;
    const NodeId id = im.graph.add_node(std::move(node));
    im.graph.inputs().push_back(id);
    Value v;
    v.node = id;
    im.values[info.name()] = v;
  }
  if (diags.has_errors()) return diags.to_status();

  // Every node: an unknown op, an unsupported attribute or a failed conversion is reported and
  // the import continues, so one run lists every offending node.
  im.functions = &model.functions();
  bool failed = false;
  for (const auto& node : g.node()) {
    bool inputs_ready = true;
    for (const auto& name : node.input()) inputs_ready = inputs_ready && (name.empty() || im.values.count(name));
    if (!inputs_ready && failed) continue;  // downstream of a reported node
    Status s = convert_node(im, node);
    if (!s.is_ok()) {
      diags.error(file_loc, s.message());
      failed = true;
    }
  }
  im.current = nullptr;
  if (diags.has_errors()) return diags.to_status();

  for (const auto& out : g.output()) {
    auto it = im.values.find(out.name());
    if (it == im.values.end()) return fail(corrupt("graph output '" + out.name() + "' is never computed"));
    im.current = nullptr;
    ir::NodeId id = it->second.node;
    if (id == ir::kNoNode) {
      onnx::NodeProto fake;
      fake.set_name(out.name());
      fake.set_op_type("Output");
      fake.add_input(out.name());
      im.current = &fake;
      Result<NodeId> r = im.input(0);
      im.current = nullptr;
      if (!r.is_ok()) return fail(r.status());
      id = *r;
    }
    ir::GraphOutput go;
    go.name = sanitize_name(out.name());
    for (int n = 1; std::any_of(im.graph.outputs().begin(), im.graph.outputs().end(),
                                [&](const ir::GraphOutput& o) { return o.name == go.name; });
         ++n) {
      go.name = sanitize_name(out.name()) + "_" + std::to_string(n);
    }
    go.node = id;
    go.declared = im.graph.node(id).type;
    // The declared type, where the model states one, must be what the graph computes.
    if (out.type().has_tensor_type()) {
      const auto& tt = out.type().tensor_type();
      const ir::TensorType& computed = go.declared;
      std::string mismatch;
      const std::optional<ir::DType> dtype = dtype_from_onnx(tt.elem_type());
      if (tt.elem_type() != 0 && dtype && *dtype != computed.dtype)
        mismatch = std::string("element type ") + onnx_type_name(tt.elem_type());
      if (mismatch.empty() && tt.has_shape()) {
        if (tt.shape().dim_size() != computed.rank()) {
          mismatch = "rank " + std::to_string(tt.shape().dim_size());
        } else {
          for (int d = 0; d < tt.shape().dim_size() && mismatch.empty(); ++d) {
            const auto& dim = tt.shape().dim(d);
            const ir::Dim& got = computed.shape[size_t(d)];
            if (dim.has_dim_value() && got.is_static() && got.size() != dim.dim_value())
              mismatch = "size " + std::to_string(dim.dim_value()) + " in dimension " + std::to_string(d);
          }
        }
      }
      if (!mismatch.empty()) {
        return fail(invalid_argument("graph output '" + out.name() + "' is declared with " + mismatch +
                                     ", but the graph computes " + computed.to_string()));
      }
    }
    go.loc = file_loc;
    im.graph.outputs().push_back(std::move(go));
  }
  Status verified = ir::verify_graph(im.graph);
  if (!verified.is_ok()) return fail(internal_error("the imported graph does not verify: " + verified.message()));
  return std::move(im.graph);
}

// A read-only mapping of a model file handed to the protobuf parser in 1 MiB windows. The pages
// of the windows already parsed are dropped from the process (MADV_DONTNEED; they are clean
// file pages, so touching one again would just read it back), so that parsing holds the model's
// bytes once, in the parsed model, instead of also the whole mapping (kilnc's peak memory) and
// without a stream's extra copy through its buffer (import time).
class MappedModelStream final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  MappedModelStream(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool Next(const void** data, int* size) override {
    if (position_ >= size_) return false;
    release_before(position_);
    const size_t n = std::min(kWindow, size_ - position_);
    *data = data_ + position_;
    *size = int(n);
    position_ += n;
    return true;
  }
  void BackUp(int count) override { position_ -= size_t(count); }
  bool Skip(int count) override {
    if (count < 0 || size_t(count) > size_ - position_) {
      position_ = size_;
      return false;
    }
    position_ += size_t(count);
    return true;
  }
  int64_t ByteCount() const override { return int64_t(position_); }

 private:
  static constexpr size_t kWindow = size_t(1) << 20;
  void release_before(size_t position) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t end = position / page * page;
    if (end > released_) {
      (void)madvise(const_cast<uint8_t*>(data_) + released_, end - released_, MADV_DONTNEED);
      released_ = end;
    }
  }
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
  size_t released_ = 0;
};

}  // namespace

Result<ir::Graph> import_onnx_bytes(std::span<const std::byte> bytes, const std::string& filename,
                                    const std::string& base_dir, Diagnostics& diags,
                                    const ImportOptions& options) {
  if (bytes.size() > size_t(std::numeric_limits<int>::max())) return report(diags, filename, corrupt(kTooLarge));
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), int(bytes.size()))) return report(diags, filename, corrupt(kMalformed));
  return import_model(model, filename, base_dir, diags, options);
}

Result<ir::Graph> import_onnx_file(const std::string& path, Diagnostics& diags, const ImportOptions& options) {
  size_t size = 0;
  Result<int> opened = open_regular_file(path, &size);
  if (!opened.is_ok()) {
    diags.error(SourceLoc{path, 0, 0}, opened.status().message());
    return opened.status();
  }
  const int fd = *opened;
  if (size > size_t(std::numeric_limits<int>::max())) {
    close(fd);
    return report(diags, path, corrupt(kTooLarge));
  }
  // Parsed from a read-only mapping of the file (MappedModelStream): the initializers' bytes are
  // copied once, into the parsed model, whose initializers the IR then takes over.
  void* base = size > 0 ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  close(fd);
  if (base == MAP_FAILED) {
    diags.error(SourceLoc{path, 0, 0}, "cannot read the file");
    return invalid_argument("cannot read '" + path + "': " + std::strerror(errno));
  }
  onnx::ModelProto model;
  MappedModelStream stream(static_cast<const uint8_t*>(base), size);
  const bool parsed = model.ParseFromZeroCopyStream(&stream);
  if (base) munmap(base, size);
  if (!parsed) return report(diags, path, corrupt(kMalformed));
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  return import_model(model, path, base_dir, diags, options);
}

}  // namespace kiln::onnx_import
