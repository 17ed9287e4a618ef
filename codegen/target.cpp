// The parts of codegen::Target every target shares: the default supports / compile / -S files,
// the driver compile_graph() with its loop over the graph's kernels, and the registry of the
// targets compiled into this build. KILN_HAVE_VULKAN_CODEGEN is defined by codegen/CMakeLists.txt
// when the SPIR-V compiler library (shaderc) is built, KILN_HAVE_CUDA when the CUDA toolkit is
// found; the CUDA target is then available where its libraries are (cuda/cuda_toolchain.h).
#include "codegen/target.h"

#include <chrono>
#include <map>

#include "artifact/targets.h"
#include "codegen/opencl/opencl_target.h"
#include "codegen/cuda/cuda_target.h"
#include "support/version.h"
#ifdef KILN_HAVE_VULKAN_CODEGEN
#include "codegen/vulkan/vulkan_target.h"
#endif
#ifdef KILN_HAVE_CPU_CODEGEN
#include "codegen/cpu/cpu_target.h"
#include "codegen/cpu/cpu_toolchain.h"
#endif

namespace kiln::codegen {

Status check_cuda_arch(std::string_view arch) {
  const std::string oldest = "sm_" + std::to_string(kCudaMinimumArch);
  const bool well_formed = arch.size() > 3 && arch.substr(0, 3) == "sm_" &&
                           arch.find_first_not_of("0123456789", 3) == std::string_view::npos &&
                           arch.size() < 8;
  if (!well_formed)
    return invalid_argument("invalid --gpu-arch '" + std::string(arch) + "' (expected sm_XX with XX at least " +
                            std::to_string(kCudaMinimumArch) + ", e.g. " + oldest + ", sm_89, sm_90)");
  if (std::stoi(std::string(arch.substr(3))) < kCudaMinimumArch)
    return invalid_argument("--gpu-arch " + std::string(arch) + " is not supported: Kiln's CUDA code needs " +
                            oldest + " or newer (e.g. " + oldest + ", sm_86, sm_89, sm_90)");
  return Status::ok();
}

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
                                                const TargetOptions&, CompileContext&) const {
  CompiledVariant out;
  out.blob = std::vector<uint8_t>(source.text.begin(), source.text.end());
  return out;
}

Result<DeviceCode> Target::compile(const ir::Graph&, const std::vector<KernelVariants>& kernels,
                                   const TargetOptions& options, CompileContext& context) const {
  DeviceCode out;
  std::vector<std::pair<size_t, size_t>> units;  // (kernel, variant)
  for (size_t k = 0; k < kernels.size(); ++k) {
    out.kernels.emplace_back(kernels[k].variants.size());
    for (size_t v = 0; v < kernels[k].variants.size(); ++v) units.emplace_back(k, v);
  }
  KILN_RETURN_IF_ERROR(context.parallel_for(name(), units.size(), [&](size_t i) -> Status {
    const auto [k, v] = units[i];
    KILN_ASSIGN_OR_RETURN(out.kernels[k][v], compile_variant(kernels[k], kernels[k].variants[v], options, context));
    return Status::ok();
  }));
  return out;
}

CacheKey Target::unit_key(std::string_view compiler) const {
  CacheKey key;
  key.add("kiln", kVersion).add("target", name()).add("compiler", compiler);
  return key;
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

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// `text` with every whole-identifier occurrence of `word` replaced by `replacement`.
std::string replace_identifier(const std::string& text, const std::string& word, std::string_view replacement) {
  if (word.empty()) return text;
  std::string out;
  size_t from = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + word.size())) {
    const bool starts = at == 0 || !is_identifier_char(text[at - 1]);
    const bool ends = at + word.size() == text.size() || !is_identifier_char(text[at + word.size()]);
    if (!starts || !ends) continue;
    out.append(text, from, at - from).append(replacement);
    from = at + word.size();
  }
  return out.append(text, from, std::string::npos);
}

// What makes two rendered kernels the same code: every variant's tag, features and text, with the
// kernel's own name and entry point blanked out (they appear in the header comment and the
// function's name; also as the stem of a library epilogue function's, artifact::kLibraryEpilogueSuffix).
// Two kernels with equal keys compile to the same device code up to names.
std::string dedup_key(const KernelVariants& kernel) {
  std::string key;
  for (const KernelSource& source : kernel.variants) {
    key += source.tag + '\0';
    for (const std::string& f : source.required_features) key += f + ',';
    std::string text = replace_identifier(source.text, kernel.model.entry_point, "\x01");
    text = replace_identifier(text, kernel.model.entry_point + artifact::kLibraryEpilogueSuffix, "\x02");
    text = replace_identifier(text, kernel.model.kernel->name + artifact::kLibraryEpilogueSuffix, "\x02");
    key += replace_identifier(text, kernel.model.kernel->name, "\x01") + '\0';
  }
  return key;
}

}  // namespace

