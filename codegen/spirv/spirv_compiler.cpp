// GLSL compute -> SPIR-V: shaderc compiles, SPIRV-Tools validates (always), optimizes (on
// request) and disassembles (on request). Every failure carries the shader source with line
// numbers, because the shader is generated and the source is what a developer needs to see.
//
// Thread-safety: every call builds its own shaderc::Compiler and spvtools contexts.
#include "codegen/spirv/spirv_compiler.h"

#include <shaderc/shaderc.hpp>
#include <spirv-tools/libspirv.h>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>

#include <sstream>

#include "support/diagnostics.h"
#include "support/library_identity.h"

namespace kiln::codegen::spirv {
namespace {

constexpr spv_target_env kTargetEnv = SPV_ENV_VULKAN_1_1;

Status failure(const std::string& what, const std::string& name, const std::string& details,
               const std::string& glsl) {
  return internal_error(what + " for shader '" + name + "':\n" + details +
                        (details.empty() || details.back() == '\n' ? "" : "\n") +
                        "shader source:\n" + numbered_lines(glsl));
}

// Collects SPIRV-Tools diagnostics into one string.
class MessageSink {
 public:
  spvtools::MessageConsumer consumer() {
    return [this](spv_message_level_t, const char*, const spv_position_t& position,
                  const char* message) {
      text_ += "  at SPIR-V word " + std::to_string(position.index) + ": " + message + "\n";
    };
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

Status validate(const std::vector<uint32_t>& words, const std::string& stage,
                const std::string& name, const std::string& glsl) {
  spvtools::SpirvTools tools(kTargetEnv);
  MessageSink sink;
  tools.SetMessageConsumer(sink.consumer());
  spvtools::ValidatorOptions options;
  if (!tools.Validate(words.data(), words.size(), options))
    return failure("SPIR-V validation failed " + stage, name, sink.text(), glsl);
  return Status::ok();
}

}  // namespace

std::string compiler_identity() {
  // Bump the recipe's name when the options or passes below change.
  return "shaderc " + loaded_library_identity(reinterpret_cast<const void*>(&shaderc_compiler_initialize)) +
         "; SPIRV-Tools " + spvSoftwareVersionDetailsString() + " " +
         loaded_library_identity(reinterpret_cast<const void*>(&spvSoftwareVersionDetailsString)) +
         "; recipe vulkan1.1/spirv1.3, shaderc -O0, validate, performance passes, validate (v1)";
}

Result<SpirvModule> compile_glsl_compute(const std::string& glsl, const std::string& name,
                                         bool optimize, bool want_disassembly) {
  shaderc::Compiler compiler;
  if (!compiler.IsValid()) return internal_error("shaderc: cannot create a compiler instance");
  shaderc::CompileOptions options;
  options.SetSourceLanguage(shaderc_source_language_glsl);
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
  options.SetTargetSpirv(shaderc_spirv_version_1_3);
  // shaderc's own optimizer stays off: SPIRV-Tools runs below, after validating shaderc's output,
  // so a bad module is caught before any pass touches it.
  options.SetOptimizationLevel(shaderc_optimization_level_zero);
  options.SetWarningsAsErrors();

  shaderc::SpvCompilationResult result = compiler.CompileGlslToSpv(
      glsl, shaderc_glsl_compute_shader, name.c_str(), "main", options);
  if (result.GetCompilationStatus() != shaderc_compilation_status_success)
    return failure("GLSL compilation failed", name, result.GetErrorMessage(), glsl);

  SpirvModule module;
  module.words.assign(result.cbegin(), result.cend());
  if (module.words.empty()) return failure("GLSL compilation produced no code", name, "", glsl);
  KILN_RETURN_IF_ERROR(validate(module.words, "after compilation", name, glsl));

  if (optimize) {
    spvtools::Optimizer optimizer(kTargetEnv);
    MessageSink sink;
    optimizer.SetMessageConsumer(sink.consumer());
    optimizer.RegisterPerformancePasses();
    std::vector<uint32_t> optimized;
    if (!optimizer.Run(module.words.data(), module.words.size(), &optimized))
      return failure("SPIR-V optimization failed", name, sink.text(), glsl);
    module.words = std::move(optimized);
    // The optimizer's output is validated too: every module handed to a driver is checked.
    KILN_RETURN_IF_ERROR(validate(module.words, "after optimization", name, glsl));
  }

  if (want_disassembly) {
    spvtools::SpirvTools tools(kTargetEnv);
    MessageSink sink;
    tools.SetMessageConsumer(sink.consumer());
    if (!tools.Disassemble(module.words, &module.disassembly,
                           SPV_BINARY_TO_TEXT_OPTION_INDENT |
                               SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES))
      return failure("SPIR-V disassembly failed", name, sink.text(), glsl);
  }
  return module;
}

}  // namespace kiln::codegen::spirv
