// Converters for the transformer building blocks of the newest opsets, decomposed into Kiln ops:
// RotaryEmbedding (opset 23), SwiGLU (opset 28), CausalConvWithState and LinearAttention
// (opset 27).
//
// Semantics follow ONNX's reference implementations (onnx/reference/ops/op_rotary_embedding.py,
// op_swiglu.py, op_causal_conv_with_state.py, op_linear_attention.py), which the node tests are
// generated with. Every form those accept is either imported exactly or refused at the node.
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Result<NodeId> transpose(Importer& im, NodeId x, std::vector<int64_t> perm) {
  return im.add(OpKind::kTranspose, {x}, ir::TransposeAttrs{std::move(perm)});
}

// x[..., start:end] along `axis` (Python slicing: ends past the dim clamp).
Result<NodeId> slice(Importer& im, NodeId x, int64_t axis, int64_t start, int64_t end) {
  return im.add(OpKind::kSlice, {x}, ir::SliceAttrs{{start}, {end}, {axis}, {1}});
}

Result<NodeId> concat(Importer& im, std::vector<NodeId> parts, int64_t axis) {
  if (parts.size() == 1) return parts[0];
  return im.add(OpKind::kConcat, std::move(parts), ir::AxisAttrs{axis});
}

std::string describe(const Importer& im, NodeId x) { return im.type(x).to_string(); }

// ---- RotaryEmbedding ----------------------------------------------------------------------------

