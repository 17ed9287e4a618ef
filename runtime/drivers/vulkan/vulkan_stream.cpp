#include "runtime/drivers/vulkan/vulkan_stream.h"

#include <algorithm>

namespace kiln::runtime::vulkan {
namespace {

constexpr int kMaxAliasDepth = 64;

// A range a dispatch touches, for deciding where barriers go.
struct Access {
  VkBuffer buffer;
  VkDeviceSize begin, end;
  bool write;
};

bool conflicts(const std::vector<Access>& since_barrier, const Access& a) {
  for (const Access& b : since_barrier)
    if (b.buffer == a.buffer && a.begin < b.end && b.begin < a.end && (a.write || b.write)) return true;
  return false;
}

void memory_barrier(const DeviceFunctions& fn, VkCommandBuffer cb, VkPipelineStageFlags src_stages,
                    VkAccessFlags src_access, VkPipelineStageFlags dst_stages, VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = dst_access;
  fn.vkCmdPipelineBarrier(cb, src_stages, dst_stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

Result<std::unique_ptr<hal::Stream>> VulkanStream::create(std::shared_ptr<VulkanContext> context) {
  std::unique_ptr<VulkanStream> stream(new VulkanStream(std::move(context)));
  const DeviceFunctions& fn = stream->context_->fn();
  const VkDevice device = stream->context_->device();
  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = stream->context_->queue_family();
  VkResult r = fn.vkCreateCommandPool(device, &pool_info, nullptr, &stream->pool_);
  if (r != VK_SUCCESS) return vk_error("vkCreateCommandPool", r);
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = stream->pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  r = fn.vkAllocateCommandBuffers(device, &alloc, &stream->commands_);
  if (r != VK_SUCCESS) return vk_error("vkAllocateCommandBuffers", r);
  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  r = fn.vkCreateFence(device, &fence_info, nullptr, &stream->fence_);
  if (r != VK_SUCCESS) return vk_error("vkCreateFence", r);
  return std::unique_ptr<hal::Stream>(std::move(stream));
}

VulkanStream::~VulkanStream() {
  const DeviceFunctions& fn = context_->fn();
  const VkDevice device = context_->device();
  if (pending_) fn.vkWaitForFences(device, 1, &fence_, VK_TRUE, UINT64_MAX);
  release_prepared();
  if (fence_) fn.vkDestroyFence(device, fence_, nullptr);
  if (pool_) fn.vkDestroyCommandPool(device, pool_, nullptr);  // frees the command buffer
}

void VulkanStream::release_prepared() {
  const DeviceFunctions& fn = context_->fn();
  const VkDevice device = context_->device();
  if (descriptor_pool_) fn.vkDestroyDescriptorPool(device, descriptor_pool_, nullptr);
  if (query_pool_) fn.vkDestroyQueryPool(device, query_pool_, nullptr);
  descriptor_pool_ = VK_NULL_HANDLE;
  query_pool_ = VK_NULL_HANDLE;
  prepared_ = false;
  launch_timings_.clear();
}

Result<VulkanStream::BoundRange> VulkanStream::resolve(const VulkanExecutable& exe, const hal::ExecuteArgs& args,
                                                       const ir::SymbolBindings& bindings, ir::NodeId value,
                                                       int depth) {
  const artifact::LoadedArtifact& a = exe.artifact();
  const ir::BufferAssignment* placed = a.plan.find_buffer(value);
  if (!placed) return corrupt("the plan does not place value " + std::to_string(value));
  auto whole = [](const hal::Buffer* buffer) {
    const auto* vb = static_cast<const VulkanBuffer*>(buffer);
    return BoundRange{vb->handle(), 0, VK_WHOLE_SIZE, std::max<VkDeviceSize>(vb->size(), 16)};
  };
  switch (placed->storage) {
    case ir::Storage::kInput:
      for (size_t i = 0; i < a.graph.inputs().size(); ++i)
        if (a.graph.inputs()[i] == value) return whole(args.inputs[i]);
      return corrupt("the plan places value " + std::to_string(value) + " as an input, but it is not one");
    case ir::Storage::kOutput:
      for (size_t i = 0; i < a.graph.outputs().size(); ++i)
        if (a.graph.outputs()[i].node == value) return whole(args.outputs[i]);
      return corrupt("the plan places value " + std::to_string(value) + " as an output, but it is not one");
    case ir::Storage::kConstant: {
      const VulkanBuffer* b = exe.constant_buffer(value);
      if (!b) return corrupt("constant " + std::to_string(value) + " was not uploaded");
      return whole(b);
    }
    case ir::Storage::kArena: {
      KILN_ASSIGN_OR_RETURN(int64_t bytes, placed->size.evaluate(bindings));
      if (bytes == 0) {
        if (!empty_) {
          KILN_ASSIGN_OR_RETURN(empty_, VulkanBuffer::create(context_, 0));
        }
        return whole(empty_.get());
      }
      if (!args.arena) return invalid_argument("Vulkan: the plan needs an arena but none was given");
      KILN_ASSIGN_OR_RETURN(int64_t offset, a.plan.arena_offset(*placed, bindings));
      const auto* arena = static_cast<const VulkanBuffer*>(args.arena);
      if (offset < 0 || bytes < 0 || uint64_t(offset) + uint64_t(bytes) > arena->size())
        return internal_error("Vulkan: arena slice [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                              ") of value " + std::to_string(value) + " is outside the " +
                              std::to_string(arena->size()) + "-byte arena");
      // Slices start on a word and span whole words: word-storage kernels read and write 8/16-bit
      // data as 32-bit words, and the arena's VkBuffer is itself a whole number of words
      // (VulkanContext::allocate), so the rounded range stays inside it. kilnc aligns slots to 64
      // bytes, so the rounding never reaches into the next slot.
      const VkDeviceSize align = std::max<VkDeviceSize>(context_->limits().minStorageBufferOffsetAlignment, 4);
      if (uint64_t(offset) % align != 0)
        return unsupported("Vulkan: arena offset " + std::to_string(offset) + " is not a multiple of the "
                           "storage buffer offset alignment " + std::to_string(align) + " the device needs");
      const VkDeviceSize words = (VkDeviceSize(bytes) + 3) & ~VkDeviceSize(3);
      return BoundRange{arena->handle(), VkDeviceSize(offset), words, VkDeviceSize(offset) + words};
    }
    case ir::Storage::kAlias:
      if (depth >= kMaxAliasDepth) return corrupt("the plan's aliases form a cycle at value " + std::to_string(value));
      return resolve(exe, args, bindings, placed->alias_of, depth + 1);
  }
  return corrupt("value " + std::to_string(value) + " has an unknown storage kind");
}

Status VulkanStream::record(const VulkanExecutable& exe, const hal::ExecuteArgs& args,
                            const ir::SymbolBindings& bindings) {
  const DeviceFunctions& fn = context_->fn();
  const VkDevice device = context_->device();
  const artifact::LoadedArtifact& a = exe.artifact();
  release_prepared();
  fn.vkResetCommandBuffer(commands_, 0);

  const std::vector<ir::Launch>& launches = a.plan.launches;
  uint32_t descriptors = 0;
  for (const ir::Launch& launch : launches) descriptors += exe.pipeline(launch.kernel).buffer_args;
  VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max<uint32_t>(descriptors, 1)};
  VkDescriptorPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pool_info.maxSets = std::max<uint32_t>(uint32_t(launches.size()), 1);
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  VkResult r = fn.vkCreateDescriptorPool(device, &pool_info, nullptr, &descriptor_pool_);
  if (r != VK_SUCCESS) return vk_error("vkCreateDescriptorPool", r);

  // Launches over empty tensors have nothing to compute and are not recorded.
  std::vector<int64_t> work_items(launches.size());
  uint32_t dispatches = 0;
  for (size_t l = 0; l < launches.size(); ++l) {
    KILN_ASSIGN_OR_RETURN(work_items[l], exe.pipeline(launches[l].kernel).binary->dispatch.work_items.evaluate(bindings));
    dispatches += work_items[l] > 0;
  }
  const uint32_t queries = 2 + 2 * dispatches;  // the run's start and end, then each dispatch's
  const bool timed = context_->timestamp_valid_bits() > 0;
  if (timed) {
    VkQueryPoolCreateInfo query_info{};
    query_info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    query_info.queryCount = queries;
    r = fn.vkCreateQueryPool(device, &query_info, nullptr, &query_pool_);
    if (r != VK_SUCCESS) return vk_error("vkCreateQueryPool", r);
  }

  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  r = fn.vkBeginCommandBuffer(commands_, &begin);
  if (r != VK_SUCCESS) return vk_error("vkBeginCommandBuffer", r);
  if (timed) {
    fn.vkCmdResetQueryPool(commands_, query_pool_, 0, queries);
    fn.vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, query_pool_, 0);
  }
  // Host writes and staging copies before this submission become visible to the shaders.
  memory_barrier(fn, commands_, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);

