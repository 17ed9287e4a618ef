// Converters for ONNX shape and layout operators (Reshape, Transpose, Expand, Slice, Concat,
// Gather, Squeeze, Unsqueeze, Flatten, Shape, Size, ConstantOfShape, Range, Constant) and for
// reductions, ArgMax/ArgMin, Softmax/LogSoftmax, MatMul and Gemm.
//
// Shape arithmetic (Shape -> Gather -> Concat -> Reshape) works on import-time shape vectors
// (Value::dims), so dynamic dims stay symbolic instead of becoming run-time tensors.
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/onnx/onnx_importer.h"
#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

// Python-style slice of [0, n): the selected indices.
std::vector<int64_t> slice_indices(int64_t n, int64_t start, int64_t end, int64_t step) {
  std::vector<int64_t> out;
  if (step == 0) return out;
  auto clamp_index = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v = v < -n ? lo : v + n;
    return std::clamp(v, lo, hi);
  };
  if (step > 0) {
    const int64_t s = clamp_index(start, 0, n);
    const int64_t e = clamp_index(end, 0, n);
    for (int64_t i = s; i < e; i += step) out.push_back(i);
  } else {
    const int64_t s = clamp_index(start, -1, n - 1);
    const int64_t e = clamp_index(end, -1, n - 1);
    for (int64_t i = s; i > e; i += step) out.push_back(i);
  }
  return out;
}

Result<int64_t> axis_in(Importer& im, int64_t axis, int64_t rank) {
  Result<int64_t> a = ir::normalize_axis(axis, rank);
  if (!a.is_ok()) return im.error(a.status().message());
  return *a;
}

// ---- shape and layout ---------------------------------------------------------------------

Status reshape_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Shape target, im.input_dims(1, "the shape input"));
  KILN_ASSIGN_OR_RETURN(Value xv, im.input_value(0));
  if (xv.has_dynamic_dims()) {
    // A shape vector reshaped to a vector or (one entry) to a scalar stays a shape vector.
    const int64_t n = int64_t(xv.dims->size());
    if (target.size() == 1 && target[0].is_static() && (target[0].size() == -1 || target[0].size() == n)) {
      return im.set_output_dims(0, *xv.dims, false);
    }
    if (target.empty() && n == 1) return im.set_output_dims(0, *xv.dims, true);
    return im.unsupported("reshaping a shape vector with dynamic sizes to " + ir::shape_to_string(target));
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const bool allow_zero = im.attr_int("allowzero", 0) != 0;
  const Shape& in = im.type(x).shape;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_static() && target[i].size() == 0 && !allow_zero) {
      if (i >= in.size()) return im.error("shape entry 0 at index " + std::to_string(i) + " has no input dim to copy");
      target[i] = in[i];
    }
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.reshape(x, target));
  return im.set_output(0, y);
}

Status transpose_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  ir::TransposeAttrs attrs;
  if (auto perm = im.attr_ints("perm")) attrs.perm = *perm;
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kTranspose, {x}, attrs));
  return im.set_output(0, y);
}

Status expand_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Shape target, im.input_dims(1, "the shape input"));
  Result<Shape> out = ir::broadcast_shapes(im.type(x).shape, target);
  if (!out.is_ok()) return im.error(out.status().message());
  if (*out == im.type(x).shape) return im.set_output(0, x);
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kBroadcastTo, {x}, ir::BroadcastToAttrs{*out}));
  return im.set_output(0, y);
}

// A slice whose bounds include sizes of dynamic dims. An end equal to the axis' own size is no
// bound at all; x[..., 0:S] of a longer axis (a buffer of positions cut to the sequence length)
// is a gather of iota([S]) along it (a run with S beyond the axis reads out of range: an error
// on the reference device, clamped on the others). Other symbolic bounds are unsupported.
Status dynamic_slice(Importer& im, std::vector<int64_t> starts, std::vector<int64_t> ends, const Shape& start_dims,
                     const Shape& end_dims, const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const int64_t rank = im.type(x).rank();
  std::vector<std::pair<int64_t, Dim>> gathers;  // (axis, length) applied after the static slice
  for (size_t i = 0; i < starts.size(); ++i) {  // slice_op checked that all five lists agree in length
    if (start_dims[i].is_symbolic()) {
      return im.unsupported("a slice starting at the dynamic size '" + start_dims[i].symbol_name() + "'");
    }
    if (end_dims[i].is_static()) continue;
    KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, axes[i], rank));
    const Dim& extent = im.type(x).shape[size_t(axis)];
    if (steps[i] > 0 && extent == end_dims[i]) {
      ends[i] = INT64_MAX;
    } else if (steps[i] == 1 && starts[i] == 0) {
      ends[i] = INT64_MAX;
      gathers.emplace_back(axis, end_dims[i]);
    } else {
      return im.unsupported("a slice ending at the dynamic size '" + end_dims[i].symbol_name() +
                            "' that is not the axis' own size, from a start other than 0 or with a step other than 1");
    }
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kSlice, {x}, ir::SliceAttrs{starts, ends, axes, steps}));
  for (const auto& [axis, length] : gathers) {
    KILN_ASSIGN_OR_RETURN(NodeId positions, im.iota(length, 0, 1));
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kGather, {y, positions}, ir::AxisAttrs{axis}));
  }
  return im.set_output(0, y);
}

Status slice_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Value xv, im.input_value(0));
  std::vector<int64_t> starts, ends, axes, steps;
  Shape start_dims, end_dims;  // from opset 10: the bounds as given, possibly symbolic
  if (im.opset < 10) {
    // Before opset 10 starts / ends / axes are attributes and there are no steps.
    starts = im.attr_ints("starts").value_or(std::vector<int64_t>{});
    ends = im.attr_ints("ends").value_or(std::vector<int64_t>{});
    axes = im.attr_ints("axes").value_or(std::vector<int64_t>{});
  } else {
    // Bounds may be sizes of dynamic dims (x[:, :seq_len], PyTorch's position-id buffers):
    // resolved below where Kiln can express them.
    KILN_ASSIGN_OR_RETURN(start_dims, im.input_dims(1, "starts"));
    KILN_ASSIGN_OR_RETURN(end_dims, im.input_dims(2, "ends"));
    for (const Dim& d : start_dims) starts.push_back(d.is_static() ? d.size() : 0);
    for (const Dim& d : end_dims) ends.push_back(d.is_static() ? d.size() : 0);
    if (im.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(axes, im.input_ints(3, "axes"));
    }
    if (im.has_input(4)) {
      KILN_ASSIGN_OR_RETURN(steps, im.input_ints(4, "steps"));
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return im.error("starts, ends, axes and steps must have the same length");
  }
  for (int64_t s : steps) {
    if (s == 0) return im.error("slice steps must not be 0");
  }
  if (!ir::is_static(start_dims) || !ir::is_static(end_dims)) {
    if (xv.dims) return im.unsupported("slicing a shape vector at a dynamic position");
    return dynamic_slice(im, starts, ends, start_dims, end_dims, axes, steps);
  }
  if (xv.dims && !xv.dims_scalar) {
    // Slicing an import-time shape vector.
    const Shape& d = *xv.dims;
    if (starts.size() != 1) return im.unsupported("slicing a shape vector needs exactly one axis");
    KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, axes[0], 1));
    (void)axis;
    Shape out;
    for (int64_t i : slice_indices(int64_t(d.size()), starts[0], ends[0], steps[0])) out.push_back(d[size_t(i)]);
    return im.set_output_dims(0, out, false);
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  ir::SliceAttrs attrs{starts, ends, axes, steps};
  // Kiln clamps like Python; ONNX's INT64_MIN/MAX sentinels clamp the same way.
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kSlice, {x}, attrs));
  return im.set_output(0, y);
}

