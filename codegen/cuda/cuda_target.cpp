// The CUDA target. All kernels of a graph form one NVRTC program (one translation unit: the
// helpers are compiled once, the driver loads one module), compiled
//   - to PTX for compute_80 (always: newer GPUs JIT it), the "ptx" ModuleBinary (text, no NUL);
//   - to a cubin per --gpu-arch (default sm_80, sm_90), the "cubin:sm_XX" ModuleBinary.
// The compilations run concurrently (NVRTC programs are independent). Each KernelBinary has
// format "module", an empty blob, entry_point = its extern "C" function, the model's args, the
// CUDA templates' dispatch, and `gemm` when a vendor GEMM library could run it (gemm_call.h).
// -S writes <base>.cu (the program) and <base>.ptx; with -S no cubin is built.
//
// An NVRTC failure on generated code is an internal error whose message holds the log and the
// numbered source.
#include "codegen/cuda/cuda_target.h"

#include <nvrtc.h>

#include <future>
#include <sstream>

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

class CudaTarget final : public Target {
 public:
  std::string_view name() const override { return "cuda"; }

  Result<CompiledKernels> compile(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                  const TargetOptions& options) const override {
    CompiledKernels out;
    std::string program = "// Kiln CUDA program for graph " + graph.name + " (" +
                          std::to_string(graph.kernels().size()) + " kernels)\n" + cuda_program_prelude();
    for (uint32_t k = 0; k < graph.kernels().size(); ++k) {
      KILN_ASSIGN_OR_RETURN(KernelModel model, build_kernel_model(graph, plan, k));
      KILN_ASSIGN_OR_RETURN(RenderedKernel rendered, render_c_family(model, Dialect::kCuda));
      program += "\n" + rendered.source;
      artifact::KernelBinary bin;
      bin.target = "cuda";
      bin.kernel_name = graph.kernels()[k].name;
      bin.kernel_index = k;
      bin.format = "module";
      bin.entry_point = model.entry_point;
      bin.required_features = rendered.required_features;
      bin.args = model.args;
      bin.dispatch = cuda_dispatch(model);
      bin.gemm = match_gemm_call(model, options.allow_tf32);
      out.kernels.push_back(std::move(bin));
    }

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
    out.modules.push_back({"cuda", "ptx", *ptx});
    for (size_t i = 0; i < compiled.size(); ++i) {
      if (!compiled[i].is_ok()) return std::move(compiled[i]).status();
      out.modules.push_back({"cuda", "cubin:" + archs[i], std::move(compiled[i]).value()});
    }
    out.sources.push_back({".cu", "", program});
    out.sources.push_back({".ptx", "", std::string(ptx->begin(), ptx->end())});
    return out;
  }
};

}  // namespace

std::unique_ptr<Target> make_cuda_target() { return std::make_unique<CudaTarget>(); }

}  // namespace kiln::codegen
