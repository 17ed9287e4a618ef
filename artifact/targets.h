// The code-generation targets, named once. kilnc's --target list, the codegen registry
// (codegen/target.cpp), the `target` field of the artifact's KernelBinary and ModuleBinary records
// and the runtime drivers that pick their records by it all use these names.
//
// Thread-safety: constants.
#pragma once

#include <array>
#include <string_view>

namespace kiln::artifact {

inline constexpr std::string_view kCudaTarget = "cuda";
inline constexpr std::string_view kVulkanTarget = "vulkan";
inline constexpr std::string_view kOpenClTarget = "opencl";

// Every known target, in the order kilnc lists and compiles them.
inline constexpr std::array<std::string_view, 3> kTargetNames = {kCudaTarget, kVulkanTarget, kOpenClTarget};

inline constexpr bool is_known_target(std::string_view name) {
  for (std::string_view t : kTargetNames)
    if (t == name) return true;
  return false;
}

}  // namespace kiln::artifact
