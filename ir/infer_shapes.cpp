// Shape inference for linear algebra, layout and convolution ops (see infer.cpp for the rest).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/infer_internal.h"

namespace kiln::ir::infer_detail {
namespace {

// Slice bounds at or beyond these count as "from the very start" / "to the very end" of a
// symbolic dim (ONNX exporters write INT64_MAX or INT32_MAX for an open end).
constexpr int64_t kOpenEnd = std::numeric_limits<int32_t>::max();
constexpr int64_t kOpenStart = std::numeric_limits<int32_t>::min();

std::string dims_to_string(const Shape& shape) { return shape_to_string(shape); }

Status require_same_dtype(std::string_view op, const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype) {
    return invalid_argument(std::string(op) + " operands must have the same dtype, got " + a.to_string() +
                            " and " + b.to_string() + " (use cast)");
  }
  return Status::ok();
}

// Multiset of the symbols of a shape, sorted, and the product of its static dims (skipping -1).
struct ShapeFactors {
  std::vector<std::string> symbols;
  int64_t static_product = 1;
  bool overflow = false;
};

ShapeFactors factor(const Shape& shape) {
  ShapeFactors f;
  for (const Dim& d : shape) {
    if (d.is_symbolic()) {
      for (std::string& symbol : d.symbol_factors()) f.symbols.push_back(std::move(symbol));
      if (__builtin_mul_overflow(f.static_product, d.coefficient(), &f.static_product)) f.overflow = true;
    } else if (d.size() != -1) {
      if (__builtin_mul_overflow(f.static_product, d.size(), &f.static_product)) f.overflow = true;
    }
  }
  std::sort(f.symbols.begin(), f.symbols.end());
  return f;
}

// Checks that a shape given as an attribute has no negative static sizes (except where -1 is
// allowed, which the caller handles first).
Status check_attr_shape(std::string_view op, const Shape& shape, bool allow_minus_one) {
  for (const Dim& d : shape) {
    if (d.is_static() && d.size() < 0 && !(allow_minus_one && d.size() == -1)) {
      return invalid_argument(std::string(op) + " shape=" + dims_to_string(shape) + " has a negative size " +
                              std::to_string(d.size()));
    }
  }
  return Status::ok();
}

// Output size of one spatial dim of a convolution or pooling window; nullopt-like error when the
// window does not fit.
Result<Dim> window_output(std::string_view op, std::string_view what, const TensorType& x, const Dim& in,
                          int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_before,
                          int64_t pad_after) {
  // 128 bits: kernel, dilation, stride and pads are each at most 2^32 (checked by the caller).
  const __int128 effective = __int128(dilation) * (kernel - 1) + 1;
  if (in.is_symbolic()) {
    // The only symbolic case we can express: the window maps each position to itself.
    if (effective == 1 && stride == 1 && pad_before == 0 && pad_after == 0) return in;
    return invalid_argument(std::string(op) + " needs a static " + std::string(what) + ", got " + x.to_string());
  }
  __int128 padded = __int128(in.size()) + pad_before + pad_after;
  if (padded < effective) {
    return invalid_argument(std::string(op) + " window (size " + std::to_string(int64_t(effective)) +
                            ") is larger than the padded input " + std::string(what) + " " +
                            std::to_string(int64_t(padded)) + " of " + x.to_string());
  }
  const __int128 out = (padded - effective) / stride + 1;
  if (out > std::numeric_limits<int64_t>::max()) {
    return invalid_argument(std::string(op) + " output " + std::string(what) + " of " + x.to_string() +
                            " overflows 64 bits");
  }
  return Dim::of(int64_t(out));
}

Status check_positive(std::string_view op, std::string_view name, const int64_t* values, size_t n,
                      int64_t minimum, int64_t maximum = int64_t(1) << 32) {
  for (size_t i = 0; i < n; ++i) {
    if (values[i] < minimum || values[i] > maximum) {
      std::vector<int64_t> all(values, values + n);
      return invalid_argument(std::string(op) + " " + std::string(name) + "=" + ints_to_string(all) +
                              " must hold values in [" + std::to_string(minimum) + ", " +
                              std::to_string(maximum) + "]");
    }
  }
  return Status::ok();
}

}  // namespace

