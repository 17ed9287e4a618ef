// Converters for further ONNX operators that decompose into Kiln ops: hyperbolic and
// trigonometric functions (Asin, Acos through atan), CumSum and CumProd, IsNaN/IsInf, Shrink, Trilu, Split, Hardmax, EyeLike, OptionalHasElement, OptionalGetElement, BitCast, Tile,
// DepthToSpace/SpaceToDepth, CastLike, Pad, CenterCropPad and OneHot. Masks and index patterns are built as
// constants at import, so these need static shapes where noted.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

Status tan_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId s, im.apply(OpKind::kSin, {x}));
  KILN_ASSIGN_OR_RETURN(NodeId c, im.apply(OpKind::kCos, {x}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kDiv, {s, c}));
  return im.set_output(0, y);
}

// asin(x) = atan(x / sqrt(1 - x^2)) (+-1 give +-inf, so +-pi/2); acos(x) = 2 atan(sqrt((1 - x) /
// (1 + x))), accurate near 1 where pi/2 - asin(x) would cancel. |x| > 1 gives NaN, as ONNX's.
Converter inverse_sine(bool is_acos) {
  return [is_acos](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar_like(x, 1.0));
    NodeId y = ir::kNoNode;
    if (is_acos) {
      KILN_ASSIGN_OR_RETURN(NodeId num, im.apply(OpKind::kSub, {one, x}));
      KILN_ASSIGN_OR_RETURN(NodeId den, im.apply(OpKind::kAdd, {one, x}));
      KILN_ASSIGN_OR_RETURN(NodeId ratio, im.apply(OpKind::kDiv, {num, den}));
      KILN_ASSIGN_OR_RETURN(NodeId root, im.apply(OpKind::kSqrt, {ratio}));
      KILN_ASSIGN_OR_RETURN(NodeId half, im.apply(OpKind::kAtan, {root}));
      KILN_ASSIGN_OR_RETURN(NodeId two, im.scalar_like(x, 2.0));
      KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kMul, {half, two}));
    } else {
      KILN_ASSIGN_OR_RETURN(NodeId square, im.apply(OpKind::kMul, {x, x}));
      KILN_ASSIGN_OR_RETURN(NodeId rest, im.apply(OpKind::kSub, {one, square}));
      KILN_ASSIGN_OR_RETURN(NodeId root, im.apply(OpKind::kSqrt, {rest}));
      KILN_ASSIGN_OR_RETURN(NodeId ratio, im.apply(OpKind::kDiv, {x, root}));
      KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kAtan, {ratio}));
    }
    return im.set_output(0, y);
  };
}

// (exp(x) -/+ exp(-x)) / 2
Converter hyperbolic(bool is_cosh) {
  return [is_cosh](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    KILN_ASSIGN_OR_RETURN(NodeId ep, im.apply(OpKind::kExp, {x}));
    KILN_ASSIGN_OR_RETURN(NodeId nx, im.apply(OpKind::kNeg, {x}));
    KILN_ASSIGN_OR_RETURN(NodeId en, im.apply(OpKind::kExp, {nx}));
    KILN_ASSIGN_OR_RETURN(NodeId sum, im.apply(is_cosh ? OpKind::kAdd : OpKind::kSub, {ep, en}));
    KILN_ASSIGN_OR_RETURN(NodeId half, im.scalar_like(x, 0.5));
    KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMul, {sum, half}));
    return im.set_output(0, y);
  };
}

// asinh = log(x + sqrt(x^2 + 1)); acosh = log(x + sqrt(x^2 - 1)); atanh = log((1+x)/(1-x)) / 2
Converter inverse_hyperbolic(int which) {
  return [which](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar_like(x, 1.0));
    NodeId y;
    if (which < 2) {
      KILN_ASSIGN_OR_RETURN(NodeId x2, im.apply(OpKind::kMul, {x, x}));
      KILN_ASSIGN_OR_RETURN(NodeId r, im.apply(which == 0 ? OpKind::kAdd : OpKind::kSub, {x2, one}));
      KILN_ASSIGN_OR_RETURN(NodeId s, im.apply(OpKind::kSqrt, {r}));
      KILN_ASSIGN_OR_RETURN(NodeId a, im.apply(OpKind::kAdd, {x, s}));
      KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kLog, {a}));
    } else {
      KILN_ASSIGN_OR_RETURN(NodeId num, im.apply(OpKind::kAdd, {one, x}));
      KILN_ASSIGN_OR_RETURN(NodeId den, im.apply(OpKind::kSub, {one, x}));
      KILN_ASSIGN_OR_RETURN(NodeId q, im.apply(OpKind::kDiv, {num, den}));
      KILN_ASSIGN_OR_RETURN(NodeId l, im.apply(OpKind::kLog, {q}));
      KILN_ASSIGN_OR_RETURN(NodeId half, im.scalar_like(x, 0.5));
      KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kMul, {l, half}));
    }
    return im.set_output(0, y);
  };
}

