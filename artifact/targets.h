// The code-generation targets, named once. kilnc's --target list, the codegen registry
// (codegen/target.cpp), the `target` field of the artifact's KernelBinary and ModuleBinary records
// and the runtime drivers that pick their records by it all use these names.
//
// Thread-safety: constants.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kiln::artifact {

inline constexpr std::string_view kCudaTarget = "cuda";
inline constexpr std::string_view kVulkanTarget = "vulkan";
inline constexpr std::string_view kOpenClTarget = "opencl";
inline constexpr std::string_view kCpuTarget = "cpu";

// Every known target, in the order kilnc lists and compiles them.
inline constexpr std::array<std::string_view, 4> kTargetNames = {kCudaTarget, kVulkanTarget, kOpenClTarget,
                                                                 kCpuTarget};

// The cpu target's module formats: an ELF shared object for Linux on one architecture, loaded by
// the cpu driver with dlopen (codegen/cpu/, runtime/drivers/cpu/). kilnc builds for the host's
// architecture or cross-compiles (--cpu); a runtime loads its own architecture's.
inline constexpr std::string_view kCpuModuleFormatX86_64 = "so:x86_64";
inline constexpr std::string_view kCpuModuleFormatAarch64 = "so:aarch64";
#if defined(__aarch64__)
inline constexpr std::string_view kHostCpuModuleFormat = kCpuModuleFormatAarch64;
#else
inline constexpr std::string_view kHostCpuModuleFormat = kCpuModuleFormatX86_64;
#endif

// The most elements a tensor (and a kernel's index space) may have on the vulkan target: GLSL
// kernels index with 32-bit signed integers (the other targets with 64 bits). The target refuses
// larger static shapes at compile time, the Vulkan driver larger symbolic ones at run time.
inline constexpr int64_t kVulkanMaxElements = (int64_t(1) << 31) - 1;

inline constexpr bool is_known_target(std::string_view name) {
  for (std::string_view t : kTargetNames)
    if (t == name) return true;
  return false;
}

}  // namespace kiln::artifact
