// Converters for ONNX neural-network operators: Conv (1-D and 2-D as Kiln's conv2d, 1-D with a
// unit height; 3-D as 2-D convolutions per kernel depth), ConvTranspose (1-D and 2-D), MaxPool,
// AveragePool, LpPool (1-D, 2-D and 3-D), the global pools, BatchNormalization (inference) and
// LayerNormalization.
// auto_pad and ceil_mode are resolved here into Kiln's explicit (possibly asymmetric) pads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

// The spatial geometry of a window op, in ONNX order (one entry per spatial axis).
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
  // pads_end before ceil_mode extends it: ceil mode's extra positions are not padding that
  // count_include_pad counts.
  std::vector<int64_t> declared_pads_end;
};

// Reads strides / dilations / pads / auto_pad / ceil_mode for `spatial` axes of `x`.
Result<Window> window_of(Importer& im, const Shape& x, std::vector<int64_t> kernel, bool allow_ceil) {
  const size_t n = kernel.size();
  Window w;
  w.kernel = std::move(kernel);
  w.strides = im.attr_ints("strides").value_or(std::vector<int64_t>(n, 1));
  w.dilations = im.attr_ints("dilations").value_or(std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = im.attr_ints("pads").value_or(std::vector<int64_t>(2 * n, 0));
  if (w.strides.size() != n || w.dilations.size() != n || pads.size() != 2 * n) {
    return im.error("strides, dilations and pads must match the kernel's " + std::to_string(n) + " spatial dims");
  }
  // Bounds that keep the window arithmetic below far from int64 overflow.
  constexpr int64_t kLimit = int64_t(1) << 31;
  auto in_range = [&](const std::vector<int64_t>& v, int64_t lo) {
    for (int64_t x : v) {
      if (x < lo || x > kLimit) return false;
    }
    return true;
  };
  if (!in_range(w.kernel, 1) || !in_range(w.strides, 1) || !in_range(w.dilations, 1) || !in_range(pads, 0)) {
    return im.error("kernel, strides and dilations must be in [1, 2^31] and pads in [0, 2^31]");
  }
  for (size_t i = 0; i < n; ++i) {
    if (x[2 + i].is_static() && x[2 + i].size() > kLimit) return im.error("spatial dims above 2^31 are not supported");
  }
  w.pads_begin.assign(pads.begin(), pads.begin() + int64_t(n));
  w.pads_end.assign(pads.begin() + int64_t(n), pads.end());
  const std::string auto_pad = im.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      const Dim& d = x[2 + i];
      if (d.is_symbolic()) return im.unsupported("auto_pad=" + auto_pad + " over a dynamic spatial dim");
      const int64_t in = d.size();
      const int64_t out = (in + w.strides[i] - 1) / w.strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - in);
      const int64_t small = total / 2;
      w.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.pads_end[i] = total - w.pads_begin[i];
    }
  } else if (auto_pad == "VALID") {
    std::fill(w.pads_begin.begin(), w.pads_begin.end(), 0);
    std::fill(w.pads_end.begin(), w.pads_end.end(), 0);
  } else if (auto_pad != "NOTSET") {
    return im.error("unknown auto_pad '" + auto_pad + "'");
  }
  w.declared_pads_end = w.pads_end;
  if (im.attr_int("ceil_mode", 0) != 0) {
    if (!allow_ceil) return im.unsupported("ceil_mode=1 is not supported here");
    for (size_t i = 0; i < n; ++i) {
      const Dim& d = x[2 + i];
      if (d.is_symbolic()) return im.unsupported("ceil_mode=1 over a dynamic spatial dim");
      const int64_t span = d.size() + w.pads_begin[i] + w.pads_end[i] - ((w.kernel[i] - 1) * w.dilations[i] + 1);
      if (span < 0) continue;
      int64_t out = (span + w.strides[i] - 1) / w.strides[i] + 1;
      // A window that would start inside the end padding is dropped (as PyTorch does).
      if ((out - 1) * w.strides[i] >= d.size() + w.pads_begin[i]) --out;
      const int64_t needed = (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1;
      w.pads_end[i] += std::max<int64_t>(0, needed - (d.size() + w.pads_begin[i] + w.pads_end[i]));
    }
  }
  return w;
}

// Lifts a 1-D window op (N, C, L) to 2-D (N, C, 1, L).
void lift_1d(Window& w) {
  w.kernel.insert(w.kernel.begin(), 1);
  w.strides.insert(w.strides.begin(), 1);
  w.dilations.insert(w.dilations.begin(), 1);
  w.pads_begin.insert(w.pads_begin.begin(), 0);
  w.pads_end.insert(w.pads_end.begin(), 0);
}

Shape with_unit_height(const Shape& s) {
  Shape out = s;
  out.insert(out.begin() + 2, Dim::of(1));
  return out;
}

ir::Conv2dAttrs conv2d_attrs(Importer& im, const Window& win, size_t first) {
  ir::Conv2dAttrs attrs;
  attrs.strides = {win.strides[first], win.strides[first + 1]};
  attrs.dilations = {win.dilations[first], win.dilations[first + 1]};
  attrs.pads = {win.pads_begin[first], win.pads_begin[first + 1], win.pads_end[first], win.pads_end[first + 1]};
  attrs.groups = im.attr_int("group", 1);
  return attrs;
}

// A 3-D convolution as one 2-D convolution per kernel depth: the input, zero-padded in depth,
// is sliced at that depth offset with the depth stride, its output depths moved into the batch
// ([N, C, Do, H, W] -> [N * Do, C, H, W]) and convolved with that depth's [O, C/g, KH, KW]
// weights; the sum over depths is moved back to [N, O, Do, Ho, Wo]. The input's depth must be
// static.
Result<NodeId> convolution_3d(Importer& im, NodeId x, NodeId w, NodeId bias, const Window& win) {
  const Shape xs = im.type(x).shape;
  const Shape ws = im.type(w).shape;
  if (xs[2].is_symbolic()) return im.unsupported("a 3-D convolution over a dynamic depth");
  const int64_t depth = xs[2].size(), kernel_depth = ws[2].size();
  const int64_t span = depth + win.pads_begin[0] + win.pads_end[0] - ((kernel_depth - 1) * win.dilations[0] + 1);
  if (span < 0) return im.error("the kernel is deeper than the padded input");
  const int64_t out_depth = span / win.strides[0] + 1;
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId padded, pad_axis(im, x, zero, "constant", 2, win.pads_begin[0], win.pads_end[0]));
  const std::optional<Dim> images = Dim::product(xs[0], Dim::of(out_depth));
  if (!images) return im.error("the batch times the output depth overflows");
  const ir::Conv2dAttrs attrs = conv2d_attrs(im, win, 1);
  NodeId sum = ir::kNoNode;
  for (int64_t k = 0; k < kernel_depth; ++k) {
    const int64_t start = k * win.dilations[0];
    KILN_ASSIGN_OR_RETURN(NodeId slab, im.add(OpKind::kSlice, {padded},
                                              ir::SliceAttrs{{start}, {start + (out_depth - 1) * win.strides[0] + 1}, {2}, {win.strides[0]}}));
    KILN_ASSIGN_OR_RETURN(slab, im.add(OpKind::kTranspose, {slab}, ir::TransposeAttrs{{0, 2, 1, 3, 4}}));
    KILN_ASSIGN_OR_RETURN(slab, im.reshape(slab, {*images, xs[1], xs[3], xs[4]}));
    KILN_ASSIGN_OR_RETURN(NodeId weight, im.add(OpKind::kSlice, {w}, ir::SliceAttrs{{k}, {k + 1}, {2}, {1}}));
    KILN_ASSIGN_OR_RETURN(weight, im.reshape(weight, {ws[0], ws[1], ws[3], ws[4]}));
    KILN_ASSIGN_OR_RETURN(NodeId term, im.add(OpKind::kConv2d, {slab, weight}, attrs));
    KILN_ASSIGN_OR_RETURN(sum, im.add_term(sum, term));
  }
  const Shape ys = im.type(sum).shape;  // [N * Do, O, Ho, Wo]
  KILN_ASSIGN_OR_RETURN(NodeId y, im.reshape(sum, {xs[0], Dim::of(out_depth), ys[1], ys[2], ys[3]}));
  KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kTranspose, {y}, ir::TransposeAttrs{{0, 2, 1, 3, 4}}));
  if (bias != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(NodeId b, im.reshape(bias, {Dim::of(1), ws[0], Dim::of(1), Dim::of(1), Dim::of(1)}));
    KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kAdd, {y, b}));
  }
  return y;
}

}  // namespace

