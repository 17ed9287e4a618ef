#include "compiler/compile.h"

#include <algorithm>

#include "artifact/targets.h"
#include "codegen/compile_cache.h"
#include "codegen/cuda/cuda_target.h"
#include "frontend/parser.h"
#ifdef KILN_HAVE_ONNX
#include "frontend/onnx/onnx_importer.h"
#endif
#include "support/version.h"

namespace kiln::compiler {
namespace {

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string join(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& s : list) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// "cuda, vulkan or opencl": every known target (artifact/targets.h).
std::string known_targets() {
  const auto& names = artifact::kTargetNames;
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return out;
}

#ifndef KILN_HAVE_ONNX
Status no_onnx(const std::string& filename) {
  return unsupported(filename + ": ONNX import is not available in this build (Debian's libonnx-dev was not found)");
}
#endif

}  // namespace

const std::vector<std::string>& build_targets() {
  static const std::vector<std::string> targets = codegen::available_targets();
  return targets;
}

Result<std::vector<std::string>> select_targets(const CompileOptions& options) {
  // Explicit targets are checked one by one, so that --target=cuda does not start the cpu
  // target's toolchain (codegen::target_available).
  std::vector<std::string> targets = options.targets ? *options.targets : build_targets();
  // Architecture names are checked first: they are wrong on any machine, with or without CUDA.
  for (const std::string& arch : options.gpu_archs) KILN_RETURN_IF_ERROR(codegen::check_cuda_arch(arch));
  for (const std::string& t : targets) {
    if (!artifact::is_known_target(t))
      return invalid_argument("unknown target '" + t + "' (expected " + known_targets() + ")");
    if (!codegen::target_available(t))
      return invalid_argument("target '" + t + "' is not available: " + codegen::unavailable_targets_note() +
                              " (targets: " + join(build_targets()) + ")");
  }
  const std::string cuda(artifact::kCudaTarget);
  if (!options.gpu_archs.empty() && !contains(targets, cuda))
    return invalid_argument("--gpu-arch needs the cuda target, which is not selected");
  if (options.allow_tf32 && !contains(targets, cuda))
    return invalid_argument("--allow-tf32 needs the cuda target, which is not selected");
  if (!options.cpu.empty()) {
    if (!contains(targets, std::string(artifact::kCpuTarget)))
      return invalid_argument("--cpu needs the cpu target, which is not selected");
    KILN_RETURN_IF_ERROR(codegen::check_cpu_name(options.cpu));
  }
  return targets;
}

passes::PipelineOptions pipeline_options(const CompileOptions& options, const std::vector<std::string>& targets) {
  using Floats = passes::PipelineOptions::Floats;
  passes::PipelineOptions pipeline;
  pipeline.opt_level = options.opt_level;
  pipeline.fuse = options.fuse;
  // cuDNN and the tensor-core kernels want NHWC and fused attention for 16-bit floats; the other
  // targets' generated kernels are as fast or faster on the plain forms (on cpu, attention stays
  // unfused: its matrix products then run as GEMM calls). oneDNN's fast
  // convolutions on the cpu target (direct, 1x1 and depthwise JIT kernels) take NHWC only: in
  // NCHW it falls back to im2col + GEMM, 2-4x slower. The graph is one for every selected target,
  // so with cuda also selected, cuda's choice stands.
  const bool cuda = contains(targets, artifact::kCudaTarget);
  const bool cpu = contains(targets, artifact::kCpuTarget);
  if (options.channels_last) pipeline.channels_last = *options.channels_last ? Floats::kAll : Floats::kNone;
  else if (cuda) pipeline.channels_last = Floats::k16Bit;
  else if (cpu) pipeline.channels_last = Floats::kAll;
  if (options.fuse_attention) pipeline.fuse_attention = *options.fuse_attention ? Floats::kAll : Floats::kNone;
  else if (cuda) pipeline.fuse_attention = Floats::k16Bit;
  else if (cpu) pipeline.fuse_attention = Floats::kNone;  // oneDNN's GEMMs beat the one-row-per-thread kernel
  return pipeline;
}

codegen::TargetOptions target_options(const CompileOptions& options) {
  codegen::TargetOptions target;
  target.opt_level = options.opt_level;
  target.gpu_archs = options.gpu_archs;
  target.allow_tf32 = options.allow_tf32;
  target.cpu = options.cpu;
  return target;
}

Result<ir::Graph> read_source_file(const std::string& path, Diagnostics& diags) {
  const bool is_onnx = path.size() >= 5 && path.substr(path.size() - 5) == ".onnx";
  if (!is_onnx) return frontend::parse_graph_file(path, diags);
#ifdef KILN_HAVE_ONNX
  return onnx_import::import_onnx_file(path, diags);
#else
  return no_onnx(path);
#endif
}

Result<ir::Graph> read_graph_text(std::string_view text, const std::string& filename,
                                  const std::string& base_dir, Diagnostics& diags) {
  return frontend::parse_graph_text(text, filename, base_dir, diags);
}

Result<ir::Graph> read_onnx_bytes(std::span<const std::byte> bytes, const std::string& filename,
                                  const std::string& base_dir, Diagnostics& diags) {
#ifdef KILN_HAVE_ONNX
  return onnx_import::import_onnx_bytes(bytes, filename, base_dir, diags);
#else
  (void)bytes;
  (void)base_dir;
  (void)diags;
  return no_onnx(filename);
#endif
}

Result<std::vector<codegen::CompiledKernels>> generate_code(const std::vector<std::string>& target_names,
                                                            const ir::Graph& graph,
                                                            const ir::ExecutionPlan& plan,
                                                            const codegen::TargetOptions& target_options,
                                                            codegen::CompileContext& context,
                                                            Diagnostics& diags) {
  std::vector<std::unique_ptr<codegen::Target>> targets;
  for (const std::string& name : target_names) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<codegen::Target> target, codegen::create_target(name));
    (void)codegen::check_supported(*target, graph, diags);  // reported all at once, below
    targets.push_back(std::move(target));
  }
  if (diags.has_errors()) return unsupported("the graph uses what a selected target does not support");
  std::vector<codegen::CompiledKernels> results;
  for (const std::unique_ptr<codegen::Target>& target : targets) {
    KILN_ASSIGN_OR_RETURN(codegen::CompiledKernels compiled,
                          codegen::compile_graph(*target, graph, plan, target_options, &context));
    results.push_back(std::move(compiled));
  }
  return results;
}

