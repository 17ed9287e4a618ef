// Reference evaluation of matmul and attention. Matmul has NumPy semantics: a 1-D left operand is promoted to
// [1, K] and a 1-D right operand to [K, 1], the promoted dims are squeezed from the result, and
// the batch dims (all but the last two) broadcast. Float products accumulate in the context's
// compute type (double, or float in the device-faithful mode, as the tiled matmul kernel's
// accumulator, in the same k order); integer products are exact in int64 with wrap-around.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/interp_internal.h"

namespace kiln::ir::interp {
namespace {

// C[M, N] += A[M, K] * B[K, N], row-major; i-k-j order so the inner loop streams rows of B and C.
// Rows are split over the interpreter's threads.
template <class T>
void gemm_accumulate(const T* __restrict a, const T* __restrict b, T* __restrict c, int64_t m,
                     int64_t k, int64_t n) {
  parallel_ranges(m, k * n, [=](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      T* __restrict c_row = c + i * n;
      for (int64_t p = 0; p < k; ++p) {
        const T a_ip = a[i * k + p];
        const T* __restrict b_row = b + p * n;
        for (int64_t j = 0; j < n; ++j) c_row[j] += a_ip * b_row[j];
      }
    }
  });
}

// Integer version with defined wrap-around (signed overflow is UB in C++).
void gemm_accumulate_wrapping(const int64_t* a, const int64_t* b, int64_t* c, int64_t m, int64_t k,
                              int64_t n) {
  parallel_ranges(m, k * n, [=](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        const uint64_t a_ip = uint64_t(a[i * k + p]);
        for (int64_t j = 0; j < n; ++j) {
          c[i * n + j] = int64_t(uint64_t(c[i * n + j]) + a_ip * uint64_t(b[p * n + j]));
        }
      }
    }
  });
}

template <class T, class Gemm>
std::vector<T> batched_matmul(const std::vector<T>& a, const std::vector<T>& b,
                              const std::vector<int64_t>& batch_shape,
                              const std::vector<int64_t>& a_batch, const std::vector<int64_t>& b_batch,
                              int64_t m, int64_t k, int64_t n, Gemm gemm) {
  const int64_t batches = num_elements_of(batch_shape);
  std::vector<T> c(size_t(batches * m * n), T(0));
  if (m * n == 0) return c;
  std::vector<int64_t> a_strides = broadcast_strides(a_batch, batch_shape);
  std::vector<int64_t> b_strides = broadcast_strides(b_batch, batch_shape);
  for_each_strided<2>(batch_shape, {&a_strides, &b_strides},
                      [&](int64_t batch, const std::array<int64_t, 2>& o) {
                        gemm(a.data() + o[0] * m * k, b.data() + o[1] * k * n,
                             c.data() + batch * m * n, m, k, n);
                      });
  return c;
}

}  // namespace

Result<Tensor> eval_matmul(const EvalContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  if (a.rank() == 0 || b.rank() == 0) return node_error(ctx, "matmul operands must have rank >= 1");
  std::vector<int64_t> a_shape = a.shape(), b_shape = b.shape();
  const bool a_vector = a.rank() == 1, b_vector = b.rank() == 1;
  if (a_vector) a_shape.insert(a_shape.begin(), 1);
  if (b_vector) b_shape.push_back(1);
  const int64_t m = a_shape[a_shape.size() - 2], k = a_shape.back();
  const int64_t k2 = b_shape[b_shape.size() - 2], n = b_shape.back();
  if (k != k2) {
    return node_error(ctx, "inner dimensions differ: " + sizes_to_string(a.shape()) + " @ " +
                               sizes_to_string(b.shape()));
  }
  const std::vector<int64_t> a_batch(a_shape.begin(), a_shape.end() - 2);
  const std::vector<int64_t> b_batch(b_shape.begin(), b_shape.end() - 2);
  Result<std::vector<int64_t>> batch = broadcast_sizes(a_batch, b_batch);
  if (!batch.is_ok()) return node_error(ctx, "batch dims: " + batch.status().message());
  std::vector<int64_t> out_shape = *batch;
  if (!a_vector) out_shape.push_back(m);
  if (!b_vector) out_shape.push_back(n);

  if (is_float(a.dtype()) || is_float(b.dtype())) {
    return with_compute_type(ctx, [&]<class T>(T) {
      std::vector<T> c = batched_matmul<T>(load_values<T>(a), load_values<T>(b), *batch, a_batch, b_batch, m, k,
                                           n, gemm_accumulate<T>);
      return tensor_from_values<T>(ctx.out_dtype, out_shape, c);
    });
  }
  std::vector<int64_t> c = batched_matmul<int64_t>(load_ints(a), load_ints(b), *batch, a_batch,
                                                   b_batch, m, k, n, gemm_accumulate_wrapping);
  return tensor_from_ints(ctx.out_dtype, out_shape, c);
}