Result<NodeId> convolution(Importer& im, NodeId x, NodeId w, NodeId bias) {
  const Shape xs = im.type(x).shape;
  const Shape ws = im.type(w).shape;
  if (xs.size() < 3 || xs.size() > 5) return im.unsupported("only 1-D, 2-D and 3-D convolutions are supported");
  if (ws.size() != xs.size() || !ir::is_static(ws)) return im.error("the weight must be static with the input's rank");
  std::vector<int64_t> kernel;
  for (size_t i = 2; i < ws.size(); ++i) kernel.push_back(ws[i].size());
  KILN_ASSIGN_OR_RETURN(Window win, window_of(im, xs, kernel, /*allow_ceil=*/false));
  if (xs.size() == 5) return convolution_3d(im, x, w, bias, win);
  const bool one_d = xs.size() == 3;
  if (one_d) {
    lift_1d(win);
    KILN_ASSIGN_OR_RETURN(x, im.reshape(x, with_unit_height(xs)));
    KILN_ASSIGN_OR_RETURN(w, im.reshape(w, with_unit_height(ws)));
  }
  std::vector<NodeId> inputs = {x, w};
  if (bias != ir::kNoNode) inputs.push_back(bias);
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kConv2d, inputs, conv2d_attrs(im, win, 0)));
  if (one_d) {
    Shape ys = im.type(y).shape;
    ys.erase(ys.begin() + 2);
    KILN_ASSIGN_OR_RETURN(y, im.reshape(y, ys));
  }
  return y;
}

namespace {

Status conv_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId w, im.input(1));
  NodeId bias = ir::kNoNode;
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(bias, im.input(2));
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, convolution(im, x, w, bias));
  return im.set_output(0, y);
}

