// match_conv_call: see conv_call.h and artifact::ConvCall for the exact pattern. The checks, in
// order: a conv2d anchor with operands in memory and static shapes beyond the batch; one float
// dtype; symmetric padding; an epilogue chain in which each node consumes the previous one and
// is an add of a per-channel bias (at most one bias in all, counting the conv's own input), an
// add of a residual shaped as the output (at most one), or a final relu (or clamp, where the
// target fuses it); one written buffer, the chain's last value.
#include "codegen/conv_call.h"

#include <limits>

#include "codegen/library_epilogue.h"

namespace kiln::codegen {
namespace {

using ir::Node;
using ir::NodeId;
using ir::OpKind;

// True when `shape`, broadcast trailing-aligned against a rank-4 image tensor, holds `channels`
// values along its channel axis and nothing else: NCHW [C,1,1], [1,C,1,1] (a [C] would land on
// the width axis, so it is accepted only as the conv's own bias input, not here); NHWC [C],
// [1,C], [1,1,C], [1,1,1,C].
bool is_channel_vector(const ir::Shape& shape, int64_t channels, const ir::ImageAxes& ax) {
  if (shape.empty() || shape.size() > 4 || shape.size() + ax.c < 4) return false;
  const size_t c_axis = ax.c - (4 - shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d == c_axis) {
      if (!shape[d].is_static() || shape[d].size() != channels) return false;
    } else if (!shape[d].is_one()) {
      return false;
    }
  }
  return true;
}

// What the library computes of a conv kernel: the call (without out_arg and the in-place
// epilogue), the last node it covers, and the epilogue nodes after it.
struct ConvPrefix {
  artifact::ConvCall call;
  NodeId last = ir::kNoNode;
  std::vector<NodeId> rest;
};

std::optional<ConvPrefix> conv_prefix(const KernelModel& model, bool allow_tf32, bool fuse_clamp) {
  if (model.kind != KernelTemplate::kPointwise || model.anchor == ir::kNoNode || !model.prologue.empty())
    return std::nullopt;
  const Node& conv = model.node(model.anchor);
  if (conv.op != OpKind::kConv2d || conv.inputs.size() < 2) return std::nullopt;
  const ir::DType dtype = conv.type.dtype;
  if (dtype != ir::DType::kF32 && dtype != ir::DType::kF16 && dtype != ir::DType::kBF16) return std::nullopt;
  for (NodeId in : conv.inputs)
    if (model.node(in).type.dtype != dtype || model.buffer_index(in) < 0) return std::nullopt;
  const ir::Shape& xs = model.node(conv.inputs[0]).type.shape;
  const ir::Shape& ws = model.node(conv.inputs[1]).type.shape;
  const ir::Shape& ys = conv.type.shape;
  if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4) return std::nullopt;
  if (!ir::is_static_from(xs, 1) || !ir::is_static(ws) || !ir::is_static_from(ys, 1)) return std::nullopt;
  const auto& attrs = std::get<ir::Conv2dAttrs>(conv.attrs);
  if (attrs.pads[0] != attrs.pads[2] || attrs.pads[1] != attrs.pads[3]) return std::nullopt;
  const ir::ImageAxes ax = ir::image_axes(attrs.channels_last);

