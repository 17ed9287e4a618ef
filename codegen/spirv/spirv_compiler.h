// GLSL compute shader -> SPIR-V, with shaderc (compile), SPIRV-Tools (validate every module,
// optimize at -O2, disassemble for -S). A validation failure is an internal error whose message
// includes the shader source.
//
// Thread-safety: each call creates its own shaderc/SPIRV-Tools contexts; concurrent calls are safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln::codegen::spirv {

struct SpirvModule {
  std::vector<uint32_t> words;
  std::string disassembly;  // filled when requested
};

// `name` is used in messages; the entry point is "main". Targets Vulkan 1.1 / SPIR-V 1.3.
Result<SpirvModule> compile_glsl_compute(const std::string& glsl, const std::string& name,
                                         bool optimize, bool want_disassembly);

// Everything about this compiler that changes its output, for compile-cache keys: the shaderc and
// SPIRV-Tools builds (library identity, SPIRV-Tools' version), the target environment and the
// optimization recipe.
std::string compiler_identity();

}  // namespace kiln::codegen::spirv
