// The Vulkan target: each kernel is rendered as a GLSL 450 compute shader (entry point "main"),
// compiled, validated and optimized to SPIR-V kernel by kernel (format "spirv", blob = the SPIR-V
// words as little-endian bytes, listing = their disassembly). -S writes <name>.comp and the
// disassembly <name>.spvasm.
//
// Device features: a kernel with f16 / bf16 / i8 / u8 / bool buffers uses 8/16-bit storage
// (and records storage_buffer_16bit, storage_buffer_8bit, shader_float16, shader_int16,
// shader_int8 as needed). For such a kernel render also emits a fallback variant, tagged "words",
// that accesses those buffers as 32-bit words (render_glsl_word_storage), recording at most
// shader_int64; -S writes it as <name>.words.comp / .words.spvasm. Both KernelBinary records
// share the kernel_index; the primary comes first, and the Vulkan driver runs the first one
// whose required features the device has. i64 is not emulated: a kernel using it needs
// shaderInt64 in every variant.
#include "codegen/vulkan/vulkan_target.h"

#include <cstring>

#include "artifact/targets.h"
#include "codegen/c_family.h"
#include "codegen/kernel_model.h"
#include "codegen/spirv/spirv_compiler.h"

namespace kiln::codegen {
namespace {

class VulkanTarget final : public Target {
 public:
  std::string_view name() const override { return artifact::kVulkanTarget; }
  std::string_view source_suffix() const override { return ".comp"; }
  std::string_view listing_suffix() const override { return ".spvasm"; }

  Result<std::vector<KernelSource>> render(const KernelModel& model, const TargetOptions&) const override {
    KILN_ASSIGN_OR_RETURN(RenderedKernel rendered, render_c_family(model, Dialect::kGlsl));
    const bool needs_small_storage = needs_feature(rendered, "storage_buffer_16bit") ||
                                     needs_feature(rendered, "storage_buffer_8bit");
    std::vector<KernelSource> out;
    out.push_back({"", std::move(rendered.source), std::move(rendered.required_features)});
    if (needs_small_storage) {
      KILN_ASSIGN_OR_RETURN(RenderedKernel words, render_glsl_word_storage(model));
      out.push_back({"words", std::move(words.source), std::move(words.required_features)});
    }
    return out;
  }

  void package(const KernelModel& model, CompiledVariant code, const TargetOptions&,
               artifact::KernelBinary& record) const override {
    record.format = "spirv";
    record.entry_point = "main";
    record.blob = std::move(code.blob);
    record.dispatch = model.dispatch;
  }

 protected:
  Result<CompiledVariant> compile_variant(const KernelVariants& kernel, const KernelSource& source,
                                          const TargetOptions& options) const override {
    KILN_ASSIGN_OR_RETURN(spirv::SpirvModule module,
                          spirv::compile_glsl_compute(source.text, kernel.model.kernel->name, options.opt_level > 0,
                                                      /*want_disassembly=*/true));
    CompiledVariant out;
    out.blob.resize(module.words.size() * sizeof(uint32_t));
    if (!module.words.empty()) std::memcpy(out.blob.data(), module.words.data(), out.blob.size());
    out.listing = std::move(module.disassembly);
    return out;
  }

 private:
  static bool needs_feature(const RenderedKernel& rendered, const char* feature) {
    for (const std::string& f : rendered.required_features)
      if (f == feature) return true;
    return false;
  }
};

}  // namespace

std::unique_ptr<Target> make_vulkan_target() { return std::make_unique<VulkanTarget>(); }

}  // namespace kiln::codegen