// RotaryEmbedding (opset 23). X is rotated in its own layout: a 4-D X (B, H, S, D) keeps it (the
// caches are reshaped to (B, 1, S, R/2) to broadcast over the heads), a 3-D X (B, S, H * D) is
// viewed as (B, S, H, D) (caches (B, S, 1, R/2)); so no transpose is needed either way. The first
// R = rotary_embedding_dim entries of each head are rotated as pairs (x1, x2): the two halves, or
// with interleaved=1 the even and odd entries; the rest pass through.
Status rotary_embedding(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId cos_cache, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId sin_cache, im.input(2));
  const ir::TensorType xt = im.type(x);
  if (!ir::is_float(xt.dtype)) return im.error("X must be floating-point, got " + xt.to_string());
  if (im.type(cos_cache).dtype != xt.dtype || im.type(sin_cache).dtype != xt.dtype) {
    return im.error("cos_cache and sin_cache must have X's type, got " + describe(im, cos_cache) + " and " +
                    describe(im, sin_cache) + " for " + xt.to_string());
  }
  const Shape xs = xt.shape;
  const bool heads_first = xs.size() == 4;  // (B, H, S, D); else (B, S, H * D)
  if (xs.size() != 3 && xs.size() != 4) {
    return im.error("X must be 4-D (batch, heads, sequence, head_size) or 3-D (batch, sequence, hidden), got " +
                    xt.to_string());
  }
  if (xs.back().is_symbolic()) return im.unsupported("X's last dim must be static, got " + xt.to_string());
  NodeId x4 = x;
  int64_t head_size = xs.back().size();
  if (!heads_first) {
    const int64_t num_heads = im.attr_int("num_heads", 0);
    if (num_heads <= 0) return im.error("a 3-D X needs a positive num_heads attribute");
    if (head_size % num_heads != 0) {
      return im.error("X's hidden size (" + std::to_string(head_size) + ") must be a multiple of num_heads (" +
                      std::to_string(num_heads) + ")");
    }
    head_size /= num_heads;
    KILN_ASSIGN_OR_RETURN(x4, im.reshape(x, {xs[0], xs[1], Dim::of(num_heads), Dim::of(head_size)}));
  }
  int64_t rotary_dim = im.attr_int("rotary_embedding_dim", 0);
  if (rotary_dim == 0) rotary_dim = head_size;  // full rotation
  if (rotary_dim < 0 || rotary_dim > head_size) {
    return im.error("rotary_embedding_dim (" + std::to_string(rotary_dim) + ") must be between 0 and the head size (" +
                    std::to_string(head_size) + ")");
  }
  if (rotary_dim % 2 != 0) {
    return im.error("the rotated part of each head (" + std::to_string(rotary_dim) +
                    " entries: rotary_embedding_dim, or the head size when it is 0) must be even");
  }
  const int64_t half = rotary_dim / 2;
  const bool interleaved = im.attr_int("interleaved", 0) != 0;

  // The caches as (B, S, R/2): gathered at position_ids, or given per batch and position.
  if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(NodeId ids, im.input(3));
    if (!ir::is_integer(im.type(ids).dtype) || im.type(ids).rank() != 2) {
      return im.error("position_ids must be 2-D (batch, sequence) integers, got " + describe(im, ids));
    }
    for (NodeId cache : {cos_cache, sin_cache}) {
      if (im.type(cache).rank() != 2) {
        return im.error("with position_ids, cos_cache and sin_cache must be 2-D (max_position_id_plus_1, "
                        "rotary_embedding_dim / 2), got " + describe(im, cache));
      }
    }
    KILN_ASSIGN_OR_RETURN(cos_cache, im.add(OpKind::kGather, {cos_cache, ids}, ir::AxisAttrs{0}));
    KILN_ASSIGN_OR_RETURN(sin_cache, im.add(OpKind::kGather, {sin_cache, ids}, ir::AxisAttrs{0}));
  } else {
    for (NodeId cache : {cos_cache, sin_cache}) {
      if (im.type(cache).rank() != 3) {
        return im.error("without position_ids, cos_cache and sin_cache must be 3-D (batch, sequence, "
                        "rotary_embedding_dim / 2), got " + describe(im, cache));
      }
    }
  }
  // Each cache as (B, 1, S, R/2) or (B, S, 1, R/2) (with a trailing 1 when interleaved, to meet
  // the (..., R/2, 1) pairs).
  auto broadcastable = [&](NodeId cache, std::string_view name) -> Result<NodeId> {
    const Shape cs = im.type(cache).shape;
    if (cs[2] != Dim::of(half)) {
      return im.error("the last dim of " + std::string(name) + " (" + cs[2].to_string() +
                      ") must be rotary_embedding_dim / 2 (" + std::to_string(half) + ")");
    }
    Shape s = heads_first ? Shape{cs[0], Dim::of(1), cs[1], cs[2]} : Shape{cs[0], cs[1], Dim::of(1), cs[2]};
    if (interleaved) s.push_back(Dim::of(1));
    return im.reshape(cache, s);
  };
  KILN_ASSIGN_OR_RETURN(NodeId cos, broadcastable(cos_cache, "cos_cache"));
  KILN_ASSIGN_OR_RETURN(NodeId sin, broadcastable(sin_cache, "sin_cache"));

  NodeId rotated_part = x4;
  if (rotary_dim < head_size) {
    KILN_ASSIGN_OR_RETURN(rotated_part, slice(im, x4, 3, 0, rotary_dim));
  }
  const Shape rotated_shape = im.type(rotated_part).shape;
  NodeId x1, x2;
  int64_t pair_axis = 3;
  if (interleaved) {
    // (..., R) -> (..., R/2, 2): entry 0 of each pair is x[0::2], entry 1 is x[1::2].
    Shape pairs_shape = rotated_shape;
    pairs_shape.back() = Dim::of(half);
    pairs_shape.push_back(Dim::of(2));
    KILN_ASSIGN_OR_RETURN(NodeId pairs, im.reshape(rotated_part, pairs_shape));
    pair_axis = 4;
    KILN_ASSIGN_OR_RETURN(x1, slice(im, pairs, pair_axis, 0, 1));
    KILN_ASSIGN_OR_RETURN(x2, slice(im, pairs, pair_axis, 1, 2));
  } else {
    KILN_ASSIGN_OR_RETURN(x1, slice(im, rotated_part, pair_axis, 0, half));
    KILN_ASSIGN_OR_RETURN(x2, slice(im, rotated_part, pair_axis, half, rotary_dim));
  }
  // real = cos * x1 - sin * x2, imag = sin * x1 + cos * x2.
  KILN_ASSIGN_OR_RETURN(NodeId cos_x1, im.apply(OpKind::kMul, {cos, x1}));
  KILN_ASSIGN_OR_RETURN(NodeId sin_x2, im.apply(OpKind::kMul, {sin, x2}));
  KILN_ASSIGN_OR_RETURN(NodeId real, im.apply(OpKind::kSub, {cos_x1, sin_x2}));
  KILN_ASSIGN_OR_RETURN(NodeId sin_x1, im.apply(OpKind::kMul, {sin, x1}));
  KILN_ASSIGN_OR_RETURN(NodeId cos_x2, im.apply(OpKind::kMul, {cos, x2}));
  KILN_ASSIGN_OR_RETURN(NodeId imag, im.apply(OpKind::kAdd, {sin_x1, cos_x2}));
  KILN_ASSIGN_OR_RETURN(NodeId rotated, concat(im, {real, imag}, pair_axis));
  if (interleaved) {
    KILN_ASSIGN_OR_RETURN(rotated, im.reshape(rotated, rotated_shape));
  }
  NodeId y = rotated;
  if (rotary_dim < head_size) {
    KILN_ASSIGN_OR_RETURN(NodeId passed, slice(im, x4, 3, rotary_dim, head_size));
    KILN_ASSIGN_OR_RETURN(y, concat(im, {rotated, passed}, 3));
  }
  if (!heads_first) {
    KILN_ASSIGN_OR_RETURN(y, im.reshape(y, xs));
  }
  return im.set_output(0, y);
}

// ---- SwiGLU -------------------------------------------------------------------------------------

