#include "runtime/drivers/vulkan/vulkan_executable.h"

#include <atomic>
#include <cstring>
#include <string_view>

namespace kiln::runtime::vulkan {
namespace {
std::atomic<uint64_t> next_executable_serial{1};

// Whether a SPIR-V module declares a GLCompute entry point named `name`. The artifact's blob
// checksum does not cover the entry-point name, and drivers do not defend against a pName the
// module lacks, so it is checked here. Bounds-checked: a damaged module gives false, never a read
// outside the blob.
bool has_compute_entry_point(std::span<const uint8_t> blob, const std::string& name) {
  constexpr uint32_t kMagic = 0x07230203u, kOpEntryPoint = 15, kGLCompute = 5;
  const size_t words = blob.size() / 4;
  auto word = [&](size_t i) {
    uint32_t w;
    std::memcpy(&w, blob.data() + 4 * i, 4);
    return w;
  };
  if (words < 5 || word(0) != kMagic) return false;
  for (size_t i = 5; i < words;) {
    const uint32_t count = word(i) >> 16, opcode = word(i) & 0xffffu;
    if (count == 0 || count > words - i) return false;
    if (opcode == kOpEntryPoint && count >= 4 && word(i + 1) == kGLCompute) {
      // The name is a NUL-terminated string from the instruction's fourth word on.
      const char* text = reinterpret_cast<const char*>(blob.data() + 4 * (i + 3));
      const size_t room = 4 * size_t(count - 3);
      const size_t length = strnlen(text, room);
      if (length < room && name == std::string_view(text, length)) return true;
    }
    i += count;
  }
  return false;
}

}  // namespace

VulkanExecutable::VulkanExecutable(std::shared_ptr<VulkanContext> context,
                                   std::shared_ptr<const artifact::LoadedArtifact> artifact)
    : context_(std::move(context)), artifact_(std::move(artifact)), serial_(next_executable_serial++) {}

Result<std::unique_ptr<hal::Executable>> VulkanExecutable::create(
    std::shared_ptr<VulkanContext> context, std::shared_ptr<const artifact::LoadedArtifact> artifact) {
  if (!artifact) return invalid_argument("Vulkan device: no artifact to load");
  std::unique_ptr<VulkanExecutable> exe(new VulkanExecutable(std::move(context), std::move(artifact)));
  const artifact::LoadedArtifact& a = *exe->artifact_;

  // The variants of each kernel, in artifact order (codegen writes the preferred one first).
  std::map<uint32_t, std::vector<const artifact::KernelBinary*>> variants;
  for (const artifact::KernelBinary& k : a.kernels) {
    if (k.target != artifact::kVulkanTarget) continue;
    if (k.format != "spirv")
      return unsupported("Vulkan device: kernel '" + k.kernel_name + "' has format '" + k.format +
                         "', expected 'spirv'");
    if (k.kernel_index >= a.graph.kernels().size())
      return corrupt("Vulkan kernel '" + k.kernel_name + "' refers to kernel " + std::to_string(k.kernel_index) +
                     " of a graph with " + std::to_string(a.graph.kernels().size()));
    variants[k.kernel_index].push_back(&k);
  }
  if (variants.empty()) {
    std::string targets;
    for (const std::string& t : a.targets()) targets += (targets.empty() ? "" : ", ") + t;
    return unsupported("the artifact has no kernels for target 'vulkan' (it has: " +
                       (targets.empty() ? std::string("none; compile it with kilnc --target=vulkan") : targets) +
                       ")");
  }
  // Choose every kernel's variant before building any pipeline, so that a kernel the device
  // cannot run is reported without compiling the others first.
  std::map<uint32_t, const artifact::KernelBinary*> chosen;
  for (const auto& [index, list] : variants) {
    KILN_ASSIGN_OR_RETURN(chosen[index], exe->choose_variant(list));
  }
  // Kernels with the same code (blob and entry point) share one pipeline.
  std::map<std::pair<std::string_view, std::string_view>, uint32_t> built;
  for (const auto& [index, binary] : chosen) {
    const std::string_view code(reinterpret_cast<const char*>(binary->blob.data()), binary->blob.size());
    auto [first, inserted] = built.emplace(std::make_pair(code, std::string_view(binary->entry_point)), index);
    KernelPipeline& pipeline = exe->pipelines_[index];
    if (inserted) {
      KILN_RETURN_IF_ERROR(exe->build_pipeline(*binary, pipeline));
      continue;
    }
    const KernelPipeline& owner = exe->pipelines_.at(first->second);
    pipeline = owner;
    pipeline.owns_objects = false;
    KILN_RETURN_IF_ERROR(exe->count_args(*binary, pipeline));
    if (pipeline.buffer_args != owner.buffer_args || pipeline.symbol_args != owner.symbol_args)
      return corrupt("Vulkan kernel '" + binary->kernel_name + "' has the code of '" + owner.binary->kernel_name +
                     "' but other arguments");
  }
  for (const ir::Launch& launch : a.plan.launches)
    if (!exe->pipelines_.count(launch.kernel))
      return corrupt("the artifact has no Vulkan kernel for launched kernel " + std::to_string(launch.kernel));
  KILN_RETURN_IF_ERROR(exe->upload_constants());
  return std::unique_ptr<hal::Executable>(std::move(exe));
}

Result<const artifact::KernelBinary*> VulkanExecutable::choose_variant(
    const std::vector<const artifact::KernelBinary*>& variants) const {
  // Per variant, what it needs that the device lacks ("'shaderInt64'", "unknown feature 'x'").
  std::vector<std::vector<std::string>> missing(variants.size());
  for (size_t v = 0; v < variants.size(); ++v) {
    for (const std::string& feature : variants[v]->required_features) {
      const std::string canonical = canonical_feature_name(feature);
      if (canonical.empty())
        missing[v].push_back("unknown feature '" + feature + "'");
      else if (!context_->has_feature(canonical))
        missing[v].push_back("'" + canonical + "'");
    }
    if (missing[v].empty()) return variants[v];
  }
  const std::string& name = variants.front()->kernel_name;
  std::string needs;
  if (variants.size() == 1) {
    for (size_t i = 0; i < missing[0].size(); ++i)
      needs += std::string(i == 0 ? "" : ", ") + (missing[0][i].rfind("unknown", 0) == 0 ? "" : "feature ") +
               missing[0][i];
  } else {
    for (size_t v = 0; v < variants.size(); ++v) {
      needs += std::string(v == 0 ? "" : "; ") + "variant " + std::to_string(v + 1) + " of " +
               std::to_string(variants.size()) + " needs ";
      for (size_t i = 0; i < missing[v].size(); ++i) needs += (i == 0 ? "" : ", ") + missing[v][i];
    }
  }
  const std::string hidden = context_->hidden_features();
  return unsupported("Vulkan device: kernel '" + name + "' requires " + needs +
                     ", which this device lacks (it has: " + context_->enabled_features() +
                     (hidden.empty() ? "" : "; hidden by " + std::string(kHideFeaturesEnv) + ": " + hidden) + ")");
}

Status VulkanExecutable::count_args(const artifact::KernelBinary& binary, KernelPipeline& p) const {
  p.binary = &binary;
  p.buffer_args = p.symbol_args = 0;
  for (const artifact::KernelArg& arg : binary.args) {
    if (arg.kind == artifact::KernelArg::Kind::kBuffer) {
      if (!artifact_->plan.find_buffer(arg.value))
        return corrupt("Vulkan kernel '" + binary.kernel_name + "' reads value " + std::to_string(arg.value) +
                       ", which the plan does not place");
      ++p.buffer_args;
    } else {
      ++p.symbol_args;
    }
  }
  return Status::ok();
}

Status VulkanExecutable::build_pipeline(const artifact::KernelBinary& binary, KernelPipeline& p) {
  const DeviceFunctions& fn = context_->fn();
  const VkDevice device = context_->device();
  KILN_RETURN_IF_ERROR(count_args(binary, p));
  // Drivers need not check this limit themselves (lavapipe crashes past it); kilnc's fusion keeps
  // kernels well below the limits of real devices.
  const uint32_t max_buffers = context_->limits().maxPerStageDescriptorStorageBuffers;
  if (p.buffer_args > max_buffers)
    return unsupported("Vulkan kernel '" + binary.kernel_name + "' takes " + std::to_string(p.buffer_args) +
                       " buffers; this device binds at most " + std::to_string(max_buffers) + " per kernel");
  if (p.symbol_args * 4 > context_->limits().maxPushConstantsSize)
    return unsupported("Vulkan kernel '" + binary.kernel_name + "' needs " + std::to_string(p.symbol_args * 4) +
                       " bytes of push constants; the device allows " +
                       std::to_string(context_->limits().maxPushConstantsSize));
  if (binary.blob.empty() || binary.blob.size() % 4 != 0)
    return corrupt("Vulkan kernel '" + binary.kernel_name + "' has a SPIR-V blob of " +
                   std::to_string(binary.blob.size()) + " bytes (not a whole number of words)");

  const std::string entry_point = binary.entry_point.empty() ? "main" : binary.entry_point;
  if (!has_compute_entry_point(binary.blob, entry_point))
    return corrupt("Vulkan kernel '" + binary.kernel_name + "': its SPIR-V has no compute entry point '" +
                   entry_point + "'");

  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = binary.blob.size();
  // KernelBinary blobs come from std::vector<uint8_t>, whose storage is suitably aligned for
  // uint32_t (operator new alignment).
  module_info.pCode = reinterpret_cast<const uint32_t*>(binary.blob.data());
  VkResult r = fn.vkCreateShaderModule(device, &module_info, nullptr, &p.module);
  if (r != VK_SUCCESS) return vk_error("vkCreateShaderModule for '" + binary.kernel_name + "'", r);

  std::vector<VkDescriptorSetLayoutBinding> bindings(p.buffer_args);
  for (uint32_t i = 0; i < p.buffer_args; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = p.buffer_args;
  set_info.pBindings = bindings.data();
  r = fn.vkCreateDescriptorSetLayout(device, &set_info, nullptr, &p.set_layout);
  if (r != VK_SUCCESS) return vk_error("vkCreateDescriptorSetLayout", r);

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, p.symbol_args * 4};
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &p.set_layout;
  layout_info.pushConstantRangeCount = p.symbol_args > 0 ? 1 : 0;
  layout_info.pPushConstantRanges = &push;
  r = fn.vkCreatePipelineLayout(device, &layout_info, nullptr, &p.layout);
  if (r != VK_SUCCESS) return vk_error("vkCreatePipelineLayout", r);

  VkComputePipelineCreateInfo pipeline_info{};
  pipeline_info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = p.module;
  pipeline_info.stage.pName = binary.entry_point.empty() ? "main" : binary.entry_point.c_str();
  pipeline_info.layout = p.layout;
  r = fn.vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &p.pipeline);
  if (r != VK_SUCCESS) return vk_error("creating the compute pipeline of '" + binary.kernel_name + "'", r);
  return Status::ok();
}

