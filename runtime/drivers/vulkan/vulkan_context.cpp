#include "runtime/drivers/vulkan/vulkan_context.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kiln::runtime::vulkan {
namespace {

bool has_extension(const std::vector<VkExtensionProperties>& extensions, const char* name) {
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

uint32_t effective_version(const VulkanInstance& vk, VkPhysicalDevice physical) {
  VkPhysicalDeviceProperties props;
  vk.vkGetPhysicalDeviceProperties(physical, &props);
  return std::min(vk.api_version, props.apiVersion);
}

}  // namespace

std::vector<PhysicalDeviceEntry> enumerate_physical_devices(const VulkanInstance& vk) {
  std::vector<PhysicalDeviceEntry> out;
  uint32_t count = 0;
  if (vk.vkEnumeratePhysicalDevices(vk.instance, &count, nullptr) != VK_SUCCESS) return out;
  std::vector<VkPhysicalDevice> physicals(count);
  if (vk.vkEnumeratePhysicalDevices(vk.instance, &count, physicals.data()) != VK_SUCCESS) return out;
  physicals.resize(count);
  for (VkPhysicalDevice physical : physicals) {
    VkPhysicalDeviceProperties props;
    vk.vkGetPhysicalDeviceProperties(physical, &props);
    if (props.apiVersion < VK_API_VERSION_1_1) continue;  // the driver needs Vulkan 1.1
    uint32_t families = 0;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> family_props(families);
    vk.vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, family_props.data());
    // Prefer a compute queue without graphics (dedicated compute), else any compute queue.
    int chosen = -1;
    for (uint32_t i = 0; i < families; ++i) {
      if (!(family_props[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
      if (chosen < 0 || !(family_props[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) chosen = int(i);
      if (!(family_props[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) break;
    }
    if (chosen < 0) continue;
    PhysicalDeviceEntry entry;
    entry.physical = physical;
    entry.queue_family = uint32_t(chosen);
    entry.info.id = "vulkan:" + std::to_string(out.size());
    entry.info.driver = "vulkan";
    entry.info.description = std::string(props.deviceName) + " (Vulkan " +
                             std::to_string(VK_API_VERSION_MAJOR(props.apiVersion)) + "." +
                             std::to_string(VK_API_VERSION_MINOR(props.apiVersion)) + ")";
    switch (props.deviceType) {
      case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        entry.info.type = hal::DeviceType::kDiscreteGpu;
        entry.info.priority = 300;
        break;
      case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        entry.info.type = hal::DeviceType::kIntegratedGpu;
        entry.info.priority = 200;
        break;
      default:  // CPU (lavapipe) and "other"
        entry.info.type = hal::DeviceType::kCpu;
        entry.info.priority = 100;
        break;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::string canonical_feature_name(const std::string& name) {
  static const std::map<std::string, std::string> kNames = {
      {"shaderFloat16", "shaderFloat16"}, {"float16", "shaderFloat16"}, {"f16", "shaderFloat16"},
      {"shaderInt8", "shaderInt8"}, {"int8", "shaderInt8"},
      {"shaderInt16", "shaderInt16"}, {"int16", "shaderInt16"},
      {"shaderInt64", "shaderInt64"}, {"int64", "shaderInt64"}, {"i64", "shaderInt64"},
      {"shaderFloat64", "shaderFloat64"}, {"float64", "shaderFloat64"}, {"f64", "shaderFloat64"},
      {"storageBuffer16BitAccess", "storageBuffer16BitAccess"}, {"storage16", "storageBuffer16BitAccess"},
      {"storageBuffer8BitAccess", "storageBuffer8BitAccess"}, {"storage8", "storageBuffer8BitAccess"},
      // The names codegen's GLSL emitter records (codegen/c_family.cpp).
      {"shader_float16", "shaderFloat16"}, {"shader_int8", "shaderInt8"}, {"shader_int16", "shaderInt16"},
      {"shader_int64", "shaderInt64"}, {"shader_float64", "shaderFloat64"},
      {"storage_buffer_16bit", "storageBuffer16BitAccess"},
      {"storage_buffer_8bit", "storageBuffer8BitAccess"},
  };
  auto it = kNames.find(name);
  return it == kNames.end() ? std::string() : it->second;
}

Result<std::set<std::string>> parse_feature_list(std::string_view list) {
  std::set<std::string> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(begin, end - begin);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) {
      const std::string canonical = canonical_feature_name(std::string(item));
      if (canonical.empty())
        return invalid_argument(std::string(kHideFeaturesEnv) + ": unknown Vulkan feature '" + std::string(item) +
                                "' (known: shaderFloat16, shaderFloat64, shaderInt8, shaderInt16, shaderInt64, "
                                "storageBuffer16BitAccess, storageBuffer8BitAccess, or codegen's names "
                                "such as storage_buffer_16bit)");
      out.insert(canonical);
    }
    begin = end + 1;
  }
  return out;
}

Result<std::shared_ptr<VulkanContext>> VulkanContext::create(std::shared_ptr<VulkanInstance> vk,
                                                             const PhysicalDeviceEntry& entry) {
  std::shared_ptr<VulkanContext> ctx(new VulkanContext());
  if (const char* hide = std::getenv(kHideFeaturesEnv)) {
    KILN_ASSIGN_OR_RETURN(ctx->hidden_, parse_feature_list(hide));
  }
  ctx->vk_ = vk;
  ctx->queue_family_ = entry.queue_family;
  VkPhysicalDeviceProperties props;
  vk->vkGetPhysicalDeviceProperties(entry.physical, &props);
  ctx->limits_ = props.limits;
  ctx->timestamp_period_ns_ = props.limits.timestampPeriod;
  vk->vkGetPhysicalDeviceMemoryProperties(entry.physical, &ctx->memory_);
  uint32_t families = 0;
  vk->vkGetPhysicalDeviceQueueFamilyProperties(entry.physical, &families, nullptr);
  std::vector<VkQueueFamilyProperties> family_props(families);
  vk->vkGetPhysicalDeviceQueueFamilyProperties(entry.physical, &families, family_props.data());
  // Timestamps work on the queue when its family has valid bits (timestampComputeAndGraphics
  // only promises them on every graphics and compute queue) and ticks have a length.
  if (entry.queue_family < families && props.limits.timestampPeriod > 0)
    ctx->timestamp_valid_bits_ = family_props[entry.queue_family].timestampValidBits;

  uint32_t ext_count = 0;
  vk->vkEnumerateDeviceExtensionProperties(entry.physical, nullptr, &ext_count, nullptr);
  std::vector<VkExtensionProperties> extensions(ext_count);
  vk->vkEnumerateDeviceExtensionProperties(entry.physical, nullptr, &ext_count, extensions.data());
  const uint32_t version = effective_version(*vk, entry.physical);
  const bool core12 = version >= VK_API_VERSION_1_2;
  // Before 1.2 these are extensions: chain their feature structs only where present.
  const bool has_f16i8 = core12 || has_extension(extensions, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  const bool has_8bit = core12 || has_extension(extensions, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);

  VkPhysicalDeviceShaderFloat16Int8Features f16i8{};
  f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  VkPhysicalDevice8BitStorageFeatures storage8{};
  storage8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceFeatures2 features2{};
  features2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  void** next = &features2.pNext;
  auto chain = [&](auto& s) {
    *next = &s;
    next = &s.pNext;
  };
  chain(storage16);
  if (has_f16i8) chain(f16i8);
  if (has_8bit) chain(storage8);
  vk->vkGetPhysicalDeviceFeatures2(entry.physical, &features2);

  // Enable exactly the compute-relevant features the device has; drop everything else.
  VkPhysicalDeviceFeatures2 enable = features2;
  enable.features = VkPhysicalDeviceFeatures{};
  enable.features.shaderInt64 = features2.features.shaderInt64;
  enable.features.shaderInt16 = features2.features.shaderInt16;
  enable.features.shaderFloat64 = features2.features.shaderFloat64;
  storage16.uniformAndStorageBuffer16BitAccess = VK_FALSE;
  storage16.storageInputOutput16 = VK_FALSE;
  storage16.storagePushConstant16 = VK_FALSE;
  storage8.uniformAndStorageBuffer8BitAccess = VK_FALSE;
  storage8.storagePushConstant8 = VK_FALSE;
  // Hidden features (the testing knob) are treated as absent: not enabled, not reported.
  auto hidden = [&](const char* name) { return ctx->hidden_.count(name) > 0; };
  if (hidden("shaderFloat16")) f16i8.shaderFloat16 = VK_FALSE;
  if (hidden("shaderInt8")) f16i8.shaderInt8 = VK_FALSE;
  if (hidden("shaderInt16")) enable.features.shaderInt16 = VK_FALSE;
  if (hidden("shaderInt64")) enable.features.shaderInt64 = VK_FALSE;
  if (hidden("shaderFloat64")) enable.features.shaderFloat64 = VK_FALSE;
  if (hidden("storageBuffer16BitAccess")) storage16.storageBuffer16BitAccess = VK_FALSE;
  if (hidden("storageBuffer8BitAccess")) storage8.storageBuffer8BitAccess = VK_FALSE;
  ctx->features_ = {
      {"shaderFloat16", f16i8.shaderFloat16 == VK_TRUE},
      {"shaderInt8", f16i8.shaderInt8 == VK_TRUE},
      {"shaderInt16", enable.features.shaderInt16 == VK_TRUE},
      {"shaderInt64", enable.features.shaderInt64 == VK_TRUE},
      {"shaderFloat64", enable.features.shaderFloat64 == VK_TRUE},
      {"storageBuffer16BitAccess", storage16.storageBuffer16BitAccess == VK_TRUE},
      {"storageBuffer8BitAccess", storage8.storageBuffer8BitAccess == VK_TRUE},
  };
  std::vector<const char*> enabled_extensions;
  if (!core12) {
    if (has_f16i8 && (f16i8.shaderFloat16 || f16i8.shaderInt8))
      enabled_extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    if (has_8bit && storage8.storageBuffer8BitAccess) enabled_extensions.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = entry.queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkDeviceCreateInfo device_info{};
  device_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  device_info.pNext = &enable;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  device_info.enabledExtensionCount = uint32_t(enabled_extensions.size());
  device_info.ppEnabledExtensionNames = enabled_extensions.data();
  VkResult r = vk->vkCreateDevice(entry.physical, &device_info, nullptr, &ctx->device_);
  if (r != VK_SUCCESS) {
    ctx->device_ = VK_NULL_HANDLE;
    return vk_error("vkCreateDevice for " + entry.info.description, r);
  }
  KILN_RETURN_IF_ERROR(load_device_functions(*vk, ctx->device_, ctx->fn_));
  ctx->fn_.vkGetDeviceQueue(ctx->device_, entry.queue_family, 0, &ctx->queue_);

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = entry.queue_family;
  r = ctx->fn_.vkCreateCommandPool(ctx->device_, &pool_info, nullptr, &ctx->transfer_pool_);
  if (r != VK_SUCCESS) return vk_error("vkCreateCommandPool", r);
  VkCommandBufferAllocateInfo alloc_info{};
  alloc_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc_info.commandPool = ctx->transfer_pool_;
  alloc_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc_info.commandBufferCount = 1;
  r = ctx->fn_.vkAllocateCommandBuffers(ctx->device_, &alloc_info, &ctx->transfer_commands_);
  if (r != VK_SUCCESS) return vk_error("vkAllocateCommandBuffers", r);
  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  r = ctx->fn_.vkCreateFence(ctx->device_, &fence_info, nullptr, &ctx->transfer_fence_);
  if (r != VK_SUCCESS) return vk_error("vkCreateFence", r);
  return ctx;
}

VulkanContext::~VulkanContext() {
  if (device_ == VK_NULL_HANDLE) return;
  if (fn_.vkDeviceWaitIdle) fn_.vkDeviceWaitIdle(device_);
  release(staging_);
  if (transfer_fence_) fn_.vkDestroyFence(device_, transfer_fence_, nullptr);
  if (transfer_pool_) fn_.vkDestroyCommandPool(device_, transfer_pool_, nullptr);
  if (fn_.vkDestroyDevice) fn_.vkDestroyDevice(device_, nullptr);
}

bool VulkanContext::has_feature(const std::string& canonical_name) const {
  auto it = features_.find(canonical_name);
  return it != features_.end() && it->second;
}

std::string VulkanContext::enabled_features() const {
  std::string out;
  for (const auto& [name, on] : features_)
    if (on) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

std::string VulkanContext::hidden_features() const {
  std::string out;
  for (const std::string& name : hidden_) out += (out.empty() ? "" : ", ") + name;
  return out;
}

Result<BufferAllocation> VulkanContext::allocate(size_t bytes, bool staging) {
  // Vulkan forbids empty buffers; a 0-byte hal::Buffer still gets a small VkBuffer to bind.
  // The VkBuffer is a whole number of 32-bit words so that kernels reading 8/16-bit data as
  // words (codegen's word-storage variants) never touch memory outside it; `size` (what the
  // hal::Buffer reports and checks) stays the bytes asked for.
  if (uint64_t(bytes) > UINT64_MAX - 3)
    return Status(ErrorCode::kOutOfMemory, "Vulkan: cannot create a buffer of " + std::to_string(bytes) + " bytes");
  const VkDeviceSize vk_bytes = std::max<VkDeviceSize>((VkDeviceSize(bytes) + 3) & ~VkDeviceSize(3), 16);
  BufferAllocation a;
  a.size = bytes;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = vk_bytes;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               (staging ? 0 : VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = fn_.vkCreateBuffer(device_, &info, nullptr, &a.buffer);
  if (r != VK_SUCCESS)
    return Status(ErrorCode::kOutOfMemory, "Vulkan: cannot create a buffer of " + std::to_string(bytes) +
                                               " bytes: " + vk_result_name(r));
  VkMemoryRequirements req;
  fn_.vkGetBufferMemoryRequirements(device_, a.buffer, &req);

  // Storage: the first device-local type (types are ordered best first); staging: host-visible
  // and coherent. Fall back to any allowed type.
  const VkMemoryPropertyFlags wanted =
      staging ? (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
              : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  int type = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount && type < 0; ++i)
    if ((req.memoryTypeBits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & wanted) == wanted &&
        memory_.memoryHeaps[memory_.memoryTypes[i].heapIndex].size >= req.size)
      type = int(i);
  for (uint32_t i = 0; i < memory_.memoryTypeCount && type < 0 && !staging; ++i)
    if ((req.memoryTypeBits & (1u << i)) && memory_.memoryHeaps[memory_.memoryTypes[i].heapIndex].size >= req.size)
      type = int(i);
  if (type < 0) {
    fn_.vkDestroyBuffer(device_, a.buffer, nullptr);
    return Status(ErrorCode::kOutOfMemory, "Vulkan: no memory heap can hold " + std::to_string(bytes) + " bytes");
  }
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = uint32_t(type);
  r = fn_.vkAllocateMemory(device_, &alloc, nullptr, &a.memory);
  if (r != VK_SUCCESS) {
    fn_.vkDestroyBuffer(device_, a.buffer, nullptr);
    return Status(ErrorCode::kOutOfMemory, "Vulkan: cannot allocate " + std::to_string(bytes) +
                                               " bytes of device memory: " + vk_result_name(r));
  }
  r = fn_.vkBindBufferMemory(device_, a.buffer, a.memory, 0);
  const VkMemoryPropertyFlags flags = memory_.memoryTypes[type].propertyFlags;
  if (r == VK_SUCCESS && (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
    void* p = nullptr;
    r = fn_.vkMapMemory(device_, a.memory, 0, VK_WHOLE_SIZE, 0, &p);
    a.mapped = static_cast<std::byte*>(p);
    a.coherent = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  }
  if (r != VK_SUCCESS) {
    release(a);
    return vk_error("binding or mapping buffer memory", r);
  }
  return a;
}

void VulkanContext::release(BufferAllocation& a) {
  if (a.buffer) fn_.vkDestroyBuffer(device_, a.buffer, nullptr);
  if (a.memory) fn_.vkFreeMemory(device_, a.memory, nullptr);  // unmaps implicitly
  a = BufferAllocation{};
}

Status VulkanContext::submit(VkCommandBuffer command_buffer, VkFence fence) {
  VkSubmitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  info.commandBufferCount = 1;
  info.pCommandBuffers = &command_buffer;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  VkResult r = fn_.vkQueueSubmit(queue_, 1, &info, fence);
  return r == VK_SUCCESS ? Status::ok() : vk_error("vkQueueSubmit", r);
}

Result<BufferAllocation*> VulkanContext::staging_locked(size_t bytes) {
  if (staging_.buffer && staging_.size >= bytes) return &staging_;
  // Grow geometrically so a sequence of growing transfers allocates O(log n) times.
  const size_t capacity = std::max<size_t>(bytes, 2 * staging_.size);
  release(staging_);
  KILN_ASSIGN_OR_RETURN(staging_, allocate(capacity, /*staging=*/true));
  return &staging_;
}

Status VulkanContext::upload(VkBuffer dst, size_t dst_offset, std::span<const std::byte> data) {
  std::lock_guard<std::mutex> lock(transfer_mutex_);
  KILN_ASSIGN_OR_RETURN(BufferAllocation* staging, staging_locked(data.size()));
  std::memcpy(staging->mapped, data.data(), data.size());
  return copy_and_wait_locked(staging->buffer, 0, dst, dst_offset, data.size());
}

Status VulkanContext::download(VkBuffer src, size_t src_offset, std::span<std::byte> out) {
  std::lock_guard<std::mutex> lock(transfer_mutex_);
  KILN_ASSIGN_OR_RETURN(BufferAllocation* staging, staging_locked(out.size()));
  KILN_RETURN_IF_ERROR(copy_and_wait_locked(src, src_offset, staging->buffer, 0, out.size()));
  std::memcpy(out.data(), staging->mapped, out.size());
  return Status::ok();
}

Status VulkanContext::copy_and_wait_locked(VkBuffer src, size_t src_offset, VkBuffer dst, size_t dst_offset,
                                           size_t bytes) {
  fn_.vkResetCommandBuffer(transfer_commands_, 0);
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = fn_.vkBeginCommandBuffer(transfer_commands_, &begin);
  if (r != VK_SUCCESS) return vk_error("vkBeginCommandBuffer", r);
  // Make earlier compute writes visible to the copy, and the copy visible to later work/host.
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  fn_.vkCmdPipelineBarrier(transfer_commands_,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                           VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  VkBufferCopy region{src_offset, dst_offset, bytes};
  fn_.vkCmdCopyBuffer(transfer_commands_, src, dst, 1, &region);
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  fn_.vkCmdPipelineBarrier(transfer_commands_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                           VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier,
                           0, nullptr, 0, nullptr);
  r = fn_.vkEndCommandBuffer(transfer_commands_);
  if (r != VK_SUCCESS) return vk_error("vkEndCommandBuffer", r);
  fn_.vkResetFences(device_, 1, &transfer_fence_);
  KILN_RETURN_IF_ERROR(submit(transfer_commands_, transfer_fence_));
  r = fn_.vkWaitForFences(device_, 1, &transfer_fence_, VK_TRUE, UINT64_MAX);
  return r == VK_SUCCESS ? Status::ok() : vk_error("waiting for a buffer copy", r);
}

// ---- VulkanBuffer ----

uint64_t VulkanBuffer::next_serial() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

Result<std::unique_ptr<hal::Buffer>> VulkanBuffer::create(std::shared_ptr<VulkanContext> context,
                                                          size_t bytes) {
  KILN_ASSIGN_OR_RETURN(BufferAllocation a, context->allocate(bytes, /*staging=*/false));
  return std::unique_ptr<hal::Buffer>(new VulkanBuffer(std::move(context), a, bytes));
}

VulkanBuffer::~VulkanBuffer() { context_->release(allocation_); }

Status VulkanBuffer::check_range(size_t offset, size_t count) const {
  if (offset > size_ || count > size_ - offset)
    return invalid_argument("buffer access of " + std::to_string(count) + " bytes at offset " +
                            std::to_string(offset) + " is outside the " + std::to_string(size_) +
                            "-byte buffer");
  return Status::ok();
}

Status VulkanBuffer::write(size_t offset, std::span<const std::byte> data) {
  KILN_RETURN_IF_ERROR(check_range(offset, data.size()));
  if (data.empty()) return Status::ok();
  const DeviceFunctions& fn = context_->fn();
  if (allocation_.mapped) {
    std::memcpy(allocation_.mapped + offset, data.data(), data.size());
    if (!allocation_.coherent) {
      VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, allocation_.memory, 0, VK_WHOLE_SIZE};
      VkResult r = fn.vkFlushMappedMemoryRanges(context_->device(), 1, &range);
      if (r != VK_SUCCESS) return vk_error("vkFlushMappedMemoryRanges", r);
    }
    return Status::ok();
  }
  return context_->upload(allocation_.buffer, offset, data);
}

Status VulkanBuffer::read(size_t offset, std::span<std::byte> out) const {
  KILN_RETURN_IF_ERROR(check_range(offset, out.size()));
  if (out.empty()) return Status::ok();
  const DeviceFunctions& fn = context_->fn();
  if (allocation_.mapped) {
    if (!allocation_.coherent) {
      VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, allocation_.memory, 0, VK_WHOLE_SIZE};
      VkResult r = fn.vkInvalidateMappedMemoryRanges(context_->device(), 1, &range);
      if (r != VK_SUCCESS) return vk_error("vkInvalidateMappedMemoryRanges", r);
    }
    std::memcpy(out.data(), allocation_.mapped + offset, out.size());
    return Status::ok();
  }
  return context_->download(allocation_.buffer, offset, out);  // thread-safe, so fine when const
}

}  // namespace kiln::runtime::vulkan
