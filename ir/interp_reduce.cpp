// Reference evaluation of reductions (reduce_*, argmax) and normalizations (softmax,
// log_softmax, layer_norm).
//
// Float reductions and normalizations compute in the context's compute type (double, or float
// in the device-faithful mode, as the row kernels of codegen/c_family_rows.cpp do); integer
// reductions are exact in int64 (wrapping).
// Defined choices:
//  - reduce_mean of an integer tensor is the int64 sum divided by the count, truncated toward
//    zero (NumPy would return a float); the mean of zero elements is 0 for integers, NaN for floats.
//  - reduce_sum / reduce_prod over zero elements are 0 / 1; reduce_max / reduce_min / argmax over
//    zero elements are errors (NumPy raises too).
//  - reduce_max / reduce_min propagate NaN; argmax returns the first maximal index, and a NaN
//    counts as the maximum (NumPy's rule).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/interp_internal.h"

namespace kiln::ir::interp {
namespace {

// Splits `shape` around `axis` into outer * size * inner (row-major).
struct AxisSplit {
  int64_t outer = 1, size = 1, inner = 1;
};

AxisSplit split_at(const std::vector<int64_t>& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.size = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

template <class T, class Combine>
std::vector<T> reduce_into(const std::vector<T>& values, const std::vector<int64_t>& in_shape,
                           const std::vector<int64_t>& reduced_strides, int64_t out_count, T init,
                           Combine combine) {
  std::vector<T> acc(size_t(out_count), init);
  for_each_strided<1>(in_shape, {&reduced_strides}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    acc[o[0]] = combine(acc[o[0]], values[i]);
  });
  return acc;
}

Result<Tensor> eval_reduction(const EvalContext& ctx, const ReduceAttrs& attrs) {
  const Tensor& x = *ctx.inputs[0];
  const std::vector<int64_t>& shape = x.shape();
  const int64_t rank = x.rank();
  std::vector<bool> reduced(size_t(rank), attrs.axes.empty());
  for (int64_t a : attrs.axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, a, rank));
    reduced[axis] = true;
  }
  std::vector<int64_t> kept_shape, out_shape;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      count *= shape[d];
      kept_shape.push_back(1);
      if (attrs.keepdims) out_shape.push_back(1);
    } else {
      kept_shape.push_back(shape[d]);
      out_shape.push_back(shape[d]);
    }
  }
  std::vector<int64_t> strides = row_major_strides(kept_shape);
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) strides[d] = 0;
  }
  const int64_t out_count = num_elements_of(out_shape);
  const ReduceFns& fn = op_info(ctx.node.op).reduce;
  if (count == 0 && out_count > 0 && fn.needs_elements) {
    return node_error(ctx, "reduction over zero elements has no identity");
  }

  if (is_float(x.dtype()) || is_float(ctx.out_dtype)) {
    return with_compute_type(ctx, [&]<class T>(T) {
      // The table's combine computes in double; rounding each step to T gives T's arithmetic
      // (add, mul, max, min are single IEEE operations).
      auto combine = [f = fn.combine_f](T acc, T x) { return T(f(acc, x)); };
      std::vector<T> acc = reduce_into<T>(load_values<T>(x), shape, strides, out_count, T(fn.identity_f), combine);
      if (fn.mean) {
        for (T& a : acc) a /= T(count);
      }
      return tensor_from_values<T>(ctx.out_dtype, out_shape, acc);
    });
  }
  std::vector<int64_t> acc = reduce_into<int64_t>(load_ints(x), shape, strides, out_count, fn.identity_i, fn.combine_i);
  if (fn.mean) {
    for (int64_t& a : acc) a = count == 0 ? 0 : a / count;
  }
  return tensor_from_ints(ctx.out_dtype, out_shape, acc);
}

