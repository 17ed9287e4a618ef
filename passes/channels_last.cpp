// Pass channels-last: runs convolution networks in NHWC, the layout tensor-core convolutions
// want (cuDNN's NCHW half-precision kernels transpose internally; PyTorch's channels_last and
// TensorRT do the same), with layout changes only where an NCHW value is really needed.
//
// Which convolutions convert is PipelineOptions::channels_last: none, the f16/bf16 ones (kilnc's
// default when the cuda target is selected), or every float one. In node order:
//   conv2d(x, w[, b])      -> conv2d(nhwc(x), w permuted to [O, KH, KW, C/g][, b], channels_last)
//   max/avg_pool2d(x)      -> the same op on nhwc(x), channels_last    (only when x has an NHWC form)
//   elementwise(a, b, ...) -> the same op on NHWC operands             (when one operand has one)
//   reduce_*(x), softmax / log_softmax(x), concat(xs)   -> the same op on nhwc(x), axes remapped
//                                                          (reductions: see reduces_well)
//   transpose(x)           -> one transpose of nhwc(x) with the composed permutation
// Each converted node keeps its name and type and becomes an NCHW view of its NHWC twin
// (transpose(twin, [0, 3, 1, 2]); a reshape when only unit dims move, as for the [N, 1, 1, C]
// of a global average pool), so that every consumer that is not converted still reads NCHW.
// Chains of converted nodes read each other's twins directly, which leaves the views unused
// (dce removes them): a ResNet keeps one transpose at its input and none inside.
//
// An elementwise operand without an NHWC form converts when that is free: a constant (its data
// is permuted here), or a value whose permutation only moves unit dims (a reshape). Otherwise
// the node stays NCHW (reading views) rather than adding a transpose of a big operand.
// Weights are permuted into new constants; an original goes as soon as nothing uses it any more
// (UseCounts), so that the weights are not held in both layouts at once.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "ir/interpreter.h"
#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::kNoNode;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

// out[i] = in[perm[i]]: NCHW -> NHWC and back.
const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

ir::Shape permuted(const ir::Shape& shape, const std::vector<int64_t>& perm) {
  ir::Shape out;
  for (int64_t p : perm) out.push_back(shape[size_t(p)]);
  return out;
}

