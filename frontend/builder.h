// GraphBuilder: builds the same ir::Graph a .graph file describes, from C++.
//
//   GraphBuilder b("mlp");
//   Value x = b.input("x", ir::DType::kF32, {ir::Dim::symbol("N"), ir::Dim::of(784)});
//   Value h = b.matmul(x, b.constant(w1));
//   Value y = b.softmax(b.add(h, b.constant(b1)), -1);
//   b.output("probs", y);
//   Result<ir::Graph> g = std::move(b).finish();
//
// Every op is shape-checked (ir::infer_node) as it is added. Errors do not throw: they
// accumulate, the failed value becomes invalid, values computed from it fail silently (no
// cascades), and finish() returns the errors as one Status naming each failed node and its op.
// Nodes are named "<op>.<n>" unless given a name (op(..., name), named(), output()).
//
// Not thread-safe: one builder per thread. A Value belongs to the builder that made it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::frontend {

// A handle to a value (node) of a GraphBuilder. Default-constructed or failed values are invalid.
struct Value {
  ir::NodeId id = ir::kNoNode;
  bool valid() const { return id != ir::kNoNode; }
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name);

  // ---- sources ----
  Value input(const std::string& name, ir::DType dtype, ir::Shape shape);
  // A constant holding `data` (shared, not copied). `weight_name` marks it as a weight (the
  // safetensors key) so the printer writes it as `param`.
  Value constant(ir::Tensor data, const std::string& name = "", const std::string& weight_name = "");
  // A rank-0 constant of `dtype` (floats rounded, integers truncated, bool: value != 0).
  Value scalar(double value, ir::DType dtype = ir::DType::kF32);
  // A constant of the given static shape with every element `value`.
  Value full(double value, ir::DType dtype, std::vector<int64_t> shape);

  // ---- any op ----
  Value op(ir::OpKind kind, const std::vector<Value>& inputs, ir::Attrs attrs, const std::string& name = "");
  Value op(ir::OpKind kind, const std::vector<Value>& inputs);  // default attributes

  // ---- unary ----
  Value neg(Value x) { return op(ir::OpKind::kNeg, {x}); }
  Value abs(Value x) { return op(ir::OpKind::kAbs, {x}); }
  Value exp(Value x) { return op(ir::OpKind::kExp, {x}); }
  Value log(Value x) { return op(ir::OpKind::kLog, {x}); }
  Value sqrt(Value x) { return op(ir::OpKind::kSqrt, {x}); }
  Value rsqrt(Value x) { return op(ir::OpKind::kRsqrt, {x}); }
  Value reciprocal(Value x) { return op(ir::OpKind::kReciprocal, {x}); }
  Value tanh(Value x) { return op(ir::OpKind::kTanh, {x}); }
  Value sigmoid(Value x) { return op(ir::OpKind::kSigmoid, {x}); }
  Value relu(Value x) { return op(ir::OpKind::kRelu, {x}); }
  Value silu(Value x) { return op(ir::OpKind::kSilu, {x}); }
  Value erf(Value x) { return op(ir::OpKind::kErf, {x}); }
  Value sin(Value x) { return op(ir::OpKind::kSin, {x}); }
  Value cos(Value x) { return op(ir::OpKind::kCos, {x}); }
  Value atan(Value x) { return op(ir::OpKind::kAtan, {x}); }
  Value floor(Value x) { return op(ir::OpKind::kFloor, {x}); }
  Value ceil(Value x) { return op(ir::OpKind::kCeil, {x}); }
  Value round(Value x) { return op(ir::OpKind::kRound, {x}); }
  Value sign(Value x) { return op(ir::OpKind::kSign, {x}); }
  Value gelu(Value x, bool tanh_approximation = false) {
    return op(ir::OpKind::kGelu, {x}, ir::GeluAttrs{tanh_approximation});
  }
  Value logical_not(Value x) { return op(ir::OpKind::kNot, {x}); }

  // ---- binary, compare, logic ----
  Value add(Value a, Value b) { return op(ir::OpKind::kAdd, {a, b}); }
  Value sub(Value a, Value b) { return op(ir::OpKind::kSub, {a, b}); }
  Value mul(Value a, Value b) { return op(ir::OpKind::kMul, {a, b}); }
  Value div(Value a, Value b) { return op(ir::OpKind::kDiv, {a, b}); }
  Value pow(Value a, Value b) { return op(ir::OpKind::kPow, {a, b}); }
  Value maximum(Value a, Value b) { return op(ir::OpKind::kMaximum, {a, b}); }
  Value minimum(Value a, Value b) { return op(ir::OpKind::kMinimum, {a, b}); }
  Value equal(Value a, Value b) { return op(ir::OpKind::kEqual, {a, b}); }
  Value not_equal(Value a, Value b) { return op(ir::OpKind::kNotEqual, {a, b}); }
  Value less(Value a, Value b) { return op(ir::OpKind::kLess, {a, b}); }
  Value less_equal(Value a, Value b) { return op(ir::OpKind::kLessEqual, {a, b}); }
  Value greater(Value a, Value b) { return op(ir::OpKind::kGreater, {a, b}); }
  Value greater_equal(Value a, Value b) { return op(ir::OpKind::kGreaterEqual, {a, b}); }
  Value logical_and(Value a, Value b) { return op(ir::OpKind::kAnd, {a, b}); }
  Value logical_or(Value a, Value b) { return op(ir::OpKind::kOr, {a, b}); }
  Value logical_xor(Value a, Value b) { return op(ir::OpKind::kXor, {a, b}); }

  // ---- select / convert ----
  Value where(Value cond, Value a, Value b) { return op(ir::OpKind::kWhere, {cond, a, b}); }
  Value cast(Value x, ir::DType to) { return op(ir::OpKind::kCast, {x}, ir::CastAttrs{to}); }
  Value clamp(Value x, std::optional<double> min, std::optional<double> max) {
    return op(ir::OpKind::kClamp, {x}, ir::ClampAttrs{min, max});
  }

  // ---- reductions (an empty axes list reduces over every axis) ----
  Value reduce_sum(Value x, std::vector<int64_t> axes = {}, bool keepdims = false);
  Value reduce_mean(Value x, std::vector<int64_t> axes = {}, bool keepdims = false);
  Value reduce_max(Value x, std::vector<int64_t> axes = {}, bool keepdims = false);
  Value reduce_min(Value x, std::vector<int64_t> axes = {}, bool keepdims = false);
  Value reduce_prod(Value x, std::vector<int64_t> axes = {}, bool keepdims = false);
  Value argmax(Value x, int64_t axis = 0, bool keepdims = false) {
    return op(ir::OpKind::kArgMax, {x}, ir::ArgMaxAttrs{axis, keepdims});
  }

  // ---- normalization ----
  Value softmax(Value x, int64_t axis = -1) { return op(ir::OpKind::kSoftmax, {x}, ir::AxisAttrs{axis}); }
  Value log_softmax(Value x, int64_t axis = -1) { return op(ir::OpKind::kLogSoftmax, {x}, ir::AxisAttrs{axis}); }
  Value layer_norm(Value x, Value scale, Value bias, int64_t axis = -1, double epsilon = 1e-5) {
    return op(ir::OpKind::kLayerNorm, {x, scale, bias}, ir::LayerNormAttrs{axis, epsilon});
  }

  // ---- linear algebra and layout ----
  Value matmul(Value a, Value b) { return op(ir::OpKind::kMatMul, {a, b}); }
  Value reshape(Value x, ir::Shape shape) { return op(ir::OpKind::kReshape, {x}, ir::ReshapeAttrs{std::move(shape)}); }
  Value transpose(Value x, std::vector<int64_t> perm) {
    return op(ir::OpKind::kTranspose, {x}, ir::TransposeAttrs{std::move(perm)});
  }
  Value broadcast_to(Value x, ir::Shape shape) {
    return op(ir::OpKind::kBroadcastTo, {x}, ir::BroadcastToAttrs{std::move(shape)});
  }
  Value slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes = {},
              std::vector<int64_t> steps = {}) {
    return op(ir::OpKind::kSlice, {x},
              ir::SliceAttrs{std::move(starts), std::move(ends), std::move(axes), std::move(steps)});
  }
  Value concat(const std::vector<Value>& values, int64_t axis) {
    return op(ir::OpKind::kConcat, values, ir::AxisAttrs{axis});
  }
  Value gather(Value x, Value indices, int64_t axis = 0) {
    return op(ir::OpKind::kGather, {x, indices}, ir::AxisAttrs{axis});
  }

  // ---- convolution and pooling (NCHW) ----
  Value conv2d(Value x, Value w, std::optional<Value> bias = std::nullopt, ir::Conv2dAttrs attrs = {});
  Value max_pool2d(Value x, ir::Pool2dAttrs attrs) { return op(ir::OpKind::kMaxPool2d, {x}, attrs); }
  Value avg_pool2d(Value x, ir::Pool2dAttrs attrs) { return op(ir::OpKind::kAvgPool2d, {x}, attrs); }
  Value global_avg_pool2d(Value x) { return op(ir::OpKind::kGlobalAvgPool2d, {x}); }

  // ---- naming and outputs ----
  // Renames a value (the name must be unused). Returns the value for chaining.
  Value named(Value v, const std::string& name);
  // Declares a graph output. The value takes the output's name (as in .graph files, where
  // outputs name values); a value that already has a user-given name must match it.
  void output(const std::string& name, Value v);

  // The type of a valid value (nullptr for invalid values).
  const ir::TensorType* type_of(Value v) const;
  bool ok() const { return errors_.empty(); }
  const std::vector<std::string>& errors() const { return errors_; }

  // The graph, or every error recorded (one per line in the message).
  Result<ir::Graph> finish() &&;

 private:
  Value reduce(ir::OpKind kind, Value x, std::vector<int64_t> axes, bool keepdims);
  Value add_node(ir::Node node);
  void record(std::string message);
  bool check_operand(Value v, ir::OpKind kind, size_t position);

  ir::Graph graph_;
  ir::NameTable names_;
  std::vector<bool> user_named_;  // per node: the name was chosen by the user
  std::vector<std::string> errors_;
};

}  // namespace kiln::frontend