Status isnan_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kNotEqual, {x, x}));
  return im.set_output(0, y);
}

Status isinf_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const bool neg = im.attr_int("detect_negative", 1) != 0;
  const bool pos = im.attr_int("detect_positive", 1) != 0;
  const double inf = std::numeric_limits<double>::infinity();
  NodeId y;
  if (neg && pos) {
    KILN_ASSIGN_OR_RETURN(NodeId a, im.apply(OpKind::kAbs, {x}));
    KILN_ASSIGN_OR_RETURN(NodeId i, im.scalar_like(x, inf));
    KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kEqual, {a, i}));
  } else if (neg || pos) {
    KILN_ASSIGN_OR_RETURN(NodeId i, im.scalar_like(x, pos ? inf : -inf));
    KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kEqual, {x, i}));
  } else {
    KILN_ASSIGN_OR_RETURN(NodeId i, im.scalar_like(x, inf));
    KILN_ASSIGN_OR_RETURN(NodeId never, im.apply(OpKind::kNotEqual, {i, i}));
    KILN_ASSIGN_OR_RETURN(NodeId nx, im.apply(OpKind::kEqual, {x, x}));
    KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kAnd, {nx, never}));
  }
  return im.set_output(0, y);
}

Status shrink_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const double lambd = im.attr_float("lambd", 0.5);
  const double bias = im.attr_float("bias", 0.0);
  KILN_ASSIGN_OR_RETURN(NodeId lo, im.scalar_like(x, -lambd));
  KILN_ASSIGN_OR_RETURN(NodeId hi, im.scalar_like(x, lambd));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.scalar_like(x, bias));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId below, im.apply(OpKind::kLess, {x, lo}));
  KILN_ASSIGN_OR_RETURN(NodeId above, im.apply(OpKind::kGreater, {x, hi}));
  KILN_ASSIGN_OR_RETURN(NodeId xpb, im.apply(OpKind::kAdd, {x, b}));
  KILN_ASSIGN_OR_RETURN(NodeId xmb, im.apply(OpKind::kSub, {x, b}));
  KILN_ASSIGN_OR_RETURN(NodeId inner, im.apply(OpKind::kWhere, {above, xmb, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kWhere, {below, xpb, inner}));
  return im.set_output(0, y);
}

// A constant bool [rows, cols] mask holding keep(i, j) at (i, j).
template <class Keep>
Result<NodeId> pair_mask(Importer& im, int64_t rows, int64_t cols, Keep keep, std::string_view name) {
  KILN_ASSIGN_OR_RETURN(ir::Tensor mask, ir::Tensor::zeros(ir::DType::kBool, {rows, cols}));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mask.set_element_from_double(i * cols + j, keep(i, j) ? 1.0 : 0.0);
  return im.add_constant(std::move(mask), name);
}

Status trilu_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const Shape& s = im.type(x).shape;
  if (s.size() < 2 || s[s.size() - 2].is_symbolic() || s.back().is_symbolic()) {
    return im.unsupported("Trilu needs static last two dims");
  }
  int64_t k = 0;
  if (im.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kv, im.input_ints(1, "k"));
    if (kv.size() != 1) return im.error("k must be a scalar");
    k = kv[0];
  }
  const bool upper = im.attr_int("upper", 1) != 0;
  KILN_RETURN_IF_ERROR(check_import_size(im, Shape(s.end() - 2, s.end()), "the Trilu mask"));
  const int64_t rows = s[s.size() - 2].size(), cols = s.back().size();
  KILN_ASSIGN_OR_RETURN(NodeId m, pair_mask(im, rows, cols, [&](int64_t i, int64_t j) { return upper ? j - i >= k : j - i <= k; },
                                             "mask"));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kWhere, {m, x, zero}));
  return im.set_output(0, y);
}