// DeformConv (opset 19, 2-D): each kernel tap samples X bilinearly at its regular position plus
// a learned offset (zero outside the image, as GridSample with zeros padding and align_corners
// does), times the optional mask; the samples of every tap form an im2col matrix that one batched
// matmul per group multiplies by the weights. The samples are four gathers from X flattened,
// with positions computed elementwise from the offsets. X's channels and spatial dims, and the
// kernel, must be static.
Status deform_conv(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId w, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId offset, im.input(2));
  const Shape xs = im.type(x).shape, ws = im.type(w).shape, os = im.type(offset).shape;
  if (xs.size() != 4) return im.unsupported("only 2-D deformable convolutions are supported");
  if (!ir::is_static_from(xs, 1) || !ir::is_static(ws) || ws.size() != 4 || !ir::is_float(im.type(x).dtype)) {
    return im.unsupported("DeformConv needs a float X with static channels and spatial dims, and static 4-D weights");
  }
  const int64_t channels = xs[1].size(), height = xs[2].size(), width = xs[3].size();
  const int64_t out_channels = ws[0].size(), kh = ws[2].size(), kw = ws[3].size();
  const int64_t groups = im.attr_int("group", 1), offset_groups = im.attr_int("offset_group", 1);
  if (groups < 1 || offset_groups < 1 || channels % groups != 0 || channels % offset_groups != 0 ||
      out_channels % groups != 0 || ws[1].size() * groups != channels) {
    return im.error("channels, weights, group and offset_group do not agree");
  }
  KILN_ASSIGN_OR_RETURN(Window win, window_of(im, xs, {kh, kw}, /*allow_ceil=*/false));
  int64_t out[2];
  for (int a = 0; a < 2; ++a) {
    const int64_t size = a == 0 ? height : width, k = a == 0 ? kh : kw;
    out[a] = (size + win.pads_begin[a] + win.pads_end[a] - win.dilations[a] * (k - 1) - 1) / win.strides[a] + 1;
  }
  const int64_t taps = kh * kw, positions = out[0] * out[1];
  if (os.size() != 4 || os[0] != xs[0] || os[1] != Dim::of(offset_groups * taps * 2) || os[2] != Dim::of(out[0]) ||
      os[3] != Dim::of(out[1])) {
    return im.error("offset must be [N, offset_group * kH * kW * 2, oH, oW] = [N, " + std::to_string(offset_groups * taps * 2) +
                    ", " + std::to_string(out[0]) + ", " + std::to_string(out[1]) + "], got " + ir::shape_to_string(os));
  }
  const Dim n = xs[0];
  const ir::DType dtype = im.type(x).dtype;
  // Sample coordinates per (n, offset group, tap, position): the regular grid plus the offsets.
  KILN_ASSIGN_OR_RETURN(NodeId offsets, im.cast(offset, ir::DType::kF32));
  KILN_ASSIGN_OR_RETURN(offsets, im.reshape(offsets, {n, Dim::of(offset_groups), Dim::of(taps), Dim::of(2), Dim::of(positions)}));
  NodeId coordinate[2];
  for (int a = 0; a < 2; ++a) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor grid, ir::Tensor::zeros(ir::DType::kF32, {1, 1, taps, 1, positions}));
    for (int64_t t = 0; t < taps; ++t) {
      const int64_t tap = a == 0 ? t / kw : t % kw;
      for (int64_t p = 0; p < positions; ++p) {
        const int64_t o = a == 0 ? p / out[1] : p % out[1];
        grid.mutable_data_as<float>()[t * positions + p] =
            float(o * win.strides[a] - win.pads_begin[a] + tap * win.dilations[a]);
      }
    }
    const NodeId base = im.add_constant(std::move(grid), "deform_grid");
    KILN_ASSIGN_OR_RETURN(NodeId delta, im.add(OpKind::kSlice, {offsets}, ir::SliceAttrs{{a}, {a + 1}, {3}, {1}}));
    KILN_ASSIGN_OR_RETURN(coordinate[a], im.apply(OpKind::kAdd, {base, delta}));  // [N, og, taps, 1, P]
  }
  // X flattened; element (n, c, y, x) at ((n * C + c) * H + y) * W + x. Channels of offset group
  // g use that group's coordinates: [N, og, C/og, taps, P].
  const std::optional<Dim> total = Dim::product(n, Dim::of(channels * height * width));
  if (!total) return im.error("X's size overflows");
  KILN_ASSIGN_OR_RETURN(NodeId flat, im.reshape(x, {*total}));
  KILN_ASSIGN_OR_RETURN(NodeId batch, im.iota(n, 0, 5));
  KILN_ASSIGN_OR_RETURN(NodeId channel, im.iota(channels, 0, 1));
  KILN_ASSIGN_OR_RETURN(channel, im.reshape(channel, {Dim::of(1), Dim::of(offset_groups), Dim::of(channels / offset_groups), Dim::of(1), Dim::of(1)}));
  KILN_ASSIGN_OR_RETURN(NodeId channel_count, im.scalar(double(channels), ir::DType::kI64));
  KILN_ASSIGN_OR_RETURN(NodeId plane_base, im.apply(OpKind::kMul, {batch, channel_count}));
  KILN_ASSIGN_OR_RETURN(plane_base, im.apply(OpKind::kAdd, {plane_base, channel}));
  KILN_ASSIGN_OR_RETURN(NodeId plane_size, im.scalar(double(height * width), ir::DType::kI64));
  KILN_ASSIGN_OR_RETURN(plane_base, im.apply(OpKind::kMul, {plane_base, plane_size}));
  NodeId low[2], high_weight[2];
  for (int a = 0; a < 2; ++a) {
    KILN_ASSIGN_OR_RETURN(low[a], im.apply(OpKind::kFloor, {coordinate[a]}));
    KILN_ASSIGN_OR_RETURN(high_weight[a], im.apply(OpKind::kSub, {coordinate[a], low[a]}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1.0, ir::DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, ir::DType::kF32));
  NodeId sampled = ir::kNoNode;
  for (int dy = 0; dy < 2; ++dy) {
    for (int dx = 0; dx < 2; ++dx) {
      NodeId at[2], weight = ir::kNoNode, inside = ir::kNoNode;
      for (int a = 0; a < 2; ++a) {
        // The low neighbour weighs 1 - frac, the high one frac.
        const bool high = (a == 0 ? dy : dx) != 0;
        NodeId w_axis = high_weight[a];
        at[a] = low[a];
        if (high) {
          KILN_ASSIGN_OR_RETURN(at[a], im.apply(OpKind::kAdd, {low[a], one}));
        } else {
          KILN_ASSIGN_OR_RETURN(w_axis, im.apply(OpKind::kSub, {one, high_weight[a]}));
        }
        if (a == 0) {
          weight = w_axis;
        } else {
          KILN_ASSIGN_OR_RETURN(weight, im.apply(OpKind::kMul, {weight, w_axis}));
        }
        KILN_ASSIGN_OR_RETURN(NodeId extent, im.scalar(double(a == 0 ? height : width), ir::DType::kF32));
        KILN_ASSIGN_OR_RETURN(NodeId above, im.apply(OpKind::kGreaterEqual, {at[a], zero}));
        KILN_ASSIGN_OR_RETURN(NodeId below, im.apply(OpKind::kLess, {at[a], extent}));
        KILN_ASSIGN_OR_RETURN(NodeId ok, im.apply(OpKind::kAnd, {above, below}));
        if (inside == ir::kNoNode) {
          inside = ok;
        } else {
          KILN_ASSIGN_OR_RETURN(inside, im.apply(OpKind::kAnd, {inside, ok}));
        }
        // A safe index for the gather: outside positions read element 0 and weigh 0.
        KILN_ASSIGN_OR_RETURN(at[a], im.apply(OpKind::kWhere, {ok, at[a], zero}));
        KILN_ASSIGN_OR_RETURN(at[a], im.cast(at[a], ir::DType::kI64));
      }
      KILN_ASSIGN_OR_RETURN(NodeId row_size, im.scalar(double(width), ir::DType::kI64));
      KILN_ASSIGN_OR_RETURN(NodeId index, im.apply(OpKind::kMul, {at[0], row_size}));
      KILN_ASSIGN_OR_RETURN(index, im.apply(OpKind::kAdd, {index, at[1]}));      // [N, og, taps, 1, P]
      KILN_ASSIGN_OR_RETURN(index, im.reshape(index, {n, Dim::of(offset_groups), Dim::of(1), Dim::of(taps), Dim::of(positions)}));
      KILN_ASSIGN_OR_RETURN(index, im.apply(OpKind::kAdd, {plane_base, index}));  // [N, og, C/og, taps, P]
      KILN_ASSIGN_OR_RETURN(NodeId values, im.add(OpKind::kGather, {flat, index}, ir::AxisAttrs{0}));
      KILN_ASSIGN_OR_RETURN(values, im.cast(values, ir::DType::kF32));
      KILN_ASSIGN_OR_RETURN(weight, im.apply(OpKind::kWhere, {inside, weight, zero}));
      KILN_ASSIGN_OR_RETURN(weight, im.reshape(weight, {n, Dim::of(offset_groups), Dim::of(1), Dim::of(taps), Dim::of(positions)}));
      KILN_ASSIGN_OR_RETURN(NodeId term, im.apply(OpKind::kMul, {values, weight}));
      if (sampled == ir::kNoNode) {
        sampled = term;
      } else {
        KILN_ASSIGN_OR_RETURN(sampled, im.apply(OpKind::kAdd, {sampled, term}));
      }
    }
  }
  if (im.has_input(4)) {
    KILN_ASSIGN_OR_RETURN(NodeId mask, im.input(4));
    KILN_ASSIGN_OR_RETURN(mask, im.cast(mask, ir::DType::kF32));
    KILN_ASSIGN_OR_RETURN(mask, im.reshape(mask, {n, Dim::of(offset_groups), Dim::of(1), Dim::of(taps), Dim::of(positions)}));
    KILN_ASSIGN_OR_RETURN(sampled, im.apply(OpKind::kMul, {sampled, mask}));
  }
  // im2col per group: [N, G, C/G * taps, P] times the weights [1, G, O/G, C/G * taps].
  const int64_t per_group = channels / groups * taps;
  KILN_ASSIGN_OR_RETURN(sampled, im.reshape(sampled, {n, Dim::of(groups), Dim::of(per_group), Dim::of(positions)}));
  KILN_ASSIGN_OR_RETURN(NodeId weights, im.cast(w, ir::DType::kF32));
  KILN_ASSIGN_OR_RETURN(weights, im.reshape(weights, {Dim::of(1), Dim::of(groups), Dim::of(out_channels / groups), Dim::of(per_group)}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMatMul, {weights, sampled}));
  KILN_ASSIGN_OR_RETURN(y, im.reshape(y, {n, Dim::of(out_channels), Dim::of(out[0]), Dim::of(out[1])}));
  if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(NodeId bias, im.input(3));
    KILN_ASSIGN_OR_RETURN(bias, im.cast(bias, ir::DType::kF32));
    KILN_ASSIGN_OR_RETURN(bias, im.reshape(bias, {Dim::of(1), Dim::of(out_channels), Dim::of(1), Dim::of(1)}));
    KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kAdd, {y, bias}));
  }
  KILN_ASSIGN_OR_RETURN(y, im.cast(y, dtype));
  return im.set_output(0, y);
}

