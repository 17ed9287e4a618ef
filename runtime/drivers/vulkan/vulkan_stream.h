// VulkanStream: executes a VulkanExecutable's plan on the device's compute queue.
//
// The first execute() for a given (executable, arena, input/output buffers, symbol bindings)
// prepares everything once: descriptor sets pointing at the buffers and arena slices, and ONE
// command buffer holding every dispatch in plan launch order with pipeline barriers between
// dependent dispatches (and timestamp queries around each dispatch when the device has timers).
// Later executions with the same key resubmit that command buffer unchanged; a different key
// re-records it.
//
// Ownership: created by VulkanDevice::create_stream; holds the VulkanContext. Thread-safety: one
// thread at a time (hal::Stream); several streams of one device run concurrently (the queue
// submission is serialized inside the VulkanContext).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "runtime/drivers/vulkan/vulkan_context.h"
#include "runtime/drivers/vulkan/vulkan_executable.h"
#include "runtime/hal/stream.h"

namespace kiln::runtime::vulkan {

class VulkanStream final : public hal::Stream {
 public:
  static Result<std::unique_ptr<hal::Stream>> create(std::shared_ptr<VulkanContext> context);
  ~VulkanStream() override;

  Status execute(const hal::Executable& executable, const hal::ExecuteArgs& args) override;
  Status synchronize() override;

 private:
  // What the recorded command buffer depends on.
  struct PreparedKey {
    uint64_t executable = 0;
    std::vector<uint64_t> buffers;  // serials of inputs, outputs, arena (0 when none)
    ir::SymbolBindings bindings;
    bool operator==(const PreparedKey&) const = default;
  };
  // One buffer binding: a VkBuffer range.
  struct BoundRange {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize offset = 0;
    VkDeviceSize range = VK_WHOLE_SIZE;  // bytes; VK_WHOLE_SIZE for a whole buffer
    VkDeviceSize end = 0;                // offset + bytes, for hazard tracking
  };

  explicit VulkanStream(std::shared_ptr<VulkanContext> context) : context_(std::move(context)) {}
  Status record(const VulkanExecutable& exe, const hal::ExecuteArgs& args, const ir::SymbolBindings& bindings);
  Result<BoundRange> resolve(const VulkanExecutable& exe, const hal::ExecuteArgs& args,
                             const ir::SymbolBindings& bindings, ir::NodeId value, int depth) const;
  void release_prepared();
  Status collect_profile(hal::Profile& profile);

  std::shared_ptr<VulkanContext> context_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  VkQueryPool query_pool_ = VK_NULL_HANDLE;

  bool prepared_ = false;
  PreparedKey key_;
  // One entry per recorded dispatch (kernel index, provenance name, kind, source nodes),
  // copied at record time so profiles never reach back into the executable.
  std::vector<hal::KernelTiming> launch_timings_;

  bool pending_ = false;  // a submission not yet waited for
  hal::Profile* pending_profile_ = nullptr;
  std::chrono::steady_clock::time_point submit_time_;
};

}  // namespace kiln::runtime::vulkan
