// GridSample (opsets 16, 20, 22) and AffineGrid (opset 20) as decompositions into gathers and
// elementwise arithmetic.
//
// GridSample reads X [N, C, D_1..D_r] at positions that only the run-time grid [N, O_1..O_r, r]
// knows, so, unlike Resize, its taps cannot be worked out at import. For each spatial axis the
// importer emits elementwise arithmetic on the grid's component for that axis (the last component
// is the first axis' coordinate: x is width): the normalized coordinate mapped to input
// positions, the padding mode's coordinate rule, and for the mode's taps along the axis
// (nearest 1, linear 2, cubic 4) their integral input positions and weights, laid along a dim of
// their own. Broadcasting these per-axis tensors together gives every combination of taps at
// once: one gather of rows of X laid out as [N * D_1 * .. * D_r, C] (so the offset arithmetic is
// not repeated per channel) reads them all, zeros padding masks those outside, and one
// reduce_sum over the tap dims weighs them; the result is transposed back to [N, C, O_1..O_r].
// (A gather per combination would leave 16 or 64 gathered tensors feeding one fused sum: more
// buffers than a Vulkan kernel may bind.) The rules are those of the ONNX reference
// implementation (onnx/reference/ops/op_grid_sample.py), which follows PyTorch's grid_sample,
// down to which comparisons are strict.
//
// The coordinates are computed in f32 (a f16 or bf16 grid is widened first: the reference maps
// coordinates in float32 too); X's spatial dims must be static, N and C may be symbolic.
//
// AffineGrid: the output grid is theta applied to the homogeneous base grid of normalized
// positions (constants from the static `size`), as a sum of broadcast products.
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::DType;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

enum class Interpolation { kNearest, kLinear, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

// Keys' cubic convolution coefficient, fixed by ONNX's GridSample (and PyTorch's bicubic).
constexpr double kCubicA = -0.75;

// Elementwise helpers over f32 node values, so the formulas below read as formulas.
class Arith {
 public:
  explicit Arith(Importer& im) : im_(im) {}
  Result<NodeId> c(double v) { return im_.scalar(v, DType::kF32); }
  Result<NodeId> op(OpKind k, NodeId a, NodeId b) { return im_.apply(k, {a, b}); }
  Result<NodeId> op(OpKind k, NodeId a, double b) {
    KILN_ASSIGN_OR_RETURN(NodeId bc, c(b));
    return im_.apply(k, {a, bc});
  }
  Result<NodeId> op(OpKind k, double a, NodeId b) {
    KILN_ASSIGN_OR_RETURN(NodeId ac, c(a));
    return im_.apply(k, {ac, b});
  }
  Result<NodeId> where(NodeId cond, NodeId a, NodeId b) { return im_.apply(OpKind::kWhere, {cond, a, b}); }
  Result<NodeId> where(NodeId cond, double a, NodeId b) {
    KILN_ASSIGN_OR_RETURN(NodeId ac, c(a));
    return where(cond, ac, b);
  }
  Result<NodeId> where(NodeId cond, NodeId a, double b) {
    KILN_ASSIGN_OR_RETURN(NodeId bc, c(b));
    return where(cond, a, bc);
  }
  Result<NodeId> floor(NodeId x) { return im_.apply(OpKind::kFloor, {x}); }