// ConvTranspose (1-D and 2-D) as the convolution it is the gradient of: the input with
// stride - 1 zeros after each element along H and W, convolved (stride 1, the same dilations)
// with the weights swapped to [out, in/group] per group and flipped in space, padded by
// dilation * (kernel - 1) less the transposed conv's own pads (plus output_padding at the end).
// Negative paddings become a slice of the result. The weights' transform is foldable, so
// constant weights stay one constant. This spends stride^2 times the useful multiply-adds on
// the zeros (a library's transposed convolution would not).
Status conv_transpose_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId w, im.input(1));
  Shape xs = im.type(x).shape;
  Shape ws = im.type(w).shape;
  if (xs.size() != 3 && xs.size() != 4) return im.unsupported("only 1-D and 2-D transposed convolutions are supported");
  if (ws.size() != xs.size() || !ir::is_static(ws)) return im.error("the weight must be static with the input's rank");
  const size_t n = ws.size() - 2;  // spatial axes
  std::vector<int64_t> strides = im.attr_ints("strides").value_or(std::vector<int64_t>(n, 1));
  std::vector<int64_t> dilations = im.attr_ints("dilations").value_or(std::vector<int64_t>(n, 1));
  std::vector<int64_t> output_padding = im.attr_ints("output_padding").value_or(std::vector<int64_t>(n, 0));
  const std::vector<int64_t> pads = im.attr_ints("pads").value_or(std::vector<int64_t>(2 * n, 0));
  const std::optional<std::vector<int64_t>> output_shape = im.attr_ints("output_shape");
  if (strides.size() != n || dilations.size() != n || output_padding.size() != n || pads.size() != 2 * n ||
      (output_shape && output_shape->size() < n)) {
    return im.error("strides, dilations, output_padding, pads and output_shape must match the weight's spatial dims");
  }
  const int64_t group = im.attr_int("group", 1);
  const int64_t in_channels = ws[0].size(), out_per_group = ws[1].size();
  if (group < 1 || in_channels % group != 0 || !xs[1].is_static() || xs[1].size() != in_channels) {
    return im.error("the weight's first dim must be the input's channels, divisible by group");
  }
  const std::string auto_pad = im.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return im.error("unknown auto_pad '" + auto_pad + "'");
  }
  std::vector<int64_t> begin(n), end(n);
  for (size_t i = 0; i < n; ++i) {
    const Dim& d = xs[2 + i];
    const int64_t k = ws[2 + i].size();
    if (strides[i] < 1 || dilations[i] < 1 || output_padding[i] < 0 ||
        output_padding[i] >= std::max(strides[i], dilations[i])) {
      return im.error("strides and dilations must be positive and output_padding below the stride or dilation");
    }
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if ((output_shape || same) && d.is_symbolic()) {
      return im.unsupported("output_shape or auto_pad over a dynamic spatial dim");
    }
    std::optional<int64_t> target;  // the output size that decides the pads
    if (output_shape) target = (*output_shape)[output_shape->size() - n + i];
    else if (same) target = d.size() * strides[i];
    if (target) {
      const int64_t total = strides[i] * (d.size() - 1) + output_padding[i] + (k - 1) * dilations[i] + 1 - *target;
      // Python's floor division, as ONNX's reference: a negative total (output_shape larger
      // than the natural size) grows the end.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      end[i] = total - begin[i];
    } else if (auto_pad == "NOTSET") {
      begin[i] = pads[i];
      end[i] = pads[i + n];
    }
  }
  if (n == 1) {  // as 2-D with a unit height
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
    output_padding.insert(output_padding.begin(), 0);
    begin.insert(begin.begin(), 0);
    end.insert(end.begin(), 0);
    xs = with_unit_height(xs);
    ws = with_unit_height(ws);
    KILN_ASSIGN_OR_RETURN(x, im.reshape(x, xs));
    KILN_ASSIGN_OR_RETURN(w, im.reshape(w, ws));
  }
  // The weights as a convolution's: [g, C/g, M/g, kH, kW] -> [g, M/g, C/g, kH, kW] -> [M, C/g, kH, kW], flipped.
  const int64_t kh = ws[2].size(), kw = ws[3].size(), in_per_group = in_channels / group;
  KILN_ASSIGN_OR_RETURN(NodeId wg, im.reshape(w, {Dim::of(group), Dim::of(in_per_group), Dim::of(out_per_group), Dim::of(kh), Dim::of(kw)}));
  KILN_ASSIGN_OR_RETURN(wg, im.add(OpKind::kTranspose, {wg}, ir::TransposeAttrs{{0, 2, 1, 3, 4}}));
  KILN_ASSIGN_OR_RETURN(wg, im.reshape(wg, {Dim::of(group * out_per_group), Dim::of(in_per_group), Dim::of(kh), Dim::of(kw)}));
  KILN_ASSIGN_OR_RETURN(wg, im.add(OpKind::kSlice, {wg}, ir::SliceAttrs{{kh - 1, kw - 1}, {-kh - 1, -kw - 1}, {2, 3}, {-1, -1}}));
  // stride - 1 zeros after every element along each strided axis.
  for (size_t i = 0; i < 2; ++i) {
    if (strides[i] == 1) continue;
    const size_t axis = 2 + i;
    Shape split = im.type(x).shape;
    split.insert(split.begin() + long(axis) + 1, Dim::of(1));
    KILN_ASSIGN_OR_RETURN(NodeId lifted, im.reshape(x, split));
    Shape zeros_shape = split;
    zeros_shape[axis + 1] = Dim::of(strides[i] - 1);
    KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, im.type(x).dtype));
    KILN_ASSIGN_OR_RETURN(NodeId zeros, im.add(OpKind::kBroadcastTo, {zero}, ir::BroadcastToAttrs{zeros_shape}));
    KILN_ASSIGN_OR_RETURN(NodeId spread, im.add(OpKind::kConcat, {lifted, zeros}, ir::AxisAttrs{int64_t(axis) + 1}));
    Shape merged = im.type(x).shape;
    if (merged[axis].is_symbolic()) return im.unsupported("a strided ConvTranspose over a dynamic spatial dim");
    merged[axis] = Dim::of(merged[axis].size() * strides[i]);
    KILN_ASSIGN_OR_RETURN(x, im.reshape(spread, merged));
  }
  ir::Conv2dAttrs attrs;
  attrs.dilations = {dilations[0], dilations[1]};
  attrs.groups = group;
  std::array<int64_t, 2> crop_begin{}, crop_end{};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t span = dilations[i] * (ws[2 + i].size() - 1);
    const int64_t b = span - begin[i], e = span - end[i] + output_padding[i] - (strides[i] - 1);
    attrs.pads[i] = std::max<int64_t>(b, 0);
    attrs.pads[i + 2] = std::max<int64_t>(e, 0);
    crop_begin[i] = std::max<int64_t>(-b, 0);
    crop_end[i] = std::max<int64_t>(-e, 0);
  }
  std::vector<NodeId> inputs = {x, wg};
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(NodeId b, im.input(2));
    inputs.push_back(b);
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kConv2d, inputs, attrs));
  if (crop_begin != std::array<int64_t, 2>{} || crop_end != std::array<int64_t, 2>{}) {
    const Shape ys = im.type(y).shape;
    std::vector<int64_t> starts, ends;
    for (size_t i = 0; i < 2; ++i) {
      starts.push_back(crop_begin[i]);
      ends.push_back(ys[2 + i].size() - crop_end[i]);
    }
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kSlice, {y}, ir::SliceAttrs{starts, ends, {2, 3}, {1, 1}}));
  }
  if (n == 1) {
    Shape ys = im.type(y).shape;
    ys.erase(ys.begin() + 2);
    KILN_ASSIGN_OR_RETURN(y, im.reshape(y, ys));
  }
  return im.set_output(0, y);
}

