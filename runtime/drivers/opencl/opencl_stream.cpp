// OpenClStream: one in-order command queue per stream (per session), kernel objects created once
// per (stream, executable) with their arguments preset, and launches enqueued in plan order.
//
// Argument caching: each cl_kernel remembers what each argument was last set to (a cl_mem,
// retained so its handle cannot be reused while remembered, or a symbol value); execute()
// calls clSetKernelArg only for arguments whose buffer or size changed since the last run, so a
// session re-running with the same buffers and shapes enqueues the launches and nothing else.
//
// Arena slices: OpenCL 1.2 passes plain buffers without offsets, so every arena value is bound
// as a sub-buffer (clCreateSubBuffer) covering exactly its bytes (never the whole arena, whose
// use next to its sub-buffers OpenCL leaves undefined); sub-buffers are cached per arena and
// released before it (NVIDIA's driver does not keep a parent alive for its sub-buffers).
// A sub-buffer origin must be a multiple of CL_DEVICE_MEM_BASE_ADDR_ALIGN. When the plan's alignment is a multiple of it, the session's
// arena is used as planned (a misaligned offset is then an error naming the value). Otherwise
// (e.g. PoCL's 128-byte alignment against a 64-byte plan) the stream owns the arena and lays it
// out itself: distinct planned offsets o1 < o2 < ... map to n1 = 0 + round_up(o1),
// n(i+1) = n(i) + round_up(o(i+1) - o(i)), rounding up to the device alignment. Gaps only grow,
// so values disjoint in the plan stay disjoint, and every origin is aligned.
//
// Timing: the queue is created with CL_QUEUE_PROFILING_ENABLE and every command gets an event.
// The first and the last command of an execution give last_execution_device_seconds() (from
// the first's CL_PROFILING_COMMAND_START to the last's CL_PROFILING_COMMAND_END, read at
// synchronize()); with ExecuteArgs::profile, every launch's event gives its kernel's time and
// its start within the run.
//
// Empty tensors: a launch with no work items is not enqueued, and a zero-byte arena value is
// bound to a one-byte placeholder buffer (the arena may be absent or end at its offset).
//
// Dispatch: global = groups * workgroup_size, local = workgroup_size, with
// groups = clamp(ceil(work_items / items_per_group), 1, kMaxGroups). workgroup_size is not
// clamped to CL_KERNEL_WORK_GROUP_SIZE: kernels are written for that exact group size, so a
// device that cannot run it makes the first execution fail with kUnsupported.
//
// Thread-safety: a stream is used by one thread at a time (hal/stream.h); its state is private.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "runtime/drivers/opencl/opencl_internal.h"

namespace kiln::runtime::opencl {
namespace {

// Upper bound on launched workgroups (grid-stride kernels cover the rest in their loop).
constexpr uint64_t kMaxGroups = 65535ull * 64ull;

struct BoundArg {
  enum class Kind : uint8_t { kNone, kMem, kLong };
  Kind kind = Kind::kNone;
  cl_mem mem = nullptr;  // retained while bound
  cl_long value = 0;
};

struct PreparedKernel {
  cl_kernel kernel = nullptr;
  const artifact::KernelBinary* binary = nullptr;
  size_t max_local = 1;  // CL_KERNEL_WORK_GROUP_SIZE (>= the dispatch's workgroup_size)
  std::vector<BoundArg> bound;
};

// Where a value lives for one execution: its own buffer, a constant, or its sub-buffer of the
// arena.
struct ValueRef {
  cl_mem mem = nullptr;
};

class OpenClStream final : public hal::Stream {
 public:
  explicit OpenClStream(const OpenClDevice& device) : device_(device), api_(device.api()) {}
  ~OpenClStream() override;

  Status init() {
    cl_int err = CL_SUCCESS;
    queue_ = api_.clCreateCommandQueue(device_.context(), device_.record().device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS || !queue_) return cl_status(err, "OpenCL stream: clCreateCommandQueue with profiling");
    return Status::ok();
  }

