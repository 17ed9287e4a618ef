// The operator table: one row per OpKind with every per-op fact (see ir/ops.h for the columns).
//
// Adding an op: an X(...) entry in KILN_OP_KINDS (ir/ops.h), its row here (rows follow the enum
// order; a static_assert checks it), its value in the artifact's op enum (artifact/kiln.fbs; a
// unit test checks that the two agree) and its tests. docs/contributing.md has the details.
#include "ir/ops.h"

#include <array>
#include <cmath>
#include <cstdint>

#include "ir/infer_internal.h"
#include "ir/interp_internal.h"
#include "support/check.h"

namespace kiln::ir {
namespace {

using D = DTypeClass;
using F = OpFamily;
using K = OpKind;
using X = FusionClass;
using namespace infer_detail;

// ---- scalar semantics shared by several rows ------------------------------------------------
//
// Integer corner cases (NumPy raises or leaves them undefined), as documented in
// docs/graph-format.md: integer arithmetic wraps around; div truncates toward zero and x / 0 ==
// 0; INT_MIN / -1 wraps; pow with a negative exponent is 1 for base 1, +-1 for base -1 and 0
// otherwise (the reciprocal truncated toward zero); 0^0 == 1; reciprocal of an integer is 1 / x
// with the same division rule.

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

double sigmoid(double x) {
  // Stable for large |x|: never exponentiates a large positive number.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

int64_t wrapping_neg(int64_t x) { return int64_t(0 - uint64_t(x)); }
int64_t wrapping_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t wrapping_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t wrapping_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }
double float_add(double a, double b) { return a + b; }
double float_mul(double a, double b) { return a * b; }

int64_t int_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrapping_neg(a);  // avoids INT64_MIN / -1 overflow; wraps
  return a / b;                          // C++ truncates toward zero
}

// C's remainder (the sign of the dividend); 0 for a zero divisor, like int_div's quotient.
int64_t int_rem(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  return a % b;
}

// Shifts by an amount outside [0, bits) give 0, or for a right shift of a negative value -1 (the
// sign fill), as ONNX's BitShift defines them. Right shifts are arithmetic: unsigned values are
// non-negative in int64, where that is the logical shift.
int64_t shift_left(int64_t a, int64_t b, int bits) {
  return b < 0 || b >= bits ? 0 : int64_t(uint64_t(a) << b);
}
int64_t shift_right(int64_t a, int64_t b, int bits) {
  if (b < 0 || b >= bits) return a < 0 ? -1 : 0;
  return a >> b;
}

int64_t int_pow(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent % 2 == 0) ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, b = uint64_t(base);
  uint64_t e = uint64_t(exponent);
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return int64_t(result);
}

// ---- default attribute structs ---------------------------------------------------------------

template <class A>
Attrs defaults() { return A{}; }
Attrs reduce_defaults() { return ReduceAttrs{.axes = {}, .all_axes = true, .keepdims = false}; }
Attrs axis_last() { return AxisAttrs{.axis = -1}; }
Attrs axis_first() { return AxisAttrs{.axis = 0}; }

// ---- row builders, one per kind of row --------------------------------------------------------

constexpr OpInfo source(K kind, std::string_view name, Attrs (*attrs)()) {
  return {kind, name, F::kSource, 0, 0, X::kSource, D::kAny, attrs, {}, nullptr, nullptr, {}, {}, {}};
}

constexpr OpInfo unary(K kind, std::string_view name, X fusion, D dtypes, ScalarFns scalar, CExpr expr,
                       Attrs (*attrs)() = defaults<NoAttrs>) {
  return {kind, name, F::kUnary, 1, 1, fusion, dtypes, attrs, {}, infer_unary, interp::eval_elementwise,
          scalar, expr, {}};
}

constexpr OpInfo binary(K kind, std::string_view name, X fusion, ScalarFns scalar, CExpr expr,
                        D dtypes = D::kNumeric) {
  return {kind, name, F::kBinary, 2, 2, fusion, dtypes, defaults<NoAttrs>, {}, infer_binary,
          interp::eval_elementwise, scalar, expr, {}};
}

// Comparisons and logic ops yield bool; their expressions yield 0/1 in every number kind.
constexpr OpInfo compare(K kind, std::string_view name, D dtypes, ScalarFns scalar, std::string_view form) {
  return {kind, name, F::kCompare, 2, 2, X::kCheap, dtypes, defaults<NoAttrs>, {}, infer_compare,
          interp::eval_elementwise, scalar, {.float_form = form, .int_form = form, .bool_result = true}, {}};
}

