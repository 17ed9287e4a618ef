// Factory for the OpenCL C target (see codegen/target.h). Always built: it only renders text.
#pragma once

#include <memory>

#include "codegen/target.h"

namespace kiln::codegen {
std::unique_ptr<Target> make_opencl_target();
}  // namespace kiln::codegen