Result<TensorType> infer_matmul(OpKind, const Operands& in, Attrs&) {
  const TensorType& a = in[0];
  const TensorType& b = in[1];
  KILN_RETURN_IF_ERROR(require_same_dtype("matmul", a, b));
  if (!is_numeric(a.dtype)) {
    return invalid_argument("matmul needs numeric operands, got " + a.to_string() + " x " + b.to_string());
  }
  if (a.rank() == 0 || b.rank() == 0) {
    return invalid_argument("matmul needs operands of rank 1 or more, got " + a.to_string() + " x " +
                            b.to_string());
  }
  // NumPy: a 1-D left operand is a row [1, K], a 1-D right operand a column [K, 1]; the
  // added dim is removed from the result.
  Shape as = a.shape;
  Shape bs = b.shape;
  const bool a_vector = as.size() == 1;
  const bool b_vector = bs.size() == 1;
  if (a_vector) as.insert(as.begin(), Dim::of(1));
  if (b_vector) bs.push_back(Dim::of(1));
  if (as.back() != bs[bs.size() - 2]) {
    return invalid_argument("matmul inner dimensions differ: " + a.to_string() + " x " + b.to_string());
  }
  Shape batch_a(as.begin(), as.end() - 2);
  Shape batch_b(bs.begin(), bs.end() - 2);
  Result<Shape> batch = broadcast_shapes(batch_a, batch_b);
  if (!batch) {
    return invalid_argument("matmul batch dimensions do not broadcast: " + a.to_string() + " x " +
                            b.to_string());
  }
  Shape out = std::move(batch).value();
  if (!a_vector) out.push_back(as[as.size() - 2]);
  if (!b_vector) out.push_back(bs.back());
  return TensorType{a.dtype, std::move(out)};
}

Result<TensorType> infer_attention(OpKind, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<AttentionAttrs>(node_attrs);
  const TensorType& q = in[0];
  for (size_t i = 1; i < in.size(); ++i) KILN_RETURN_IF_ERROR(require_same_dtype("attention", q, in[i]));
  KILN_ASSIGN_OR_RETURN(AttentionShape s, attention_shape(q.shape, in[1].shape, in[2].shape, attrs.seq_major));
  if (in.size() == 4) {
    Shape scores = s.batch;
    scores.push_back(s.sq);
    scores.push_back(s.sk);
    Result<Shape> b = broadcast_shapes(in[3].shape, scores);
    if (!b || *b != scores) {
      return invalid_argument("attention mask " + in[3].to_string() + " does not broadcast to the scores' shape " +
                              dims_to_string(scores));
    }
  }
  if (attrs.scale && !std::isfinite(*attrs.scale)) return invalid_argument("attention scale must be finite");
  if (!attrs.scale) {
    if (!s.d.is_static()) return invalid_argument("attention needs scale= when the head size is symbolic");
    attrs.scale = 1.0 / std::sqrt(double(s.d.size()));
  }
  Shape out = q.shape;
  out.back() = s.dv;
  return TensorType{q.dtype, std::move(out)};
}

Result<TensorType> infer_reshape(OpKind, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<ReshapeAttrs>(node_attrs);
  const TensorType& x = in[0];
  const Shape& target = attrs.shape;
  KILN_RETURN_IF_ERROR(check_attr_shape("reshape", target, /*allow_minus_one=*/true));
  const auto minus_ones = std::count(target.begin(), target.end(), Dim::of(-1));
  if (minus_ones > 1) {
    return invalid_argument("reshape allows at most one -1 in shape=" + dims_to_string(target));
  }
  const std::string failure = "reshape cannot turn " + x.to_string() + " into " + dims_to_string(target);
  const ShapeFactors from = factor(x.shape);
  const ShapeFactors to = factor(target);
  if (from.overflow || to.overflow) return invalid_argument(failure);

  if (minus_ones == 0) {
    if (from.symbols != to.symbols || from.static_product != to.static_product) {
      return invalid_argument(failure);
    }
    return TensorType{x.dtype, target};
  }
  // The symbols of the target must all come from the input; what is left decides the -1.
  std::vector<std::string> remaining;
  if (!std::includes(from.symbols.begin(), from.symbols.end(), to.symbols.begin(), to.symbols.end())) {
    return invalid_argument(failure);
  }
  std::set_difference(from.symbols.begin(), from.symbols.end(), to.symbols.begin(), to.symbols.end(),
                      std::back_inserter(remaining));
  // The -1 stands for the left-over symbols times the static quotient (a product of symbolic
  // sizes, such as batch*seq when [batch, seq, D] becomes [-1, D]).
  if (to.static_product == 0 || from.static_product % to.static_product != 0) {
    return invalid_argument(failure);
  }
  Dim inferred = Dim::of(from.static_product / to.static_product);
  for (const std::string& symbol : remaining) {
    std::optional<Dim> grown = Dim::product(inferred, Dim::symbol(symbol));
    if (!grown) return invalid_argument(failure);
    inferred = *grown;
  }
  Shape out = target;
  for (Dim& d : out) {
    if (d == Dim::of(-1)) d = inferred;
  }
  return TensorType{x.dtype, std::move(out)};
}