 private:
  Importer& im_;
};

// The coordinate bounds of an axis of `size` positions: the outer edges of the edge pixels, or
// their centres with align_corners. Reflection mirrors at these bounds.
struct AxisBounds {
  double lo, hi;
};
AxisBounds bounds_of(int64_t size, bool align_corners) {
  if (align_corners) return {0.0, double(size - 1)};
  return {-0.5, double(size) - 0.5};
}

// The reference's _gs_reflect: v mirrored at lo and hi, as often as it takes to land in
// [lo, hi] (unchanged inside). With d the distance past the bound it crossed and
// n = trunc(d / (hi - lo)) the number of whole extents in it, the result is d - n * extent from
// the crossed bound when n is even and from the other bound when n is odd.
Result<NodeId> reflect(Importer& im, NodeId v, AxisBounds b) {
  Arith a(im);
  KILN_ASSIGN_OR_RETURN(NodeId below, a.op(OpKind::kLess, v, b.lo));
  KILN_ASSIGN_OR_RETURN(NodeId above, a.op(OpKind::kGreater, v, b.hi));
  KILN_ASSIGN_OR_RETURN(NodeId past_lo, a.op(OpKind::kSub, b.lo, v));
  KILN_ASSIGN_OR_RETURN(NodeId past_hi, a.op(OpKind::kSub, v, b.hi));
  KILN_ASSIGN_OR_RETURN(NodeId zero, a.c(0));
  KILN_ASSIGN_OR_RETURN(NodeId distance, a.where(above, past_hi, zero));
  KILN_ASSIGN_OR_RETURN(distance, a.where(below, past_lo, distance));
  const double extent = b.hi - b.lo;
  KILN_ASSIGN_OR_RETURN(NodeId flips, a.op(OpKind::kDiv, distance, extent));
  KILN_ASSIGN_OR_RETURN(flips, a.floor(flips));  // distance >= 0: floor is the reference's int()
  KILN_ASSIGN_OR_RETURN(NodeId whole, a.op(OpKind::kMul, flips, extent));
  KILN_ASSIGN_OR_RETURN(NodeId rest, a.op(OpKind::kSub, distance, whole));
  KILN_ASSIGN_OR_RETURN(NodeId parity, a.op(OpKind::kFmod, flips, 2.0));
  KILN_ASSIGN_OR_RETURN(NodeId odd, a.op(OpKind::kNotEqual, parity, 0.0));
  // Measured from lo when it crossed lo an even number of times or hi an odd number of times.
  KILN_ASSIGN_OR_RETURN(NodeId from_lo, im.apply(OpKind::kXor, {below, odd}));
  KILN_ASSIGN_OR_RETURN(NodeId lo_plus, a.op(OpKind::kAdd, b.lo, rest));
  KILN_ASSIGN_OR_RETURN(NodeId hi_minus, a.op(OpKind::kSub, b.hi, rest));
  KILN_ASSIGN_OR_RETURN(NodeId reflected, a.where(from_lo, lo_plus, hi_minus));
  KILN_ASSIGN_OR_RETURN(NodeId outside, im.apply(OpKind::kOr, {below, above}));
  return a.where(outside, reflected, v);
}

// v where it lies in [lo, hi], else the nearest pixel index (0 or size - 1). This is the
// reference's border rule for coordinates: without align_corners a coordinate within half a
// pixel outside the edge centres stays as it is (which matters to cubic's outer taps).
Result<NodeId> clamp_outside(Importer& im, NodeId v, AxisBounds b, int64_t size) {
  Arith a(im);
  KILN_ASSIGN_OR_RETURN(NodeId below, a.op(OpKind::kLess, v, b.lo));
  KILN_ASSIGN_OR_RETURN(NodeId above, a.op(OpKind::kGreater, v, b.hi));
  KILN_ASSIGN_OR_RETURN(NodeId last, a.c(double(size - 1)));
  KILN_ASSIGN_OR_RETURN(NodeId y, a.where(above, last, v));
  return a.where(below, 0.0, y);
}

// The padding mode's rule for a coordinate or an integral position along an axis of `size`.
// With a single position and align_corners, reflection has no extent to mirror in (the
// reference divides by zero): every position maps to the only pixel, as PyTorch's
// reflect_coordinates has it, which is the border rule there.
Result<NodeId> pad_position(Importer& im, NodeId v, Padding padding, AxisBounds b, int64_t size) {
  switch (padding) {
    case Padding::kZeros:
      return v;
    case Padding::kBorder:
      return clamp_outside(im, v, b, size);
    case Padding::kReflection:
      if (b.hi == b.lo) return clamp_outside(im, v, b, size);
      return reflect(im, v, b);
  }
  return v;
}

// The taps along one spatial axis, in the taps layout (see grid_sample): the i64 input index
// to read, the weight (f32; kNoNode: 1) and, for zeros padding, where the tap lies inside the
// input (kNoNode: everywhere).
struct AxisTaps {
  NodeId index = ir::kNoNode;
  NodeId weight = ir::kNoNode;
  NodeId inside = ir::kNoNode;
};

// A constant of `values` in the taps layout of rank `rank`, along dim `dim`.
Result<NodeId> along(Importer& im, const std::vector<double>& values, DType dtype, int64_t dim, int64_t rank) {
  std::vector<int64_t> shape(size_t(rank), 1);
  shape[size_t(dim)] = int64_t(values.size());
  KILN_ASSIGN_OR_RETURN(ir::Tensor data, ir::Tensor::zeros(dtype, shape));
  for (size_t i = 0; i < values.size(); ++i) data.set_element_from_double(int64_t(i), values[i]);
  return im.add_constant(std::move(data), "grid_taps");
}

// The cubic convolution weights of the taps at distance `distance` from the coordinate, where
// `outer` says which taps are the outer ones (x0 - 1 and x0 + 2, at distances in [1, 2]);
// the formulas are the reference's.
Result<NodeId> cubic_weights(Importer& im, NodeId distance, NodeId outer) {
  Arith a(im);
  const double A = kCubicA;
  const NodeId s = distance;
  // Outer taps: ((A * s - 5A) * s + 8A) * s - 4A.
  KILN_ASSIGN_OR_RETURN(NodeId o, a.op(OpKind::kMul, s, A));
  KILN_ASSIGN_OR_RETURN(o, a.op(OpKind::kSub, o, 5 * A));
  KILN_ASSIGN_OR_RETURN(o, a.op(OpKind::kMul, o, s));
  KILN_ASSIGN_OR_RETURN(o, a.op(OpKind::kAdd, o, 8 * A));
  KILN_ASSIGN_OR_RETURN(o, a.op(OpKind::kMul, o, s));
  KILN_ASSIGN_OR_RETURN(o, a.op(OpKind::kSub, o, 4 * A));
  // Inner taps: ((A + 2) * s - (A + 3)) * s * s + 1.
  KILN_ASSIGN_OR_RETURN(NodeId i, a.op(OpKind::kMul, s, A + 2));
  KILN_ASSIGN_OR_RETURN(i, a.op(OpKind::kSub, i, A + 3));
  KILN_ASSIGN_OR_RETURN(i, a.op(OpKind::kMul, i, s));
  KILN_ASSIGN_OR_RETURN(i, a.op(OpKind::kMul, i, s));
  KILN_ASSIGN_OR_RETURN(i, a.op(OpKind::kAdd, i, 1.0));
  return a.where(outer, o, i);
}

// The taps along spatial axis `axis` (of `size` positions) for the normalized coordinates
// `normalized` (f32, [N, O_1..O_r, 1, .., 1]); the taps vary along dim `tap_dim`.
Result<AxisTaps> axis_taps(Importer& im, NodeId normalized, int64_t size, Interpolation mode, Padding padding,
                           bool align_corners, int64_t tap_dim, int64_t rank) {
  Arith a(im);
  const AxisBounds b = bounds_of(size, align_corners);
  // Unnormalize: [-1, 1] spans the edge centres (align_corners) or the outer edges.
  KILN_ASSIGN_OR_RETURN(NodeId x, a.op(OpKind::kAdd, normalized, 1.0));
  if (align_corners) {
    KILN_ASSIGN_OR_RETURN(x, a.op(OpKind::kMul, x, double(size - 1) / 2));
  } else {
    KILN_ASSIGN_OR_RETURN(x, a.op(OpKind::kMul, x, double(size) / 2));
    KILN_ASSIGN_OR_RETURN(x, a.op(OpKind::kSub, x, 0.5));
  }
  // Nearest rounds half to even (the reference's np.rint, PyTorch's nearbyint) before padding.
  if (mode == Interpolation::kNearest) {
    KILN_ASSIGN_OR_RETURN(x, im.apply(OpKind::kRound, {x}));
  }
  KILN_ASSIGN_OR_RETURN(x, pad_position(im, x, padding, b, size));

  // The taps' positions (integral f32) and weights.
  AxisTaps taps;
  NodeId positions = x;
  if (mode != Interpolation::kNearest) {
    KILN_ASSIGN_OR_RETURN(NodeId x0, a.floor(x));
    KILN_ASSIGN_OR_RETURN(NodeId t, a.op(OpKind::kSub, x, x0));  // in [0, 1)
    const std::vector<double> offsets =
        mode == Interpolation::kLinear ? std::vector<double>{0, 1} : std::vector<double>{-1, 0, 1, 2};
    KILN_ASSIGN_OR_RETURN(NodeId offset, along(im, offsets, DType::kF32, tap_dim, rank));
    KILN_ASSIGN_OR_RETURN(positions, a.op(OpKind::kAdd, x0, offset));
    if (mode == Interpolation::kLinear) {
      // 1 - t for x0, t for x0 + 1 (picked, not computed as 1 - |t - 1|, to be the reference's).
      KILN_ASSIGN_OR_RETURN(NodeId right, along(im, {0, 1}, DType::kBool, tap_dim, rank));
      KILN_ASSIGN_OR_RETURN(NodeId one_minus_t, a.op(OpKind::kSub, 1.0, t));
      KILN_ASSIGN_OR_RETURN(taps.weight, a.where(right, t, one_minus_t));
    } else {
      // Distances t + 1, t, 1 - t, 2 - t.
      KILN_ASSIGN_OR_RETURN(NodeId distance, a.op(OpKind::kSub, t, offset));
      KILN_ASSIGN_OR_RETURN(distance, im.apply(OpKind::kAbs, {distance}));
      KILN_ASSIGN_OR_RETURN(NodeId outer, along(im, {1, 0, 0, 1}, DType::kBool, tap_dim, rank));
      KILN_ASSIGN_OR_RETURN(taps.weight, cubic_weights(im, distance, outer));
    }
    // Each tap reads through the padding rule again (the reference's _pixel_at_array): a
    // neighbour of an in-range coordinate may still lie outside.
    KILN_ASSIGN_OR_RETURN(positions, pad_position(im, positions, padding, b, size));
  }
  // Inside the input: only zeros padding reads outside, but a NaN coordinate fails this too
  // under every mode, so the index read is always a valid one (0 for NaN).
  KILN_ASSIGN_OR_RETURN(NodeId not_below, a.op(OpKind::kGreaterEqual, positions, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId not_above, a.op(OpKind::kLessEqual, positions, double(size - 1)));
  KILN_ASSIGN_OR_RETURN(NodeId inside, im.apply(OpKind::kAnd, {not_below, not_above}));
  KILN_ASSIGN_OR_RETURN(NodeId safe, a.where(inside, positions, 0.0));
  KILN_ASSIGN_OR_RETURN(taps.index, im.add(OpKind::kCast, {safe}, ir::CastAttrs{DType::kI64}));
  if (padding == Padding::kZeros) taps.inside = inside;
  return taps;
}

Result<Interpolation> interpolation_of(Importer& im) {
  // Opset 20 renamed bilinear and bicubic to linear and cubic (they now cover N-D).
  const bool renamed = im.opset >= 20;
  const std::string mode = im.attr_string("mode", renamed ? "linear" : "bilinear");
  if (mode == "nearest") return Interpolation::kNearest;
  if (mode == (renamed ? "linear" : "bilinear")) return Interpolation::kLinear;
  if (mode == (renamed ? "cubic" : "bicubic")) return Interpolation::kCubic;
  if (renamed && (mode == "bilinear" || mode == "bicubic")) {
    return im.error("mode='" + mode + "' is the opset 16-19 spelling; from opset 20 it is '" + mode.substr(2) + "'");
  }
  if (!renamed && (mode == "linear" || mode == "cubic")) {
    return im.error("mode='" + mode + "' needs opset 20; before it is 'bi" + mode + "'");
  }
  return im.error("unknown mode '" + mode + "'");
}

// The grid's shape for r spatial dims, as the spec writes it.
std::string grid_form(int64_t r) {
  if (r == 1) return "[N, W_out, 1]";
  if (r == 2) return "[N, H_out, W_out, 2]";
  if (r == 3) return "[N, D_out, H_out, W_out, 3]";
  return "[N, D1_out, .., D" + std::to_string(r) + "_out, " + std::to_string(r) + "]";
}

Status grid_sample(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Interpolation mode, interpolation_of(im));
  const std::string padding_name = im.attr_string("padding_mode", "zeros");
  Padding padding;
  if (padding_name == "zeros") padding = Padding::kZeros;
  else if (padding_name == "border") padding = Padding::kBorder;
  else if (padding_name == "reflection") padding = Padding::kReflection;
  else return im.error("unknown padding_mode '" + padding_name + "'");
  const bool align_corners = im.attr_int("align_corners", 0) != 0;

  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId grid, im.input(1));
  const ir::TensorType xt = im.type(x), gt = im.type(grid);  // copies: adding nodes moves types
  const int64_t rank = xt.rank(), r = rank - 2;
  if (rank < 3) return im.error("X must have rank 3 or more (N, C and at least one spatial dim)");
  if (im.opset < 20 && rank != 4) return im.error("X must be 4-D (N, C, H, W) before opset 20");
  if (gt.rank() != rank || gt.shape.back() != Dim::of(r)) {
    return im.error("grid must be " + grid_form(r) + " for X of rank " + std::to_string(rank) + ", got " +
                    gt.to_string());
  }
  if (xt.shape[0].is_static() && gt.shape[0].is_static() && xt.shape[0] != gt.shape[0]) {
    return im.error("X and grid differ in N (" + xt.shape[0].to_string() + " and " + gt.shape[0].to_string() + ")");
  }
  if (!ir::is_float(gt.dtype)) return im.error("grid must be a float tensor, got " + gt.to_string());
  if (mode != Interpolation::kNearest && !ir::is_float(xt.dtype)) {
    return im.unsupported("linear and cubic modes need a float X, got " + std::string(ir::dtype_name(xt.dtype)) +
                          " (mode='nearest' takes any dtype)");
  }
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < r; ++d) {
    const Dim& dim = xt.shape[size_t(2 + d)];
    if (!dim.is_static()) {
      return im.unsupported("X's spatial dims must be static (dim " + std::to_string(2 + d) + " is " +
                            dim.to_string() + ")");
    }
    if (dim.size() < 1) return im.unsupported("an empty spatial dim in X");
    sizes.push_back(dim.size());
  }

  // X as rows of C values: [N * D_1 * .. * D_r, C].
  std::vector<int64_t> to_channels_last = {0};
  for (int64_t d = 0; d < r; ++d) to_channels_last.push_back(2 + d);
  to_channels_last.push_back(1);
  KILN_ASSIGN_OR_RETURN(NodeId rows, im.add(OpKind::kTranspose, {x}, ir::TransposeAttrs{to_channels_last}));
  Dim pixels = Dim::of(1);
  for (int64_t s : sizes) pixels = Dim::of(pixels.size() * s);
  const std::optional<Dim> row_count = Dim::product(xt.shape[0], pixels);
  if (!row_count) return im.unsupported("X has more elements than Kiln can index");
  KILN_ASSIGN_OR_RETURN(rows, im.reshape(rows, {*row_count, xt.shape[1]}));

  // The taps layout, [N, O_1..O_r, T_1..T_r, 1]: the output positions, one dim per axis for its
  // taps (1 for nearest, 2 for linear, 4 for cubic), and a unit dim where the gathered rows
  // hold C. Every combination of taps is then one index of a single gather, and the weighted
  // sum one reduction, whatever the mode and rank.
  const int64_t taps_rank = 2 * r + 2;
  Shape positions_shape(gt.shape.begin(), gt.shape.end() - 1);  // [N, O_1..O_r]
  Shape coordinate_shape = positions_shape;
  coordinate_shape.resize(size_t(taps_rank), Dim::of(1));
  if (gt.dtype != DType::kF32) {
    KILN_ASSIGN_OR_RETURN(grid, im.add(OpKind::kCast, {grid}, ir::CastAttrs{DType::kF32}));
  }
  // The linear input row of each tap combination: the batch entry's first row, plus each
  // axis' index times its stride.
  NodeId offset = ir::kNoNode, weight = ir::kNoNode, inside = ir::kNoNode;
  if (!gt.shape[0].is_one()) {
    KILN_ASSIGN_OR_RETURN(offset, im.iota(gt.shape[0], 0, taps_rank));
    KILN_ASSIGN_OR_RETURN(offset, im.times_size(offset, pixels));
  }
  int64_t stride = 1;
  for (int64_t d = r - 1; d >= 0; --d) {
    // The grid's component r - 1 - d is axis d's coordinate (x, the first, is the last axis).
    const int64_t component = r - 1 - d;
    KILN_ASSIGN_OR_RETURN(NodeId normalized,
                          im.add(OpKind::kSlice, {grid}, ir::SliceAttrs{{component}, {component + 1}, {rank - 1}, {1}}));
    KILN_ASSIGN_OR_RETURN(normalized, im.reshape(normalized, coordinate_shape));
    KILN_ASSIGN_OR_RETURN(AxisTaps taps, axis_taps(im, normalized, sizes[size_t(d)], mode, padding, align_corners,
                                                   /*tap_dim=*/r + 1 + d, taps_rank));
    KILN_ASSIGN_OR_RETURN(NodeId term, im.times_size(taps.index, Dim::of(stride)));
    KILN_ASSIGN_OR_RETURN(offset, im.add_term(offset, term));
    if (taps.weight != ir::kNoNode) {
      KILN_ASSIGN_OR_RETURN(weight, weight == ir::kNoNode ? taps.weight : im.apply(OpKind::kMul, {weight, taps.weight}));
    }
    if (taps.inside != ir::kNoNode) {
      KILN_ASSIGN_OR_RETURN(inside, inside == ir::kNoNode ? taps.inside : im.apply(OpKind::kAnd, {inside, taps.inside}));
    }
    stride *= sizes[size_t(d)];
  }
  // Without its unit C dim, the offsets index rows: the gather gives [N, O.., T.., C].
  Shape offset_shape = im.type(offset).shape;
  offset_shape.pop_back();
  KILN_ASSIGN_OR_RETURN(offset, im.reshape(offset, offset_shape));
  KILN_ASSIGN_OR_RETURN(NodeId value, im.add(OpKind::kGather, {rows, offset}, ir::AxisAttrs{0}));
  if (inside != ir::kNoNode) {
    // A tap outside reads 0 (not weight times the clamped pixel read instead: that could be
    // inf * 0).
    KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0, xt.dtype));
    KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kWhere, {inside, value, zero}));
  }
  NodeId sum = value;
  if (mode == Interpolation::kNearest) {
    // One tap per axis: the tap dims are units.
    Shape out_shape = positions_shape;
    out_shape.push_back(xt.shape[1]);
    KILN_ASSIGN_OR_RETURN(sum, im.reshape(value, out_shape));
  } else {
    // A f16 or bf16 X is weighed in f32 and rounded once: its weights rounded to its dtype
    // would cost as much precision as the cubic sum's cancellations have (about 1e-3 of X).
    if (xt.dtype != DType::kF32) {
      KILN_ASSIGN_OR_RETURN(value, im.add(OpKind::kCast, {value}, ir::CastAttrs{DType::kF32}));
    }
    KILN_ASSIGN_OR_RETURN(NodeId weighted, im.apply(OpKind::kMul, {value, weight}));
    std::vector<int64_t> tap_dims;
    for (int64_t d = 0; d < r; ++d) tap_dims.push_back(r + 1 + d);
    KILN_ASSIGN_OR_RETURN(sum, im.add(OpKind::kReduceSum, {weighted},
                                      ir::ReduceAttrs{.axes = tap_dims, .all_axes = false, .keepdims = false}));
    if (xt.dtype != DType::kF32) {
      KILN_ASSIGN_OR_RETURN(sum, im.add(OpKind::kCast, {sum}, ir::CastAttrs{xt.dtype}));
    }
  }

  // [N, O_1..O_r, C] -> [N, C, O_1..O_r].
  std::vector<int64_t> to_channels_first = {0, r + 1};
  for (int64_t d = 0; d < r; ++d) to_channels_first.push_back(1 + d);
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kTranspose, {sum}, ir::TransposeAttrs{to_channels_first}));
  return im.set_output(0, y);
}

