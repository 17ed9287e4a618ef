// Converters for ONNX's loss operators, decomposed into Kiln ops: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (log_softmax over the class axis, then the same loss). The class of
// each target is picked with a one-hot mask (target == iota over the classes) and a sum over the
// class axis, so no gather with data-dependent indices is needed.
#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

Result<NodeId> sum_over(Importer& im, NodeId x, std::vector<int64_t> axes, bool keepdims) {
  ir::ReduceAttrs attrs;
  attrs.axes = std::move(axes);
  attrs.keepdims = keepdims;
  return im.add(OpKind::kReduceSum, {x}, attrs);
}

// The loss of log-probabilities `log_prob` (N, C, d...) against integer `target` (N, d...):
// -log_prob[n, target, d...] * weight[target], 0 where target == ignore_index; then the
// reduction (none, sum, or mean: the sum divided by the sum of the weights used).
Result<NodeId> nll_loss(Importer& im, NodeId log_prob, NodeId target, int weight_input) {
  const ir::TensorType xt = im.type(log_prob);
  if (xt.rank() < 2) return im.error("the input needs a class axis (rank 2 or more)");
  if (!ir::is_float(xt.dtype)) return im.error("the input must be floating-point");
  if (!ir::is_integer(im.type(target).dtype)) return im.error("the target must be integers");
  const Dim classes = xt.shape[1];
  if (classes.is_symbolic()) return im.unsupported("a dynamic number of classes");
  if (classes.size() > kMaxImportElements) return im.unsupported("more than 2^26 classes");
  const std::string reduction = im.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return im.error("reduction must be none, sum or mean");
  }
  if (im.type(target).dtype != ir::DType::kI64) {
    KILN_ASSIGN_OR_RETURN(target, im.add(OpKind::kCast, {target}, ir::CastAttrs{ir::DType::kI64}));
  }
  // target (N, d...) -> (N, 1, d...) against iota (1, C, 1...): the one-hot mask (N, C, d...).
  Shape lifted = im.type(target).shape;
  if (int64_t(lifted.size()) != xt.rank() - 1) return im.error("the target must have the input's rank less one");
  lifted.insert(lifted.begin() + 1, Dim::of(1));
  KILN_ASSIGN_OR_RETURN(NodeId target_lifted, im.reshape(target, lifted));
  KILN_ASSIGN_OR_RETURN(NodeId class_ids, im.iota(classes.size(), 1, xt.rank()));
  KILN_ASSIGN_OR_RETURN(NodeId hit, im.apply(OpKind::kEqual, {target_lifted, class_ids}));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, xt.dtype));
  KILN_ASSIGN_OR_RETURN(NodeId picked_all, im.add(OpKind::kWhere, {hit, log_prob, zero}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId picked, sum_over(im, picked_all, {1}, false));
  // The weight of each target: weight[target], or 1; 0 where ignored (and for targets outside
  // [0, C), whose mask row is empty, when a weight is given).
  NodeId weight;
  if (im.has_input(weight_input)) {
    KILN_ASSIGN_OR_RETURN(NodeId w, im.input(weight_input));
    if (im.type(w).dtype != xt.dtype) return im.error("the weight must have the input's type");
    Shape w_shape(size_t(xt.rank()), Dim::of(1));
    w_shape[1] = classes;
    KILN_ASSIGN_OR_RETURN(w, im.reshape(w, w_shape));
    KILN_ASSIGN_OR_RETURN(NodeId w_all, im.add(OpKind::kWhere, {hit, w, zero}, ir::NoAttrs{}));
    KILN_ASSIGN_OR_RETURN(weight, sum_over(im, w_all, {1}, false));
  } else {
    KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1.0, xt.dtype));
    KILN_ASSIGN_OR_RETURN(weight, im.add(OpKind::kBroadcastTo, {one}, ir::BroadcastToAttrs{im.type(picked).shape}));
  }
  if (const onnx::AttributeProto* ignore = im.attr("ignore_index")) {
    KILN_ASSIGN_OR_RETURN(NodeId ignored, im.scalar(double(ignore->i()), ir::DType::kI64));
    KILN_ASSIGN_OR_RETURN(NodeId is_ignored, im.apply(OpKind::kEqual, {target, ignored}));
    KILN_ASSIGN_OR_RETURN(weight, im.add(OpKind::kWhere, {is_ignored, zero, weight}, ir::NoAttrs{}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId weighted, im.apply(OpKind::kMul, {picked, weight}));
  KILN_ASSIGN_OR_RETURN(NodeId loss, im.apply(OpKind::kNeg, {weighted}));
  if (reduction == "none") return loss;
  std::vector<int64_t> all;
  for (int64_t i = 0; i < im.type(loss).rank(); ++i) all.push_back(i);
  KILN_ASSIGN_OR_RETURN(NodeId total, sum_over(im, loss, all, false));
  if (reduction == "sum") return total;
  KILN_ASSIGN_OR_RETURN(NodeId weight_total, sum_over(im, weight, all, false));
  return im.apply(OpKind::kDiv, {total, weight_total});
}

Status negative_log_likelihood_loss(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId target, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId loss, nll_loss(im, x, target, 2));
  return im.set_output(0, loss);
}

Status softmax_cross_entropy_loss(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId scores, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId labels, im.input(1));
  if (im.type(scores).rank() < 2) return im.error("the scores need a class axis (rank 2 or more)");
  KILN_ASSIGN_OR_RETURN(NodeId log_prob, im.add(OpKind::kLogSoftmax, {scores}, ir::AxisAttrs{1}));
  KILN_ASSIGN_OR_RETURN(NodeId loss, nll_loss(im, log_prob, labels, 2));
  KILN_RETURN_IF_ERROR(im.set_output(0, loss));
  return im.set_output(1, log_prob);
}

}  // namespace

void register_loss_ops(std::map<std::string, Converter>& t) {
  t["NegativeLogLikelihoodLoss"] = negative_log_likelihood_loss;
  t["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy_loss;
}

}  // namespace kiln::onnx_import
