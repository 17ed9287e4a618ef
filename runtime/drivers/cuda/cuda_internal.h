// Internal to the CUDA driver: the device record, the Device, Buffer and Executable classes and
// the pinned staging pool shared by cuda_driver.cpp, cuda_executable.cpp and cuda_stream.cpp.
// Nothing outside runtime/drivers/cuda/ includes this header.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/hal/device.h"
#include "runtime/hal/thread_pool.h"

struct cudnnContext;  // cudnn_api.h: cudnnHandle_t

namespace kiln::runtime::cuda {

// What the driver learns about one CUDA device when it enumerates them. Immutable.
struct DeviceRecord {
  hal::DeviceInfo info;
  int ordinal = 0;
  CUdevice device = 0;
  int sm = 0;  // compute capability major * 10 + minor (90 for an H100)
  int sm_count = 0;
  int max_threads_per_block = 0;
  int max_grid_x = 0;
  size_t total_memory = 0;
};

class CudaDevice;

// Pinned host memory for host <-> device copies. A copy borrows a lane (two pinned halves, two
// events and a non-blocking stream of its own) and streams the bytes through it in chunks,
// double-buffered, so the host-side memcpy of one chunk overlaps the DMA of the other. Lanes
// are created on demand and kept (one per thread copying at the same time), so concurrent
// sessions never wait for each other's copies and steady-state runs allocate no pinned memory.
// Thread-safety: acquire/release lock `mutex_`; a borrowed lane is used by one thread.
class StagingPool {
 public:
  struct Lane {
    std::byte* pinned = nullptr;  // 2 * kHalfBytes
    CUstream stream = nullptr;
    CUevent half_done[2] = {nullptr, nullptr};
  };
  static constexpr size_t kHalfBytes = size_t(4) << 20;

  explicit StagingPool(const CudaApi& api) : api_(api) {}
  ~StagingPool();  // frees every lane; the device's context must be current
  Result<Lane*> acquire();
  void release(Lane* lane);

 private:
  const CudaApi& api_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Lane>> all_;
  std::vector<Lane*> free_;
};

// Settings read when the device is opened; see cuda_driver.h.
struct DeviceOptions {
  std::atomic<bool> graphs{true};
};

class CudaProgram;

// An opened device: the device's primary context (retained while open), the staging pool and
// the cache of loaded programs. Thread-safety: every method may be called concurrently.
class CudaDevice final : public hal::Device {
 public:
  // `graphs`: the cuda.graphs device option; unset means on unless KILN_CUDA_GRAPHS is "0".
  static Result<std::unique_ptr<CudaDevice>> open(const CudaApi& api, const DeviceRecord& record,
                                                  std::optional<bool> graphs = std::nullopt);
  ~CudaDevice() override;

  const hal::DeviceInfo& info() const override { return record_.info; }
  bool has_device_timers() const override { return true; }
  Result<std::unique_ptr<hal::Buffer>> allocate(size_t bytes) override;
  // `native` is a CUdeviceptr: device memory of this GPU, `bytes` of it inside one allocation.
  Result<std::unique_ptr<hal::Buffer>> wrap_native(void* native, size_t bytes,
                                                   std::function<void()> on_release) override;
  Result<std::unique_ptr<hal::Stream>> create_stream_on(void* native) override;
  Result<std::unique_ptr<hal::Executable>> load_executable(
      std::shared_ptr<const artifact::LoadedArtifact> artifact) override;
  Result<std::unique_ptr<hal::Stream>> create_stream() override;

  const CudaApi& api() const { return api_; }
  const DeviceRecord& record() const { return record_; }
  CUcontext context() const { return context_; }
  DeviceOptions& options() { return options_; }
  // "CUDA device cuda:0 (NVIDIA H100 ...)" for messages.
  std::string name() const { return "CUDA device " + record_.info.id + " (" + record_.info.description + ")"; }