// For window position `offset`, the flattened input position each output element reads:
// plane_base (n, c) plus the offset of its spatial coordinates in the plane, row-major or (with
// `column_major`, MaxPool's storage_order=1) column-major. Padding positions get an index too,
// but never hold a window's first maximum.
Result<NodeId> window_position_index(Importer& im, const Shape& xs, const Window& win, const std::vector<int64_t>& out,
                                     const std::vector<int64_t>& offset, NodeId plane_base, bool column_major) {
  const size_t spatial = out.size();
  Shape shape(xs.size(), Dim::of(1));
  int64_t count = 1;
  for (size_t i = 0; i < spatial; ++i) {
    shape[2 + i] = Dim::of(out[i]);
    count *= out[i];
  }
  KILN_RETURN_IF_ERROR(check_import_size(im, shape, "the pooling indices"));
  KILN_ASSIGN_OR_RETURN(ir::Tensor positions, ir::Tensor::zeros(ir::DType::kI64, ir::static_sizes(shape)));
  std::vector<int64_t> plane_strides(spatial);  // of the input's spatial axes in the plane
  int64_t stride = 1;
  for (size_t k = 0; k < spatial; ++k) {
    const size_t i = column_major ? k : spatial - 1 - k;
    plane_strides[i] = stride;
    stride *= xs[2 + i].size();
  }
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t rest = flat, position = 0;
    for (size_t i = spatial; i-- > 0;) {
      const int64_t o = rest % out[i];
      rest /= out[i];
      position += (o * win.strides[i] + offset[i] * win.dilations[i] - win.pads_begin[i]) * plane_strides[i];
    }
    positions.mutable_data_as<int64_t>()[flat] = position;
  }
  const NodeId constant = im.add_constant(std::move(positions), "pool_positions");
  return im.apply(OpKind::kAdd, {plane_base, constant});
}

enum class PoolKind { kMax, kAverage, kLp };

// Pooling that Kiln's 2-D pool ops do not express (3-D windows, dilations, ceil_mode with
// count_include_pad): the input padded with the reduction's identity (-inf or the type's lowest
// for max, 0 otherwise), then one strided slice per window position, combined elementwise.
// Averages divide by a constant of per-output-position counts: the positions inside the input
// or, with count_include_pad, inside the declared padding (never ceil mode's extension), as
// ONNX's reference counts them. Needs static spatial dims; the elementwise chain fuses into one
// kernel, which reads each input element once per window position that covers it.
//
// With `argmax` (max pooling only), *argmax receives MaxPool's Indices output: the position of
// each window's first maximum (in the window's row-major order) in the whole input flattened
// (its spatial axes column-major with `column_major_argmax`), an i64 tensor of the output's shape.
Result<NodeId> unrolled_pool(Importer& im, NodeId x, const Window& win, PoolKind kind, bool count_include_pad,
                             NodeId* argmax = nullptr, bool column_major_argmax = false) {
  constexpr int64_t kMaxWindowPositions = 512;
  const Shape xs = im.type(x).shape;
  const size_t spatial = xs.size() - 2;
  int64_t positions = 1;
  for (int64_t k : win.kernel) positions *= k;
  if (positions > kMaxWindowPositions) {
    return im.unsupported("a pooling window of " + std::to_string(positions) + " positions is not supported here (at most " +
                          std::to_string(kMaxWindowPositions) + " for 3-D, dilated or ceil-mode-counting-padding pools)");
  }
  std::vector<int64_t> in(spatial), out(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    if (xs[2 + i].is_symbolic()) return im.unsupported("this pooling form needs static spatial dims");
    in[i] = xs[2 + i].size();
    const int64_t span = in[i] + win.pads_begin[i] + win.pads_end[i] - ((win.kernel[i] - 1) * win.dilations[i] + 1);
    if (span < 0) return im.error("the pooling window is larger than the padded input");
    out[i] = span / win.strides[i] + 1;
  }
  const ir::DType dtype = im.type(x).dtype;
  double fill_value = 0;
  if (kind == PoolKind::kMax) {
    if (ir::is_float(dtype)) fill_value = -std::numeric_limits<double>::infinity();
    else if (ir::is_integer(dtype) && dtype != ir::DType::kI64) fill_value = double(ir::integer_range(dtype).first);
    else return im.unsupported("MaxPool of " + std::string(ir::dtype_name(dtype)) + " in this form is not supported");
  }
  KILN_ASSIGN_OR_RETURN(NodeId fill, im.scalar(fill_value, dtype));
  NodeId padded = x;
  for (size_t i = 0; i < spatial; ++i) {
    KILN_ASSIGN_OR_RETURN(padded, pad_axis(im, padded, fill, "constant", int64_t(2 + i), win.pads_begin[i], win.pads_end[i]));
  }
  NodeId result = ir::kNoNode;
  std::vector<int64_t> offset(spatial, 0);
  NodeId plane_base = ir::kNoNode;  // (n * C + c) * the input's spatial size, for argmax
  if (argmax != nullptr) {
    int64_t plane = 1;
    for (int64_t d : in) plane *= d;
    KILN_ASSIGN_OR_RETURN(NodeId n, im.iota(xs[0], 0, int64_t(xs.size())));
    KILN_ASSIGN_OR_RETURN(NodeId c, im.iota(xs[1], 1, int64_t(xs.size())));
    KILN_ASSIGN_OR_RETURN(NodeId channels, im.size_value(xs[1]));
    KILN_ASSIGN_OR_RETURN(plane_base, im.apply(OpKind::kMul, {n, channels}));
    KILN_ASSIGN_OR_RETURN(plane_base, im.apply(OpKind::kAdd, {plane_base, c}));
    KILN_ASSIGN_OR_RETURN(NodeId plane_size, im.scalar(double(plane), ir::DType::kI64));
    KILN_ASSIGN_OR_RETURN(plane_base, im.apply(OpKind::kMul, {plane_base, plane_size}));
  }
  for (int64_t p = 0; p < positions; ++p) {
    ir::SliceAttrs attrs;
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t start = offset[i] * win.dilations[i];
      attrs.starts.push_back(start);
      attrs.ends.push_back(start + (out[i] - 1) * win.strides[i] + 1);
      attrs.axes.push_back(int64_t(2 + i));
      attrs.steps.push_back(win.strides[i]);
    }
    KILN_ASSIGN_OR_RETURN(NodeId term, im.add(OpKind::kSlice, {padded}, attrs));
    if (argmax != nullptr) {
      KILN_ASSIGN_OR_RETURN(NodeId position, window_position_index(im, xs, win, out, offset, plane_base, column_major_argmax));
      if (result == ir::kNoNode) {
        result = term;
        *argmax = position;
      } else {
        // Strictly greater: the first maximum of the window keeps its place.
        KILN_ASSIGN_OR_RETURN(NodeId better, im.apply(OpKind::kGreater, {term, result}));
        KILN_ASSIGN_OR_RETURN(result, im.apply(OpKind::kWhere, {better, term, result}));
        KILN_ASSIGN_OR_RETURN(*argmax, im.apply(OpKind::kWhere, {better, position, *argmax}));
      }
    } else if (result == ir::kNoNode) {
      result = term;
    } else {
      KILN_ASSIGN_OR_RETURN(result, im.apply(kind == PoolKind::kMax ? OpKind::kMaximum : OpKind::kAdd, {result, term}));
    }
    for (size_t i = spatial; i-- > 0;) {  // the next window position, last axis fastest
      if (++offset[i] < win.kernel[i]) break;
      offset[i] = 0;
    }
  }
  if (kind != PoolKind::kAverage) return result;
  // The divisor per output position is the product of per-axis counts.
  Shape divisor_shape(xs.size(), Dim::of(1));
  int64_t divisor_size = 1;
  for (size_t i = 0; i < spatial; ++i) {
    divisor_shape[2 + i] = Dim::of(out[i]);
    divisor_size *= out[i];
  }
  KILN_RETURN_IF_ERROR(check_import_size(im, divisor_shape, "the pooling divisor"));
  KILN_ASSIGN_OR_RETURN(ir::Tensor divisor, ir::Tensor::zeros(dtype, ir::static_sizes(divisor_shape)));
  for (int64_t flat = 0; flat < divisor_size; ++flat) {
    int64_t rest = flat;
    double count = 1;
    for (size_t i = spatial; i-- > 0;) {
      const int64_t o = rest % out[i];
      rest /= out[i];
      const int64_t lo = count_include_pad ? 0 : win.pads_begin[i];
      const int64_t hi = count_include_pad ? in[i] + win.pads_begin[i] + win.declared_pads_end[i] : win.pads_begin[i] + in[i];
      int64_t inside = 0;
      for (int64_t k = 0; k < win.kernel[i]; ++k) {
        const int64_t at = o * win.strides[i] + k * win.dilations[i];
        inside += at >= lo && at < hi;
      }
      count *= double(inside);
    }
    divisor.set_element_from_double(flat, count);
  }
  const NodeId divisor_node = im.add_constant(std::move(divisor), "pool_divisor");
  return im.apply(OpKind::kDiv, {result, divisor_node});
}

