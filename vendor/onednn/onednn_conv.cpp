#include "vendor/onednn/onednn_conv.h"

namespace kiln::onednn {

Result<ConvolutionDescription> describe_convolution(const OneDnnApi& api, const artifact::ConvCall& call, int64_t batch) {
  ConvolutionDescription out(api);
  const int64_t g = call.groups;
  const dnnl_format_tag_t act_tag = call.channels_last ? dnnl_nhwc : dnnl_nchw;
  dnnl_dims_t src_dims = {batch, call.channels, call.height, call.width};
  dnnl_dims_t dst_dims = {batch, call.out_channels, call.out_height(), call.out_width()};
  dnnl_dims_t bias_dims = {call.out_channels};
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&out.src, 4, src_dims, dnnl_f32, act_tag), "source layout"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&out.dst, 4, dst_dims, dnnl_f32, act_tag), "output layout"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&out.bias, 1, bias_dims, dnnl_f32, dnnl_a), "bias layout"));
  dnnl_memory_desc_t any_weights{};
  if (g == 1) {
    dnnl_dims_t w_dims = {call.out_channels, call.channels, call.kernel_h, call.kernel_w};
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&out.plain_weights, 4, w_dims, dnnl_f32,
                                                                     call.channels_last ? dnnl_ohwi : dnnl_oihw), "weights layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&any_weights, 4, w_dims, dnnl_f32, dnnl_format_tag_any), "weights layout"));
  } else {
    dnnl_dims_t w_dims = {g, call.out_channels / g, call.channels / g, call.kernel_h, call.kernel_w};
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&out.plain_weights, 5, w_dims, dnnl_f32,
                                                                     call.channels_last ? dnnl_gohwi : dnnl_goihw), "weights layout"));
    KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_memory_desc_init_by_tag(&any_weights, 5, w_dims, dnnl_f32, dnnl_format_tag_any), "weights layout"));
  }
  dnnl_dims_t strides = {call.stride_h, call.stride_w};
  dnnl_dims_t dilates = {call.dilation_h - 1, call.dilation_w - 1};  // oneDNN counts the gaps
  dnnl_dims_t padding = {call.pad_h, call.pad_w};
  dnnl_convolution_desc_t desc;
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_dilated_convolution_forward_desc_init(
                                      &desc, dnnl_forward_inference, dnnl_convolution_direct, &out.src, &any_weights,
                                      call.bias_arg >= 0 ? &out.bias : nullptr, &out.dst, strides, dilates, padding, padding),
                                  "convolution descriptor"));

  // Post-ops: the residual is summed into the output, which holds it before the primitive runs.
  Owned<dnnl_post_ops_t> post_ops(api.dnnl_post_ops_destroy);
  Owned<dnnl_primitive_attr_t> attr(api.dnnl_primitive_attr_destroy);
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_create(post_ops.out()), "post-ops"));
  if (call.residual_arg >= 0) KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_sum(post_ops.get(), 1.0f), "sum post-op"));
  switch (call.activation) {
    case artifact::ConvCall::Activation::kNone: break;
    case artifact::ConvCall::Activation::kRelu:
      KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_eltwise(post_ops.get(), 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "relu post-op"));
      break;
    case artifact::ConvCall::Activation::kClamp:  // clip(x) = max(alpha, min(beta, x))
      KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_post_ops_append_eltwise(post_ops.get(), 1.0f, dnnl_eltwise_clip, call.clamp_min,
                                                                       call.clamp_max), "clamp post-op"));
      break;
  }
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_create(attr.out()), "attributes"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_attr_set_post_ops(attr.get(), post_ops.get()), "attributes"));
  KILN_RETURN_IF_ERROR(dnnl_check(api.dnnl_primitive_desc_create(out.primitive_desc.out(), &desc, attr.get(), api.engine, nullptr),
                                  "convolution primitive descriptor"));
  out.weights = *api.dnnl_primitive_desc_query_md(out.primitive_desc.get(), dnnl_query_weights_md, 0);
  return out;
}

std::optional<artifact::PackedLayout> packed_layout_of(const dnnl_memory_desc_t& weights, const dnnl_memory_desc_t& plain) {
  const int n = weights.ndims;
  if (weights.format_kind != dnnl_blocked || plain.format_kind != dnnl_blocked || plain.ndims != n ||
      weights.extra.flags != dnnl_memory_extra_flag_none || weights.offset0 != 0 ||
      plain.format_desc.blocking.inner_nblks != 0)
    return std::nullopt;
  const dnnl_blocking_desc_t& blocking = weights.format_desc.blocking;
  bool same_as_plain = blocking.inner_nblks == 0;
  artifact::PackedLayout layout;
  for (int d = 0; d < n; ++d) {
    if (weights.padded_offsets[d] != 0 || weights.dims[d] != plain.dims[d]) return std::nullopt;
    layout.dims.push_back(weights.dims[d]);
    layout.source_strides.push_back(plain.format_desc.blocking.strides[d]);
    layout.padded_dims.push_back(weights.padded_dims[d]);
    layout.outer_strides.push_back(blocking.strides[d]);
    same_as_plain = same_as_plain && weights.padded_dims[d] == weights.dims[d] &&
                    blocking.strides[d] == plain.format_desc.blocking.strides[d];
  }
  if (same_as_plain) return std::nullopt;
  for (int k = 0; k < blocking.inner_nblks; ++k) {
    layout.inner_dims.push_back(int32_t(blocking.inner_idxs[k]));
    layout.inner_sizes.push_back(blocking.inner_blks[k]);
  }
  return layout;
}

bool layout_is(const OneDnnApi& api, const artifact::PackedLayout& layout, const dnnl_memory_desc_t& weights) {
  const size_t n = layout.dims.size();
  if (n == 0 || n > size_t(DNNL_MAX_NDIMS) || layout.inner_dims.size() > size_t(DNNL_MAX_NDIMS)) return false;
  dnnl_memory_desc_t md{};
  md.ndims = int(n);
  md.data_type = weights.data_type;
  md.format_kind = dnnl_blocked;
  for (size_t d = 0; d < n; ++d) {
    md.dims[d] = layout.dims[d];
    md.padded_dims[d] = layout.padded_dims[d];
    md.format_desc.blocking.strides[d] = layout.outer_strides[d];
  }
  md.format_desc.blocking.inner_nblks = int(layout.inner_dims.size());
  for (size_t k = 0; k < layout.inner_dims.size(); ++k) {
    md.format_desc.blocking.inner_blks[k] = layout.inner_sizes[k];
    md.format_desc.blocking.inner_idxs[k] = layout.inner_dims[k];
  }
  return api.dnnl_memory_desc_equal(&md, &weights) != 0;
}

}  // namespace kiln::onednn