// The normalized positions of `size` pixels along an axis: their centres in [-1, 1] spanning
// the edges, or the edge centres at -1 and 1 with align_corners. A single pixel sits at 0
// (PyTorch's affine_grid; the ONNX reference divides by zero for it with align_corners).
std::vector<double> base_positions(int64_t size, bool align_corners) {
  std::vector<double> p(size_t(size), 0.0);
  for (int64_t i = 0; i < size; ++i) {
    if (align_corners) {
      if (size > 1) p[size_t(i)] = -1.0 + double(i) * 2.0 / double(size - 1);
    } else {
      p[size_t(i)] = -1.0 + double(2 * i + 1) / double(size);
    }
  }
  return p;
}

Status affine_grid(Importer& im) {
  const bool align_corners = im.attr_int("align_corners", 0) != 0;
  KILN_ASSIGN_OR_RETURN(NodeId theta, im.input(0));
  KILN_ASSIGN_OR_RETURN(Shape size, im.input_dims(1, "size"));
  const ir::TensorType tt = im.type(theta);  // a copy: adding nodes moves types
  if (size.size() != 4 && size.size() != 5) {
    return im.error("size must hold 4 (N, C, H, W) or 5 (N, C, D, H, W) entries, got " + std::to_string(size.size()));
  }
  const int64_t r = int64_t(size.size()) - 2;
  if (tt.rank() != 3 || tt.shape[1] != Dim::of(r) || tt.shape[2] != Dim::of(r + 1)) {
    return im.error("theta must be [N, " + std::to_string(r) + ", " + std::to_string(r + 1) + "] for a " +
                    std::to_string(r) + "-D size, got " + tt.to_string());
  }
  if (!ir::is_float(tt.dtype)) return im.error("theta must be a float tensor, got " + tt.to_string());
  if (size[0].is_static() && tt.shape[0].is_static() && size[0] != tt.shape[0]) {
    return im.error("size[0] (" + size[0].to_string() + ") differs from theta's N (" + tt.shape[0].to_string() + ")");
  }
  std::vector<int64_t> extents;
  for (int64_t d = 0; d < r; ++d) {
    const Dim& dim = size[size_t(2 + d)];
    if (!dim.is_static()) {
      return im.unsupported("size's spatial entries must be constants (computed at import); entry " +
                            std::to_string(2 + d) + " is " + dim.to_string());
    }
    if (dim.size() < 1) {
      return im.unsupported("an empty output grid (size entry " + std::to_string(2 + d) + " is " + dim.to_string() +
                            ")");
    }
    // The base positions along each axis are a constant of that many elements.
    KILN_RETURN_IF_ERROR(check_import_size(im, {dim}, "AffineGrid's base grid"));
    extents.push_back(dim.size());
  }

  // Column k of theta as [N, 1, .., 1, r]: what base coordinate k contributes to each output
  // component.
  auto column = [&](int64_t k) -> Result<NodeId> {
    KILN_ASSIGN_OR_RETURN(NodeId col, im.add(OpKind::kSlice, {theta}, ir::SliceAttrs{{k}, {k + 1}, {2}, {1}}));
    Shape shape(size_t(r + 2), Dim::of(1));
    shape.front() = tt.shape[0];
    shape.back() = Dim::of(r);
    return im.reshape(col, shape);
  };
  // grid = theta[:, :, r] + sum_k base_k * theta[:, :, k], base_k the normalized position along
  // the axis of component k (x: the last axis).
  KILN_ASSIGN_OR_RETURN(NodeId grid, column(r));
  for (int64_t k = 0; k < r; ++k) {
    const int64_t axis = r - 1 - k;  // among the spatial axes
    const std::vector<double> positions = base_positions(extents[size_t(axis)], align_corners);
    std::vector<int64_t> shape(size_t(r + 2), 1);
    shape[size_t(1 + axis)] = extents[size_t(axis)];
    KILN_ASSIGN_OR_RETURN(ir::Tensor data, ir::Tensor::zeros(tt.dtype, shape));
    for (size_t i = 0; i < positions.size(); ++i) data.set_element_from_double(int64_t(i), positions[i]);
    const NodeId base = im.add_constant(std::move(data), "affine_base");
    KILN_ASSIGN_OR_RETURN(NodeId col, column(k));
    KILN_ASSIGN_OR_RETURN(NodeId term, im.apply(OpKind::kMul, {base, col}));
    KILN_ASSIGN_OR_RETURN(grid, im.apply(OpKind::kAdd, {grid, term}));
  }
  return im.set_output(0, grid);
}

}  // namespace

void register_grid_ops(std::map<std::string, Converter>& t) {
  t["GridSample"] = grid_sample;
  t["AffineGrid"] = affine_grid;
}

}  // namespace kiln::onnx_import
