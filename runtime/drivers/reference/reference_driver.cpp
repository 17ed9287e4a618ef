// The reference driver: host buffers, an executable that is just the loaded artifact, and a
// stream that runs the reference interpreter synchronously at submission.
#include "runtime/drivers/reference/reference_driver.h"

#include <functional>
#include <new>
#include <string>

#include "ir/interpreter.h"
#include "runtime/drivers/reference/reference_executor.h"
#include "runtime/hal/driver_catalog.h"
#include "runtime/hal/host_buffer.h"

namespace kiln::runtime::reference {
namespace {

// The reference device needs no preparation: the executable is the artifact itself.
class ReferenceExecutable final : public hal::Executable {
 public:
  explicit ReferenceExecutable(std::shared_ptr<const artifact::LoadedArtifact> artifact)
      : artifact_(std::move(artifact)) {}
  const artifact::LoadedArtifact& artifact() const override { return *artifact_; }
  bool uses_arena() const override { return false; }

 private:
  std::shared_ptr<const artifact::LoadedArtifact> artifact_;
};

class ReferenceStream final : public hal::Stream {
 public:
  Status execute(const hal::Executable& executable, const hal::ExecuteArgs& args) override;
  Status synchronize() override { return Status::ok(); }  // work ran at submission
};

Status ReferenceStream::execute(const hal::Executable& executable, const hal::ExecuteArgs& args) {
  const auto* ref = dynamic_cast<const ReferenceExecutable*>(&executable);
  if (!ref) return invalid_argument("reference device: the executable belongs to another device");
  const ir::Graph& graph = ref->artifact().graph;
  if (args.inputs.size() != graph.inputs().size() || args.input_shapes.size() != args.inputs.size() ||
      args.outputs.size() != graph.outputs().size())
    return invalid_argument("reference device: wrong number of input or output buffers");

  // Input buffers are host memory: view them as tensors (no copy). The views do not outlive
  // this call, and the buffers outlive it, so they need no keepalive.
  std::vector<ir::Tensor> inputs;
  inputs.reserve(args.inputs.size());
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const ir::Node& node = graph.node(graph.inputs()[i]);
    ir::Tensor view = ir::Tensor::view(node.type.dtype, args.input_shapes[i],
                                       args.inputs[i]->host_data(), nullptr);
    if (view.size_bytes() != args.inputs[i]->size())
      return invalid_argument("reference device: input '" + node.name + "' buffer holds " +
                              std::to_string(args.inputs[i]->size()) + " bytes, its shape needs " +
                              std::to_string(view.size_bytes()));
    inputs.push_back(std::move(view));
  }

  // The session's thread count, for this run on this thread only (restored however it ends).
  struct ThreadsForThisRun {
    unsigned previous = ir::interpreter_threads();
    explicit ThreadsForThisRun(unsigned threads) { ir::set_interpreter_threads(threads); }
    ~ThreadsForThisRun() { ir::set_interpreter_threads(previous); }
  } threads_for_this_run(args.host_threads);
  // The interpreter's tensors are host memory: running out of it is this device's out-of-memory
  // error, as a GPU's allocation failure is (not an exception escaping to the caller).
  auto interpret = [&]() -> Result<std::vector<ir::Tensor>> {
    try {
      return args.profile ? interpret_with_profile(graph, inputs, *args.profile) : ir::interpret(graph, inputs);
    } catch (const std::bad_alloc&) {
      return Status(ErrorCode::kOutOfMemory, "reference device: out of host memory while running the graph");
    }
  };
  Result<std::vector<ir::Tensor>> outputs = interpret();
  if (!outputs.is_ok()) return std::move(outputs).status();

  for (size_t i = 0; i < outputs->size(); ++i) {
    const ir::Tensor& t = (*outputs)[i];
    hal::Buffer& out = *args.outputs[i];
    if (t.size_bytes() != out.size())
      return internal_error("reference device: output '" + graph.outputs()[i].name + "' has " +
                            std::to_string(t.size_bytes()) + " bytes but its buffer holds " +
                            std::to_string(out.size()));
    KILN_RETURN_IF_ERROR(out.write(0, std::span<const std::byte>(t.data(), t.size_bytes())));
  }
  return Status::ok();
}

class ReferenceDevice final : public hal::Device {
 public:
  explicit ReferenceDevice(hal::DeviceInfo info) : info_(std::move(info)) {}

  const hal::DeviceInfo& info() const override { return info_; }
  bool has_device_timers() const override { return false; }
  Result<std::unique_ptr<hal::Buffer>> allocate(size_t bytes) override {
    return hal::HostBuffer::allocate("reference device", bytes);
  }
  // Host memory of the application (the reference device's memory is host memory). The
  // interpreter reads tensors at any alignment, so any pointer to `bytes` bytes will do.
  Result<std::unique_ptr<hal::Buffer>> wrap_native(void* native, size_t bytes,
                                                   std::function<void()> on_release) override {
    if (!native) return invalid_argument("reference device: the application's memory pointer is NULL");
    return hal::HostBuffer::borrow(static_cast<std::byte*>(native), bytes, std::move(on_release));
  }
  Result<std::unique_ptr<hal::Executable>> load_executable(
      std::shared_ptr<const artifact::LoadedArtifact> artifact) override {
    if (!artifact) return invalid_argument("reference device: no artifact to load");
    return std::unique_ptr<hal::Executable>(new ReferenceExecutable(std::move(artifact)));
  }
  Result<std::unique_ptr<hal::Stream>> create_stream() override {
    return std::unique_ptr<hal::Stream>(new ReferenceStream());
  }

 private:
  hal::DeviceInfo info_;
};

// The reference driver's record: just the device's description.
struct ReferenceRecord {
  hal::DeviceInfo info;
};

class ReferenceDriver final : public hal::CatalogDriver<ReferenceRecord> {
 public:
  ReferenceDriver() : CatalogDriver("reference", "reference") {}

 protected:
  const hal::DeviceCatalog<ReferenceRecord>& catalog() const override {
    static const hal::DeviceCatalog<ReferenceRecord> instance{{ReferenceRecord{device_info()}}, ""};
    return instance;
  }
  Result<std::unique_ptr<hal::Device>> open(const ReferenceRecord& record, const hal::DeviceOptions&) const override {
    return std::unique_ptr<hal::Device>(new ReferenceDevice(record.info));
  }

 private:
  static hal::DeviceInfo device_info() {
    hal::DeviceInfo info;
    info.id = kReferenceDeviceId;
    info.driver = "reference";
    info.type = hal::DeviceType::kCpu;
    info.description = "Kiln reference interpreter";
    info.priority = 0;
    return info;
  }
};

}  // namespace

std::unique_ptr<hal::Driver> create_reference_driver() { return std::make_unique<ReferenceDriver>(); }

}  // namespace kiln::runtime::reference
