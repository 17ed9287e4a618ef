// The converter for ONNX's Attention (opsets 23-25), decomposed into Kiln ops: the head split of
// 3-D inputs, the past key/value concat, grouped-query heads, Q K^T scaled, softcap, the additive
// bias (attn_mask, causal and sliding-window masks), softmax with fully masked rows set to 0, and
// the product with V. The fusion pass turns the chain into matmul and softmax kernels.
//
// Semantics follow ONNX's reference implementation (onnx/reference/ops/op_attention.py), which
// the node tests are generated with: qk_matmul_output modes 0 and 1 give the (softcapped)
// scores, 2 the scores plus the bias, 3 the softmax.
#include <cmath>
#include <limits>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Result<NodeId> transpose(Importer& im, NodeId x, std::vector<int64_t> perm) {
  return im.add(OpKind::kTranspose, {x}, ir::TransposeAttrs{std::move(perm)});
}

// (B, S, H * D) -> (B, H, S, D).
Result<NodeId> split_heads(Importer& im, NodeId x, int64_t heads, std::string_view what) {
  const Shape& s = im.type(x).shape;
  if (heads <= 0) return im.error("3-D inputs need q_num_heads and kv_num_heads");
  if (s[2].is_symbolic() || s[2].size() % heads != 0) {
    return im.error(std::string(what) + "'s hidden size must be a static multiple of its number of heads");
  }
  KILN_ASSIGN_OR_RETURN(NodeId r, im.reshape(x, {s[0], s[1], Dim::of(heads), Dim::of(s[2].size() / heads)}));
  return transpose(im, r, {0, 2, 1, 3});
}

// K or V (B, Hkv, S, D) with each head repeated `reps` times: (B, Hkv * reps, S, D).
Result<NodeId> repeat_heads(Importer& im, NodeId x, int64_t reps) {
  if (reps == 1) return x;
  const Shape s = im.type(x).shape;
  KILN_ASSIGN_OR_RETURN(NodeId r, im.reshape(x, {s[0], s[1], Dim::of(1), s[2], s[3]}));
  KILN_ASSIGN_OR_RETURN(r, im.add(OpKind::kBroadcastTo, {r}, ir::BroadcastToAttrs{{s[0], s[1], Dim::of(reps), s[2], s[3]}}));
  return im.reshape(r, {s[0], Dim::of(s[1].size() * reps), s[2], s[3]});
}

// 0 where query i may attend key j, -inf elsewhere: causal, j <= i + offset; the sliding window,
// i + offset - left <= j <= i + offset + right (a negative bound is open). `offset` is an i64
// scalar (the past length: the result is a (q, kv) constant, folded at import) or (B, 1, 1, 1)
// from nonpad_kv_seqlen (the result is (B, 1, q, kv)).
Result<NodeId> position_bias(Importer& im, int64_t q, int64_t kv, NodeId offset, bool causal, int64_t left,
                             int64_t right, ir::DType dtype) {
  KILN_RETURN_IF_ERROR(check_import_size(im, {Dim::of(q), Dim::of(kv)}, "the attention mask"));
  const int64_t rank = std::max<int64_t>(2, im.type(offset).rank());
  KILN_ASSIGN_OR_RETURN(NodeId i, im.iota(q, rank - 2, rank));
  KILN_ASSIGN_OR_RETURN(NodeId j, im.iota(kv, rank - 1, rank));
  KILN_ASSIGN_OR_RETURN(NodeId shifted, im.apply(OpKind::kAdd, {i, offset}));
  KILN_ASSIGN_OR_RETURN(NodeId diff, im.apply(OpKind::kSub, {shifted, j}));
  NodeId allowed = ir::kNoNode;
  auto require = [&](OpKind compare, double bound) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId b, im.scalar(bound, ir::DType::kI64));
    KILN_ASSIGN_OR_RETURN(NodeId ok, im.apply(compare, {diff, b}));
    if (allowed == ir::kNoNode) {
      allowed = ok;
      return Status::ok();
    }
    KILN_ASSIGN_OR_RETURN(allowed, im.apply(OpKind::kAnd, {allowed, ok}));
    return Status::ok();
  };
  if (causal) KILN_RETURN_IF_ERROR(require(OpKind::kGreaterEqual, 0));
  if (left >= 0) KILN_RETURN_IF_ERROR(require(OpKind::kLessEqual, double(left)));
  if (right >= 0) KILN_RETURN_IF_ERROR(require(OpKind::kGreaterEqual, -double(right)));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, dtype));
  KILN_ASSIGN_OR_RETURN(NodeId neg_inf, im.scalar(kNegInf, dtype));
  return im.add(OpKind::kWhere, {allowed, zero, neg_inf}, ir::NoAttrs{});
}

