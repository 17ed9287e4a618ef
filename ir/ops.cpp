#include "ir/ops.h"

#include <array>

#include "support/check.h"

namespace kiln::ir {
namespace {

using F = OpFamily;
using K = OpKind;

// One row per OpKind, in enum order (checked at start-up by op_info).
constexpr OpInfo kOpTable[] = {
    {K::kInput, "input", F::kSource, 0, 0, false},
    {K::kConstant, "const", F::kSource, 0, 0, false},
    {K::kNeg, "neg", F::kUnary, 1, 1, true},
    {K::kAbs, "abs", F::kUnary, 1, 1, true},
    {K::kExp, "exp", F::kUnary, 1, 1, true},
    {K::kLog, "log", F::kUnary, 1, 1, true},
    {K::kSqrt, "sqrt", F::kUnary, 1, 1, true},
    {K::kRsqrt, "rsqrt", F::kUnary, 1, 1, true},
    {K::kReciprocal, "reciprocal", F::kUnary, 1, 1, true},
    {K::kTanh, "tanh", F::kUnary, 1, 1, true},
    {K::kSigmoid, "sigmoid", F::kUnary, 1, 1, true},
    {K::kRelu, "relu", F::kUnary, 1, 1, true},
    {K::kSilu, "silu", F::kUnary, 1, 1, true},
    {K::kErf, "erf", F::kUnary, 1, 1, true},
    {K::kSin, "sin", F::kUnary, 1, 1, true},
    {K::kCos, "cos", F::kUnary, 1, 1, true},
    {K::kFloor, "floor", F::kUnary, 1, 1, true},
    {K::kCeil, "ceil", F::kUnary, 1, 1, true},
    {K::kRound, "round", F::kUnary, 1, 1, true},
    {K::kSign, "sign", F::kUnary, 1, 1, true},
    {K::kGelu, "gelu", F::kUnary, 1, 1, true},
    {K::kNot, "not", F::kUnary, 1, 1, true},
    {K::kAdd, "add", F::kBinary, 2, 2, true},
    {K::kSub, "sub", F::kBinary, 2, 2, true},
    {K::kMul, "mul", F::kBinary, 2, 2, true},
    {K::kDiv, "div", F::kBinary, 2, 2, true},
    {K::kPow, "pow", F::kBinary, 2, 2, true},
    {K::kMaximum, "maximum", F::kBinary, 2, 2, true},
    {K::kMinimum, "minimum", F::kBinary, 2, 2, true},
    {K::kEqual, "equal", F::kCompare, 2, 2, true},
    {K::kNotEqual, "not_equal", F::kCompare, 2, 2, true},
    {K::kLess, "less", F::kCompare, 2, 2, true},
    {K::kLessEqual, "less_equal", F::kCompare, 2, 2, true},
    {K::kGreater, "greater", F::kCompare, 2, 2, true},
    {K::kGreaterEqual, "greater_equal", F::kCompare, 2, 2, true},
    {K::kAnd, "and", F::kLogic, 2, 2, true},
    {K::kOr, "or", F::kLogic, 2, 2, true},
    {K::kXor, "xor", F::kLogic, 2, 2, true},
    {K::kWhere, "where", F::kSelect, 3, 3, true},
    {K::kCast, "cast", F::kConvert, 1, 1, true},
    {K::kClamp, "clamp", F::kConvert, 1, 1, true},
    {K::kReduceSum, "reduce_sum", F::kReduce, 1, 1, false},
    {K::kReduceMean, "reduce_mean", F::kReduce, 1, 1, false},
    {K::kReduceMax, "reduce_max", F::kReduce, 1, 1, false},
    {K::kReduceMin, "reduce_min", F::kReduce, 1, 1, false},
    {K::kReduceProd, "reduce_prod", F::kReduce, 1, 1, false},
    {K::kArgMax, "argmax", F::kReduce, 1, 1, false},
    {K::kSoftmax, "softmax", F::kNormalize, 1, 1, false},
    {K::kLogSoftmax, "log_softmax", F::kNormalize, 1, 1, false},
    {K::kLayerNorm, "layer_norm", F::kNormalize, 3, 3, false},
    {K::kMatMul, "matmul", F::kLinalg, 2, 2, false},
    {K::kReshape, "reshape", F::kLayout, 1, 1, false},
    {K::kTranspose, "transpose", F::kLayout, 1, 1, false},
    {K::kBroadcastTo, "broadcast_to", F::kLayout, 1, 1, false},
    {K::kSlice, "slice", F::kLayout, 1, 1, false},
    {K::kConcat, "concat", F::kLayout, 1, -1, false},
    {K::kGather, "gather", F::kLayout, 2, 2, false},
    {K::kConv2d, "conv2d", F::kConv, 2, 3, false},
    {K::kMaxPool2d, "max_pool2d", F::kConv, 1, 1, false},
    {K::kAvgPool2d, "avg_pool2d", F::kConv, 1, 1, false},
    {K::kGlobalAvgPool2d, "global_avg_pool2d", F::kConv, 1, 1, false},
};
static_assert(std::size(kOpTable) == size_t(kNumOpKinds), "kOpTable must list every OpKind");

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < std::size(kOpTable); ++i) {
    if (size_t(kOpTable[i].kind) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "kOpTable rows must follow OpKind order");

}  // namespace

const OpInfo& op_info(OpKind kind) {
  size_t index = size_t(kind);
  KILN_CHECK(index < std::size(kOpTable), "OpKind out of range");
  return kOpTable[index];
}

std::string_view op_name(OpKind kind) { return op_info(kind).name; }

std::optional<OpKind> parse_op_name(std::string_view name) {
  for (const OpInfo& info : kOpTable) {
    if (info.family != OpFamily::kSource && info.name == name) return info.kind;
  }
  return std::nullopt;
}

Attrs default_attrs(OpKind kind) {
  switch (kind) {
    case K::kInput: return InputAttrs{};
    case K::kConstant: return ConstantAttrs{};
    case K::kGelu: return GeluAttrs{};
    case K::kCast: return CastAttrs{};
    case K::kClamp: return ClampAttrs{};
    case K::kReduceSum:
    case K::kReduceMean:
    case K::kReduceMax:
    case K::kReduceMin:
    case K::kReduceProd: return ReduceAttrs{.axes = {}, .all_axes = true, .keepdims = false};
    case K::kArgMax: return ArgMaxAttrs{};
    case K::kSoftmax:
    case K::kLogSoftmax: return AxisAttrs{.axis = -1};
    case K::kConcat: return AxisAttrs{.axis = 0};
    case K::kGather: return AxisAttrs{.axis = 0};
    case K::kLayerNorm: return LayerNormAttrs{};
    case K::kReshape: return ReshapeAttrs{};
    case K::kTranspose: return TransposeAttrs{};
    case K::kBroadcastTo: return BroadcastToAttrs{};
    case K::kSlice: return SliceAttrs{};
    case K::kConv2d: return Conv2dAttrs{};
    case K::kMaxPool2d:
    case K::kAvgPool2d: return Pool2dAttrs{};
    case K::kNeg: case K::kAbs: case K::kExp: case K::kLog: case K::kSqrt: case K::kRsqrt:
    case K::kReciprocal: case K::kTanh: case K::kSigmoid: case K::kRelu: case K::kSilu:
    case K::kErf: case K::kSin: case K::kCos: case K::kFloor: case K::kCeil: case K::kRound:
    case K::kSign: case K::kNot: case K::kAdd: case K::kSub: case K::kMul: case K::kDiv:
    case K::kPow: case K::kMaximum: case K::kMinimum: case K::kEqual: case K::kNotEqual:
    case K::kLess: case K::kLessEqual: case K::kGreater: case K::kGreaterEqual: case K::kAnd:
    case K::kOr: case K::kXor: case K::kWhere: case K::kMatMul: case K::kGlobalAvgPool2d:
      return NoAttrs{};
  }
  return NoAttrs{};
}

}  // namespace kiln::ir
