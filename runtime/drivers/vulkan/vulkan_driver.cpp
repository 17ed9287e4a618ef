#include "runtime/drivers/vulkan/vulkan_driver.h"

#include <mutex>

#include "runtime/drivers/vulkan/vulkan_context.h"
#include "runtime/drivers/vulkan/vulkan_executable.h"
#include "runtime/drivers/vulkan/vulkan_stream.h"

namespace kiln::runtime::vulkan {
namespace {

class VulkanDevice final : public hal::Device {
 public:
  VulkanDevice(hal::DeviceInfo info, std::shared_ptr<VulkanContext> context)
      : info_(std::move(info)), context_(std::move(context)) {}

  const hal::DeviceInfo& info() const override { return info_; }
  bool has_device_timers() const override { return context_->timestamp_valid_bits() > 0; }
  Result<std::unique_ptr<hal::Buffer>> allocate(size_t bytes) override {
    return VulkanBuffer::create(context_, bytes);
  }
  Result<std::unique_ptr<hal::Executable>> load_executable(
      std::shared_ptr<const artifact::LoadedArtifact> artifact) override {
    return VulkanExecutable::create(context_, std::move(artifact));
  }
  Result<std::unique_ptr<hal::Stream>> create_stream() override { return VulkanStream::create(context_); }

 private:
  hal::DeviceInfo info_;
  std::shared_ptr<VulkanContext> context_;
};

class VulkanDriver final : public hal::Driver {
 public:
  std::string_view name() const override { return "vulkan"; }

  std::vector<hal::DeviceInfo> devices() const override {
    initialize();
    std::vector<hal::DeviceInfo> out;
    for (const PhysicalDeviceEntry& e : physical_) out.push_back(e.info);
    return out;
  }

  std::string unavailable_reason() const override {
    initialize();
    return reason_;
  }

  Result<std::unique_ptr<hal::Device>> open_device(std::string_view id) const override {
    initialize();
    for (const PhysicalDeviceEntry& e : physical_) {
      if (e.info.id != id) continue;
      KILN_ASSIGN_OR_RETURN(std::shared_ptr<VulkanContext> context, VulkanContext::create(instance_, e));
      return std::unique_ptr<hal::Device>(new VulkanDevice(e.info, std::move(context)));
    }
    return not_found("the Vulkan driver has no device '" + std::string(id) + "'" +
                     (reason_.empty() ? "" : " (" + reason_ + ")"));
  }

 private:
  // Loads Vulkan and lists devices once; the results are immutable afterwards.
  void initialize() const {
    std::call_once(once_, [this] {
      Result<std::shared_ptr<VulkanInstance>> vk = create_vulkan_instance();
      if (!vk.is_ok()) {
        reason_ = vk.status().message();
        return;
      }
      instance_ = std::move(vk).value();
      physical_ = enumerate_physical_devices(*instance_);
      if (physical_.empty()) reason_ = "no Vulkan 1.1 device with a compute queue was found";
    });
  }

  mutable std::once_flag once_;
  mutable std::shared_ptr<VulkanInstance> instance_;
  mutable std::vector<PhysicalDeviceEntry> physical_;
  mutable std::string reason_;
};

}  // namespace

std::unique_ptr<hal::Driver> create_vulkan_driver() { return std::make_unique<VulkanDriver>(); }

}  // namespace kiln::runtime::vulkan
