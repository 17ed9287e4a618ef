// Recognizes a conv2d kernel that a vendor DNN library can run whole (artifact::ConvCall):
// conv2d (its own bias input or not), then optionally + a per-output-channel bias, + a residual
// shaped as the output (in either order), then optionally relu (or a clamp, when the target's
// library fuses one: `fuse_clamp`), with one float dtype throughout, NCHW or NHWC, and symmetric
// padding. The CUDA and cpu targets record the match beside the generated kernel; their drivers
// run it through cuDNN or oneDNN when that library loads and accepts the shape, else the
// generated kernel. An epilogue that goes on past that (relu6 on CUDA, SiLU, ...) is finished by
// an in-place epilogue kernel after the library (library_epilogue.h).
//
// Thread-safety: a pure function.
#pragma once

#include <memory>
#include <optional>

#include "artifact/artifact.h"
#include "codegen/library_epilogue.h"
#include "codegen/kernel_model.h"

namespace kiln::codegen {

// The ConvCall for `model`, or nullopt when the kernel is anything more or other than the
// pattern above (its args indices refer to model.args).
// A target passes the same `fuse_clamp` to both functions.
std::optional<artifact::ConvCall> match_conv_call(const KernelModel& model, bool allow_tf32, bool fuse_clamp);

// The in-place epilogue kernel for `model`, or nullptr when the library covers it whole or the
// kernel is no conv call at all.
std::unique_ptr<LibraryEpilogueKernel> conv_epilogue_kernel(const KernelModel& model, bool fuse_clamp);

}  // namespace kiln::codegen
