// Factory for the Vulkan target (see codegen/target.h): GLSL 450 compute shaders compiled to
// SPIR-V through codegen/spirv (shaderc + SPIRV-Tools). Built only when that library is.
#pragma once

#include <memory>

#include "codegen/target.h"

namespace kiln::codegen {
std::unique_ptr<Target> make_vulkan_target();
}  // namespace kiln::codegen