Result<TensorType> infer_transpose(OpKind, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<TransposeAttrs>(node_attrs);
  const TensorType& x = in[0];
  if (attrs.perm.empty()) {
    // NumPy's default: reverse the axes.
    for (int64_t i = x.rank() - 1; i >= 0; --i) attrs.perm.push_back(i);
  }
  const std::string failure = "transpose perm=" + ints_to_string(attrs.perm) +
                              " is not a permutation of the axes of " + x.to_string();
  if (int64_t(attrs.perm.size()) != x.rank()) return invalid_argument(failure);
  std::vector<int64_t> perm;
  std::vector<bool> seen(size_t(x.rank()), false);
  for (int64_t p : attrs.perm) {
    if (p < -x.rank() || p >= x.rank()) return invalid_argument(failure);
    const int64_t axis = p < 0 ? p + x.rank() : p;
    if (seen[size_t(axis)]) return invalid_argument(failure);
    seen[size_t(axis)] = true;
    perm.push_back(axis);
  }
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[size_t(p)]);
  attrs.perm = std::move(perm);
  return TensorType{x.dtype, std::move(out)};
}

Result<TensorType> infer_broadcast_to(OpKind, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<BroadcastToAttrs>(node_attrs);
  const TensorType& x = in[0];
  const Shape& target = attrs.shape;
  KILN_RETURN_IF_ERROR(check_attr_shape("broadcast_to", target, /*allow_minus_one=*/false));
  const std::string failure = "cannot broadcast " + x.to_string() + " to " + dims_to_string(target);
  if (x.rank() > int64_t(target.size())) return invalid_argument(failure);
  const size_t offset = target.size() - x.shape.size();
  for (size_t i = 0; i < x.shape.size(); ++i) {
    const Dim& from = x.shape[i];
    if (!(from == target[offset + i] || from.is_one())) return invalid_argument(failure);
  }
  return TensorType{x.dtype, target};
}

Result<TensorType> infer_iota(OpKind, const Operands&, Attrs& node_attrs) {
  auto& attrs = std::get<IotaAttrs>(node_attrs);
  KILN_RETURN_IF_ERROR(check_attr_shape("iota", attrs.shape, /*allow_minus_one=*/false));
  const int64_t rank = int64_t(attrs.shape.size());
  if (attrs.axis < -rank || attrs.axis >= rank) {
    return invalid_argument("iota axis " + std::to_string(attrs.axis) + " is out of range for shape " +
                            dims_to_string(attrs.shape));
  }
  if (attrs.axis < 0) attrs.axis += rank;
  if (attrs.dtype == DType::kBool) return invalid_argument("iota cannot produce bool");
  return TensorType{attrs.dtype, attrs.shape};
}

Result<TensorType> infer_topk(OpKind op, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<TopKAttrs>(node_attrs);
  const TensorType& x = in[0];
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, x));
  KILN_ASSIGN_OR_RETURN(attrs.axis, normalize_axis(attrs.axis, x.rank()));
  const Dim& n = x.shape[size_t(attrs.axis)];
  if (attrs.k < 0 || (n.is_static() && attrs.k > n.size())) {
    return invalid_argument("topk k=" + std::to_string(attrs.k) + " is out of range for axis " +
                            std::to_string(attrs.axis) + " of " + x.to_string());
  }
  Shape shape = x.shape;
  shape[size_t(attrs.axis)] = Dim::of(attrs.k);
  return TensorType{DType::kI64, std::move(shape)};
}

