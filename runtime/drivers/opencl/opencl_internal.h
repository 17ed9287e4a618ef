// Internal to the OpenCL driver: the device catalog, the program-binary cache, and the Device,
// Buffer and Executable classes shared by opencl_driver.cpp, opencl_executable.cpp and
// opencl_stream.cpp. Nothing outside runtime/drivers/opencl/ includes this header.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "runtime/drivers/opencl/cl_api.h"
#include "runtime/drivers/opencl/opencl_driver.h"
#include "runtime/hal/device.h"

namespace kiln::runtime::opencl {

// Program binaries built on one cl_device_id, keyed by a hash of (build options + source) and
// checked against the full source on lookup (so a hash collision is a miss, never a wrong
// program). Lives as long as any Device opened on that cl_device_id or the driver, so a
// second session, or a device opened again, skips compiling. Thread-safety: every method
// locks `mutex_`; the counters are atomics.
class ProgramBinaryCache {
 public:
  // The cached binary for this source, or nullptr.
  std::shared_ptr<const std::vector<unsigned char>> find(const std::string& key) const;
  void insert(const std::string& key, std::vector<unsigned char> binary);

  std::atomic<uint64_t> source_builds{0};
  std::atomic<uint64_t> binary_loads{0};

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const std::vector<unsigned char>> binary;
  };
  mutable std::mutex mutex_;
  std::multimap<uint64_t, Entry> entries_;  // hash -> entries with that hash
};

// What the driver learns about one OpenCL device when it enumerates them. Immutable after
// enumeration except the cache (which guards itself).
struct DeviceRecord {
  hal::DeviceInfo info;
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  std::set<std::string> extensions;  // CL_DEVICE_EXTENSIONS, split
  bool full_profile = true;          // FULL_PROFILE: 64-bit integers are core
  bool has_fp64 = false;             // CL_DEVICE_DOUBLE_FP_CONFIG != 0
  uint64_t max_alloc_bytes = 0;      // CL_DEVICE_MAX_MEM_ALLOC_SIZE
  uint64_t base_align_bytes = 1;     // CL_DEVICE_MEM_BASE_ADDR_ALIGN / 8 (sub-buffer origins)
  size_t max_work_group_size = 1;
  std::shared_ptr<ProgramBinaryCache> program_cache = std::make_shared<ProgramBinaryCache>();

  // Whether the device provides `feature` (an OpenCL extension name such as "cl_khr_fp16").
  bool has_feature(const std::string& feature) const;
};

// An opened device: one cl_context holding the device and an internal in-order queue for the
// blocking buffer copies. Thread-safety: OpenCL entry points are thread-safe, so every method
// may be called concurrently; the buffer-copy queue is shared by all threads (copies are
// blocking, so callers never observe each other's partial work).
class OpenClDevice final : public hal::Device {
 public:
  static Result<std::unique_ptr<OpenClDevice>> open(const ClApi& api, DeviceRecord record);
  ~OpenClDevice() override;

  const hal::DeviceInfo& info() const override { return record_.info; }
  bool has_device_timers() const override { return true; }
  Result<std::unique_ptr<hal::Buffer>> allocate(size_t bytes) override;
  Result<std::unique_ptr<hal::Executable>> load_executable(
      std::shared_ptr<const artifact::LoadedArtifact> artifact) override;
  Result<std::unique_ptr<hal::Stream>> create_stream() override;

  const ClApi& api() const { return api_; }
  const DeviceRecord& record() const { return record_; }
  cl_context context() const { return context_; }
  cl_command_queue copy_queue() const { return copy_queue_; }
  // A raw cl_mem of `bytes` (at least 1 byte: OpenCL has no empty buffers), optionally filled
  // from `initial`. Allocation failures are kOutOfMemory naming the CL error.
  Result<cl_mem> create_mem(size_t bytes, cl_mem_flags flags, const void* initial) const;

 private:
  OpenClDevice(const ClApi& api, DeviceRecord record) : api_(api), record_(std::move(record)) {}
  const ClApi& api_;
  DeviceRecord record_;
  cl_context context_ = nullptr;
  cl_command_queue copy_queue_ = nullptr;
};

// A cl_mem of one device. read()/write() are blocking copies on the device's copy queue.
class OpenClBuffer final : public hal::Buffer {
 public:
  OpenClBuffer(const OpenClDevice& device, cl_mem mem, size_t size)
      : device_(device), mem_(mem), size_(size) {}
  ~OpenClBuffer() override;

  size_t size() const override { return size_; }
  std::byte* host_data() override { return nullptr; }
  Status write(size_t offset, std::span<const std::byte> data) override;
  Status read(size_t offset, std::span<std::byte> out) const override;

  cl_mem mem() const { return mem_; }
  const OpenClDevice& device() const { return device_; }

 private:
  Status check_range(size_t offset, size_t count) const;
  const OpenClDevice& device_;
  cl_mem mem_;
  size_t size_;
};

// The artifact's "opencl" kernels built for one device, and its constants uploaded.
// Immutable after creation: streams create their own cl_kernel objects from `programs` (so
// clSetKernelArg never races between sessions).
class OpenClExecutable final : public hal::Executable {
 public:
  struct KernelProgram {
    const artifact::KernelBinary* binary = nullptr;  // points into the shared artifact
    cl_program program = nullptr;                    // shared by kernels with the same source
  };

  static Result<std::unique_ptr<OpenClExecutable>> create(
      const OpenClDevice& device, std::shared_ptr<const artifact::LoadedArtifact> artifact);
  ~OpenClExecutable() override;

  const artifact::LoadedArtifact& artifact() const override { return *artifact_; }
  // True when the plan's arena offsets meet the device's sub-buffer alignment, so the session's
  // arena is used as planned; otherwise each stream lays out its own arena (see
  // opencl_stream.cpp) and the session allocates none.
  bool uses_arena() const override { return uses_session_arena_; }

  const OpenClDevice& device() const { return device_; }
  // Graph kernel index -> its program, or nullptr when the artifact has no OpenCL kernel for it.
  const KernelProgram* kernel(uint32_t kernel_index) const;
  // The device buffer of a constant value, or nullptr.
  cl_mem constant(ir::NodeId value) const;
  uint64_t id() const { return id_; }  // unique per process; keys per-stream state

 private:
  OpenClExecutable(const OpenClDevice& device, std::shared_ptr<const artifact::LoadedArtifact> artifact);
  Status build_programs();
  Status upload_constants();

  const OpenClDevice& device_;
  std::shared_ptr<const artifact::LoadedArtifact> artifact_;
  uint64_t id_;
  bool uses_session_arena_ = true;
  std::map<uint32_t, KernelProgram> kernels_;  // by graph kernel index
  std::vector<cl_program> programs_;           // owned, one per distinct source
  std::map<ir::NodeId, cl_mem> constants_;     // owned
};

// Defined in opencl_stream.cpp.
Result<std::unique_ptr<hal::Stream>> create_opencl_stream(const OpenClDevice& device);

}  // namespace kiln::runtime::opencl
