// Pass fold-conv-affine: folds per-output-channel constant shifts and scales into the
// convolution before them, which is how an inference-mode batch normalization disappears (the
// importers lower it to x * a + b with constant a and b, a = gamma / sqrt(var + eps)):
//   conv2d(x, W[, c]) + t     -> conv2d(x, W, c + t)      (c absent: t)
//   conv2d(x, W[, c]) * s     -> conv2d(x, W*s[, c*s])
// where W, c, t and s are constants, t and s vary along the channel axis only (shapes [C,1,1],
// [1,C,1,1], or one element), the conv feeds nothing but the add or mul, and the result keeps
// the add's or mul's type. Nodes are visited in order, so conv -> add(b) -> mul(a) -> add(b')
// ends as one conv with new weights and bias, whose epilogue then starts at what follows (relu, a
// residual add): the shape vendor libraries fuse (codegen/conv_call.h), and one kernel
// fewer of arithmetic on every target.
//
// The folded weights and bias are new constants (the originals stay for other users, and are
// dropped at once otherwise: UseCounts), computed in double and rounded once to their dtype, as
// ONNX Runtime's and PyTorch's fusers do. Numerically this moves roundings: (x.W)*s becomes
// x.(W*s).
#include <algorithm>
#include <vector>

#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

// True when a tensor of shape `operand` broadcast against the conv output `out` ([N, C, H, W],
// or [N, H, W, C] with channels_last) varies along the channel axis at most.
bool per_channel(const ir::Shape& operand, const ir::Shape& out, bool channels_last) {
  if (out.size() != 4 || operand.size() > out.size()) return false;
  const size_t offset = out.size() - operand.size();
  const size_t c_axis = ir::image_axes(channels_last).c;
  for (size_t d = 0; d < operand.size(); ++d) {
    if (operand[d].is_one()) continue;
    if (d + offset != c_axis || !(operand[d] == out[c_axis])) return false;
  }
  return true;
}

class ConvAffineFolder {
 public:
  explicit ConvAffineFolder(Graph& graph) : graph_(graph), remap_(graph.num_nodes()), uses_(graph) {}

  Status run() {
    const size_t n = graph_.num_nodes();
    for (NodeId id = 0; id < n; ++id) {
      Node& node = graph_.node(id);
      if (node.erased) continue;
      remap_.rewrite_operands(node);
      if ((node.op == OpKind::kMul || node.op == OpKind::kAdd) && node.inputs.size() == 2)
        KILN_RETURN_IF_ERROR(try_fold(id));
    }
    if (!remap_.changed()) return Status::ok();
    remap_.finish(graph_);
    return reorder_topologically(graph_);  // the new constants were appended
  }

 private:
  bool is_constant(NodeId id) const { return graph_.node(id).op == OpKind::kConstant; }
  bool channels_last(NodeId conv) const { return std::get<ir::Conv2dAttrs>(graph_.node(conv).attrs).channels_last; }
  size_t channel_axis(NodeId conv) const { return ir::image_axes(channels_last(conv)).c; }

  // True when `id` is a conv2d whose shift or scale can be folded: its only use is the node at
  // hand, its weights (and bias) are constants, and its channel count is static.
  bool foldable_conv(NodeId id) const {
    const Node& conv = graph_.node(id);
    if (conv.op != OpKind::kConv2d || uses_.count(id) != 1 || conv.type.shape.size() != 4 ||
        !conv.type.shape[channel_axis(id)].is_static())
      return false;
    for (size_t i = 1; i < conv.inputs.size(); ++i)
      if (!is_constant(conv.inputs[i])) return false;
    return true;
  }

