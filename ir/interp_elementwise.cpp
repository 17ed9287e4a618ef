// Reference evaluation of elementwise ops: unary, binary arithmetic, compare, logic, where,
// cast and clamp, all with NumPy broadcasting. The per-op scalar functions are the operator
// table's (ir/ops.cpp, with the integer corner cases documented there); this file applies them.
//
// Domain choice: an op computes in double when any data operand (or, for unary ops, the result)
// is a float dtype, otherwise exactly in int64 with wrap-around. A unary op without an integer
// form (no unary_i in its row) computes in double and converts back.
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/interp_internal.h"

namespace kiln::ir::interp {
namespace {

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
  const ScalarFns& fn = op_info(ctx.node.op).scalar;
  const bool int_domain = !is_float(x.dtype()) && !is_float(ctx.out_dtype) && fn.unary_i != nullptr;
  if (int_domain) {
    std::vector<int64_t> v = load_ints(x);
    for (int64_t& e : v) e = fn.unary_i(e);
    return tensor_from_ints(ctx.out_dtype, x.shape(), v);
  }
  if (fn.unary_f == nullptr) return node_error(ctx, "has no scalar function in the operator table");
  std::vector<double> v = load_doubles(x);
  for (double& e : v) e = fn.unary_f(e, ctx.node.attrs);
  return tensor_from_doubles(ctx.out_dtype, x.shape(), v);
}

Result<Tensor> eval_binary(const EvalContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  const ScalarFns& fn = op_info(ctx.node.op).scalar;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, broadcast_all(ctx));
  std::array<std::vector<int64_t>, 2> shapes = {a.shape(), b.shape()};
  if (is_float(a.dtype()) || is_float(b.dtype())) {
    if (fn.binary_f == nullptr) return node_error(ctx, "has no float scalar function in the operator table");
    std::vector<double> va = load_doubles(a), vb = load_doubles(b);
    std::vector<double> out = map_broadcast<2, double, double>(shape, {&va, &vb}, shapes, fn.binary_f);
    return tensor_from_doubles(ctx.out_dtype, shape, out);
  }
  std::vector<int64_t> va = load_ints(a), vb = load_ints(b);
  std::vector<int64_t> out;
  if (fn.binary_bits != nullptr) {
    const int bits = int(8 * dtype_size(a.dtype()));
    out = map_broadcast<2, int64_t, int64_t>(shape, {&va, &vb}, shapes,
                                             [&](int64_t x, int64_t y) { return fn.binary_bits(x, y, bits); });
  } else {
    out = map_broadcast<2, int64_t, int64_t>(shape, {&va, &vb}, shapes, fn.binary_i);
  }
  return tensor_from_ints(ctx.out_dtype, shape, out);
}

Result<Tensor> eval_compare_or_logic(const EvalContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  const OpInfo& info = op_info(ctx.node.op);
  const ScalarFns& fn = info.scalar;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, broadcast_all(ctx));
  std::array<std::vector<int64_t>, 2> shapes = {a.shape(), b.shape()};
  std::vector<int64_t> out;
  if (info.family == OpFamily::kLogic) {
    std::vector<uint8_t> va = load_bools(a), vb = load_bools(b);
    out = map_broadcast<2, uint8_t, int64_t>(shape, {&va, &vb}, shapes, [&fn](uint8_t x, uint8_t y) {
      return fn.binary_i(x != 0, y != 0);
    });
  } else if (is_float(a.dtype()) || is_float(b.dtype())) {
    std::vector<double> va = load_doubles(a), vb = load_doubles(b);
    out = map_broadcast<2, double, int64_t>(shape, {&va, &vb}, shapes, [&fn](double x, double y) {
      return int64_t(fn.binary_f(x, y));
    });
  } else {
    std::vector<int64_t> va = load_ints(a), vb = load_ints(b);
    out = map_broadcast<2, int64_t, int64_t>(shape, {&va, &vb}, shapes, fn.binary_i);
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
      if (std::holds_alternative<CastAttrs>(ctx.node.attrs)) return eval_cast(ctx);
      return eval_clamp(ctx);
    case OpFamily::kSource: case OpFamily::kReduce: case OpFamily::kNormalize: case OpFamily::kLinalg: case OpFamily::kAttention:
    case OpFamily::kLayout: case OpFamily::kConv: break;
  }
  return node_error(ctx, "not an elementwise op");
}

}  // namespace kiln::ir::interp
