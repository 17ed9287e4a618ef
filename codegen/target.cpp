// The registry of code-generation targets compiled into this build. KILN_HAVE_VULKAN_CODEGEN is
// defined by codegen/CMakeLists.txt when the SPIR-V compiler library (shaderc) is built.
#include "codegen/target.h"

#include "codegen/opencl/opencl_target.h"
#ifdef KILN_HAVE_VULKAN_CODEGEN
#include "codegen/vulkan/vulkan_target.h"
#endif

namespace kiln::codegen {

std::vector<std::string> available_targets() {
  std::vector<std::string> out;
#ifdef KILN_HAVE_VULKAN_CODEGEN
  out.push_back("vulkan");
#endif
  out.push_back("opencl");
  return out;
}

Result<std::unique_ptr<Target>> create_target(std::string_view name) {
  if (name == "opencl") return make_opencl_target();
#ifdef KILN_HAVE_VULKAN_CODEGEN
  if (name == "vulkan") return make_vulkan_target();
#endif
  return unsupported("code-generation target '" + std::string(name) + "' is not available in this build");
}

}  // namespace kiln::codegen