// MaxPool and AveragePool; with `lp`, LpPool: (sum over the window of |x|^p)^(1/p), as an
// average pool counting the padding (which adds 0) times the window's area. 1-D and 2-D pools
// map to Kiln's 2-D pool ops; 3-D ones, dilated ones and averages that count padding under
// ceil_mode are unrolled over the window (unrolled_pool).
Converter pool(OpKind op, bool lp = false) {
  return [op, lp](Importer& im) -> Status {
    const bool wants_indices = op == OpKind::kMaxPool2d && im.current->output_size() > 1 && !im.current->output(1).empty();
    KILN_RETURN_IF_ERROR(im.only_first_outputs(wants_indices ? 2 : 1));
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    const Shape xs = im.type(x).shape;
    if (xs.size() < 3 || xs.size() > 5) return im.unsupported("only 1-D, 2-D and 3-D pooling is supported");
    const auto kernel = im.attr_ints("kernel_shape");
    if (!kernel || kernel->size() != xs.size() - 2) return im.error("kernel_shape must list every spatial dim");
    const bool column_major = im.attr_int("storage_order", 0) != 0;
    KILN_ASSIGN_OR_RETURN(Window win, window_of(im, xs, *kernel, /*allow_ceil=*/true));
    const bool count_include_pad = lp || im.attr_int("count_include_pad", 0) != 0;
    const int64_t p = lp ? im.attr_int("p", 2) : 0;
    if (lp) {
      if (p < 1) return im.error("p must be at least 1");
      KILN_ASSIGN_OR_RETURN(NodeId magnitude, im.apply(OpKind::kAbs, {x}));
      if (p > 1) {
        KILN_ASSIGN_OR_RETURN(NodeId exponent, im.scalar_like(x, double(p)));
        KILN_ASSIGN_OR_RETURN(magnitude, im.apply(OpKind::kPow, {magnitude, exponent}));
      }
      x = magnitude;
    }
    const bool dilated = std::any_of(win.dilations.begin(), win.dilations.end(), [](int64_t d) { return d != 1; });
    const bool ceil_counts_padding = !lp && count_include_pad && im.attr_int("ceil_mode", 0) != 0;
    NodeId y;
    if (xs.size() == 5 || dilated || ceil_counts_padding || wants_indices) {
      const PoolKind kind = op == OpKind::kMaxPool2d ? PoolKind::kMax : lp ? PoolKind::kLp : PoolKind::kAverage;
      NodeId indices = ir::kNoNode;
      KILN_ASSIGN_OR_RETURN(y, unrolled_pool(im, x, win, kind, count_include_pad, wants_indices ? &indices : nullptr, column_major));
      if (wants_indices) {
        KILN_RETURN_IF_ERROR(im.set_output(1, indices));
      }
    } else {
      const bool one_d = xs.size() == 3;
      if (one_d) {
        lift_1d(win);
        KILN_ASSIGN_OR_RETURN(x, im.reshape(x, with_unit_height(xs)));
      }
      ir::Pool2dAttrs attrs;
      attrs.kernel = {win.kernel[0], win.kernel[1]};
      attrs.strides = {win.strides[0], win.strides[1]};
      attrs.pads = {win.pads_begin[0], win.pads_begin[1], win.pads_end[0], win.pads_end[1]};
      attrs.count_include_pad = count_include_pad;
      KILN_ASSIGN_OR_RETURN(y, im.add(op, {x}, attrs));
      if (lp) {
        KILN_ASSIGN_OR_RETURN(NodeId area, im.scalar_like(y, double(win.kernel[0] * win.kernel[1])));
        KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kMul, {y, area}));
      }
      if (one_d) {
        Shape ys = im.type(y).shape;
        ys.erase(ys.begin() + 2);
        KILN_ASSIGN_OR_RETURN(y, im.reshape(y, ys));
      }
    }
    if (lp && p > 1) {
      KILN_ASSIGN_OR_RETURN(NodeId root, im.scalar_like(y, 1.0 / double(p)));
      KILN_ASSIGN_OR_RETURN(y, p == 2 ? im.apply(OpKind::kSqrt, {y}) : im.apply(OpKind::kPow, {y, root}));
    }
    return im.set_output(0, y);
  };
}

