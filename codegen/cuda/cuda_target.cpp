// The CUDA target. render gives each kernel's function as CUDA C (Dialect::kCuda); compile splits
// the graph's distinct kernels, in order, into NVRTC programs of about kProgramSourceBytes of
// kernel source each (the helpers atop each program are compiled once per program, the driver
// loads one module per program). Each program is
//   - compiled by NVRTC to PTX for compute_80 (always: newer GPUs JIT it), the "ptx"
//     ModuleBinary (text, no NUL);
//   - assembled from that PTX by nvJitLink into a cubin per --gpu-arch (default sm_80, sm_90),
//     the "cubin:sm_XX" ModuleBinary. NVRTC's front end and optimizer run once per program, not
//     once per architecture: that was most of kilnc's time on convolution networks.
// Every program's PTX, then every (program, architecture) cubin, is one unit on the
// CompileContext's threads, read from the persistent cache when it was built before. The split
// depends only on the kernels, never on -j, so the artifact does not either. Each KernelBinary
// has format "module", an empty blob, module_id = its program, entry_point = its extern "C"
// function, the model's args, the CUDA templates' dispatch, `gemm` when a vendor GEMM library
// could run it (gemm_call.h) and `conv` when a vendor DNN library could (conv_call.h).
// -S writes <base>.cu (every kernel in one program) and <base>.ptx. The PTX is the one listing -S
// shows that needs a compiler: with -S (TargetOptions::sources_only) compile runs NVRTC once for
// it, builds no cubin and uses no cache.
//
// An NVRTC or nvJitLink failure on generated code is an internal error whose message holds the
// log (and, for NVRTC, the numbered source).
#include "codegen/cuda/cuda_target.h"

#include <mutex>
#include <sstream>

#include "artifact/targets.h"
#include "codegen/c_family.h"
#include "codegen/cuda/cuda_toolchain.h"
#include "codegen/conv_call.h"
#include "codegen/gemm_call.h"
#include "codegen/kernel_model.h"
#include "support/diagnostics.h"