constexpr OpInfo logic(K kind, std::string_view name, ScalarFns scalar, std::string_view form) {
  return {kind, name, F::kLogic, 2, 2, X::kCheap, D::kBool, defaults<NoAttrs>, {}, infer_logic,
          interp::eval_elementwise, scalar, {.float_form = form, .int_form = form, .bool_result = true}, {}};
}

// Every other op: its family's rule and evaluator, no scalar functions or templates.
constexpr OpInfo op(K kind, std::string_view name, F family, int min_inputs, int max_inputs, X fusion,
                    D dtypes, Attrs (*attrs)(), std::array<std::string_view, 2> required, InferFn infer,
                    EvalFn eval) {
  return {kind, name, family, min_inputs, max_inputs, fusion, dtypes, attrs, required, infer, eval, {}, {}, {}};
}

constexpr OpInfo reduce(K kind, std::string_view name, D dtypes, ReduceFns fns) {
  return {kind, name, F::kReduce, 1, 1, X::kPrologueAnchor, dtypes, reduce_defaults, {}, infer_reduce,
          interp::eval_reduce, {}, {}, fns};
}

std::string_view gelu_form(const Attrs& attrs) {
  return std::get<GeluAttrs>(attrs).tanh_approximation ? "k_gelu_tanh({0})" : "k_gelu({0})";
}

double gelu(double x, const Attrs& attrs) {
  if (std::get<GeluAttrs>(attrs).tanh_approximation)
    return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / kSqrt2));
}

