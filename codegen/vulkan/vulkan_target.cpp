// The Vulkan target: each kernel is rendered as a GLSL 450 compute shader (entry point "main"),
// compiled, validated and optimized to SPIR-V (format "spirv", blob = the SPIR-V words as
// little-endian bytes). -S writes <name>.comp and the disassembly <name>.spvasm.
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
      out.sources.push_back({".comp", name, std::move(rendered.source)});
      out.sources.push_back({".spvasm", name, std::move(module.disassembly)});
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Target> make_vulkan_target() { return std::make_unique<VulkanTarget>(); }

}  // namespace kiln::codegen