  Status execute(const hal::Executable& executable, const hal::ExecuteArgs& args) override;
  Status synchronize() override;
  std::optional<double> last_execution_device_seconds() const override { return last_seconds_; }

 private:
  struct Execution;  // per-call context
  // The steps of execute().
  Status lay_out_arena(Execution& ex);
  Result<ValueRef> resolve(const Execution& ex, ir::NodeId value);
  Status enqueue_launch(const Execution& ex, const ir::Launch& launch);
  Status copy_unwritten_outputs(const Execution& ex);
  void track(cl_event event);
  Result<cl_mem> empty_value();
  Result<PreparedKernel*> prepared_kernel(const OpenClExecutable& exe, uint32_t kernel_index);
  Status set_arena(cl_mem arena, size_t arena_size);
  Result<cl_mem> sub_buffer(size_t offset, size_t bytes);
  Status bind(PreparedKernel& kernel, cl_uint index, const BoundArg& wanted);
  Status ensure_own_arena(size_t bytes);

  const OpenClDevice& device_;
  const ClApi& api_;
  cl_command_queue queue_ = nullptr;  // in order, with profiling
  cl_mem empty_ = nullptr;            // the placeholder of zero-byte arena values (empty_value)

  // executable id -> graph kernel index -> prepared kernel
  std::map<uint64_t, std::map<uint32_t, PreparedKernel>> prepared_;

  // The arena of the current execution and its cached sub-buffers (origin -> sub-buffer).
  cl_mem arena_ = nullptr;  // retained
  size_t arena_size_ = 0;
  std::map<std::pair<size_t, size_t>, cl_mem> sub_buffers_;  // (origin, size) -> sub-buffer
  // The stream-owned arena, when the executable does not use the session's.
  cl_mem own_arena_ = nullptr;
  size_t own_arena_size_ = 0;