namespace kiln::codegen {
namespace {

const std::string kPtxArch = "compute_" + std::to_string(kCudaMinimumArch);
const std::vector<std::string> kDefaultCubinArchs = {"sm_80", "sm_90"};
// Kernel source per NVRTC program. Smaller programs spread over more threads but repeat the
// per-program cost (the prelude, NVRTC's start-up); see docs/performance.md for the measurement
// that chose it.
constexpr size_t kProgramSourceBytes = 16 * 1024;
// NVRTC's options besides the architecture. -default-device: the shared helpers carry no
// __device__. No fast math: the numerics are the OpenCL dialect's (FMA contraction stays on, as
// in every CUDA compiler's default).
constexpr const char* kNvrtcOptions[] = {"-default-device", "--std=c++17"};

// Compiles `source` to PTX for kPtxArch (text, without its terminator). Owns its program.
Result<std::vector<uint8_t>> compile_ptx(const NvrtcApi& t, const std::string& source) {
  nvrtcProgram program = nullptr;
  nvrtcResult r = t.nvrtcCreateProgram(&program, source.c_str(), "kiln_kernels.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return internal_error(std::string("NVRTC: cannot create a program: ") + t.nvrtcGetErrorString(r));
  struct Destroy {
    const NvrtcApi& t;
    nvrtcProgram* p;
    ~Destroy() { t.nvrtcDestroyProgram(p); }
  } destroy{t, &program};
  const std::string arch_option = std::string("--gpu-architecture=") + kPtxArch;
  const char* options[] = {arch_option.c_str(), kNvrtcOptions[0], kNvrtcOptions[1]};
  r = t.nvrtcCompileProgram(program, 3, options);
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (t.nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      if (t.nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && log.back() == '\0') log.pop_back();
    }
    return internal_error("NVRTC failed to compile the generated CUDA program (" + std::string(t.nvrtcGetErrorString(r)) +
                          "):\n" + log + "\n--- source ---\n" + numbered_lines(source));
  }
  std::vector<uint8_t> out;
  size_t size = 0;
  if ((r = t.nvrtcGetPTXSize(program, &size)) == NVRTC_SUCCESS) {
    out.resize(size);
    r = t.nvrtcGetPTX(program, reinterpret_cast<char*>(out.data()));
  }
  if (r != NVRTC_SUCCESS) return internal_error(std::string("NVRTC: cannot read the PTX: ") + t.nvrtcGetErrorString(r));
  while (!out.empty() && out.back() == 0) out.pop_back();
  if (out.empty()) return internal_error("NVRTC produced no PTX");
  return out;
}

// Assembles `ptx` into a cubin for `arch` ("sm_90") with nvJitLink. Owns its handle.
Result<std::vector<uint8_t>> assemble_cubin(const NvJitLinkApi& t, const std::vector<uint8_t>& ptx,
                                            const std::string& arch) {
  const std::string arch_option = "-arch=" + arch;
  const char* options[] = {arch_option.c_str()};
  nvJitLinkHandle handle = nullptr;
  nvJitLinkResult r = t.nvJitLinkCreate(&handle, 1, options);
  if (r != NVJITLINK_SUCCESS)
    return internal_error("nvJitLink: cannot create a linker for " + arch + " (error " + std::to_string(int(r)) + ")");
  struct Destroy {
    const NvJitLinkApi& t;
    nvJitLinkHandle* h;
    ~Destroy() { t.nvJitLinkDestroy(h); }
  } destroy{t, &handle};
  // nvJitLink reads PTX as NUL-terminated text; the module's PTX is stored without the NUL.
  const std::string text(ptx.begin(), ptx.end());
  r = t.nvJitLinkAddData(handle, NVJITLINK_INPUT_PTX, text.c_str(), text.size() + 1, "kiln_kernels.ptx");
  if (r == NVJITLINK_SUCCESS) r = t.nvJitLinkComplete(handle);
  if (r != NVJITLINK_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (t.nvJitLinkGetErrorLogSize(handle, &log_size) == NVJITLINK_SUCCESS && log_size > 1) {
      log.resize(log_size);
      if (t.nvJitLinkGetErrorLog(handle, log.data()) != NVJITLINK_SUCCESS) log.clear();
      while (!log.empty() && log.back() == '\0') log.pop_back();
    }
    return internal_error("nvJitLink failed to assemble the generated PTX for " + arch + " (error " +
                          std::to_string(int(r)) + "):\n" + log);
  }
  std::vector<uint8_t> out;
  size_t size = 0;
  if ((r = t.nvJitLinkGetLinkedCubinSize(handle, &size)) == NVJITLINK_SUCCESS) {
    out.resize(size);
    r = t.nvJitLinkGetLinkedCubin(handle, out.data());
  }
  if (r != NVJITLINK_SUCCESS || out.empty()) return internal_error("nvJitLink produced no " + arch + " cubin");
  return out;
}

// An NVRTC program: the prelude, then the given kernels' functions in order.
std::string cuda_program(std::string_view title, const std::vector<KernelVariants>& kernels, size_t begin,
                         size_t end) {
  std::string program = "// Kiln CUDA program: " + std::string(title) + " (" + std::to_string(end - begin) +
                        " kernels)\n" + cuda_program_prelude();
  for (size_t k = begin; k < end; ++k) program += "\n" + kernels[k].variants.front().text;
  return program;
}

// [begin, end) ranges of kernels, each one NVRTC program: consecutive kernels until the program
// holds kProgramSourceBytes of kernel source.
std::vector<std::pair<size_t, size_t>> split_programs(const std::vector<KernelVariants>& kernels) {
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t begin = 0, bytes = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    bytes += kernels[k].variants.front().text.size();
    if (bytes >= kProgramSourceBytes || k + 1 == kernels.size()) {
      ranges.emplace_back(begin, k + 1);
      begin = k + 1;
      bytes = 0;
    }
  }
  return ranges;
}

// One toolkit library for one phase of a compile: loaded by the first unit that misses the
// cache (a warm compile never loads it), unloaded when the phase ends. Thread-safe.
template <class Api>
class PhaseLibrary {
 public:
  using Loader = Result<std::shared_ptr<const Api>> (*)(const std::string&);
  PhaseLibrary(Loader loader, std::string path) : loader_(loader), path_(std::move(path)) {}