  // Synchronous copies through the staging pool (the caller makes the context current).
  Status copy_to_device(CUdeviceptr dst, std::span<const std::byte> src);
  // Copies `size` bytes to dst that `fill` produces piece by piece: fill(offset, out) writes
  // bytes [offset, offset + out.size()) of the image into out (pinned staging memory). A large
  // image's windows are filled in slices on several threads at once, so `fill` must be safe to
  // call concurrently for disjoint ranges. One DMA per staging half, whatever the image is made of.
  using ImageFill = std::function<void(size_t offset, std::span<std::byte> out)>;
  Status copy_image_to_device(CUdeviceptr dst, size_t size, const ImageFill& fill);
  Status copy_from_device(std::span<std::byte> dst, CUdeviceptr src);

 private:
  CudaDevice(const CudaApi& api, DeviceRecord record) : api_(api), record_(std::move(record)),
        staging_(std::make_unique<StagingPool>(api)) {}

  const CudaApi& api_;
  DeviceRecord record_;
  CUcontext context_ = nullptr;
  bool retained_ = false;
  DeviceOptions options_;
  std::unique_ptr<StagingPool> staging_;  // reset in the destructor, under the context
  // Threads that fill staging windows with copy_image_to_device (started at the first large image):
  // one core copies from a file's page-cache pages at 5-11 GB/s, below the host-to-device DMA's
  // 25 GB/s, so a large image's upload was bound by the copy into pinned memory (H200 machine, 14
  // MB: 1.27 ms on one thread, 0.86 ms on four).
  hal::ThreadPool staging_fillers_{std::min(4u, std::max(1u, std::thread::hardware_concurrency()))};
  // Loaded programs by artifact; the program holds the artifact, so a live entry's key is that
  // artifact's address. Guarded by programs_mutex_.
  std::mutex programs_mutex_;
  std::map<const artifact::LoadedArtifact*, std::weak_ptr<CudaProgram>> programs_;
};

// Device memory of one CudaDevice (at least one byte is allocated, so every buffer has its own
// address). read()/write() are synchronous copies through the device's staging pool.
class CudaBuffer final : public hal::Buffer {
 public:
  static Result<std::unique_ptr<CudaBuffer>> create(CudaDevice& device, size_t bytes);
  // A buffer over application-owned device memory: used in place, never freed by Kiln;
  // `on_release` (may be empty) runs when the buffer is destroyed.
  static std::unique_ptr<CudaBuffer> borrow(CudaDevice& device, CUdeviceptr pointer, size_t bytes,
                                            std::function<void()> on_release);
  ~CudaBuffer() override;

  size_t size() const override { return size_; }
  std::byte* host_data() override { return nullptr; }
  Status write(size_t offset, std::span<const std::byte> data) override;
  Status read(size_t offset, std::span<std::byte> out) const override;

  CUdeviceptr pointer() const { return pointer_; }
  const CudaDevice& device() const { return device_; }

 private:
  CudaBuffer(CudaDevice& device, CUdeviceptr pointer, size_t size, bool owned,
             std::function<void()> on_release = nullptr)
      : device_(device), pointer_(pointer), size_(size), owned_(owned), on_release_(std::move(on_release)) {}
  Status check_range(size_t offset, size_t count) const;
  CudaDevice& device_;
  CUdeviceptr pointer_;
  size_t size_;
  bool owned_;  // false for borrow(): the application frees the memory
  std::function<void()> on_release_;
};

// One module of the artifact (ModuleBinary::id), loaded from the cubin of the device's
// architecture, else from the PTX.
struct LoadedModule {
  CUmodule module = nullptr;
  std::string format;  // "cubin:sm_90" or "ptx"
};

// One kernel, a function of one loaded module.
struct LoadedKernel {
  const artifact::KernelBinary* binary = nullptr;  // points into the shared artifact
  CUfunction function = nullptr;
  // At most this many blocks are launched: SMs x resident blocks per SM for the kernel's block
  // size (one full wave; kernels are grid-stride), and the device's grid limit.
  uint64_t max_blocks = 1;
  // The function finishing a library call's epilogue (<entry_point>_epilogue), when it has one.
  CUfunction epilogue_function = nullptr;
  uint64_t epilogue_max_blocks = 1;
};

// The artifact's CUDA modules loaded on one device (each from the cubin for the device's
// architecture, else from the PTX, JIT-compiled by the driver), its functions looked up, and its
// constants uploaded.
// Shared by every session of the artifact on the device (CudaDevice::programs_), so constants
// are uploaded and the PTX compiled once per device. Immutable after creation but for the spare
// cuDNN handle (under spare_cudnn_mutex_); thread-safe.
class CudaProgram {
 public:
  static Result<std::shared_ptr<CudaProgram>> load(CudaDevice& device,
                                                   std::shared_ptr<const artifact::LoadedArtifact> artifact);
  ~CudaProgram();
  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;