Status concat_op(Importer& im) {
  if (!im.attr("axis")) return im.error("needs the axis attribute");
  const int64_t axis = im.attr_int("axis", 0);
  bool any_dims = false;
  for (int i = 0; i < im.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, im.input_value(i));
    any_dims = any_dims || v.dims.has_value();
  }
  if (any_dims) {
    Shape out;
    for (int i = 0; i < im.num_inputs(); ++i) {
      KILN_ASSIGN_OR_RETURN(Shape part, im.input_dims(i, "a shape concat operand"));
      out.insert(out.end(), part.begin(), part.end());
    }
    return im.set_output_dims(0, out, false);
  }
  std::vector<NodeId> inputs;
  for (int i = 0; i < im.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(i));
    inputs.push_back(x);
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kConcat, inputs, ir::AxisAttrs{axis}));
  return im.set_output(0, y);
}

// Compress(input, condition): the slices along `axis` (of the flattened input without one) whose
// condition entry is true; entries past the condition's length are dropped. The output's size
// depends on the condition's values, so it must be a constant at import; the selection is then
// a gather at the constant positions.
Status compress_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId condition, im.input(1));
  const ir::Tensor* keep = im.const_data(condition);
  if (keep == nullptr) {
    return im.unsupported("the condition must be a constant (computed at import): Compress's output size depends on "
                          "its values, and data-dependent sizes are not supported");
  }
  if (keep->rank() != 1) return im.error("the condition must be 1-D");
  int64_t axis = 0;
  if (im.attr("axis") != nullptr) {
    Result<int64_t> a = ir::normalize_axis(im.attr_int("axis", 0), im.type(x).rank());
    if (!a.is_ok()) return im.error(a.status().message());
    axis = *a;
  } else {
    const std::optional<int64_t> n = ir::static_num_elements(im.type(x).shape);
    if (!n) return im.unsupported("Compress without an axis of an input of dynamic size");
    KILN_ASSIGN_OR_RETURN(x, im.reshape(x, {Dim::of(*n)}));
  }
  const Dim extent = im.type(x).shape[size_t(axis)];
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < keep->num_elements(); ++i) {
    if (keep->element_as_double(i) == 0) continue;
    if (extent.is_static() && i >= extent.size()) break;
    positions.push_back(i);
  }
  if (positions.empty()) return im.unsupported("a Compress that keeps nothing (an empty output) is not supported");
  KILN_ASSIGN_OR_RETURN(NodeId index, im.ints_constant(positions));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kGather, {x, index}, ir::AxisAttrs{axis}));
  return im.set_output(0, y);
}

// Operators whose output sizes depend on the input values. Kiln's graphs have static or symbolic
// sizes fixed before a run, and the runtime has no data-dependent shapes, so these are reported
// with the reason (docs/onnx.md).
Converter data_dependent_size(std::string what) {
  return [what](Importer& im) -> Status {
    return im.unsupported(what + " depends on the input values; data-dependent output sizes are not supported");
  };
}

// TensorScatter (opset 24): a KV-cache update. present = past with `update` (past's shape but
// sequence_length along `axis`) written at positions write_indices[b] + s along `axis` (modulo
// the cache length in "circular" mode), as one scatter; positions past the cache's end in
// "linear" mode, which ONNX leaves undefined, are dropped.
Status tensor_scatter_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId past, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId update, im.input(1));
  const Shape ps = im.type(past).shape, us = im.type(update).shape;
  if (ps.size() < 2 || us.size() != ps.size() || im.type(past).dtype != im.type(update).dtype) {
    return im.error("past_cache and update must have one dtype and rank (at least 2)");
  }
  const int64_t rank = int64_t(ps.size());
  Result<int64_t> normalized = ir::normalize_axis(im.attr_int("axis", -2), rank);
  if (!normalized.is_ok()) return im.error(normalized.status().message());
  const int64_t axis = *normalized;
  if (axis == 0) return im.error("axis must not be the batch axis");
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis && us[size_t(i)] != ps[size_t(i)]) {
      return im.error("update " + ir::shape_to_string(us) + " must match past_cache " + ir::shape_to_string(ps) +
                      " off the sequence axis");
    }
  }
  const std::string mode = im.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") return im.error("unknown mode '" + mode + "'");
  KILN_ASSIGN_OR_RETURN(NodeId positions, im.iota(us[size_t(axis)], axis, rank));
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(NodeId starts, im.input(2));
    if (im.type(starts).shape != Shape{ps[0]}) return im.error("write_indices must hold one index per batch entry");
    KILN_ASSIGN_OR_RETURN(starts, im.add(OpKind::kCast, {starts}, ir::CastAttrs{ir::DType::kI64}));
    Shape per_batch(size_t(rank), Dim::of(1));
    per_batch[0] = ps[0];
    KILN_ASSIGN_OR_RETURN(starts, im.reshape(starts, per_batch));
    KILN_ASSIGN_OR_RETURN(positions, im.apply(OpKind::kAdd, {positions, starts}));
  }
  if (mode == "circular") {
    KILN_ASSIGN_OR_RETURN(NodeId length, im.size_value(ps[size_t(axis)]));
    KILN_ASSIGN_OR_RETURN(positions, im.apply(OpKind::kFmod, {positions, length}));
  }
  KILN_ASSIGN_OR_RETURN(positions, im.add(OpKind::kBroadcastTo, {positions}, ir::BroadcastToAttrs{us}));
  KILN_ASSIGN_OR_RETURN(NodeId present,
                        im.add(OpKind::kScatter, {past, positions, update}, ir::ScatterAttrs{axis, ir::ScatterReduction::kNone}));
  return im.set_output(0, present);
}