// SwiGLU (opset 28): Swish_alpha(A) * B = A * sigmoid(alpha * A) * B, with A and B of one shape
// (the operator does not broadcast); Kiln's silu when alpha is 1.
Status swiglu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(1));
  const ir::TensorType at = im.type(a), bt = im.type(b);
  if (!ir::is_float(at.dtype) || bt.dtype != at.dtype) {
    return im.error("A and B must be floating-point of one type, got " + at.to_string() + " and " + bt.to_string());
  }
  if (at.rank() != bt.rank()) {
    return im.error("A and B must have identical shapes (SwiGLU does not broadcast), got " + at.to_string() +
                    " and " + bt.to_string());
  }
  for (size_t i = 0; i < at.shape.size(); ++i) {
    if (at.shape[i] == bt.shape[i]) continue;
    if (at.shape[i].is_static() && bt.shape[i].is_static()) {
      return im.error("A and B must have identical shapes (SwiGLU does not broadcast), got " + at.to_string() +
                      " and " + bt.to_string());
    }
    return im.unsupported("A and B must have identical shapes, which Kiln cannot show at import for " +
                          at.to_string() + " and " + bt.to_string());
  }
  const double alpha = im.attr_float("alpha", 1.0);
  NodeId gate;
  if (alpha == 1.0) {
    KILN_ASSIGN_OR_RETURN(gate, im.add(OpKind::kSilu, {a}, ir::NoAttrs{}));
  } else {
    KILN_ASSIGN_OR_RETURN(NodeId alpha_node, im.scalar_like(a, alpha));
    KILN_ASSIGN_OR_RETURN(NodeId scaled, im.apply(OpKind::kMul, {alpha_node, a}));
    KILN_ASSIGN_OR_RETURN(NodeId sigmoid, im.add(OpKind::kSigmoid, {scaled}, ir::NoAttrs{}));
    KILN_ASSIGN_OR_RETURN(gate, im.apply(OpKind::kMul, {a, sigmoid}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMul, {gate, b}));
  return im.set_output(0, y);
}

// ---- CausalConvWithState ------------------------------------------------------------------------

// CausalConvWithState (opset 27): the input (B, C, L) joined after past_state (B, C, k - 1) (zeros
// when absent), a depthwise valid convolution of that (a conv2d of height 1 with groups = C),
// then SiLU when activation is 'silu' or 'swish'. present_state is the last k - 1 positions of
// the joined sequence.
Status causal_conv_with_state(Importer& im) {
  const std::string activation = im.attr_string("activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish") {
    return im.error("activation must be 'none', 'silu' or 'swish', got '" + activation + "'");
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId w, im.input(1));
  const ir::TensorType xt = im.type(x), wt = im.type(w);
  if (!ir::is_float(xt.dtype)) return im.error("input must be floating-point, got " + xt.to_string());
  if (xt.rank() != 3) return im.error("input must be 3-D (batch, channels, length), got " + xt.to_string());
  const Shape xs = xt.shape;
  if (xs[1].is_symbolic()) return im.unsupported("the channel count must be static, got " + xt.to_string());
  if (xs[2].is_symbolic()) {
    return im.unsupported("the length must be static (Kiln joins past_state and the input into a sequence of "
                          "static length), got " + xt.to_string());
  }
  const int64_t channels = xs[1].size(), length = xs[2].size();
  if (wt.dtype != xt.dtype || wt.rank() != 3 || wt.shape[0] != xs[1] || wt.shape[1] != Dim::of(1) ||
      wt.shape[2].is_symbolic() || wt.shape[2].size() < 1) {
    return im.error("weight must be (channels, 1, k) = (" + std::to_string(channels) + ", 1, k >= 1) of the input's "
                    "type, got " + wt.to_string());
  }
  const int64_t kernel = wt.shape[2].size();
  NodeId bias = ir::kNoNode;
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(bias, im.input(2));
    if (im.type(bias).dtype != xt.dtype || im.type(bias).shape != Shape{xs[1]}) {
      return im.error("bias must be (channels) = (" + std::to_string(channels) + ") of the input's type, got " +
                      describe(im, bias));
    }
  }
  NodeId padded = x;  // (B, C, k - 1 + L)
  if (kernel > 1) {
    const Shape state_shape = {xs[0], xs[1], Dim::of(kernel - 1)};
    NodeId past;
    if (im.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(past, im.input(3));
      if (im.type(past).dtype != xt.dtype || im.type(past).shape != state_shape) {
        return im.error("past_state must be (batch, channels, k - 1) = " + ir::TensorType{xt.dtype, state_shape}.to_string() +
                        ", got " + describe(im, past));
      }
    } else {
      KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
      KILN_ASSIGN_OR_RETURN(past, im.add(OpKind::kBroadcastTo, {zero}, ir::BroadcastToAttrs{state_shape}));
    }
    KILN_ASSIGN_OR_RETURN(padded, concat(im, {past, x}, 2));
  } else if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(NodeId past, im.input(3));
    if (im.type(past).rank() != 3 || im.type(past).shape[2] != Dim::of(0)) {
      return im.error("past_state must have k - 1 = 0 positions, got " + describe(im, past));
    }
  }

  KILN_ASSIGN_OR_RETURN(NodeId image, im.reshape(padded, {xs[0], xs[1], Dim::of(1), Dim::of(length + kernel - 1)}));
  KILN_ASSIGN_OR_RETURN(NodeId filter, im.reshape(w, {xs[1], Dim::of(1), Dim::of(1), Dim::of(kernel)}));
  std::vector<NodeId> conv_inputs = {image, filter};
  if (bias != ir::kNoNode) conv_inputs.push_back(bias);
  ir::Conv2dAttrs depthwise;
  depthwise.groups = channels;
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kConv2d, conv_inputs, depthwise));
  KILN_ASSIGN_OR_RETURN(y, im.reshape(y, xs));
  if (activation != "none") {
    // The reference applies SiLU in float32 and rounds the result to the input's type.
    KILN_ASSIGN_OR_RETURN(NodeId wide, im.cast(y, ir::DType::kF32));
    KILN_ASSIGN_OR_RETURN(NodeId silu, im.add(OpKind::kSilu, {wide}, ir::NoAttrs{}));
    KILN_ASSIGN_OR_RETURN(y, im.cast(silu, xt.dtype));
  }
  KILN_RETURN_IF_ERROR(im.set_output(0, y));
  // The last k - 1 positions; none when k is 1 (a start past the end gives an empty slice).
  KILN_ASSIGN_OR_RETURN(NodeId present, slice(im, padded, 2, kernel > 1 ? -(kernel - 1) : kToEnd, kToEnd));
  return im.set_output(1, present);
}

