// Reference evaluation of layout ops: reshape, transpose, broadcast_to, slice, concat, gather,
// iota, scatter.
// They move raw elements, so every dtype is copied bit-exactly; the output dtype must equal the
// (data) input dtype.
#include <algorithm>
#include <cstring>
#include <limits>

#include "ir/interp_internal.h"

namespace kiln::ir::interp {
namespace {

// A shape attribute with symbols replaced by their bindings (-1 kept as is).
Result<std::vector<int64_t>> resolve_attr_shape(const EvalContext& ctx, const Shape& shape) {
  std::vector<int64_t> sizes;
  for (const Dim& d : shape) {
    if (d.is_static()) {
      sizes.push_back(d.size());
      continue;
    }
    Result<int64_t> size = resolve_dim(d, ctx.bindings);
    if (!size.is_ok()) return node_error(ctx, size.status().message());
    sizes.push_back(*size);
  }
  return sizes;
}

Result<Tensor> copy_with_strides(const EvalContext& ctx, const Tensor& x, int64_t offset,
                                 const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& out_shape) {
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(x.dtype(), out_shape));
  if (out.num_elements() > 0) {
    strided_copy(x.data(), offset, strides, out_shape, out.mutable_data(), dtype_size(x.dtype()));
  }
  return out;
}

// Layout ops move elements: the operand's dtype is the node's.
Status check_same_dtype(const EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  if (x.dtype() == ctx.out_dtype) return Status::ok();
  return node_error(ctx, "operand dtype " + std::string(dtype_name(x.dtype())) +
                             " differs from the node's dtype " + std::string(dtype_name(ctx.out_dtype)));
}

}  // namespace

Result<Tensor> eval_reshape(const EvalContext& ctx) {
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx));
  const Tensor& x = *ctx.inputs[0];
  const auto* attrs = std::get_if<ReshapeAttrs>(&ctx.node.attrs);
  if (attrs == nullptr) return node_error(ctx, "missing reshape attributes");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, resolve_attr_shape(ctx, attrs->shape));
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) {
      inferred = int(i);
    } else if (shape[i] < 0) {
      return node_error(ctx, "invalid target shape " + sizes_to_string(shape));
    } else {
      known *= shape[i];
    }
  }
  const int64_t total = x.num_elements();
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) {
      return node_error(ctx, "cannot reshape " + sizes_to_string(x.shape()) + " to " +
                                 sizes_to_string(shape));
    }
    shape[inferred] = total / known;
  } else if (known != total) {
    return node_error(ctx, "cannot reshape " + sizes_to_string(x.shape()) + " to " +
                               sizes_to_string(shape));
  }
  return Tensor::from_bytes(x.dtype(), shape, std::span<const std::byte>(x.data(), x.size_bytes()));
}

Result<Tensor> eval_transpose(const EvalContext& ctx) {
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx));
  const Tensor& x = *ctx.inputs[0];
  const auto* attrs = std::get_if<TransposeAttrs>(&ctx.node.attrs);
  const int64_t rank = x.rank();
  std::vector<int64_t> perm;
  if (attrs == nullptr || attrs->perm.empty()) {
    for (int64_t d = rank; d-- > 0;) perm.push_back(d);  // NumPy default: reverse the axes
  } else {
    perm = attrs->perm;
  }
  if (int64_t(perm.size()) != rank) return node_error(ctx, "perm length differs from the rank");
  std::vector<bool> seen(size_t(rank), false);
  const std::vector<int64_t> in_strides = row_major_strides(x.shape());
  std::vector<int64_t> out_shape, strides;
  for (int64_t p : perm) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, p, rank));
    if (seen[axis]) return node_error(ctx, "perm repeats axis " + std::to_string(axis));
    seen[axis] = true;
    out_shape.push_back(x.shape()[axis]);
    strides.push_back(in_strides[axis]);
  }
  return copy_with_strides(ctx, x, 0, strides, out_shape);
}

Result<Tensor> eval_broadcast_to(const EvalContext& ctx) {
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx));
  const Tensor& x = *ctx.inputs[0];
  const auto* attrs = std::get_if<BroadcastToAttrs>(&ctx.node.attrs);
  if (attrs == nullptr) return node_error(ctx, "missing broadcast_to attributes");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, resolve_attr_shape(ctx, attrs->shape));
  if (!broadcasts_to(x.shape(), shape)) {
    return node_error(ctx, "cannot broadcast " + sizes_to_string(x.shape()) + " to " +
                               sizes_to_string(shape));
  }
  return copy_with_strides(ctx, x, 0, broadcast_strides(x.shape(), shape), shape);
}

