// Operator kinds, their typed attribute structs and the operator table (one row per kind).
//
// Every op kind has exactly one attribute struct (NoAttrs for ops without attributes); a node's
// Attrs variant always holds the struct its kind expects (the verifier checks this). Stages read
// per-op facts from the table (op_info); where code must still switch on a kind, the switch
// lists every kind and has no default arm, so -Wswitch flags a new kind there.
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
#include "support/status.h"

namespace kiln::ir {

// Every op kind, in enum order; the X-macro also gives each kind's identifier (op_kind_id).
#define KILN_OP_KINDS(X)                                                                     \
  /* sources: a graph input; a const literal or a param tensor from the weights file */      \
  X(Input) X(Constant)                                                                        \
  /* unary */                                                                                 \
  X(Neg) X(Abs) X(Exp) X(Log) X(Sqrt) X(Rsqrt) X(Reciprocal) X(Tanh) X(Sigmoid) X(Relu)       \
  X(Silu) X(Erf) X(Sin) X(Cos) X(Atan) X(Floor) X(Ceil) X(Round) X(Sign) X(Gelu) X(Not)      \
  X(BitwiseNot)                                                                               \
  /* binary arithmetic */                                                                     \
  X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Maximum) X(Minimum) X(Fmod)                            \
  X(BitwiseAnd) X(BitwiseOr) X(BitwiseXor) X(ShiftLeft) X(ShiftRight)                         \
  /* compare and logic (result bool) */                                                       \
  X(Equal) X(NotEqual) X(Less) X(LessEqual) X(Greater) X(GreaterEqual) X(And) X(Or) X(Xor)    \
  /* select / convert */                                                                      \
  X(Where) X(Cast) X(Clamp)                                                                   \
  /* reductions */                                                                            \
  X(ReduceSum) X(ReduceMean) X(ReduceMax) X(ReduceMin) X(ReduceProd) X(ArgMax)                \
  /* normalization */                                                                         \
  X(Softmax) X(LogSoftmax) X(LayerNorm)                                                       \
  /* linear algebra */                                                                        \
  X(MatMul) X(Attention)                                                                      \
  /* layout */                                                                                \
  X(Reshape) X(Transpose) X(BroadcastTo) X(Slice) X(Concat) X(Gather) X(Iota) X(TopK)         \
  X(Scatter)                                                                                  \
  /* convolution and pooling (NCHW, or NHWC with channels_last) */                                                        \
  X(Conv2d) X(MaxPool2d) X(AvgPool2d) X(GlobalAvgPool2d)

enum class OpKind : uint8_t {
#define KILN_OP_ENUMERATOR(id) k##id,
  KILN_OP_KINDS(KILN_OP_ENUMERATOR)
#undef KILN_OP_ENUMERATOR
};
#define KILN_OP_COUNT(id) +1
inline constexpr int kNumOpKinds = 0 KILN_OP_KINDS(KILN_OP_COUNT);
#undef KILN_OP_COUNT