  const uint32_t max_groups = std::max<uint32_t>(context_->limits().maxComputeWorkGroupCount[0], 1);
  const VkDeviceSize max_range = context_->limits().maxStorageBufferRange;
  std::vector<Access> since_barrier;
  std::vector<VkDescriptorBufferInfo> infos;
  std::vector<VkWriteDescriptorSet> writes;
  std::vector<uint32_t> push;
  for (size_t l = 0; l < launches.size(); ++l) {
    if (work_items[l] <= 0) continue;
    const uint32_t kernel_index = launches[l].kernel;
    const KernelPipeline& p = exe.pipeline(kernel_index);
    const artifact::KernelBinary& binary = *p.binary;
    const ir::Kernel& kernel = a.graph.kernels()[kernel_index];

    VkDescriptorSet set = VK_NULL_HANDLE;
    VkDescriptorSetAllocateInfo set_alloc{};
    set_alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    set_alloc.descriptorPool = descriptor_pool_;
    set_alloc.descriptorSetCount = 1;
    set_alloc.pSetLayouts = &p.set_layout;
    r = fn.vkAllocateDescriptorSets(device, &set_alloc, &set);
    if (r != VK_SUCCESS) return vk_error("vkAllocateDescriptorSets", r);

    infos.clear();
    writes.clear();
    push.clear();
    std::vector<Access> accesses;
    infos.reserve(p.buffer_args);
    for (const artifact::KernelArg& arg : binary.args) {
      if (arg.kind == artifact::KernelArg::Kind::kSymbol) {
        auto it = bindings.find(arg.symbol);
        if (it == bindings.end())
          return invalid_argument("Vulkan kernel '" + binary.kernel_name + "' needs symbol '" + arg.symbol +
                                  "', which the inputs do not bind");
        if (it->second < 0 || it->second > int64_t(UINT32_MAX))
          return unsupported("symbol '" + arg.symbol + "' = " + std::to_string(it->second) +
                             " does not fit the Vulkan kernels' 32-bit size arguments");
        push.push_back(uint32_t(it->second));
        continue;
      }
      KILN_ASSIGN_OR_RETURN(BoundRange bound, resolve(exe, args, bindings, arg.value, 0));
      const VkDeviceSize bytes = bound.range == VK_WHOLE_SIZE ? bound.end - bound.offset : bound.range;
      if (bytes > max_range)
        return unsupported("Vulkan: a " + std::to_string(bytes) + "-byte buffer of kernel '" + binary.kernel_name +
                           "' exceeds the device's storage buffer range limit of " + std::to_string(max_range) +
                           " bytes");
      // Static shapes were checked by kilnc; symbolic ones are known only now.
      const ir::Node& value = a.graph.node(arg.value);
      const VkDeviceSize elements = bytes / std::max<VkDeviceSize>(ir::dtype_size(value.type.dtype), 1);
      if (elements > VkDeviceSize(artifact::kVulkanMaxElements))
        return unsupported("Vulkan kernel '" + binary.kernel_name + "': value '" + value.name + "' has " +
                           std::to_string(elements) + " elements at these sizes, over the 2^31 - 1 that Vulkan kernels can index with 32-bit "
                           "integers (run it on a cuda or opencl device)");
      infos.push_back(VkDescriptorBufferInfo{bound.buffer, bound.offset, bound.range});
      const bool written = std::find(kernel.outputs.begin(), kernel.outputs.end(), arg.value) != kernel.outputs.end();
      accesses.push_back(Access{bound.buffer, bound.offset, bound.end, written});
    }
    for (uint32_t i = 0; i < infos.size(); ++i) {
      VkWriteDescriptorSet w{};
      w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      w.dstSet = set;
      w.dstBinding = i;
      w.descriptorCount = 1;
      w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w.pBufferInfo = &infos[i];
      writes.push_back(w);
    }
    if (!writes.empty()) fn.vkUpdateDescriptorSets(device, uint32_t(writes.size()), writes.data(), 0, nullptr);

    // A barrier only where this dispatch touches memory an earlier one (since the last
    // barrier) wrote, or writes memory an earlier one read.
    bool need_barrier = false;
    for (const Access& access : accesses) need_barrier = need_barrier || conflicts(since_barrier, access);
    if (need_barrier) {
      memory_barrier(fn, commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      since_barrier.clear();
    }
    since_barrier.insert(since_barrier.end(), accesses.begin(), accesses.end());

    const int64_t per_group = std::max<uint32_t>(binary.dispatch.items_per_group, 1);
    const int64_t wanted = (work_items[l] + per_group - 1) / per_group;
    const uint32_t groups = uint32_t(std::clamp<int64_t>(wanted, 1, max_groups));

    fn.vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    fn.vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    if (!push.empty())
      fn.vkCmdPushConstants(commands_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, uint32_t(push.size() * 4),
                            push.data());
    const uint32_t query = 2 + 2 * uint32_t(launch_timings_.size());
    if (timed) fn.vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, query_pool_, query);
    fn.vkCmdDispatch(commands_, groups, 1, 1);
    if (timed) fn.vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, query_pool_, query + 1);