  // Adding nodes reallocates the node list: nodes are re-fetched by id after each constant.
  Status try_fold(NodeId id) {
    const Node& node = graph_.node(id);
    const bool is_add = node.op == OpKind::kAdd;
    for (int side = 0; side < 2; ++side) {
      const NodeId conv = node.inputs[size_t(side)], operand = node.inputs[size_t(1 - side)];
      if (!foldable_conv(conv) || !is_constant(operand) || graph_.node(conv).type != node.type ||
          !per_channel(graph_.node(operand).type.shape, node.type.shape, channels_last(conv)))
        continue;
      const int64_t channels = node.type.shape[channel_axis(conv)].size();
      if (is_add) {
        // The new bias: the old one (or zeros) plus the shift, as [C].
        std::vector<NodeId> terms = {operand};
        if (graph_.node(conv).inputs.size() > 2) terms.push_back(graph_.node(conv).inputs[2]);
        KILN_ASSIGN_OR_RETURN(NodeId bias, channel_constant(terms, channels, [](double a, double b) { return a + b; },
                                                             0.0, graph_.node(conv).name + ".bias"));
        if (graph_.node(conv).inputs.size() > 2) uses_.drop(graph_, graph_.node(conv).inputs[2]);
        graph_.node(conv).inputs.resize(3);
        graph_.node(conv).inputs[2] = bias;
      } else {
        const NodeId old_weights = graph_.node(conv).inputs[1];
        KILN_ASSIGN_OR_RETURN(NodeId weights, scaled_weights(old_weights, operand));
        graph_.node(conv).inputs[1] = weights;
        uses_.drop(graph_, old_weights);
        if (graph_.node(conv).inputs.size() > 2) {
          const NodeId old_bias = graph_.node(conv).inputs[2];
          const std::vector<NodeId> terms = {operand, old_bias};
          KILN_ASSIGN_OR_RETURN(NodeId bias, channel_constant(terms, channels, [](double a, double b) { return a * b; },
                                                               1.0, graph_.node(conv).name + ".bias"));
          graph_.node(conv).inputs[2] = bias;
          uses_.drop(graph_, old_bias);
        }
      }
      uses_.drop(graph_, operand);  // the shift or scale, read by the add or mul that goes
      // Uses of the add or mul now read the conv, whose only use it was.
      remap_.replace(id, conv);
      uses_.set(conv, uses_.count(id));
      graph_.node(id).erased = true;
      return Status::ok();
    }
    return Status::ok();
  }

  // Element `channel` of a per-channel constant (one element: the same for every channel).
  double channel_value(NodeId id, int64_t channel) const {
    const ir::Tensor& t = graph_.constant_of(id);
    return t.element_as_double(t.num_elements() == 1 ? 0 : channel);
  }

  // A new [channels] constant folding `combine` over the per-channel constants `terms`.
  template <class Combine>
  Result<NodeId> channel_constant(const std::vector<NodeId>& terms, int64_t channels, Combine combine, double identity,
                                  const std::string& base) {
    const ir::DType dtype = graph_.node(terms.front()).type.dtype;
    KILN_ASSIGN_OR_RETURN(ir::Tensor data, ir::Tensor::zeros(dtype, {channels}));
    for (int64_t ch = 0; ch < channels; ++ch) {
      double value = identity;
      for (NodeId term : terms) value = combine(value, channel_value(term, ch));
      data.set_element_from_double(ch, value);
    }
    return add_constant(std::move(data), ir::TensorType{dtype, {ir::Dim::of(channels)}}, base, graph_.node(terms.front()).loc);
  }

  // The weights [C, ...] times the per-channel scale, by their index along axis 0. f32 weights
  // (nearly all) take a loop over their floats: through the per-element accessors, ResNet-50's
  // 25 M weights took 0.4 s.
  Result<NodeId> scaled_weights(NodeId weights, NodeId scale) {
    const Node& node = graph_.node(weights);
    const ir::Tensor& data = graph_.constant_of(weights);
    const int64_t count = data.num_elements();
    const int64_t channels = data.shape()[0];
    const int64_t per_channel_elements = channels > 0 ? count / channels : 1;
    std::vector<double> factor(size_t(std::max<int64_t>(channels, 0)));
    for (int64_t ch = 0; ch < channels; ++ch) factor[size_t(ch)] = channel_value(scale, ch);
    KILN_ASSIGN_OR_RETURN(ir::Tensor scaled, ir::Tensor::zeros(data.dtype(), data.shape()));
    if (data.dtype() == ir::DType::kF32) {
      const float* from = data.data_as<float>();
      float* to = scaled.mutable_data_as<float>();
      for (int64_t ch = 0, i = 0; ch < channels; ++ch)
        for (int64_t e = 0; e < per_channel_elements; ++e, ++i) to[i] = float(double(from[i]) * factor[size_t(ch)]);
    } else {
      for (int64_t i = 0; i < count; ++i)
        scaled.set_element_from_double(i, data.element_as_double(i) * factor[size_t(i / per_channel_elements)]);
    }
    return add_constant(std::move(scaled), node.type, node.name + ".scaled", node.loc);
  }

  Result<NodeId> add_constant(ir::Tensor data, ir::TensorType type, const std::string& base, const SourceLoc& loc) {
    const NodeId id = add_constant_node(graph_, std::move(data), std::move(type), base, loc);
    uses_.add(id);  // by the conv it is made for
    return id;
  }

  Graph& graph_;
  ValueRemap remap_;
  UseCounts uses_;
};

}  // namespace

Status fold_conv_affine_pass(Graph& graph, const PassContext&) { return ConvAffineFolder(graph).run(); }

}  // namespace kiln::passes
