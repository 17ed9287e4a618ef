// The CUDA driver, its devices and buffers, and the pinned staging pool. Programs are in
// cuda_executable.cpp, streams in cuda_stream.cpp.
#include "runtime/drivers/cuda/cuda_driver.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "runtime/drivers/cuda/cuda_internal.h"
#include "runtime/hal/driver_catalog.h"

namespace kiln::runtime::cuda {

// ---- StagingPool ----

StagingPool::~StagingPool() {
  for (auto& lane : all_) {
    for (CUevent e : lane->half_done)
      if (e) api_.cuEventDestroy_v2(e);
    if (lane->stream) api_.cuStreamDestroy_v2(lane->stream);
    if (lane->pinned) api_.cuMemFreeHost(lane->pinned);
  }
}

Result<StagingPool::Lane*> StagingPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      Lane* lane = free_.back();
      free_.pop_back();
      return lane;
    }
  }
  auto lane = std::make_unique<Lane>();
  auto fail = [&](CUresult r, const char* what) {
    for (CUevent e : lane->half_done)
      if (e) api_.cuEventDestroy_v2(e);
    if (lane->stream) api_.cuStreamDestroy_v2(lane->stream);
    if (lane->pinned) api_.cuMemFreeHost(lane->pinned);
    return cu_status(r, std::string("CUDA staging buffer: ") + what);
  };
  void* pinned = nullptr;
  CUresult r = api_.cuMemHostAlloc(&pinned, 2 * kHalfBytes, CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS) return fail(r, "cuMemHostAlloc");
  lane->pinned = static_cast<std::byte*>(pinned);
  r = api_.cuStreamCreate(&lane->stream, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) return fail(r, "cuStreamCreate");
  for (CUevent& e : lane->half_done) {
    r = api_.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) return fail(r, "cuEventCreate");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  all_.push_back(std::move(lane));
  return all_.back().get();
}

void StagingPool::release(Lane* lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(lane);
}

namespace {

std::string format_pointer(CUdeviceptr pointer) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(pointer));
  return text;
}

// Returns a borrowed lane to its pool on every path.
class LaneGuard {
 public:
  LaneGuard(StagingPool& pool, StagingPool::Lane* lane) : pool_(pool), lane_(lane) {}
  ~LaneGuard() { pool_.release(lane_); }
  LaneGuard(const LaneGuard&) = delete;
  LaneGuard& operator=(const LaneGuard&) = delete;

 private:
  StagingPool& pool_;
  StagingPool::Lane* lane_;
};

// ---- enumeration ----

using Catalog = hal::DeviceCatalog<DeviceRecord>;

std::string gib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", double(bytes) / double(1ull << 30));
  return text;
}

Catalog enumerate() {
  Catalog catalog;
  Result<const CudaApi*> loaded = cuda_api();
  if (!loaded.is_ok()) {
    catalog.unavailable_reason = loaded.status().message();
    return catalog;
  }
  const CudaApi& api = **loaded;
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    catalog.unavailable_reason = "cuInit failed: " + cu_error_name(r) +
                                 (r == CUDA_ERROR_NO_DEVICE ? " (no CUDA GPU is present)" : "");
    return catalog;
  }
  int count = 0;
  r = api.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    catalog.unavailable_reason = "cuDeviceGetCount failed: " + cu_error_name(r);
    return catalog;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    DeviceRecord record;
    record.ordinal = ordinal;
    if (api.cuDeviceGet(&record.device, ordinal) != CUDA_SUCCESS) continue;
    char name[256] = {};
    if (api.cuDeviceGetName(name, int(sizeof(name) - 1), record.device) != CUDA_SUCCESS)
      std::strcpy(name, "CUDA device");
    auto attribute = [&](int which) {
      int value = 0;
      return api.cuDeviceGetAttribute(&value, which, record.device) == CUDA_SUCCESS ? value : 0;
    };
    const int major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    const int minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    record.sm = major * 10 + minor;
    record.sm_count = std::max(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 1);
    record.max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    record.max_grid_x = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    if (record.max_grid_x <= 0) record.max_grid_x = 65535;
    if (api.cuDeviceTotalMem_v2(&record.total_memory, record.device) != CUDA_SUCCESS) record.total_memory = 0;
    const bool integrated = attribute(CU_DEVICE_ATTRIBUTE_INTEGRATED) != 0;
    record.info.id = "cuda:" + std::to_string(ordinal);
    record.info.driver = "cuda";
    record.info.type = integrated ? hal::DeviceType::kIntegratedGpu : hal::DeviceType::kDiscreteGpu;
    record.info.priority = 400;
    record.info.description = std::string(name) + " (sm_" + std::to_string(record.sm) + ", " +
                              std::to_string(record.sm_count) + " SMs, " + gib(record.total_memory) + ")";
    catalog.devices.push_back(std::move(record));
  }
  if (catalog.devices.empty()) catalog.unavailable_reason = "the NVIDIA driver reports no CUDA device";
  return catalog;
}

