// Converters for ONNX normalizations that Kiln decomposes into reductions and elementwise ops
// (the fusion pass puts each back together as reduction kernels with fused prologues and
// epilogues): InstanceNormalization, GroupNormalization, MeanVarianceNormalization,
// LpNormalization, RMSNormalization.
#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

ir::ReduceAttrs keepdims_over(std::vector<int64_t> axes) {
  ir::ReduceAttrs attrs;
  attrs.axes = std::move(axes);
  attrs.keepdims = true;
  return attrs;
}

// The axes from `axis` (normalized against rank) to the last.
Result<std::vector<int64_t>> trailing_axes(Importer& im, int64_t axis, int64_t rank) {
  Result<int64_t> first = ir::normalize_axis(axis, rank);
  if (!first.is_ok()) return im.error(first.status().message());
  std::vector<int64_t> axes;
  for (int64_t i = *first; i < rank; ++i) axes.push_back(i);
  return axes;
}

// stash_type=1 (the default) computes f16/bf16 inputs in f32; returns x, cast when it must be.
Result<NodeId> stash(Importer& im, NodeId x) {
  const ir::DType dtype = im.type(x).dtype;
  if (im.attr_int("stash_type", 1) != 1 || dtype == ir::DType::kF32 || !ir::is_float(dtype)) return x;
  return im.add(OpKind::kCast, {x}, ir::CastAttrs{ir::DType::kF32});
}

// (x - mean) * rsqrt(var + epsilon) over `axes` (kept).
Result<NodeId> standardize(Importer& im, NodeId x, const std::vector<int64_t>& axes, double epsilon) {
  const ir::ReduceAttrs attrs = keepdims_over(axes);
  KILN_ASSIGN_OR_RETURN(NodeId mean, im.add(OpKind::kReduceMean, {x}, attrs));
  KILN_ASSIGN_OR_RETURN(NodeId centered, im.apply(OpKind::kSub, {x, mean}));
  KILN_ASSIGN_OR_RETURN(NodeId squared, im.apply(OpKind::kMul, {centered, centered}));
  KILN_ASSIGN_OR_RETURN(NodeId var, im.add(OpKind::kReduceMean, {squared}, attrs));
  KILN_ASSIGN_OR_RETURN(NodeId eps, im.scalar_like(var, epsilon));
  KILN_ASSIGN_OR_RETURN(NodeId var_eps, im.apply(OpKind::kAdd, {var, eps}));
  KILN_ASSIGN_OR_RETURN(NodeId inv, im.apply(OpKind::kRsqrt, {var_eps}));
  return im.apply(OpKind::kMul, {centered, inv});
}

// InstanceNormalization: X (N, C, ...) standardized over the spatial axes, scaled per channel.
Status instance_norm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId scale, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId bias, im.input(2));
  const int64_t rank = im.type(x).rank();
  if (rank < 3) return im.error("needs an input of rank 3 or more");
  std::vector<int64_t> spatial;
  Shape param{im.type(x).shape[1]};
  for (int64_t i = 2; i < rank; ++i) {
    spatial.push_back(i);
    param.push_back(Dim::of(1));
  }
  KILN_ASSIGN_OR_RETURN(scale, im.reshape(scale, param));
  KILN_ASSIGN_OR_RETURN(bias, im.reshape(bias, param));
  KILN_ASSIGN_OR_RETURN(NodeId normed, standardize(im, x, spatial, im.attr_float("epsilon", 1e-5)));
  KILN_ASSIGN_OR_RETURN(NodeId scaled, im.apply(OpKind::kMul, {normed, scale}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kAdd, {scaled, bias}));
  return im.set_output(0, y);
}

// GroupNormalization: X (N, C, ...) viewed as (N, G, C/G * spatial), standardized over the last
// axis, then scaled per channel (opset 21) or per group (opset 18, whose scale and bias have G
// entries).
Status group_norm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId scale, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId bias, im.input(2));
  const ir::TensorType xt = im.type(x);
  if (xt.rank() < 3) return im.error("needs an input of rank 3 or more");
  const int64_t groups = im.attr_int("num_groups", 0);
  if (xt.shape[1].is_symbolic()) return im.unsupported("GroupNormalization over a dynamic channel dim");
  const int64_t channels = xt.shape[1].size();
  if (groups <= 0 || channels % groups != 0) return im.error("num_groups must divide the channels");
  int64_t per_group = channels / groups;
  for (int64_t i = 2; i < xt.rank(); ++i) {
    if (xt.shape[size_t(i)].is_symbolic()) return im.unsupported("GroupNormalization over dynamic spatial dims");
    per_group *= xt.shape[size_t(i)].size();
  }
  KILN_ASSIGN_OR_RETURN(NodeId xs, stash(im, x));
  KILN_ASSIGN_OR_RETURN(NodeId grouped, im.reshape(xs, {xt.shape[0], Dim::of(groups), Dim::of(per_group)}));
  KILN_ASSIGN_OR_RETURN(NodeId normed, standardize(im, grouped, {2}, im.attr_float("epsilon", 1e-5)));
  const bool per_channel = im.opset >= 21;
  Shape param_shape{Dim::of(per_channel ? channels : groups)};
  if (per_channel) {
    KILN_ASSIGN_OR_RETURN(normed, im.reshape(normed, xt.shape));
    for (int64_t i = 2; i < xt.rank(); ++i) param_shape.push_back(Dim::of(1));
  } else {
    param_shape.push_back(Dim::of(1));
  }
  for (NodeId* p : {&scale, &bias}) {
    KILN_ASSIGN_OR_RETURN(*p, stash(im, *p));
    KILN_ASSIGN_OR_RETURN(*p, im.reshape(*p, param_shape));
  }
  KILN_ASSIGN_OR_RETURN(NodeId scaled, im.apply(OpKind::kMul, {normed, scale}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kAdd, {scaled, bias}));
  KILN_ASSIGN_OR_RETURN(y, im.reshape(y, xt.shape));
  KILN_ASSIGN_OR_RETURN(y, im.cast(y, xt.dtype));
  return im.set_output(0, y);
}