    hal::KernelTiming timing;
    timing.kernel_index = kernel_index;
    timing.name = kernel.name;
    timing.kind = std::string(ir::kernel_kind_name(kernel.kind));
    for (ir::NodeId id : kernel.nodes)
      if (id < a.graph.nodes().size()) timing.source_nodes.push_back(a.graph.node(id).name);
    launch_timings_.push_back(std::move(timing));
  }
  // Shader results become visible to the host (mapped reads) and to staging copies.
  memory_barrier(fn, commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT);
  if (timed) fn.vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool_, 1);
  r = fn.vkEndCommandBuffer(commands_);
  if (r != VK_SUCCESS) return vk_error("vkEndCommandBuffer", r);
  prepared_ = true;
  return Status::ok();
}

Status VulkanStream::execute(const hal::Executable& executable, const hal::ExecuteArgs& args) {
  const auto* exe = dynamic_cast<const VulkanExecutable*>(&executable);
  if (!exe || exe->context() != context_.get())
    return invalid_argument("Vulkan stream: the executable belongs to another device");
  const ir::Graph& graph = exe->artifact().graph;
  if (args.inputs.size() != graph.inputs().size() || args.outputs.size() != graph.outputs().size())
    return invalid_argument("Vulkan stream: wrong number of input or output buffers");
  if (!args.bindings) return invalid_argument("Vulkan stream: no symbol bindings were given");

  PreparedKey key;
  key.executable = exe->serial();
  auto add_buffer = [&](const hal::Buffer* buffer, const char* what) -> Status {
    const auto* vb = dynamic_cast<const VulkanBuffer*>(buffer);
    if (!vb || vb->context() != context_.get())
      return invalid_argument(std::string("Vulkan stream: an ") + what + " buffer belongs to another device");
    key.buffers.push_back(vb->serial());
    return Status::ok();
  };
  for (const hal::Buffer* b : args.inputs) KILN_RETURN_IF_ERROR(add_buffer(b, "input"));
  for (const hal::Buffer* b : args.outputs) KILN_RETURN_IF_ERROR(add_buffer(b, "output"));
  if (args.arena)
    KILN_RETURN_IF_ERROR(add_buffer(args.arena, "arena"));
  else
    key.buffers.push_back(0);
  key.bindings = *args.bindings;

  // The command buffer may still be executing: finish the previous run before reuse.
  if (pending_) KILN_RETURN_IF_ERROR(synchronize());
  if (!prepared_ || !(key == key_)) {
    Status recorded = record(*exe, args, key.bindings);
    if (!recorded.is_ok()) {
      release_prepared();
      return recorded;
    }
    key_ = std::move(key);
  }
  const DeviceFunctions& fn = context_->fn();
  VkResult r = fn.vkResetFences(context_->device(), 1, &fence_);
  if (r != VK_SUCCESS) return vk_error("vkResetFences", r);
  submit_time_ = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(context_->submit(commands_, fence_));
  pending_ = true;
  pending_profile_ = args.profile;
  return Status::ok();
}

