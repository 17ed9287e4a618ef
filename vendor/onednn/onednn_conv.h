// A convolution (artifact::ConvCall) as a oneDNN primitive descriptor, made the same way for the
// cpu target, which packs the weights at compile time in the layout the primitive asks for
// (artifact::ConvCall::packed_layout), and for the cpu driver, which runs the primitive and uses
// those packed weights in place when its primitive asks for the same layout.
//
// Thread-safety: pure functions of their arguments (oneDNN's calls are thread-safe).
#pragma once

#include <cstdint>
#include <optional>

#include "artifact/artifact.h"
#include "vendor/onednn/onednn_api.h"

namespace kiln::onednn {

struct ConvolutionDescription {
  explicit ConvolutionDescription(const OneDnnApi& api) : primitive_desc(api.dnnl_primitive_desc_destroy) {}
  // x, out and bias as the artifact lays them out; the artifact's weights (plain_weights, NCHW
  // calls [O, C/g, KH, KW], NHWC ones [O, KH, KW, C/g]; grouped, [g, O/g, ...]) and the layout the
  // primitive reads them in (weights).
  dnnl_memory_desc_t src{}, dst{}, bias{}, plain_weights{}, weights{};
  Owned<dnnl_primitive_desc_t> primitive_desc;
};

// The primitive descriptor for `call` at `batch` (f32: onednn_runs), with the residual summed into
// the output and the activation as post-ops.
Result<ConvolutionDescription> describe_convolution(const OneDnnApi& api, const artifact::ConvCall& call, int64_t batch);

// The packed layout of `weights` over the source layout `plain`, or nullopt when `weights` is
// `plain` itself or a form PackedLayout does not describe (padded offsets, compensation buffers).
std::optional<artifact::PackedLayout> packed_layout_of(const dnnl_memory_desc_t& weights, const dnnl_memory_desc_t& plain);

// Whether `layout` is exactly `weights` (then data packed in it can be read as `weights`).
bool layout_is(const OneDnnApi& api, const artifact::PackedLayout& layout, const dnnl_memory_desc_t& weights);

}  // namespace kiln::onednn
