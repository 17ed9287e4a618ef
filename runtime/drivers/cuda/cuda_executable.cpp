// CudaProgram: loads the artifact's CUDA modules on one device (each from the cubin of the
// device's exact architecture, else from the PTX through the driver's JIT), looks up every kernel's function, sizes
// its grid from the occupancy API, and uploads the constants once, into one allocation.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <system_error>
#include <utility>

#include "runtime/drivers/cuda/cublaslt_api.h"
#include "runtime/drivers/cuda/cudnn_api.h"
#include "runtime/drivers/cuda/cuda_internal.h"

namespace kiln::runtime::cuda {
namespace {

constexpr std::string_view kTarget = artifact::kCudaTarget;
constexpr const char* kKernelFormat = "module";

std::atomic<uint64_t> next_program_serial{1};

// cuModuleLoadDataEx with the JIT's error log captured for the message.
CUresult load_module_image(const CudaApi& api, const void* image, CUmodule* module, std::string& log) {
  std::vector<char> buffer(16384, '\0');
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {buffer.data(), reinterpret_cast<void*>(uintptr_t(buffer.size() - 1))};
  const CUresult r = api.cuModuleLoadDataEx(module, image, 2, options, values);
  log = std::string(buffer.data());
  while (!log.empty() && (log.back() == '\n' || log.back() == '\0')) log.pop_back();
  return r;
}

}  // namespace

CudaProgram::CudaProgram(CudaDevice& device, std::shared_ptr<const artifact::LoadedArtifact> artifact)
    : device_(device), artifact_(std::move(artifact)), serial_(next_program_serial++) {}

CudaProgram::~CudaProgram() {
  if (vendor_libraries_.valid()) vendor_libraries_.wait();  // it may still be making the cuDNN handle
  ScopedContext current(device_.api(), device_.context());
  if (cudnnHandle_t unused = take_cudnn_handle()) (*cudnn_api())->cudnnDestroy(unused);
  constant_block_.reset();
  for (auto& [id, loaded] : modules_)
    if (loaded.module) device_.api().cuModuleUnload(loaded.module);
}

Result<std::shared_ptr<CudaProgram>> CudaProgram::load(CudaDevice& device,
                                                       std::shared_ptr<const artifact::LoadedArtifact> artifact) {
  std::shared_ptr<CudaProgram> program(new CudaProgram(device, std::move(artifact)));
  const artifact::LoadedArtifact& art = *program->artifact_;
  for (const artifact::KernelBinary& binary : art.kernels) {
    if (binary.target != kTarget) continue;
    if (binary.format != kKernelFormat)
      return unsupported("CUDA kernel '" + binary.kernel_name + "' has format '" + binary.format +
                         "'; this runtime loads only '" + kKernelFormat + "' kernels (functions of a shared module)");
    if (binary.kernel_index >= art.graph.kernels().size())
      return corrupt("CUDA kernel '" + binary.kernel_name + "' refers to graph kernel " +
                     std::to_string(binary.kernel_index) + " of " + std::to_string(art.graph.kernels().size()));
    if (binary.entry_point.empty())
      return corrupt("CUDA kernel '" + binary.kernel_name + "' has no entry point");
    // Several binaries of one kernel are variants, preferred first (artifact.h); CUDA devices
    // need no feature-specific variant, so the first one runs.
    LoadedKernel& entry = program->kernels_[binary.kernel_index];
    if (!entry.binary) entry.binary = &binary;
  }
  if (program->kernels_.empty()) {
    std::string targets;
    for (const std::string& t : art.targets()) targets += (targets.empty() ? "" : ", ") + t;
    return unsupported("the artifact has no kernels for target 'cuda' (it has kernels for: " +
                       (targets.empty() ? std::string("none") : targets) + "); compile it with kilnc --target=cuda");
  }
  for (const ir::Launch& launch : art.plan.launches)
    if (!program->kernels_.count(launch.kernel))
      return unsupported("the artifact's CUDA kernels do not include graph kernel " + std::to_string(launch.kernel) +
                         " that its plan launches");
  // The vendor libraries (hundreds of MB) load on another thread while the modules load and the
  // constants upload, when a kernel may run through them; the first run waits for them there.
  bool gemm = false, conv = false;
  for (const auto& [index, kernel] : program->kernels_) {
    gemm = gemm || kernel.binary->gemm.has_value();
    conv = conv || kernel.binary->conv.has_value();
  }
  if (gemm || conv) {
    try {
      CudaProgram* loading = program.get();  // outlives the task: its destructor waits for it
      program->vendor_libraries_ = std::async(std::launch::async, [gemm, conv, loading] {
        if (gemm) (void)cublaslt_api();
        if (conv) loading->make_cudnn_handle();
      });
    } catch (const std::system_error&) {
      // No thread to spare: the first run loads the libraries itself.
    }
  }
  ScopedContext current(device.api(), device.context());
  KILN_RETURN_IF_ERROR(current.status());
  KILN_RETURN_IF_ERROR(program->load_modules());
  KILN_RETURN_IF_ERROR(program->load_functions());
  KILN_RETURN_IF_ERROR(program->upload_constants());
  return program;
}

void CudaProgram::make_cudnn_handle() {
  Result<const CudnnApi*> dnn = cudnn_api();
  if (!dnn.is_ok()) return;  // the stream says why when it plans a convolution
  ScopedContext current(device_.api(), device_.context());
  cudnnHandle_t handle = nullptr;
  if (!current.status().is_ok() || (*dnn)->cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) return;
  std::lock_guard<std::mutex> lock(spare_cudnn_mutex_);
  spare_cudnn_ = handle;
}

cudnnHandle_t CudaProgram::take_cudnn_handle() const {
  std::shared_future<void> libraries = vendor_libraries_;  // a copy per caller, as shared_future wants
  if (libraries.valid()) libraries.wait();
  std::lock_guard<std::mutex> lock(spare_cudnn_mutex_);
  return std::exchange(spare_cudnn_, nullptr);
}

Status CudaProgram::load_modules() {
  // Only the modules that hold a kernel this program runs.
  for (auto& [index, kernel] : kernels_) {
    const uint32_t id = kernel.binary->module_id;
    if (modules_.count(id)) continue;
    KILN_RETURN_IF_ERROR(load_module(id, modules_[id]));
  }
  return Status::ok();
}

Status CudaProgram::load_module(uint32_t id, LoadedModule& loaded) {
  const CudaApi& api = device_.api();
  const artifact::LoadedArtifact& art = *artifact_;
  const std::string wanted_cubin = "cubin:sm_" + std::to_string(device_.record().sm);
  const std::string which = "CUDA module " + std::to_string(id);
  const artifact::ModuleBinary* cubin = nullptr;
  const artifact::ModuleBinary* ptx = nullptr;
  std::string formats;
  for (const artifact::ModuleBinary& m : art.modules) {
    if (m.target != kTarget || m.id != id) continue;
    formats += (formats.empty() ? "" : ", ") + m.format;
    if (m.format == wanted_cubin && !m.blob.empty()) cubin = &m;
    if (m.format == "ptx" && !m.blob.empty()) ptx = &m;
  }
  if (!cubin && !ptx)
    return unsupported("the artifact's " + which + " has neither a " + wanted_cubin + " cubin for " + device_.name() +
                       " nor PTX (it has: " + (formats.empty() ? std::string("no such module") : formats) + ")");
  std::string cubin_failure;
  if (cubin) {
    std::string log;
    const CUresult r = load_module_image(api, cubin->blob.data(), &loaded.module, log);
    if (r == CUDA_SUCCESS) {
      loaded.format = cubin->format;
      return Status::ok();
    }
    loaded.module = nullptr;
    cubin_failure = "the " + cubin->format + " cubin was rejected (" + cu_error_name(r) + (log.empty() ? "" : ": " + log) + ")";
    if (!ptx) return cu_status(r, device_.name() + ": loading the artifact's " + which + " " + cubin->format +
                                      " cubin" + (log.empty() ? "" : " (" + log + ")"));
  }
  // The JIT needs NUL-terminated PTX text; the blob need not end with one.
  std::string text(ptx->blob.begin(), ptx->blob.end());
  std::string log;
  const CUresult r = load_module_image(api, text.c_str(), &loaded.module, log);
  if (r != CUDA_SUCCESS) {
    loaded.module = nullptr;
    std::string hint;
    if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
      hint = "; the PTX is newer than this NVIDIA driver supports: update the driver or compile with "
             "kilnc --gpu-arch=" + wanted_cubin.substr(6);
    return cu_status(r, device_.name() + ": JIT-compiling the artifact's " + which + " PTX" +
                            (log.empty() ? "" : " (" + log + ")") + (cubin_failure.empty() ? "" : " after " + cubin_failure) +
                            hint);
  }
  loaded.format = "ptx";
  return Status::ok();
}

Status CudaProgram::load_function(const artifact::KernelBinary& binary, const std::string& entry, uint32_t block,
                                  CUfunction& function, uint64_t& max_blocks) {
  const CudaApi& api = device_.api();
  const DeviceRecord& record = device_.record();
  const LoadedModule& loaded = modules_.at(binary.module_id);
  CUresult r = api.cuModuleGetFunction(&function, loaded.module, entry.c_str());
  if (r != CUDA_SUCCESS)
    return Status(ErrorCode::kCorrupt, "CUDA kernel '" + binary.kernel_name + "': module " +
                                           std::to_string(binary.module_id) + " (" + loaded.format +
                                           ") has no function '" + entry + "': " + cu_error_name(r));
  int max_threads = 0;
  r = api.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function);
  if (r != CUDA_SUCCESS) max_threads = record.max_threads_per_block;
  if (block == 0 || int64_t(block) > int64_t(max_threads))
    return unsupported("CUDA kernel '" + binary.kernel_name + "' needs blocks of " + std::to_string(block) +
                       " threads, but " + device_.name() + " allows at most " + std::to_string(max_threads) +
                       " for it");
  int per_sm = 0;
  r = api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, function, int(block), 0);
  if (r != CUDA_SUCCESS) return cu_status(r, "CUDA kernel '" + binary.kernel_name + "': cuOccupancyMaxActiveBlocksPerMultiprocessor");
  if (per_sm <= 0)
    return unsupported("CUDA kernel '" + binary.kernel_name + "' cannot run blocks of " + std::to_string(block) +
                       " threads on " + device_.name() + " (its occupancy is zero)");
  max_blocks = std::min<uint64_t>(uint64_t(per_sm) * uint64_t(record.sm_count), uint64_t(record.max_grid_x));
  return Status::ok();
}