  artifact::ConvCall call;
  call.x_arg = uint32_t(model.buffer_index(conv.inputs[0]));
  call.w_arg = uint32_t(model.buffer_index(conv.inputs[1]));
  call.dtype = dtype;
  call.batch = ir::SizeExpr::of_shape({xs[0]}, 1);
  call.channels_last = attrs.channels_last;
  call.channels = xs[ax.c].size();
  call.height = xs[ax.h].size();
  call.width = xs[ax.w].size();
  call.out_channels = ws[ax.n].size();
  call.kernel_h = ws[ax.h].size();
  call.kernel_w = ws[ax.w].size();
  call.groups = attrs.groups;
  call.pad_h = attrs.pads[0];
  call.pad_w = attrs.pads[1];
  call.stride_h = attrs.strides[0];
  call.stride_w = attrs.strides[1];
  call.dilation_h = attrs.dilations[0];
  call.dilation_w = attrs.dilations[1];
  call.allow_tf32 = allow_tf32 && dtype == ir::DType::kF32;
  if (call.groups < 1 || call.channels % call.groups != 0 || ws[ax.c].size() * call.groups != call.channels ||
      ys[ax.c].size() != call.out_channels || ys[ax.h].size() != call.out_height() ||
      ys[ax.w].size() != call.out_width())
    return std::nullopt;
  if (conv.inputs.size() == 3) {
    const ir::Shape& bs = model.node(conv.inputs[2]).type.shape;
    if (bs.size() != 1 || !bs[0].is_static() || bs[0].size() != call.out_channels) return std::nullopt;
    call.bias_arg = model.buffer_index(conv.inputs[2]);
  }

  // The epilogue chain: adds of a bias or a residual, then [relu]; it stops at the first node
  // the library cannot take, and the rest is the in-place epilogue's (library_epilogue.h).
  NodeId prev = model.anchor;
  size_t i = 0;
  for (; i < model.epilogue.size(); ++i) {
    const Node& node = model.node(model.epilogue[i]);
    if (call.activation != artifact::ConvCall::Activation::kNone) break;  // the activation ends the chain
    if (node.type.dtype != dtype || !(node.type.shape == ys)) break;
    if (node.op == OpKind::kRelu && node.inputs.size() == 1 && node.inputs[0] == prev) {
      call.activation = artifact::ConvCall::Activation::kRelu;
    } else if (node.op == OpKind::kClamp && fuse_clamp && node.inputs.size() == 1 && node.inputs[0] == prev) {
      const auto& bounds = std::get<ir::ClampAttrs>(node.attrs);
      call.activation = artifact::ConvCall::Activation::kClamp;
      call.clamp_min = bounds.min ? float(*bounds.min) : -std::numeric_limits<float>::infinity();
      call.clamp_max = bounds.max ? float(*bounds.max) : std::numeric_limits<float>::infinity();
    } else if (node.op == OpKind::kAdd && node.inputs.size() == 2) {
      const NodeId other = node.inputs[0] == prev ? node.inputs[1] : node.inputs[1] == prev ? node.inputs[0] : ir::kNoNode;
      if (other == ir::kNoNode || other == prev) break;
      const Node& operand = model.node(other);
      const int index = model.buffer_index(other);
      if (operand.type.dtype != dtype || index < 0) break;
      if (operand.type.shape == ys && call.residual_arg < 0) {
        call.residual_arg = index;
      } else if (is_channel_vector(operand.type.shape, call.out_channels, ax) && call.bias_arg < 0) {
        call.bias_arg = index;
      } else {
        break;
      }
    } else {
      break;
    }
    prev = model.epilogue[i];
  }
  return ConvPrefix{call, prev, std::vector<NodeId>(model.epilogue.begin() + long(i), model.epilogue.end())};
}

}  // namespace

std::unique_ptr<LibraryEpilogueKernel> conv_epilogue_kernel(const KernelModel& model, bool fuse_clamp) {
  std::optional<ConvPrefix> prefix = conv_prefix(model, false, fuse_clamp);
  return prefix ? library_epilogue_kernel(model, prefix->last, prefix->rest) : nullptr;
}

std::optional<artifact::ConvCall> match_conv_call(const KernelModel& model, bool allow_tf32, bool fuse_clamp) {
  std::optional<ConvPrefix> prefix = conv_prefix(model, allow_tf32, fuse_clamp);
  if (!prefix) return std::nullopt;
  artifact::ConvCall call = prefix->call;
  const std::optional<uint32_t> out = library_output(model, prefix->last, prefix->rest, call.in_place_epilogue);
  if (!out) return std::nullopt;
  call.out_arg = *out;
  if (!artifact::check_conv_call(call, model.args).is_ok()) return std::nullopt;
  return call;
}

}  // namespace kiln::codegen
