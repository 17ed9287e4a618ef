// Pass fuse-attention: recognizes scaled dot-product attention as exporters write it and
// replaces it by one `attention` op, which every target runs as one kernel that never writes
// the [Sq, Sk] scores to memory:
//
//   matmul(softmax(mask_terms(scale_terms(matmul(q', kT'))), axis=-1), v)
//
// where q' and kT' may each be scaled by one-element constants (PyTorch's SDPA export scales
// both by sqrt(scale)), scale_terms are mul/div by one-element constants, and mask_terms are
// `add(s, mask)` with a mask that broadcasts to the scores, or `where(c, -inf, s)` /
// `where(c, s, -inf)` (masked_fill(-inf)), which become the additive mask where(c, -inf, 0).
// Every value inside the pattern must have no other use (nor be a graph output), the operands
// must share one float dtype that PipelineOptions::fuse_attention covers, the batch dims of q, k and v must be equal, and the head sizes
// static and at most ir::kMaxAttentionHeadSize.
//
// The head-split transposes fold into the op: k is kT' with its last two axes swapped (composed
// with a transpose that produced kT'), and when q, k and v are all [B, S, H, D] values seen
// through a [0, 2, 1, 3] transpose (a projection reshaped into heads), the op reads them in that
// layout (layout="bshd") and writes [B, Sq, H, Dv], so the transpose that merges the heads back
// cancels against the one that restores the [B, H, Sq, Dv] view. Other layouts keep (or get)
// explicit transposes. simplify then composes and cancels the transposes this leaves.
#include <cmath>
#include <numeric>
#include <optional>
#include <vector>

#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

// A value seen as `source` through a transpose (identity perm when it is no transpose).
struct View {
  NodeId source = ir::kNoNode;
  std::vector<int64_t> perm;
};

class AttentionFuser {
 public:
  AttentionFuser(Graph& graph, PipelineOptions::Floats policy) : policy_(policy), graph_(graph), remap_(graph.num_nodes()), uses_(graph.num_nodes(), 0) {
    for (const Node& node : graph.nodes())
      if (!node.erased)
        for (NodeId in : node.inputs) ++uses_[in];
    for (const ir::GraphOutput& out : graph.outputs()) uses_[out.node] += 2;  // never fused away
  }

  Status run(const PassContext& context) {
    const size_t n = graph_.num_nodes();
    for (NodeId id = 0; id < n; ++id) {
      if (graph_.node(id).erased) continue;
      remap_.rewrite_operands(graph_.node(id));
      if (graph_.node(id).op == OpKind::kMatMul) KILN_RETURN_IF_ERROR(try_fuse(id));
    }
    if (!remap_.changed()) return Status::ok();
    remap_.finish(graph_);
    KILN_RETURN_IF_ERROR(reorder_topologically(graph_));  // the new nodes were appended
    return simplify_pass(graph_, context);
  }

 private:
  const Node& node(NodeId id) const { return graph_.node(id); }
  bool single_use(NodeId id) const { return uses_[id] == 1; }

  // The value of a one-element float constant, if `id` is one.
  std::optional<double> scalar_constant(NodeId id) const {
    if (node(id).op != OpKind::kConstant || !ir::is_float(node(id).type.dtype)) return std::nullopt;
    const ir::Tensor& t = graph_.constant_of(id);
    if (t.num_elements() != 1) return std::nullopt;
    return t.element_as_double(0);
  }

  // Strips single-use mul/div by one-element constants that keep the type, multiplying `scale`.
  NodeId strip_scales(NodeId id, double& scale, std::vector<NodeId>& chain) const {
    while (single_use(id) && (node(id).op == OpKind::kMul || node(id).op == OpKind::kDiv)) {
      const Node& n = node(id);
      std::optional<double> c;
      NodeId rest = ir::kNoNode;
      if ((c = scalar_constant(n.inputs[1])) && node(n.inputs[0]).type == n.type) {
        rest = n.inputs[0];
        if (n.op == OpKind::kDiv) c = 1.0 / *c;
      } else if (n.op == OpKind::kMul && (c = scalar_constant(n.inputs[0])) && node(n.inputs[1]).type == n.type) {
        rest = n.inputs[1];
      } else {
        break;
      }
      if (!std::isfinite(*c)) break;
      scale *= *c;
      chain.push_back(id);
      id = rest;
    }
    return id;
  }