// CumSum (opset 11) and CumProd (opset 26): along `axis` (an input), y[i] = sum (product) of x[j] over
// j <= i (j < i when exclusive; j >= i or j > i when reverse). Lowered to a masked reduction: x
// with the axis moved last, as [..., 1, n], where-selected by a constant [n, n] mask of the
// (i, j) pairs that count (the others replaced by 0 for a sum, 1 for a product, so the result
// is exact: no log/exp), reduced over the last axis, and moved back. n*n work per row, so the
// axis must be static and at most 2048 long (the lengths of position ids and attention masks
// CumSum is used on in exported transformers).
Converter cumulative_op(bool product) {
  return [product](Importer& im) -> Status {
    const std::string op_name = product ? "CumProd" : "CumSum";
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    const Shape s = im.type(x).shape;  // a copy: adding nodes moves types
    const int64_t rank = int64_t(s.size());
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axis_value, im.input_ints(1, "axis"));
    if (axis_value.size() != 1 || rank == 0) return im.error("axis must be one integer and the input at least 1-D");
    Result<int64_t> axis = ir::normalize_axis(axis_value[0], rank);
    if (!axis.is_ok()) return im.error(axis.status().message());
    const Dim& extent = s[size_t(*axis)];
    constexpr int64_t kMaxLength = 2048;
    if (extent.is_symbolic() || extent.size() > kMaxLength) {
      return im.unsupported(op_name + " along an axis that is dynamic or longer than " + std::to_string(kMaxLength));
    }
    const int64_t n = extent.size();
    const bool exclusive = im.attr_int("exclusive", 0) != 0, reverse = im.attr_int("reverse", 0) != 0;
    std::vector<int64_t> to_last;
    std::vector<int64_t> from_last(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis) to_last.push_back(d);
    to_last.push_back(*axis);
    for (int64_t d = 0; d < rank; ++d) from_last[size_t(to_last[size_t(d)])] = d;
    NodeId moved = x;
    if (*axis != rank - 1) {
      KILN_ASSIGN_OR_RETURN(moved, im.add(OpKind::kTranspose, {x}, ir::TransposeAttrs{to_last}));
    }
    Shape lifted = im.type(moved).shape;
    lifted.insert(lifted.end() - 1, Dim::of(1));
    KILN_ASSIGN_OR_RETURN(NodeId row, im.reshape(moved, lifted));
    KILN_ASSIGN_OR_RETURN(NodeId m, pair_mask(im, n, n, [&](int64_t i, int64_t j) {
      return reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
    }, product ? "cumprod_mask" : "cumsum_mask"));
    KILN_ASSIGN_OR_RETURN(NodeId identity, im.scalar_like(x, product ? 1.0 : 0.0));
    KILN_ASSIGN_OR_RETURN(NodeId picked, im.apply(OpKind::kWhere, {m, row, identity}));
    ir::ReduceAttrs reduce;
    reduce.axes = {int64_t(lifted.size()) - 1};
    KILN_ASSIGN_OR_RETURN(NodeId y, im.add(product ? OpKind::kReduceProd : OpKind::kReduceSum, {picked}, reduce));
    if (*axis != rank - 1) {
      KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kTranspose, {y}, ir::TransposeAttrs{from_last}));
    }
    return im.set_output(0, y);
  };
}

Status split_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const int64_t rank = im.type(x).rank();
  Result<int64_t> axis = ir::normalize_axis(im.attr_int("axis", 0), rank);
  if (!axis.is_ok()) return im.error(axis.status().message());
  const Dim extent = im.type(x).shape[size_t(*axis)];
  if (extent.is_symbolic()) return im.unsupported("Split along a dynamic dim");
  std::vector<int64_t> sizes;
  if (im.opset >= 13 && im.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(sizes, im.input_ints(1, "split"));
  } else if (im.opset < 13) {
    sizes = im.attr_ints("split").value_or(std::vector<int64_t>{});
  }
  const int64_t parts = im.current->output_size();
  const int64_t num_outputs = im.opset >= 18 ? im.attr_int("num_outputs", 0) : 0;
  if (num_outputs != 0) {
    // Opset 18: num_outputs parts of ceil(n / num_outputs), the last one smaller.
    if (!sizes.empty()) return im.error("split and num_outputs are both given");
    if (num_outputs != parts) return im.error("num_outputs differs from the number of outputs");
    const int64_t chunk = (extent.size() + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::clamp<int64_t>(extent.size() - i * chunk, 0, chunk));
  } else if (sizes.empty()) {
    if (parts == 0 || extent.size() % parts != 0) return im.error("the axis does not split into equal parts");
    sizes.assign(size_t(parts), extent.size() / parts);
  }
  if (int64_t(sizes.size()) != parts) return im.error("split sizes and outputs differ in number");
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0 || size > extent.size() - total) return im.error("split sizes do not add up to the axis length");
    total += size;
  }
  int64_t start = 0;
  for (int64_t i = 0; i < parts; ++i) {
    ir::SliceAttrs attrs{{start}, {start + sizes[size_t(i)]}, {*axis}, {1}};
    start += sizes[size_t(i)];
    KILN_ASSIGN_OR_RETURN(NodeId part, im.add(OpKind::kSlice, {x}, attrs));
    KILN_RETURN_IF_ERROR(im.set_output(int(i), part));
  }
  if (start != extent.size()) return im.error("split sizes do not add up to the axis length");
  return Status::ok();
}

