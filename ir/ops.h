// Operator kinds and their typed attribute structs.
//
// Every op kind has exactly one attribute struct (NoAttrs for ops without attributes); a node's
// Attrs variant always holds the struct its kind expects (the verifier checks this). Passes and
// backends read attributes with std::get<...> after switching on the kind (-Wswitch keeps the
// switches complete).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace kiln::ir {

enum class OpKind : uint8_t {
  // sources
  kInput,     // a graph input
  kConstant,  // a const literal or a param tensor from the weights file
  // unary
  kNeg, kAbs, kExp, kLog, kSqrt, kRsqrt, kReciprocal, kTanh, kSigmoid, kRelu, kSilu, kErf,
  kSin, kCos, kFloor, kCeil, kRound, kSign, kGelu, kNot,
  // binary arithmetic
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum,
  // compare and logic (result bool)
  kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kAnd, kOr, kXor,
  // select / convert
  kWhere, kCast, kClamp,
  // reductions
  kReduceSum, kReduceMean, kReduceMax, kReduceMin, kReduceProd, kArgMax,
  // normalization
  kSoftmax, kLogSoftmax, kLayerNorm,
  // linear algebra
  kMatMul,
  // layout
  kReshape, kTranspose, kBroadcastTo, kSlice, kConcat, kGather,
  // convolution and pooling (NCHW)
  kConv2d, kMaxPool2d, kAvgPool2d, kGlobalAvgPool2d,
};
inline constexpr int kNumOpKinds = int(OpKind::kGlobalAvgPool2d) + 1;

enum class OpFamily : uint8_t {
  kSource, kUnary, kBinary, kCompare, kLogic, kSelect, kConvert, kReduce, kNormalize,
  kLinalg, kLayout, kConv,
};

// ---- attribute structs -------------------------------------------------------------------

struct NoAttrs {
  bool operator==(const NoAttrs&) const = default;
};

// kInput: position in the graph signature.
struct InputAttrs {
  int64_t index = 0;
  bool operator==(const InputAttrs&) const = default;
};

// kConstant: the data lives in Graph::constants()[constant_index]. weight_name is the
// safetensors key for `param` tensors (empty for `const` literals and folded constants).
struct ConstantAttrs {
  uint32_t constant_index = 0;
  std::string weight_name;
  bool operator==(const ConstantAttrs&) const = default;
};

struct GeluAttrs {
  bool tanh_approximation = false;  // approximate="tanh" (default "none": exact erf form)
  bool operator==(const GeluAttrs&) const = default;
};

struct CastAttrs {
  DType to = DType::kF32;
  bool operator==(const CastAttrs&) const = default;
};

// clamp(x, min=F, max=F); a missing bound does not clamp.
struct ClampAttrs {
  std::optional<double> min;
  std::optional<double> max;
  bool operator==(const ClampAttrs&) const = default;
};

// reduce_*(x, axes=[..], keepdims=false). After shape inference `axes` is normalized:
// non-negative, sorted, unique, and filled with every axis when the user omitted it.
struct ReduceAttrs {
  std::vector<int64_t> axes;
  bool all_axes = false;  // axes was omitted in the source (printed back without axes=)
  bool keepdims = false;
  bool operator==(const ReduceAttrs&) const = default;
};

struct ArgMaxAttrs {
  int64_t axis = 0;
  bool keepdims = false;
  bool operator==(const ArgMaxAttrs&) const = default;
};

// softmax / log_softmax (axis) ; concat (axis) ; gather (axis, default 0).
struct AxisAttrs {
  int64_t axis = -1;
  bool operator==(const AxisAttrs&) const = default;
};

struct LayerNormAttrs {
  int64_t axis = -1;
  double epsilon = 1e-5;
  bool operator==(const LayerNormAttrs&) const = default;
};

// reshape(x, shape=[..]): a static dim of -1 is the one inferred dim; symbolic dims allowed.
struct ReshapeAttrs {
  Shape shape;
  bool operator==(const ReshapeAttrs&) const = default;
};

struct TransposeAttrs {
  std::vector<int64_t> perm;
  bool operator==(const TransposeAttrs&) const = default;
};

struct BroadcastToAttrs {
  Shape shape;
  bool operator==(const BroadcastToAttrs&) const = default;
};

// slice(x, starts, ends, axes, steps); axes defaults to 0..n-1 and steps to 1 (filled in by
// shape inference). Out-of-range starts/ends clamp like Python slicing.
struct SliceAttrs {
  std::vector<int64_t> starts;
  std::vector<int64_t> ends;
  std::vector<int64_t> axes;
  std::vector<int64_t> steps;
  bool operator==(const SliceAttrs&) const = default;
};

struct Conv2dAttrs {
  std::array<int64_t, 2> strides = {1, 1};
  std::array<int64_t, 4> pads = {0, 0, 0, 0};  // top, left, bottom, right
  std::array<int64_t, 2> dilations = {1, 1};
  int64_t groups = 1;
  bool operator==(const Conv2dAttrs&) const = default;
};

// max_pool2d / avg_pool2d. strides default to [1, 1] (as in ONNX); count_include_pad only
// matters for avg_pool2d.
struct Pool2dAttrs {
  std::array<int64_t, 2> kernel = {1, 1};
  std::array<int64_t, 2> strides = {1, 1};
  std::array<int64_t, 4> pads = {0, 0, 0, 0};  // top, left, bottom, right
  bool count_include_pad = false;
  bool operator==(const Pool2dAttrs&) const = default;
};

using Attrs = std::variant<NoAttrs, InputAttrs, ConstantAttrs, GeluAttrs, CastAttrs, ClampAttrs,
                           ReduceAttrs, ArgMaxAttrs, AxisAttrs, LayerNormAttrs, ReshapeAttrs,
                           TransposeAttrs, BroadcastToAttrs, SliceAttrs, Conv2dAttrs, Pool2dAttrs>;

// ---- per-kind metadata -------------------------------------------------------------------

struct OpInfo {
  OpKind kind;
  std::string_view name;  // the .graph spelling ("reduce_sum"); "input"/"const" for sources
  OpFamily family;
  int min_inputs;
  int max_inputs;         // -1: variadic (concat)
  bool elementwise;       // output element i depends only on input elements at i (after broadcast)
};

const OpInfo& op_info(OpKind kind);
std::string_view op_name(OpKind kind);
// Looks up a user-callable operator by its .graph name (not input/const/param).
std::optional<OpKind> parse_op_name(std::string_view name);
// The attribute struct a freshly created node of this kind starts with (spec defaults).
Attrs default_attrs(OpKind kind);

inline bool is_elementwise(OpKind k) { return op_info(k).elementwise; }
inline bool is_reduction(OpKind k) { return op_info(k).family == OpFamily::kReduce; }

}  // namespace kiln::ir