artifact::WriteOptions artifact_contents(std::vector<codegen::CompiledKernels>& results) {
  artifact::WriteOptions write_options;
  write_options.producer = std::string("kilnc ") + kVersion;
  for (codegen::CompiledKernels& compiled : results) {
    for (artifact::KernelBinary& k : compiled.kernels) write_options.kernels.push_back(std::move(k));
    for (artifact::ModuleBinary& m : compiled.modules) write_options.modules.push_back(std::move(m));
  }
  return write_options;
}

std::unique_ptr<codegen::CompileCache> open_cache(const CompileOptions& options, std::string* warning) {
  if (!options.use_cache) return nullptr;
  Result<std::unique_ptr<codegen::CompileCache>> cache = codegen::CompileCache::open_default();
  if (!cache.is_ok()) {
    if (warning) *warning = "compiling without the compile cache: " + cache.status().message();
    return nullptr;
  }
  return std::move(cache).value();
}

Result<std::vector<uint8_t>> compile_to_artifact(ir::Graph graph, const CompileOptions& options,
                                                 Diagnostics& diags) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> targets, select_targets(options));
  const passes::PipelineOptions pipeline = pipeline_options(options, targets);
  KILN_ASSIGN_OR_RETURN(ir::ExecutionPlan plan, passes::run_pipeline(graph, pipeline));
  std::unique_ptr<codegen::CompileCache> cache = open_cache(options, nullptr);
  codegen::CompileContext context(options.jobs, cache.get());
  KILN_ASSIGN_OR_RETURN(std::vector<codegen::CompiledKernels> results,
                        generate_code(targets, graph, plan, target_options(options), context, diags));
  if (cache) cache->trim();
  return artifact::write_artifact(graph, plan, artifact_contents(results));
}

}  // namespace kiln::compiler