  View view_of(NodeId id) const {
    const Node& n = node(id);
    if (n.op == OpKind::kTranspose) return {n.inputs[0], std::get<ir::TransposeAttrs>(n.attrs).perm};
    std::vector<int64_t> identity(n.type.shape.size());
    std::iota(identity.begin(), identity.end(), 0);
    return {id, identity};
  }

  Status try_fuse(NodeId out_id) {
    const Node& out = node(out_id);
    const NodeId probs = out.inputs[0], v = out.inputs[1];
    if (node(probs).op != OpKind::kSoftmax || !single_use(probs)) return Status::ok();
    const ir::TensorType scores_type = node(probs).type;  // a copy: adding nodes moves them
    const int64_t rank = int64_t(scores_type.shape.size());
    if (rank < 2 || std::get<ir::AxisAttrs>(node(probs).attrs).axis != rank - 1) return Status::ok();
    const ir::DType dtype = scores_type.dtype;
    if (!PipelineOptions::covers(policy_, dtype) || node(v).type.dtype != dtype || node(v).type.shape.size() != size_t(rank))
      return Status::ok();

    // softmax's operand back to the q.kT product: mask terms and scales in any order.
    std::vector<NodeId> chain;  // the pattern's inner values (all single-use)
    std::vector<NodeId> masks;  // additive mask values
    std::vector<NodeId> minus_inf_masks;  // conditions c of where(c, -inf, s) and where(c, s, -inf)
    std::vector<bool> fill_when_true;     // per condition: -inf where it holds (the first form)
    double scale = 1.0;
    NodeId s = node(probs).inputs[0];
    while (true) {
      s = strip_scales(s, scale, chain);
      const Node& n = node(s);
      if (!single_use(s) || n.type != scores_type) return Status::ok();
      if (n.op == OpKind::kAdd) {
        // The scores are the operand that continues the pattern; exporters put them first.
        auto continues = [&](NodeId x) {
          const OpKind op = node(x).op;
          return node(x).type == scores_type && single_use(x) &&
                 (op == OpKind::kMatMul || op == OpKind::kMul || op == OpKind::kDiv || op == OpKind::kAdd ||
                  op == OpKind::kWhere);
        };
        const int side = continues(n.inputs[0]) ? 1 : 0;
        const NodeId mask = n.inputs[size_t(side)], rest = n.inputs[size_t(1 - side)];
        if (node(rest).type != scores_type || node(mask).type.dtype != dtype) return Status::ok();
        masks.push_back(mask);
        chain.push_back(s);
        s = rest;
        continue;
      }
      if (n.op == OpKind::kWhere) {
        const std::optional<double> a = scalar_constant(n.inputs[1]), b = scalar_constant(n.inputs[2]);
        const bool true_fills = a && std::isinf(*a) && *a < 0 && node(n.inputs[2]).type == scores_type;
        const bool false_fills = b && std::isinf(*b) && *b < 0 && node(n.inputs[1]).type == scores_type;
        if (!true_fills && !false_fills) return Status::ok();
        minus_inf_masks.push_back(n.inputs[0]);
        fill_when_true.push_back(true_fills);
        chain.push_back(s);
        s = n.inputs[true_fills ? 2 : 1];
        continue;
      }
      break;
    }
    if (node(s).op != OpKind::kMatMul || !single_use(s)) return Status::ok();
    chain.push_back(s);
    const NodeId q = strip_scales(node(s).inputs[0], scale, chain);
    const NodeId kt = strip_scales(node(s).inputs[1], scale, chain);
    if (node(q).type.shape.size() != size_t(rank) || node(kt).type.shape.size() != size_t(rank)) return Status::ok();

    // k = kT with its last two axes swapped, composed with kT's own transpose.
    const View kt_view = view_of(kt);
    const size_t r = static_cast<size_t>(rank);
    std::vector<int64_t> swapped(r);
    std::iota(swapped.begin(), swapped.end(), 0);
    std::swap(swapped[r - 1], swapped[r - 2]);
    const View k_view{kt_view.source, compose_perms(kt_view.perm, swapped)};

    const View q_view = view_of(q), v_view = view_of(v);
    const std::vector<int64_t> heads = {0, 2, 1, 3};
    const bool seq_major = rank == 4 && q_view.perm == heads && k_view.perm == heads && v_view.perm == heads;
    ir::AttentionAttrs attrs;
    attrs.scale = scale;
    attrs.seq_major = seq_major;
    const NodeId q_in = seq_major ? q_view.source : q;
    const NodeId v_in = seq_major ? v_view.source : v;
    const bool k_identity = is_identity_perm(k_view.perm);
    if (node(q_in).type.dtype != dtype || node(k_view.source).type.dtype != dtype) return Status::ok();
    const ir::Dim d = node(q_in).type.shape.back(), dv = node(v_in).type.shape.back();
    if (!d.is_static() || !dv.is_static() || d.size() > ir::kMaxAttentionHeadSize ||
        dv.size() > ir::kMaxAttentionHeadSize)
      return Status::ok();

    // The new nodes (a transpose for k where it is needed, the mask, the op, the output view).
    const SourceLoc loc = out.loc;
    const std::string base = out.name;
    NodeId k_in = k_view.source;
    if (!seq_major && !k_identity) {
      KILN_ASSIGN_OR_RETURN(k_in, add(OpKind::kTranspose, {k_view.source}, ir::TransposeAttrs{k_view.perm}, base + ".k", loc));
    }
    std::vector<NodeId> inputs = {q_in, k_in, v_in};
    NodeId mask = ir::kNoNode;
    for (NodeId m : masks) {
      if (mask == ir::kNoNode) {
        mask = m;
      } else {
        KILN_ASSIGN_OR_RETURN(mask, add(OpKind::kAdd, {mask, m}, ir::NoAttrs{}, base + ".mask", loc));
      }
    }
    for (size_t i = 0; i < minus_inf_masks.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(NodeId minus_inf, scalar(dtype, -INFINITY, base + ".minus_inf", loc));
      KILN_ASSIGN_OR_RETURN(NodeId zero, scalar(dtype, 0.0, base + ".zero", loc));
      const NodeId cond = minus_inf_masks[i];
      KILN_ASSIGN_OR_RETURN(NodeId term, add(OpKind::kWhere, fill_when_true[i] ? std::vector<NodeId>{cond, minus_inf, zero}
                                                                                 : std::vector<NodeId>{cond, zero, minus_inf},
                                             ir::NoAttrs{}, base + ".mask", loc));
      if (mask == ir::kNoNode) {
        mask = term;
      } else {
        KILN_ASSIGN_OR_RETURN(mask, add(OpKind::kAdd, {mask, term}, ir::NoAttrs{}, base + ".mask", loc));
      }
    }
    if (mask != ir::kNoNode) inputs.push_back(mask);
    Result<NodeId> attention = add(OpKind::kAttention, inputs, attrs, base + ".attention", loc);
    if (!attention) return Status::ok();  // shapes that attention does not take (batch dims differ)
    NodeId result = *attention;
    if (seq_major) {
      KILN_ASSIGN_OR_RETURN(result, add(OpKind::kTranspose, {result}, ir::TransposeAttrs{heads}, base, loc));
    }
    if (node(result).type != node(out_id).type)
      return internal_error("fuse-attention: the attention of '" + base + "' has type " + node(result).type.to_string() +
                            ", not " + node(out_id).type.to_string());
    remap_.replace(out_id, result);
    uses_[result] = uses_[out_id];
    graph_.node(out_id).erased = true;
    for (NodeId id : chain) graph_.node(id).erased = true;
    graph_.node(probs).erased = true;
    return Status::ok();
  }