Status hardmax_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const Shape in = im.type(x).shape;
  int64_t axis;
  NodeId v = x;
  if (im.opset >= 13) {
    Result<int64_t> a = ir::normalize_axis(im.attr_int("axis", -1), int64_t(in.size()));
    if (!a.is_ok()) return im.error(a.status().message());
    axis = *a;
  } else {
    // Before opset 13: coerced to 2-D at `axis` (default 1).
    Result<int64_t> a = ir::normalize_axis(im.attr_int("axis", 1), int64_t(in.size()));
    if (!a.is_ok()) return im.error(a.status().message());
    const auto right = ir::static_num_elements(Shape(in.begin() + *a, in.end()));
    if (!right) return im.unsupported("Hardmax over dynamic dims before opset 13");
    KILN_ASSIGN_OR_RETURN(v, im.reshape(x, {Dim::of(-1), Dim::of(*right)}));
    axis = 1;
  }
  const Dim n = im.type(v).shape[size_t(axis)];
  if (n.is_symbolic()) return im.unsupported("Hardmax over a dynamic axis");
  KILN_RETURN_IF_ERROR(check_import_size(im, {n}, "the Hardmax index pattern"));
  KILN_ASSIGN_OR_RETURN(NodeId am, im.add(OpKind::kArgMax, {v}, ir::ArgMaxAttrs{axis, true}));
  KILN_ASSIGN_OR_RETURN(NodeId iota, im.iota(n.size(), axis, im.type(v).rank()));
  KILN_ASSIGN_OR_RETURN(NodeId hit, im.apply(OpKind::kEqual, {am, iota}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kCast, {hit}, ir::CastAttrs{im.type(x).dtype}));
  KILN_ASSIGN_OR_RETURN(y, im.reshape(y, in));
  return im.set_output(0, y);
}

// Optionals: Kiln has no optional values, but a tensor passed where one is expected is a present
// optional, and a missing input an absent one (graph inputs of optional type are refused where
// they enter the graph).
Status optional_has_element(Importer& im) {
  if (im.has_input(0)) KILN_RETURN_IF_ERROR(im.input(0).status());
  KILN_ASSIGN_OR_RETURN(NodeId present, im.scalar(im.has_input(0) ? 1.0 : 0.0, ir::DType::kBool));
  return im.set_output(0, present);
}

Status optional_get_element(Importer& im) {
  if (!im.has_input(0)) return im.error("OptionalGetElement of an absent optional");
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  return im.set_output(0, x);
}

// BitCast between integer types (and bool) of one width is a wrapping cast, which keeps the bits;
// a constant input of any type is reinterpreted at import.
Status bit_cast(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const int32_t to_onnx = int32_t(im.attr_int("to", 0));
  const std::optional<ir::DType> to = dtype_from_onnx(to_onnx);
  if (!to) return im.unsupported(std::string("BitCast to ") + onnx_type_name(to_onnx) + " is not supported");
  const ir::DType from = im.type(x).dtype;
  if (ir::dtype_size(from) != ir::dtype_size(*to)) {
    return im.error("BitCast between types of different widths (" + std::string(ir::dtype_name(from)) + " and " +
                    std::string(ir::dtype_name(*to)) + ")");
  }
  if (const ir::Tensor* data = im.const_data(x)) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor bits, ir::Tensor::from_bytes(*to, data->shape(),
                                                                  std::span(data->data(), data->size_bytes())));
    return im.set_output(0, im.add_constant(std::move(bits), "bits"));
  }
  if (ir::is_float(from) || ir::is_float(*to)) {
    return im.unsupported("BitCast between float and integer types of a run-time value is not supported");
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.cast(x, *to));
  return im.set_output(0, y);
}

Status eyelike_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const Shape& s = im.type(x).shape;
  if (s.size() != 2) return im.unsupported("EyeLike needs a 2-D input");
  KILN_RETURN_IF_ERROR(check_import_size(im, s, "EyeLike"));
  ir::DType dtype = im.type(x).dtype;
  if (im.attr("dtype")) {
    const auto d = dtype_from_onnx(int32_t(im.attr_int("dtype", 1)));
    if (!d) return im.unsupported("EyeLike dtype is not supported");
    dtype = *d;
  }
  const int64_t k = im.attr_int("k", 0);
  const int64_t rows = s[0].size(), cols = s[1].size();
  KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(dtype, {rows, cols}));
  for (int64_t i = 0; i < rows; ++i) {
    if (i + k >= 0 && i + k < cols) t.set_element_from_double(i * cols + i + k, 1.0);
  }
  return im.set_output(0, im.add_constant(std::move(t), "eye"));
}

Status tile_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, im.input_ints(1, "repeats"));
  const Shape& s = im.type(x).shape;
  if (repeats.size() != s.size()) return im.error("repeats must have one entry per dim");
  if (!ir::is_static(s)) return im.unsupported("Tile of a tensor with dynamic dims");
  // [d0, d1] -> [1, d0, 1, d1] -> broadcast [r0, d0, r1, d1] -> [r0*d0, r1*d1]
  Shape interleaved, broadcast, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (repeats[i] < 0 || repeats[i] > kMaxImportElements) return im.error("repeats must be in [0, 2^26]");
    if (s[i].size() > kMaxImportElements) return im.unsupported("Tile of a dim above 2^26");
    interleaved.insert(interleaved.end(), {Dim::of(1), s[i]});
    broadcast.insert(broadcast.end(), {Dim::of(repeats[i]), s[i]});
    out.push_back(Dim::of(repeats[i] * s[i].size()));
  }
  KILN_ASSIGN_OR_RETURN(NodeId r, im.reshape(x, interleaved));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.add(OpKind::kBroadcastTo, {r}, ir::BroadcastToAttrs{broadcast}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.reshape(b, out));
  return im.set_output(0, y);
}

