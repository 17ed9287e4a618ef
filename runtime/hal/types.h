// Plain value types shared by the HAL interfaces: device descriptions and per-kernel profiles.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime::hal {

enum class DeviceType : uint8_t {
  kDiscreteGpu,    // a GPU with its own memory
  kIntegratedGpu,  // a GPU sharing host memory
  kCpu,            // a CPU implementation (lavapipe, PoCL, the reference interpreter)
};
// "gpu" for either GPU kind (with "integrated-" prefix for integrated), "cpu".
std::string_view device_type_name(DeviceType type);

struct DeviceInfo {
  std::string id;           // unique across drivers: "reference", "cuda:0", "vulkan:1", ...
  std::string driver;       // the driver that owns it: "reference", "cuda", ...
  DeviceType type = DeviceType::kCpu;
  std::string description;  // human-readable name, e.g. "Kiln reference interpreter"
  // Higher is faster; the device registry picks the highest as the default device. Drivers
  // use: CUDA GPU 400, discrete Vulkan/OpenCL GPU 300 (an OpenCL accelerator 250), integrated
  // GPU 200, the cpu driver's native kernels 150, the GPU APIs' CPU implementations (PoCL,
  // lavapipe) 100, reference 0.
  int priority = 0;
};

// Time spent in one kernel of the artifact (one entry per launched kernel).
struct KernelTiming {
  uint32_t kernel_index = 0;  // index into Graph::kernels(); kNoKernel for work outside kernels
  std::string name;           // the kernel's provenance name
  std::string kind;           // "elementwise", "reduction", ...; "matmul (cuBLASLt)": + the library that ran it
  std::vector<std::string> source_nodes;  // names of the graph nodes it computes
  double seconds = 0;
  // When it started, in seconds after the start of the run, where the driver's timers give
  // starts (OpenCL events, Vulkan timestamps, CUDA events); nullopt when it reports durations
  // only (the reference device, whose kernels' nodes may interleave).
  std::optional<double> start_seconds;
};
inline constexpr uint32_t kNoKernel = ~uint32_t(0);

struct Profile {
  std::string clock;  // what was measured, e.g. "host wall time" or "device timer (CUDA events)"
  std::vector<KernelTiming> kernels;  // in launch order
};

}  // namespace kiln::runtime::hal