// attn_mask as an additive bias of Q's dtype (bool: 0 where true, -inf where false), padded
// along its last axis to kv entries (with -inf) when it is shorter.
Result<NodeId> mask_bias(Importer& im, NodeId mask, int64_t kv, ir::DType dtype) {
  const ir::TensorType mt = im.type(mask);
  if (mt.rank() < 1) return im.error("attn_mask needs rank 1 or more");
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, dtype));
  KILN_ASSIGN_OR_RETURN(NodeId neg_inf, im.scalar(kNegInf, dtype));
  NodeId bias = mask;
  if (mt.dtype == ir::DType::kBool) {
    KILN_ASSIGN_OR_RETURN(bias, im.add(OpKind::kWhere, {mask, zero, neg_inf}, ir::NoAttrs{}));
  } else if (mt.dtype != dtype) {
    return im.error("a float attn_mask must have Q's type");
  }
  const Dim last = mt.shape.back();
  if (last.is_symbolic()) return im.unsupported("attn_mask with a dynamic key length");
  if (last.size() > kv) return im.error("attn_mask is longer than the keys");
  if (last.size() < kv) {
    Shape pad_shape = mt.shape;
    pad_shape.back() = Dim::of(kv - last.size());
    KILN_ASSIGN_OR_RETURN(NodeId pad, im.add(OpKind::kBroadcastTo, {neg_inf}, ir::BroadcastToAttrs{pad_shape}));
    KILN_ASSIGN_OR_RETURN(bias, im.add(OpKind::kConcat, {bias, pad}, ir::AxisAttrs{mt.rank() - 1}));
  }
  return bias;
}