Status VulkanStream::synchronize() {
  if (!pending_) return Status::ok();
  const DeviceFunctions& fn = context_->fn();
  VkResult r = fn.vkWaitForFences(context_->device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  pending_ = false;
  hal::Profile* profile = pending_profile_;
  pending_profile_ = nullptr;
  last_seconds_.reset();
  if (r != VK_SUCCESS) return vk_error("waiting for the execution", r);
  return collect_times(profile);
}

Status VulkanStream::collect_times(hal::Profile* profile) {
  if (profile) profile->kernels.clear();
  if (!query_pool_) {
    if (!profile) return Status::ok();
    // No device timers: one host-timed entry for the whole submission.
    profile->clock = "host wall time (the Vulkan device has no timestamp queries)";
    hal::KernelTiming whole;
    whole.kernel_index = hal::kNoKernel;
    whole.name = "execution";
    whole.kind = "submission";
    whole.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - submit_time_).count();
    profile->kernels.push_back(std::move(whole));
    return Status::ok();
  }
  const DeviceFunctions& fn = context_->fn();
  // The run's two timestamps, and with a profile every dispatch's; all were written (the fence
  // has signalled), so WAIT_BIT returns at once.
  std::vector<uint64_t> ticks(profile ? 2 + 2 * launch_timings_.size() : 2);
  VkResult r = fn.vkGetQueryPoolResults(context_->device(), query_pool_, 0, uint32_t(ticks.size()),
                                        ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) return vk_error("vkGetQueryPoolResults", r);
  const uint32_t bits = context_->timestamp_valid_bits();
  const uint64_t mask = bits >= 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
  // Seconds from tick `from` to tick `to`; the difference wraps correctly within the valid bits.
  auto seconds = [&](size_t from, size_t to) {
    return double(((ticks[to] & mask) - (ticks[from] & mask)) & mask) * context_->timestamp_period_ns() * 1e-9;
  };
  last_seconds_ = seconds(0, 1);
  if (!profile) return Status::ok();
  profile->clock = "device timer (Vulkan timestamps)";
  for (size_t l = 0; l < launch_timings_.size(); ++l) {
    hal::KernelTiming timing = launch_timings_[l];
    timing.start_seconds = seconds(0, 2 + 2 * l);
    timing.seconds = seconds(2 + 2 * l, 3 + 2 * l);
    profile->kernels.push_back(std::move(timing));
  }
  return Status::ok();
}

}  // namespace kiln::runtime::vulkan