// Col2Im (opset 18): the columns [N, C * prod(block), L] summed back into images [N, C, image...]
// (the adjoint of im2col). Each column entry's image position is worked out at import (entries
// that land in the padding get an index past the image, which the scatter drops), and one
// scatter with reduction add along the flattened image axis places them all; each image element
// visits every column entry of its (n, c), so the cost is the image size times the column count.
Status col2im_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> image, im.input_ints(1, "image_shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> block, im.input_ints(2, "block_shape"));
  const size_t n = image.size();
  if (n == 0 || block.size() != n) return im.error("image_shape and block_shape must have one entry per spatial dim");
  const std::vector<int64_t> dilations = im.attr_ints("dilations").value_or(std::vector<int64_t>(n, 1));
  const std::vector<int64_t> strides = im.attr_ints("strides").value_or(std::vector<int64_t>(n, 1));
  const std::vector<int64_t> pads = im.attr_ints("pads").value_or(std::vector<int64_t>(2 * n, 0));
  if (dilations.size() != n || strides.size() != n || pads.size() != 2 * n) {
    return im.error("dilations, strides and pads must match the spatial dims");
  }
  const Shape xs = im.type(x).shape;
  if (xs.size() != 3 || !ir::is_static_from(xs, 1)) return im.error("the input must be [N, C * prod(block_shape), L] with static C and L");
  int64_t block_size = 1, image_size = 1, columns = 1;
  std::vector<int64_t> blocks_per_dim(n);
  for (size_t i = 0; i < n; ++i) {
    if (image[i] < 1 || block[i] < 1 || dilations[i] < 1 || strides[i] < 1 || pads[i] < 0 || pads[n + i] < 0 ||
        image[i] > (int64_t(1) << 20) || block[i] > (int64_t(1) << 20)) {
      return im.error("sizes, dilations and strides must be positive and pads non-negative");
    }
    blocks_per_dim[i] = (image[i] + pads[i] + pads[n + i] - dilations[i] * (block[i] - 1) - 1) / strides[i] + 1;
    if (blocks_per_dim[i] < 1) return im.error("the block does not fit the padded image");
    block_size *= block[i];
    image_size *= image[i];
    columns *= blocks_per_dim[i];
  }
  if (xs[1].size() % block_size != 0 || xs[2].size() != columns) {
    return im.error("the input " + ir::shape_to_string(xs) + " does not hold C * " + std::to_string(block_size) + " rows of " +
                    std::to_string(columns) + " blocks");
  }
  const int64_t channels = xs[1].size() / block_size;
  KILN_RETURN_IF_ERROR(check_import_size(im, {Dim::of(block_size * columns)}, "the column positions"));
  KILN_ASSIGN_OR_RETURN(ir::Tensor positions, ir::Tensor::zeros(ir::DType::kI64, {1, 1, block_size * columns}));
  int64_t* at = positions.mutable_data_as<int64_t>();
  for (int64_t k = 0; k < block_size; ++k) {
    for (int64_t l = 0; l < columns; ++l) {
      int64_t krest = k, lrest = l, position = 0, stride = 1;
      bool inside = true;
      for (size_t i = n; i-- > 0;) {
        const int64_t offset = krest % block[i], column = lrest % blocks_per_dim[i];
        krest /= block[i];
        lrest /= blocks_per_dim[i];
        const int64_t coordinate = column * strides[i] - pads[i] + offset * dilations[i];
        inside = inside && coordinate >= 0 && coordinate < image[i];
        position += coordinate * stride;
        stride *= image[i];
      }
      *at++ = inside ? position : image_size;
    }
  }
  const NodeId index_constant = im.add_constant(std::move(positions), "col2im_positions");
  const Shape flat{xs[0], Dim::of(channels), Dim::of(block_size * columns)};
  KILN_ASSIGN_OR_RETURN(NodeId values, im.reshape(x, flat));
  KILN_ASSIGN_OR_RETURN(NodeId indices, im.add(OpKind::kBroadcastTo, {index_constant}, ir::BroadcastToAttrs{flat}));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId zeros, im.add(OpKind::kBroadcastTo, {zero},
                                             ir::BroadcastToAttrs{{xs[0], Dim::of(channels), Dim::of(image_size)}}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kScatter, {zeros, indices, values}, ir::ScatterAttrs{2, ir::ScatterReduction::kAdd}));
  Shape out{xs[0], Dim::of(channels)};
  for (int64_t d : image) out.push_back(Dim::of(d));
  KILN_ASSIGN_OR_RETURN(y, im.reshape(y, out));
  return im.set_output(0, y);
}

Status gather_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Value xv, im.input_value(0));
  const int64_t axis_attr = im.attr_int("axis", 0);
  KILN_ASSIGN_OR_RETURN(NodeId idx, im.input(1));
  if (xv.dims && !xv.dims_scalar) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> indices, im.const_ints(idx, "gather indices on a shape"));
    const int64_t n = int64_t(xv.dims->size());
    if (im.type(idx).rank() > 1) return im.unsupported("gather on a shape needs 0-d or 1-d indices");
    Shape out;
    for (int64_t i : indices) {
      if (i < -n || i >= n) return im.error("gather index " + std::to_string(i) + " is out of range");
      out.push_back((*xv.dims)[size_t(i < 0 ? i + n : i)]);
    }
    return im.set_output_dims(0, out, im.type(idx).rank() == 0);
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, axis_attr, im.type(x).rank()));
  // Negative indices count from the end; constant indices are normalized here.
  if (const ir::Tensor* t = im.const_data(idx)) {
    const Dim& d = im.type(x).shape[size_t(axis)];
    bool negative = false;
    for (int64_t i = 0; i < t->num_elements(); ++i) negative = negative || t->element_as_int(i) < 0;
    if (negative && d.is_static()) {
      ir::Tensor fixed = t->clone();
      for (int64_t i = 0; i < fixed.num_elements(); ++i) {
        const int64_t v = fixed.element_as_int(i);
        if (v < 0) fixed.set_element_from_double(i, double(v + d.size()));
      }
      idx = im.add_constant(std::move(fixed), "indices");
    }
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kGather, {x, idx}, ir::AxisAttrs{axis}));
  return im.set_output(0, y);
}

// GatherElements: out[i] = data[i with coordinate `axis` replaced by indices[i]]. Lowered to a
// gather from the flattened data at the linear offsets sum_d coord_d * stride_d, where coord_axis
// is the index (negative ones count from the end) and the other coordinates are iotas over the
// indices' shape. Symbolic sizes work throughout (strides over them are computed at run time);
// the data is first cut to the indices' static extent on the other axes (PyTorch's exports gather
// from a [batch, N] expansion of a [1, N] buffer with [1, S] indices).
Result<NodeId> gather_elements(Importer& im, NodeId data, NodeId idx, int64_t axis_attr) {
  const int64_t rank = im.type(data).rank();
  if (rank < 1 || im.type(idx).rank() != rank) return im.error("data and indices must have the same rank (at least 1)");
  KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, axis_attr, rank));
  const Shape is = im.type(idx).shape;  // a copy: adding nodes moves types
  for (int64_t d = 0; d < rank; ++d) {
    if (d == axis || !is[size_t(d)].is_static() || im.type(data).shape[size_t(d)].is_static()) continue;
    // A slice of a symbolic dim has no static size: the first n entries as a gather instead.
    KILN_ASSIGN_OR_RETURN(NodeId first, im.iota(is[size_t(d)].size(), 0, 1));
    KILN_ASSIGN_OR_RETURN(data, im.add(OpKind::kGather, {data, first}, ir::AxisAttrs{d}));
  }
  const Shape ds = im.type(data).shape;
  // Strides over symbolic dims are computed at run time (Importer::times_size).
  KILN_ASSIGN_OR_RETURN(auto layout, im.row_major_strides(ds));
  const auto& [strides, count] = layout;
  KILN_ASSIGN_OR_RETURN(NodeId offset, im.wrap_negative(idx, ds[size_t(axis)]));
  KILN_ASSIGN_OR_RETURN(offset, im.times_size(offset, strides[size_t(axis)]));
  for (int64_t d = 0; d < rank; ++d) {
    if (d == axis || is[size_t(d)].is_one()) continue;
    KILN_ASSIGN_OR_RETURN(NodeId coord, im.iota(is[size_t(d)], d, rank));
    KILN_ASSIGN_OR_RETURN(coord, im.times_size(coord, strides[size_t(d)]));
    KILN_ASSIGN_OR_RETURN(offset, im.apply(OpKind::kAdd, {offset, coord}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId flat, im.reshape(data, {count}));
  return im.add(OpKind::kGather, {flat, offset}, ir::AxisAttrs{0});
}

Status gather_elements_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId data, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId idx, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId y, gather_elements(im, data, idx, im.attr_int("axis", 0)));
  return im.set_output(0, y);
}

