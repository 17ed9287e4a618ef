// CpuStream: runs an execution at submission (execute() returns when the outputs are written),
// launch by launch in plan order, each launch split over the device's thread pool.
//
// Buffers: every value is a host address, found as the other drivers find their device buffers
// (resolve): graph inputs and outputs in the ExecuteArgs buffers, constants in the loaded
// artifact, intermediates in the session's arena at the plan's offset, and an alias at the
// address of the value it aliases. A zero-byte value is null (never dereferenced; the arena may
// be absent or end at its offset).
//
// Profiling: per-kernel host wall time of each launch (all its chunks, on all threads), with its
// start within the run. A launch without work units runs nothing and gets no entry.
//
// Thread-safety: a stream is used by one thread at a time (hal/stream.h); its state is private.
// Streams of one device run concurrently; the device's pool serializes their parallel launches.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/drivers/cpu/cpu_internal.h"
#include "runtime/hal/host_buffer.h"

namespace kiln::runtime::cpu {
namespace {

// Longer alias chains than this are a cycle (the reader checks the plan; this guards the loop).
constexpr int kMaxAliasDepth = 64;

class CpuStream final : public hal::Stream {
 public:
  explicit CpuStream(CpuDevice& device) : device_(device) {}

  Status execute(const hal::Executable& executable, const hal::ExecuteArgs& args) override;
  // The work ran, and its errors were returned, in execute().
  Status synchronize() override { return Status::ok(); }

 private:
  // What one execute() call works on.
  struct Execution {
    const CpuExecutable& exe;
    const hal::ExecuteArgs& args;
    const ir::SymbolBindings& bindings;
    const ir::Graph& graph;
    const ir::ExecutionPlan& plan;
  };
  Result<void*> resolve(const Execution& ex, ir::NodeId value) const;
  Status run_launch(const Execution& ex, const ir::Launch& launch, std::chrono::steady_clock::time_point run_start);
  Status copy_unwritten_outputs(const Execution& ex) const;
  // Runs a kernel through its oneDNN call, then its in-place epilogue function, if any. Returns
  // what ran, for profiles: "oneDNN", "oneDNN sgemm", "oneDNN, packed weights".
  Result<const char*> run_library_call(const Execution& ex, uint32_t kernel_index, const CpuExecutable::Kernel& kernel);

