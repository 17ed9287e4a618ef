// SPIR-V compile step: GLSL compute -> validated, optionally optimized SPIR-V with disassembly;
// errors carry the numbered shader source.
#include <doctest/doctest.h>

#ifdef KILN_HAVE_SPIRV_COMPILER

#include "codegen/spirv/spirv_compiler.h"

using namespace kiln;

namespace {

constexpr const char* kScaleShader = R"(#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float y[]; };
layout(push_constant) uniform Sizes { uint n; } sizes;
void main() {
  for (uint i = gl_GlobalInvocationID.x; i < sizes.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
    y[i] = x[i] * 2.0 + 1.0;
}
)";

}  // namespace

TEST_CASE("spirv: a compute shader compiles to valid SPIR-V and disassembles") {
  Result<codegen::spirv::SpirvModule> module =
      codegen::spirv::compile_glsl_compute(kScaleShader, "scale", /*optimize=*/false, /*want_disassembly=*/true);
  REQUIRE_MESSAGE(module.is_ok(), module.status().message());
  REQUIRE(module->words.size() > 5);
  CHECK(module->words[0] == 0x07230203u);  // the SPIR-V magic number
  CHECK(module->words[1] == 0x00010300u);  // SPIR-V 1.3 (Vulkan 1.1)
  CHECK(module->disassembly.find("OpEntryPoint GLCompute") != std::string::npos);
  CHECK(module->disassembly.find("\"main\"") != std::string::npos);
  CHECK(module->disassembly.find("OpExecutionMode") != std::string::npos);
  CHECK(module->disassembly.find("LocalSize 64 1 1") != std::string::npos);

  // Without a disassembly request none is produced.
  Result<codegen::spirv::SpirvModule> bare =
      codegen::spirv::compile_glsl_compute(kScaleShader, "scale", false, false);
  REQUIRE(bare.is_ok());
  CHECK(bare->disassembly.empty());
  CHECK(bare->words == module->words);
}

TEST_CASE("spirv: the optimizer keeps the module valid and changes it") {
  Result<codegen::spirv::SpirvModule> plain = codegen::spirv::compile_glsl_compute(kScaleShader, "scale", false, true);
  Result<codegen::spirv::SpirvModule> optimized = codegen::spirv::compile_glsl_compute(kScaleShader, "scale", true, true);
  REQUIRE(plain.is_ok());
  REQUIRE_MESSAGE(optimized.is_ok(), optimized.status().message());
  CHECK(optimized->words[0] == 0x07230203u);
  CHECK(optimized->words != plain->words);
  // -O drops the debug names and loads/stores of the unoptimized function-local variables.
  CHECK(optimized->words.size() < plain->words.size());
  CHECK(optimized->disassembly.find("OpEntryPoint GLCompute") != std::string::npos);
}

TEST_CASE("spirv: a bad shader is an internal error showing the numbered source") {
  const std::string bad = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {\n  undefined_thing = 1;\n}\n";
  Result<codegen::spirv::SpirvModule> module = codegen::spirv::compile_glsl_compute(bad, "broken_kernel", true, false);
  REQUIRE_FALSE(module.is_ok());
  CHECK(module.status().code() == ErrorCode::kInternal);
  const std::string& message = module.status().message();
  CHECK(message.find("GLSL compilation failed for shader 'broken_kernel'") != std::string::npos);
  CHECK(message.find("undefined_thing") != std::string::npos);  // the compiler's diagnostic
  CHECK(message.find("shader source:\n1\t#version 450\n") != std::string::npos);
  CHECK(message.find("4\t  undefined_thing = 1;\n") != std::string::npos);
}

TEST_CASE("spirv: a non-compute shader stage is rejected") {
  // A fragment-only construct in a compute shader does not compile.
  const std::string fragment = "#version 450\nlayout(location = 0) out vec4 color;\nvoid main() { gl_FragDepth = 1.0; }\n";
  Result<codegen::spirv::SpirvModule> module = codegen::spirv::compile_glsl_compute(fragment, "frag", false, false);
  REQUIRE_FALSE(module.is_ok());
  CHECK(module.status().code() == ErrorCode::kInternal);
  CHECK(module.status().message().find("3\tvoid main()") != std::string::npos);
}

#endif  // KILN_HAVE_SPIRV_COMPILER