// TopK: Kiln's topk gives the indices (best first, ties by index, as ONNX orders them; `sorted=0`
// allows any order, so sorted output is fine), the values are a GatherElements of them. K must be
// a constant (it is the output's size).
Status topk_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  int64_t k = im.attr_int("k", -1);
  if (im.opset >= 10) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ks, im.input_ints(1, "K"));
    if (ks.size() != 1) return im.error("K must hold one value");
    k = ks[0];
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, im.attr_int("axis", -1), im.type(x).rank()));
  ir::TopKAttrs attrs{k, axis, im.attr_int("largest", 1) != 0};
  KILN_ASSIGN_OR_RETURN(NodeId indices, im.add(OpKind::kTopK, {x}, attrs));
  KILN_ASSIGN_OR_RETURN(NodeId values, gather_elements(im, x, indices, axis));
  KILN_RETURN_IF_ERROR(im.set_output(0, values));
  return im.set_output(1, indices);
}

// ScatterElements (and opset 9-10's Scatter, the same without a reduction) and ScatterND map
// onto Kiln's scatter op: along one axis, each update combined into the element its index
// names. Operands computed at run time become a scatter kernel; constant ones fold at import
// (Importer::add). Indices are checked where they are constants: an out-of-range index is an
// error then, as ONNX says; at run time one is dropped (docs/graph-format.md).

// The reduction attribute: "none" before opset 16; add and mul from 16, max and min from 18.
Result<ir::ScatterReduction> scatter_reduction(Importer& im) {
  const std::string name = im.attr_string("reduction", "none");
  const std::optional<ir::ScatterReduction> r = ir::parse_scatter_reduction(name);
  if (!r) return im.error("unknown reduction '" + name + "' (none, add, mul, max or min)");
  const int64_t since = *r == ir::ScatterReduction::kNone ? 0
                        : (*r == ir::ScatterReduction::kAdd || *r == ir::ScatterReduction::kMul) ? 16
                                                                                                 : 18;
  if (im.opset < since) {
    return im.error("reduction '" + name + "' needs opset " + std::to_string(since) + " or later");
  }
  return *r;
}

// Constant indices must lie in [-extent, extent) of the axis they index (when it is static).
Status check_constant_indices(Importer& im, const ir::Tensor& t, const std::vector<ir::Dim>& extents) {
  const int64_t k = int64_t(extents.size());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const ir::Dim& n = extents[size_t(i % k)];
    const int64_t v = t.element_as_int(i);
    if (n.is_static() && (v < -n.size() || v >= n.size())) {
      return im.error("index " + std::to_string(v) + " is out of range for a dim of size " + std::to_string(n.size()));
    }
  }
  return Status::ok();
}

Result<NodeId> scatter_indices(Importer& im, int i) {
  KILN_ASSIGN_OR_RETURN(NodeId idx, im.input(i));
  if (im.type(idx).dtype != ir::DType::kI32 && im.type(idx).dtype != ir::DType::kI64) {
    return im.error("indices must be int32 or int64, got " + im.type(idx).to_string());
  }
  return idx;
}

Status scatter_elements_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId data, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId idx, scatter_indices(im, 1));
  KILN_ASSIGN_OR_RETURN(NodeId updates, im.input(2));
  KILN_ASSIGN_OR_RETURN(ir::ScatterReduction reduction, scatter_reduction(im));
  const int64_t rank = im.type(data).rank();
  if (rank < 1 || im.type(idx).rank() != rank || im.type(updates).shape != im.type(idx).shape) {
    return im.error("data, indices and updates must have the same rank (at least 1) and updates the shape of "
                    "indices, got " + im.type(data).to_string() + ", " + im.type(idx).to_string() + " and " +
                    im.type(updates).to_string());
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, im.attr_int("axis", 0), rank));
  if (const ir::Tensor* t = im.const_data(idx)) {
    KILN_RETURN_IF_ERROR(check_constant_indices(im, *t, {im.type(data).shape[size_t(axis)]}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kScatter, {data, idx, updates}, ir::ScatterAttrs{axis, reduction}));
  return im.set_output(0, y);
}