// ---- LinearAttention ----------------------------------------------------------------------------

// The delta rules solve for the values actually written, one step after another: past this many
// steps the unrolled graph (a handful of nodes per step) is refused rather than built.
constexpr int64_t kMaxDeltaSteps = 1024;
// A per-key-dimension decay builds the decay between every pair of steps for every key dim
// ((T, T, d_k) per head); past this many elements per head the import is refused.
constexpr int64_t kMaxPairwiseDecayElements = int64_t(1) << 22;

// (T, T) bool: true where step s (column) is at or before step t (row), or strictly before.
Result<NodeId> causal_mask(Importer& im, int64_t steps, bool strict) {
  KILN_ASSIGN_OR_RETURN(NodeId t, im.iota(steps, 0, 2));
  KILN_ASSIGN_OR_RETURN(NodeId s, im.iota(steps, 1, 2));
  return im.apply(strict ? OpKind::kGreater : OpKind::kGreaterEqual, {t, s});
}

Result<NodeId> masked(Importer& im, NodeId mask, NodeId x, double fill) {
  KILN_ASSIGN_OR_RETURN(NodeId fill_node, im.scalar_like(x, fill));
  return im.add(OpKind::kWhere, {mask, x, fill_node}, ir::NoAttrs{});
}

// LinearAttention (opset 27), in float32 as the reference computes it. The recurrence
//   S_t = a_t S_{t-1} + k_t u_t^T,  o_t = scale * q_t^T S_t
// (a_t = exp(g_t) with the gated rules, else 1; u_t = v_t, or with the delta rules
// u_t = beta_t (v_t - (a_t S_{t-1})^T k_t)) is evaluated in closed form: with G_t the cumulative
// log decay (G_t = g_1 + ... + g_t) and S_0 the past state,
//   S_t = e^{G_t} S_0 + sum_{s<=t} e^{G_t - G_s} k_s u_s^T,
// so every output row is a masked product over the steps:
//   o_t = scale * ((e^{G_t} q_t)^T S_0 + sum_{s<=t} A[t,s] u_s),  A[t,s] = sum_d q_t,d k_s,d e^{G_t,d - G_s,d},
// and only the delta rules' u (a unit lower-triangular system in the steps) needs the steps in
// order: forward substitution, unrolled, with every product that does not depend on u (the
// decayed K K^T, the state read K^T S_0) computed before the loop. The decays e^{G_t - G_s}
// appear only for s <= t, so they never overflow where the recurrence would not.
// Query heads share their KV head in groups of q_num_heads / kv_num_heads (adjacent query
// heads, as the reference's repeat), kept as an axis of size `group` after the KV head axis.
Status linear_attention(Importer& im) {
  const std::string rule = im.attr_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta") {
    return im.error("update_rule must be 'linear', 'gated', 'delta' or 'gated_delta', got '" + rule + "'");
  }
  if (!im.attr("q_num_heads") || !im.attr("kv_num_heads")) {
    return im.error("the q_num_heads and kv_num_heads attributes are required");
  }
  const int64_t q_heads = im.attr_int("q_num_heads", 0), kv_heads = im.attr_int("kv_num_heads", 0);
  if (q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0) {
    return im.error("q_num_heads (" + std::to_string(q_heads) + ") must be a positive multiple of kv_num_heads (" +
                    std::to_string(kv_heads) + ")");
  }
  const int64_t group = q_heads / kv_heads;
  const bool gating = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  if (gating != im.has_input(4)) {
    return im.error("update_rule '" + rule + "' " + (gating ? "needs the decay input" : "takes no decay input"));
  }
  if (delta != im.has_input(5)) {
    return im.error("update_rule '" + rule + "' " + (delta ? "needs the beta input" : "takes no beta input"));
  }

  KILN_ASSIGN_OR_RETURN(NodeId q, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId k, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId v, im.input(2));
  const ir::DType out_dtype = im.type(q).dtype;
  if (!ir::is_float(out_dtype)) return im.error("query must be floating-point, got " + describe(im, q));
  for (auto [value, name] : std::initializer_list<std::pair<NodeId, const char*>>{{q, "query"}, {k, "key"}, {v, "value"}}) {
    if (im.type(value).rank() != 3 || im.type(value).dtype != out_dtype) {
      return im.error(std::string(name) + " must be 3-D (B, T, H * D) of query's type, got " + describe(im, value));
    }
  }
  const Shape qs = im.type(q).shape;
  const Dim batch = qs[0];
  if (qs[1].is_symbolic()) return im.unsupported("the sequence length must be static, got " + describe(im, q));
  const int64_t steps = qs[1].size();
  if (steps == 0) return im.unsupported("an empty sequence (T = 0)");
  // A packed (B, T, H * D) input: its head size D, checked against the query's B and T.
  auto head_size = [&](NodeId x, std::string_view name, int64_t heads, std::string_view heads_name) -> Result<int64_t> {
    const Shape s = im.type(x).shape;
    if (s[0] != batch || s[1] != qs[1]) {
      const std::string dims = std::string(name) + "'s batch and sequence dims must be query's, got " +
                               describe(im, x) + " and " + describe(im, q);
      // Differently named symbols may still agree at run time; Kiln cannot check that here.
      const bool provably_different = (s[0] != batch && s[0].is_static() && batch.is_static()) ||
                                      (s[1] != qs[1] && s[1].is_static());
      return provably_different ? im.error(dims) : im.unsupported(dims + ", which Kiln cannot compare at import");
    }
    if (s[2].is_symbolic() || s[2].size() % heads != 0) {
      return im.error(std::string(name) + "'s last dim must be a static multiple of " + std::string(heads_name) +
                      " (" + std::to_string(heads) + "), got " + describe(im, x));
    }
    return s[2].size() / heads;
  };
  KILN_ASSIGN_OR_RETURN(const int64_t dk, head_size(q, "query", q_heads, "q_num_heads"));
  KILN_ASSIGN_OR_RETURN(const int64_t key_size, head_size(k, "key", kv_heads, "kv_num_heads"));
  KILN_ASSIGN_OR_RETURN(const int64_t dv, head_size(v, "value", kv_heads, "kv_num_heads"));
  if (key_size != dk) {
    return im.error("key's head size (" + std::to_string(key_size) + ") must be query's (" + std::to_string(dk) + ")");
  }
  if (delta && steps > kMaxDeltaSteps) {
    return im.unsupported("update_rule '" + rule + "' over " + std::to_string(steps) +
                          " steps: Kiln unrolls the delta rule's sequential solve, up to " +
                          std::to_string(kMaxDeltaSteps) + " steps");
  }
  const Dim heads = Dim::of(kv_heads), seq = Dim::of(steps);

  // The float32 operands: Q (B, Hkv, group, T, dk), K (B, Hkv, T, dk), V (B, Hkv, T, dv).
  auto to_f32 = [&](NodeId x) { return im.cast(x, ir::DType::kF32); };
  KILN_ASSIGN_OR_RETURN(NodeId qh, to_f32(q));
  KILN_ASSIGN_OR_RETURN(qh, im.reshape(qh, {batch, seq, heads, Dim::of(group), Dim::of(dk)}));
  KILN_ASSIGN_OR_RETURN(qh, transpose(im, qh, {0, 2, 3, 1, 4}));
  // (B, T, Hkv * d) -> (B, Hkv, T, d).
  auto split_heads = [&](NodeId x, int64_t d) -> Result<NodeId> {
    KILN_ASSIGN_OR_RETURN(NodeId f, to_f32(x));
    KILN_ASSIGN_OR_RETURN(f, im.reshape(f, {batch, seq, Dim::of(im.type(x).shape[2].size() / d), Dim::of(d)}));
    return transpose(im, f, {0, 2, 1, 3});
  };
  KILN_ASSIGN_OR_RETURN(NodeId kh, split_heads(k, dk));
  KILN_ASSIGN_OR_RETURN(NodeId vh, split_heads(v, dv));

  NodeId past = ir::kNoNode;  // (B, Hkv, dk, dv) float32
  ir::DType state_dtype = out_dtype;
  if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(past, im.input(3));
    const Shape want = {batch, heads, Dim::of(dk), Dim::of(dv)};
    if (!ir::is_float(im.type(past).dtype) || im.type(past).shape != want) {
      return im.error("past_state must be floating-point of shape " + ir::TensorType{out_dtype, want}.to_string() +
                      " (B, kv_num_heads, d_k, d_v), got " + describe(im, past));
    }
    state_dtype = im.type(past).dtype;
    KILN_ASSIGN_OR_RETURN(past, to_f32(past));
  }

  // The decay, as G: the cumulative log decay (B, Hkv, T, c), c = dk (per key dim) or 1 (per head).
  NodeId log_decay = ir::kNoNode;
  bool per_key_decay = false;
  if (gating) {
    KILN_ASSIGN_OR_RETURN(NodeId decay, im.input(4));
    const ir::TensorType dt = im.type(decay);
    if (dt.dtype != out_dtype || dt.rank() != 3 || dt.shape[0] != batch || dt.shape[1] != seq ||
        (dt.shape[2] != heads && dt.shape[2] != Dim::of(kv_heads * dk))) {
      return im.error("decay must be (B, T, kv_num_heads) or (B, T, kv_num_heads * d_k) of query's type, i.e. last dim " +
                      std::to_string(kv_heads) + " or " + std::to_string(kv_heads * dk) + ", got " + dt.to_string());
    }
    per_key_decay = dt.shape[2] != heads;  // when d_k is 1 the two forms agree
    if (per_key_decay && steps * steps * dk > kMaxPairwiseDecayElements) {
      return im.unsupported("a per-key-dimension decay over " + std::to_string(steps) + " steps with d_k = " +
                            std::to_string(dk) + ": Kiln builds the decay between every two steps ((T, T, d_k) = " +
                            std::to_string(steps * steps * dk) + " elements per head, at most " +
                            std::to_string(kMaxPairwiseDecayElements) + ")");
    }
    KILN_ASSIGN_OR_RETURN(NodeId g, split_heads(decay, per_key_decay ? dk : 1));
    // Cumulative sum over the steps: (T, T) lower-triangular ones times g.
    KILN_ASSIGN_OR_RETURN(NodeId inclusive, causal_mask(im, steps, /*strict=*/false));
    KILN_ASSIGN_OR_RETURN(NodeId prefix_sum, im.cast(inclusive, ir::DType::kF32));
    KILN_ASSIGN_OR_RETURN(log_decay, im.apply(OpKind::kMatMul, {prefix_sum, g}));
  }
  const int64_t decay_width = per_key_decay ? dk : 1;

  // decay_between[t, s] = e^{G_t - G_s} for s <= t, else 0: (B, Hkv, T, T) per head or
  // (B, Hkv, T, T, dk) per key dim. The exponent is masked to -inf before exp, so later steps
  // (whose exponent may be large) give exact zeros.
  NodeId decay_between = ir::kNoNode;
  if (gating) {
    Shape rows = {batch, heads, seq, Dim::of(1)}, cols = {batch, heads, Dim::of(1), seq};
    if (per_key_decay) {
      rows = {batch, heads, seq, Dim::of(1), Dim::of(dk)};
      cols = {batch, heads, Dim::of(1), seq, Dim::of(dk)};
    }
    KILN_ASSIGN_OR_RETURN(NodeId g_rows, im.reshape(log_decay, rows));
    KILN_ASSIGN_OR_RETURN(NodeId g_cols, im.reshape(log_decay, cols));
    KILN_ASSIGN_OR_RETURN(NodeId diff, im.apply(OpKind::kSub, {g_rows, g_cols}));
    KILN_ASSIGN_OR_RETURN(NodeId inclusive, causal_mask(im, steps, /*strict=*/false));
    if (per_key_decay) {
      KILN_ASSIGN_OR_RETURN(inclusive, im.reshape(inclusive, {seq, seq, Dim::of(1)}));
    }
    KILN_ASSIGN_OR_RETURN(NodeId exponent, masked(im, inclusive, diff, kNegInf));
    KILN_ASSIGN_OR_RETURN(decay_between, im.add(OpKind::kExp, {exponent}, ir::NoAttrs{}));
  }

  // scores[t, s] = sum_d a_t,d b_s,d decay_between[t, s, d] for s <= t, else 0: the step-pair
  // weights of `a` rows against `b` rows. a: (..., T, dk) with `a_batch` dims before T (the
  // query's group axis included), b: (B, Hkv, T, dk).
  auto pair_scores = [&](NodeId a, NodeId b, bool a_grouped) -> Result<NodeId> {
    NodeId scores;
    if (per_key_decay) {
      // a (.., T, 1, dk) * b (B, Hkv, [1,] 1, T, dk) * decay (B, Hkv, [1,] T, T, dk), summed over dk.
      Shape as = im.type(a).shape;
      as.insert(as.end() - 1, Dim::of(1));
      Shape bs = {batch, heads, Dim::of(1), seq, Dim::of(dk)};
      Shape ds = {batch, heads, seq, seq, Dim::of(dk)};
      if (a_grouped) {
        bs.insert(bs.begin() + 2, Dim::of(1));
        ds.insert(ds.begin() + 2, Dim::of(1));
      }
      KILN_ASSIGN_OR_RETURN(NodeId a_rows, im.reshape(a, as));
      KILN_ASSIGN_OR_RETURN(NodeId b_cols, im.reshape(b, bs));
      KILN_ASSIGN_OR_RETURN(NodeId decay, im.reshape(decay_between, ds));
      KILN_ASSIGN_OR_RETURN(NodeId products, im.apply(OpKind::kMul, {a_rows, b_cols}));
      KILN_ASSIGN_OR_RETURN(products, im.apply(OpKind::kMul, {products, decay}));
      ir::ReduceAttrs over_dk;
      over_dk.axes = {int64_t(as.size()) - 1};
      return im.add(OpKind::kReduceSum, {products}, over_dk);
    }
    KILN_ASSIGN_OR_RETURN(NodeId bt, transpose(im, b, {0, 1, 3, 2}));
    if (a_grouped) {
      KILN_ASSIGN_OR_RETURN(bt, im.reshape(bt, {batch, heads, Dim::of(1), Dim::of(dk), seq}));
    }
    KILN_ASSIGN_OR_RETURN(scores, im.apply(OpKind::kMatMul, {a, bt}));
    if (gating) {
      NodeId decay = decay_between;
      if (a_grouped) {
        KILN_ASSIGN_OR_RETURN(decay, im.reshape(decay, {batch, heads, Dim::of(1), seq, seq}));
      }
      return im.apply(OpKind::kMul, {scores, decay});
    }
    KILN_ASSIGN_OR_RETURN(NodeId inclusive, causal_mask(im, steps, /*strict=*/false));
    return masked(im, inclusive, scores, 0.0);
  };

  // e^{G_t} (B, Hkv, T, c): the decay of the past state as seen at step t.
  NodeId decay_from_start = ir::kNoNode;
  if (gating && past != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(decay_from_start, im.add(OpKind::kExp, {log_decay}, ir::NoAttrs{}));
  }

  // The values written, u: v itself, or the delta rules' solution of
  //   u_t = beta_t (w_t - sum_{s<t} Akk[t,s] u_s),  w_t = v_t - (e^{G_t} k_t)^T S_0,
  // Akk the strictly causal decayed K K^T, by forward substitution: each solved row's
  // contribution is subtracted from the residual of the rows after it.
  NodeId written = vh;
  if (delta) {
    KILN_ASSIGN_OR_RETURN(NodeId beta, im.input(5));
    const ir::TensorType bt = im.type(beta);
    if (bt.dtype != out_dtype || bt.rank() != 3 || bt.shape[0] != batch || bt.shape[1] != seq ||
        (bt.shape[2] != heads && bt.shape[2] != Dim::of(1))) {
      return im.error("beta must be (B, T, kv_num_heads) or (B, T, 1) of query's type, i.e. last dim " +
                      std::to_string(kv_heads) + " or 1, got " + bt.to_string());
    }
    KILN_ASSIGN_OR_RETURN(beta, split_heads(beta, 1));  // (B, Hkv or 1, T, 1)
    NodeId residual = vh;
    if (past != ir::kNoNode) {
      NodeId keys = kh;
      if (gating) {
        KILN_ASSIGN_OR_RETURN(keys, im.apply(OpKind::kMul, {kh, decay_from_start}));
      }
      KILN_ASSIGN_OR_RETURN(NodeId read, im.apply(OpKind::kMatMul, {keys, past}));
      KILN_ASSIGN_OR_RETURN(residual, im.apply(OpKind::kSub, {vh, read}));
    }
    KILN_ASSIGN_OR_RETURN(NodeId kk, pair_scores(kh, kh, false));
    KILN_ASSIGN_OR_RETURN(NodeId strict, causal_mask(im, steps, /*strict=*/true));
    KILN_ASSIGN_OR_RETURN(kk, masked(im, strict, kk, 0.0));
    // Scaling the residual's and kk's rows by beta up front makes each solved row a plain
    // slice of the residual: u_t = (beta w)_t - sum_{s<t} (beta kk)[t,s] u_s. Column t of the
    // strictly causal kk is zero in rows <= t, so subtracting step t's contribution from every
    // row leaves the solved rows as they are, and the final residual is u.
    KILN_ASSIGN_OR_RETURN(residual, im.apply(OpKind::kMul, {beta, residual}));
    KILN_ASSIGN_OR_RETURN(kk, im.apply(OpKind::kMul, {beta, kk}));
    for (int64_t t = 0; t + 1 < steps; ++t) {
      KILN_ASSIGN_OR_RETURN(NodeId u_t, slice(im, residual, 2, t, t + 1));  // (B, Hkv, 1, dv)
      KILN_ASSIGN_OR_RETURN(NodeId weights, slice(im, kk, 3, t, t + 1));    // (B, Hkv, T, 1)
      KILN_ASSIGN_OR_RETURN(NodeId update, im.apply(OpKind::kMul, {weights, u_t}));
      KILN_ASSIGN_OR_RETURN(residual, im.apply(OpKind::kSub, {residual, update}));
    }
    written = residual;
  }

  // Output: scale * ((e^{G_t} q_t)^T S_0 + sum_{s<=t} A[t,s] u_s), (B, Hkv, group, T, dv).
  const double scale_attr = im.attr_float("scale", 0.0);
  const double scale = scale_attr == 0.0 ? 1.0 / std::sqrt(double(dk)) : scale_attr;
  KILN_ASSIGN_OR_RETURN(NodeId attention, pair_scores(qh, kh, true));
  KILN_ASSIGN_OR_RETURN(NodeId written_grouped, im.reshape(written, {batch, heads, Dim::of(1), seq, Dim::of(dv)}));
  KILN_ASSIGN_OR_RETURN(NodeId out, im.apply(OpKind::kMatMul, {attention, written_grouped}));
  if (past != ir::kNoNode) {
    NodeId queries = qh;
    if (gating) {
      KILN_ASSIGN_OR_RETURN(NodeId decay, im.reshape(decay_from_start, {batch, heads, Dim::of(1), seq, Dim::of(decay_width)}));
      KILN_ASSIGN_OR_RETURN(queries, im.apply(OpKind::kMul, {qh, decay}));
    }
    KILN_ASSIGN_OR_RETURN(NodeId past_grouped, im.reshape(past, {batch, heads, Dim::of(1), Dim::of(dk), Dim::of(dv)}));
    KILN_ASSIGN_OR_RETURN(NodeId read, im.apply(OpKind::kMatMul, {queries, past_grouped}));
    KILN_ASSIGN_OR_RETURN(out, im.apply(OpKind::kAdd, {read, out}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId scale_node, im.scalar(scale, ir::DType::kF32));
  KILN_ASSIGN_OR_RETURN(out, im.apply(OpKind::kMul, {out, scale_node}));
  // (B, Hkv, group, T, dv) -> (B, T, Hkv, group, dv) -> (B, T, Hq * dv).
  KILN_ASSIGN_OR_RETURN(out, transpose(im, out, {0, 3, 1, 2, 4}));
  KILN_ASSIGN_OR_RETURN(out, im.reshape(out, {batch, seq, Dim::of(q_heads * dv)}));
  KILN_ASSIGN_OR_RETURN(out, im.cast(out, out_dtype));
  KILN_RETURN_IF_ERROR(im.set_output(0, out));

  // present_state: e^{G_T} S_0 + sum_s (e^{G_T - G_s} k_s) u_s^T.
  NodeId keys = kh;
  NodeId decay_total = ir::kNoNode;  // G_T (B, Hkv, 1, c)
  if (gating) {
    KILN_ASSIGN_OR_RETURN(decay_total, slice(im, log_decay, 2, steps - 1, steps));
    KILN_ASSIGN_OR_RETURN(NodeId to_end, im.apply(OpKind::kSub, {decay_total, log_decay}));
    KILN_ASSIGN_OR_RETURN(to_end, im.add(OpKind::kExp, {to_end}, ir::NoAttrs{}));
    KILN_ASSIGN_OR_RETURN(keys, im.apply(OpKind::kMul, {kh, to_end}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId keys_t, transpose(im, keys, {0, 1, 3, 2}));
  KILN_ASSIGN_OR_RETURN(NodeId state, im.apply(OpKind::kMatMul, {keys_t, written}));
  if (past != ir::kNoNode) {
    NodeId carried = past;
    if (gating) {
      // e^{G_T} scales the key rows of the state: (B, Hkv, 1, c) -> (B, Hkv, c, 1).
      KILN_ASSIGN_OR_RETURN(NodeId total, im.add(OpKind::kExp, {decay_total}, ir::NoAttrs{}));
      KILN_ASSIGN_OR_RETURN(total, im.reshape(total, {batch, heads, Dim::of(decay_width), Dim::of(1)}));
      KILN_ASSIGN_OR_RETURN(carried, im.apply(OpKind::kMul, {past, total}));
    }
    KILN_ASSIGN_OR_RETURN(state, im.apply(OpKind::kAdd, {carried, state}));
  }
  KILN_ASSIGN_OR_RETURN(state, im.cast(state, state_dtype));
  return im.set_output(1, state);
}

}  // namespace

void register_transformer_ops(std::map<std::string, Converter>& t) {
  t["RotaryEmbedding"] = rotary_embedding;
  t["SwiGLU"] = swiglu;
  t["CausalConvWithState"] = causal_conv_with_state;
  t["LinearAttention"] = linear_attention;
}

}  // namespace kiln::onnx_import