Result<Tensor> eval_argmax(const EvalContext& ctx, const ArgMaxAttrs& attrs) {
  const Tensor& x = *ctx.inputs[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, attrs.axis, x.rank()));
  const AxisSplit s = split_at(x.shape(), axis);
  std::vector<int64_t> out_shape;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != axis) out_shape.push_back(x.shape()[d]);
    else if (attrs.keepdims) out_shape.push_back(1);
  }
  if (s.size == 0 && s.outer * s.inner > 0) return node_error(ctx, "argmax over an empty axis");
  std::vector<int64_t> out(size_t(s.outer * s.inner));
  if (is_float(x.dtype())) {
    std::vector<double> v = load_doubles(x);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const double* row = v.data() + o * s.size * s.inner + i;
        int64_t best = 0;
        double best_value = row[0];
        for (int64_t k = 1; k < s.size && !std::isnan(best_value); ++k) {
          double e = row[k * s.inner];
          if (std::isnan(e) || e > best_value) { best = k; best_value = e; }
        }
        out[o * s.inner + i] = best;
      }
    }
  } else {
    std::vector<int64_t> v = load_ints(x);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t* row = v.data() + o * s.size * s.inner + i;
        int64_t best = 0;
        for (int64_t k = 1; k < s.size; ++k) {
          if (row[k * s.inner] > row[best * s.inner]) best = k;
        }
        out[o * s.inner + i] = best;
      }
    }
  }
  return tensor_from_ints(ctx.out_dtype, out_shape, out);
}

// softmax / log_softmax along one axis, stabilized by subtracting the row maximum, in the
// compute type T (the row kernel's steps: max, sum of exp(x - max), then each element).
template <class T>
void softmax_rows(std::vector<T>& v, const AxisSplit& s, bool log) {
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      T* row = v.data() + o * s.size * s.inner + i;
      T max_value = -std::numeric_limits<T>::infinity();
      for (int64_t k = 0; k < s.size; ++k) max_value = std::fmax(max_value, row[k * s.inner]);
      // All -inf: keep NaN-free arithmetic well defined (exp(-inf - -inf) would be NaN).
      if (std::isinf(max_value) && max_value < 0) max_value = 0;
      T sum = 0;
      for (int64_t k = 0; k < s.size; ++k) sum += std::exp(row[k * s.inner] - max_value);
      const T log_sum = std::log(sum);
      for (int64_t k = 0; k < s.size; ++k) {
        T& e = row[k * s.inner];
        e = log ? (e - max_value) - log_sum : std::exp(e - max_value) / sum;
      }
    }
  }
}

Result<Tensor> eval_softmax(const EvalContext& ctx, int64_t axis_attr, bool log) {
  const Tensor& x = *ctx.inputs[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, axis_attr, x.rank()));
  const AxisSplit s = split_at(x.shape(), axis);
  return with_compute_type(ctx, [&]<class T>(T) {
    std::vector<T> v = load_values<T>(x);
    softmax_rows(v, s, log);
    return tensor_from_values<T>(ctx.out_dtype, x.shape(), v);
  });
}

// layer_norm of `outer` rows of n elements in the compute type T: two passes (the mean, then
// the population variance of x - mean), as the row kernel computes them.
template <class T>
void layer_norm_rows(std::vector<T>& v, int64_t outer, int64_t n, const std::array<std::vector<T>, 2>& affine,
                     double epsilon) {
  for (int64_t o = 0; o < outer; ++o) {
    T* row = v.data() + o * n;
    T sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += row[k];
    const T mean = sum / T(n);
    T sq = 0;
    for (int64_t k = 0; k < n; ++k) sq += (row[k] - mean) * (row[k] - mean);
    const T inv_std = T(1) / std::sqrt(sq / T(n) + T(epsilon));
    for (int64_t k = 0; k < n; ++k) row[k] = (row[k] - mean) * inv_std * affine[0][k] + affine[1][k];
  }
}