// ScatterND: each index tuple (the indices' last dim, k long) names a slice of the data after
// its first k dims. Lowered to one scatter along axis 0 of the data seen as [R, rest...] (R: the
// product of its first k dims): each tuple's row there is sum_j wrap(index_j) * stride_j (a
// tuple with a component out of range gets row R, which the scatter drops), broadcast over the
// rest; the updates become [M, rest...] (M: the number of tuples). Symbolic sizes work as in
// GatherND (products of symbols; strides over them computed at run time); only k must be static.
// The kernel visits all M updates for each output element.
Status scatter_nd_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId data, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId idx, scatter_indices(im, 1));
  KILN_ASSIGN_OR_RETURN(NodeId updates, im.input(2));
  KILN_ASSIGN_OR_RETURN(ir::ScatterReduction reduction, scatter_reduction(im));
  // Copies: adding nodes moves types.
  const Shape ds = im.type(data).shape, is = im.type(idx).shape, us = im.type(updates).shape;
  const int64_t rank = int64_t(ds.size()), irank = int64_t(is.size());
  if (irank < 1) return im.error("indices must have rank 1 or more");
  if (!is.back().is_static()) {
    return im.unsupported("ScatterND with indices whose last dim (the index length) is dynamic: " +
                          im.type(idx).to_string());
  }
  const int64_t k = is.back().size();
  if (k < 1 || k > rank) {
    return im.error("the last dim of indices (" + std::to_string(k) + ") must be in 1..rank(data) = 1.." +
                    std::to_string(rank));
  }
  Shape tuple_shape(is.begin(), is.end() - 1);
  const Shape rest(ds.begin() + k, ds.end());
  Shape expected = tuple_shape;
  expected.insert(expected.end(), rest.begin(), rest.end());
  if (us != expected) {
    return im.error("updates " + im.type(updates).to_string() + " do not have the shape " +
                    ir::shape_to_string(expected) + " that indices " + im.type(idx).to_string() + " and data " +
                    im.type(data).to_string() + " imply");
  }
  if (const ir::Tensor* t = im.const_data(idx)) {
    KILN_RETURN_IF_ERROR(check_constant_indices(im, *t, std::vector<ir::Dim>(ds.begin(), ds.begin() + k)));
  }
  KILN_ASSIGN_OR_RETURN(auto layout, im.row_major_strides(Shape(ds.begin(), ds.begin() + k)));
  const auto& [strides, rows] = layout;
  KILN_ASSIGN_OR_RETURN(auto tuples, im.row_major_strides(tuple_shape));
  const ir::Dim count = tuples.second;  // M
  NodeId row = ir::kNoNode;
  if (k == 1) {
    // One component: the scatter wraps a negative index and drops an out-of-range one itself.
    KILN_ASSIGN_OR_RETURN(row, im.reshape(idx, tuple_shape));
  } else {
    NodeId valid = ir::kNoNode;
    KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0, ir::DType::kI64));
    for (int64_t j = 0; j < k; ++j) {
      KILN_ASSIGN_OR_RETURN(NodeId c, im.add(OpKind::kSlice, {idx}, ir::SliceAttrs{{j}, {j + 1}, {irank - 1}, {1}}));
      KILN_ASSIGN_OR_RETURN(c, im.reshape(c, tuple_shape));
      KILN_ASSIGN_OR_RETURN(c, im.wrap_negative(c, ds[size_t(j)]));
      // A component outside its dim would land in another row: the tuple is dropped instead.
      KILN_ASSIGN_OR_RETURN(NodeId extent, im.size_value(ds[size_t(j)]));
      KILN_ASSIGN_OR_RETURN(NodeId above, im.apply(OpKind::kGreaterEqual, {c, zero}));
      KILN_ASSIGN_OR_RETURN(NodeId below, im.apply(OpKind::kLess, {c, extent}));
      KILN_ASSIGN_OR_RETURN(NodeId ok, im.apply(OpKind::kAnd, {above, below}));
      if (valid == ir::kNoNode) {
        valid = ok;
      } else {
        KILN_ASSIGN_OR_RETURN(valid, im.apply(OpKind::kAnd, {valid, ok}));
      }
      KILN_ASSIGN_OR_RETURN(c, im.times_size(c, strides[size_t(j)]));
      KILN_ASSIGN_OR_RETURN(row, im.add_term(row, c));
    }
    KILN_ASSIGN_OR_RETURN(NodeId dropped, im.size_value(rows));
    KILN_ASSIGN_OR_RETURN(row, im.add(OpKind::kWhere, {valid, row, dropped}, ir::NoAttrs{}));
  }
  // Rows as [M, 1, ...] broadcast over the rest, updates as [M, rest...], data as [R, rest...].
  Shape row_shape = {count};
  row_shape.insert(row_shape.end(), rest.size(), ir::Dim::of(1));
  Shape update_shape = {count};
  update_shape.insert(update_shape.end(), rest.begin(), rest.end());
  Shape flat_shape = {rows};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  KILN_ASSIGN_OR_RETURN(row, im.reshape(row, row_shape));
  if (row_shape != update_shape) {
    KILN_ASSIGN_OR_RETURN(row, im.add(OpKind::kBroadcastTo, {row}, ir::BroadcastToAttrs{update_shape}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId flat_updates, im.reshape(updates, update_shape));
  KILN_ASSIGN_OR_RETURN(NodeId flat, im.reshape(data, flat_shape));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kScatter, {flat, row, flat_updates}, ir::ScatterAttrs{0, reduction}));
  KILN_ASSIGN_OR_RETURN(y, im.reshape(y, ds));
  return im.set_output(0, y);
}

// GatherND: each index tuple (the indices' last dim, k long) picks a slice of the data after its
// first batch_dims dims. Lowered like GatherElements: the data as [B * P, rest...] (B: the
// batch dims, P: the k indexed dims), each tuple's row there as a linear offset (its batch's
// iota times P plus the tuple's components, negatives wrapped, times their strides), and one
// gather along axis 0. Symbolic sizes work throughout: B * P and the strides are products, and
// strides over symbolic dims are computed at run time (Importer::size_value).
Status gather_nd_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId data, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId idx, im.input(1));
  const Shape ds = im.type(data).shape, is = im.type(idx).shape;  // copies: adding nodes moves types
  const int64_t rank = int64_t(ds.size()), irank = int64_t(is.size());
  const int64_t b = im.attr_int("batch_dims", 0);
  if (irank < 1 || !is.back().is_static()) return im.error("indices need a static last dim");
  const int64_t k = is.back().size();
  if (b < 0 || b >= std::min(rank, irank) || k < 1 || b + k > rank) {
    return im.error("batch_dims and the index length do not fit the data's rank");
  }
  for (int64_t d = 0; d < b; ++d) {
    if (ds[size_t(d)] != is[size_t(d)]) return im.error("data and indices differ in a batch dim");
  }
  // Row strides of the data's first b + k dims; `rows` is B * P.
  KILN_ASSIGN_OR_RETURN(auto layout, im.row_major_strides(Shape(ds.begin(), ds.begin() + (b + k))));
  const auto& [strides, rows] = layout;
  // The linear row of each tuple, shaped as the indices without their last dim.
  Shape tuple_shape(is.begin(), is.end() - 1);
  NodeId offset = ir::kNoNode;
  for (int64_t d = 0; d < b + k; ++d) {
    NodeId term = ir::kNoNode;
    if (d < b) {
      KILN_ASSIGN_OR_RETURN(term, im.iota(ds[size_t(d)], d, irank - 1));
    } else {
      KILN_ASSIGN_OR_RETURN(term, im.add(OpKind::kSlice, {idx}, ir::SliceAttrs{{d - b}, {d - b + 1}, {irank - 1}, {1}}));
      KILN_ASSIGN_OR_RETURN(term, im.reshape(term, tuple_shape));
      KILN_ASSIGN_OR_RETURN(term, im.wrap_negative(term, ds[size_t(d)]));
    }
    KILN_ASSIGN_OR_RETURN(term, im.times_size(term, strides[size_t(d)]));
    KILN_ASSIGN_OR_RETURN(offset, im.add_term(offset, term));
  }
  Shape flat_shape = {rows};
  flat_shape.insert(flat_shape.end(), ds.begin() + (b + k), ds.end());
  KILN_ASSIGN_OR_RETURN(NodeId flat, im.reshape(data, flat_shape));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kGather, {flat, offset}, ir::AxisAttrs{0}));
  return im.set_output(0, y);
}

// Axes from the attribute (before `input_from_opset`) or from input 1.
Result<std::optional<std::vector<int64_t>>> axes_of(Importer& im, int64_t input_from_opset) {
  if (im.opset >= input_from_opset) {
    if (!im.has_input(1)) return std::optional<std::vector<int64_t>>();
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, im.input_ints(1, "axes"));
    return std::optional<std::vector<int64_t>>(axes);
  }
  return im.attr_ints("axes");
}