// Python slice semantics for one axis: clamps start/end, returns the element count.
int64_t normalize_slice(int64_t dim, int64_t step, int64_t& start, int64_t end) {
  // v + dim cannot overflow for negative v and dim >= 0, even for INT64_MIN sentinels.
  auto adjust = [dim](int64_t v) { return v < 0 ? v + dim : v; };
  start = adjust(start);
  end = adjust(end);
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? (end - start - 1) / step + 1 : 0;
  }
  start = std::clamp<int64_t>(start, -1, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  // step may be INT64_MIN: divide by the magnitude computed without negation overflow.
  const uint64_t magnitude = uint64_t(0) - uint64_t(step);
  return start > end ? int64_t(uint64_t(start - end - 1) / magnitude + 1) : 0;
}

Result<Tensor> eval_slice(const EvalContext& ctx) {
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx));
  const Tensor& x = *ctx.inputs[0];
  const auto* attrs = std::get_if<SliceAttrs>(&ctx.node.attrs);
  if (attrs == nullptr) return node_error(ctx, "missing slice attributes");
  const int64_t rank = x.rank();
  const size_t count = attrs->starts.size();
  if (attrs->ends.size() != count || (!attrs->axes.empty() && attrs->axes.size() != count) ||
      (!attrs->steps.empty() && attrs->steps.size() != count)) {
    return node_error(ctx, "starts, ends, axes and steps must have the same length");
  }
  std::vector<int64_t> out_shape = x.shape();
  const std::vector<int64_t> in_strides = row_major_strides(x.shape());
  std::vector<int64_t> strides = in_strides;
  std::vector<bool> seen(size_t(rank), false);
  int64_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t axis_attr = attrs->axes.empty() ? int64_t(i) : attrs->axes[i];
    KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, axis_attr, rank));
    if (seen[axis]) return node_error(ctx, "axis " + std::to_string(axis) + " is sliced twice");
    seen[axis] = true;
    const int64_t step = attrs->steps.empty() ? 1 : attrs->steps[i];
    if (step == 0) return node_error(ctx, "slice step cannot be 0");
    int64_t start = attrs->starts[i];
    const int64_t n = normalize_slice(x.shape()[axis], step, start, attrs->ends[i]);
    out_shape[axis] = n;
    strides[axis] = n > 1 ? in_strides[axis] * step : 0;  // n > 1 implies |step| < dim
    if (n > 0) offset += start * in_strides[axis];
  }
  return copy_with_strides(ctx, x, offset, strides, out_shape);
}

Result<Tensor> eval_concat(const EvalContext& ctx) {
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx));
  const Tensor& first = *ctx.inputs[0];
  const int64_t rank = first.rank();
  const auto* attrs = std::get_if<AxisAttrs>(&ctx.node.attrs);
  KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, attrs ? attrs->axis : 0, rank));
  std::vector<int64_t> out_shape = first.shape();
  out_shape[axis] = 0;
  for (const Tensor* t : ctx.inputs) {
    bool compatible = t->dtype() == first.dtype() && t->rank() == rank;
    for (int64_t d = 0; compatible && d < rank; ++d) {
      if (d != axis && t->shape()[d] != first.shape()[d]) compatible = false;
    }
    if (!compatible) {
      return node_error(ctx, "cannot concatenate " + sizes_to_string(first.shape()) + " and " +
                                 sizes_to_string(t->shape()) + " on axis " + std::to_string(axis));
    }
    out_shape[axis] += t->shape()[axis];
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(first.dtype(), out_shape));
  if (out.num_elements() == 0) return out;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
  const size_t elem = dtype_size(first.dtype());
  const size_t out_row = size_t(out_shape[axis] * inner) * elem;
  std::byte* dst = out.mutable_data();
  size_t column = 0;  // byte offset of this input's block within an output row
  for (const Tensor* t : ctx.inputs) {
    const size_t block = size_t(t->shape()[axis] * inner) * elem;
    for (int64_t o = 0; o < outer && block > 0; ++o) {
      std::memcpy(dst + size_t(o) * out_row + column, t->data() + size_t(o) * block, block);
    }
    column += block;
  }
  return out;
}

// gather(x, indices, axis): out[pre..., idx..., post...] = x[pre..., indices[idx...], post...].
// Negative indices count from the end once; anything still out of range is clamped to
// [0, size - 1], as on every device (docs/graph-format.md); an empty axis gathers zeros.
Result<Tensor> eval_gather(const EvalContext& ctx) {
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx));
  const Tensor& x = *ctx.inputs[0];
  const Tensor& indices = *ctx.inputs[1];
  if (!is_integer(indices.dtype())) return node_error(ctx, "gather indices must be i32 or i64");
  const auto* attrs = std::get_if<AxisAttrs>(&ctx.node.attrs);
  KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, attrs ? attrs->axis : 0, x.rank()));
  const int64_t dim = x.shape()[axis];
  std::vector<int64_t> idx = load_ints(indices);
  for (int64_t& i : idx) {
    if (i < 0) i += dim;
    i = std::clamp<int64_t>(i, 0, std::max<int64_t>(dim - 1, 0));
  }
  std::vector<int64_t> out_shape(x.shape().begin(), x.shape().begin() + axis);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(x.dtype(), out_shape));
  if (out.num_elements() == 0) return out;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
  const size_t block = size_t(inner) * dtype_size(x.dtype());
  std::byte* dst = out.mutable_data();
  if (dim == 0) return out;  // nothing to gather from: zeros
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t j = 0; j < idx.size(); ++j) {
      std::memcpy(dst, x.data() + (size_t(o * dim + idx[j])) * block, block);
      dst += block;
    }
  }
  return out;
}

