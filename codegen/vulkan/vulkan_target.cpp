// The Vulkan target: each kernel is rendered as a GLSL 450 compute shader (entry point "main"),
// compiled, validated and optimized to SPIR-V (format "spirv", blob = the SPIR-V words as
// little-endian bytes). -S writes <name>.comp and the disassembly <name>.spvasm.
//
// Device features: a kernel with f16 / bf16 / i8 / u8 / bool buffers uses 8/16-bit storage
// (and records storage_buffer_16bit, storage_buffer_8bit, shader_float16, shader_int16,
// shader_int8 as needed). For such a kernel the target also emits a fallback variant that
// accesses those buffers as 32-bit words (render_glsl_word_storage), recording at most
// shader_int64; -S writes it as <name>.words.comp / .words.spvasm. Both KernelBinary records
// share the kernel_index; the primary comes first, and the Vulkan driver runs the first one
// whose required features the device has. i64 is not emulated: a kernel using it needs
// shaderInt64 in every variant.
#include "codegen/vulkan/vulkan_target.h"

#include <cstring>

#include "codegen/c_family.h"
#include "codegen/kernel_model.h"
#include "codegen/spirv/spirv_compiler.h"

namespace kiln::codegen {
namespace {

class VulkanTarget final : public Target {
 public:
  std::string_view name() const override { return "vulkan"; }

  Result<CompiledKernels> compile(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                  const TargetOptions& options) const override {
    CompiledKernels out;
    for (uint32_t k = 0; k < graph.kernels().size(); ++k) {
      KILN_ASSIGN_OR_RETURN(KernelModel model, build_kernel_model(graph, plan, k));
      KILN_ASSIGN_OR_RETURN(RenderedKernel rendered, render_c_family(model, Dialect::kGlsl));
      const bool needs_small_storage = needs_feature(rendered, "storage_buffer_16bit") ||
                                       needs_feature(rendered, "storage_buffer_8bit");
      KILN_RETURN_IF_ERROR(add_variant(graph, model, k, std::move(rendered), "", options, out));
      if (needs_small_storage) {
        KILN_ASSIGN_OR_RETURN(RenderedKernel words, render_glsl_word_storage(model));
        KILN_RETURN_IF_ERROR(add_variant(graph, model, k, std::move(words), ".words", options, out));
      }
    }
    return out;
  }

 private:
  static bool needs_feature(const RenderedKernel& rendered, const char* feature) {
    for (const std::string& f : rendered.required_features)
      if (f == feature) return true;
    return false;
  }

  // Compiles one rendered variant of kernel k and appends its KernelBinary and -S files
  // (<name><suffix>.comp / .spvasm).
  static Status add_variant(const ir::Graph& graph, const KernelModel& model, uint32_t k, RenderedKernel rendered,
                            const std::string& suffix, const TargetOptions& options, CompiledKernels& out) {
    const std::string& name = graph.kernels()[k].name;
    KILN_ASSIGN_OR_RETURN(spirv::SpirvModule module,
                          spirv::compile_glsl_compute(rendered.source, name, options.opt_level > 0,
                                                      /*want_disassembly=*/true));
    artifact::KernelBinary bin;
    bin.target = "vulkan";
    bin.kernel_name = name;
    bin.kernel_index = k;
    bin.format = "spirv";
    bin.entry_point = "main";
    bin.blob.resize(module.words.size() * sizeof(uint32_t));
    if (!module.words.empty()) std::memcpy(bin.blob.data(), module.words.data(), bin.blob.size());
    bin.required_features = rendered.required_features;
    bin.args = model.args;
    bin.dispatch = model.dispatch;
    out.kernels.push_back(std::move(bin));
    out.sources.push_back({suffix + ".comp", name, std::move(rendered.source)});
    out.sources.push_back({suffix + ".spvasm", name, std::move(module.disassembly)});
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<Target> make_vulkan_target() { return std::make_unique<VulkanTarget>(); }

}  // namespace kiln::codegen
