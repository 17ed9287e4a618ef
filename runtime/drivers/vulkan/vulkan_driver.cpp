#include "runtime/drivers/vulkan/vulkan_driver.h"

#include <mutex>

#include "runtime/drivers/vulkan/vulkan_context.h"
#include "runtime/drivers/vulkan/vulkan_executable.h"
#include "runtime/drivers/vulkan/vulkan_stream.h"
#include "runtime/hal/driver_catalog.h"

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

class VulkanDriver final : public hal::CatalogDriver<PhysicalDeviceEntry> {
 public:
  VulkanDriver() : CatalogDriver("vulkan", "Vulkan") {}

 protected:
  // Loads Vulkan and lists devices once; the results are immutable afterwards.
  const hal::DeviceCatalog<PhysicalDeviceEntry>& catalog() const override {
    std::call_once(once_, [this] {
      Result<std::shared_ptr<VulkanInstance>> vk = create_vulkan_instance();
      if (!vk.is_ok()) {
        catalog_.unavailable_reason = vk.status().message();
        return;
      }
      instance_ = std::move(vk).value();
      catalog_.devices = enumerate_physical_devices(*instance_);
      if (catalog_.devices.empty())
        catalog_.unavailable_reason = "no Vulkan 1.1 device with a compute queue was found";
    });
    return catalog_;
  }

  Result<std::unique_ptr<hal::Device>> open(const PhysicalDeviceEntry& entry,
                                            const hal::DeviceOptions&) const override {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<VulkanContext> context, VulkanContext::create(instance_, entry));
    return std::unique_ptr<hal::Device>(new VulkanDevice(entry.info, std::move(context)));
  }

 private:
  mutable std::once_flag once_;
  mutable std::shared_ptr<VulkanInstance> instance_;  // set once, with catalog_
  mutable hal::DeviceCatalog<PhysicalDeviceEntry> catalog_;
};

}  // namespace

std::unique_ptr<hal::Driver> create_vulkan_driver() { return std::make_unique<VulkanDriver>(); }

}  // namespace kiln::runtime::vulkan