Status squeeze_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Value xv, im.input_value(0));
  KILN_ASSIGN_OR_RETURN(auto axes_opt, axes_of(im, 13));
  if (xv.dims) {
    if (xv.dims->size() != 1) return im.unsupported("squeeze of a shape vector");
    return im.set_output_dims(0, *xv.dims, true);
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const Shape& in = im.type(x).shape;
  std::vector<bool> drop(in.size(), false);
  if (axes_opt && !axes_opt->empty()) {
    for (int64_t a : *axes_opt) {
      KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, a, int64_t(in.size())));
      if (!in[size_t(axis)].is_one()) return im.error("cannot squeeze axis " + std::to_string(a) + " of size " + in[size_t(axis)].to_string());
      drop[size_t(axis)] = true;
    }
  } else {
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].is_symbolic()) return im.unsupported("squeeze without axes of a dynamic dim");
      drop[i] = in[i].is_one();
    }
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.reshape(x, out));
  return im.set_output(0, y);
}

Status unsqueeze_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Value xv, im.input_value(0));
  KILN_ASSIGN_OR_RETURN(auto axes_opt, axes_of(im, 13));
  if (!axes_opt || axes_opt->empty()) return im.error("needs axes");
  if (xv.dims) {
    if (!xv.dims_scalar || axes_opt->size() != 1) return im.unsupported("unsqueeze of a shape vector");
    return im.set_output_dims(0, *xv.dims, false);
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const Shape& in = im.type(x).shape;
  const int64_t out_rank = int64_t(in.size() + axes_opt->size());
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t a : *axes_opt) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, a, out_rank));
    if (inserted[size_t(axis)]) return im.error("axis " + std::to_string(a) + " appears twice");
    inserted[size_t(axis)] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(inserted[size_t(i)] ? Dim::of(1) : in[next++]);
  KILN_ASSIGN_OR_RETURN(NodeId y, im.reshape(x, out));
  return im.set_output(0, y);
}

// Product of dims; nullopt when symbolic.
std::optional<int64_t> product(const Shape& s, size_t from, size_t to) {
  return ir::static_num_elements(Shape(s.begin() + from, s.begin() + to));
}

Status flatten_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const Shape& in = im.type(x).shape;
  const int64_t rank = int64_t(in.size());
  int64_t axis = im.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return im.error("axis " + std::to_string(im.attr_int("axis", 1)) + " is out of range");
  const auto left = product(in, 0, size_t(axis));
  const auto right = product(in, size_t(axis), in.size());
  Shape out;
  if (left && right) {
    out = {Dim::of(*left), Dim::of(*right)};
  } else if (right) {
    out = {axis == 1 ? in[0] : Dim::of(-1), Dim::of(*right)};
  } else if (left) {
    out = {Dim::of(*left), axis == rank - 1 ? in.back() : Dim::of(-1)};
  } else {
    return im.unsupported("flatten with dynamic dims on both sides of the axis");
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.reshape(x, out));
  return im.set_output(0, y);
}

Status shape_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Value xv, im.input_value(0));
  Shape in;
  if (xv.dims) {
    // The shape of a shape vector: its length (without materializing it as data).
    if (!xv.dims_scalar) in.push_back(Dim::of(int64_t(xv.dims->size())));
  } else {
    in = im.type(xv.node).shape;
  }
  const int64_t rank = int64_t(in.size());
  int64_t start = im.attr_int("start", 0);
  int64_t end = im.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  Shape out;
  for (int64_t i = start; i < end; ++i) out.push_back(in[size_t(i)]);
  return im.set_output_dims(0, out, false);
}

Status size_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const auto n = ir::static_num_elements(im.type(x).shape);
  if (!n) return im.unsupported("Size of a tensor with dynamic dims");
  return im.set_output_dims(0, {Dim::of(*n)}, true);
}

Status constant_of_shape(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Shape shape, im.input_dims(0, "the shape input"));
  ir::Tensor value;
  if (const auto* a = im.attr("value")) {
    KILN_ASSIGN_OR_RETURN(value, tensor_from_proto(a->t(), im.base_dir));
    if (value.num_elements() != 1) return im.error("value must hold one element");
  } else {
    KILN_ASSIGN_OR_RETURN(value, ir::Tensor::zeros(ir::DType::kF32, {1}));
  }
  if (!ir::is_static(shape)) {
    // A dynamic shape (masks of the sequence length): the value broadcast at run time.
    KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(value.element_as_double(0), value.dtype()));
    KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kBroadcastTo, {one}, ir::BroadcastToAttrs{shape}));
    return im.set_output(0, y);
  }
  const std::optional<int64_t> numel = ir::static_num_elements(shape);
  if (!numel || *numel > kMaxImportElements) return im.unsupported("ConstantOfShape of more than 2^26 elements");
  KILN_ASSIGN_OR_RETURN(ir::Tensor out, ir::Tensor::zeros(value.dtype(), ir::static_sizes(shape)));
  const double v = value.element_as_double(0);
  for (int64_t i = 0; i < out.num_elements(); ++i) out.set_element_from_double(i, v);
  return im.set_output(0, im.add_constant(std::move(out)));
}

Status range_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Value limit_value, im.input_value(1));
  if (limit_value.has_dynamic_dims()) {
    const Shape& limit_dims = *limit_value.dims;
    // Up to a dynamic size (position ids of the sequence): 0, 1, ..., S - 1 is an iota; other
    // starts or steps would have a length that is an expression of S.
    KILN_ASSIGN_OR_RETURN(NodeId start, im.input(0));
    KILN_ASSIGN_OR_RETURN(NodeId delta, im.input(2));
    const ir::Tensor* s = im.const_data(start);
    const ir::Tensor* d = im.const_data(delta);
    if (s == nullptr || d == nullptr || s->num_elements() != 1 || d->num_elements() != 1 ||
        s->element_as_double(0) != 0 || d->element_as_double(0) != 1 || limit_dims.size() != 1) {
      return im.unsupported("a Range up to the dynamic size '" + limit_dims[0].to_string() +
                            "' must start at a constant 0 with a constant step of 1");
    }
    KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kIota, {}, ir::IotaAttrs{{limit_dims[0]}, 0, s->dtype()}));
    return im.set_output(0, y);
  }
  const ir::Tensor* args[3];
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(NodeId a, im.input(i));
    args[i] = im.const_data(a);
    if (args[i] == nullptr || args[i]->num_elements() != 1) {
      return im.unsupported("start, limit and delta: each must be a constant scalar (computed at import)");
    }
  }
  const ir::DType dtype = args[0]->dtype();
  const double start = args[0]->element_as_double(0);
  const double limit = args[1]->element_as_double(0);
  const double delta = args[2]->element_as_double(0);
  if (delta == 0) return im.error("delta must not be 0");
  const double count_f = std::max(std::ceil((limit - start) / delta), 0.0);
  if (!(count_f <= double(kMaxImportElements))) return im.unsupported("a Range of more than 2^26 elements");
  const int64_t count = int64_t(count_f);
  KILN_ASSIGN_OR_RETURN(ir::Tensor out, ir::Tensor::zeros(dtype, {count}));
  for (int64_t i = 0; i < count; ++i) {
    if (ir::is_integer(dtype)) {
      // Wrapping arithmetic: a hostile start/delta must not overflow (UB) here.
      const uint64_t v = uint64_t(args[0]->element_as_int(0)) + uint64_t(i) * uint64_t(args[2]->element_as_int(0));
      out.set_element_from_double(i, double(int64_t(v)));
    } else {
      out.set_element_from_double(i, start + double(i) * delta);
    }
  }
  return im.set_output(0, im.add_constant(std::move(out)));
}