  Result<const Api*> get() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!api_ && status_.is_ok()) {
      Result<std::shared_ptr<const Api>> loaded = loader_(path_);
      if (loaded.is_ok()) api_ = std::move(loaded).value();
      else status_ = loaded.status();
    }
    if (!status_.is_ok()) return status_;
    return api_.get();
  }

 private:
  const Loader loader_;
  const std::string path_;
  std::mutex mutex_;
  std::shared_ptr<const Api> api_;
  Status status_;
};

class CudaTarget final : public Target {
 public:
  explicit CudaTarget(CudaToolchainFiles toolchain) : toolchain_(std::move(toolchain)) {}
  std::string_view name() const override { return artifact::kCudaTarget; }
  std::string_view source_suffix() const override { return ".cu"; }
  std::string_view listing_suffix() const override { return ".ptx"; }

  Result<std::vector<KernelSource>> render(const KernelModel& model, const TargetOptions&) const override {
    KILN_ASSIGN_OR_RETURN(RenderedKernel rendered, render_c_family(model, Dialect::kCuda));
    // A kernel that cuBLASLt or cuDNN runs only in part: its in-place epilogue lives beside it.
    std::unique_ptr<LibraryEpilogueKernel> epilogue = gemm_epilogue_kernel(model);
    if (!epilogue) epilogue = conv_epilogue_kernel(model, /*fuse_clamp=*/false);  // cuDNN's fused call: relu only
    if (epilogue) {
      KILN_ASSIGN_OR_RETURN(RenderedKernel rest, render_c_family(epilogue->model, Dialect::kCuda));
      rendered.source += "\n" + rest.source;
    }
    std::vector<KernelSource> out;
    out.push_back({"", std::move(rendered.source), std::move(rendered.required_features)});
    return out;
  }

  Result<DeviceCode> compile(const ir::Graph& graph, const std::vector<KernelVariants>& kernels,
                             const TargetOptions& options, CompileContext& context) const override {
    DeviceCode out;
    out.kernels.resize(kernels.size(), std::vector<CompiledVariant>(1));  // the code is the modules'
    if (options.sources_only) {  // -S: the PTX listing of one program
      KILN_ASSIGN_OR_RETURN(std::shared_ptr<const NvrtcApi> nvrtc, load_nvrtc(toolchain_.nvrtc));
      KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> ptx,
                            compile_ptx(*nvrtc, cuda_program("graph " + graph.name, kernels, 0, kernels.size())));
      out.modules.push_back({std::string(artifact::kCudaTarget), "ptx", std::move(ptx), 0});
      return out;
    }
    const std::vector<std::pair<size_t, size_t>> ranges = split_programs(kernels);
    std::vector<std::string> programs;
    for (size_t p = 0; p < ranges.size(); ++p) {
      programs.push_back(cuda_program("program " + std::to_string(p) + " of " + std::to_string(ranges.size()),
                                      kernels, ranges[p].first, ranges[p].second));
      for (size_t k = ranges[p].first; k < ranges[p].second; ++k) out.kernels[k][0].module_id = uint32_t(p);
    }
    const std::vector<std::string>& archs = options.gpu_archs.empty() ? kDefaultCubinArchs : options.gpu_archs;