Result<TensorType> infer_scatter(OpKind op, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<ScatterAttrs>(node_attrs);
  const TensorType& data = in[0];
  const TensorType& indices = in[1];
  const TensorType& updates = in[2];
  KILN_RETURN_IF_ERROR(check_operand_dtype(op, data));
  if (attrs.reduction != ScatterReduction::kNone && data.dtype == DType::kBool) {
    return invalid_argument("scatter reduction=\"" + std::string(scatter_reduction_name(attrs.reduction)) +
                            "\" needs numeric data, got " + data.to_string());
  }
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64) {
    return invalid_argument("scatter needs i32 or i64 indices, got " + indices.to_string());
  }
  KILN_RETURN_IF_ERROR(require_same_dtype("scatter data and updates", data, updates));
  if (data.rank() == 0) return invalid_argument("scatter needs data of rank 1 or more, got " + data.to_string());
  if (indices.shape != updates.shape || indices.rank() != data.rank()) {
    return invalid_argument("scatter needs indices and updates of one shape and of the data's rank, got " +
                            data.to_string() + ", " + indices.to_string() + " and " + updates.to_string());
  }
  KILN_ASSIGN_OR_RETURN(attrs.axis, normalize_axis(attrs.axis, data.rank()));
  // Off the axis an update lands at its own coordinates: an extent beyond the data's is a
  // mistake where both are known (symbolic ones are not compared; updates outside the data are
  // dropped at run time, as out-of-range indices are).
  for (size_t d = 0; d < data.shape.size(); ++d) {
    const Dim& u = updates.shape[d];
    const Dim& x = data.shape[d];
    if (int64_t(d) != attrs.axis && u.is_static() && x.is_static() && u.size() > x.size()) {
      return invalid_argument("scatter updates " + updates.to_string() + " are larger than the data " +
                              data.to_string() + " along axis " + std::to_string(d));
    }
  }
  return data;
}

Result<TensorType> infer_slice(OpKind, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<SliceAttrs>(node_attrs);
  const TensorType& x = in[0];
  const size_t n = attrs.starts.size();
  if (attrs.ends.size() != n) {
    return invalid_argument("slice needs as many ends as starts, got starts=" + ints_to_string(attrs.starts) +
                            " and ends=" + ints_to_string(attrs.ends));
  }
  std::vector<int64_t> axes = attrs.axes;
  if (axes.empty()) {
    for (size_t i = 0; i < n; ++i) axes.push_back(int64_t(i));
  }
  if (axes.size() != n) {
    return invalid_argument("slice needs one axis per start, got starts=" + ints_to_string(attrs.starts) +
                            " and axes=" + ints_to_string(axes));
  }
  std::vector<int64_t> steps = attrs.steps;
  if (steps.empty()) steps.assign(n, 1);
  if (steps.size() != n) {
    return invalid_argument("slice needs one step per start, got starts=" + ints_to_string(attrs.starts) +
                            " and steps=" + ints_to_string(steps));
  }
  Shape out = x.shape;
  std::vector<bool> seen(size_t(x.rank()), false);
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axes[i], x.rank()));
    if (seen[size_t(axis)]) {
      return invalid_argument("slice axis " + std::to_string(axes[i]) + " appears more than once in axes=" +
                              ints_to_string(axes));
    }
    seen[size_t(axis)] = true;
    axes[i] = axis;
    const int64_t step = steps[i];
    if (step == 0) return invalid_argument("slice step on axis " + std::to_string(axis) + " is 0");
    const int64_t start = attrs.starts[i];
    const int64_t end = attrs.ends[i];
    const Dim& d = x.shape[size_t(axis)];
    if (d.is_symbolic()) {
      const bool forward_full = step == 1 && (start == 0 || start <= kOpenStart) && end >= kOpenEnd;
      const bool backward_full = step == -1 && (start == -1 || start >= kOpenEnd) && end <= kOpenStart;
      if (forward_full || backward_full) continue;  // keeps the symbol
      return invalid_argument("slice on axis " + std::to_string(axis) + " of " + x.to_string() +
                              " needs the size of " + d.symbol_name() +
                              "; only a full-range slice (step 1 or -1) keeps a symbolic size");
    }
    // Python slicing, computed in 128 bits so that extreme bounds and steps cannot overflow.
    const __int128 size = d.size();
    auto clamp_bound = [&](int64_t bound, __int128 low, __int128 high) {
      __int128 b = bound < 0 ? __int128(bound) + size : __int128(bound);
      return std::clamp(b, low, high);
    };
    __int128 length = 0;
    if (step > 0) {
      const __int128 lo = clamp_bound(start, 0, size);
      const __int128 hi = clamp_bound(end, 0, size);
      if (hi > lo) length = (hi - lo + step - 1) / step;
    } else {
      const __int128 hi = clamp_bound(start, -1, size - 1);
      const __int128 lo = clamp_bound(end, -1, size - 1);
      const __int128 magnitude = -__int128(step);
      if (hi > lo) length = (hi - lo + magnitude - 1) / magnitude;
    }
    out[size_t(axis)] = Dim::of(int64_t(length));
  }
  attrs.axes = std::move(axes);
  attrs.steps = std::move(steps);
  return TensorType{x.dtype, std::move(out)};
}

