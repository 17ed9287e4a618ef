// Internals shared by the ONNX importer's files: the import context (value table, node
// builders, attribute readers) and the operator converter tables.
//
// Ownership: an Importer owns the graph under construction; converters borrow it for one node.
// Not thread-safe: one Importer per import.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::onnx_import {

// An ONNX value during import. `node` is its Kiln value; `dims` is set for int64 shape vectors
// known at import time whose entries may be symbolic (from Shape of a dynamic tensor): such a
// value has no Kiln node until it is needed as data (which fails while a dim is symbolic).
struct Value {
  ir::NodeId node = ir::kNoNode;
  std::optional<ir::Shape> dims;
  bool dims_scalar = false;  // a 0-d value (Gather of one index)

  // A shape vector holding a symbolic size (which only import-time shape arithmetic can use).
  bool has_dynamic_dims() const { return dims && !ir::is_static(*dims); }
};

// An ONNX value name as a Kiln IDENT (not made unique).
std::string sanitize_name(std::string_view onnx_name);
// ONNX TensorProto data type -> Kiln dtype (nullopt for types Kiln has no dtype for).
std::optional<ir::DType> dtype_from_onnx(int32_t onnx_type);
const char* onnx_type_name(int32_t onnx_type);
// TensorProto -> Tensor; external data is read relative to base_dir (refused when empty).
Result<ir::Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir);
// The same, but takes the proto's raw_data without copying it (the tensor views the released
// bytes): large initializers are held once in memory.
Result<ir::Tensor> take_tensor_from_proto(onnx::TensorProto& proto, const std::string& base_dir);

class Importer {
 public:
  Importer(std::string filename, std::string base_dir, int64_t opset)
      : filename(std::move(filename)), base_dir(std::move(base_dir)), opset(opset) {}

  ir::Graph graph;
  ir::NameTable names;
  std::string filename;
  std::string base_dir;
  int64_t opset;
  std::unordered_map<std::string, Value> values;
  const onnx::NodeProto* current = nullptr;  // the node being converted
  int64_t next_symbol = 0;
  // The model's local functions (nodes whose domain and op_type name one are inlined), or null.
  const google::protobuf::RepeatedPtrField<onnx::FunctionProto>* functions = nullptr;
  // Name scopes of the subgraphs and function bodies being inlined, innermost last: each maps a
  // name used inside to the unique name its value has in `values`. Names no scope binds are the
  // model graph's own (ONNX lets a subgraph read any value of the scopes around it).
  std::vector<std::unordered_map<std::string, std::string>> scopes;

  // A Kiln IDENT for an ONNX value name, unique in the graph.
  std::string kiln_name(std::string_view onnx_name);
  std::string fresh_symbol();

  // Creates a node, infers its type and, when every input is a constant, folds it into a
  // constant. Inference errors become kInvalidArgument naming the ONNX node.
  Result<ir::NodeId> add(ir::OpKind op, std::vector<ir::NodeId> inputs, ir::Attrs attrs);
  ir::NodeId add_constant(ir::Tensor data, std::string_view base = "c");
  Result<ir::NodeId> scalar(double v, ir::DType dtype);
  Result<ir::NodeId> ints_constant(const std::vector<int64_t>& v);
  // An i64 value of shape [1, .., n, .., 1] (rank `rank`) counting 0..n-1 along `axis`: a
  // constant, or Kiln's iota op when n is symbolic.
  Result<ir::NodeId> iota(ir::Dim n, int64_t axis, int64_t rank);
  Result<ir::NodeId> iota(int64_t n, int64_t axis, int64_t rank) { return iota(ir::Dim::of(n), axis, rank); }
  // `indices` as i64 with the negative ones counted from `extent` (ONNX's index convention).
  Result<ir::NodeId> wrap_negative(ir::NodeId indices, ir::Dim extent);
  Result<ir::NodeId> wrap_negative(ir::NodeId indices, int64_t extent) { return wrap_negative(indices, ir::Dim::of(extent)); }
  // A size as an i64 scalar value: a constant, or computed at run time when symbolic.
  Result<ir::NodeId> size_value(const ir::Dim& d);
  // term * size (see size_value); term itself for a size of 1.
  Result<ir::NodeId> times_size(ir::NodeId term, const ir::Dim& size);
  // The row-major strides of `shape` and its element count, as sizes (products of symbols where
  // the dims are symbolic). Fails when the count overflows.
  Result<std::pair<std::vector<ir::Dim>, ir::Dim>> row_major_strides(const ir::Shape& shape) const;
  const ir::TensorType& type(ir::NodeId id) const { return graph.node(id).type; }
  // The data of a constant value, or nullptr.
  const ir::Tensor* const_data(ir::NodeId id) const;
  Result<std::vector<int64_t>> const_ints(ir::NodeId id, std::string_view what) const;
  Result<ir::NodeId> reshape(ir::NodeId x, ir::Shape shape);

  // Node inputs / outputs.
  int num_inputs() const { return current->input_size(); }
  bool has_input(int i) const { return i < current->input_size() && !current->input(i).empty(); }
  Result<ir::NodeId> input(int i);
  Result<Value> input_value(int i);
  // Integer data of an input (constant or import-time shape vector).
  Result<ir::Shape> input_dims(int i, std::string_view what);
  Result<std::vector<int64_t>> input_ints(int i, std::string_view what);
  Status set_output(int i, ir::NodeId id);
  Status set_output_dims(int i, ir::Shape dims, bool scalar);
  // Fails with kUnsupported when output i (i >= 1) is requested by the model.
  Status only_first_outputs(int count);