Status VulkanExecutable::upload_constants() {
  const ir::Graph& graph = artifact_->graph;
  for (const ir::BufferAssignment& b : artifact_->plan.buffers) {
    if (b.storage != ir::Storage::kConstant) continue;
    const ir::Tensor& t = graph.constant_of(b.value);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> buffer, VulkanBuffer::create(context_, t.size_bytes()));
    KILN_RETURN_IF_ERROR(buffer->write(0, std::span<const std::byte>(t.data(), t.size_bytes())));
    constants_[b.value] = std::move(buffer);
  }
  return Status::ok();
}

const VulkanBuffer* VulkanExecutable::constant_buffer(ir::NodeId value) const {
  auto it = constants_.find(value);
  return it == constants_.end() ? nullptr : static_cast<const VulkanBuffer*>(it->second.get());
}

VulkanExecutable::~VulkanExecutable() {
  const DeviceFunctions& fn = context_->fn();
  const VkDevice device = context_->device();
  for (auto& [index, p] : pipelines_) {
    if (!p.owns_objects) continue;
    if (p.pipeline) fn.vkDestroyPipeline(device, p.pipeline, nullptr);
    if (p.layout) fn.vkDestroyPipelineLayout(device, p.layout, nullptr);
    if (p.set_layout) fn.vkDestroyDescriptorSetLayout(device, p.set_layout, nullptr);
    if (p.module) fn.vkDestroyShaderModule(device, p.module, nullptr);
  }
}

}  // namespace kiln::runtime::vulkan