Result<TensorType> infer_concat(OpKind, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<AxisAttrs>(node_attrs);
  const TensorType& first = in[0];
  if (first.rank() == 0) return invalid_argument("concat needs operands of rank 1 or more, got " + first.to_string());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(attrs.axis, first.rank()));
  Shape out = first.shape;
  bool all_static = true;
  int64_t total = 0;
  for (const TensorType& t : in) {
    KILN_RETURN_IF_ERROR(require_same_dtype("concat", first, t));
    if (t.rank() != first.rank()) {
      return invalid_argument("concat operands must have the same rank, got " + first.to_string() + " and " +
                              t.to_string());
    }
    for (int64_t i = 0; i < first.rank(); ++i) {
      if (i != axis && t.shape[size_t(i)] != first.shape[size_t(i)]) {
        return invalid_argument("concat operands differ in dim " + std::to_string(i) +
                                " (not the concat axis " + std::to_string(axis) + "): " + first.to_string() +
                                " and " + t.to_string());
      }
    }
    const Dim& d = t.shape[size_t(axis)];
    if (d.is_symbolic()) {
      all_static = false;
    } else if (__builtin_add_overflow(total, d.size(), &total)) {
      return invalid_argument("concat result is too large along axis " + std::to_string(axis));
    }
  }
  if (!all_static && in.size() > 1) {
    std::string types;
    for (const TensorType& t : in) types += (types.empty() ? "" : ", ") + t.to_string();
    return invalid_argument("concat along axis " + std::to_string(axis) +
                            " needs static sizes on that axis, got " + types);
  }
  if (all_static) out[size_t(axis)] = Dim::of(total);
  attrs.axis = axis;
  return TensorType{first.dtype, std::move(out)};
}

Result<TensorType> infer_gather(OpKind, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<AxisAttrs>(node_attrs);
  const TensorType& x = in[0];
  const TensorType& indices = in[1];
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64) {
    return invalid_argument("gather needs i32 or i64 indices, got " + indices.to_string());
  }
  if (x.rank() == 0) return invalid_argument("gather needs an operand of rank 1 or more, got " + x.to_string());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(attrs.axis, x.rank()));
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  attrs.axis = axis;
  return TensorType{x.dtype, std::move(out)};
}

