// Reference evaluation of elementwise ops: unary, binary arithmetic, compare, logic, where,
// cast and clamp, all with NumPy broadcasting.
//
// Domain choice: an op computes in double when any data operand (or, for unary ops, the result)
// is a float dtype, otherwise exactly in int64 with wrap-around. Defined integer corner cases
// (NumPy raises or leaves them undefined):
//  - div truncates toward zero (the spec); x / 0 == 0 for integers; INT_MIN / -1 wraps.
//  - pow with a negative integer exponent: 1 for base 1, +-1 for base -1, otherwise 0 (the
//    reciprocal truncated toward zero); 0^0 == 1.
//  - reciprocal of an integer is 1 / x with the same division rule.
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/interp_internal.h"

namespace kiln::ir::interp {
namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

double sigmoid(double x) {
  // Stable for large |x|: never exponentiates a large positive number.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

double unary_float(OpKind op, double x, bool gelu_tanh) {
  switch (op) {
    case OpKind::kNeg: return -x;
    case OpKind::kAbs: return std::fabs(x);
    case OpKind::kExp: return std::exp(x);
    case OpKind::kLog: return std::log(x);
    case OpKind::kSqrt: return std::sqrt(x);
    case OpKind::kRsqrt: return 1.0 / std::sqrt(x);
    case OpKind::kReciprocal: return 1.0 / x;
    case OpKind::kTanh: return std::tanh(x);
    case OpKind::kSigmoid: return sigmoid(x);
    case OpKind::kRelu: return std::isnan(x) ? x : (x > 0 ? x : 0.0);
    case OpKind::kSilu: return x * sigmoid(x);
    case OpKind::kErf: return std::erf(x);
    case OpKind::kSin: return std::sin(x);
    case OpKind::kCos: return std::cos(x);
    case OpKind::kFloor: return std::floor(x);
    case OpKind::kCeil: return std::ceil(x);
    case OpKind::kRound: return std::nearbyint(x);  // default rounding mode: half to even
    case OpKind::kSign: return std::isnan(x) ? x : (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0));
    case OpKind::kGelu:
      if (gelu_tanh) return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
      return 0.5 * x * (1.0 + std::erf(x / kSqrt2));
    case OpKind::kNot: return x == 0.0 ? 1.0 : 0.0;
    default: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

int64_t wrapping_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t wrapping_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t wrapping_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

int64_t int_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return int64_t(0 - uint64_t(a));  // avoids INT64_MIN / -1 overflow; wraps
  return a / b;                                   // C++ truncates toward zero
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

// Integer unary ops that stay integer. Returns false for ops with no exact integer meaning,
// which then run in double and convert back.
bool unary_int(OpKind op, int64_t x, int64_t& out) {
  switch (op) {
    case OpKind::kNeg: out = int64_t(0 - uint64_t(x)); return true;
    case OpKind::kAbs: out = x < 0 ? int64_t(0 - uint64_t(x)) : x; return true;
    case OpKind::kRelu: out = x > 0 ? x : 0; return true;
    case OpKind::kSign: out = x > 0 ? 1 : (x < 0 ? -1 : 0); return true;
    case OpKind::kFloor:
    case OpKind::kCeil:
    case OpKind::kRound: out = x; return true;
    case OpKind::kReciprocal: out = int_div(1, x); return true;
    case OpKind::kNot: out = x == 0 ? 1 : 0; return true;
    default: return false;
  }
}

double binary_float(OpKind op, double a, double b) {
  switch (op) {
    case OpKind::kAdd: return a + b;
    case OpKind::kSub: return a - b;
    case OpKind::kMul: return a * b;
    case OpKind::kDiv: return a / b;
    case OpKind::kPow: return std::pow(a, b);
    // NumPy maximum/minimum propagate NaN.
    case OpKind::kMaximum: return (std::isnan(a) || std::isnan(b)) ? a + b : (a > b ? a : b);
    case OpKind::kMinimum: return (std::isnan(a) || std::isnan(b)) ? a + b : (a < b ? a : b);
    default: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

int64_t binary_int(OpKind op, int64_t a, int64_t b) {
  switch (op) {
    case OpKind::kAdd: return wrapping_add(a, b);
    case OpKind::kSub: return wrapping_sub(a, b);
    case OpKind::kMul: return wrapping_mul(a, b);
    case OpKind::kDiv: return int_div(a, b);
    case OpKind::kPow: return int_pow(a, b);
    case OpKind::kMaximum: return a > b ? a : b;
    case OpKind::kMinimum: return a < b ? a : b;
    default: break;
  }
  return 0;
}

template <class T>
bool compare(OpKind op, T a, T b) {
  switch (op) {
    case OpKind::kEqual: return a == b;
    case OpKind::kNotEqual: return a != b;
    case OpKind::kLess: return a < b;
    case OpKind::kLessEqual: return a <= b;
    case OpKind::kGreater: return a > b;
    case OpKind::kGreaterEqual: return a >= b;
    default: break;
  }
  return false;
}

bool logic(OpKind op, bool a, bool b) {
  switch (op) {
    case OpKind::kAnd: return a && b;
    case OpKind::kOr: return a || b;
    case OpKind::kXor: return a != b;
    default: break;
  }
  return false;
}

// The output shape: all operands broadcast together.
Result<std::vector<int64_t>> broadcast_all(const EvalContext& ctx) {
  std::vector<int64_t> shape = ctx.inputs[0]->shape();
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    Result<std::vector<int64_t>> b = broadcast_sizes(shape, ctx.inputs[i]->shape());
    if (!b.is_ok()) return node_error(ctx, b.status().message());
    shape = std::move(b).value();
  }
  return shape;
}

// Elementwise map over broadcast operands: out[i] = fn(in0[o0], in1[o1], ...).
template <size_t N, class In, class Out, class Fn>
std::vector<Out> map_broadcast(const std::vector<int64_t>& out_shape,
                               const std::array<const std::vector<In>*, N>& values,
                               const std::array<std::vector<int64_t>, N>& in_shapes, Fn&& fn) {
  std::vector<Out> out(size_t(num_elements_of(out_shape)));
  std::array<std::vector<int64_t>, N> strides;
  std::array<const std::vector<int64_t>*, N> stride_ptrs;
  for (size_t k = 0; k < N; ++k) {
    strides[k] = broadcast_strides(in_shapes[k], out_shape);
    stride_ptrs[k] = &strides[k];
  }
  for_each_strided<N>(out_shape, stride_ptrs, [&](int64_t i, const std::array<int64_t, N>& o) {
    if constexpr (N == 1) {
      out[i] = fn((*values[0])[o[0]]);
    } else if constexpr (N == 2) {
      out[i] = fn((*values[0])[o[0]], (*values[1])[o[1]]);
    } else {
      out[i] = fn((*values[0])[o[0]], (*values[1])[o[1]], (*values[2])[o[2]]);
    }
  });
  return out;
}

Result<Tensor> eval_unary(const EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const OpKind op = ctx.node.op;
  bool gelu_tanh = false;
  if (const auto* g = std::get_if<GeluAttrs>(&ctx.node.attrs)) gelu_tanh = g->tanh_approximation;
  int64_t probe = 0;
  const bool int_domain = !is_float(x.dtype()) && !is_float(ctx.out_dtype) && unary_int(op, 0, probe);
  if (int_domain) {
    std::vector<int64_t> v = load_ints(x);
    for (int64_t& e : v) unary_int(op, e, e);
    return tensor_from_ints(ctx.out_dtype, x.shape(), v);
  }
  std::vector<double> v = load_doubles(x);
  for (double& e : v) e = unary_float(op, e, gelu_tanh);
  return tensor_from_doubles(ctx.out_dtype, x.shape(), v);
}

Result<Tensor> eval_binary(const EvalContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  const OpKind op = ctx.node.op;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, broadcast_all(ctx));
  std::array<std::vector<int64_t>, 2> shapes = {a.shape(), b.shape()};
  if (is_float(a.dtype()) || is_float(b.dtype())) {
    std::vector<double> va = load_doubles(a), vb = load_doubles(b);
    std::vector<double> out = map_broadcast<2, double, double>(
        shape, {&va, &vb}, shapes, [op](double x, double y) { return binary_float(op, x, y); });
    return tensor_from_doubles(ctx.out_dtype, shape, out);
  }
  std::vector<int64_t> va = load_ints(a), vb = load_ints(b);
  std::vector<int64_t> out = map_broadcast<2, int64_t, int64_t>(
      shape, {&va, &vb}, shapes, [op](int64_t x, int64_t y) { return binary_int(op, x, y); });
  return tensor_from_ints(ctx.out_dtype, shape, out);
}

Result<Tensor> eval_compare_or_logic(const EvalContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  const OpKind op = ctx.node.op;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, broadcast_all(ctx));
  std::array<std::vector<int64_t>, 2> shapes = {a.shape(), b.shape()};
  std::vector<int64_t> out;
  if (op_info(op).family == OpFamily::kLogic) {
    std::vector<uint8_t> va = load_bools(a), vb = load_bools(b);
    out = map_broadcast<2, uint8_t, int64_t>(shape, {&va, &vb}, shapes, [op](uint8_t x, uint8_t y) {
      return int64_t(logic(op, x != 0, y != 0));
    });
  } else if (is_float(a.dtype()) || is_float(b.dtype())) {
    std::vector<double> va = load_doubles(a), vb = load_doubles(b);
    out = map_broadcast<2, double, int64_t>(shape, {&va, &vb}, shapes, [op](double x, double y) {
      return int64_t(compare(op, x, y));
    });
  } else {
    std::vector<int64_t> va = load_ints(a), vb = load_ints(b);
    out = map_broadcast<2, int64_t, int64_t>(shape, {&va, &vb}, shapes, [op](int64_t x, int64_t y) {
      return int64_t(compare(op, x, y));
    });
  }
  return tensor_from_ints(ctx.out_dtype, shape, out);
}

// where(cond, a, b): selects raw elements, so every dtype is copied bit-exactly.
Result<Tensor> eval_where(const EvalContext& ctx) {
  const Tensor& cond = *ctx.inputs[0];
  const Tensor& a = *ctx.inputs[1];
  const Tensor& b = *ctx.inputs[2];
  if (a.dtype() != ctx.out_dtype || b.dtype() != ctx.out_dtype) {
    return node_error(ctx, "where operands must both be " + std::string(dtype_name(ctx.out_dtype)));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, broadcast_all(ctx));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(ctx.out_dtype, shape));
  std::vector<uint8_t> c = load_bools(cond);
  std::array<std::vector<int64_t>, 3> strides = {broadcast_strides(cond.shape(), shape),
                                                 broadcast_strides(a.shape(), shape),
                                                 broadcast_strides(b.shape(), shape)};
  const size_t size = dtype_size(ctx.out_dtype);
  std::byte* dst = out.num_elements() ? out.mutable_data() : nullptr;
  const std::byte* pa = a.data();
  const std::byte* pb = b.data();
  for_each_strided<3>(shape, {&strides[0], &strides[1], &strides[2]},
                      [&](int64_t i, const std::array<int64_t, 3>& o) {
                        const std::byte* src = c[o[0]] ? pa + o[1] * size : pb + o[2] * size;
                        std::memcpy(dst + i * size, src, size);
                      });
  return out;
}

Result<Tensor> eval_cast(const EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  if (const auto* attrs = std::get_if<CastAttrs>(&ctx.node.attrs); attrs && attrs->to != ctx.out_dtype) {
    return node_error(ctx, "cast target " + std::string(dtype_name(attrs->to)) +
                               " differs from the node's dtype " + std::string(dtype_name(ctx.out_dtype)));
  }
  if (is_float(x.dtype())) return tensor_from_doubles(ctx.out_dtype, x.shape(), load_doubles(x));
  return tensor_from_ints(ctx.out_dtype, x.shape(), load_ints(x));
}

// clamp(x, min, max) == minimum(maximum(x, min), max) like np.clip; NaN stays NaN.
Result<Tensor> eval_clamp(const EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  ClampAttrs attrs;
  if (const auto* a = std::get_if<ClampAttrs>(&ctx.node.attrs)) attrs = *a;
  if (is_float(x.dtype()) || is_float(ctx.out_dtype)) {
    std::vector<double> v = load_doubles(x);
    for (double& e : v) {
      if (std::isnan(e)) continue;
      if (attrs.min && e < *attrs.min) e = *attrs.min;
      if (attrs.max && e > *attrs.max) e = *attrs.max;
    }
    return tensor_from_doubles(ctx.out_dtype, x.shape(), v);
  }
  // Integer x: bounds are the nearest integers inside [min, max].
  std::vector<int64_t> v = load_ints(x);
  std::optional<int64_t> lo, hi;
  if (attrs.min) lo = double_to_int_saturating(std::ceil(*attrs.min), DType::kI64);
  if (attrs.max) hi = double_to_int_saturating(std::floor(*attrs.max), DType::kI64);
  for (int64_t& e : v) {
    if (lo && e < *lo) e = *lo;
    if (hi && e > *hi) e = *hi;
  }
  return tensor_from_ints(ctx.out_dtype, x.shape(), v);
}

}  // namespace

Result<Tensor> eval_elementwise(const EvalContext& ctx) {
  switch (op_info(ctx.node.op).family) {
    case OpFamily::kUnary: return eval_unary(ctx);
    case OpFamily::kBinary: return eval_binary(ctx);
    case OpFamily::kCompare:
    case OpFamily::kLogic: return eval_compare_or_logic(ctx);
    case OpFamily::kSelect: return eval_where(ctx);
    case OpFamily::kConvert:
      if (ctx.node.op == OpKind::kCast) return eval_cast(ctx);
      return eval_clamp(ctx);
    default: break;
  }
  return node_error(ctx, "not an elementwise op");
}

}  // namespace kiln::ir::interp
