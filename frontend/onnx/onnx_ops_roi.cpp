// Converter for ONNX RoiAlign (opsets 10, 16, 22) as elementwise arithmetic on the boxes, four
// gathers from the flattened input and a pooling reduction over each output bin's samples.
#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::DType;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

// One axis of the sampling grid: for every box and sample along the axis, the two neighbouring
// input positions, their interpolation weights and whether the sample lies within the input
// (ONNX's reference: samples beyond [-1, size] contribute 0; coordinates below 0 clamp to 0; a
// low neighbour at or past the last position becomes the last position, with weight on it alone).
struct AxisSamples {
  NodeId low, high;           // i64 positions, [R, samples]
  NodeId low_weight, high_weight;  // f32, [R, samples]
  NodeId inside;              // bool, [R, samples]
};

Result<AxisSamples> axis_samples(Importer& im, NodeId start, NodeId bin, int64_t bins, int64_t grid, int64_t size) {
  // Sample k = b * grid + g sits at start + b * bin + (g + 0.5) * bin / grid, in that order of
  // operations, as the reference computes it.
  std::vector<float> bin_index, grid_offset;
  for (int64_t b = 0; b < bins; ++b) {
    for (int64_t g = 0; g < grid; ++g) {
      bin_index.push_back(float(b));
      grid_offset.push_back(float(g) + 0.5f);
    }
  }
  auto row = [&](const std::vector<float>& v) -> Result<NodeId> {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(DType::kF32, {1, int64_t(v.size())}));
    for (size_t i = 0; i < v.size(); ++i) t.mutable_data_as<float>()[i] = v[i];
    return im.add_constant(std::move(t), "roi_grid");
  };
  KILN_ASSIGN_OR_RETURN(NodeId bin_c, row(bin_index));
  KILN_ASSIGN_OR_RETURN(NodeId offset_c, row(grid_offset));
  KILN_ASSIGN_OR_RETURN(NodeId grid_c, im.scalar(double(grid), DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId pos, im.apply(OpKind::kMul, {bin_c, bin}));
  KILN_ASSIGN_OR_RETURN(pos, im.apply(OpKind::kAdd, {start, pos}));
  KILN_ASSIGN_OR_RETURN(NodeId within, im.apply(OpKind::kMul, {offset_c, bin}));
  KILN_ASSIGN_OR_RETURN(within, im.apply(OpKind::kDiv, {within, grid_c}));
  KILN_ASSIGN_OR_RETURN(pos, im.apply(OpKind::kAdd, {pos, within}));

  AxisSamples s;
  KILN_ASSIGN_OR_RETURN(NodeId minus_one, im.scalar(-1.0, DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId extent, im.scalar(double(size), DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId above, im.apply(OpKind::kGreaterEqual, {pos, minus_one}));
  KILN_ASSIGN_OR_RETURN(NodeId below, im.apply(OpKind::kLessEqual, {pos, extent}));
  KILN_ASSIGN_OR_RETURN(s.inside, im.apply(OpKind::kAnd, {above, below}));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, DType::kF32));
  KILN_ASSIGN_OR_RETURN(pos, im.apply(OpKind::kMaximum, {pos, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId low, im.apply(OpKind::kFloor, {pos}));
  KILN_ASSIGN_OR_RETURN(NodeId last, im.scalar(double(size - 1), DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId at_end, im.apply(OpKind::kGreaterEqual, {low, last}));
  KILN_ASSIGN_OR_RETURN(low, im.apply(OpKind::kWhere, {at_end, last, low}));
  KILN_ASSIGN_OR_RETURN(pos, im.apply(OpKind::kWhere, {at_end, last, pos}));
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1.0, DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId high, im.apply(OpKind::kAdd, {low, one}));
  KILN_ASSIGN_OR_RETURN(high, im.apply(OpKind::kWhere, {at_end, last, high}));
  KILN_ASSIGN_OR_RETURN(s.high_weight, im.apply(OpKind::kSub, {pos, low}));
  KILN_ASSIGN_OR_RETURN(s.low_weight, im.apply(OpKind::kSub, {one, s.high_weight}));
  KILN_ASSIGN_OR_RETURN(s.low, im.add(OpKind::kCast, {low}, ir::CastAttrs{DType::kI64}));
  KILN_ASSIGN_OR_RETURN(s.high, im.add(OpKind::kCast, {high}, ir::CastAttrs{DType::kI64}));
  return s;
}

// Column `i` of the [R, 4] boxes, as [R, 1] f32.
Result<NodeId> box_column(Importer& im, NodeId rois, int64_t i) {
  KILN_ASSIGN_OR_RETURN(NodeId column, im.add(OpKind::kSlice, {rois}, ir::SliceAttrs{{i}, {i + 1}, {1}, {1}}));
  if (im.type(column).dtype == DType::kF32) return column;
  return im.add(OpKind::kCast, {column}, ir::CastAttrs{DType::kF32});
}

// RoiAlign(X [N, C, H, W], rois [R, 4] as (x1, y1, x2, y2), batch_indices [R]) -> [R, C, PH, PW]:
// each output bin is the average (or the maximum) of sampling_ratio^2 bilinear samples, with
// ONNX's reference's boundary rules. The sampling grid must be fixed (sampling_ratio > 0): with
// 0 it depends on each box's size, a shape that only the data decides.
Status roi_align(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId rois, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId batch_indices, im.input(2));
  const Shape xs = im.type(x).shape;
  if (xs.size() != 4 || !ir::is_float(im.type(x).dtype)) return im.error("X must be a float tensor [N, C, H, W]");
  if (!ir::is_static_from(xs, 1)) return im.unsupported("RoiAlign needs static channels, height and width");
  const Shape rs = im.type(rois).shape;
  if (rs.size() != 2 || rs[1] != Dim::of(4) || !ir::is_float(im.type(rois).dtype)) {
    return im.error("rois must be a float tensor [num_rois, 4]");
  }
  if (im.type(batch_indices).shape != Shape{rs[0]}) return im.error("batch_indices must hold one index per box");
  const std::string mode = im.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") return im.error("unknown mode '" + mode + "'");
  const std::string transform = im.attr_string("coordinate_transformation_mode", im.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (transform != "half_pixel" && transform != "output_half_pixel") {
    return im.error("unknown coordinate_transformation_mode '" + transform + "'");
  }
  const int64_t out_h = im.attr_int("output_height", 1), out_w = im.attr_int("output_width", 1);
  const int64_t grid = im.attr_int("sampling_ratio", 0);
  if (out_h < 1 || out_w < 1 || out_h > 4096 || out_w > 4096) return im.error("output_height and output_width must be in [1, 4096]");
  if (grid <= 0) {
    return im.unsupported("sampling_ratio=0 (a sampling grid sized by each box, known only from the data) is not supported");
  }
  if (grid > 64) return im.unsupported("sampling_ratio above 64 is not supported");
  const double scale = im.attr_float("spatial_scale", 1.0);
  const bool half_pixel = transform == "half_pixel";
  const int64_t channels = xs[1].size(), height = xs[2].size(), width = xs[3].size();

  KILN_ASSIGN_OR_RETURN(NodeId scale_c, im.scalar(scale, DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId offset_c, im.scalar(half_pixel ? 0.5 : 0.0, DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1.0, DType::kF32));
  // start and bin size of one axis from box columns `first` and `first + 2`.
  auto extent = [&](int64_t first, int64_t bins) -> Result<std::pair<NodeId, NodeId>> {
    KILN_ASSIGN_OR_RETURN(NodeId lo, box_column(im, rois, first));
    KILN_ASSIGN_OR_RETURN(NodeId hi, box_column(im, rois, first + 2));
    KILN_ASSIGN_OR_RETURN(lo, im.apply(OpKind::kMul, {lo, scale_c}));
    KILN_ASSIGN_OR_RETURN(lo, im.apply(OpKind::kSub, {lo, offset_c}));
    KILN_ASSIGN_OR_RETURN(hi, im.apply(OpKind::kMul, {hi, scale_c}));
    KILN_ASSIGN_OR_RETURN(hi, im.apply(OpKind::kSub, {hi, offset_c}));
    KILN_ASSIGN_OR_RETURN(NodeId length, im.apply(OpKind::kSub, {hi, lo}));
    if (!half_pixel) {
      KILN_ASSIGN_OR_RETURN(length, im.apply(OpKind::kMaximum, {length, one}));
    }
    KILN_ASSIGN_OR_RETURN(NodeId count, im.scalar(double(bins), DType::kF32));
    KILN_ASSIGN_OR_RETURN(NodeId bin, im.apply(OpKind::kDiv, {length, count}));
    return std::pair{lo, bin};
  };
  KILN_ASSIGN_OR_RETURN(auto ys, extent(1, out_h));
  KILN_ASSIGN_OR_RETURN(auto xs_, extent(0, out_w));
  KILN_ASSIGN_OR_RETURN(AxisSamples sy, axis_samples(im, ys.first, ys.second, out_h, grid, height));
  KILN_ASSIGN_OR_RETURN(AxisSamples sx, axis_samples(im, xs_.first, xs_.second, out_w, grid, width));

  // Samples over the grid: rows [R, SH, 1] against columns [R, 1, SW].
  const Dim boxes = rs[0];
  const Dim sh = Dim::of(out_h * grid), sw = Dim::of(out_w * grid);
  auto as_rows = [&](NodeId v) { return im.reshape(v, {boxes, sh, Dim::of(1)}); };
  auto as_cols = [&](NodeId v) { return im.reshape(v, {boxes, Dim::of(1), sw}); };
  KILN_ASSIGN_OR_RETURN(NodeId inside_y, as_rows(sy.inside));
  KILN_ASSIGN_OR_RETURN(NodeId inside_x, as_cols(sx.inside));
  KILN_ASSIGN_OR_RETURN(NodeId inside, im.apply(OpKind::kAnd, {inside_y, inside_x}));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, DType::kF32));

  // The input flattened; element (b, c, y, x) is at ((b * C + c) * H + y) * W + x.
  const std::optional<Dim> total = Dim::product(xs[0], Dim::of(channels * height * width));
  if (!total) return im.error("the input's size overflows");
  KILN_ASSIGN_OR_RETURN(NodeId flat, im.reshape(x, {*total}));
  KILN_ASSIGN_OR_RETURN(NodeId batch, im.add(OpKind::kCast, {batch_indices}, ir::CastAttrs{DType::kI64}));
  KILN_ASSIGN_OR_RETURN(batch, im.reshape(batch, {boxes, Dim::of(1), Dim::of(1), Dim::of(1)}));
  KILN_ASSIGN_OR_RETURN(NodeId plane, im.ints_constant({channels * height * width}));
  KILN_ASSIGN_OR_RETURN(plane, im.reshape(plane, {}));
  KILN_ASSIGN_OR_RETURN(NodeId base, im.apply(OpKind::kMul, {batch, plane}));
  KILN_ASSIGN_OR_RETURN(NodeId channel, im.iota(channels, 1, 4));
  KILN_ASSIGN_OR_RETURN(NodeId channel_size, im.ints_constant({height * width}));
  KILN_ASSIGN_OR_RETURN(channel_size, im.reshape(channel_size, {}));
  KILN_ASSIGN_OR_RETURN(channel, im.apply(OpKind::kMul, {channel, channel_size}));
  KILN_ASSIGN_OR_RETURN(base, im.apply(OpKind::kAdd, {base, channel}));  // [R, C, 1, 1]
  KILN_ASSIGN_OR_RETURN(NodeId row_size, im.ints_constant({width}));
  KILN_ASSIGN_OR_RETURN(row_size, im.reshape(row_size, {}));

  // One bilinear corner: its gathered values times its weight (0 outside the input).
  auto corner = [&](NodeId y, NodeId wy, NodeId x_pos, NodeId wx) -> Result<NodeId> {
    KILN_ASSIGN_OR_RETURN(NodeId yr, as_rows(y));
    KILN_ASSIGN_OR_RETURN(NodeId xc, as_cols(x_pos));
    KILN_ASSIGN_OR_RETURN(NodeId offset, im.apply(OpKind::kMul, {yr, row_size}));
    KILN_ASSIGN_OR_RETURN(offset, im.apply(OpKind::kAdd, {offset, xc}));  // [R, SH, SW]
    KILN_ASSIGN_OR_RETURN(offset, im.reshape(offset, {boxes, Dim::of(1), sh, sw}));
    KILN_ASSIGN_OR_RETURN(NodeId index, im.apply(OpKind::kAdd, {base, offset}));  // [R, C, SH, SW]
    KILN_ASSIGN_OR_RETURN(NodeId values, im.add(OpKind::kGather, {flat, index}, ir::AxisAttrs{0}));
    if (im.type(values).dtype != DType::kF32) {
      KILN_ASSIGN_OR_RETURN(values, im.add(OpKind::kCast, {values}, ir::CastAttrs{DType::kF32}));
    }
    KILN_ASSIGN_OR_RETURN(NodeId wyr, as_rows(wy));
    KILN_ASSIGN_OR_RETURN(NodeId wxc, as_cols(wx));
    KILN_ASSIGN_OR_RETURN(NodeId weight, im.apply(OpKind::kMul, {wyr, wxc}));
    KILN_ASSIGN_OR_RETURN(weight, im.apply(OpKind::kWhere, {inside, weight, zero}));
    KILN_ASSIGN_OR_RETURN(weight, im.reshape(weight, {boxes, Dim::of(1), sh, sw}));
    return im.apply(OpKind::kMul, {values, weight});
  };
  const OpKind combine = mode == "avg" ? OpKind::kAdd : OpKind::kMaximum;
  NodeId samples = ir::kNoNode;
  for (auto [y, wy] : {std::pair{sy.low, sy.low_weight}, std::pair{sy.high, sy.high_weight}}) {
    for (auto [xp, wx] : {std::pair{sx.low, sx.low_weight}, std::pair{sx.high, sx.high_weight}}) {
      KILN_ASSIGN_OR_RETURN(NodeId term, corner(y, wy, xp, wx));
      if (samples == ir::kNoNode) {
        samples = term;
      } else {
        KILN_ASSIGN_OR_RETURN(samples, im.apply(combine, {samples, term}));
      }
    }
  }
  // Each bin's grid x grid samples: [R, C, PH, G, PW, G] reduced over the grid axes.
  KILN_ASSIGN_OR_RETURN(samples, im.reshape(samples, {boxes, Dim::of(channels), Dim::of(out_h), Dim::of(grid),
                                                      Dim::of(out_w), Dim::of(grid)}));
  ir::ReduceAttrs over_grid;
  over_grid.axes = {3, 5};
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(mode == "avg" ? OpKind::kReduceMean : OpKind::kReduceMax, {samples}, over_grid));
  if (im.type(y).dtype != im.type(x).dtype) {
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kCast, {y}, ir::CastAttrs{im.type(x).dtype}));
  }
  return im.set_output(0, y);
}

}  // namespace

void register_roi_ops(std::map<std::string, Converter>& t) { t["RoiAlign"] = roi_align; }

}  // namespace kiln::onnx_import