// Enumerated once per process: cuInit's device list is fixed for the process lifetime.
const Catalog& process_catalog() {
  static const Catalog instance = enumerate();
  return instance;
}

class CudaDriver final : public hal::CatalogDriver<DeviceRecord> {
 public:
  CudaDriver() : CatalogDriver("cuda", "CUDA", {"graphs"}) {}

 protected:
  const Catalog& catalog() const override { return process_catalog(); }
  Result<std::unique_ptr<hal::Device>> open(const DeviceRecord& record,
                                            const hal::DeviceOptions& options) const override {
    KILN_ASSIGN_OR_RETURN(std::optional<bool> graphs, options.get_switch("cuda.graphs"));
    KILN_ASSIGN_OR_RETURN(const CudaApi* api, cuda_api());
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::open(*api, record, graphs));
    return std::unique_ptr<hal::Device>(std::move(device));
  }
};

}  // namespace

// ---- CudaDevice ----

Result<std::unique_ptr<CudaDevice>> CudaDevice::open(const CudaApi& api, const DeviceRecord& record,
                                                     std::optional<bool> graphs) {
  std::unique_ptr<CudaDevice> device(new CudaDevice(api, record));
  const CUresult r = api.cuDevicePrimaryCtxRetain(&device->context_, record.device);
  if (r != CUDA_SUCCESS) return cu_status(r, device->name() + ": cuDevicePrimaryCtxRetain");
  device->retained_ = true;
  const char* graphs_env = std::getenv("KILN_CUDA_GRAPHS");
  device->options_.graphs = graphs.value_or(!(graphs_env && std::strcmp(graphs_env, "0") == 0));
  return device;
}

CudaDevice::~CudaDevice() {
  {
    // Staging lanes (pinned memory, streams, events) belong to the context: free them while it
    // is current, before the primary context is released.
    ScopedContext current(api_, context_);
    staging_.reset();
  }
  if (retained_) api_.cuDevicePrimaryCtxRelease_v2(record_.device);
}

Result<std::unique_ptr<hal::Buffer>> CudaDevice::allocate(size_t bytes) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CudaBuffer> buffer, CudaBuffer::create(*this, bytes));
  return std::unique_ptr<hal::Buffer>(std::move(buffer));
}

Result<std::unique_ptr<hal::Buffer>> CudaDevice::wrap_native(void* native, size_t bytes,
                                                             std::function<void()> on_release) {
  const auto pointer = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(native));
  const std::string what = name() + ": application memory " + format_pointer(pointer);
  ScopedContext current(api_, context_);
  KILN_RETURN_IF_ERROR(current.status());
  // Kernels read and write the whole range, so it must be device memory of this GPU and lie
  // inside one allocation: a stray pointer would fault the context every session shares, where
  // a refused wrap is an error the application can handle.
  unsigned memory_type = 0;
  int ordinal = -1;
  CUresult r = api_.cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pointer);
  if (r == CUDA_SUCCESS) r = api_.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer);
  if (r != CUDA_SUCCESS) return invalid_argument(what + " is not CUDA memory (" + cu_error_name(r) + ")");
  if (memory_type != CU_MEMORYTYPE_DEVICE || ordinal != record_.ordinal)
    return invalid_argument(what + " is not device memory of this GPU (device ordinal " + std::to_string(ordinal) + ")");
  CUdeviceptr base = 0;
  size_t allocation_bytes = 0;
  r = api_.cuMemGetAddressRange_v2(&base, &allocation_bytes, pointer);
  if (r != CUDA_SUCCESS) return invalid_argument(what + ": no allocation found (" + cu_error_name(r) + ")");
  const size_t available = allocation_bytes - size_t(pointer - base);
  if (bytes > available)
    return invalid_argument(what + ": " + std::to_string(bytes) + " bytes asked, but only " +
                            std::to_string(available) + " remain in its allocation");
  return std::unique_ptr<hal::Buffer>(CudaBuffer::borrow(*this, pointer, bytes, std::move(on_release)));
}

