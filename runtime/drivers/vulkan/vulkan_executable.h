// VulkanExecutable: an artifact's "vulkan" kernels turned into compute pipelines, plus the
// artifact's constants uploaded to device buffers once.
//
// Per kernel: a shader module (entry point from the KernelBinary, "main" by default), a
// descriptor set layout (binding i = the i-th kBuffer arg, storage buffer, set 0), a
// push-constant range (one uint32 per kSymbol arg, in arg order) and the pipeline.
//
// Ownership: created by VulkanDevice::load_executable; holds the artifact (shared, immutable)
// and the VulkanContext. Thread-safety: immutable after creation; streams use it concurrently.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "runtime/drivers/vulkan/vulkan_context.h"
#include "runtime/hal/executable.h"

namespace kiln::runtime::vulkan {

// One kernel's pipeline. Kernels with the same SPIR-V (kilnc gives kernels that differ only in
// their names one blob) share the first one's Vulkan objects, so each distinct shader is
// compiled by the driver once per artifact; only the owner destroys them.
struct KernelPipeline {
  const artifact::KernelBinary* binary = nullptr;  // points into the shared artifact
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t buffer_args = 0;
  uint32_t symbol_args = 0;
  bool owns_objects = true;  // false: the handles are another kernel's
};

class VulkanExecutable final : public hal::Executable {
 public:
  // A kernel may have several "vulkan" binaries (variants, see codegen/vulkan/vulkan_target.cpp);
  // each kernel runs the first one, in artifact order, whose required features the device has
  // (VulkanContext::has_feature, which honours KILN_VULKAN_HIDE_FEATURES).
  // kUnsupported when the artifact has no "vulkan" kernels (listing the targets it has) or no
  // variant of a kernel fits the device (naming the kernel and, per variant, the missing
  // features); kCorrupt when a kernel's args or the plan are inconsistent.
  static Result<std::unique_ptr<hal::Executable>> create(
      std::shared_ptr<VulkanContext> context, std::shared_ptr<const artifact::LoadedArtifact> artifact);
  ~VulkanExecutable() override;

  const artifact::LoadedArtifact& artifact() const override { return *artifact_; }
  bool uses_arena() const override { return true; }

  const VulkanContext* context() const { return context_.get(); }
  // The pipeline of Graph kernel `kernel_index` (every launched kernel has one).
  const KernelPipeline& pipeline(uint32_t kernel_index) const { return pipelines_.at(kernel_index); }
  // The device buffer holding constant `value`, or null.
  const VulkanBuffer* constant_buffer(ir::NodeId value) const;
  // Unique for the process lifetime (streams cache prepared work by it, not by address).
  uint64_t serial() const { return serial_; }

 private:
  VulkanExecutable(std::shared_ptr<VulkanContext> context, std::shared_ptr<const artifact::LoadedArtifact> artifact);
  // The first of one kernel's variants that the device can run, else kUnsupported.
  Result<const artifact::KernelBinary*> choose_variant(
      const std::vector<const artifact::KernelBinary*>& variants) const;
  // Checks the binary's arguments against the plan and counts them into `out` (binary too).
  Status count_args(const artifact::KernelBinary& binary, KernelPipeline& out) const;
  Status build_pipeline(const artifact::KernelBinary& binary, KernelPipeline& out);
  Status upload_constants();

  std::shared_ptr<VulkanContext> context_;
  std::shared_ptr<const artifact::LoadedArtifact> artifact_;
  std::map<uint32_t, KernelPipeline> pipelines_;
  std::map<ir::NodeId, std::unique_ptr<hal::Buffer>> constants_;
  uint64_t serial_;
};

}  // namespace kiln::runtime::vulkan