// layer_norm over the axes [axis, rank): (x - mean) / sqrt(var + eps) * scale + bias with the
// population variance. scale and bias broadcast against the normalized (trailing) dims.
Result<Tensor> eval_layer_norm(const EvalContext& ctx, const LayerNormAttrs& attrs) {
  const Tensor& x = *ctx.inputs[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, attrs.axis, x.rank()));
  const std::vector<int64_t> trailing(x.shape().begin() + axis, x.shape().end());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  const int64_t n = num_elements_of(trailing);
  for (int k = 0; k < 2; ++k) {
    const Tensor& t = *ctx.inputs[1 + k];
    if (!broadcasts_to(t.shape(), trailing)) {
      return node_error(ctx, std::string(k == 0 ? "scale " : "bias ") + sizes_to_string(t.shape()) +
                                 " does not match the normalized dims " + sizes_to_string(trailing));
    }
  }
  return with_compute_type(ctx, [&]<class T>(T) {
    // scale / bias expanded to the trailing shape.
    std::array<std::vector<T>, 2> affine;
    for (int k = 0; k < 2; ++k) {
      const Tensor& t = *ctx.inputs[1 + k];
      std::vector<T> raw = load_values<T>(t);
      std::vector<int64_t> strides = broadcast_strides(t.shape(), trailing);
      affine[k].resize(size_t(n));
      for_each_strided<1>(trailing, {&strides}, [&](int64_t i, const std::array<int64_t, 1>& o) {
        affine[k][i] = raw[o[0]];
      });
    }
    std::vector<T> v = load_values<T>(x);
    layer_norm_rows(v, outer, n, affine, attrs.epsilon);
    return tensor_from_values<T>(ctx.out_dtype, x.shape(), v);
  });
}

}  // namespace

Result<Tensor> eval_reduce(const EvalContext& ctx) {
  return eval_reduction(ctx, std::get<ReduceAttrs>(ctx.node.attrs));
}

// The order topk ranks elements in: larger (or smaller) first, NaN first when largest and last
// when smallest, equal values by index. Kernels emit the same comparison (c_family_pointwise.cpp).
bool topk_before(double v, int64_t i, double w, int64_t j, bool largest) {
  const bool vn = std::isnan(v), wn = std::isnan(w);
  if (vn || wn) return vn && wn ? i < j : (largest ? vn : wn);
  if (v != w) return largest ? v > w : v < w;
  return i < j;
}

Result<Tensor> eval_topk(const EvalContext& ctx) {
  const auto& attrs = std::get<TopKAttrs>(ctx.node.attrs);
  const Tensor& x = *ctx.inputs[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, attrs.axis, x.rank()));
  const AxisSplit s = split_at(x.shape(), axis);
  if (attrs.k > s.size) return node_error(ctx, "topk k=" + std::to_string(attrs.k) + " exceeds the axis size " + std::to_string(s.size));
  std::vector<int64_t> out_shape = x.shape();
  out_shape[size_t(axis)] = attrs.k;
  // Integers compare exactly as doubles up to 2^53, which covers every Kiln integer type but
  // the extremes of i64.
  const std::vector<double> v = load_doubles(x);
  std::vector<int64_t> out(size_t(s.outer * attrs.k * s.inner));
  std::vector<int64_t> order(size_t(s.size));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const double* row = v.data() + o * s.size * s.inner + i;
      for (int64_t t = 0; t < s.size; ++t) order[size_t(t)] = t;
      std::partial_sort(order.begin(), order.begin() + attrs.k, order.end(), [&](int64_t a, int64_t b) {
        return topk_before(row[a * s.inner], a, row[b * s.inner], b, attrs.largest);
      });
      for (int64_t r = 0; r < attrs.k; ++r) out[size_t((o * attrs.k + r) * s.inner + i)] = order[size_t(r)];
    }
  }
  return tensor_from_ints(ctx.out_dtype, out_shape, out);
}

Result<Tensor> eval_argmax(const EvalContext& ctx) {
  return eval_argmax(ctx, std::get<ArgMaxAttrs>(ctx.node.attrs));
}

Result<Tensor> eval_softmax(const EvalContext& ctx) {
  return eval_softmax(ctx, std::get<AxisAttrs>(ctx.node.attrs).axis, ctx.node.op == OpKind::kLogSoftmax);
}

Result<Tensor> eval_layer_norm(const EvalContext& ctx) {
  return eval_layer_norm(ctx, std::get<LayerNormAttrs>(ctx.node.attrs));
}

}  // namespace kiln::ir::interp