    // PTX per program, then a cubin per (program, architecture) from it.
    // PTX per program, then a cubin per (program, architecture) from it; each library is loaded
    // only for its phase, and only when a unit misses the cache.
    std::vector<std::vector<uint8_t>> ptx(programs.size());
    {
      PhaseLibrary<NvrtcApi> nvrtc(&load_nvrtc, toolchain_.nvrtc);
      KILN_RETURN_IF_ERROR(context.parallel_for("cuda NVRTC", programs.size(), [&](size_t p) -> Status {
        CacheKey key = unit_key(nvrtc_identity_);
        key.add("arch", kPtxArch).add("source", programs[p]);
        KILN_ASSIGN_OR_RETURN(ptx[p], context.cached(key, [&]() -> Result<std::vector<uint8_t>> {
          KILN_ASSIGN_OR_RETURN(const NvrtcApi* api, nvrtc.get());
          return compile_ptx(*api, programs[p]);
        }));
        return Status::ok();
      }));
    }
    std::vector<std::vector<uint8_t>> cubins(programs.size() * archs.size());  // program-major
    {
      PhaseLibrary<NvJitLinkApi> nvjitlink(&load_nvjitlink, toolchain_.nvjitlink);
      KILN_RETURN_IF_ERROR(context.parallel_for("cuda cubins", cubins.size(), [&](size_t unit) -> Status {
        const std::vector<uint8_t>& program_ptx = ptx[unit / archs.size()];
        const std::string& arch = archs[unit % archs.size()];
        CacheKey key = unit_key(nvjitlink_identity_);
        key.add("arch", arch).add("ptx", std::string_view(reinterpret_cast<const char*>(program_ptx.data()), program_ptx.size()));
        KILN_ASSIGN_OR_RETURN(cubins[unit], context.cached(key, [&]() -> Result<std::vector<uint8_t>> {
          KILN_ASSIGN_OR_RETURN(const NvJitLinkApi* api, nvjitlink.get());
          return assemble_cubin(*api, program_ptx, arch);
        }));
        return Status::ok();
      }));
    }
    for (size_t p = 0; p < programs.size(); ++p) {
      out.modules.push_back({std::string(artifact::kCudaTarget), "ptx", std::move(ptx[p]), uint32_t(p)});
      for (size_t a = 0; a < archs.size(); ++a)
        out.modules.push_back({std::string(artifact::kCudaTarget), "cubin:" + archs[a],
                               std::move(cubins[p * archs.size() + a]), uint32_t(p)});
    }
    return out;
  }

  void package(const KernelModel& model, CompiledVariant code, const TargetOptions& options,
               artifact::KernelBinary& record) const override {
    record.format = "module";
    record.module_id = code.module_id;
    record.entry_point = model.entry_point;
    record.dispatch = cuda_dispatch(model);
    record.gemm = match_gemm_call(model, options.allow_tf32);
    record.conv = match_conv_call(model, options.allow_tf32, /*fuse_clamp=*/false);
  }

  // -S: one program for the graph, <base>.cu, and its PTX, <base>.ptx.
  std::vector<SourceFile> source_files(const ir::Graph& graph, const std::vector<KernelVariants>& kernels,
                                       const DeviceCode& code) const override {
    const artifact::Blob& ptx = code.modules.front().blob;
    return {{std::string(source_suffix()), "", cuda_program("graph " + graph.name, kernels, 0, kernels.size())},
            {std::string(listing_suffix()), "", std::string(ptx.begin(), ptx.end())}};
  }

 private:
  const CudaToolchainFiles toolchain_;
  // The compilers' identities in cache keys: their library files, and NVRTC's options.
  const std::string nvrtc_identity_ =
      toolchain_.nvrtc_identity + "; options " + kNvrtcOptions[0] + " " + kNvrtcOptions[1];
  const std::string nvjitlink_identity_ = toolchain_.nvjitlink_identity;
};

}  // namespace

Result<std::unique_ptr<Target>> make_cuda_target() {
  KILN_ASSIGN_OR_RETURN(CudaToolchainFiles toolchain, locate_cuda_toolchain());
  return std::unique_ptr<Target>(std::make_unique<CudaTarget>(std::move(toolchain)));
}

bool cuda_target_present() { return locate_cuda_toolchain().is_ok(); }

}  // namespace kiln::codegen
