// Pass simplify: algebraic identities. Each rule either replaces a node by an existing value
// (the node is then erased and its users read the value) or rewrites the node in place.
//
// A rule that removes a node applies only when the value it forwards has exactly the node's
// type: x*1 where the 1 broadcasts x to a bigger shape (or x is a scalar) must stay.
//   x*1, 1*x, x+0, 0+x, x-0, x/1, pow(x, 1)      -> x
//   neg(neg x), not(not x)                       -> x
//   abs(abs x), relu(relu x)                     -> abs x, relu x
//   maximum(x, x), minimum(x, x), and/or(x, x)   -> x
//   where(true, a, b) -> a ; where(false, a, b) -> b
//   clamp without bounds, cast to the same dtype, broadcast_to the same shape,
//   reshape to the same shape, slice with unit steps keeping the shape,
//   concat of one operand, transpose with the identity perm -> x
//   reshape(reshape x) -> reshape x ; transpose(transpose x) -> one transpose with the composed
//   perm (dropped when that is the identity).
//   global_avg_pool2d(x) -> reduce_mean(x, axes=[2, 3], keepdims=true): the same values, run by
//   the row-reduction templates (warps and blocks per row) instead of one thread per channel
//   looping over H x W, which crawls on a squeeze-and-excitation block's 112x112 maps.
// x+0 -> x ignores the sign of zero (-0 + 0 = +0), as compilers do under default float rules
// for this pass's purpose; x*1, x-0 and x/1 are exact.
#include <optional>
#include <vector>

#include "ir/infer.h"
#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::kNoNode;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

// True when `id` is a constant whose every element equals `value` (booleans: 0 or 1).
bool is_constant_filled_with(const Graph& graph, NodeId id, double value) {
  const Node& node = graph.node(id);
  if (node.op != OpKind::kConstant) return false;
  const ir::Tensor& data = graph.constant_of(id);
  int64_t count = data.num_elements();
  for (int64_t i = 0; i < count; ++i) {
    if (data.element_as_double(i) != value) return false;
  }
  return true;
}

// Rewrites node `id` in place with new operands and attributes (and op, when given) if inference
// agrees the type is unchanged (it always should; checking keeps a subtle shape rule from
// corrupting the graph).
bool rewrite_if_same_type(Graph& graph, NodeId id, std::vector<NodeId> inputs, ir::Attrs attrs,
                          std::optional<OpKind> op = std::nullopt) {
  Node candidate;
  candidate.op = op.value_or(graph.node(id).op);
  candidate.name = graph.node(id).name;
  candidate.inputs = std::move(inputs);
  candidate.attrs = std::move(attrs);
  if (!ir::infer_node(graph, candidate).is_ok()) return false;
  if (candidate.type != graph.node(id).type) return false;
  Node& node = graph.node(id);
  node.op = candidate.op;
  node.inputs = std::move(candidate.inputs);
  node.attrs = std::move(candidate.attrs);
  return true;
}

std::vector<int64_t> normalized_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> result = perm;
  int64_t rank = int64_t(perm.size());
  for (int64_t& p : result) {
    if (p < 0) p += rank;
  }
  return result;
}