Status constant_op(Importer& im) {
  const onnx::AttributeProto* a = nullptr;
  if ((a = im.attr("value"))) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, tensor_from_proto(a->t(), im.base_dir));
    return im.set_output(0, im.add_constant(std::move(t)));
  }
  if ((a = im.attr("value_float")) || (a = im.attr("value_int"))) {
    const bool is_float = a->name() == "value_float";
    KILN_ASSIGN_OR_RETURN(NodeId c, im.scalar(is_float ? double(a->f()) : double(a->i()),
                                             is_float ? ir::DType::kF32 : ir::DType::kI64));
    return im.set_output(0, c);
  }
  if ((a = im.attr("value_floats"))) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(ir::DType::kF32, {int64_t(a->floats_size())}));
    for (int i = 0; i < a->floats_size(); ++i) t.mutable_data_as<float>()[i] = a->floats(i);
    return im.set_output(0, im.add_constant(std::move(t)));
  }
  if ((a = im.attr("value_ints"))) {
    KILN_ASSIGN_OR_RETURN(NodeId c, im.ints_constant(std::vector<int64_t>(a->ints().begin(), a->ints().end())));
    return im.set_output(0, c);
  }
  return im.unsupported("only value, value_float(s) and value_int(s) constants are supported");
}

// ---- reductions -------------------------------------------------------------------------

enum class ReduceForm { kPlain, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// ReduceMax / ReduceMin over no elements (a static extent 0 on a reduced axis): ONNX (opset 18)
// defines the result as the identity, -inf / +inf (the dtype's lowest / highest value; false /
// true for bool), where Kiln's reductions refuse empty inputs. Returns kNoNode when x is not empty
// along `axes` (every axis when empty).
Result<NodeId> empty_extremum(Importer& im, NodeId x, OpKind op, const std::vector<int64_t>& axes, bool keepdims) {
  const Shape& in = im.type(x).shape;
  std::vector<bool> reduced(in.size(), axes.empty());
  for (int64_t a : axes) {
    Result<int64_t> axis = ir::normalize_axis(a, int64_t(in.size()));
    if (!axis.is_ok()) return im.error(axis.status().message());
    reduced[size_t(*axis)] = true;
  }
  bool empty = false;
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (reduced[i]) empty = empty || (in[i].is_static() && in[i].size() == 0);
    if (!reduced[i]) out.push_back(in[i]);
    else if (keepdims) out.push_back(Dim::of(1));
  }
  if (!empty) return ir::kNoNode;
  KILN_RETURN_IF_ERROR(check_import_size(im, out, "the result of an empty reduction"));
  const ir::DType dtype = im.type(x).dtype;
  KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(dtype, ir::static_sizes(out)));
  const bool is_max = op == OpKind::kReduceMax;
  if (dtype == ir::DType::kI64) {
    using Limits = std::numeric_limits<int64_t>;
    std::fill_n(t.mutable_data_as<int64_t>(), t.num_elements(), is_max ? Limits::lowest() : Limits::max());
    return im.add_constant(std::move(t), "empty_reduction");
  }
  double lowest = -std::numeric_limits<double>::infinity(), highest = std::numeric_limits<double>::infinity();
  if (!ir::is_float(dtype)) {  // below 64 bits: exact as doubles
    lowest = double(ir::integer_range(dtype).first);
    highest = double(ir::integer_range(dtype).second);
  }
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_element_from_double(i, is_max ? lowest : highest);
  return im.add_constant(std::move(t), "empty_reduction");
}

Converter reduce(OpKind op, ReduceForm form) {
  return [op, form](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    // ReduceSum takes axes as an input from opset 13, the others from opset 18.
    KILN_ASSIGN_OR_RETURN(auto axes_opt, axes_of(im, op == OpKind::kReduceSum && form == ReduceForm::kPlain ? 13 : 18));
    const bool keepdims = im.attr_int("keepdims", 1) != 0;
    const bool no_axes = !axes_opt || axes_opt->empty();
    if (no_axes && im.attr_int("noop_with_empty_axes", 0) != 0) return im.set_output(0, x);
    const bool extremum = form == ReduceForm::kPlain && (op == OpKind::kReduceMax || op == OpKind::kReduceMin);
    if (extremum) {
      KILN_ASSIGN_OR_RETURN(NodeId identity, empty_extremum(im, x, op, no_axes ? std::vector<int64_t>{} : *axes_opt, keepdims));
      if (identity != ir::kNoNode) return im.set_output(0, identity);
    }
    NodeId pre = x;
    if (form == ReduceForm::kL1) {
      KILN_ASSIGN_OR_RETURN(pre, im.add(OpKind::kAbs, {x}, ir::NoAttrs{}));
    } else if (form == ReduceForm::kL2 || form == ReduceForm::kSumSquare) {
      KILN_ASSIGN_OR_RETURN(pre, im.add(OpKind::kMul, {x, x}, ir::NoAttrs{}));
    } else if (form == ReduceForm::kLogSumExp) {
      KILN_ASSIGN_OR_RETURN(pre, im.add(OpKind::kExp, {x}, ir::NoAttrs{}));
    }
    ir::ReduceAttrs attrs;
    if (!no_axes) attrs.axes = *axes_opt;
    attrs.keepdims = keepdims;
    // ReduceMax / ReduceMin of bool (opset 20) are any / all: reduced as u8, then cast back.
    const bool bool_extremum = extremum && im.type(x).dtype == ir::DType::kBool;
    if (bool_extremum) {
      KILN_ASSIGN_OR_RETURN(pre, im.add(OpKind::kCast, {pre}, ir::CastAttrs{ir::DType::kU8}));
    }
    KILN_ASSIGN_OR_RETURN(NodeId y, im.add(op, {pre}, attrs));
    if (bool_extremum) {
      KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kCast, {y}, ir::CastAttrs{ir::DType::kBool}));
    }
    if (form == ReduceForm::kL2) {
      KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kSqrt, {y}, ir::NoAttrs{}));
    } else if (form == ReduceForm::kLogSum || form == ReduceForm::kLogSumExp) {
      KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kLog, {y}, ir::NoAttrs{}));
    }
    return im.set_output(0, y);
  };
}