Result<std::unique_ptr<hal::Executable>> CudaDevice::load_executable(
    std::shared_ptr<const artifact::LoadedArtifact> artifact) {
  if (!artifact) return invalid_argument(name() + ": no artifact to load");
  std::lock_guard<std::mutex> lock(programs_mutex_);
  // Drop entries of programs no session holds any more.
  for (auto it = programs_.begin(); it != programs_.end();)
    it = it->second.expired() ? programs_.erase(it) : std::next(it);
  auto found = programs_.find(artifact.get());
  if (found != programs_.end())
    if (std::shared_ptr<CudaProgram> program = found->second.lock())
      return std::unique_ptr<hal::Executable>(new CudaExecutable(std::move(program)));
  // Loading under the lock: a second session of the same artifact waits for this load instead
  // of compiling the PTX and uploading the constants again.
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CudaProgram> program, CudaProgram::load(*this, artifact));
  programs_[artifact.get()] = program;
  return std::unique_ptr<hal::Executable>(new CudaExecutable(std::move(program)));
}

Result<std::unique_ptr<hal::Stream>> CudaDevice::create_stream() {
  return create_cuda_stream(*this, options_.graphs.load());
}

Result<std::unique_ptr<hal::Stream>> CudaDevice::create_stream_on(void* native) {
  if (!native) return invalid_argument(name() + ": the application's CUDA stream is NULL");
  return create_cuda_stream(*this, options_.graphs.load(), static_cast<CUstream>(native));
}

Status CudaDevice::copy_to_device(CUdeviceptr dst, std::span<const std::byte> src) {
  return copy_image_to_device(dst, src.size(), [src](size_t offset, std::span<std::byte> out) {
    std::memcpy(out.data(), src.data() + offset, out.size());
  });
}

Status CudaDevice::copy_image_to_device(CUdeviceptr dst, size_t size, const ImageFill& fill) {
  KILN_ASSIGN_OR_RETURN(StagingPool::Lane * lane, staging_->acquire());
  LaneGuard guard(*staging_, lane);
  const size_t half = StagingPool::kHalfBytes;
  bool used[2] = {false, false};
  for (size_t done = 0, chunk = 0; done < size; done += half, ++chunk) {
    const size_t n = std::min(half, size - done);
    const int h = int(chunk % 2);
    if (used[h]) {  // wait until the DMA that last read this half has finished
      const CUresult r = api_.cuEventSynchronize(lane->half_done[h]);
      if (r != CUDA_SUCCESS) return cu_status(r, name() + ": copy to the device");
    }
    // Slices of at least 1 MiB on the filler threads (a thread's wake-up costs about what
    // copying 0.1 MB does).
    const std::span<std::byte> window(lane->pinned + h * half, n);
    staging_fillers_.parallel_for(int64_t(n), int64_t(1) << 20, [&](int64_t begin, int64_t end) {
      fill(done + size_t(begin), window.subspan(size_t(begin), size_t(end - begin)));
    });
    CUresult r = api_.cuMemcpyHtoDAsync_v2(dst + done, lane->pinned + h * half, n, lane->stream);
    if (r == CUDA_SUCCESS) r = api_.cuEventRecord(lane->half_done[h], lane->stream);
    if (r != CUDA_SUCCESS) {
      (void)api_.cuStreamSynchronize(lane->stream);
      return cu_status(r, name() + ": copy of " + std::to_string(size) + " bytes to the device");
    }
    used[h] = true;
  }
  const CUresult r = api_.cuStreamSynchronize(lane->stream);
  if (r != CUDA_SUCCESS) return cu_status(r, name() + ": copy to the device");
  return Status::ok();
}