// True when permuting `shape` by `perm` keeps the relative order of every dim that is not a
// static 1: the permuted tensor then has the same elements in the same order (a reshape).
bool moves_only_unit_dims(const ir::Shape& shape, const std::vector<int64_t>& perm) {
  int64_t last = -1;
  for (int64_t p : perm) {
    if (shape[size_t(p)].is_one()) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

class ChannelsLast {
 public:
  ChannelsLast(Graph& graph, PipelineOptions::Floats policy)
      : graph_(graph),
        policy_(policy),
        remap_(graph.num_nodes()),
        nhwc_(graph.num_nodes(), kNoNode),
        uses_(graph),
        original_(NodeId(graph.num_nodes())) {}

  Status run() {
    for (NodeId id = 0; id < original_; ++id) {
      if (graph_.node(id).erased || is_source(graph_.node(id).op)) continue;
      remap_.rewrite_operands(graph_.node(id));
      KILN_RETURN_IF_ERROR(convert(id));
    }
    if (!changed_) return Status::ok();
    remap_.finish(graph_);
    return reorder_topologically(graph_);  // the NHWC nodes were appended
  }

 private:
  NodeId twin(NodeId id) const { return id < nhwc_.size() ? nhwc_[id] : kNoNode; }
  const Node& node(NodeId id) const { return graph_.node(id); }

  bool converts_conv(const Node& conv) const { return PipelineOptions::covers(policy_, conv.type.dtype); }

  // Converts node `id` when its rule applies (the file comment), else leaves it reading views.
  Status convert(NodeId id) {
    const Node& n = node(id);
    const OpKind op = n.op;
    if (op == OpKind::kTranspose) return compose_transpose(id);
    if (op == OpKind::kReshape) return forward_reshape(id);
    if (ir::is_reduction(op) && op != OpKind::kArgMax) return convert_reduction(id);
    if (n.type.shape.size() != 4) return Status::ok();
    if (op == OpKind::kConv2d) return convert_conv(id);
    if (ir::is_elementwise(op)) return convert_elementwise(id);
    if (n.inputs.empty()) return Status::ok();  // iota
    const NodeId u = twin(n.inputs[0]);
    if (op == OpKind::kMaxPool2d || op == OpKind::kAvgPool2d) {
      auto attrs = std::get<ir::Pool2dAttrs>(n.attrs);
      if (attrs.channels_last || u == kNoNode) return Status::ok();
      attrs.channels_last = true;
      return replace_by_view(id, op, {u}, attrs);
    }
    if (op == OpKind::kSoftmax || op == OpKind::kLogSoftmax) {
      auto attrs = std::get<ir::AxisAttrs>(n.attrs);
      attrs.axis = nhwc_axis(attrs.axis);
      if (u == kNoNode || !reduces_well(u, {attrs.axis})) return Status::ok();
      return replace_by_view(id, op, {u}, attrs);
    }
    if (op == OpKind::kConcat) {
      std::vector<NodeId> inputs;
      for (NodeId in : n.inputs) {
        if (twin(in) == kNoNode) return Status::ok();
        inputs.push_back(twin(in));
      }
      auto attrs = std::get<ir::AxisAttrs>(n.attrs);
      attrs.axis = nhwc_axis(attrs.axis);
      return replace_by_view(id, op, std::move(inputs), attrs);
    }
    return Status::ok();
  }

  Status convert_conv(NodeId id) {
    const Node& n = node(id);
    if (std::get<ir::Conv2dAttrs>(n.attrs).channels_last || !converts_conv(n)) return Status::ok();
    auto attrs = std::get<ir::Conv2dAttrs>(n.attrs);
    attrs.channels_last = true;
    std::vector<NodeId> inputs = n.inputs;  // copied: to_nhwc appends nodes
    KILN_ASSIGN_OR_RETURN(inputs[0], to_nhwc(inputs[0]));
    KILN_ASSIGN_OR_RETURN(inputs[1], to_nhwc(inputs[1]));
    return replace_by_view(id, OpKind::kConv2d, std::move(inputs), attrs);
  }

  // reshape(view of u) == reshape(u) when the view only moves unit dims.
  Status forward_reshape(NodeId id) {
    const NodeId u = twin(node(id).inputs[0]);
    if (u == kNoNode || !moves_only_unit_dims(node(u).type.shape, kToNchw)) return Status::ok();
    const NodeId before = graph_.node(id).inputs[0];
    graph_.node(id).inputs[0] = u;
    uses_.add(u);
    drop_use(before);
    changed_ = true;
    return Status::ok();
  }

  // Whether reducing NHWC value `u` over `axes` is as good as reducing its NCHW form: reductions
  // that keep the innermost axis give each thread a row of channels (coalesced) but walk the
  // reduced elements serially, so they convert only for short rows (kMaxColumnRow: a ResNet's
  // 7x7 global mean); a squeeze-and-excitation mean over 112x112 stays NCHW (it reads a view,
  // i.e. a transpose, then reduces contiguous rows), which is an order of magnitude faster.
  static constexpr int64_t kMaxColumnRow = 64;
  bool reduces_well(NodeId u, const std::vector<int64_t>& axes) const {
    if (std::find(axes.begin(), axes.end(), 3) != axes.end()) return true;
    const ir::Shape& shape = node(u).type.shape;
    int64_t k = 1;
    for (int64_t a : axes) {
      if (!shape[size_t(a)].is_static()) return false;
      k *= shape[size_t(a)].size();
    }
    return k <= kMaxColumnRow;
  }

  // The NHWC axis of NCHW axis `axis` (negative counts from the end).
  static int64_t nhwc_axis(int64_t axis) { return kToNchw[size_t(axis < 0 ? axis + 4 : axis)]; }

  // Operands that broadcast one value (every dim 1, scalars) stay as they are.
  Status convert_elementwise(NodeId id) {
    const OpKind op = node(id).op;
    const ir::Attrs attrs = node(id).attrs;
    std::vector<NodeId> inputs = node(id).inputs;  // copied: to_nhwc appends nodes
    bool any_twin = false;
    for (NodeId in : inputs) {
      any_twin |= twin(in) != kNoNode;
      if (twin(in) == kNoNode && !node_is_free_to_convert(in)) return Status::ok();
    }
    if (!any_twin) return Status::ok();
    for (NodeId& in : inputs) {
      if (twin(in) == kNoNode && ir::static_num_elements(node(in).type.shape) == 1) continue;
      KILN_ASSIGN_OR_RETURN(in, to_nhwc(in));
    }
    return replace_by_view(id, op, std::move(inputs), attrs);
  }

  // An operand of a rank-4 elementwise op that needs no kernel to be NHWC: a constant (rank
  // below 4 is aligned to the right as broadcasting does) or a permutation of unit dims.
  bool node_is_free_to_convert(NodeId id) const {
    const Node& n = node(id);
    if (n.type.shape.size() > 4) return false;
    if (n.op == OpKind::kConstant) return ir::is_static(n.type.shape);
    return moves_only_unit_dims(aligned(n.type.shape), kToNhwc);
  }

  static ir::Shape aligned(const ir::Shape& shape) {
    ir::Shape out(4 - shape.size(), ir::Dim::of(1));
    out.insert(out.end(), shape.begin(), shape.end());
    return out;
  }

  // reduce(view of u, axes) -> reduce(u, remapped axes); with keepdims the result is NHWC (a
  // twin), else its remaining dims come in u's order, put back in the old order if it differs.
  Status convert_reduction(NodeId id) {
    const Node& n = node(id);
    const NodeId u = twin(n.inputs[0]);
    if (u == kNoNode) return Status::ok();
    auto attrs = std::get<ir::ReduceAttrs>(n.attrs);
    std::vector<int64_t> axes;
    for (int64_t a : attrs.axes) axes.push_back(nhwc_axis(a));
    std::sort(axes.begin(), axes.end());
    if (!reduces_well(u, axes)) return Status::ok();
    const std::vector<int64_t> old_axes = attrs.axes;
    attrs.axes = axes;
    attrs.all_axes = false;
    if (attrs.keepdims) return replace_by_view(id, n.op, {u}, attrs);
    KILN_ASSIGN_OR_RETURN(NodeId reduced, add_node(n.op, {u}, attrs, n));
    // The kept NCHW axes, and where each sits among the kept NHWC axes.
    std::vector<int64_t> kept_nhwc;
    for (int64_t d = 0; d < 4; ++d)
      if (!std::binary_search(axes.begin(), axes.end(), d)) kept_nhwc.push_back(d);
    std::vector<int64_t> order;
    for (int64_t d = 0; d < 4; ++d) {
      if (std::find(old_axes.begin(), old_axes.end(), d) != old_axes.end()) continue;
      order.push_back(std::find(kept_nhwc.begin(), kept_nhwc.end(), kToNchw[size_t(d)]) - kept_nhwc.begin());
    }
    become_view(id, reduced, order);
    return Status::ok();
  }

  // transpose(view of u, p) == transpose(u, q) with q[i] = kToNchw[p[i]]; u itself for q = id.
  Status compose_transpose(NodeId id) {
    const Node& n = node(id);
    const NodeId u = twin(n.inputs[0]);
    if (u == kNoNode) return Status::ok();
    // The perm is complete and non-negative after inference.
    const std::vector<int64_t> composed = compose_perms(kToNchw, std::get<ir::TransposeAttrs>(n.attrs).perm);
    if (is_identity_perm(composed)) {
      remap_.replace(id, u);
      graph_.node(id).erased = true;
    } else {
      become_view(id, u, composed);
    }
    changed_ = true;
    return Status::ok();
  }

  // Adds the NHWC form of node `id` (op on `inputs`), then turns `id` into its NCHW view.
  Status replace_by_view(NodeId id, OpKind op, std::vector<NodeId> inputs, ir::Attrs attrs) {
    KILN_ASSIGN_OR_RETURN(NodeId converted, add_node(op, std::move(inputs), std::move(attrs), node(id)));
    become_view(id, converted, kToNchw);
    set_twin(id, converted);
    return Status::ok();
  }

  // Node `id` keeps its name and type and now reads transpose(source, perm), or a reshape of it
  // when that moves unit dims only (a view that costs nothing).
  void become_view(NodeId id, NodeId source, const std::vector<int64_t>& perm) {
    const std::vector<NodeId> before = std::exchange(graph_.node(id).inputs, {source});
    uses_.add(source);
    for (NodeId in : before) drop_use(in);
    Node& n = graph_.node(id);
    if (moves_only_unit_dims(node(source).type.shape, perm)) {
      n.op = OpKind::kReshape;
      n.attrs = ir::ReshapeAttrs{n.type.shape};
    } else {
      n.op = OpKind::kTranspose;
      n.attrs = ir::TransposeAttrs{perm};
    }
    changed_ = true;
  }

  void set_twin(NodeId id, NodeId nhwc) {
    if (nhwc_.size() <= id) nhwc_.resize(id + 1, kNoNode);
    nhwc_[id] = nhwc;
  }

  // The NHWC form of a rank-4 (or broadcast, lower-rank) NCHW value: its twin, a permuted
  // constant, a reshape, or a transpose; made once per value.
  Result<NodeId> to_nhwc(NodeId id) {
    if (twin(id) != kNoNode) return twin(id);
    const Node& n = node(id);
    const ir::Shape shape = aligned(n.type.shape);
    NodeId result = kNoNode;
    if (n.op == OpKind::kConstant && ir::is_static(n.type.shape)) {
      KILN_ASSIGN_OR_RETURN(result, permuted_constant(id));
    } else if (moves_only_unit_dims(shape, kToNhwc)) {
      KILN_ASSIGN_OR_RETURN(result, add_node(OpKind::kReshape, {id}, ir::ReshapeAttrs{permuted(shape, kToNhwc)}, n));
    } else {
      KILN_ASSIGN_OR_RETURN(result, add_node(OpKind::kTranspose, {id}, ir::TransposeAttrs{kToNhwc}, n));
    }
    set_twin(id, result);
    return result;
  }

  // A new constant holding constant `id` (aligned to rank 4) permuted to NHWC, computed by the
  // reference interpreter's transpose so that it is exactly what the op would give.
  Result<NodeId> permuted_constant(NodeId id) {
    const Node& n = node(id);
    const ir::Tensor& data = graph_.constant_of(id);
    const ir::Tensor reshaped = ir::Tensor::view(data.dtype(), ir::static_sizes(aligned(n.type.shape)), data.data(), nullptr);
    Node transpose;
    transpose.op = OpKind::kTranspose;
    transpose.name = n.name;
    transpose.attrs = ir::TransposeAttrs{kToNhwc};
    transpose.type = ir::TensorType{n.type.dtype, permuted(aligned(n.type.shape), kToNhwc)};
    const std::vector<const ir::Tensor*> operands = {&reshaped};
    KILN_ASSIGN_OR_RETURN(ir::Tensor value, ir::evaluate_node(graph_, transpose, operands, ir::SymbolBindings{}));
    return add_constant_node(graph_, std::move(value), transpose.type, n.name + ".nhwc", n.loc);
  }

  // Appends a node computing `op` on `inputs`, named after `like`, its type inferred.
  Result<NodeId> add_node(OpKind op, std::vector<NodeId> inputs, ir::Attrs attrs, const Node& like) {
    const std::string base = like.name + ".nhwc";
    for (NodeId in : inputs) uses_.add(in);
    Result<NodeId> added = add_inferred_node(graph_, op, inputs, std::move(attrs), base, like.loc);
    if (!added) {
      return internal_error("channels-last: '" + base + "' (" + std::string(ir::op_name(op)) +
                            "): " + added.status().message());
    }
    return added;
  }

  // The use counts of the graph's own values are kept exact (operands are rewired only here,
  // in add_node and in forward_reshape); those of the nodes this pass adds are not (the remap
  // redirects uses to them), so only an original constant is ever dropped.
  void drop_use(NodeId id) {
    if (id < original_) uses_.drop(graph_, id);
  }

  Graph& graph_;
  PipelineOptions::Floats policy_;
  ValueRemap remap_;
  std::vector<NodeId> nhwc_;  // nhwc_[v]: the node holding NCHW value v in NHWC, or kNoNode
  UseCounts uses_;
  const NodeId original_;  // the nodes before this pass: [0, original_)
  bool changed_ = false;
};

}  // namespace

Status channels_last_pass(Graph& graph, const PassContext& context) {
  if (context.options.channels_last == PipelineOptions::Floats::kNone) return Status::ok();
  return ChannelsLast(graph, context.options.channels_last).run();
}

}  // namespace kiln::passes
