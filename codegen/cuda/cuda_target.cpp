// The CUDA target. render gives each kernel's function as CUDA C (Dialect::kCuda); compile puts
// all kernels of a graph into one NVRTC program (one translation unit: the helpers are compiled
// once, the driver loads one module), compiled
//   - to PTX for compute_80 (always: newer GPUs JIT it), the "ptx" ModuleBinary (text, no NUL);
//   - to a cubin per --gpu-arch (default sm_80, sm_90), the "cubin:sm_XX" ModuleBinary.
// The compilations run concurrently (NVRTC programs are independent). Each KernelBinary has
// format "module", an empty blob, entry_point = its extern "C" function, the model's args, the
// CUDA templates' dispatch, and `gemm` when a vendor GEMM library could run it (gemm_call.h).
// -S writes <base>.cu (the program) and <base>.ptx. The PTX is the one listing -S shows that
// needs a compiler: with -S (TargetOptions::sources_only) compile still runs NVRTC for it, once,
// but builds no cubin.
//
// An NVRTC failure on generated code is an internal error whose message holds the log and the
// numbered source.
#include "codegen/cuda/cuda_target.h"

#include <nvrtc.h>

#include <future>
#include <sstream>

#include "artifact/targets.h"
#include "codegen/c_family.h"
#include "codegen/cuda/gemm_call.h"
#include "codegen/kernel_model.h"

namespace kiln::codegen {
namespace {

constexpr const char* kPtxArch = "compute_80";
const std::vector<std::string> kDefaultCubinArchs = {"sm_80", "sm_90"};

std::string numbered(const std::string& source) {
  std::ostringstream out;
  std::istringstream in(source);
  std::string text;
  for (int n = 1; std::getline(in, text); ++n) out << n << "\t" << text << "\n";
  return out.str();
}

// Compiles `source` for `arch` ("compute_80" -> PTX text, "sm_90" -> cubin). Owns its program.
Result<std::vector<uint8_t>> nvrtc_compile(const std::string& source, const std::string& arch) {
  nvrtcProgram program = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&program, source.c_str(), "kiln_kernels.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return internal_error(std::string("NVRTC: cannot create a program: ") + nvrtcGetErrorString(r));
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&program};
  const std::string arch_option = "--gpu-architecture=" + arch;
  // -default-device: the shared helpers carry no __device__. No fast math: the numerics are
  // the OpenCL dialect's (FMA contraction stays on, as in every CUDA compiler's default).
  const char* options[] = {arch_option.c_str(), "-default-device", "--std=c++17"};
  r = nvrtcCompileProgram(program, 3, options);
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && log.back() == '\0') log.pop_back();
    }
    return internal_error("NVRTC failed to compile the generated CUDA program for " + arch + " (" +
                          nvrtcGetErrorString(r) + "):\n" + log + "\n--- source ---\n" + numbered(source));
  }
  std::vector<uint8_t> out;
  size_t size = 0;
  if (arch.rfind("compute_", 0) == 0) {
    if ((r = nvrtcGetPTXSize(program, &size)) == NVRTC_SUCCESS) {
      out.resize(size);
      r = nvrtcGetPTX(program, reinterpret_cast<char*>(out.data()));
    }
    while (!out.empty() && out.back() == 0) out.pop_back();  // the text, without its terminator
  } else {
    if ((r = nvrtcGetCUBINSize(program, &size)) == NVRTC_SUCCESS) {
      out.resize(size);
      r = nvrtcGetCUBIN(program, reinterpret_cast<char*>(out.data()));
    }
  }
  if (r != NVRTC_SUCCESS) return internal_error("NVRTC: cannot read the " + arch + " output: " + nvrtcGetErrorString(r));
  if (out.empty()) return internal_error("NVRTC produced no " + arch + " output");
  return out;
}

// The NVRTC program: the prelude, then every kernel's function in kernel order.
std::string cuda_program(const ir::Graph& graph, const std::vector<KernelVariants>& kernels) {
  std::string program = "// Kiln CUDA program for graph " + graph.name + " (" +
                        std::to_string(graph.kernels().size()) + " kernels)\n" + cuda_program_prelude();
  for (const KernelVariants& kernel : kernels) program += "\n" + kernel.variants.front().text;
  return program;
}

class CudaTarget final : public Target {
 public:
  std::string_view name() const override { return artifact::kCudaTarget; }
  std::string_view source_suffix() const override { return ".cu"; }
  std::string_view listing_suffix() const override { return ".ptx"; }

  Result<std::vector<KernelSource>> render(const KernelModel& model, const TargetOptions&) const override {
    KILN_ASSIGN_OR_RETURN(RenderedKernel rendered, render_c_family(model, Dialect::kCuda));
    std::vector<KernelSource> out;
    out.push_back({"", std::move(rendered.source), std::move(rendered.required_features)});
    return out;
  }

  Result<DeviceCode> compile(const ir::Graph& graph, const std::vector<KernelVariants>& kernels,
                             const TargetOptions& options) const override {
    const std::string program = cuda_program(graph, kernels);
    const bool cubins = !options.sources_only;
    const std::vector<std::string>& archs = options.gpu_archs.empty() ? kDefaultCubinArchs : options.gpu_archs;
    std::vector<std::future<Result<std::vector<uint8_t>>>> jobs;
    if (cubins) {
      for (const std::string& arch : archs)
        jobs.push_back(std::async(std::launch::async, nvrtc_compile, std::cref(program), arch));
    }
    Result<std::vector<uint8_t>> ptx = nvrtc_compile(program, kPtxArch);
    std::vector<Result<std::vector<uint8_t>>> compiled;
    for (auto& job : jobs) compiled.push_back(job.get());  // join every job before returning
    if (!ptx.is_ok()) return std::move(ptx).status();
    DeviceCode out;
    out.kernels.resize(kernels.size(), std::vector<CompiledVariant>(1));  // the code is the modules'
    out.modules.push_back({std::string(artifact::kCudaTarget), "ptx", std::move(ptx).value()});
    for (size_t i = 0; i < compiled.size(); ++i) {
      if (!compiled[i].is_ok()) return std::move(compiled[i]).status();
      out.modules.push_back({std::string(artifact::kCudaTarget), "cubin:" + archs[i], std::move(compiled[i]).value()});
    }
    return out;
  }

  void package(const KernelModel& model, CompiledVariant, const TargetOptions& options,
               artifact::KernelBinary& record) const override {
    record.format = "module";
    record.entry_point = model.entry_point;
    record.dispatch = cuda_dispatch(model);
    record.gemm = match_gemm_call(model, options.allow_tf32);
  }

  // One program for the graph: <base>.cu and its PTX, <base>.ptx.
  std::vector<SourceFile> source_files(const ir::Graph& graph, const std::vector<KernelVariants>& kernels,
                                       const DeviceCode& code) const override {
    const std::vector<uint8_t>& ptx = code.modules.front().blob;
    return {{std::string(source_suffix()), "", cuda_program(graph, kernels)},
            {std::string(listing_suffix()), "", std::string(ptx.begin(), ptx.end())}};
  }
};

}  // namespace

std::unique_ptr<Target> make_cuda_target() { return std::make_unique<CudaTarget>(); }

}  // namespace kiln::codegen