// scatter(data, indices, updates, axis, reduction): the data, then each update in row-major
// order combined into the element at its own coordinates with the one along `axis` replaced by
// its index. A negative index counts from the end once; an update that still lands outside the
// data is dropped (every device does the same: docs/graph-format.md). Float reductions run in
// the compute type with the scalar functions of add, mul, maximum and minimum; integer ones in
// int64 (wrapping), then wrap to the dtype, as the kernels' 32- or 64-bit registers do.
Result<Tensor> eval_scatter(const EvalContext& ctx) {
  const auto* attrs = std::get_if<ScatterAttrs>(&ctx.node.attrs);
  if (attrs == nullptr) return node_error(ctx, "missing scatter attributes");
  const Tensor& data = *ctx.inputs[0];
  const Tensor& indices = *ctx.inputs[1];
  const Tensor& updates = *ctx.inputs[2];
  if (!is_integer(indices.dtype())) return node_error(ctx, "scatter indices must be i32 or i64");
  if (updates.dtype() != data.dtype() || ctx.out_dtype != data.dtype()) {
    return node_error(ctx, "scatter data, updates and result must have one dtype");
  }
  const std::vector<int64_t>& ds = data.shape();
  const std::vector<int64_t>& us = updates.shape();
  if (indices.shape() != us || us.size() != ds.size()) {
    return node_error(ctx, "scatter indices " + sizes_to_string(indices.shape()) + " and updates " +
                               sizes_to_string(us) + " must have one shape of the data's rank " +
                               std::to_string(ds.size()));
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, attrs->axis, data.rank()));
  const std::optional<OpKind> combine_op = scatter_combine_op(attrs->reduction);
  if (combine_op && data.dtype() == DType::kBool) return node_error(ctx, "scatter reductions need numeric data");

  // The data offset each update lands at, in the updates' row-major order; -1: dropped.
  const std::vector<int64_t> strides = row_major_strides(ds);
  const std::vector<int64_t> idx = load_ints(indices);
  std::vector<int64_t> target(idx.size(), -1);
  std::vector<int64_t> coord(us.size(), 0);
  for (size_t i = 0; i < idx.size(); ++i) {
    if (i > 0) {  // the odometer: the next row-major coordinates of the updates
      for (size_t d = us.size(); d-- > 0;) {
        if (++coord[d] < us[d]) break;
        coord[d] = 0;
      }
    }
    int64_t offset = 0;
    bool inside = true;
    for (size_t d = 0; d < ds.size() && inside; ++d) {
      int64_t c = coord[d];
      if (int64_t(d) == axis) {
        c = idx[i];
        if (c < 0) c += ds[d];
      }
      inside = c >= 0 && c < ds[d];
      offset += c * strides[d];
    }
    if (inside) target[i] = offset;
  }

  if (is_float(data.dtype())) {
    return with_compute_type(ctx, [&](auto zero) -> Result<Tensor> {
      using T = decltype(zero);
      std::vector<T> out = load_values<T>(data);
      const std::vector<T> u = load_values<T>(updates);
      double (*combine)(double, double) = combine_op ? op_info(*combine_op).scalar.binary_f : nullptr;
      for (size_t i = 0; i < u.size(); ++i) {
        if (target[i] < 0) continue;
        T& o = out[size_t(target[i])];
        o = combine ? T(combine(double(o), double(u[i]))) : u[i];
      }
      return tensor_from_values<T>(ctx.out_dtype, ds, std::span<const T>(out));
    });
  }
  std::vector<int64_t> out = load_ints(data);
  const std::vector<int64_t> u = load_ints(updates);
  int64_t (*combine)(int64_t, int64_t) = combine_op ? op_info(*combine_op).scalar.binary_i : nullptr;
  for (size_t i = 0; i < u.size(); ++i) {
    if (target[i] < 0) continue;
    int64_t& o = out[size_t(target[i])];
    o = combine ? combine(o, u[i]) : u[i];
  }
  return tensor_from_ints(ctx.out_dtype, ds, out);
}

Result<Tensor> eval_iota(const EvalContext& ctx) {
  const auto* attrs = std::get_if<IotaAttrs>(&ctx.node.attrs);
  if (attrs == nullptr) return node_error(ctx, "missing iota attributes");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, resolve_attr_shape(ctx, attrs->shape));
  KILN_ASSIGN_OR_RETURN(int64_t axis, checked_axis(ctx, attrs->axis, int64_t(shape.size())));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(ctx.out_dtype, shape));
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    out.set_element_from_double(i, double((i / inner) % shape[size_t(axis)]));
  }
  return out;
}

}  // namespace kiln::ir::interp
