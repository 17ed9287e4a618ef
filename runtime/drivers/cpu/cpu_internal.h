// Internal to the cpu driver: the Device and the Executable shared by
// cpu_driver.cpp, cpu_executable.cpp and cpu_stream.cpp. Nothing outside runtime/drivers/cpu/
// includes this header. cpu_driver.h describes the driver and the kernels' ABI.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "artifact/reader.h"
#include "runtime/drivers/cpu/cpu_driver.h"
#include "runtime/drivers/cpu/onednn.h"
#include "runtime/hal/device.h"
#include "runtime/hal/thread_pool.h"

namespace kiln::runtime::cpu {

// A kernel's entry point (cpu_driver.h: the ABI).
using KernelEntry = void (*)(void* const* buffers, const int64_t* symbols, int64_t begin, int64_t end);

// The host as a device: host buffers and the thread pool.
// Thread-safety: every method may be called concurrently (the pool guards itself).
class CpuDevice final : public hal::Device {
 public:
  // `features`: the CPU's flags as /proc/cpuinfo lists them ("avx2", "fma", "avx512f", ...).
  CpuDevice(hal::DeviceInfo info, std::set<std::string> features, unsigned threads)
      : info_(std::move(info)), features_(std::move(features)), pool_(threads) {}

  const hal::DeviceInfo& info() const override { return info_; }
  bool has_device_timers() const override { return false; }
  Result<std::unique_ptr<hal::Buffer>> allocate(size_t bytes) override;
  // A host pointer of the application's, used in place (kernels read any alignment the
  // application's data has; the session's own buffers are 64-byte aligned).
  Result<std::unique_ptr<hal::Buffer>> wrap_native(void* native, size_t bytes,
                                                   std::function<void()> on_release) override;
  Result<std::unique_ptr<hal::Executable>> load_executable(
      std::shared_ptr<const artifact::LoadedArtifact> artifact) override;
  Result<std::unique_ptr<hal::Stream>> create_stream() override;

  hal::ThreadPool& pool() { return pool_; }
  // Whether the CPU has `feature`, a /proc/cpuinfo flag name: what a cpu kernel's
  // required_features name (the instruction-set extensions its code was built to use).
  bool has_feature(const std::string& feature) const { return features_.count(feature) > 0; }

 private:
  hal::DeviceInfo info_;
  std::set<std::string> features_;
  hal::ThreadPool pool_;
};

// The artifact's cpu modules loaded into the process, and the entry point of every kernel.
// Ownership: holds the dlopen handles (dlclosed, then their memfds closed, at destruction) and
// shares the artifact, whose constants kernels read in place. Thread-safety: immutable after
// create(); any number of streams may run it at once.
class CpuExecutable final : public hal::Executable {
 public:
  struct Kernel {
    const artifact::KernelBinary* binary = nullptr;  // points into the shared artifact
    KernelEntry entry = nullptr;
    // A oneDNN call that runs the kernel instead of `entry` (binary->gemm or binary->conv,
    // onednn.h), and the generated function that then finishes its epilogue in place (null when
    // the call covers the whole kernel).
    enum class Library : uint8_t { kNone, kGemm, kConv };
    Library library = Library::kNone;
    KernelEntry library_epilogue = nullptr;
  };

  static Result<std::unique_ptr<CpuExecutable>> create(const CpuDevice& device,
                                                      std::shared_ptr<const artifact::LoadedArtifact> artifact);
  ~CpuExecutable() override;

  const artifact::LoadedArtifact& artifact() const override { return *artifact_; }
  bool uses_arena() const override { return true; }

  const CpuDevice& device() const { return device_; }
  // Graph kernel index -> its entry point, or nullptr when the artifact has no cpu kernel for it.
  const Kernel* kernel(uint32_t kernel_index) const;
  // Where a constant value's bytes are (in the shared artifact: kernels never write constants,
  // the reader refuses a kernel output placed on one), or nullopt when `value` is not one of the
  // plan's constants. A zero-byte constant may be null.
  std::optional<void*> constant(ir::NodeId value) const;
  // oneDNN, when kernels run through it (null otherwise).
  const OneDnnApi* onednn() const { return onednn_; }
  // The oneDNN convolution of graph kernel `kernel_index` (whose Kernel::library is kConv) at
  // `batch`, made at its first use from the kernel's constant weights and kept for the
  // executable's life. Thread-safe.
  Result<const OneDnnConvolution*> convolution(uint32_t kernel_index, int64_t batch) const;
  // Likewise the oneDNN matmul of graph kernel `kernel_index` (Kernel::library kGemm) for `key`,
  // its b packed once when that is a constant.
  Result<const OneDnnMatmul*> matmul(uint32_t kernel_index, const OneDnnMatmul::Key& key) const;

 private:
  // One dlopened module. The memfd stays open while the module is loaded: glibc finds an
  // already-loaded library by the path it was opened with, so once the descriptor's number is
  // reused by another module's memfd, dlopen("/proc/self/fd/N") would return this module instead.
  struct LoadedModule {
    uint32_t id = 0;
    int fd = -1;
    void* handle = nullptr;
  };
  CpuExecutable(const CpuDevice& device, std::shared_ptr<const artifact::LoadedArtifact> artifact)
      : device_(device), artifact_(std::move(artifact)) {}
  Status load_module(uint32_t module_id);
  Status resolve_entry_points();
  Status map_constants();
  // Marks the kernels oneDNN runs (when it loads) and finds their in-place epilogues.
  Status bind_library_calls();
  void* module_handle(uint32_t module_id) const;

  const CpuDevice& device_;
  std::shared_ptr<const artifact::LoadedArtifact> artifact_;
  std::map<uint32_t, Kernel> kernels_;  // by graph kernel index
  std::vector<LoadedModule> modules_;
  std::map<ir::NodeId, void*> constants_;  // into the artifact's constant data
  const OneDnnApi* onednn_ = nullptr;
  mutable std::mutex library_calls_mutex_;  // guards the two maps below
  mutable std::map<std::pair<uint32_t, int64_t>, std::unique_ptr<OneDnnConvolution>> convolutions_;
  mutable std::map<std::pair<uint32_t, OneDnnMatmul::Key>, std::unique_ptr<OneDnnMatmul>> matmuls_;
};

// Defined in cpu_stream.cpp.
std::unique_ptr<hal::Stream> create_cpu_stream(CpuDevice& device);

}  // namespace kiln::runtime::cpu