Result<TensorType> infer_conv2d(OpKind, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<Conv2dAttrs>(node_attrs);
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  const ImageAxes ax = image_axes(attrs.channels_last);
  const char* layout = attrs.channels_last ? "NHWC" : "NCHW";
  if (x.rank() != 4) return invalid_argument(std::string("conv2d needs an ") + layout + " input of rank 4, got " + x.to_string());
  if (!is_float(x.dtype)) {
    return invalid_argument("conv2d needs a floating-point input, got " + x.to_string() + " (use cast)");
  }
  KILN_RETURN_IF_ERROR(require_same_dtype("conv2d", x, w));
  if (w.rank() != 4 || !is_static(w.shape)) {
    return invalid_argument(std::string("conv2d weight must be a static ") +
                            (attrs.channels_last ? "[Cout, kH, kW, Cin/groups]" : "[Cout, Cin/groups, kH, kW]") +
                            ", got " + w.to_string());
  }
  KILN_RETURN_IF_ERROR(check_positive("conv2d", "strides", attrs.strides.data(), 2, 1));
  KILN_RETURN_IF_ERROR(check_positive("conv2d", "dilations", attrs.dilations.data(), 2, 1));
  KILN_RETURN_IF_ERROR(check_positive("conv2d", "pads", attrs.pads.data(), 4, 0));
  KILN_RETURN_IF_ERROR(check_positive("conv2d", "groups", &attrs.groups, 1, 1));
  const int64_t out_channels = w.shape[ax.n].size();
  const int64_t in_per_group = w.shape[ax.c].size();
  const int64_t kh = w.shape[ax.h].size();
  const int64_t kw = w.shape[ax.w].size();
  if (kh == 0 || kw == 0 || in_per_group == 0) {
    return invalid_argument("conv2d weight " + w.to_string() + " has an empty kernel");
  }
  if (kh > (int64_t(1) << 32) || kw > (int64_t(1) << 32)) {
    return invalid_argument("conv2d weight " + w.to_string() + " has an absurd kernel size");
  }
  const Dim& channels = x.shape[ax.c];
  if (channels.is_symbolic()) {
    return invalid_argument("conv2d needs a static channel count, got " + x.to_string());
  }
  int64_t expected_channels = 0;
  if (__builtin_mul_overflow(in_per_group, attrs.groups, &expected_channels)) {
    return invalid_argument("conv2d weight " + w.to_string() + " with groups=" + std::to_string(attrs.groups) +
                            " needs more input channels than 64 bits can count");
  }
  if (channels.size() != expected_channels) {
    return invalid_argument("conv2d weight " + w.to_string() + " with groups=" + std::to_string(attrs.groups) +
                            " expects " + std::to_string(expected_channels) +
                            " input channels, but the input is " + x.to_string() +
                            (attrs.channels_last ? " (with channels_last=true, the input is NHWC and the weight "
                                                   "[Cout, kH, kW, Cin/groups])"
                                                 : ""));
  }
  if (out_channels % attrs.groups != 0) {
    return invalid_argument("conv2d output channels " + std::to_string(out_channels) +
                            " are not divisible by groups=" + std::to_string(attrs.groups));
  }
  if (in.size() == 3) {
    const TensorType expected{x.dtype, {Dim::of(out_channels)}};
    if (in[2] != expected) {
      return invalid_argument("conv2d bias must be " + expected.to_string() + ", got " + in[2].to_string());
    }
  }
  KILN_ASSIGN_OR_RETURN(Dim oh, window_output("conv2d", "height", x, x.shape[ax.h], kh, attrs.strides[0],
                                              attrs.dilations[0], attrs.pads[0], attrs.pads[2]));
  KILN_ASSIGN_OR_RETURN(Dim ow, window_output("conv2d", "width", x, x.shape[ax.w], kw, attrs.strides[1],
                                              attrs.dilations[1], attrs.pads[1], attrs.pads[3]));
  Shape out(4);
  out[ax.n] = x.shape[ax.n];
  out[ax.c] = Dim::of(out_channels);
  out[ax.h] = oh;
  out[ax.w] = ow;
  return TensorType{x.dtype, std::move(out)};
}

