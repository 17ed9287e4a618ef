// Recognizes a conv2d kernel that a vendor DNN library can run whole (artifact::ConvCall):
// conv2d (its own bias input or not), then optionally + a per-output-channel bias, + a residual
// shaped as the output (in either order), then optionally relu, with one float dtype
// throughout, NCHW or NHWC, and symmetric padding. The CUDA target records the match beside the
// generated kernel; the CUDA driver runs it through cuDNN when that library loads and accepts the
// shape, else the generated kernel. An epilogue that goes on past that (relu6, SiLU, ...) is
// finished by an in-place epilogue kernel after cuDNN (library_epilogue.h).
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
std::optional<artifact::ConvCall> match_conv_call(const KernelModel& model, bool allow_tf32);

// The in-place epilogue kernel for `model`, or nullptr when cuDNN covers it whole or the kernel is
// no conv call at all.
std::unique_ptr<LibraryEpilogueKernel> conv_epilogue_kernel(const KernelModel& model);

}  // namespace kiln::codegen