  CpuDevice& device_;
  // One launch's arguments (cpu_driver.h: the ABI), kept to reuse their storage; args_ holds
  // every KernelBinary::args entry's address by position (null for symbols), as library calls
  // name them.
  std::vector<void*> buffers_;
  std::vector<int64_t> symbols_;
  std::vector<void*> args_;
};

std::string value_name(const ir::Graph& graph, ir::NodeId value) {
  return value < graph.num_nodes() ? graph.node(value).name : std::to_string(value);
}

Status CpuStream::execute(const hal::Executable& executable, const hal::ExecuteArgs& args) {
  const auto* exe = dynamic_cast<const CpuExecutable*>(&executable);
  if (!exe || &exe->device() != &device_) return invalid_argument("cpu stream: the executable belongs to another device");
  const ir::Graph& graph = exe->artifact().graph;
  if (args.inputs.size() != graph.inputs().size() || args.outputs.size() != graph.outputs().size())
    return invalid_argument("cpu stream: wrong number of input or output buffers");
  // Host buffers only: another device's buffer has no host address (host_data() is null).
  auto is_host = [](hal::Buffer* b) { return dynamic_cast<hal::HostBuffer*>(b) != nullptr; };
  if (!std::all_of(args.inputs.begin(), args.inputs.end(), is_host) ||
      !std::all_of(args.outputs.begin(), args.outputs.end(), is_host) || (args.arena && !is_host(args.arena)))
    return invalid_argument("cpu stream: a buffer of the execution is not host memory of a cpu device");
  static const ir::SymbolBindings kNoBindings;
  const Execution ex{*exe, args, args.bindings ? *args.bindings : kNoBindings, graph, exe->artifact().plan};

  if (args.profile) {
    args.profile->clock = "host wall time";
    args.profile->kernels.clear();
  }
  const auto run_start = std::chrono::steady_clock::now();
  for (const ir::Launch& l : ex.plan.launches) KILN_RETURN_IF_ERROR(run_launch(ex, l, run_start));
  return copy_unwritten_outputs(ex);
}

Result<void*> CpuStream::resolve(const Execution& ex, ir::NodeId value) const {
  const ir::Graph& graph = ex.graph;
  for (int depth = 0; depth < kMaxAliasDepth; ++depth) {
    const ir::BufferAssignment* b = ex.plan.find_buffer(value);
    if (!b) return corrupt("value '" + value_name(graph, value) + "' has no buffer in the plan");
    switch (b->storage) {
      case ir::Storage::kInput:
        for (size_t i = 0; i < graph.inputs().size(); ++i)
          if (graph.inputs()[i] == value) return static_cast<void*>(ex.args.inputs[i]->host_data());
        return corrupt("the plan's input buffer '" + value_name(graph, value) + "' is not a graph input");
      case ir::Storage::kOutput:
        for (size_t i = 0; i < graph.outputs().size(); ++i)
          if (graph.outputs()[i].node == value) return static_cast<void*>(ex.args.outputs[i]->host_data());
        return corrupt("the plan's output buffer '" + value_name(graph, value) + "' is not a graph output");
      case ir::Storage::kConstant: {
        std::optional<void*> data = ex.exe.constant(value);
        if (!data) return corrupt("constant '" + value_name(graph, value) + "' is not among the artifact's constants");
        return *data;
      }
      case ir::Storage::kArena: {
        KILN_ASSIGN_OR_RETURN(int64_t bytes, b->size.evaluate(ex.bindings));
        if (bytes == 0) return static_cast<void*>(nullptr);
        if (!ex.args.arena) return invalid_argument("cpu stream: the plan needs an arena but none was given");
        KILN_ASSIGN_OR_RETURN(int64_t offset, ex.plan.arena_offset(*b, ex.bindings));
        hal::Buffer& arena = *ex.args.arena;
        if (offset < 0 || bytes < 0 || uint64_t(offset) + uint64_t(bytes) > arena.size())
          return internal_error("arena slice [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                ") of value '" + value_name(graph, value) + "' is outside the " +
                                std::to_string(arena.size()) + "-byte arena");
        return static_cast<void*>(arena.host_data() + offset);
      }
      case ir::Storage::kAlias:
        value = b->alias_of;
        continue;
    }
    return corrupt("value '" + value_name(graph, value) + "' has an unknown storage kind");
  }
  return corrupt("the plan's aliases form a cycle");
}

Status CpuStream::run_launch(const Execution& ex, const ir::Launch& launch,
                         std::chrono::steady_clock::time_point run_start) {
  const CpuExecutable::Kernel* kernel = ex.exe.kernel(launch.kernel);
  if (!kernel) return internal_error("cpu stream: graph kernel " + std::to_string(launch.kernel) + " was not loaded");
  const artifact::KernelBinary& binary = *kernel->binary;
  KILN_ASSIGN_OR_RETURN(int64_t work_items, binary.dispatch.work_items.evaluate(ex.bindings));
  if (work_items <= 0) return Status::ok();  // an empty tensor: nothing to compute

  buffers_.clear();
  symbols_.clear();
  args_.clear();
  for (const artifact::KernelArg& arg : binary.args) {
    if (arg.kind == artifact::KernelArg::Kind::kSymbol) {
      auto found = ex.bindings.find(arg.symbol);
      if (found == ex.bindings.end())
        return invalid_argument("kernel '" + binary.kernel_name + "' takes the size of symbol '" + arg.symbol +
                                "', which the inputs do not bind");
      symbols_.push_back(found->second);
      args_.push_back(nullptr);
    } else {
      KILN_ASSIGN_OR_RETURN(void* address, resolve(ex, arg.value));
      buffers_.push_back(address);
      args_.push_back(address);
    }
  }

  const auto start = std::chrono::steady_clock::now();
  const char* library = nullptr;
  if (kernel->library != CpuExecutable::Kernel::Library::kNone) {
    KILN_ASSIGN_OR_RETURN(library, run_library_call(ex, launch.kernel, *kernel));
  } else {
    const KernelEntry entry = kernel->entry;
    void* const* buffers = buffers_.data();
    const int64_t* symbols = symbols_.data();
    device_.pool().parallel_for(work_items, std::max<int64_t>(binary.dispatch.items_per_group, 1),
                                [&](int64_t begin, int64_t end) { entry(buffers, symbols, begin, end); });
  }
  if (!ex.args.profile) return Status::ok();

  const auto finish = std::chrono::steady_clock::now();
  hal::KernelTiming timing;
  timing.kernel_index = launch.kernel;
  const ir::Kernel& k = ex.graph.kernels()[launch.kernel];  // in range: checked at load
  timing.name = k.name;
  timing.kind = std::string(ir::kernel_kind_name(k.kind)) + (library ? std::string(" (") + library + ")" : "");
  for (ir::NodeId id : k.nodes)
    if (id < ex.graph.num_nodes()) timing.source_nodes.push_back(ex.graph.node(id).name);
  timing.seconds = std::chrono::duration<double>(finish - start).count();
  timing.start_seconds = std::chrono::duration<double>(start - run_start).count();
  ex.args.profile->kernels.push_back(std::move(timing));
  return Status::ok();
}

Result<const char*> CpuStream::run_library_call(const Execution& ex, uint32_t kernel_index,
                                                const CpuExecutable::Kernel& kernel) {
  const artifact::KernelBinary& binary = *kernel.binary;
  const artifact::LibraryEpilogue* rest = nullptr;
  const char* library = "oneDNN";
  set_onednn_threads(*ex.exe.onednn(), int(device_.pool().threads()));
  if (kernel.library == CpuExecutable::Kernel::Library::kGemm) {
    const artifact::GemmCall& call = *binary.gemm;
    KILN_ASSIGN_OR_RETURN(const OneDnnMatmul::Key key, OneDnnMatmul::key(call, args_, ex.bindings));
    if (OneDnnMatmul::applies(call, key)) {
      KILN_ASSIGN_OR_RETURN(const OneDnnMatmul* matmul, ex.exe.matmul(kernel_index, key));
      KILN_RETURN_IF_ERROR(matmul->run(args_));
    } else {
      KILN_RETURN_IF_ERROR(run_onednn_gemm(*ex.exe.onednn(), call, args_, key));
      library = "oneDNN sgemm";
    }
    rest = &binary.gemm->in_place_epilogue;
  } else {
    KILN_ASSIGN_OR_RETURN(int64_t batch, binary.conv->batch.evaluate(ex.bindings));
    KILN_ASSIGN_OR_RETURN(const OneDnnConvolution* convolution, ex.exe.convolution(kernel_index, batch));
    KILN_RETURN_IF_ERROR(convolution->run(args_));
    if (convolution->uses_packed_weights()) library = "oneDNN, packed weights";
    rest = &binary.conv->in_place_epilogue;
  }
  if (rest->empty()) return library;
  // The epilogue function's parameters are the main kernel's args at rest->args, in the ABI's
  // split: buffers, then symbols.
  std::vector<void*> buffers;
  std::vector<int64_t> symbols;
  for (uint32_t i : rest->args) {
    const artifact::KernelArg& arg = binary.args[i];
    if (arg.kind == artifact::KernelArg::Kind::kSymbol) symbols.push_back(ex.bindings.at(arg.symbol));
    else buffers.push_back(args_[i]);
  }
  KILN_ASSIGN_OR_RETURN(int64_t work_items, rest->dispatch.work_items.evaluate(ex.bindings));
  if (work_items <= 0) return library;
  const KernelEntry entry = kernel.library_epilogue;
  device_.pool().parallel_for(work_items, std::max<int64_t>(rest->dispatch.items_per_group, 1),
                              [&](int64_t begin, int64_t end) { entry(buffers.data(), symbols.data(), begin, end); });
  return library;
}

// Outputs no kernel wrote in place: an input or constant returned as is, an output computed into
// the arena, or one value returned under two names.
Status CpuStream::copy_unwritten_outputs(const Execution& ex) const {
  const ir::Graph& graph = ex.graph;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    hal::Buffer& out = *ex.args.outputs[i];
    if (out.size() == 0) continue;
    KILN_ASSIGN_OR_RETURN(void* source, resolve(ex, graph.outputs()[i].node));
    if (source == out.host_data()) continue;
    if (!source)
      return internal_error("output '" + graph.outputs()[i].name + "' holds " + std::to_string(out.size()) +
                            " bytes but its value has none");
    std::memmove(out.host_data(), source, out.size());  // an input may be the output's own memory
  }
  return Status::ok();
}

}  // namespace

std::unique_ptr<hal::Stream> create_cpu_stream(CpuDevice& device) { return std::make_unique<CpuStream>(device); }

}  // namespace kiln::runtime::cpu