// One row per OpKind, in enum order (checked below).
constexpr OpInfo kOpTable[] = {
    source(K::kInput, "input", defaults<InputAttrs>),
    source(K::kConstant, "const", defaults<ConstantAttrs>),

    unary(K::kNeg, "neg", X::kCheap, D::kFloatOrSigned,
          {.unary_f = [](double x, const Attrs&) { return -x; }, .unary_i = wrapping_neg},
          {.float_form = "(-{0})", .int_form = "k_neg_{k}({0})"}),
    unary(K::kAbs, "abs", X::kCheap, D::kFloatOrSigned,
          {.unary_f = [](double x, const Attrs&) { return std::fabs(x); },
           .unary_i = [](int64_t x) { return x < 0 ? wrapping_neg(x) : x; }},
          {.float_form = "k_fabs({0})", .int_form = "({0} < {lit:0} ? k_neg_{k}({0}) : {0})"}),
    unary(K::kExp, "exp", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::exp(x); }}, {.float_form = "exp({0})"}),
    unary(K::kLog, "log", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::log(x); }}, {.float_form = "log({0})"}),
    unary(K::kSqrt, "sqrt", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::sqrt(x); }}, {.float_form = "sqrt({0})"}),
    unary(K::kRsqrt, "rsqrt", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return 1.0 / std::sqrt(x); }}, {.float_form = "k_rsqrt({0})"}),
    unary(K::kReciprocal, "reciprocal", X::kCheap, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return 1.0 / x; }, .unary_i = [](int64_t x) { return int_div(1, x); }},
          {.float_form = "(1.0f / {0})", .int_form = "k_div_{k}({lit:1}, {0})"}),
    unary(K::kTanh, "tanh", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::tanh(x); }}, {.float_form = "k_tanh({0})"}),
    unary(K::kSigmoid, "sigmoid", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return sigmoid(x); }}, {.float_form = "k_sigmoid({0})"}),
    unary(K::kRelu, "relu", X::kCheap, D::kFloatOrSigned,
          {.unary_f = [](double x, const Attrs&) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); },
           .unary_i = [](int64_t x) { return x > 0 ? x : int64_t(0); }},
          {.float_form = "k_relu({0})", .int_form = "({0} > {lit:0} ? {0} : {lit:0})"}),
    unary(K::kSilu, "silu", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return x * sigmoid(x); }},
          {.float_form = "({0} * k_sigmoid({0}))"}),
    unary(K::kErf, "erf", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::erf(x); }}, {.float_form = "k_erf({0})"}),
    unary(K::kSin, "sin", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::sin(x); }}, {.float_form = "sin({0})"}),
    unary(K::kCos, "cos", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::cos(x); }}, {.float_form = "cos({0})"}),
    // The arctangent (radians, in (-pi/2, pi/2)); ONNX's Asin and Acos are built on it.
    unary(K::kAtan, "atan", X::kElementwise, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::atan(x); }}, {.float_form = "atan({0})"}),
    unary(K::kFloor, "floor", X::kCheap, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::floor(x); }, .unary_i = [](int64_t x) { return x; }},
          {.float_form = "floor({0})", .int_form = "{0}"}),
    unary(K::kCeil, "ceil", X::kCheap, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::ceil(x); }, .unary_i = [](int64_t x) { return x; }},
          {.float_form = "ceil({0})", .int_form = "{0}"}),
    // Half to even (the default rounding mode), as NumPy and ONNX round.
    unary(K::kRound, "round", X::kCheap, D::kFloat,
          {.unary_f = [](double x, const Attrs&) { return std::nearbyint(x); }, .unary_i = [](int64_t x) { return x; }},
          {.float_form = "k_round({0})", .int_form = "{0}"}),
    unary(K::kSign, "sign", X::kCheap, D::kFloatOrSigned,
          {.unary_f = [](double x, const Attrs&) { return std::isnan(x) ? x : (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0)); },
           .unary_i = [](int64_t x) { return x > 0 ? int64_t(1) : (x < 0 ? int64_t(-1) : int64_t(0)); }},
          {.float_form = "k_signf({0})",
           .int_form = "({0} > {lit:0} ? {lit:1} : ({0} < {lit:0} ? {lit:-1} : {lit:0}))"}),
    unary(K::kGelu, "gelu", X::kElementwise, D::kFloat, {.unary_f = gelu},
          {.float_form = "k_gelu({0})", .float_form_for = gelu_form}, defaults<GeluAttrs>),
    unary(K::kNot, "not", X::kCheap, D::kBool,
          {.unary_f = [](double x, const Attrs&) { return x == 0.0 ? 1.0 : 0.0; },
           .unary_i = [](int64_t x) { return x == 0 ? int64_t(1) : int64_t(0); }},
          {.float_form = "({0} == 0.0f ? 1 : 0)", .int_form = "({0} == {lit:0} ? 1 : 0)", .bool_result = true}),
    // Bitwise complement; the result's store keeps the dtype's bits (u8: ~x & 255).
    unary(K::kBitwiseNot, "bitwise_not", X::kCheap, D::kInteger,
          {.unary_i = [](int64_t x) { return ~x; }}, {.int_form = "(~{0})"}),

    binary(K::kAdd, "add", X::kCheap,
           {.binary_f = float_add, .binary_i = wrapping_add},
           {.float_form = "({0} + {1})", .int_form = "k_add_{k}({0}, {1})"}),
    binary(K::kSub, "sub", X::kCheap,
           {.binary_f = [](double a, double b) { return a - b; }, .binary_i = wrapping_sub},
           {.float_form = "({0} - {1})", .int_form = "k_sub_{k}({0}, {1})"}),
    binary(K::kMul, "mul", X::kCheap,
           {.binary_f = float_mul, .binary_i = wrapping_mul},
           {.float_form = "({0} * {1})", .int_form = "k_mul_{k}({0}, {1})"}),
    binary(K::kDiv, "div", X::kCheap, {.binary_f = [](double a, double b) { return a / b; }, .binary_i = int_div},
           {.float_form = "({0} / {1})", .int_form = "k_div_{k}({0}, {1})"}),
    binary(K::kPow, "pow", X::kElementwise,
           {.binary_f = [](double a, double b) { return std::pow(a, b); }, .binary_i = int_pow},
           {.float_form = "k_powf({0}, {1})", .int_form = "k_pow_{k}({0}, {1})"}),
    // maximum / minimum propagate NaN, as NumPy's do.
    binary(K::kMaximum, "maximum", X::kCheap,
           {.binary_f = [](double a, double b) { return (std::isnan(a) || std::isnan(b)) ? a + b : (a > b ? a : b); },
            .binary_i = [](int64_t a, int64_t b) { return a > b ? a : b; }},
           {.float_form = "k_maxf({0}, {1})", .int_form = "({0} > {1} ? {0} : {1})"}),
    binary(K::kMinimum, "minimum", X::kCheap,
           {.binary_f = [](double a, double b) { return (std::isnan(a) || std::isnan(b)) ? a + b : (a < b ? a : b); },
            .binary_i = [](int64_t a, int64_t b) { return a < b ? a : b; }},
           {.float_form = "k_minf({0}, {1})", .int_form = "({0} < {1} ? {0} : {1})"}),
    // C's fmod: the remainder of a truncated division, with the sign of the dividend (ONNX Mod
    // with fmod=1; Mod's default, floored form is fmod plus a sign fix).
    binary(K::kFmod, "fmod", X::kCheap,
           {.binary_f = [](double a, double b) { return std::fmod(a, b); }, .binary_i = int_rem},
           {.float_form = "k_fmodf({0}, {1})", .int_form = "k_rem_{k}({0}, {1})"}),
    // Bitwise ops on the two's-complement bits; narrow dtypes compute sign- or zero-extended,
    // which commutes with these.
    binary(K::kBitwiseAnd, "bitwise_and", X::kCheap,
           {.binary_i = [](int64_t a, int64_t b) { return a & b; }}, {.int_form = "({0} & {1})"}, D::kInteger),
    binary(K::kBitwiseOr, "bitwise_or", X::kCheap,
           {.binary_i = [](int64_t a, int64_t b) { return a | b; }}, {.int_form = "({0} | {1})"}, D::kInteger),
    binary(K::kBitwiseXor, "bitwise_xor", X::kCheap,
           {.binary_i = [](int64_t a, int64_t b) { return a ^ b; }}, {.int_form = "({0} ^ {1})"}, D::kInteger),
    binary(K::kShiftLeft, "shift_left", X::kCheap, {.binary_bits = shift_left},
           {.int_form = "({1} < {lit:0} || {1} >= {bits} ? {lit:0} : k_shl_{k}({0}, {1}))"}, D::kInteger),
    binary(K::kShiftRight, "shift_right", X::kCheap, {.binary_bits = shift_right},
           {.int_form = "({1} < {lit:0} || {1} >= {bits} ? ({0} < {lit:0} ? {lit:-1} : {lit:0}) : ({0} >> {1}))"},
           D::kInteger),

    compare(K::kEqual, "equal", D::kAny,
            {.binary_f = [](double a, double b) { return double(a == b); },
             .binary_i = [](int64_t a, int64_t b) { return int64_t(a == b); }},
            "({0} == {1} ? 1 : 0)"),
    compare(K::kNotEqual, "not_equal", D::kAny,
            {.binary_f = [](double a, double b) { return double(a != b); },
             .binary_i = [](int64_t a, int64_t b) { return int64_t(a != b); }},
            "({0} != {1} ? 1 : 0)"),
    compare(K::kLess, "less", D::kNumeric,
            {.binary_f = [](double a, double b) { return double(a < b); },
             .binary_i = [](int64_t a, int64_t b) { return int64_t(a < b); }},
            "({0} < {1} ? 1 : 0)"),
    compare(K::kLessEqual, "less_equal", D::kNumeric,
            {.binary_f = [](double a, double b) { return double(a <= b); },
             .binary_i = [](int64_t a, int64_t b) { return int64_t(a <= b); }},
            "({0} <= {1} ? 1 : 0)"),
    compare(K::kGreater, "greater", D::kNumeric,
            {.binary_f = [](double a, double b) { return double(a > b); },
             .binary_i = [](int64_t a, int64_t b) { return int64_t(a > b); }},
            "({0} > {1} ? 1 : 0)"),
    compare(K::kGreaterEqual, "greater_equal", D::kNumeric,
            {.binary_f = [](double a, double b) { return double(a >= b); },
             .binary_i = [](int64_t a, int64_t b) { return int64_t(a >= b); }},
            "({0} >= {1} ? 1 : 0)"),
    logic(K::kAnd, "and", {.binary_i = [](int64_t a, int64_t b) { return int64_t(a && b); }}, "({0} && {1} ? 1 : 0)"),
    logic(K::kOr, "or", {.binary_i = [](int64_t a, int64_t b) { return int64_t(a || b); }}, "({0} || {1} ? 1 : 0)"),
    logic(K::kXor, "xor", {.binary_i = [](int64_t a, int64_t b) { return int64_t(a != b); }}, "({0} != {1} ? 1 : 0)"),

    op(K::kWhere, "where", F::kSelect, 3, 3, X::kCheap, D::kAny, defaults<NoAttrs>, {}, infer_where,
       interp::eval_elementwise),
    op(K::kCast, "cast", F::kConvert, 1, 1, X::kCheap, D::kAny, defaults<CastAttrs>, {"to"}, infer_cast,
       interp::eval_elementwise),
    op(K::kClamp, "clamp", F::kConvert, 1, 1, X::kCheap, D::kNumeric, defaults<ClampAttrs>, {}, infer_clamp,
       interp::eval_elementwise),

    // Float sums and products accumulate in double, integer ones wrap in int64; max and min
    // propagate NaN (unlike argmax, for which a NaN is the maximum).
    reduce(K::kReduceSum, "reduce_sum", D::kNumeric,
           {.identity_f = 0.0, .combine_f = float_add,
            .identity_i = 0, .combine_i = wrapping_add,
            .combine = K::kAdd, .c_identity = "{lit:0}"}),
    // Integer means: the int64 sum divided by the count, truncated toward zero (0 for no elements).
    reduce(K::kReduceMean, "reduce_mean", D::kFloat,
           {.identity_f = 0.0, .combine_f = float_add,
            .identity_i = 0, .combine_i = wrapping_add,
            .mean = true, .combine = K::kAdd, .c_identity = "{lit:0}"}),
    reduce(K::kReduceMax, "reduce_max", D::kNumeric,
           {.identity_f = -HUGE_VAL,
            .combine_f = [](double a, double b) { return (std::isnan(a) || a >= b) && !std::isnan(b) ? a : b; },
            .identity_i = INT64_MIN, .combine_i = [](int64_t a, int64_t b) { return a > b ? a : b; },
            .needs_elements = true, .combine = K::kMaximum, .c_identity = "{lowest}"}),
    reduce(K::kReduceMin, "reduce_min", D::kNumeric,
           {.identity_f = HUGE_VAL,
            .combine_f = [](double a, double b) { return (std::isnan(a) || a <= b) && !std::isnan(b) ? a : b; },
            .identity_i = INT64_MAX, .combine_i = [](int64_t a, int64_t b) { return a < b ? a : b; },
            .needs_elements = true, .combine = K::kMinimum, .c_identity = "{highest}"}),
    reduce(K::kReduceProd, "reduce_prod", D::kNumeric,
           {.identity_f = 1.0, .combine_f = float_mul,
            .identity_i = 1, .combine_i = wrapping_mul,
            .combine = K::kMul, .c_identity = "{lit:1}"}),
    op(K::kArgMax, "argmax", F::kReduce, 1, 1, X::kPrologueAnchor, D::kNumeric, defaults<ArgMaxAttrs>, {},
       infer_argmax, interp::eval_argmax),

    op(K::kSoftmax, "softmax", F::kNormalize, 1, 1, X::kPrologueAnchor, D::kFloat, axis_last, {}, infer_softmax,
       interp::eval_softmax),
    op(K::kLogSoftmax, "log_softmax", F::kNormalize, 1, 1, X::kPrologueAnchor, D::kFloat, axis_last, {},
       infer_softmax, interp::eval_softmax),
    op(K::kLayerNorm, "layer_norm", F::kNormalize, 3, 3, X::kPrologueAnchor, D::kFloat, defaults<LayerNormAttrs>,
       {}, infer_layer_norm, interp::eval_layer_norm),

    op(K::kMatMul, "matmul", F::kLinalg, 2, 2, X::kEpilogueAnchor, D::kAny, defaults<NoAttrs>, {}, infer_matmul,
       interp::eval_matmul),
    op(K::kAttention, "attention", F::kAttention, 3, 4, X::kOwnKernel, D::kFloat, defaults<AttentionAttrs>, {},
       infer_attention, interp::eval_attention),

    op(K::kReshape, "reshape", F::kLayout, 1, 1, X::kOwnKernel, D::kAny, defaults<ReshapeAttrs>, {"shape"},
       infer_reshape, interp::eval_reshape),
    op(K::kTranspose, "transpose", F::kLayout, 1, 1, X::kOwnKernel, D::kAny, defaults<TransposeAttrs>, {"perm"},
       infer_transpose, interp::eval_transpose),
    op(K::kBroadcastTo, "broadcast_to", F::kLayout, 1, 1, X::kOwnKernel, D::kAny, defaults<BroadcastToAttrs>,
       {"shape"}, infer_broadcast_to, interp::eval_broadcast_to),
    op(K::kSlice, "slice", F::kLayout, 1, 1, X::kOwnKernel, D::kAny, defaults<SliceAttrs>, {"starts", "ends"},
       infer_slice, interp::eval_slice),
    op(K::kConcat, "concat", F::kLayout, 1, -1, X::kOwnKernel, D::kAny, axis_first, {}, infer_concat,
       interp::eval_concat),
    op(K::kGather, "gather", F::kLayout, 2, 2, X::kOwnKernel, D::kAny, axis_first, {}, infer_gather,
       interp::eval_gather),
    op(K::kIota, "iota", F::kLayout, 0, 0, X::kOwnKernel, D::kAny, defaults<IotaAttrs>, {"shape"}, infer_iota,
       interp::eval_iota),
    op(K::kTopK, "topk", F::kLayout, 1, 1, X::kOwnKernel, D::kNumeric, defaults<TopKAttrs>, {"k"}, infer_topk,
       interp::eval_topk),
    // Any data dtype replaces; the combining reductions need numeric data (infer_scatter).
    op(K::kScatter, "scatter", F::kLayout, 3, 3, X::kOwnKernel, D::kAny, defaults<ScatterAttrs>, {}, infer_scatter,
       interp::eval_scatter),

    op(K::kConv2d, "conv2d", F::kConv, 2, 3, X::kEpilogueAnchor, D::kAny, defaults<Conv2dAttrs>, {},
       infer_conv2d, interp::eval_conv2d),
    op(K::kMaxPool2d, "max_pool2d", F::kConv, 1, 1, X::kOwnKernel, D::kAny, defaults<Pool2dAttrs>, {"kernel"},
       infer_pool2d, interp::eval_pool2d),
    op(K::kAvgPool2d, "avg_pool2d", F::kConv, 1, 1, X::kOwnKernel, D::kAny, defaults<Pool2dAttrs>, {"kernel"},
       infer_pool2d, interp::eval_pool2d),
    op(K::kGlobalAvgPool2d, "global_avg_pool2d", F::kConv, 1, 1, X::kOwnKernel, D::kAny, defaults<NoAttrs>, {},
       infer_global_avg_pool2d, interp::eval_global_avg_pool2d),
};
static_assert(std::size(kOpTable) == size_t(kNumOpKinds), "kOpTable must list every OpKind");

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < std::size(kOpTable); ++i) {
    if (size_t(kOpTable[i].kind) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "kOpTable rows must follow OpKind order");

constexpr std::string_view kOpKindIds[] = {
#define KILN_OP_ID(id) #id,
    KILN_OP_KINDS(KILN_OP_ID)
#undef KILN_OP_ID
};

}  // namespace

