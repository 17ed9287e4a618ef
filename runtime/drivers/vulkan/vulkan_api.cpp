#include "runtime/drivers/vulkan/vulkan_api.h"

#include <dlfcn.h>

namespace kiln::runtime::vulkan {

VulkanInstance::~VulkanInstance() {
  if (instance != VK_NULL_HANDLE && vkDestroyInstance) vkDestroyInstance(instance, nullptr);
  if (library) dlclose(library);
}

Result<std::shared_ptr<VulkanInstance>> create_vulkan_instance() {
  auto vk = std::make_shared<VulkanInstance>();
  vk->library = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!vk->library) {
    const char* why = dlerror();
    return Status(ErrorCode::kUnavailable,
                  std::string("libvulkan.so.1 not found") + (why ? std::string(" (") + why + ")" : ""));
  }
  vk->vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(vk->library, "vkGetInstanceProcAddr"));
  if (!vk->vkGetInstanceProcAddr)
    return Status(ErrorCode::kUnavailable, "libvulkan.so.1 has no vkGetInstanceProcAddr");

  auto create_instance = reinterpret_cast<PFN_vkCreateInstance>(
      vk->vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkCreateInstance"));
  auto enumerate_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      vk->vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
  if (!create_instance) return Status(ErrorCode::kUnavailable, "the Vulkan loader has no vkCreateInstance");
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (enumerate_version) enumerate_version(&loader_version);
  if (loader_version < VK_API_VERSION_1_1)
    return Status(ErrorCode::kUnavailable, "the Vulkan loader supports only Vulkan 1.0 (1.1 is needed)");
  // 1.2 makes the float16/int8 and 8-bit storage features core where devices support them.
  vk->api_version = loader_version >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1;

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = vk->api_version;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  VkResult r = create_instance(&info, nullptr, &vk->instance);
  if (r != VK_SUCCESS) {
    vk->instance = VK_NULL_HANDLE;
    return Status(ErrorCode::kUnavailable,
                  "vkCreateInstance failed: " + vk_result_name(r) +
                      (r == VK_ERROR_INCOMPATIBLE_DRIVER
                           ? " (no Vulkan driver (ICD) is installed, or none supports Vulkan 1.1)"
                           : ""));
  }
#define KILN_VK_LOAD_INSTANCE(name)                                                          \
  vk->name = reinterpret_cast<PFN_##name>(vk->vkGetInstanceProcAddr(vk->instance, #name)); \
  if (!vk->name) return Status(ErrorCode::kUnavailable, "the Vulkan loader has no " #name);
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_LOAD_INSTANCE)
#undef KILN_VK_LOAD_INSTANCE
  return vk;
}

Status load_device_functions(const VulkanInstance& instance, VkDevice device, DeviceFunctions& out) {
#define KILN_VK_LOAD_DEVICE(name)                                                     \
  out.name = reinterpret_cast<PFN_##name>(instance.vkGetDeviceProcAddr(device, #name)); \
  if (!out.name) return Status(ErrorCode::kUnavailable, "the Vulkan device has no " #name);
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_LOAD_DEVICE)
#undef KILN_VK_LOAD_DEVICE
  return Status::ok();
}

std::string vk_result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult " + std::to_string(int(result));
  }
}

Status vk_error(const std::string& what, VkResult result) {
  const ErrorCode code = (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY)
                             ? ErrorCode::kOutOfMemory
                             : ErrorCode::kInternal;
  return Status(code, "Vulkan: " + what + " failed: " + vk_result_name(result));
}

}  // namespace kiln::runtime::vulkan
