// The in-place epilogue after a vendor library call (artifact::LibraryEpilogue): when a fused
// kernel's elementwise epilogue goes on past what cuBLASLt or cuDNN fuses (BERT's exact gelu,
// MobileNet's relu6, EfficientNet's SiLU), the library computes its part into the kernel's
// output and this elementwise kernel finishes the rest there. The CUDA target renders it beside
// the main kernel as the function <entry_point><artifact::kLibraryEpilogueSuffix>.
//
// It applies when the rest reads, besides the library's result, only values in memory, and
// writes one output of the library result's dtype and shape (the library's result goes there
// first). Its model is in place (KernelModel::in_place): it reads and writes the output.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "artifact/artifact.h"
#include "codegen/kernel_model.h"

namespace kiln::codegen {

// `model` points at `kernel` (the rest of the epilogue as an elementwise kernel), so the struct
// stays where it was made (unique_ptr). call.args[i] is the main kernel's arg index that the
// epilogue function's parameter i takes; the first is the library's result, read from the main
// kernel's output.
struct LibraryEpilogueKernel {
  ir::Kernel kernel;
  KernelModel model;
  artifact::LibraryEpilogue call;
};

// The epilogue kernel computing `rest` (the main kernel's epilogue nodes after `last`, the last
// value the library computes), or nullptr when `rest` is empty or cannot run in place.
std::unique_ptr<LibraryEpilogueKernel> library_epilogue_kernel(const KernelModel& model, ir::NodeId last,
                                                               const std::vector<ir::NodeId>& rest);

// The main kernel's arg index where a library call covering up to `last` writes, filling
// `epilogue` when `rest` is not empty; nullopt when the kernel does not fit (more than one
// written buffer, a dtype the library cannot write, a rest that cannot run in place).
std::optional<uint32_t> library_output(const KernelModel& model, ir::NodeId last, const std::vector<ir::NodeId>& rest,
                                       artifact::LibraryEpilogue& epilogue);

}  // namespace kiln::codegen
