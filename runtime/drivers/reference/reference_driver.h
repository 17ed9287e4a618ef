// The reference driver: one device, "reference", that runs an artifact's graph on the host
// with the reference interpreter (ir/interpreter.h). It ignores the compiled kernels and the
// memory plan, so it runs every artifact, and it is the oracle the GPU drivers are checked
// against. Buffers are plain host memory.
//
// Profiling: with a Profile requested, the graph is evaluated node by node and each node's host
// wall time is attributed to the kernel (fusion group) containing it, so per-kernel times show
// where the interpreter spends its time (not what a GPU would spend).
#pragma once

#include <memory>

#include "runtime/hal/driver.h"

namespace kiln::runtime::reference {

inline constexpr const char* kReferenceDeviceId = "reference";

std::unique_ptr<hal::Driver> create_reference_driver();

}  // namespace kiln::runtime::reference
