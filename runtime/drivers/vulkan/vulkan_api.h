// The Vulkan entry points the driver uses, loaded at run time from libvulkan.so.1 (dlopen), so
// the runtime has no link-time dependency on Vulkan: a machine without the loader simply lists
// no Vulkan devices.
//
// Ownership: a VulkanInstance owns the dlopen handle and the VkInstance; devices share it
// through std::shared_ptr so it outlives them. Thread-safety: immutable after creation (the
// Vulkan instance-level functions used here are externally-synchronization free).
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <memory>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln::runtime::vulkan {

#define KILN_VK_INSTANCE_FUNCTIONS(X)        \
  X(vkDestroyInstance)                       \
  X(vkEnumeratePhysicalDevices)              \
  X(vkGetPhysicalDeviceProperties)           \
  X(vkGetPhysicalDeviceFeatures2)            \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)     \
  X(vkEnumerateDeviceExtensionProperties)    \
  X(vkCreateDevice)                          \
  X(vkGetDeviceProcAddr)

#define KILN_VK_DEVICE_FUNCTIONS(X)   \
  X(vkDestroyDevice)                  \
  X(vkGetDeviceQueue)                 \
  X(vkDeviceWaitIdle)                 \
  X(vkCreateBuffer)                   \
  X(vkDestroyBuffer)                  \
  X(vkGetBufferMemoryRequirements)    \
  X(vkAllocateMemory)                 \
  X(vkFreeMemory)                     \
  X(vkBindBufferMemory)               \
  X(vkMapMemory)                      \
  X(vkUnmapMemory)                    \
  X(vkFlushMappedMemoryRanges)        \
  X(vkInvalidateMappedMemoryRanges)   \
  X(vkCreateShaderModule)             \
  X(vkDestroyShaderModule)            \
  X(vkCreateDescriptorSetLayout)      \
  X(vkDestroyDescriptorSetLayout)     \
  X(vkCreatePipelineLayout)           \
  X(vkDestroyPipelineLayout)          \
  X(vkCreateComputePipelines)         \
  X(vkDestroyPipeline)                \
  X(vkCreateDescriptorPool)           \
  X(vkDestroyDescriptorPool)          \
  X(vkAllocateDescriptorSets)         \
  X(vkUpdateDescriptorSets)           \
  X(vkCreateCommandPool)              \
  X(vkDestroyCommandPool)             \
  X(vkAllocateCommandBuffers)         \
  X(vkFreeCommandBuffers)             \
  X(vkBeginCommandBuffer)             \
  X(vkEndCommandBuffer)               \
  X(vkResetCommandBuffer)             \
  X(vkCmdBindPipeline)                \
  X(vkCmdBindDescriptorSets)          \
  X(vkCmdPushConstants)               \
  X(vkCmdDispatch)                    \
  X(vkCmdPipelineBarrier)             \
  X(vkCmdCopyBuffer)                  \
  X(vkCmdResetQueryPool)              \
  X(vkCmdWriteTimestamp)              \
  X(vkCreateQueryPool)                \
  X(vkDestroyQueryPool)               \
  X(vkGetQueryPoolResults)            \
  X(vkCreateFence)                    \
  X(vkDestroyFence)                   \
  X(vkResetFences)                    \
  X(vkWaitForFences)                  \
  X(vkQueueSubmit)

#define KILN_VK_DECLARE_MEMBER(name) PFN_##name name = nullptr;

// The loaded library, the instance and its functions.
struct VulkanInstance {
  void* library = nullptr;  // dlopen handle of libvulkan.so.1
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  VkInstance instance = VK_NULL_HANDLE;
  uint32_t api_version = VK_API_VERSION_1_1;  // the version the instance was created with
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_DECLARE_MEMBER)

  VulkanInstance() = default;
  VulkanInstance(const VulkanInstance&) = delete;
  VulkanInstance& operator=(const VulkanInstance&) = delete;
  ~VulkanInstance();
};

// Device-level functions of one VkDevice (loaded with vkGetDeviceProcAddr).
struct DeviceFunctions {
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_DECLARE_MEMBER)
};

// dlopens the loader and creates an instance (Vulkan 1.2 when the loader supports it, else
// 1.1). kUnavailable naming the reason when there is no loader or no instance.
Result<std::shared_ptr<VulkanInstance>> create_vulkan_instance();

// Loads every device function; kUnavailable naming the first one missing.
Status load_device_functions(const VulkanInstance& instance, VkDevice device, DeviceFunctions& out);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
std::string vk_result_name(VkResult result);
// A Status for a failed call: kOutOfMemory for the out-of-memory results, else kInternal.
Status vk_error(const std::string& what, VkResult result);

}  // namespace kiln::runtime::vulkan