Converter depth_space(bool to_space) {
  return [to_space](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    const Shape& s = im.type(x).shape;
    if (s.size() != 4 || s[1].is_symbolic() || s[2].is_symbolic() || s[3].is_symbolic()) {
      return im.unsupported("needs an NCHW input with static C, H, W");
    }
    const int64_t b = im.attr_int("blocksize", 0);
    if (b <= 0 || b > 4096) return im.error("blocksize must be in [1, 4096]");
    if (s[1].size() > kMaxImportElements || s[2].size() > kMaxImportElements || s[3].size() > kMaxImportElements) {
      return im.unsupported("dims above 2^26");
    }
    const Dim n = s[0];
    const int64_t c = s[1].size(), h = s[2].size(), w = s[3].size();
    Shape mid, out;
    std::vector<int64_t> perm;
    // DepthToSpace's `mode`; SpaceToDepth's (opset 28) orders the new channels as DepthToSpace
    // reads them.
    const std::string mode = im.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return im.error("mode must be DCR or CRD");
    if (to_space) {
      if (c % (b * b) != 0) return im.error("channels must be divisible by blocksize^2");
      const int64_t co = c / (b * b);
      if (mode == "CRD") {
        mid = {n, Dim::of(co), Dim::of(b), Dim::of(b), Dim::of(h), Dim::of(w)};
        perm = {0, 1, 4, 2, 5, 3};
      } else {
        mid = {n, Dim::of(b), Dim::of(b), Dim::of(co), Dim::of(h), Dim::of(w)};
        perm = {0, 3, 4, 1, 5, 2};
      }
      out = {n, Dim::of(co), Dim::of(h * b), Dim::of(w * b)};
    } else {
      if (h % b != 0 || w % b != 0) return im.error("H and W must be divisible by blocksize");
      mid = {n, Dim::of(c), Dim::of(h / b), Dim::of(b), Dim::of(w / b), Dim::of(b)};
      perm = mode == "CRD" ? std::vector<int64_t>{0, 1, 3, 5, 2, 4} : std::vector<int64_t>{0, 3, 5, 1, 2, 4};
      out = {n, Dim::of(c * b * b), Dim::of(h / b), Dim::of(w / b)};
    }
    KILN_ASSIGN_OR_RETURN(NodeId r, im.reshape(x, mid));
    KILN_ASSIGN_OR_RETURN(NodeId t, im.add(OpKind::kTranspose, {r}, ir::TransposeAttrs{perm}));
    KILN_ASSIGN_OR_RETURN(NodeId y, im.reshape(t, out));
    return im.set_output(0, y);
  };
}

// ---- Pad ------------------------------------------------------------------------------

// The slice of x along `axis` from start to end (exclusive) with step.
Result<NodeId> slice_axis(Importer& im, NodeId x, int64_t axis, int64_t start, int64_t end, int64_t step = 1) {
  return im.add(OpKind::kSlice, {x}, ir::SliceAttrs{{start}, {end}, {axis}, {step}});
}

// `piece` (a scalar, or x's shape with extent 1 along axis) broadcast to x's shape with `count`
// along axis.
Result<NodeId> repeat_axis(Importer& im, NodeId piece, NodeId x, int64_t axis, int64_t count) {
  Shape shape = im.type(x).shape;
  shape[size_t(axis)] = Dim::of(count);
  return im.add(OpKind::kBroadcastTo, {piece}, ir::BroadcastToAttrs{shape});
}

// The `count` elements that `mode` puts before (or after) x along axis.
Result<NodeId> pad_piece(Importer& im, NodeId x, NodeId value, const std::string& mode, int64_t axis,
                         int64_t count, bool before) {
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  const Dim extent = im.type(x).shape[size_t(axis)];
  if (mode == "constant") return repeat_axis(im, value, x, axis, count);
  if (mode == "edge") {
    KILN_ASSIGN_OR_RETURN(NodeId edge, before ? slice_axis(im, x, axis, 0, 1) : slice_axis(im, x, axis, -1, kEnd));
    return repeat_axis(im, edge, x, axis, count);
  }
  // reflect and wrap read `count` distinct elements of the axis.
  if (extent.is_symbolic()) return im.unsupported("mode=" + mode + " along a dynamic dim");
  const int64_t n = extent.size();
  if (mode == "reflect") {
    if (count > n - 1) return im.unsupported("reflect padding wider than the dim less one");
    // Before: x[count], ..., x[1]; after: x[n-2], ..., x[n-1-count].
    return before ? slice_axis(im, x, axis, count, 0, -1) : slice_axis(im, x, axis, n - 2, n - 2 - count, -1);
  }
  if (count > n) return im.unsupported("wrap padding wider than the dim");
  return before ? slice_axis(im, x, axis, n - count, n) : slice_axis(im, x, axis, 0, count);
}

}  // namespace