// Returns the value that replaces node `id`, or kNoNode to keep it (possibly rewritten).
NodeId simplify_node(Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  const std::vector<NodeId>& in = node.inputs;
  auto same_type = [&](NodeId value) { return graph.node(value).type == node.type; };
  auto forward_if_same_type = [&](NodeId value) { return same_type(value) ? value : kNoNode; };
  auto op_of = [&](NodeId value) { return graph.node(value).op; };

  switch (node.op) {
    case OpKind::kMul:
      if (same_type(in[0]) && is_constant_filled_with(graph, in[1], 1.0)) return in[0];
      if (same_type(in[1]) && is_constant_filled_with(graph, in[0], 1.0)) return in[1];
      return kNoNode;
    case OpKind::kAdd:
      if (same_type(in[0]) && is_constant_filled_with(graph, in[1], 0.0)) return in[0];
      if (same_type(in[1]) && is_constant_filled_with(graph, in[0], 0.0)) return in[1];
      return kNoNode;
    case OpKind::kSub:
      if (same_type(in[0]) && is_constant_filled_with(graph, in[1], 0.0)) return in[0];
      return kNoNode;
    case OpKind::kDiv:
    case OpKind::kPow:
      if (same_type(in[0]) && is_constant_filled_with(graph, in[1], 1.0)) return in[0];
      return kNoNode;
    case OpKind::kNeg:
    case OpKind::kNot:
    case OpKind::kBitwiseNot:
      if (op_of(in[0]) == node.op) return forward_if_same_type(graph.node(in[0]).inputs[0]);
      return kNoNode;
    case OpKind::kAbs:
    case OpKind::kRelu:
      if (op_of(in[0]) == node.op) return forward_if_same_type(in[0]);
      return kNoNode;
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kAnd:
    case OpKind::kOr:
    case OpKind::kBitwiseAnd:
    case OpKind::kBitwiseOr:
      if (in[0] == in[1]) return forward_if_same_type(in[0]);
      return kNoNode;
    case OpKind::kWhere:
      if (is_constant_filled_with(graph, in[0], 1.0)) return forward_if_same_type(in[1]);
      if (is_constant_filled_with(graph, in[0], 0.0)) return forward_if_same_type(in[2]);
      return kNoNode;
    case OpKind::kClamp: {
      const auto& attrs = std::get<ir::ClampAttrs>(node.attrs);
      if (!attrs.min && !attrs.max) return forward_if_same_type(in[0]);
      return kNoNode;
    }
    case OpKind::kCast:
    case OpKind::kBroadcastTo:
      return forward_if_same_type(in[0]);
    case OpKind::kConcat:
      if (in.size() == 1) return forward_if_same_type(in[0]);
      return kNoNode;
    case OpKind::kSlice: {
      const auto& attrs = std::get<ir::SliceAttrs>(node.attrs);
      bool unit_steps = true;
      for (int64_t step : attrs.steps) unit_steps &= step == 1;
      if (unit_steps) return forward_if_same_type(in[0]);
      return kNoNode;
    }
    case OpKind::kReshape: {
      if (same_type(in[0])) return in[0];
      if (op_of(in[0]) == OpKind::kReshape) {
        // reshape(reshape(x, s1), s2) == reshape(x, s2): a reshape only depends on the element
        // count and row-major order, which the inner reshape does not change.
        NodeId source = graph.node(in[0]).inputs[0];
        if (same_type(source)) return source;
        rewrite_if_same_type(graph, id, {source}, node.attrs);
      }
      return kNoNode;
    }
    case OpKind::kTranspose: {
      std::vector<int64_t> perm = normalized_perm(std::get<ir::TransposeAttrs>(node.attrs).perm);
      if (is_identity_perm(perm)) return forward_if_same_type(in[0]);
      if (op_of(in[0]) == OpKind::kTranspose) {
        const Node& inner = graph.node(in[0]);
        std::vector<int64_t> inner_perm =
            normalized_perm(std::get<ir::TransposeAttrs>(inner.attrs).perm);
        if (inner_perm.size() != perm.size()) return kNoNode;
        const std::vector<int64_t> composed = compose_perms(inner_perm, perm);
        NodeId source = inner.inputs[0];
        if (is_identity_perm(composed)) return forward_if_same_type(source);
        rewrite_if_same_type(graph, id, {source}, ir::TransposeAttrs{composed});
      }
      return kNoNode;
    }
    // No algebraic rule for these ops (yet): a new op lands here by name, not by a default.
    case OpKind::kInput: case OpKind::kConstant: case OpKind::kExp: case OpKind::kLog: case OpKind::kSqrt:
    case OpKind::kRsqrt: case OpKind::kReciprocal: case OpKind::kTanh: case OpKind::kSigmoid: case OpKind::kSilu:
    case OpKind::kErf: case OpKind::kSin: case OpKind::kCos: case OpKind::kAtan: case OpKind::kFloor: case OpKind::kCeil:
    case OpKind::kRound: case OpKind::kSign: case OpKind::kGelu: case OpKind::kXor: case OpKind::kEqual:
    case OpKind::kNotEqual: case OpKind::kLess: case OpKind::kLessEqual: case OpKind::kGreater:
    case OpKind::kGreaterEqual: case OpKind::kFmod: case OpKind::kReduceSum: case OpKind::kReduceMean: case OpKind::kReduceMax:
    case OpKind::kBitwiseXor: case OpKind::kShiftLeft: case OpKind::kShiftRight:
    case OpKind::kReduceMin: case OpKind::kReduceProd: case OpKind::kArgMax: case OpKind::kSoftmax:
    case OpKind::kLogSoftmax: case OpKind::kLayerNorm: case OpKind::kMatMul: case OpKind::kAttention: case OpKind::kGather:
    case OpKind::kIota: case OpKind::kTopK: case OpKind::kScatter: case OpKind::kConv2d: case OpKind::kMaxPool2d: case OpKind::kAvgPool2d:
      return kNoNode;
    case OpKind::kGlobalAvgPool2d: {
      ir::ReduceAttrs mean;
      mean.axes = {2, 3};
      mean.keepdims = true;
      rewrite_if_same_type(graph, id, node.inputs, mean, OpKind::kReduceMean);
      return kNoNode;
    }
  }
  return kNoNode;
}

}  // namespace

Status simplify_pass(Graph& graph, const PassContext&) {
  ValueRemap remap(graph.num_nodes());
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    Node& node = graph.node(id);
    if (node.erased || is_source(node.op)) continue;
    remap.rewrite_operands(node);
    NodeId replacement = simplify_node(graph, id);
    if (replacement != kNoNode && replacement != id) {
      remap.replace(id, replacement);
      graph.node(id).erased = true;
    }
  }
  remap.finish(graph);
  return Status::ok();
}

}  // namespace kiln::passes