Converter arg_reduce(bool is_min) {
  return [is_min](Importer& im) -> Status {
    const bool last = im.attr_int("select_last_index", 0) != 0;
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, im.attr_int("axis", 0), im.type(x).rank()));
    const Dim extent = im.type(x).shape[size_t(axis)];
    if (last) {
      // The last maximum is the first one of the reversed axis: index n-1-i.
      if (extent.is_symbolic()) return im.unsupported("select_last_index=1 over a dynamic axis is not supported");
      ir::SliceAttrs rev{{-1}, {std::numeric_limits<int64_t>::min()}, {axis}, {-1}};
      KILN_ASSIGN_OR_RETURN(x, im.add(OpKind::kSlice, {x}, rev));
    }
    if (is_min) {
      if (!ir::is_float(im.type(x).dtype) && !ir::is_signed_integer(im.type(x).dtype)) {
        return im.unsupported("ArgMin of an unsigned tensor");
      }
      KILN_ASSIGN_OR_RETURN(x, im.add(OpKind::kNeg, {x}, ir::NoAttrs{}));
    }
    ir::ArgMaxAttrs attrs{axis, im.attr_int("keepdims", 1) != 0};
    KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kArgMax, {x}, attrs));
    if (last) {
      KILN_ASSIGN_OR_RETURN(NodeId top, im.scalar(double(extent.size() - 1), ir::DType::kI64));
      KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kSub, {top, y}, ir::NoAttrs{}));
    }
    return im.set_output(0, y);
  };
}

Converter softmax(OpKind op) {
  return [op](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    const int64_t rank = im.type(x).rank();
    if (im.opset >= 13) {
      KILN_ASSIGN_OR_RETURN(NodeId y, im.add(op, {x}, ir::AxisAttrs{im.attr_int("axis", -1)}));
      return im.set_output(0, y);
    }
    // Before opset 13 the input is coerced to 2-D at `axis` (default 1) and normalized per row.
    KILN_ASSIGN_OR_RETURN(int64_t axis, axis_in(im, im.attr_int("axis", 1), rank));
    const Shape& in = im.type(x).shape;
    const auto right = product(in, size_t(axis), in.size());
    if (axis == rank - 1) {
      KILN_ASSIGN_OR_RETURN(NodeId y, im.add(op, {x}, ir::AxisAttrs{axis}));
      return im.set_output(0, y);
    }
    if (!right) return im.unsupported("softmax over dynamic trailing dims before opset 13");
    KILN_ASSIGN_OR_RETURN(NodeId flat, im.reshape(x, {Dim::of(-1), Dim::of(*right)}));
    KILN_ASSIGN_OR_RETURN(NodeId s, im.add(op, {flat}, ir::AxisAttrs{1}));
    KILN_ASSIGN_OR_RETURN(NodeId y, im.reshape(s, in));
    return im.set_output(0, y);
  };
}

// ---- linear algebra -----------------------------------------------------------------------

Status matmul_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kMatMul, {a, b}, ir::NoAttrs{}));
  return im.set_output(0, y);
}

Status gemm_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(1));
  if (im.type(a).rank() != 2 || im.type(b).rank() != 2) return im.error("A and B must be matrices");
  if (im.attr_int("transA", 0) != 0) {
    KILN_ASSIGN_OR_RETURN(a, im.add(OpKind::kTranspose, {a}, ir::TransposeAttrs{{1, 0}}));
  }
  if (im.attr_int("transB", 0) != 0) {
    KILN_ASSIGN_OR_RETURN(b, im.add(OpKind::kTranspose, {b}, ir::TransposeAttrs{{1, 0}}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kMatMul, {a, b}, ir::NoAttrs{}));
  const double alpha = im.attr_float("alpha", 1.0);
  const double beta = im.attr_float("beta", 1.0);
  if (alpha != 1.0) {
    KILN_ASSIGN_OR_RETURN(NodeId s, im.scalar(alpha, im.type(y).dtype));
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kMul, {y, s}, ir::NoAttrs{}));
  }
  if (im.has_input(2) && beta != 0.0) {
    KILN_ASSIGN_OR_RETURN(NodeId c, im.input(2));
    if (beta != 1.0) {
      KILN_ASSIGN_OR_RETURN(NodeId s, im.scalar(beta, im.type(c).dtype));
      KILN_ASSIGN_OR_RETURN(c, im.add(OpKind::kMul, {c, s}, ir::NoAttrs{}));
    }
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kAdd, {y, c}, ir::NoAttrs{}));
  }
  return im.set_output(0, y);
}

}  // namespace

void register_tensor_ops(std::map<std::string, Converter>& t) {
  t["Reshape"] = reshape_op;
  t["Transpose"] = transpose_op;
  t["Expand"] = expand_op;
  t["Slice"] = slice_op;
  t["Concat"] = concat_op;
  t["Gather"] = gather_op;
  t["Compress"] = compress_op;
  t["NonZero"] = data_dependent_size("the number of nonzero elements");
  t["NonMaxSuppression"] = data_dependent_size("the number of boxes kept");
  t["Unique"] = data_dependent_size("the number of unique elements");
  t["GatherElements"] = gather_elements_op;
  t["TopK"] = topk_op;
  t["GatherND"] = gather_nd_op;
  t["ScatterND"] = scatter_nd_op;
  t["ScatterElements"] = scatter_elements_op;
  t["Scatter"] = scatter_elements_op;
  t["TensorScatter"] = tensor_scatter_op;
  t["Col2Im"] = col2im_op;
  t["Squeeze"] = squeeze_op;
  t["Unsqueeze"] = unsqueeze_op;
  t["Flatten"] = flatten_op;
  t["Shape"] = shape_op;
  t["Size"] = size_op;
  t["ConstantOfShape"] = constant_of_shape;
  t["Range"] = range_op;
  t["Constant"] = constant_op;
  t["ReduceSum"] = reduce(OpKind::kReduceSum, ReduceForm::kPlain);
  t["ReduceMean"] = reduce(OpKind::kReduceMean, ReduceForm::kPlain);
  t["ReduceMax"] = reduce(OpKind::kReduceMax, ReduceForm::kPlain);
  t["ReduceMin"] = reduce(OpKind::kReduceMin, ReduceForm::kPlain);
  t["ReduceProd"] = reduce(OpKind::kReduceProd, ReduceForm::kPlain);
  t["ReduceL1"] = reduce(OpKind::kReduceSum, ReduceForm::kL1);
  t["ReduceL2"] = reduce(OpKind::kReduceSum, ReduceForm::kL2);
  t["ReduceSumSquare"] = reduce(OpKind::kReduceSum, ReduceForm::kSumSquare);
  t["ReduceLogSum"] = reduce(OpKind::kReduceSum, ReduceForm::kLogSum);
  t["ReduceLogSumExp"] = reduce(OpKind::kReduceSum, ReduceForm::kLogSumExp);
  t["ArgMax"] = arg_reduce(false);
  t["ArgMin"] = arg_reduce(true);
  t["Softmax"] = softmax(OpKind::kSoftmax);
  t["LogSoftmax"] = softmax(OpKind::kLogSoftmax);
  t["MatMul"] = matmul_op;
  t["Gemm"] = gemm_op;
}

}  // namespace kiln::onnx_import
