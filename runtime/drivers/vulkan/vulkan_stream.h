// VulkanStream: executes a VulkanExecutable's plan on the device's compute queue.
//
// The first execute() for a given (executable, arena, input/output buffers, symbol bindings)
// prepares everything once: descriptor sets pointing at the buffers and arena slices, and ONE
// command buffer holding every dispatch in plan launch order with pipeline barriers between
// dependent dispatches. Later executions with the same key resubmit that command buffer
// unchanged; a different key re-records it.
//
// Timing: when the queue has timestamps (timestampValidBits > 0), the command buffer writes one
// at its start (top of pipe) and one at its end (bottom of pipe), which give
// last_execution_device_seconds(), and one before and after each dispatch, which give a
// profile's kernel times and starts; ticks are masked to the valid bits and scaled by
// timestampPeriod. Without timestamps a profile is one host-timed entry.
//
// Empty tensors: a launch with no work items is not recorded, and a zero-byte arena value is
// bound to a small placeholder buffer (the arena may be absent or end at its offset).
//
// Ownership: created by VulkanDevice::create_stream; holds the VulkanContext. Thread-safety: one
// thread at a time (hal::Stream); several streams of one device run concurrently (the queue
// submission is serialized inside the VulkanContext).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
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
  std::optional<double> last_execution_device_seconds() const override { return last_seconds_; }

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
                             const ir::SymbolBindings& bindings, ir::NodeId value, int depth);
  void release_prepared();
  // Reads the timestamps of the finished submission into last_seconds_ and, when given, the
  // profile.
  Status collect_times(hal::Profile* profile);

  std::shared_ptr<VulkanContext> context_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  VkQueryPool query_pool_ = VK_NULL_HANDLE;  // 2 + 2 per dispatch, when the queue has timestamps
  std::unique_ptr<hal::Buffer> empty_;       // the placeholder of zero-byte arena values

  bool prepared_ = false;
  PreparedKey key_;
  // One entry per recorded dispatch (kernel index, provenance name, kind, source nodes),
  // copied at record time so profiles never reach back into the executable.
  std::vector<hal::KernelTiming> launch_timings_;
  std::optional<double> last_seconds_;

  bool pending_ = false;  // a submission not yet waited for
  hal::Profile* pending_profile_ = nullptr;
  std::chrono::steady_clock::time_point submit_time_;
};

}  // namespace kiln::runtime::vulkan