  // Appends a node with its type inferred (keeping the use counts); an inference failure is
  // returned and changes nothing.
  Result<NodeId> add(OpKind op, std::vector<NodeId> inputs, ir::Attrs attrs, const std::string& base,
                     const SourceLoc& loc) {
    KILN_ASSIGN_OR_RETURN(NodeId id, add_inferred_node(graph_, op, std::move(inputs), std::move(attrs), base, loc));
    for (NodeId in : graph_.node(id).inputs) ++uses_[in];
    uses_.push_back(0);
    return id;
  }

  Result<NodeId> scalar(ir::DType dtype, double value, const std::string& base, const SourceLoc& loc) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor data, ir::Tensor::zeros(dtype, {}));
    data.set_element_from_double(0, value);
    uses_.push_back(0);
    return add_constant_node(graph_, std::move(data), ir::TensorType{dtype, {}}, base, loc);
  }

  PipelineOptions::Floats policy_;
  Graph& graph_;
  ValueRemap remap_;
  std::vector<int64_t> uses_;
};

}  // namespace

Status fuse_attention_pass(Graph& graph, const PassContext& context) {
  if (context.options.fuse_attention == PipelineOptions::Floats::kNone) return Status::ok();
  return AttentionFuser(graph, context.options.fuse_attention).run(context);
}

}  // namespace kiln::passes