Status attention(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId q, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId k, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId v, im.input(2));
  const ir::TensorType qt = im.type(q);
  const ir::DType dtype = qt.dtype;
  if (!ir::is_float(dtype)) return im.error("Q must be floating-point");
  if (im.type(k).rank() != qt.rank() || im.type(v).rank() != qt.rank() || (qt.rank() != 3 && qt.rank() != 4)) {
    return im.error("Q, K and V must all be 3-D or all 4-D");
  }
  const bool three_d = qt.rank() == 3;
  if (three_d) {
    const int64_t q_heads = im.attr_int("q_num_heads", 0), kv_heads = im.attr_int("kv_num_heads", 0);
    KILN_ASSIGN_OR_RETURN(q, split_heads(im, q, q_heads, "Q"));
    KILN_ASSIGN_OR_RETURN(k, split_heads(im, k, kv_heads, "K"));
    KILN_ASSIGN_OR_RETURN(v, split_heads(im, v, kv_heads, "V"));
  }
  int64_t past = 0;
  if (im.has_input(4) != im.has_input(5)) return im.error("past_key and past_value must be given together");
  if (im.has_input(4)) {
    KILN_ASSIGN_OR_RETURN(NodeId past_key, im.input(4));
    KILN_ASSIGN_OR_RETURN(NodeId past_value, im.input(5));
    const Dim past_len = im.type(past_key).shape.size() == 4 ? im.type(past_key).shape[2] : Dim::of(-1);
    if (past_len.is_symbolic() || past_len.size() < 0) return im.unsupported("past_key needs a static 4-D shape");
    past = past_len.size();
    KILN_ASSIGN_OR_RETURN(k, im.add(OpKind::kConcat, {past_key, k}, ir::AxisAttrs{2}));
    KILN_ASSIGN_OR_RETURN(v, im.add(OpKind::kConcat, {past_value, v}, ir::AxisAttrs{2}));
  }
  KILN_RETURN_IF_ERROR(im.set_output(1, k));
  KILN_RETURN_IF_ERROR(im.set_output(2, v));

  const Shape qs = im.type(q).shape, ks = im.type(k).shape;
  for (const Dim& d : {qs[1], qs[2], qs[3], ks[1], ks[2]}) {
    if (d.is_symbolic()) return im.unsupported("Attention needs static heads, sequence lengths and head size");
  }
  const int64_t q_len = qs[2].size(), kv_len = ks[2].size();
  if (ks[1].size() == 0 || qs[1].size() % ks[1].size() != 0) {
    return im.error("the query heads must be a multiple of the key/value heads");
  }
  KILN_ASSIGN_OR_RETURN(k, repeat_heads(im, k, qs[1].size() / ks[1].size()));
  KILN_ASSIGN_OR_RETURN(v, repeat_heads(im, v, qs[1].size() / ks[1].size()));

  // scores = Q K^T * scale, then softcap * tanh(scores / softcap).
  const double scale = im.attr("scale") ? im.attr_float("scale", 1.0) : 1.0 / std::sqrt(double(qs[3].size()));
  KILN_ASSIGN_OR_RETURN(NodeId kt, transpose(im, k, {0, 1, 3, 2}));
  KILN_ASSIGN_OR_RETURN(NodeId scores, im.apply(OpKind::kMatMul, {q, kt}));
  KILN_ASSIGN_OR_RETURN(NodeId scale_node, im.scalar(scale, dtype));
  KILN_ASSIGN_OR_RETURN(scores, im.apply(OpKind::kMul, {scores, scale_node}));
  const double softcap = im.attr_float("softcap", 0.0);
  if (softcap > 0) {
    KILN_ASSIGN_OR_RETURN(NodeId cap, im.scalar(softcap, dtype));
    KILN_ASSIGN_OR_RETURN(NodeId scaled, im.apply(OpKind::kDiv, {scores, cap}));
    KILN_ASSIGN_OR_RETURN(NodeId bounded, im.apply(OpKind::kTanh, {scaled}));
    KILN_ASSIGN_OR_RETURN(scores, im.apply(OpKind::kMul, {bounded, cap}));
  }

  // The additive bias: the mask, then the causal and sliding-window constraints.
  // With nonpad_kv_seqlen (opset 24: the valid keys of each batch row, a cache without
  // past_key), query i of batch b sits at position nonpad[b] - q + i, and keys from nonpad[b] on
  // are padding.
  const bool causal = im.attr_int("is_causal", 0) != 0;
  const int64_t left = im.attr_int("left_window_size", -1), right = im.attr_int("right_window_size", -1);
  if (left < -1 || right < -1) return im.error("window sizes must be -1 or nonnegative");
  NodeId nonpad = ir::kNoNode;
  KILN_ASSIGN_OR_RETURN(NodeId offset, im.scalar(double(past), ir::DType::kI64));
  if (im.has_input(6)) {
    if (past > 0) return im.error("nonpad_kv_seqlen cannot be combined with past_key");
    KILN_ASSIGN_OR_RETURN(nonpad, im.input(6));
    if (!ir::is_integer(im.type(nonpad).dtype)) return im.error("nonpad_kv_seqlen must be integers");
    if (im.type(nonpad).dtype != ir::DType::kI64) {
      KILN_ASSIGN_OR_RETURN(nonpad, im.add(OpKind::kCast, {nonpad}, ir::CastAttrs{ir::DType::kI64}));
    }
    KILN_ASSIGN_OR_RETURN(nonpad, im.reshape(nonpad, {qs[0], Dim::of(1), Dim::of(1), Dim::of(1)}));
    KILN_ASSIGN_OR_RETURN(NodeId q_len_node, im.scalar(double(q_len), ir::DType::kI64));
    KILN_ASSIGN_OR_RETURN(offset, im.apply(OpKind::kSub, {nonpad, q_len_node}));
  }
  NodeId bias = ir::kNoNode;
  if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(NodeId mask, im.input(3));
    KILN_ASSIGN_OR_RETURN(NodeId mask_term, mask_bias(im, mask, kv_len, dtype));
    KILN_ASSIGN_OR_RETURN(bias, im.add_term(bias, mask_term));
  }
  if (causal || left >= 0 || right >= 0) {
    KILN_ASSIGN_OR_RETURN(NodeId positions, position_bias(im, q_len, kv_len, offset, causal, left, right, dtype));
    KILN_ASSIGN_OR_RETURN(bias, im.add_term(bias, positions));
  }
  if (nonpad != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(NodeId keys, im.iota(kv_len, 3, 4));
    KILN_ASSIGN_OR_RETURN(NodeId valid, im.apply(OpKind::kLess, {keys, nonpad}));
    KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, dtype));
    KILN_ASSIGN_OR_RETURN(NodeId neg_inf, im.scalar(kNegInf, dtype));
    KILN_ASSIGN_OR_RETURN(NodeId padding, im.add(OpKind::kWhere, {valid, zero, neg_inf}, ir::NoAttrs{}));
    KILN_ASSIGN_OR_RETURN(bias, im.add_term(bias, padding));
  }
  NodeId biased = scores;
  if (bias != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(biased, im.apply(OpKind::kAdd, {scores, bias}));
  }

  // Softmax; a row whose bias is -inf everywhere attends to nothing and gives 0.
  KILN_ASSIGN_OR_RETURN(NodeId probs, im.add(OpKind::kSoftmax, {biased}, ir::AxisAttrs{-1}));
  if (bias != ir::kNoNode) {
    ir::ReduceAttrs last_axis;
    last_axis.axes = {im.type(bias).rank() - 1};
    last_axis.keepdims = true;
    KILN_ASSIGN_OR_RETURN(NodeId row_max, im.add(OpKind::kReduceMax, {bias}, last_axis));
    KILN_ASSIGN_OR_RETURN(NodeId neg_inf, im.scalar(kNegInf, dtype));
    KILN_ASSIGN_OR_RETURN(NodeId row_masked, im.apply(OpKind::kEqual, {row_max, neg_inf}));
    KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, dtype));
    KILN_ASSIGN_OR_RETURN(probs, im.add(OpKind::kWhere, {row_masked, zero, probs}, ir::NoAttrs{}));
  }
  switch (im.attr_int("qk_matmul_output_mode", 0)) {
    case 0: case 1: KILN_RETURN_IF_ERROR(im.set_output(3, scores)); break;
    case 2: KILN_RETURN_IF_ERROR(im.set_output(3, biased)); break;
    case 3: KILN_RETURN_IF_ERROR(im.set_output(3, probs)); break;
    default: return im.error("qk_matmul_output_mode must be 0, 1, 2 or 3");
  }

  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMatMul, {probs, v}));
  if (three_d) {
    const Shape ys = im.type(y).shape;  // (B, H, S, Dv)
    KILN_ASSIGN_OR_RETURN(y, transpose(im, y, {0, 2, 1, 3}));
    KILN_ASSIGN_OR_RETURN(y, im.reshape(y, {ys[0], ys[2], Dim::of(ys[1].size() * ys[3].size())}));
  }
  return im.set_output(0, y);
}

}  // namespace

void register_attention_ops(std::map<std::string, Converter>& t) { t["Attention"] = attention; }

}  // namespace kiln::onnx_import