namespace {

// Element strides of an attention operand [batch..., S, F] in its stored layout (AttentionAttrs):
// one per batch dim, then the sequence and the feature stride.
std::vector<int64_t> attention_strides(const std::vector<int64_t>& shape, bool seq_major) {
  if (!seq_major) return row_major_strides(shape);
  // [B, S, H, F] read as [B, H, S, F].
  const std::vector<int64_t> rm = row_major_strides(shape);
  return {rm[0], rm[2], rm[1], rm[3]};
}

// Attention's output values in the compute type T: each query row's scores, their
// softmax (max-subtracted, as softmax's reference), then the weighted sum of value rows. The
// query is scaled before its dot products, as the attention kernel scales its query row
// (codegen/c_family_attention.cpp), so a score overflows where the kernel's does. A row whose
// scores are all -inf is NaN, as softmax of such a row is.
template <class T>
std::vector<T> attention_values(const EvalContext& ctx, const AttentionAttrs& attrs, const std::vector<int64_t>& batch,
                                int64_t sq, int64_t sk, int64_t dh, int64_t dv, const std::vector<int64_t>& out_shape,
                                const std::vector<int64_t>& mask_strides) {
  const Tensor& q = *ctx.inputs[0];
  const Tensor& k = *ctx.inputs[1];
  const Tensor& v = *ctx.inputs[2];
  std::vector<T> mask;
  if (ctx.inputs.size() == 4) mask = load_values<T>(*ctx.inputs[3]);
  const T scale = T(attrs.scale.value_or(1.0 / std::sqrt(double(dh))));
  const std::vector<int64_t> qs = attention_strides(q.shape(), attrs.seq_major);
  const std::vector<int64_t> ks = attention_strides(k.shape(), attrs.seq_major);
  const std::vector<int64_t> vs = attention_strides(v.shape(), attrs.seq_major);
  const std::vector<int64_t> os = attention_strides(out_shape, attrs.seq_major);
  const std::vector<T> qd = load_values<T>(q), kd = load_values<T>(k), vd = load_values<T>(v);
  std::vector<T> out(size_t(num_elements_of(out_shape)), T(0));
  const size_t nb = batch.size();
  std::vector<T> p(static_cast<size_t>(sk)), q_row(static_cast<size_t>(dh));
  for (int64_t b = 0; b < num_elements_of(batch); ++b) {
    int64_t rem = b, qb = 0, kb = 0, vb = 0, ob = 0, mb = 0;
    for (size_t d = nb; d-- > 0;) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      qb += i * qs[d];
      kb += i * ks[d];
      vb += i * vs[d];
      ob += i * os[d];
      if (!mask.empty()) mb += i * mask_strides[d];
    }
    for (int64_t i = 0; i < sq; ++i) {
      for (int64_t c = 0; c < dh; ++c) q_row[size_t(c)] = qd[size_t(qb + i * qs[nb] + c)] * scale;
      T row_max = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < sk; ++j) {
        T s = 0;
        for (int64_t c = 0; c < dh; ++c) s += q_row[size_t(c)] * kd[size_t(kb + j * ks[nb] + c)];
        if (!mask.empty()) s += mask[size_t(mb + i * mask_strides[nb] + j * mask_strides[nb + 1])];
        if (attrs.causal && j > i) s = -std::numeric_limits<T>::infinity();
        p[size_t(j)] = s;
        row_max = std::max(row_max, s);
      }
      T sum = 0;
      for (T& x : p) sum += (x = std::exp(x - row_max));
      for (int64_t c = 0; c < dv; ++c) {
        T acc = 0;
        for (int64_t j = 0; j < sk; ++j) acc += p[size_t(j)] * vd[size_t(vb + j * vs[nb] + c)];
        out[size_t(ob + i * os[nb] + c)] = acc / sum;
      }
    }
  }
  return out;
}

}  // namespace

Result<Tensor> eval_attention(const EvalContext& ctx) {
  const auto& attrs = std::get<AttentionAttrs>(ctx.node.attrs);
  const Tensor& q = *ctx.inputs[0];
  const Tensor& k = *ctx.inputs[1];
  const Tensor& v = *ctx.inputs[2];
  auto static_shape = [](const std::vector<int64_t>& sizes) {
    Shape s;
    for (int64_t d : sizes) s.push_back(Dim::of(d));
    return s;
  };
  Result<AttentionShape> as = attention_shape(static_shape(q.shape()), static_shape(k.shape()),
                                              static_shape(v.shape()), attrs.seq_major);
  if (!as) return node_error(ctx, as.status().message());
  std::vector<int64_t> batch;
  for (const Dim& d : as->batch) batch.push_back(d.size());
  const int64_t sq = as->sq.size(), sk = as->sk.size(), dh = as->d.size(), dv = as->dv.size();
  std::vector<int64_t> scores_shape = batch;
  scores_shape.push_back(sq);
  scores_shape.push_back(sk);
  std::vector<int64_t> mask_strides;
  if (ctx.inputs.size() == 4) {
    if (!broadcasts_to(ctx.inputs[3]->shape(), scores_shape))
      return node_error(ctx, "mask " + sizes_to_string(ctx.inputs[3]->shape()) + " does not broadcast to " +
                                 sizes_to_string(scores_shape));
    mask_strides = broadcast_strides(ctx.inputs[3]->shape(), scores_shape);
  }
  std::vector<int64_t> out_shape = q.shape();
  out_shape.back() = dv;
  return with_compute_type(ctx, [&]<class T>(T) {
    std::vector<T> out = attention_values<T>(ctx, attrs, batch, sq, sk, dh, dv, out_shape, mask_strides);
    return tensor_from_values<T>(ctx.out_dtype, out_shape, out);
  });
}

}  // namespace kiln::ir::interp