enum class OpFamily : uint8_t {
  kSource, kUnary, kBinary, kCompare, kLogic, kSelect, kConvert, kReduce, kNormalize,
  kLinalg, kAttention, kLayout, kConv,
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

// transpose(x, perm=[..]); after shape inference `perm` is complete (the reversed axes when
// omitted) and non-negative.
struct TransposeAttrs {
  std::vector<int64_t> perm;
  bool operator==(const TransposeAttrs&) const = default;
};

// attention(q, k, v, mask?, scale=F, causal=B, layout=S): softmax(scale * q @ k^T + mask) @ v
// per query row, the causal form masking keys after the query's position (top-left aligned, as
// PyTorch's is_causal). After shape inference `scale` is set (1/sqrt(head size) when omitted).
// layout "bhsd": q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> [..., Sq, Dv] (any batch
// dims, equal in all three); "bshd": rank 4, q [B, Sq, H, D], k/v [B, Sk, H, D|Dv] ->
// [B, Sq, H, Dv], the layout of a projection before its head-split transpose. The mask
// broadcasts to [batch..., Sq, Sk] ([B, H, Sq, Sk] for bshd).
struct AttentionAttrs {
  std::optional<double> scale;
  bool causal = false;
  bool seq_major = false;  // layout "bshd"
  bool operator==(const AttentionAttrs&) const = default;
};

// An attention's operands seen through its layout: the batch dims ([B, H] for bshd), query and
// key lengths and the head sizes of q/k and of v. attention_shape (ir/infer_shapes.cpp) checks
// that q, k and v agree and says how they do not.
struct AttentionShape {
  Shape batch;
  Dim sq, sk, d, dv;
};
Result<AttentionShape> attention_shape(const Shape& q, const Shape& k, const Shape& v, bool seq_major);
// The largest static head size (D, Dv) the attention kernels take: they keep a query row and
// an output row in registers. The fusing pass only forms attention within it.
inline constexpr int64_t kMaxAttentionHeadSize = 256;

struct BroadcastToAttrs {
  Shape shape;
  bool operator==(const BroadcastToAttrs&) const = default;
};

// iota(shape=[..], axis=I, dtype=DTYPE): a tensor of `shape` (symbolic dims allowed) whose
// element is its coordinate along `axis`, as `dtype` (default i64). Kiln's extension: it is how
// ranges over dynamic sizes (ONNX Range over a sequence length) exist without constants.
// topk(x, k=K, axis=-1, largest=true) -> i64: the indices along `axis` of the k largest (or
// smallest) elements of each row, best first; equal values in index order; NaN ranks above every
// number when largest, below when smallest (its values are a gather of these indices). Kiln's
// extension, for ONNX TopK.
struct TopKAttrs {
  int64_t k = 1;
  int64_t axis = -1;
  bool largest = true;
  bool operator==(const TopKAttrs&) const = default;
};

// scatter(data, indices, updates, axis=0, reduction="none"): data, with every element of
// `updates` (taken in row-major order) combined into the element whose coordinates are the
// update's, except along `axis`, where they are the update's entry of `indices` (a negative
// index counts from the end once; one still outside the data is dropped, on every device).
// reduction "none" replaces (the last of several updates of one element wins), "add", "mul",
// "max" and "min" combine (max and min propagate NaN, as maximum and minimum do). `indices` (i32
// or i64) has the shape of `updates` and both have the data's rank; their extents may differ
// from the data's. Kiln's extension, for ONNX ScatterElements and ScatterND.
enum class ScatterReduction : uint8_t { kNone, kAdd, kMul, kMax, kMin };
std::string_view scatter_reduction_name(ScatterReduction r);
std::optional<ScatterReduction> parse_scatter_reduction(std::string_view name);
// The binary op a reduction combines with (add, mul, maximum, minimum); nullopt for kNone.
std::optional<OpKind> scatter_combine_op(ScatterReduction r);

struct ScatterAttrs {
  int64_t axis = 0;
  ScatterReduction reduction = ScatterReduction::kNone;
  bool operator==(const ScatterAttrs&) const = default;
};

struct IotaAttrs {
  Shape shape;
  int64_t axis = 0;
  DType dtype = DType::kI64;
  bool operator==(const IotaAttrs&) const = default;
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

// The axes of a 4-D image tensor: NCHW (the format's default) or NHWC (channels_last=true,
// which the channels-last pass introduces for tensor-core convolutions). A conv2d's weights
// follow its layout with (out channels, in channels per group) in the (n, c) roles:
// [O, C/groups, KH, KW] in NCHW, [O, KH, KW, C/groups] in NHWC.
struct ImageAxes {
  size_t n, c, h, w;
};
constexpr ImageAxes image_axes(bool channels_last) {
  return channels_last ? ImageAxes{0, 3, 1, 2} : ImageAxes{0, 1, 2, 3};
}

struct Conv2dAttrs {
  std::array<int64_t, 2> strides = {1, 1};
  std::array<int64_t, 4> pads = {0, 0, 0, 0};  // top, left, bottom, right
  std::array<int64_t, 2> dilations = {1, 1};
  int64_t groups = 1;
  bool channels_last = false;  // NHWC input, output and weights (ImageAxes)
  bool operator==(const Conv2dAttrs&) const = default;
};

// max_pool2d / avg_pool2d. strides default to [1, 1] (as in ONNX); count_include_pad only
// matters for avg_pool2d.
struct Pool2dAttrs {
  std::array<int64_t, 2> kernel = {1, 1};
  std::array<int64_t, 2> strides = {1, 1};
  std::array<int64_t, 4> pads = {0, 0, 0, 0};  // top, left, bottom, right
  bool count_include_pad = false;
  bool channels_last = false;  // NHWC input and output (ImageAxes)
  bool operator==(const Pool2dAttrs&) const = default;
};

using Attrs = std::variant<NoAttrs, InputAttrs, ConstantAttrs, GeluAttrs, CastAttrs, ClampAttrs,
                           ReduceAttrs, ArgMaxAttrs, AxisAttrs, LayerNormAttrs, ReshapeAttrs,
                           TransposeAttrs, BroadcastToAttrs, SliceAttrs, Conv2dAttrs, Pool2dAttrs,
                           AttentionAttrs, IotaAttrs, TopKAttrs, ScatterAttrs>;

// ---- the operator table ---------------------------------------------------------------------
//
// One row per OpKind (ir/ops.cpp) holds every per-op fact that the compiler's stages read:
// spelling and arity (parser, printer, verifier), the attribute struct with its spec defaults
// and required attributes (parser), the shape/type rule (inference), the fusion class (fuse
// pass), the reference-interpreter function and, for elementwise ops, the scalar functions and
// the C-family expression templates that the interpreter and code generation expand. Family-wide
// behaviour (how a reduction kernel is laid out, how elementwise operands are broadcast) lives
// with the stage; only what differs per op is here. docs/contributing.md shows how to add an op.

// How the fuse pass treats an op (docs/fusion.md).
enum class FusionClass : uint8_t {
  kSource,          // input / const: read from memory, never computed in a kernel
  kCheap,           // elementwise, about one ALU instruction: fused, and recomputed in each
                    // consumer kernel when shared (instead of materialized)
  kElementwise,     // elementwise with transcendentals: fused, never recomputed
  kPrologueAnchor,  // reductions and normalizations: a kernel built around them takes an
                    // elementwise prologue on operand 0 and an elementwise epilogue
  kEpilogueAnchor,  // matmul, conv2d: operands read from memory, takes an elementwise epilogue
  kOwnKernel,       // layout ops and pooling: a kernel of their own, operands from memory
};

// The operand dtypes an op accepts (checked by inference, with one message per class).
enum class DTypeClass : uint8_t {
  kAny,            // every dtype
  kNumeric,        // not bool
  kFloat,          // f32, f16, bf16 and the 8-bit floats
  kFloatOrSigned,  // floats and signed integers
  kInteger,        // signed and unsigned integers
  kBool,           // bool only
};

// Scalar semantics of an elementwise op for the reference interpreter. Unary rows fill unary_f
// (and unary_i when the op has an exact integer form: integer operands then stay integers);
// binary, compare and logic rows fill binary_f / binary_i (compare and logic return 0 or 1;
// logic receives 0/1 operands). Where, cast and clamp are evaluated by their family's code.
struct ScalarFns {
  double (*unary_f)(double x, const Attrs& attrs) = nullptr;
  int64_t (*unary_i)(int64_t x) = nullptr;
  double (*binary_f)(double a, double b) = nullptr;
  int64_t (*binary_i)(int64_t a, int64_t b) = nullptr;
  // Instead of binary_i, for integer ops whose result depends on the dtype's width (shifts):
  // `bits` is the width of the operands' dtype (8 for i8 and u8, ...).
  int64_t (*binary_bits)(int64_t a, int64_t b, int bits) = nullptr;
};

// C-family expression templates of an elementwise op (OpenCL C, GLSL and CUDA C share them;
// codegen/c_family.cpp expands them). Placeholders: {0} {1} {2} the operands, already converted
// to the op's number kind (logic ops: already truth-tested); {k} the integer helper suffix ("i"
// for 32-bit, "l" for 64-bit: k_add_{k}); {lit:V} the literal V in the op's number kind; {bits}
// the bit width of the result's dtype (an integer literal).
// A dialect override replaces float_form in that dialect only (empty: the shared form). The
// functions behind k_* names are defined once per dialect in codegen/c_family_prelude.cpp.
struct CExpr {
  std::string_view float_form = {};  // computes in float (f32 registers for every float dtype)
  std::string_view int_form = {};    // computes in the operands' integer kind; empty: none
  bool bool_result = false;     // yields an int 0/1 (not, compare, logic)
  // For ops whose float form depends on attributes (gelu's approximation); null: float_form.
  std::string_view (*float_form_for)(const Attrs& attrs) = nullptr;
  std::string_view cuda_float_form = {}, opencl_float_form = {}, glsl_float_form = {};  // overrides
};

// Reductions (reduce_* rows): the interpreter's accumulation and what a kernel combines with.
// The interpreter accumulates floats in its compute type (double, or f32 in the device-faithful
// mode, rounding each combine_f result) or exactly in int64; a kernel combines partial results
// with the C expression of the binary op `combine` (add, mul, maximum, minimum), starting from
// the template c_identity ({lit:V}, {lowest} or {highest} of the number kind).
struct ReduceFns {
  double identity_f = 0;
  double (*combine_f)(double acc, double x) = nullptr;
  int64_t identity_i = 0;
  int64_t (*combine_i)(int64_t acc, int64_t x) = nullptr;
  bool mean = false;            // the sum divided by the element count
  bool needs_elements = false;  // no identity: reducing zero elements is an error
  OpKind combine = OpKind::kAdd;
  std::string_view c_identity = {};
};

namespace interp {
struct EvalContext;
}
class Tensor;

// The shape/type rule: operand types in, result type out. `attrs` is the node's attribute copy,
// which the rule may normalize (reduce axes, slice defaults); it is written back on success.
using InferFn = Result<TensorType> (*)(OpKind op, const std::vector<TensorType>& operands, Attrs& attrs);
// The reference interpreter's evaluator for the op (ir/interp_*.cpp).
using EvalFn = Result<Tensor> (*)(const interp::EvalContext& ctx);

struct OpInfo {
  OpKind kind;
  std::string_view name;  // the .graph spelling ("reduce_sum"); "input"/"const" for sources
  OpFamily family;
  int min_inputs;
  int max_inputs;         // -1: variadic (concat)
  FusionClass fusion;
  DTypeClass operand_dtypes;  // what the data operands may be (elementwise and reduce rules)
  Attrs (*default_attrs)();   // the attribute struct a new node starts with (spec defaults)
  std::array<std::string_view, 2> required_attrs;  // attributes the .graph text must give
  InferFn infer;              // null for sources (their type is declared)
  EvalFn eval;                // null for sources (bound or stored, not evaluated)
  ScalarFns scalar;           // elementwise rows
  CExpr expr;                 // elementwise rows whose family uses templates
  ReduceFns reduce;           // reduce_* rows
  // Output element i depends only on input elements at i (after broadcasting).
  bool elementwise() const { return fusion == FusionClass::kCheap || fusion == FusionClass::kElementwise; }
};

const OpInfo& op_info(OpKind kind);
std::string_view op_name(OpKind kind);
// The OpKind enumerator's name without its k prefix ("ReduceSum"): the name the artifact's op
// enum (artifact/kiln.fbs) uses for the same op.
std::string_view op_kind_id(OpKind kind);
// Looks up a user-callable operator by its .graph name (not input/const/param).
std::optional<OpKind> parse_op_name(std::string_view name);
// The attribute struct a freshly created node of this kind starts with (spec defaults).
inline Attrs default_attrs(OpKind kind) { return op_info(kind).default_attrs(); }

inline bool is_elementwise(OpKind k) { return op_info(k).elementwise(); }
inline bool is_reduction(OpKind k) { return op_info(k).family == OpFamily::kReduce; }

}  // namespace kiln::ir