// MaxUnpool(X, I, output_shape?): zeros of the unpooled shape with each X value written at its
// index. The indices of MaxPool's second output are positions in the whole flattened tensor;
// each is taken relative to its own (n, c) plane and the values are scattered along the plane's
// flattened spatial axis, so each output element visits only its plane's values (ONNX's
// reference scatters into the whole tensor: an index outside its plane, which MaxPool never
// produces, is dropped here). Spatial sizes must be static.
Status max_unpool(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId indices, im.input(1));
  const Shape xs = im.type(x).shape;
  if (xs.size() < 3) return im.error("X must have rank 3 or more");
  if (im.type(indices).shape != xs) return im.error("I must have X's shape");
  if (!ir::is_static_from(xs, 1)) return im.unsupported("MaxUnpool needs static channels and spatial dims");
  const auto kernel = im.attr_ints("kernel_shape");
  if (!kernel || kernel->size() != xs.size() - 2) return im.error("kernel_shape must list every spatial dim");
  KILN_ASSIGN_OR_RETURN(Window win, window_of(im, xs, *kernel, /*allow_ceil=*/false));
  // The indices address the inferred unpooled shape; a larger output_shape pads it at the end
  // of each spatial dim with zeros, as ONNX's reference does.
  Shape out_shape = xs;
  for (size_t i = 2; i < xs.size(); ++i) {
    const size_t a = i - 2;
    out_shape[i] = Dim::of((xs[i].size() - 1) * win.strides[a] + win.kernel[a] - win.pads_begin[a] - win.pads_end[a]);
  }
  std::vector<int64_t> padded_to;
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(padded_to, im.input_ints(2, "output_shape"));
    if (padded_to.size() != xs.size()) return im.error("output_shape must hold one entry per dim of X");
    for (size_t i = 2; i < xs.size(); ++i) {
      if (padded_to[i] < out_shape[i].size()) {
        return im.error("output_shape " + std::to_string(padded_to[i]) + " is smaller than the unpooled size " +
                        out_shape[i].to_string() + " in dim " + std::to_string(i));
      }
    }
  }
  int64_t in_plane = 1, out_plane = 1;
  for (size_t i = 2; i < xs.size(); ++i) {
    if (out_shape[i].size() < 1) return im.error("the unpooled shape is empty");
    in_plane *= xs[i].size();
    out_plane *= out_shape[i].size();
  }
  const std::optional<Dim> planes = Dim::product(xs[0], xs[1]);
  if (!planes) return im.error("the number of planes overflows");
  KILN_RETURN_IF_ERROR(check_import_size(im, {Dim::of(out_plane)}, "the unpooled plane"));
  KILN_ASSIGN_OR_RETURN(NodeId values, im.reshape(x, {*planes, Dim::of(in_plane)}));
  KILN_ASSIGN_OR_RETURN(NodeId positions, im.add(OpKind::kCast, {indices}, ir::CastAttrs{ir::DType::kI64}));
  KILN_ASSIGN_OR_RETURN(positions, im.reshape(positions, {*planes, Dim::of(in_plane)}));
  KILN_ASSIGN_OR_RETURN(NodeId plane, im.iota(*planes, 0, 2));
  KILN_ASSIGN_OR_RETURN(NodeId plane_size, im.scalar(double(out_plane), ir::DType::kI64));
  KILN_ASSIGN_OR_RETURN(NodeId base, im.apply(OpKind::kMul, {plane, plane_size}));
  KILN_ASSIGN_OR_RETURN(positions, im.apply(OpKind::kSub, {positions, base}));
  // Outside the plane: past its end, so the scatter drops it (a negative one would wrap).
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, ir::DType::kI64));
  KILN_ASSIGN_OR_RETURN(NodeId below, im.apply(OpKind::kLess, {positions, zero}));
  KILN_ASSIGN_OR_RETURN(positions, im.apply(OpKind::kWhere, {below, plane_size, positions}));
  KILN_ASSIGN_OR_RETURN(NodeId fill, im.scalar_like(x, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId zeros, im.add(OpKind::kBroadcastTo, {fill}, ir::BroadcastToAttrs{{*planes, Dim::of(out_plane)}}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kScatter, {zeros, positions, values}, ir::ScatterAttrs{1, ir::ScatterReduction::kNone}));
  KILN_ASSIGN_OR_RETURN(y, im.reshape(y, out_shape));
  for (size_t i = 2; i < padded_to.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(y, pad_axis(im, y, fill, "constant", int64_t(i), 0, padded_to[i] - out_shape[i].size()));
  }
  return im.set_output(0, y);
}

Converter global_pool(bool is_max) {
  return [is_max](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    const int64_t rank = im.type(x).rank();
    if (rank < 3) return im.error("needs an input of rank 3 or more");
    NodeId y;
    if (!is_max && rank == 4) {
      KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kGlobalAvgPool2d, {x}, ir::NoAttrs{}));
    } else {
      ir::ReduceAttrs attrs;
      for (int64_t i = 2; i < rank; ++i) attrs.axes.push_back(i);
      attrs.keepdims = true;
      KILN_ASSIGN_OR_RETURN(y, im.add(is_max ? OpKind::kReduceMax : OpKind::kReduceMean, {x}, attrs));
    }
    return im.set_output(0, y);
  };
}

