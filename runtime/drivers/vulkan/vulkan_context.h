// VulkanContext: one opened VkDevice with its compute queue, device functions, limits, enabled
// features and the helpers the Vulkan Buffer, Executable and Stream share (memory allocation,
// synchronous transfers, queue submission). VulkanBuffer: a hal::Buffer on it.
//
// Ownership: shared (std::shared_ptr) by the hal::Device and every object created on it, so the
// VkDevice is destroyed after its last buffer/executable/stream. It holds the VulkanInstance.
// Thread-safety: all methods are safe to call concurrently. The one VkQueue is shared by every
// stream: submissions are serialized by `queue_mutex_`; the transfer command pool used for
// read()/write() is guarded by `transfer_mutex_`.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/drivers/vulkan/vulkan_api.h"
#include "runtime/hal/buffer.h"
#include "runtime/hal/types.h"
#include "support/status.h"

namespace kiln::runtime::vulkan {

// A physical device with a compute queue, as listed by the driver.
struct PhysicalDeviceEntry {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  hal::DeviceInfo info;
};
std::vector<PhysicalDeviceEntry> enumerate_physical_devices(const VulkanInstance& vk);

// Kernel feature names (artifact::KernelBinary::required_features) the driver understands, as
// Vulkan names them: shaderFloat16, shaderInt8, shaderInt16, shaderInt64,
// storageBuffer16BitAccess, storageBuffer8BitAccess. Short aliases (float16, int8, int16,
// int64, storage16, storage8) and codegen's snake_case names (shader_int64,
// storage_buffer_16bit, storage_buffer_8bit, shader_float16, shader_int8, shader_int16) are
// accepted too.
std::string canonical_feature_name(const std::string& name);  // "" when unknown

// Testing knob: the environment variable KILN_VULKAN_HIDE_FEATURES, a comma list of feature
// names in any of the spellings above (e.g. "storage_buffer_16bit,storage_buffer_8bit,
// shader_int64"), makes every device opened afterwards treat those features as absent: they are
// neither enabled on the VkDevice nor reported by has_feature(), so kernels fall back to the
// variants that do without them (or fail to load, naming the feature). It exists so that the
// fallback paths can be tested on a device that has every feature (lavapipe); it is read when a
// device is opened. An unknown name makes opening the device fail (kInvalidArgument).
inline constexpr const char* kHideFeaturesEnv = "KILN_VULKAN_HIDE_FEATURES";
// Parses such a list into canonical names; kInvalidArgument naming an unknown entry.
Result<std::set<std::string>> parse_feature_list(std::string_view list);

// A VkBuffer with its memory.
struct BufferAllocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::byte* mapped = nullptr;  // non-null when the memory is host-visible (kept mapped)
  bool coherent = false;
  size_t size = 0;  // the bytes asked for
};

class VulkanContext {
 public:
  static Result<std::shared_ptr<VulkanContext>> create(std::shared_ptr<VulkanInstance> vk,
                                                       const PhysicalDeviceEntry& entry);
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  const DeviceFunctions& fn() const { return fn_; }
  VkDevice device() const { return device_; }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceLimits& limits() const { return limits_; }
  // Nanoseconds per timestamp tick; timestamps are usable only when timestamp_valid_bits() > 0.
  double timestamp_period_ns() const { return timestamp_period_ns_; }
  uint32_t timestamp_valid_bits() const { return timestamp_valid_bits_; }
  // Whether the device enabled a feature (canonical name).
  bool has_feature(const std::string& canonical_name) const;
  std::string enabled_features() const;  // "shaderInt64, ..." for messages
  // The features KILN_VULKAN_HIDE_FEATURES hid ("shaderInt64, ..."), "" when none: for messages.
  std::string hidden_features() const;

  // A storage buffer (device-local when possible; mapped when host-visible) or a host-visible
  // staging buffer. kOutOfMemory when the memory cannot be had.
  Result<BufferAllocation> allocate(size_t bytes, bool staging);
  void release(BufferAllocation& allocation);

  // Synchronous host <-> device-local transfers through the context's staging buffer, which is
  // kept (and grown to the largest transfer so far) so that a run's uploads and downloads cost
  // no memory allocation: allocating host-visible memory takes milliseconds on some drivers.
  Status upload(VkBuffer dst, size_t dst_offset, std::span<const std::byte> data);
  Status download(VkBuffer src, size_t src_offset, std::span<std::byte> out);
  // Submits one command buffer on the shared queue.
  Status submit(VkCommandBuffer command_buffer, VkFence fence);

 private:
  VulkanContext() = default;

  std::shared_ptr<VulkanInstance> vk_;
  DeviceFunctions fn_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceLimits limits_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  double timestamp_period_ns_ = 1;
  uint32_t timestamp_valid_bits_ = 0;
  std::map<std::string, bool> features_;  // canonical name -> enabled (false when hidden)
  std::set<std::string> hidden_;          // canonical names hidden by KILN_VULKAN_HIDE_FEATURES

  std::mutex queue_mutex_;
  // Copies `bytes` between buffers on the queue and waits; transfer_mutex_ must be held.
  Status copy_and_wait_locked(VkBuffer src, size_t src_offset, VkBuffer dst, size_t dst_offset, size_t bytes);
  // The staging buffer with room for `bytes`; transfer_mutex_ must be held.
  Result<BufferAllocation*> staging_locked(size_t bytes);

  std::mutex transfer_mutex_;
  BufferAllocation staging_;  // guarded by transfer_mutex_
  VkCommandPool transfer_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer transfer_commands_ = VK_NULL_HANDLE;
  VkFence transfer_fence_ = VK_NULL_HANDLE;
};

// A device storage buffer. host_data() is the mapping when the memory is host-visible and
// coherent (lavapipe, integrated GPUs); otherwise read()/write() go through a staging buffer.
class VulkanBuffer final : public hal::Buffer {
 public:
  static Result<std::unique_ptr<hal::Buffer>> create(std::shared_ptr<VulkanContext> context, size_t bytes);
  ~VulkanBuffer() override;

  size_t size() const override { return size_; }
  std::byte* host_data() override { return allocation_.coherent ? allocation_.mapped : nullptr; }
  Status write(size_t offset, std::span<const std::byte> data) override;
  Status read(size_t offset, std::span<std::byte> out) const override;

  VkBuffer handle() const { return allocation_.buffer; }
  const VulkanContext* context() const { return context_.get(); }
  // Unique for the process lifetime (streams cache descriptor sets by it: handles get reused).
  uint64_t serial() const { return serial_; }

 private:
  VulkanBuffer(std::shared_ptr<VulkanContext> context, BufferAllocation allocation, size_t size)
      : context_(std::move(context)), allocation_(allocation), size_(size), serial_(next_serial()) {}
  static uint64_t next_serial();
  Status check_range(size_t offset, size_t count) const;

  std::shared_ptr<VulkanContext> context_;
  BufferAllocation allocation_;
  size_t size_;
  uint64_t serial_;
};

}  // namespace kiln::runtime::vulkan