  const artifact::LoadedArtifact& artifact() const { return *artifact_; }
  CudaDevice& device() const { return device_; }
  const LoadedKernel* kernel(uint32_t kernel_index) const;
  // The device pointer of a constant value, or 0.
  CUdeviceptr constant(ir::NodeId value) const;
  uint64_t serial() const { return serial_; }  // unique per process; streams key prepared work by it
  // A cuDNN handle made while the program loaded, for the first stream that runs one of its
  // convolutions (the caller owns it then: cudnnDestroy), or nullptr (no convolutions, no cuDNN,
  // or already taken). Waits for the library thread. Thread-safe.
  cudnnContext* take_cudnn_handle() const;

 private:
  CudaProgram(CudaDevice& device, std::shared_ptr<const artifact::LoadedArtifact> artifact);
  Status load_modules();
  Status load_module(uint32_t id, LoadedModule& loaded);
  void make_cudnn_handle();  // on the library thread
  Status load_functions();
  // Looks up `entry` in the module of `binary` and sizes its grid for `block` threads.
  Status load_function(const artifact::KernelBinary& binary, const std::string& entry, uint32_t block,
                       CUfunction& function, uint64_t& max_blocks);
  Status upload_constants();

  CudaDevice& device_;
  std::shared_ptr<const artifact::LoadedArtifact> artifact_;
  std::map<uint32_t, LoadedModule> modules_;                  // by ModuleBinary::id
  std::map<uint32_t, LoadedKernel> kernels_;                  // by graph kernel index
  // Every constant in one allocation (one cuMemAlloc and one pipelined upload, not one of
  // each per constant), at 256-byte aligned offsets.
  std::unique_ptr<CudaBuffer> constant_block_;
  std::map<ir::NodeId, size_t> constant_offsets_;
  // cuBLASLt's and cuDNN's libraries (hundreds of MB) loading on another thread while the
  // modules load and the constants upload, when a kernel may run through them; the first run
  // waits for them there.
  // With convolutions it also makes a cuDNN handle: cudnnCreate takes 1.4-2 ms even with the
  // library loaded, which the first run would otherwise spend.
  std::shared_future<void> vendor_libraries_;
  mutable std::mutex spare_cudnn_mutex_;
  mutable cudnnContext* spare_cudnn_ = nullptr;  // guarded by spare_cudnn_mutex_
  uint64_t serial_;
};

// The hal::Executable handed to a session: a shared CudaProgram.
class CudaExecutable final : public hal::Executable {
 public:
  explicit CudaExecutable(std::shared_ptr<CudaProgram> program) : program_(std::move(program)) {}
  const artifact::LoadedArtifact& artifact() const override { return program_->artifact(); }
  bool uses_arena() const override { return true; }
  const CudaProgram& program() const { return *program_; }

 private:
  std::shared_ptr<CudaProgram> program_;
};

// Defined in cuda_stream.cpp.
// A stream of its own, or (application_stream not null) one that enqueues on the application's
// stream and never destroys it.
Result<std::unique_ptr<hal::Stream>> create_cuda_stream(CudaDevice& device, bool use_graphs,
                                                        CUstream application_stream = nullptr);

}  // namespace kiln::runtime::cuda