// BatchNormalization in training mode (opsets 14+): normalized by the batch's own mean and
// (biased) variance over every axis but the channels; the running statistics are blended with
// them by `momentum`, as ONNX's reference computes them.
Status batch_norm_training(Importer& im, NodeId x, const NodeId (&p)[4], const Shape& param_shape) {
  if (im.opset < 14) return im.unsupported("training mode before opset 14 (its extra outputs) is not supported");
  const int64_t rank = im.type(x).rank();
  ir::ReduceAttrs stats;
  stats.keepdims = true;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != 1) stats.axes.push_back(i);
  }
  KILN_ASSIGN_OR_RETURN(NodeId mean, im.add(OpKind::kReduceMean, {x}, stats));
  KILN_ASSIGN_OR_RETURN(NodeId centered, im.apply(OpKind::kSub, {x, mean}));
  KILN_ASSIGN_OR_RETURN(NodeId squared, im.apply(OpKind::kMul, {centered, centered}));
  KILN_ASSIGN_OR_RETURN(NodeId var, im.add(OpKind::kReduceMean, {squared}, stats));
  KILN_ASSIGN_OR_RETURN(NodeId eps, im.scalar_like(x, im.attr_float("epsilon", 1e-5)));
  KILN_ASSIGN_OR_RETURN(NodeId inv, im.apply(OpKind::kAdd, {var, eps}));
  KILN_ASSIGN_OR_RETURN(inv, im.apply(OpKind::kRsqrt, {inv}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMul, {centered, inv}));
  KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kMul, {y, p[0]}));
  KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kAdd, {y, p[1]}));
  KILN_RETURN_IF_ERROR(im.set_output(0, y));
  const double momentum = im.attr_float("momentum", 0.9);
  KILN_ASSIGN_OR_RETURN(NodeId keep, im.scalar_like(x, momentum));
  KILN_ASSIGN_OR_RETURN(NodeId take, im.scalar_like(x, 1.0 - momentum));
  const Shape channel_shape{param_shape[0]};
  for (int i = 0; i < 2; ++i) {  // running_mean from mean (input 3), running_var from var (input 4)
    KILN_ASSIGN_OR_RETURN(NodeId batch_stat, im.reshape(i == 0 ? mean : var, param_shape));
    KILN_ASSIGN_OR_RETURN(NodeId old_part, im.apply(OpKind::kMul, {p[2 + i], keep}));
    KILN_ASSIGN_OR_RETURN(NodeId new_part, im.apply(OpKind::kMul, {batch_stat, take}));
    KILN_ASSIGN_OR_RETURN(NodeId running, im.apply(OpKind::kAdd, {old_part, new_part}));
    KILN_ASSIGN_OR_RETURN(running, im.reshape(running, channel_shape));
    KILN_RETURN_IF_ERROR(im.set_output(1 + i, running));
  }
  return Status::ok();
}

Status batch_norm(Importer& im) {
  if (im.attr_int("spatial", 1) != 1) return im.unsupported("spatial=0 is not supported");
  const bool training = im.attr_int("training_mode", 0) != 0;
  if (!training) {
    KILN_RETURN_IF_ERROR(im.only_first_outputs(1));
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const int64_t rank = im.type(x).rank();
  if (rank < 2) return im.error("needs an input of rank 2 or more");
  const Dim channels = im.type(x).shape[1];
  Shape param_shape{channels};
  for (int64_t i = 2; i < rank; ++i) param_shape.push_back(Dim::of(1));
  NodeId p[4];
  for (int i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(p[i], im.input(i + 1));
    KILN_ASSIGN_OR_RETURN(p[i], im.reshape(p[i], param_shape));
  }
  if (training) return batch_norm_training(im, x, p, param_shape);
  // a = scale / sqrt(var + eps); b = bias - mean * a; y = x * a + b (folded when constant).
  KILN_ASSIGN_OR_RETURN(NodeId eps, im.scalar(im.attr_float("epsilon", 1e-5), im.type(x).dtype));
  KILN_ASSIGN_OR_RETURN(NodeId var_eps, im.add(OpKind::kAdd, {p[3], eps}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId inv, im.add(OpKind::kRsqrt, {var_eps}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId a, im.add(OpKind::kMul, {p[0], inv}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId ma, im.add(OpKind::kMul, {p[2], a}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.add(OpKind::kSub, {p[1], ma}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId xa, im.add(OpKind::kMul, {x, a}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kAdd, {xa, b}, ir::NoAttrs{}));
  return im.set_output(0, y);
}

// LayerNormalization's optional Mean and InvStdDev outputs (keepdims over the normalized axes).
Status layer_norm_statistics(Importer& im, NodeId x, int64_t axis, double epsilon) {
  const bool want_mean = im.current->output_size() > 1 && !im.current->output(1).empty();
  const bool want_inv = im.current->output_size() > 2 && !im.current->output(2).empty();
  if (!want_mean && !want_inv) return Status::ok();
  ir::ReduceAttrs attrs;
  for (int64_t i = axis; i < im.type(x).rank(); ++i) attrs.axes.push_back(i);
  attrs.keepdims = true;
  KILN_ASSIGN_OR_RETURN(NodeId mean, im.add(OpKind::kReduceMean, {x}, attrs));
  KILN_RETURN_IF_ERROR(im.set_output(1, mean));
  if (!want_inv) return Status::ok();
  KILN_ASSIGN_OR_RETURN(NodeId centered, im.add(OpKind::kSub, {x, mean}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId squared, im.add(OpKind::kMul, {centered, centered}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId var, im.add(OpKind::kReduceMean, {squared}, attrs));
  KILN_ASSIGN_OR_RETURN(NodeId eps, im.scalar(epsilon, im.type(x).dtype));
  KILN_ASSIGN_OR_RETURN(NodeId var_eps, im.add(OpKind::kAdd, {var, eps}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId inv, im.add(OpKind::kRsqrt, {var_eps}, ir::NoAttrs{}));
  return im.set_output(2, inv);
}

Status layer_norm(Importer& im) {
  KILN_RETURN_IF_ERROR(im.only_first_outputs(3));
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const ir::TensorType xt = im.type(x);
  Result<int64_t> axis = ir::normalize_axis(im.attr_int("axis", -1), xt.rank());
  if (!axis.is_ok()) return im.error(axis.status().message());
  const Shape trailing(xt.shape.begin() + *axis, xt.shape.end());
  KILN_ASSIGN_OR_RETURN(NodeId scale, im.input(1));
  NodeId bias;
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(bias, im.input(2));
  } else {
    KILN_RETURN_IF_ERROR(check_import_size(im, trailing, "the zero bias of LayerNormalization"));
    KILN_ASSIGN_OR_RETURN(ir::Tensor zeros, ir::Tensor::zeros(xt.dtype, ir::static_sizes(trailing)));
    bias = im.add_constant(std::move(zeros), "zero_bias");
  }
  // ONNX lets scale and bias broadcast to the normalized dims; Kiln wants them exactly.
  for (NodeId* p : {&scale, &bias}) {
    if (im.type(*p).shape == trailing) continue;
    KILN_ASSIGN_OR_RETURN(*p, im.add(OpKind::kBroadcastTo, {*p}, ir::BroadcastToAttrs{trailing}));
  }
  ir::LayerNormAttrs attrs{*axis, im.attr_float("epsilon", 1e-5)};
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kLayerNorm, {x, scale, bias}, attrs));
  KILN_RETURN_IF_ERROR(im.set_output(0, y));
  return layer_norm_statistics(im, x, *axis, attrs.epsilon);
}

}  // namespace

void register_nn_ops(std::map<std::string, Converter>& t) {
  t["Conv"] = conv_op;
  t["ConvTranspose"] = conv_transpose_op;
  t["MaxPool"] = pool(OpKind::kMaxPool2d);
  t["AveragePool"] = pool(OpKind::kAvgPool2d);
  t["LpPool"] = pool(OpKind::kAvgPool2d, /*lp=*/true);
  t["GlobalAveragePool"] = global_pool(false);
  t["GlobalMaxPool"] = global_pool(true);
  t["BatchNormalization"] = batch_norm;
  t["MaxUnpool"] = max_unpool;
  t["DeformConv"] = deform_conv;
  t["LayerNormalization"] = layer_norm;
}

}  // namespace kiln::onnx_import