Status CudaProgram::load_functions() {
  for (auto& [index, kernel] : kernels_) {
    const artifact::KernelBinary& binary = *kernel.binary;
    KILN_RETURN_IF_ERROR(
        load_function(binary, binary.entry_point, binary.dispatch.workgroup_size, kernel.function, kernel.max_blocks));
    if (const artifact::LibraryEpilogue* epilogue = artifact::library_epilogue(binary))
      KILN_RETURN_IF_ERROR(load_function(binary, binary.entry_point + artifact::kLibraryEpilogueSuffix,
                                         epilogue->dispatch.workgroup_size, kernel.epilogue_function,
                                         kernel.epilogue_max_blocks));
  }
  return Status::ok();
}

Status CudaProgram::upload_constants() {
  // The block's layout: each constant at a 256-byte aligned offset (cudaMalloc's alignment, so
  // vectorized and cuBLASLt accesses see the alignment they would in a buffer of their own).
  constexpr size_t kAlignment = 256;
  const ir::Graph& graph = artifact_->graph;
  struct Piece {
    size_t offset;
    const ir::Tensor* data;
  };
  std::vector<Piece> pieces;
  size_t total = 0;
  for (const ir::BufferAssignment& buffer : artifact_->plan.buffers) {
    if (buffer.storage != ir::Storage::kConstant || constant_offsets_.count(buffer.value)) continue;
    const ir::Tensor& data = graph.constant_of(buffer.value);
    constant_offsets_[buffer.value] = total;
    pieces.push_back({total, &data});
    total += (data.size_bytes() + kAlignment - 1) / kAlignment * kAlignment;
  }
  if (pieces.empty()) return Status::ok();
  KILN_ASSIGN_OR_RETURN(constant_block_, CudaBuffer::create(device_, total));
  // The upload streams the block's image: each staging window gets the constants' bytes that
  // fall in it (the alignment gaps are left as they are). Windows may be filled concurrently, so
  // each finds its first piece by offset.
  return device_.copy_image_to_device(constant_block_->pointer(), total, [&](size_t offset, std::span<std::byte> out) {
    const size_t end = offset + out.size();
    auto first = std::upper_bound(pieces.begin(), pieces.end(), offset,
                                  [](size_t at, const Piece& piece) { return at < piece.offset + piece.data->size_bytes(); });
    for (auto piece = first; piece != pieces.end() && piece->offset < end; ++piece) {
      const size_t begin = std::max(offset, piece->offset);
      const size_t stop = std::min(end, piece->offset + piece->data->size_bytes());
      if (begin < stop)
        std::memcpy(out.data() + (begin - offset), piece->data->data() + (begin - piece->offset), stop - begin);
    }
  });
}

const LoadedKernel* CudaProgram::kernel(uint32_t kernel_index) const {
  auto it = kernels_.find(kernel_index);
  return it == kernels_.end() ? nullptr : &it->second;
}

CUdeviceptr CudaProgram::constant(ir::NodeId value) const {
  auto it = constant_offsets_.find(value);
  return it == constant_offsets_.end() ? 0 : constant_block_->pointer() + it->second;
}

}  // namespace kiln::runtime::cuda