Status CudaDevice::copy_from_device(std::span<std::byte> dst, CUdeviceptr src) {
  KILN_ASSIGN_OR_RETURN(StagingPool::Lane * lane, staging_->acquire());
  LaneGuard guard(*staging_, lane);
  const size_t half = StagingPool::kHalfBytes;
  const size_t chunks = (dst.size() + half - 1) / half;
  auto issue = [&](size_t chunk) -> CUresult {
    const size_t offset = chunk * half;
    const size_t n = std::min(half, dst.size() - offset);
    const int h = int(chunk % 2);
    CUresult r = api_.cuMemcpyDtoHAsync_v2(lane->pinned + h * half, src + offset, n, lane->stream);
    return r == CUDA_SUCCESS ? api_.cuEventRecord(lane->half_done[h], lane->stream) : r;
  };
  auto failed = [&](CUresult r) {
    (void)api_.cuStreamSynchronize(lane->stream);
    return cu_status(r, name() + ": copy of " + std::to_string(dst.size()) + " bytes from the device");
  };
  if (chunks > 0)
    if (CUresult r = issue(0); r != CUDA_SUCCESS) return failed(r);
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    // The next chunk's DMA goes into the other half while this one is copied out.
    if (chunk + 1 < chunks)
      if (CUresult r = issue(chunk + 1); r != CUDA_SUCCESS) return failed(r);
    const int h = int(chunk % 2);
    if (CUresult r = api_.cuEventSynchronize(lane->half_done[h]); r != CUDA_SUCCESS) return failed(r);
    const size_t offset = chunk * half;
    std::memcpy(dst.data() + offset, lane->pinned + h * half, std::min(half, dst.size() - offset));
  }
  return Status::ok();
}

// ---- CudaBuffer ----

Result<std::unique_ptr<CudaBuffer>> CudaBuffer::create(CudaDevice& device, size_t bytes) {
  const CudaApi& api = device.api();
  ScopedContext current(api, device.context());
  KILN_RETURN_IF_ERROR(current.status());
  CUdeviceptr pointer = 0;
  const CUresult r = api.cuMemAlloc_v2(&pointer, std::max<size_t>(bytes, 1));
  if (r != CUDA_SUCCESS)
    return cu_status(r, device.name() + ": cannot allocate " + std::to_string(bytes) + " bytes (cuMemAlloc)");
  return std::unique_ptr<CudaBuffer>(new CudaBuffer(device, pointer, bytes, /*owned=*/true));
}

std::unique_ptr<CudaBuffer> CudaBuffer::borrow(CudaDevice& device, CUdeviceptr pointer, size_t bytes,
                                               std::function<void()> on_release) {
  return std::unique_ptr<CudaBuffer>(new CudaBuffer(device, pointer, bytes, /*owned=*/false, std::move(on_release)));
}

CudaBuffer::~CudaBuffer() {
  if (!owned_) {
    if (on_release_) on_release_();
    return;
  }
  ScopedContext current(device_.api(), device_.context());
  device_.api().cuMemFree_v2(pointer_);
}

Status CudaBuffer::check_range(size_t offset, size_t count) const {
  if (offset > size_ || count > size_ - offset)
    return invalid_argument("buffer access of " + std::to_string(count) + " bytes at offset " +
                            std::to_string(offset) + " is outside the " + std::to_string(size_) +
                            "-byte buffer");
  return Status::ok();
}

Status CudaBuffer::write(size_t offset, std::span<const std::byte> data) {
  KILN_RETURN_IF_ERROR(check_range(offset, data.size()));
  if (data.empty()) return Status::ok();
  ScopedContext current(device_.api(), device_.context());
  KILN_RETURN_IF_ERROR(current.status());
  return device_.copy_to_device(pointer_ + offset, data);
}

Status CudaBuffer::read(size_t offset, std::span<std::byte> out) const {
  KILN_RETURN_IF_ERROR(check_range(offset, out.size()));
  if (out.empty()) return Status::ok();
  ScopedContext current(device_.api(), device_.context());
  KILN_RETURN_IF_ERROR(current.status());
  return device_.copy_from_device(out, pointer_ + offset);
}

// ---- public ----

std::unique_ptr<hal::Driver> create_cuda_driver() { return std::make_unique<CudaDriver>(); }

Status set_cuda_graphs_enabled(hal::Device& device, bool enabled) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (!cuda_device) return invalid_argument("device '" + device.info().id + "' is not a CUDA device");
  cuda_device->options().graphs = enabled;
  return Status::ok();
}

}  // namespace kiln::runtime::cuda