Result<NodeId> pad_axis(Importer& im, NodeId x, NodeId value, const std::string& mode, int64_t axis, int64_t before,
                        int64_t after) {
  std::vector<NodeId> parts;
  if (before > 0) {
    KILN_ASSIGN_OR_RETURN(NodeId piece, pad_piece(im, x, value, mode, axis, before, true));
    parts.push_back(piece);
  }
  parts.push_back(x);
  if (after > 0) {
    KILN_ASSIGN_OR_RETURN(NodeId piece, pad_piece(im, x, value, mode, axis, after, false));
    parts.push_back(piece);
  }
  if (parts.size() == 1) return x;
  return im.add(OpKind::kConcat, parts, ir::AxisAttrs{axis});
}

namespace {

// Pad (opsets 2, 11, 18, 19): constant, reflect, edge and wrap modes, as slices, broadcasts and
// a concat per padded axis; negative pads crop.
Status pad_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const int64_t rank = im.type(x).rank();
  const std::string mode = im.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && (mode != "wrap" || im.opset < 19)) {
    return im.unsupported("mode='" + mode + "' is not supported");
  }
  std::vector<int64_t> pads;
  double fill = 0.0;
  NodeId value = ir::kNoNode;
  std::vector<int64_t> axes;
  if (im.opset < 11) {
    pads = im.attr_ints("pads").value_or(std::vector<int64_t>{});
    fill = im.attr_float("value", 0.0);
  } else {
    KILN_ASSIGN_OR_RETURN(pads, im.input_ints(1, "pads"));
    if (im.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(value, im.input(2));
      if (im.type(value).rank() > 1 || ir::static_num_elements(im.type(value).shape) != 1) {
        return im.error("constant_value must hold one element");
      }
      if (im.type(value).dtype != im.type(x).dtype) return im.error("constant_value and data differ in type");
      KILN_ASSIGN_OR_RETURN(value, im.reshape(value, {}));
    }
    if (im.opset >= 18 && im.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(axes, im.input_ints(3, "axes"));
    }
  }
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size()) return im.error("pads must hold two entries per padded axis");
  if (value == ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(value, im.scalar(fill, im.type(x).dtype));
  }
  NodeId y = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    Result<int64_t> axis = ir::normalize_axis(axes[i], rank);
    if (!axis.is_ok()) return im.error(axis.status().message());
    const int64_t begin = pads[i], end = pads[i + axes.size()];
    if (begin < 0 || end < 0) {
      // Negative pads remove elements.
      KILN_ASSIGN_OR_RETURN(y, slice_axis(im, y, *axis, std::max<int64_t>(-begin, 0),
                                          end < 0 ? end : std::numeric_limits<int64_t>::max()));
    }
    KILN_ASSIGN_OR_RETURN(y, pad_axis(im, y, value, mode, *axis, std::max<int64_t>(begin, 0), std::max<int64_t>(end, 0)));
  }
  return im.set_output(0, y);
}

// CenterCropPad (opset 18): each listed axis cropped or zero-padded to its target length, the
// kept or added part centered (an odd difference puts the extra element at the end).
Status center_crop_pad(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, im.input_ints(1, "shape"));
  const int64_t rank = im.type(x).rank();
  std::vector<int64_t> axes = im.attr_ints("axes").value_or(std::vector<int64_t>{});
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (axes.size() != lengths.size()) return im.error("shape must hold one length per axis");
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, im.type(x).dtype));
  NodeId y = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    Result<int64_t> axis = ir::normalize_axis(axes[i], rank);
    if (!axis.is_ok()) return im.error(axis.status().message());
    const Dim extent = im.type(y).shape[size_t(*axis)];
    if (extent.is_symbolic()) return im.unsupported("CenterCropPad along a dynamic dim");
    const int64_t n = extent.size(), want = lengths[i];
    if (want < 0) return im.error("target lengths must not be negative");
    if (want < n) {
      const int64_t start = (n - want) / 2;
      KILN_ASSIGN_OR_RETURN(y, slice_axis(im, y, *axis, start, start + want));
    } else if (want > n) {
      const int64_t before = (want - n) / 2;
      std::vector<NodeId> parts;
      if (before > 0) {
        KILN_ASSIGN_OR_RETURN(NodeId piece, repeat_axis(im, zero, y, *axis, before));
        parts.push_back(piece);
      }
      parts.push_back(y);
      KILN_ASSIGN_OR_RETURN(NodeId after, repeat_axis(im, zero, y, *axis, want - n - before));
      parts.push_back(after);
      KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kConcat, parts, ir::AxisAttrs{*axis}));
    }
  }
  return im.set_output(0, y);
}

