// The parts of codegen::Target every target shares: the default supports / compile / -S files,
// the driver compile_graph() with its loop over the graph's kernels, and the registry of the
// targets compiled into this build. KILN_HAVE_VULKAN_CODEGEN is defined by codegen/CMakeLists.txt
// when the SPIR-V compiler library (shaderc) is built, KILN_HAVE_CUDA when NVRTC is found.
#include "codegen/target.h"

#include "artifact/targets.h"
#include "codegen/opencl/opencl_target.h"
#ifdef KILN_HAVE_CUDA
#include "codegen/cuda/cuda_target.h"
#endif
#ifdef KILN_HAVE_VULKAN_CODEGEN
#include "codegen/vulkan/vulkan_target.h"
#endif

namespace kiln::codegen {

// ---- Target defaults ---------------------------------------------------------------------

bool Target::has_dtype(ir::DType) const { return true; }

Status Target::supports(const ir::Graph&, const ir::Node& node) const {
  if (has_dtype(node.type.dtype)) return Status::ok();
  const std::string dtype(ir::dtype_name(node.type.dtype));
  return Status(ErrorCode::kUnsupported,
                "the " + std::string(name()) + " target cannot run '" + node.name + "' (" +
                    std::string(ir::op_name(node.op)) + " of " + dtype + "): it has no " + dtype + " support",
                node.loc);
}

Result<CompiledVariant> Target::compile_variant(const KernelVariants&, const KernelSource& source,
                                                const TargetOptions&) const {
  CompiledVariant out;
  out.blob.assign(source.text.begin(), source.text.end());
  return out;
}

Result<DeviceCode> Target::compile(const ir::Graph&, const std::vector<KernelVariants>& kernels,
                                   const TargetOptions& options) const {
  DeviceCode out;
  for (const KernelVariants& kernel : kernels) {
    std::vector<CompiledVariant>& compiled = out.kernels.emplace_back();
    for (const KernelSource& source : kernel.variants) {
      KILN_ASSIGN_OR_RETURN(CompiledVariant code, compile_variant(kernel, source, options));
      compiled.push_back(std::move(code));
    }
  }
  return out;
}

std::vector<SourceFile> Target::source_files(const ir::Graph&, const std::vector<KernelVariants>& kernels,
                                             const DeviceCode& code) const {
  std::vector<SourceFile> out;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const std::string& name = kernels[k].model.kernel->name;
    for (size_t v = 0; v < kernels[k].variants.size(); ++v) {
      const KernelSource& source = kernels[k].variants[v];
      const std::string tag = source.tag.empty() ? "" : "." + source.tag;
      out.push_back({tag + std::string(source_suffix()), name, source.text});
      if (!listing_suffix().empty())
        out.push_back({tag + std::string(listing_suffix()), name, code.kernels[k][v].listing});
    }
  }
  return out;
}

// ---- The driver ----------------------------------------------------------------------------

Status check_supported(const Target& target, const ir::Graph& graph, Diagnostics& diags) {
  Status first;
  size_t count = 0;
  for (const ir::Node& node : graph.nodes()) {
    if (node.erased) continue;
    Status status = target.supports(graph, node);
    if (status.is_ok()) continue;
    diags.add(status);
    if (count++ == 0) first = std::move(status);
  }
  if (count <= 1) return first;
  return Status(first.code(), first.message() + " (and " + std::to_string(count - 1) + " more unsupported nodes)",
                first.loc());
}

Result<CompiledKernels> compile_graph(const Target& target, const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                      const TargetOptions& options) {
  Diagnostics diags;
  KILN_RETURN_IF_ERROR(check_supported(target, graph, diags));

  // render, kernel by kernel.
  std::vector<KernelVariants> rendered;
  rendered.reserve(graph.kernels().size());
  for (uint32_t k = 0; k < graph.kernels().size(); ++k) {
    KILN_ASSIGN_OR_RETURN(KernelModel model, build_kernel_model(graph, plan, k));
    KILN_ASSIGN_OR_RETURN(std::vector<KernelSource> variants, target.render(model, options));
    if (variants.empty())
      return internal_error("the " + std::string(target.name()) + " target rendered no source for kernel '" +
                            graph.kernels()[k].name + "'");
    rendered.push_back({std::move(model), std::move(variants)});
  }

  // compile, the whole graph at once.
  KILN_ASSIGN_OR_RETURN(DeviceCode code, target.compile(graph, rendered, options));
  bool complete = code.kernels.size() == rendered.size();
  for (size_t k = 0; complete && k < rendered.size(); ++k)
    complete = code.kernels[k].size() == rendered[k].variants.size();
  if (!complete)
    return internal_error("the " + std::string(target.name()) + " target compiled a different number of kernels "
                          "or variants than it rendered");

  CompiledKernels out;
  out.sources = target.source_files(graph, rendered, code);
  out.modules = std::move(code.modules);
  if (options.sources_only) return out;

  // package, every variant.
  for (uint32_t k = 0; k < rendered.size(); ++k) {
    for (size_t v = 0; v < rendered[k].variants.size(); ++v) {
      KernelSource& source = rendered[k].variants[v];
      artifact::KernelBinary record;
      record.target = std::string(target.name());
      record.kernel_name = graph.kernels()[k].name;
      record.kernel_index = k;
      record.required_features = std::move(source.required_features);
      record.args = rendered[k].model.args;
      target.package(rendered[k].model, std::move(code.kernels[k][v]), options, record);
      out.kernels.push_back(std::move(record));
    }
  }
  return out;
}

// ---- The registry ----------------------------------------------------------------------------

std::vector<std::string> available_targets() {
  std::vector<std::string> out;
  for (std::string_view name : artifact::kTargetNames) {
#ifndef KILN_HAVE_CUDA
    if (name == artifact::kCudaTarget) continue;
#endif
#ifndef KILN_HAVE_VULKAN_CODEGEN
    if (name == artifact::kVulkanTarget) continue;
#endif
    out.emplace_back(name);
  }
  return out;
}

Result<std::unique_ptr<Target>> create_target(std::string_view name) {
  if (name == artifact::kOpenClTarget) return make_opencl_target();
#ifdef KILN_HAVE_CUDA
  if (name == artifact::kCudaTarget) return make_cuda_target();
#endif
#ifdef KILN_HAVE_VULKAN_CODEGEN
  if (name == artifact::kVulkanTarget) return make_vulkan_target();
#endif
  return unsupported("code-generation target '" + std::string(name) + "' is not available in this build");
}

std::string unavailable_targets_note() {
  std::string note;
#ifndef KILN_HAVE_CUDA
  note += std::string(artifact::kCudaTarget) + " (CUDA toolkit not found: no NVRTC)";
#endif
#ifndef KILN_HAVE_VULKAN_CODEGEN
  note += std::string(note.empty() ? "" : ", ") + std::string(artifact::kVulkanTarget) +
          " (shaderc or SPIRV-Tools not found)";
#endif
  return note;
}

}  // namespace kiln::codegen