const OpInfo& op_info(OpKind kind) {
  size_t index = size_t(kind);
  KILN_CHECK(index < std::size(kOpTable), "OpKind out of range");
  return kOpTable[index];
}

std::string_view op_name(OpKind kind) { return op_info(kind).name; }

std::string_view op_kind_id(OpKind kind) {
  KILN_CHECK(size_t(kind) < std::size(kOpKindIds), "OpKind out of range");
  return kOpKindIds[size_t(kind)];
}

std::string_view scatter_reduction_name(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::kNone: return "none";
    case ScatterReduction::kAdd: return "add";
    case ScatterReduction::kMul: return "mul";
    case ScatterReduction::kMax: return "max";
    case ScatterReduction::kMin: return "min";
  }
  return "?";
}

std::optional<ScatterReduction> parse_scatter_reduction(std::string_view name) {
  for (ScatterReduction r : {ScatterReduction::kNone, ScatterReduction::kAdd, ScatterReduction::kMul,
                             ScatterReduction::kMax, ScatterReduction::kMin}) {
    if (scatter_reduction_name(r) == name) return r;
  }
  return std::nullopt;
}

std::optional<OpKind> scatter_combine_op(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::kNone: return std::nullopt;
    case ScatterReduction::kAdd: return OpKind::kAdd;
    case ScatterReduction::kMul: return OpKind::kMul;
    case ScatterReduction::kMax: return OpKind::kMaximum;
    case ScatterReduction::kMin: return OpKind::kMinimum;
  }
  return std::nullopt;
}

std::optional<OpKind> parse_op_name(std::string_view name) {
  for (const OpInfo& info : kOpTable) {
    if (info.family != OpFamily::kSource && info.name == name) return info.kind;
  }
  return std::nullopt;
}

}  // namespace kiln::ir