Result<CompiledKernels> compile_graph(const Target& target, const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                      const TargetOptions& options, CompileContext* context) {
  Diagnostics diags;
  KILN_RETURN_IF_ERROR(check_supported(target, graph, diags));
  CompileContext private_context;
  CompileContext& ctx = context ? *context : private_context;
  CompiledKernels out;
  const uint32_t kernel_count = uint32_t(graph.kernels().size());
  out.kernel_count = kernel_count;

  // render, every kernel (pure: in parallel).
  auto start = std::chrono::steady_clock::now();
  std::vector<KernelVariants> rendered(kernel_count);
  KILN_RETURN_IF_ERROR(ctx.parallel_for(std::string(target.name()) + " render", kernel_count, [&](size_t k) -> Status {
    KILN_ASSIGN_OR_RETURN(KernelModel model, build_kernel_model(graph, plan, uint32_t(k)));
    KILN_ASSIGN_OR_RETURN(std::vector<KernelSource> variants, target.render(model, options));
    if (variants.empty())
      return internal_error("the " + std::string(target.name()) + " target rendered no source for kernel '" +
                            graph.kernels()[k].name + "'");
    rendered[k] = {std::move(model), std::move(variants)};
    return Status::ok();
  }));

  // The distinct kernels, in first-appearance order: compiled[u] is the kernel index of the u-th,
  // and same_as[k] the u of kernel k. -S and --emit=kernels show every kernel compiled alone.
  std::vector<uint32_t> compiled, same_as(kernel_count);
  std::map<std::string, uint32_t> first_with_key;
  for (uint32_t k = 0; k < kernel_count; ++k) {
    if (options.sources_only) {
      same_as[k] = k;
      compiled.push_back(k);
      continue;
    }
    auto [found, inserted] = first_with_key.emplace(dedup_key(rendered[k]), uint32_t(compiled.size()));
    if (inserted) compiled.push_back(k);
    same_as[k] = found->second;
  }
  std::vector<KernelVariants> distinct;
  distinct.reserve(compiled.size());
  for (uint32_t k : compiled) distinct.push_back(rendered[k]);
  out.compiled_kernel_count = compiled.size();
  out.render_seconds = seconds_since(start);

  // compile, the distinct kernels.
  start = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(DeviceCode code, target.compile(graph, distinct, options, ctx));
  out.compile_seconds = seconds_since(start);
  bool complete = code.kernels.size() == distinct.size();
  for (size_t u = 0; complete && u < distinct.size(); ++u)
    complete = code.kernels[u].size() == distinct[u].variants.size();
  if (!complete)
    return internal_error("the " + std::string(target.name()) + " target compiled a different number of kernels "
                          "or variants than it rendered");

  if (options.sources_only) out.sources = target.source_files(graph, rendered, code);  // distinct == rendered
  out.modules = std::move(code.modules);
  if (options.sources_only) return out;

  // package, every variant of every kernel. A kernel sharing code is packaged as the kernel it
  // shares (entry point, dispatch, GEMM call: same text, same structure), with its own name,
  // index and arguments.
  for (uint32_t k = 0; k < kernel_count; ++k) {
    const uint32_t u = same_as[k];
    for (size_t v = 0; v < rendered[k].variants.size(); ++v) {
      artifact::KernelBinary record;
      record.target = std::string(target.name());
      record.kernel_name = graph.kernels()[k].name;
      record.kernel_index = k;
      record.required_features = rendered[k].variants[v].required_features;
      record.args = rendered[k].model.args;
      target.package(distinct[u].model, code.kernels[u][v], options, record);
      out.kernels.push_back(std::move(record));
    }
  }
  return out;
}

// ---- The registry ----------------------------------------------------------------------------

bool target_available(std::string_view name) {
#ifdef KILN_HAVE_CUDA
  if (name == artifact::kCudaTarget) return cuda_target_present();
#else
  if (name == artifact::kCudaTarget) return false;
#endif
#ifndef KILN_HAVE_VULKAN_CODEGEN
  if (name == artifact::kVulkanTarget) return false;
#endif
#ifdef KILN_HAVE_CPU_CODEGEN
  if (name == artifact::kCpuTarget) return cpu_toolchain_present();
#else
  if (name == artifact::kCpuTarget) return false;
#endif
  return artifact::is_known_target(name);
}

std::vector<std::string> available_targets() {
  std::vector<std::string> out;
  for (std::string_view name : artifact::kTargetNames)
    if (target_available(name)) out.emplace_back(name);
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
#ifdef KILN_HAVE_CPU_CODEGEN
  if (name == artifact::kCpuTarget) return make_cpu_target();
#endif
  return unsupported("code-generation target '" + std::string(name) + "' is not available in this build");
}

Status check_cpu_name(std::string_view cpu) {
#ifdef KILN_HAVE_CPU_CODEGEN
  Result<CpuSelection> selected = select_cpu(cpu);
  return selected.is_ok() ? Status::ok() : selected.status();
#else
  (void)cpu;
  return Status::ok();
#endif
}

std::string unavailable_targets_note() {
  std::string note;
#ifdef KILN_HAVE_CUDA
  if (!cuda_target_present())
    note += std::string(artifact::kCudaTarget) +
            " (NVRTC or nvJitLink not found on this machine; KILN_NVRTC_LIBRARY and KILN_NVJITLINK_LIBRARY name them)";
#else
  note += std::string(artifact::kCudaTarget) + " (CUDA toolkit not found at build time: no NVRTC or nvJitLink)";
#endif
#ifndef KILN_HAVE_VULKAN_CODEGEN
  note += std::string(note.empty() ? "" : ", ") + std::string(artifact::kVulkanTarget) +
          " (shaderc or SPIRV-Tools not found)";
#endif
#ifdef KILN_HAVE_CPU_CODEGEN
  if (!cpu_toolchain_present()) {  // then loading the module failed, and its error says why
    const Result<std::string> loaded = cpu_toolchain_identity();
    note += std::string(note.empty() ? "" : ", ") + std::string(artifact::kCpuTarget) + " (" +
            (loaded.is_ok() ? std::string("its clang module did not load") : loaded.status().message()) + ")";
  }
#else
  note += std::string(note.empty() ? "" : ", ") + std::string(artifact::kCpuTarget) +
          " (clang, ld.lld or the LLVM 14 development packages not found at build time)";
#endif
  return note;
}

}  // namespace kiln::codegen