  // The execution in flight (see "Timing" atop this file): its first and last commands' events
  // (each holding its own reference) and, when profiled, every launch's.
  cl_event run_first_ = nullptr;
  cl_event run_last_ = nullptr;
  struct PendingTiming {
    hal::Profile* profile;
    cl_event event;
    hal::KernelTiming timing;
  };
  std::vector<PendingTiming> pending_;
  std::optional<double> last_seconds_;
};

struct OpenClStream::Execution {
  const OpenClExecutable& exe;
  const hal::ExecuteArgs& args;
  const ir::SymbolBindings& bindings;
  const ir::Graph& graph;
  const ir::ExecutionPlan& plan;
  std::map<ir::NodeId, size_t> arena_offsets;  // value -> byte offset in arena_ (lay_out_arena)
};

// A value's name for messages (its id when out of range).
std::string value_name(const ir::Graph& graph, ir::NodeId v) {
  return v < graph.num_nodes() ? graph.node(v).name : std::to_string(v);
}

OpenClStream::~OpenClStream() {
  if (queue_) api_.clFinish(queue_);
  for (PendingTiming& p : pending_) api_.clReleaseEvent(p.event);
  for (cl_event e : {run_first_, run_last_})
    if (e) api_.clReleaseEvent(e);
  for (auto& [id, kernels] : prepared_)
    for (auto& [index, k] : kernels) {
      // The kernel before its arguments, the sub-buffers before the arena they slice.
      api_.clReleaseKernel(k.kernel);
      for (BoundArg& b : k.bound)
        if (b.kind == BoundArg::Kind::kMem) api_.clReleaseMemObject(b.mem);
    }
  for (auto& [region, sub] : sub_buffers_) api_.clReleaseMemObject(sub);
  if (arena_) api_.clReleaseMemObject(arena_);
  if (own_arena_) api_.clReleaseMemObject(own_arena_);
  if (empty_) api_.clReleaseMemObject(empty_);
  if (queue_) api_.clReleaseCommandQueue(queue_);
}

// Takes the reference `event` came with: the run's first command keeps it, a later one replaces
// the previous last command's.
void OpenClStream::track(cl_event event) {
  if (!run_first_) {
    run_first_ = event;
    api_.clRetainEvent(event);
  } else if (run_last_) {
    api_.clReleaseEvent(run_last_);
  }
  run_last_ = event;
}

Result<cl_mem> OpenClStream::empty_value() {
  if (!empty_) {
    KILN_ASSIGN_OR_RETURN(empty_, device_.create_mem(0, CL_MEM_READ_WRITE, nullptr));
  }
  return empty_;
}

Result<PreparedKernel*> OpenClStream::prepared_kernel(const OpenClExecutable& exe, uint32_t kernel_index) {
  std::map<uint32_t, PreparedKernel>& kernels = prepared_[exe.id()];
  auto it = kernels.find(kernel_index);
  if (it != kernels.end()) return &it->second;
  const OpenClExecutable::KernelProgram* program = exe.kernel(kernel_index);
  if (!program) return internal_error("no OpenCL kernel for graph kernel " + std::to_string(kernel_index));
  PreparedKernel prepared;
  prepared.binary = program->binary;
  cl_int err = CL_SUCCESS;
  prepared.kernel = api_.clCreateKernel(program->program, program->binary->entry_point.c_str(), &err);
  if (err != CL_SUCCESS || !prepared.kernel)
    return cl_status(err, "kernel '" + program->binary->kernel_name + "': clCreateKernel('" +
                              program->binary->entry_point + "')");
  size_t max_local = 0;
  err = api_.clGetKernelWorkGroupInfo(prepared.kernel, device_.record().device, CL_KERNEL_WORK_GROUP_SIZE,
                                      sizeof(max_local), &max_local, nullptr);
  prepared.max_local = (err == CL_SUCCESS && max_local > 0) ? max_local : device_.record().max_work_group_size;
  // Kernels are written for exactly `workgroup_size` threads per group (codegen hard-codes it in
  // strides, local arrays and reqd_work_group_size), so a smaller group would compute wrong
  // results: refuse rather than clamp.
  const uint32_t wanted = program->binary->dispatch.workgroup_size;
  if (wanted == 0 || wanted > prepared.max_local) {
    api_.clReleaseKernel(prepared.kernel);
    return unsupported("kernel '" + program->binary->kernel_name + "' needs workgroups of " +
                       std::to_string(wanted) + " work-items, but OpenCL device " + device_.info().id +
                       " allows at most " + std::to_string(prepared.max_local) + " for it");
  }
  prepared.bound.resize(program->binary->args.size());
  return &kernels.emplace(kernel_index, std::move(prepared)).first->second;
}

Status OpenClStream::set_arena(cl_mem arena, size_t arena_size) {
  if (arena == arena_ && arena_size == arena_size_) return Status::ok();
  // Sub-buffers must go before their arena: some drivers (NVIDIA's) do not keep a parent alive
  // for its sub-buffers. Kernel arguments bound to them are forgotten (and set again).
  std::set<cl_mem> subs;
  for (auto& [region, sub] : sub_buffers_) subs.insert(sub);
  for (auto& [id, kernels] : prepared_)
    for (auto& [index, k] : kernels)
      for (BoundArg& bound : k.bound)
        if (bound.kind == BoundArg::Kind::kMem && subs.count(bound.mem)) {
          api_.clReleaseMemObject(bound.mem);
          bound = BoundArg{};
        }
  for (auto& [region, sub] : sub_buffers_) api_.clReleaseMemObject(sub);
  sub_buffers_.clear();
  if (arena_) api_.clReleaseMemObject(arena_);
  arena_ = arena;
  arena_size_ = arena_size;
  if (arena_) api_.clRetainMemObject(arena_);
  return Status::ok();
}

Result<cl_mem> OpenClStream::sub_buffer(size_t offset, size_t bytes) {
  auto it = sub_buffers_.find({offset, bytes});
  if (it != sub_buffers_.end()) return it->second;
  cl_buffer_region region{offset, bytes};
  cl_int err = CL_SUCCESS;
  cl_mem sub = api_.clCreateSubBuffer(arena_, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  if (err != CL_SUCCESS || !sub)
    return cl_status(err, "OpenCL stream: clCreateSubBuffer at arena offset " + std::to_string(offset));
  sub_buffers_.emplace(std::make_pair(offset, bytes), sub);
  return sub;
}

Status OpenClStream::bind(PreparedKernel& kernel, cl_uint index, const BoundArg& wanted) {
  BoundArg& current = kernel.bound[index];
  if (current.kind == wanted.kind &&
      (wanted.kind == BoundArg::Kind::kMem ? current.mem == wanted.mem : current.value == wanted.value))
    return Status::ok();
  cl_int err = wanted.kind == BoundArg::Kind::kMem
                   ? api_.clSetKernelArg(kernel.kernel, index, sizeof(cl_mem), &wanted.mem)
                   : api_.clSetKernelArg(kernel.kernel, index, sizeof(cl_long), &wanted.value);
  if (err != CL_SUCCESS)
    return cl_status(err, "kernel '" + kernel.binary->kernel_name + "': clSetKernelArg(" + std::to_string(index) +
                              ") (the kernel's parameters must match its artifact args)");
  if (wanted.kind == BoundArg::Kind::kMem) api_.clRetainMemObject(wanted.mem);
  if (current.kind == BoundArg::Kind::kMem) api_.clReleaseMemObject(current.mem);
  current = wanted;
  return Status::ok();
}

Status OpenClStream::ensure_own_arena(size_t bytes) {
  if (own_arena_ && own_arena_size_ >= bytes) return Status::ok();
  // Released objects live until the commands using them finish, so work in flight is safe;
  // arena_ still holds its own reference until set_arena has released the sub-buffers.
  if (own_arena_) api_.clReleaseMemObject(own_arena_);
  own_arena_ = nullptr;
  own_arena_size_ = 0;
  KILN_ASSIGN_OR_RETURN(own_arena_, device_.create_mem(bytes, CL_MEM_READ_WRITE, nullptr));
  own_arena_size_ = bytes;
  return Status::ok();
}

// Execution, in four steps: check the arguments, lay out the arena (lay_out_arena), enqueue
// each launch with its arguments bound (enqueue_launch, through resolve), then copy the outputs
// no kernel wrote in place (copy_unwritten_outputs) and flush.
Status OpenClStream::execute(const hal::Executable& executable, const hal::ExecuteArgs& args) {
  const auto* exe = dynamic_cast<const OpenClExecutable*>(&executable);
  if (!exe || &exe->device() != &device_)
    return invalid_argument("OpenCL stream: the executable belongs to another device");
  const ir::Graph& graph = exe->artifact().graph;
  if (args.inputs.size() != graph.inputs().size() || args.outputs.size() != graph.outputs().size())
    return invalid_argument("OpenCL stream: wrong number of input or output buffers");
  for (hal::Buffer* b : args.inputs)
    if (!dynamic_cast<OpenClBuffer*>(b)) return invalid_argument("OpenCL stream: an input buffer is not an OpenCL buffer");
  for (hal::Buffer* b : args.outputs)
    if (!dynamic_cast<OpenClBuffer*>(b)) return invalid_argument("OpenCL stream: an output buffer is not an OpenCL buffer");
  static const ir::SymbolBindings kNoBindings;
  Execution ex{*exe, args, args.bindings ? *args.bindings : kNoBindings, graph, exe->artifact().plan, {}};

  KILN_RETURN_IF_ERROR(lay_out_arena(ex));
  if (args.profile) {
    args.profile->clock = "device timer (OpenCL profiling events)";
    args.profile->kernels.clear();
  }
  for (const ir::Launch& launch : ex.plan.launches) KILN_RETURN_IF_ERROR(enqueue_launch(ex, launch));
  KILN_RETURN_IF_ERROR(copy_unwritten_outputs(ex));
  const cl_int err = api_.clFlush(queue_);
  if (err != CL_SUCCESS) return cl_status(err, "OpenCL stream: clFlush");
  return Status::ok();
}

Status OpenClStream::lay_out_arena(Execution& ex) {
  const ir::ExecutionPlan& plan = ex.plan;
  const uint64_t align = device_.record().base_align_bytes;
  std::vector<std::pair<const ir::BufferAssignment*, int64_t>> arena_values;  // planned offsets
  for (const ir::BufferAssignment& b : plan.buffers) {
    if (b.storage != ir::Storage::kArena) continue;
    KILN_ASSIGN_OR_RETURN(int64_t offset, plan.arena_offset(b, ex.bindings));
    if (offset < 0) return internal_error("the plan gives a negative arena offset");
    arena_values.emplace_back(&b, offset);
  }
  if (ex.exe.uses_arena()) {
    // The session's arena, as planned.
    cl_mem arena = nullptr;
    size_t arena_size = 0;
    if (ex.args.arena) {
      auto* buffer = dynamic_cast<OpenClBuffer*>(ex.args.arena);
      if (!buffer) return invalid_argument("OpenCL stream: the arena is not an OpenCL buffer");
      arena = buffer->mem();
      arena_size = buffer->size();
    }
    for (auto& [b, offset] : arena_values) {
      if (uint64_t(offset) % align != 0)
        return internal_error("arena offset " + std::to_string(offset) + " of value '" +
                              value_name(ex.graph, b->value) +
                              "' is not a multiple of the OpenCL device's CL_DEVICE_MEM_BASE_ADDR_ALIGN (" +
                              std::to_string(align) + " bytes), which sub-buffer origins need");
      ex.arena_offsets[b->value] = size_t(offset);
    }
    return set_arena(arena, arena_size);
  }
  // The stream's own arena, laid out with every origin aligned (see the top of this file).
  std::vector<int64_t> offsets;
  for (auto& [b, offset] : arena_values) offsets.push_back(offset);
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  auto round_up = [&](uint64_t x) { return (x + align - 1) / align * align; };
  std::map<int64_t, uint64_t> relocated;
  uint64_t at = 0;
  int64_t previous = 0;
  for (int64_t o : offsets) {
    at += round_up(uint64_t(o - previous));
    relocated[o] = at;
    previous = o;
  }
  uint64_t total = 0;
  for (auto& [b, offset] : arena_values) {
    KILN_ASSIGN_OR_RETURN(int64_t size, b->size.evaluate(ex.bindings));
    ex.arena_offsets[b->value] = size_t(relocated[offset]);
    total = std::max(total, relocated[offset] + uint64_t(std::max<int64_t>(size, 0)));
  }
  if (total == 0) return set_arena(nullptr, 0);
  KILN_RETURN_IF_ERROR(ensure_own_arena(size_t(total)));
  return set_arena(own_arena_, size_t(total));
}

Result<ValueRef> OpenClStream::resolve(const Execution& ex, ir::NodeId value) {
  const ir::Graph& graph = ex.graph;
  for (int depth = 0; depth < 64; ++depth) {
    const ir::BufferAssignment* b = ex.plan.find_buffer(value);
    if (!b) return corrupt("value '" + value_name(graph, value) + "' has no buffer in the plan");
    switch (b->storage) {
      case ir::Storage::kInput:
        for (size_t i = 0; i < graph.inputs().size(); ++i)
          if (graph.inputs()[i] == value) return ValueRef{static_cast<OpenClBuffer*>(ex.args.inputs[i])->mem()};
        return corrupt("the plan's input buffer '" + value_name(graph, value) + "' is not a graph input");
      case ir::Storage::kOutput:
        for (size_t i = 0; i < graph.outputs().size(); ++i)
          if (graph.outputs()[i].node == value) return ValueRef{static_cast<OpenClBuffer*>(ex.args.outputs[i])->mem()};
        return corrupt("the plan's output buffer '" + value_name(graph, value) + "' is not a graph output");
      case ir::Storage::kConstant: {
        cl_mem mem = ex.exe.constant(value);
        if (!mem) return corrupt("constant '" + value_name(graph, value) + "' was not uploaded");
        return ValueRef{mem};
      }
      case ir::Storage::kArena: {
        KILN_ASSIGN_OR_RETURN(int64_t size, b->size.evaluate(ex.bindings));
        if (size == 0) {
          KILN_ASSIGN_OR_RETURN(cl_mem empty, empty_value());
          return ValueRef{empty};
        }
        const size_t offset = ex.arena_offsets.at(value);
        if (!arena_ || offset >= arena_size_)
          return internal_error("value '" + value_name(graph, value) + "' at arena offset " + std::to_string(offset) +
                                " lies outside the " + std::to_string(arena_size_) + "-byte arena");
        // Exactly the value's bytes: values live at the same time never share bytes in the plan,
        // so their sub-buffers do not overlap (OpenCL leaves access through overlapping
        // sub-buffers undefined, and drivers do track them).
        const size_t bytes = std::min<size_t>(std::max<int64_t>(size, 1), arena_size_ - offset);
        KILN_ASSIGN_OR_RETURN(cl_mem sub, sub_buffer(offset, bytes));
        return ValueRef{sub};
      }
      case ir::Storage::kAlias:
        value = b->alias_of;
        continue;
    }
    return corrupt("value '" + value_name(graph, value) + "' has an unknown storage kind");
  }
  return corrupt("the plan's aliases form a cycle");
}

Status OpenClStream::enqueue_launch(const Execution& ex, const ir::Launch& launch) {
  KILN_ASSIGN_OR_RETURN(PreparedKernel * kernel, prepared_kernel(ex.exe, launch.kernel));
  const artifact::KernelBinary& binary = *kernel->binary;
  KILN_ASSIGN_OR_RETURN(int64_t work_items, binary.dispatch.work_items.evaluate(ex.bindings));
  if (work_items <= 0) return Status::ok();  // an empty tensor: nothing to compute
  for (size_t i = 0; i < binary.args.size(); ++i) {
    const artifact::KernelArg& arg = binary.args[i];
    BoundArg wanted;
    if (arg.kind == artifact::KernelArg::Kind::kSymbol) {
      auto found = ex.bindings.find(arg.symbol);
      if (found == ex.bindings.end())
        return invalid_argument("kernel '" + binary.kernel_name + "' takes the size of symbol '" + arg.symbol +
                                "', which the inputs do not bind");
      wanted.kind = BoundArg::Kind::kLong;
      wanted.value = cl_long(found->second);
    } else {
      KILN_ASSIGN_OR_RETURN(ValueRef ref, resolve(ex, arg.value));
      wanted.kind = BoundArg::Kind::kMem;
      wanted.mem = ref.mem;
    }
    KILN_RETURN_IF_ERROR(bind(*kernel, cl_uint(i), wanted));
  }
  const uint64_t per_group = std::max<uint32_t>(binary.dispatch.items_per_group, 1);
  const uint64_t groups = std::clamp<uint64_t>((uint64_t(work_items) + per_group - 1) / per_group, 1, kMaxGroups);
  const size_t local = binary.dispatch.workgroup_size;  // checked against the device limit
  const size_t global = size_t(groups) * local;
  cl_event event = nullptr;
  const cl_int err =
      api_.clEnqueueNDRangeKernel(queue_, kernel->kernel, 1, nullptr, &global, &local, 0, nullptr, &event);
  if (err != CL_SUCCESS)
    return cl_status(err, "kernel '" + binary.kernel_name + "': clEnqueueNDRangeKernel (global " +
                              std::to_string(global) + ", local " + std::to_string(local) + ")");
  track(event);
  if (!ex.args.profile) return Status::ok();
  api_.clRetainEvent(event);  // pending_'s own reference
  const ir::Graph& graph = ex.graph;
  hal::KernelTiming timing;
  timing.kernel_index = launch.kernel;
  if (launch.kernel < graph.kernels().size()) {
    const ir::Kernel& k = graph.kernels()[launch.kernel];
    timing.name = k.name;
    timing.kind = std::string(ir::kernel_kind_name(k.kind));
    for (ir::NodeId id : k.nodes)
      if (id < graph.num_nodes()) timing.source_nodes.push_back(graph.node(id).name);
  } else {
    timing.name = binary.kernel_name;
  }
  pending_.push_back({ex.args.profile, event, std::move(timing)});
  return Status::ok();
}

// Outputs no kernel wrote in place: an input or constant returned as is, an output computed
// into the arena, or one value returned under two names.
Status OpenClStream::copy_unwritten_outputs(const Execution& ex) {
  const ir::Graph& graph = ex.graph;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    KILN_ASSIGN_OR_RETURN(ValueRef ref, resolve(ex, graph.outputs()[i].node));
    auto* out = static_cast<OpenClBuffer*>(ex.args.outputs[i]);
    if (ref.mem == out->mem()) continue;
    if (out->size() == 0) continue;
    cl_event event = nullptr;
    const cl_int err = api_.clEnqueueCopyBuffer(queue_, ref.mem, out->mem(), 0, 0, out->size(), 0, nullptr, &event);
    if (err != CL_SUCCESS) return cl_status(err, "OpenCL stream: copying output '" + graph.outputs()[i].name + "'");
    track(event);
  }
  return Status::ok();
}

Status OpenClStream::synchronize() {
  Status status = Status::ok();
  const cl_int finished = api_.clFinish(queue_);
  if (finished != CL_SUCCESS) status = cl_status(finished, "OpenCL stream: clFinish");
  // Device times in seconds since the run's first command started; nullopt when unreadable.
  auto seconds_since_first = [&](cl_event event, cl_profiling_info which) -> std::optional<double> {
    cl_ulong base = 0, at = 0;
    cl_int err = api_.clGetEventProfilingInfo(run_first_, CL_PROFILING_COMMAND_START, sizeof(base), &base, nullptr);
    if (err == CL_SUCCESS) err = api_.clGetEventProfilingInfo(event, which, sizeof(at), &at, nullptr);
    if (err != CL_SUCCESS) {
      if (status.is_ok()) status = cl_status(err, "OpenCL stream: clGetEventProfilingInfo");
      return std::nullopt;
    }
    return at >= base ? double(at - base) * 1e-9 : 0.0;
  };
  last_seconds_.reset();
  if (!run_first_) {
    last_seconds_ = 0.0;  // nothing was enqueued: every tensor was empty
  } else if (status.is_ok()) {
    last_seconds_ = seconds_since_first(run_last_, CL_PROFILING_COMMAND_END);
  }
  for (PendingTiming& p : pending_) {
    if (status.is_ok()) {
      std::optional<double> start = seconds_since_first(p.event, CL_PROFILING_COMMAND_START);
      std::optional<double> end = seconds_since_first(p.event, CL_PROFILING_COMMAND_END);
      if (start && end) {
        p.timing.start_seconds = start;
        p.timing.seconds = std::max(*end - *start, 0.0);
      }
    }
    api_.clReleaseEvent(p.event);
    p.profile->kernels.push_back(std::move(p.timing));
  }
  pending_.clear();
  for (cl_event* e : {&run_first_, &run_last_}) {
    if (*e) api_.clReleaseEvent(*e);
    *e = nullptr;
  }
  return status;
}

}  // namespace

Result<std::unique_ptr<hal::Stream>> create_opencl_stream(const OpenClDevice& device) {
  auto stream = std::make_unique<OpenClStream>(device);
  KILN_RETURN_IF_ERROR(stream->init());
  return std::unique_ptr<hal::Stream>(std::move(stream));
}

}  // namespace kiln::runtime::opencl