  // Attributes.
  // The node's attribute `name`, or null. The typed accessors below take an attribute of the
  // wrong type as absent and remember it in attr_type_error, which the driver reports at the node.
  const onnx::AttributeProto* attr(std::string_view name) const;
  mutable std::string attr_type_error;
  int64_t attr_int(std::string_view name, int64_t fallback) const;
  double attr_float(std::string_view name, double fallback) const;
  std::string attr_string(std::string_view name, std::string fallback) const;
  std::optional<std::vector<int64_t>> attr_ints(std::string_view name) const;
  std::optional<std::vector<double>> attr_floats(std::string_view name) const;
  std::optional<std::vector<std::string>> attr_strings(std::string_view name) const;

  Status error(std::string message) const;        // kInvalidArgument about the current node
  Status unsupported(std::string message) const;  // kUnsupported about the current node

  // A node of `kind` with its default attributes (see add()).
  Result<ir::NodeId> apply(ir::OpKind kind, std::vector<ir::NodeId> inputs) {
    return add(kind, std::move(inputs), ir::default_attrs(kind));
  }
  // x as `dtype` (x itself when it already is).
  Result<ir::NodeId> cast(ir::NodeId x, ir::DType dtype) {
    if (type(x).dtype == dtype) return x;
    return add(ir::OpKind::kCast, {x}, ir::CastAttrs{dtype});
  }
  // A scalar constant of x's dtype.
  Result<ir::NodeId> scalar_like(ir::NodeId x, double v) { return scalar(v, type(x).dtype); }
  // sum + term, or term itself when sum is kNoNode (the first of a sum built term by term).
  Result<ir::NodeId> add_term(ir::NodeId sum, ir::NodeId term) {
    if (sum == ir::kNoNode) return term;
    return apply(ir::OpKind::kAdd, {sum, term});
  }
};

// Converts one node (the converter of its op_type, or the inlined body of a local function) with
// its input names resolved through the importer's scopes. Errors name the node.
Status convert_node(Importer& im, const onnx::NodeProto& node);

// Inlines `body` (a subgraph of If, Loop or Scan) in a new scope: its inputs are bound to
// `bound` (one value each), its initializers become constants, every node is converted under
// fresh unique names (`label` starts them), and the values of its outputs are returned in
// order. Outer values are read by name, as in ONNX. Not reentrant across Importers; nested
// subgraphs nest scopes.
Result<std::vector<Value>> inline_graph(Importer& im, const onnx::GraphProto& body, const std::string& label,
                                        const std::vector<Value>& bound);

// Constants the importer builds itself (masks, ConstantOfShape, Range, zero biases, ...) larger
// than this are refused, so a corrupt or hostile model cannot make the import allocate without
// bound.
inline constexpr int64_t kMaxImportElements = int64_t(1) << 26;
// kUnsupported about the current node when `shape` is not static or has more than
// kMaxImportElements elements; `what` names the constant.
Status check_import_size(const Importer& im, const ir::Shape& shape, std::string_view what);

// An ONNX Conv of x by w (plus bias unless kNoNode), 1-D or 2-D, with the current node's
// window attributes (strides, dilations, pads, auto_pad, group): shared by Conv and the
// quantized convolutions.
Result<ir::NodeId> convolution(Importer& im, ir::NodeId x, ir::NodeId w, ir::NodeId bias);

// x padded along `axis` with `before` and `after` elements (both >= 0) as Pad's `mode` makes
// them: "constant" (copies of the scalar `value`), "edge", "reflect" or "wrap"; shared by Pad
// and the converters that pad their inputs themselves (pooling, 3-D convolution, LRN, ...).
Result<ir::NodeId> pad_axis(Importer& im, ir::NodeId x, ir::NodeId value, const std::string& mode, int64_t axis,
                            int64_t before, int64_t after);

using Converter = std::function<Status(Importer&)>;
// ONNX's Cast of x to `to` (Cast, CastLike, QuantizeLinear). With `saturate` (the attribute's
// default, 1), a conversion to an 8-bit float first clamps x to the type's finite range, so that
// an overflow or an infinity gives the largest value instead of the inf or NaN of Kiln's
// conversion (support/float8.h); NaN stays NaN. Other conversions ignore `saturate`, as ONNX does.
Result<ir::NodeId> onnx_cast(Importer& im, ir::NodeId x, ir::DType to, bool saturate);

// Registers the converters of one op family into `table` (keyed by ONNX op_type).
void register_elementwise_ops(std::map<std::string, Converter>& table);
void register_tensor_ops(std::map<std::string, Converter>& table);
void register_nn_ops(std::map<std::string, Converter>& table);
void register_extra_ops(std::map<std::string, Converter>& table);
void register_norm_ops(std::map<std::string, Converter>& table);
void register_loss_ops(std::map<std::string, Converter>& table);
void register_resize_ops(std::map<std::string, Converter>& table);
void register_attention_ops(std::map<std::string, Converter>& table);
void register_quantization_ops(std::map<std::string, Converter>& table);
void register_roi_ops(std::map<std::string, Converter>& table);
void register_rnn_ops(std::map<std::string, Converter>& table);
void register_grid_ops(std::map<std::string, Converter>& table);
void register_control_flow_ops(std::map<std::string, Converter>& table);
void register_signal_ops(std::map<std::string, Converter>& table);
void register_transformer_ops(std::map<std::string, Converter>& table);

}  // namespace kiln::onnx_import
