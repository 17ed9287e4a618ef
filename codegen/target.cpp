// The registry of code-generation targets compiled into this build. KILN_HAVE_VULKAN_CODEGEN is
// defined by codegen/CMakeLists.txt when the SPIR-V compiler library (shaderc) is built,
// KILN_HAVE_CUDA when NVRTC is found.
#include "codegen/target.h"

#include "codegen/opencl/opencl_target.h"
#ifdef KILN_HAVE_CUDA
#include "codegen/cuda/cuda_target.h"
#endif
#ifdef KILN_HAVE_VULKAN_CODEGEN
#include "codegen/vulkan/vulkan_target.h"
#endif

namespace kiln::codegen {

std::vector<std::string> available_targets() {
  std::vector<std::string> out;
#ifdef KILN_HAVE_CUDA
  out.push_back("cuda");
#endif
#ifdef KILN_HAVE_VULKAN_CODEGEN
  out.push_back("vulkan");
#endif
  out.push_back("opencl");
  return out;
}

Result<std::unique_ptr<Target>> create_target(std::string_view name) {
  if (name == "opencl") return make_opencl_target();
#ifdef KILN_HAVE_CUDA
  if (name == "cuda") return make_cuda_target();
#endif
#ifdef KILN_HAVE_VULKAN_CODEGEN
  if (name == "vulkan") return make_vulkan_target();
#endif
  return unsupported("code-generation target '" + std::string(name) + "' is not available in this build");
}

std::string unavailable_targets_note() {
  std::string note;
#ifndef KILN_HAVE_CUDA
  note += "cuda (CUDA toolkit not found: no NVRTC)";
#endif
#ifndef KILN_HAVE_VULKAN_CODEGEN
  note += std::string(note.empty() ? "" : ", ") + "vulkan (shaderc or SPIRV-Tools not found)";
#endif
  return note;
}

}  // namespace kiln::codegen