// MeanVarianceNormalization: (x - mean) / (std + 1e-9) over `axes` (default N, H, W), as ONNX's
// function body defines it (the variance is computed as the mean of squared deviations).
Status mean_variance_norm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const int64_t rank = im.type(x).rank();
  std::vector<int64_t> axes = im.attr_ints("axes").value_or(std::vector<int64_t>{0, 2, 3});
  for (int64_t& a : axes) {
    Result<int64_t> axis = ir::normalize_axis(a, rank);
    if (!axis.is_ok()) return im.error(axis.status().message());
    a = *axis;
  }
  const ir::ReduceAttrs attrs = keepdims_over(axes);
  KILN_ASSIGN_OR_RETURN(NodeId mean, im.add(OpKind::kReduceMean, {x}, attrs));
  KILN_ASSIGN_OR_RETURN(NodeId centered, im.apply(OpKind::kSub, {x, mean}));
  KILN_ASSIGN_OR_RETURN(NodeId squared, im.apply(OpKind::kMul, {centered, centered}));
  KILN_ASSIGN_OR_RETURN(NodeId var, im.add(OpKind::kReduceMean, {squared}, attrs));
  KILN_ASSIGN_OR_RETURN(NodeId std_dev, im.apply(OpKind::kSqrt, {var}));
  KILN_ASSIGN_OR_RETURN(NodeId eps, im.scalar_like(x, 1e-9));
  KILN_ASSIGN_OR_RETURN(NodeId denominator, im.apply(OpKind::kAdd, {std_dev, eps}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kDiv, {centered, denominator}));
  return im.set_output(0, y);
}

// LpNormalization: x / ||x||_p along `axis` (p = 1 or 2); a zero norm gives 0, as ONNX's
// reference does.
Status lp_norm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  if (!ir::is_float(im.type(x).dtype)) return im.error("needs a floating-point input");
  const int64_t p = im.attr_int("p", 2);
  if (p != 1 && p != 2) return im.error("p must be 1 or 2");
  Result<int64_t> axis = ir::normalize_axis(im.attr_int("axis", -1), im.type(x).rank());
  if (!axis.is_ok()) return im.error(axis.status().message());
  KILN_ASSIGN_OR_RETURN(NodeId magnitude, p == 1 ? im.apply(OpKind::kAbs, {x}) : im.apply(OpKind::kMul, {x, x}));
  KILN_ASSIGN_OR_RETURN(NodeId norm, im.add(OpKind::kReduceSum, {magnitude}, keepdims_over({*axis})));
  if (p == 2) {
    KILN_ASSIGN_OR_RETURN(norm, im.apply(OpKind::kSqrt, {norm}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId is_zero, im.apply(OpKind::kEqual, {norm, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId quotient, im.apply(OpKind::kDiv, {x, norm}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kWhere, {is_zero, zero, quotient}, ir::NoAttrs{}));
  return im.set_output(0, y);
}

// RMSNormalization (opset 23): x * rsqrt(mean(x^2) + epsilon) * scale over the axes from `axis`.
Status rms_norm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId scale, im.input(1));
  const ir::TensorType xt = im.type(x);
  if (!ir::is_float(xt.dtype)) return im.error("needs a floating-point input");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, trailing_axes(im, im.attr_int("axis", -1), xt.rank()));
  KILN_ASSIGN_OR_RETURN(NodeId xs, stash(im, x));
  KILN_ASSIGN_OR_RETURN(NodeId squared, im.apply(OpKind::kMul, {xs, xs}));
  KILN_ASSIGN_OR_RETURN(NodeId mean, im.add(OpKind::kReduceMean, {squared}, keepdims_over(axes)));
  KILN_ASSIGN_OR_RETURN(NodeId eps, im.scalar_like(mean, im.attr_float("epsilon", 1e-5)));
  KILN_ASSIGN_OR_RETURN(NodeId mean_eps, im.apply(OpKind::kAdd, {mean, eps}));
  KILN_ASSIGN_OR_RETURN(NodeId inv, im.apply(OpKind::kRsqrt, {mean_eps}));
  KILN_ASSIGN_OR_RETURN(NodeId normed, im.apply(OpKind::kMul, {xs, inv}));
  KILN_ASSIGN_OR_RETURN(scale, stash(im, scale));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMul, {normed, scale}));
  KILN_ASSIGN_OR_RETURN(y, im.cast(y, xt.dtype));
  return im.set_output(0, y);
}

}  // namespace

void register_norm_ops(std::map<std::string, Converter>& t) {
  t["InstanceNormalization"] = instance_norm;
  t["GroupNormalization"] = group_norm;
  t["MeanVarianceNormalization"] = mean_variance_norm;
  t["LpNormalization"] = lp_norm;
  t["RMSNormalization"] = rms_norm;
}

}  // namespace kiln::onnx_import