Result<TensorType> infer_pool2d(OpKind op, const Operands& in, Attrs& node_attrs) {
  auto& attrs = std::get<Pool2dAttrs>(node_attrs);
  const std::string name(op_name(op));
  const TensorType& x = in[0];
  const ImageAxes ax = image_axes(attrs.channels_last);
  if (x.rank() != 4) {
    return invalid_argument(name + " needs an " + (attrs.channels_last ? "NHWC" : "NCHW") + " input of rank 4, got " +
                            x.to_string());
  }
  if (op == OpKind::kAvgPool2d ? !is_float(x.dtype) : !is_numeric(x.dtype)) {
    return invalid_argument(name + " needs a " + (op == OpKind::kAvgPool2d ? "floating-point" : "numeric") +
                            " input, got " + x.to_string());
  }
  KILN_RETURN_IF_ERROR(check_positive(name, "kernel", attrs.kernel.data(), 2, 1));
  KILN_RETURN_IF_ERROR(check_positive(name, "strides", attrs.strides.data(), 2, 1));
  KILN_RETURN_IF_ERROR(check_positive(name, "pads", attrs.pads.data(), 4, 0));
  // As in ONNX and PyTorch: a window must never lie entirely in the padding.
  for (int i = 0; i < 4; ++i) {
    if (attrs.pads[size_t(i)] >= attrs.kernel[size_t(i % 2)]) {
      return invalid_argument(name + " pads=" + ints_to_string({attrs.pads.begin(), attrs.pads.end()}) +
                              " must be smaller than the kernel=" +
                              ints_to_string({attrs.kernel.begin(), attrs.kernel.end()}));
    }
  }
  KILN_ASSIGN_OR_RETURN(Dim oh, window_output(name, "height", x, x.shape[ax.h], attrs.kernel[0], attrs.strides[0],
                                              1, attrs.pads[0], attrs.pads[2]));
  KILN_ASSIGN_OR_RETURN(Dim ow, window_output(name, "width", x, x.shape[ax.w], attrs.kernel[1], attrs.strides[1],
                                              1, attrs.pads[1], attrs.pads[3]));
  Shape out = x.shape;
  out[ax.h] = oh;
  out[ax.w] = ow;
  return TensorType{x.dtype, std::move(out)};
}

Result<TensorType> infer_global_avg_pool2d(OpKind, const Operands& in, Attrs&) {
  const TensorType& x = in[0];
  if (x.rank() != 4) {
    return invalid_argument("global_avg_pool2d needs an NCHW input of rank 4, got " + x.to_string());
  }
  if (!is_float(x.dtype)) {
    return invalid_argument("global_avg_pool2d needs a floating-point input, got " + x.to_string() +
                            " (use cast)");
  }
  return TensorType{x.dtype, {x.shape[0], x.shape[1], Dim::of(1), Dim::of(1)}};
}

}  // namespace kiln::ir::infer_detail

namespace kiln::ir {

Result<AttentionShape> attention_shape(const Shape& q, const Shape& k, const Shape& v, bool seq_major) {
  auto shapes = [&] { return shape_to_string(q) + ", " + shape_to_string(k) + ", " + shape_to_string(v); };
  AttentionShape s;
  if (seq_major) {
    // [B, S, H, D]: the batch is [B, H].
    if (q.size() != 4 || k.size() != 4 || v.size() != 4)
      return invalid_argument("attention with layout=\"bshd\" needs q, k and v of rank 4, got " + shapes());
    if (q[0] != k[0] || q[0] != v[0] || q[2] != k[2] || q[2] != v[2] || k[1] != v[1] || q[3] != k[3])
      return invalid_argument("attention q, k, v must be [B, Sq, H, D], [B, Sk, H, D], [B, Sk, H, Dv], got " + shapes());
    s.batch = {q[0], q[2]};
    s.sq = q[1];
    s.sk = k[1];
    s.d = q[3];
    s.dv = v[3];
    return s;
  }
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size())
    return invalid_argument("attention needs q, k and v of one rank, 2 or more, got " + shapes());
  const size_t r = q.size();
  s.batch.assign(q.begin(), q.end() - 2);
  if (Shape(k.begin(), k.end() - 2) != s.batch || Shape(v.begin(), v.end() - 2) != s.batch ||
      q[r - 1] != k[r - 1] || k[r - 2] != v[r - 2])
    return invalid_argument("attention q, k, v must be [..., Sq, D], [..., Sk, D], [..., Sk, Dv] with the same batch dims, got " +
                            shapes());
  s.sq = q[r - 2];
  s.sk = k[r - 2];
  s.d = q[r - 1];
  s.dv = v[r - 1];
  return s;
}

}  // namespace kiln::ir