// OneHot: where(indices == iota along the new axis, on, off); negative indices count from depth,
// indices outside [-depth, depth) match nothing.
Status one_hot(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId indices, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId depth_node, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId values, im.input(2));
  const ir::Tensor* depth_data = im.const_data(depth_node);
  if (depth_data == nullptr || depth_data->num_elements() != 1) {
    return im.unsupported("depth must be a constant (computed at import) of one element");
  }
  const double depth_value = depth_data->element_as_double(0);
  if (!(depth_value >= 1 && depth_value <= double(kMaxImportElements))) return im.error("depth must be in [1, 2^26]");
  const auto depth = int64_t(depth_value);
  if (ir::static_num_elements(im.type(values).shape) != 2) return im.error("values must hold [off_value, on_value]");
  const int64_t rank = im.type(indices).rank() + 1;
  Result<int64_t> axis = ir::normalize_axis(im.attr_int("axis", -1), rank);
  if (!axis.is_ok()) return im.error(axis.status().message());
  KILN_ASSIGN_OR_RETURN(indices, im.wrap_negative(indices, depth));
  Shape lifted = im.type(indices).shape;
  lifted.insert(lifted.begin() + *axis, Dim::of(1));
  KILN_ASSIGN_OR_RETURN(indices, im.reshape(indices, lifted));
  KILN_ASSIGN_OR_RETURN(NodeId iota, im.iota(depth, *axis, rank));
  KILN_ASSIGN_OR_RETURN(NodeId hit, im.apply(OpKind::kEqual, {indices, iota}));
  KILN_ASSIGN_OR_RETURN(values, im.reshape(values, {Dim::of(2)}));
  KILN_ASSIGN_OR_RETURN(NodeId off, slice_axis(im, values, 0, 0, 1));
  KILN_ASSIGN_OR_RETURN(NodeId on, slice_axis(im, values, 0, 1, 2));
  KILN_ASSIGN_OR_RETURN(off, im.reshape(off, {}));
  KILN_ASSIGN_OR_RETURN(on, im.reshape(on, {}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kWhere, {hit, on, off}, ir::NoAttrs{}));
  return im.set_output(0, y);
}

Status cast_like(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId target, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId y, onnx_cast(im, x, im.type(target).dtype, im.attr_int("saturate", 1) != 0));
  return im.set_output(0, y);
}

}  // namespace

