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

  // GLSL kernels index with 32-bit integers: a tensor of 2^31 elements or more cannot be
  // addressed there (the other targets index with 64 bits).
  Status supports(const ir::Graph& graph, const ir::Node& node) const override {
    KILN_RETURN_IF_ERROR(Target::supports(graph, node));
    auto too_large = [&](const ir::TensorType& type) {
      const std::optional<int64_t> n = ir::static_num_elements(type.shape);
      return n && *n > artifact::kVulkanMaxElements;
    };
    bool large = too_large(node.type);
    for (ir::NodeId in : node.inputs) large = large || too_large(graph.node(in).type);
    if (!large) return Status::ok();
    return Status(ErrorCode::kUnsupported,
                  "the vulkan target cannot run '" + node.name + "' (" + std::string(ir::op_name(node.op)) +
                      "): its tensors reach 2^31 elements, and Vulkan kernels index with 32-bit integers "
                      "(compile for cuda or opencl: --target=cuda,opencl)",
                  node.loc);
  }

  void package(const KernelModel& model, CompiledVariant code, const TargetOptions&,
               artifact::KernelBinary& record) const override {
    record.format = "spirv";
    record.entry_point = "main";
    record.blob = std::move(code.blob);
    record.dispatch = model.dispatch;
  }

 protected:
  // A unit is one variant's shader: its SPIR-V words come from the cache when this GLSL was
  // compiled before with the same compiler and optimization level. -S also wants the
  // disassembly, and compiles without the cache.
  Result<CompiledVariant> compile_variant(const KernelVariants& kernel, const KernelSource& source,
                                          const TargetOptions& options, CompileContext& context) const override {
    const bool optimize = options.opt_level > 0;
    auto compile = [&](bool want_disassembly) {
      return spirv::compile_glsl_compute(source.text, kernel.model.kernel->name, optimize, want_disassembly);
    };
    CompiledVariant out;
    if (options.sources_only) {
      KILN_ASSIGN_OR_RETURN(spirv::SpirvModule module, compile(/*want_disassembly=*/true));
      out.blob = words_to_bytes(module.words);
      out.listing = std::move(module.disassembly);
      return out;
    }
    CacheKey key = unit_key(compiler_identity_);
    key.add("optimize", optimize ? "1" : "0").add("source", source.text);
    KILN_ASSIGN_OR_RETURN(out.blob, context.cached(key, [&]() -> Result<std::vector<uint8_t>> {
      KILN_ASSIGN_OR_RETURN(spirv::SpirvModule module, compile(/*want_disassembly=*/false));
      return words_to_bytes(module.words);
    }));
    return out;
  }

 private:
  const std::string compiler_identity_ = spirv::compiler_identity();

  static std::vector<uint8_t> words_to_bytes(const std::vector<uint32_t>& words) {
    std::vector<uint8_t> bytes(words.size() * sizeof(uint32_t));
    if (!words.empty()) std::memcpy(bytes.data(), words.data(), bytes.size());
    return bytes;
  }
  static bool needs_feature(const RenderedKernel& rendered, const char* feature) {
    for (const std::string& f : rendered.required_features)
      if (f == feature) return true;
    return false;
  }
};

}  // namespace

std::unique_ptr<Target> make_vulkan_target() { return std::make_unique<VulkanTarget>(); }

}  // namespace kiln::codegen