// Einsum of one or two operands: labels only in one operand and not in the output are summed
// first; then a binary einsum is one batched matmul of the operands transposed to
// [batch, free, contracted] and [batch, contracted, free] and flattened to 3-D (products of
// sizes are sizes, so symbolic dims work), reshaped and transposed to the output's order.
// Repeated labels within an operand (diagonals) and ellipses are reported.
Status einsum_op(Importer& im) {
  std::string eq = im.attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find("...") != std::string::npos) return im.unsupported("an equation with '...' (an ellipsis) is not supported");
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  const std::string lhs = eq.substr(0, arrow);
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (int(terms.size()) != im.num_inputs() || terms.size() > 2) {
    return terms.size() > 2 ? im.unsupported("an einsum of more than two operands")
                            : im.error("the equation has " + std::to_string(terms.size()) + " operands, the node " +
                                       std::to_string(im.num_inputs()));
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {  // implicit output: the labels that appear once, in alphabetical order
    std::string all = terms[0] + (terms.size() > 1 ? terms[1] : "");
    std::sort(all.begin(), all.end());
    for (char c : all)
      if (std::count(all.begin(), all.end(), c) == 1) out += c;
  }
  auto valid = [](const std::string& t) {
    for (char c : t)
      if (!std::isalpha(static_cast<unsigned char>(c)) || std::count(t.begin(), t.end(), c) > 1) return false;
    return true;
  };
  for (const std::string& t : terms) {
    if (!valid(t)) return im.unsupported("operand labels '" + t + "' (repeated labels, i.e. diagonals, are not supported)");
  }
  if (!valid(out)) return im.error("output labels '" + out + "' must be distinct letters");
  std::vector<NodeId> x;
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(NodeId v, im.input(int(i)));
    if (im.type(v).rank() != int64_t(terms[i].size())) return im.error("operand " + std::to_string(i) + " has the wrong rank for '" + terms[i] + "'");
    x.push_back(v);
  }
  // Sum the labels of one operand that neither the other operand nor the output has.
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string other = terms.size() > 1 ? terms[1 - i] : "";
    std::vector<int64_t> axes;
    std::string kept;
    for (size_t a = 0; a < terms[i].size(); ++a) {
      const char c = terms[i][a];
      if (out.find(c) == std::string::npos && other.find(c) == std::string::npos) axes.push_back(int64_t(a));
      else kept += c;
    }
    if (!axes.empty()) {
      KILN_ASSIGN_OR_RETURN(x[i], im.add(OpKind::kReduceSum, {x[i]}, ir::ReduceAttrs{.axes = axes, .all_axes = false, .keepdims = false}));
      terms[i] = kept;
    }
  }
  auto dim_of = [&](size_t i, char c) { return im.type(x[i]).shape[terms[i].find(c)]; };
  // `v` (labelled `from`) transposed to the label order `to` (a permutation of `from`).
  auto reorder = [&](NodeId v, const std::string& from, const std::string& to) -> Result<NodeId> {
    std::vector<int64_t> perm;
    bool identity = true;
    for (char c : to) {
      perm.push_back(int64_t(from.find(c)));
      identity = identity && perm.back() == int64_t(perm.size() - 1);
    }
    if (identity) return v;
    return im.add(OpKind::kTranspose, {v}, ir::TransposeAttrs{perm});
  };
  // The number of elements spanned by `labels` of operand i.
  auto product = [&](size_t i, const std::string& labels) -> Result<ir::Dim> {
    ir::Shape dims;
    for (char c : labels) dims.push_back(dim_of(i, c));
    KILN_ASSIGN_OR_RETURN(auto layout, im.row_major_strides(dims));
    return layout.second;
  };
  std::string result_labels;
  NodeId y;
  if (terms.size() == 1) {
    y = x[0];
    result_labels = terms[0];
  } else {
    std::string batch, contracted, a_free, b_free;
    for (char c : terms[0]) {
      const bool in_b = terms[1].find(c) != std::string::npos, in_out = out.find(c) != std::string::npos;
      (in_b ? (in_out ? batch : contracted) : a_free) += c;
    }
    for (char c : terms[1])
      if (terms[0].find(c) == std::string::npos) b_free += c;
    for (char c : batch + contracted) {
      if (dim_of(0, c) != dim_of(1, c)) return im.unsupported("label '" + std::string(1, c) + "' has different sizes in the operands (broadcasting)");
    }
    KILN_ASSIGN_OR_RETURN(NodeId a, reorder(x[0], terms[0], batch + a_free + contracted));
    KILN_ASSIGN_OR_RETURN(NodeId b, reorder(x[1], terms[1], batch + contracted + b_free));
    ir::Shape batch_dims;
    for (char c : batch) batch_dims.push_back(dim_of(0, c));
    KILN_ASSIGN_OR_RETURN(ir::Dim m, product(0, a_free));
    KILN_ASSIGN_OR_RETURN(ir::Dim k, product(0, contracted));
    KILN_ASSIGN_OR_RETURN(ir::Dim n, product(1, b_free));
    ir::Shape a3 = batch_dims, b3 = batch_dims, full = batch_dims;
    a3.insert(a3.end(), {m, k});
    b3.insert(b3.end(), {k, n});
    for (char c : a_free) full.push_back(dim_of(0, c));
    for (char c : b_free) full.push_back(dim_of(1, c));
    KILN_ASSIGN_OR_RETURN(a, im.reshape(a, a3));
    KILN_ASSIGN_OR_RETURN(b, im.reshape(b, b3));
    KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kMatMul, {a, b}));
    KILN_ASSIGN_OR_RETURN(y, im.reshape(y, full));
    result_labels = batch + a_free + b_free;
  }
  if (result_labels.size() != out.size()) return im.error("the output labels do not match the operands'");
  for (char c : out) {
    if (result_labels.find(c) == std::string::npos) return im.error("output label '" + std::string(1, c) + "' is in no operand");
  }
  KILN_ASSIGN_OR_RETURN(y, reorder(y, result_labels, out));
  return im.set_output(0, y);
}

void register_extra_ops(std::map<std::string, Converter>& t) {
  t["Einsum"] = einsum_op;
  t["OptionalHasElement"] = optional_has_element;
  t["OptionalGetElement"] = optional_get_element;
  t["BitCast"] = bit_cast;
  t["Tan"] = tan_op;
  t["Asin"] = inverse_sine(false);
  t["CumSum"] = cumulative_op(false);
  t["CumProd"] = cumulative_op(true);
  t["Acos"] = inverse_sine(true);
  t["Sinh"] = hyperbolic(false);
  t["Cosh"] = hyperbolic(true);
  t["Asinh"] = inverse_hyperbolic(0);
  t["Acosh"] = inverse_hyperbolic(1);
  t["Atanh"] = inverse_hyperbolic(2);
  t["IsNaN"] = isnan_op;
  t["IsInf"] = isinf_op;
  t["Shrink"] = shrink_op;
  t["Trilu"] = trilu_op;
  t["Split"] = split_op;
  t["Hardmax"] = hardmax_op;
  t["EyeLike"] = eyelike_op;
  t["Tile"] = tile_op;
  t["DepthToSpace"] = depth_space(true);
  t["SpaceToDepth"] = depth_space(false);
  t["CastLike"] = cast_like;
  t["Pad"] = pad_op;
  t["OneHot"] = one_hot;
  t["CenterCropPad"] = center_crop_pad;
}

}  // namespace kiln::onnx_import
