#include "runtime/session.h"

#include <cstring>
#include <map>

#include "ir/interpreter.h"

namespace kiln::runtime {
namespace {

std::string sizes_to_string(const std::vector<int64_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

std::string given_string(ir::DType dtype, const std::vector<int64_t>& shape) {
  return std::string(ir::dtype_name(dtype)) + sizes_to_string(shape);
}

// Byte size of a resolved shape, or an error when it does not fit in memory.
Result<size_t> byte_size(ir::DType dtype, const std::vector<int64_t>& sizes, const std::string& what) {
  uint64_t n = ir::dtype_size(dtype);
  for (int64_t d : sizes) {
    if (d < 0) return invalid_argument(what + " has a negative size");
    if (d != 0 && n > (uint64_t(1) << 62) / uint64_t(d))
      return invalid_argument(what + " is too large: " + sizes_to_string(sizes));
    n *= uint64_t(d);
  }
  return size_t(n);
}

std::string quoted_names(const std::vector<TensorSpec>& specs) {
  std::string names;
  for (const TensorSpec& s : specs) names += (names.empty() ? "'" : ", '") + s.name + "'";
  return names.empty() ? std::string("none") : names;
}

}  // namespace

Session::Session(std::shared_ptr<const artifact::LoadedArtifact> artifact, hal::Device& device)
    : artifact_(std::move(artifact)), device_(device) {}

Session::~Session() {
  // The stream may still be using our buffers: let it finish before they are freed.
  if (in_flight_ && stream_) (void)stream_->synchronize();
}

Result<std::unique_ptr<Session>> Session::create(
    std::shared_ptr<const artifact::LoadedArtifact> artifact, hal::Device& device,
    const SessionOptions& options) {
  if (!artifact) return invalid_argument("cannot create a session without an artifact");
  if (options.memory && (!options.memory->allocate || !options.memory->deallocate))
    return invalid_argument("the allocator needs both its allocate and deallocate functions");
  std::unique_ptr<Session> session(new Session(artifact, device));
  session->memory_ = options.memory;
  session->host_threads_ = options.host_threads;
  // The allocator and the stream first: refused there, the session has not loaded (uploaded)
  // the artifact for nothing.
  if (session->memory_) {
    // Refuse an allocator the device cannot use now, not at the first run.
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> probe, session->allocate(1));
  }
  if (options.native_stream) {
    KILN_ASSIGN_OR_RETURN(session->stream_, device.create_stream_on(options.native_stream));
  } else {
    KILN_ASSIGN_OR_RETURN(session->stream_, device.create_stream());
  }
  KILN_ASSIGN_OR_RETURN(session->executable_, device.load_executable(artifact));
  const ir::Graph& graph = artifact->graph;
  for (ir::NodeId id : graph.inputs())
    session->input_specs_.push_back({graph.node(id).name, graph.node(id).type});
  for (const ir::GraphOutput& out : graph.outputs())
    session->output_specs_.push_back({out.name, out.declared});
  session->inputs_.resize(session->input_specs_.size());
  session->input_buffers_.resize(session->input_specs_.size());
  session->output_bindings_.resize(session->output_specs_.size());
  session->output_buffers_.resize(session->output_specs_.size());
  return session;
}

Result<size_t> Session::input_index(std::string_view name) const {
  for (size_t i = 0; i < input_specs_.size(); ++i)
    if (input_specs_[i].name == name) return i;
  return not_found("the artifact has no input named '" + std::string(name) + "' (its inputs: " +
                   quoted_names(input_specs_) + ")");
}

Result<size_t> Session::output_index(std::string_view name) const {
  for (size_t i = 0; i < output_specs_.size(); ++i)
    if (output_specs_[i].name == name) return i;
  return not_found("the artifact has no output named '" + std::string(name) + "' (its outputs: " +
                   quoted_names(output_specs_) + ")");
}

Status Session::check_not_in_flight(const char* what) const {
  if (in_flight_)
    return invalid_argument(std::string("cannot ") + what +
                            " while a run is in flight: wait for it first");
  return Status::ok();
}

Status Session::check_input(size_t index, ir::DType dtype, const std::vector<int64_t>& shape) const {
  const TensorSpec& spec = input_specs_[index];
  const std::string prefix = "input '" + spec.name + "': expected " + spec.type.to_string() +
                             ", given " + given_string(dtype, shape);
  if (dtype != spec.type.dtype)
    return invalid_argument(prefix + " (dtype " + std::string(ir::dtype_name(dtype)) +
                            " instead of " + std::string(ir::dtype_name(spec.type.dtype)) + ")");
  if (int64_t(shape.size()) != spec.type.rank())
    return invalid_argument(prefix + " (rank " + std::to_string(shape.size()) + " instead of " +
                            std::to_string(spec.type.rank()) + ")");
  for (size_t d = 0; d < spec.type.shape.size(); ++d) {
    const ir::Dim& dim = spec.type.shape[d];
    if (shape[d] < 0)
      return invalid_argument(prefix + " (dimension " + std::to_string(d) + " is negative)");
    if (dim.is_static() && dim.size() != shape[d])
      return invalid_argument(prefix + " (dimension " + std::to_string(d) + " is " +
                              std::to_string(shape[d]) + " instead of " +
                              std::to_string(dim.size()) + ")");
  }
  return Status::ok();
}

Status Session::set_input(std::string_view name, ir::Tensor tensor) {
  KILN_RETURN_IF_ERROR(check_not_in_flight("set an input"));
  KILN_ASSIGN_OR_RETURN(size_t index, input_index(name));
  KILN_RETURN_IF_ERROR(check_input(index, tensor.dtype(), tensor.shape()));
  InputBinding& binding = inputs_[index];
  binding.dtype = tensor.dtype();
  binding.shape = tensor.shape();
  binding.device = nullptr;
  binding.host = std::move(tensor);
  outputs_.clear();
  return Status::ok();
}

Status Session::set_input_buffer(std::string_view name, ir::DType dtype,
                                 std::vector<int64_t> shape, hal::Buffer& buffer) {
  KILN_RETURN_IF_ERROR(check_not_in_flight("set an input"));
  KILN_ASSIGN_OR_RETURN(size_t index, input_index(name));
  KILN_RETURN_IF_ERROR(check_input(index, dtype, shape));
  const std::string what = "input '" + input_specs_[index].name + "'";
  KILN_ASSIGN_OR_RETURN(size_t bytes, byte_size(dtype, shape, what));
  if (buffer.size() != bytes)
    return invalid_argument(what + ": the device buffer holds " + std::to_string(buffer.size()) +
                            " bytes but " + given_string(dtype, shape) + " needs " +
                            std::to_string(bytes));
  InputBinding& binding = inputs_[index];
  binding.host.reset();
  binding.device = &buffer;
  binding.dtype = dtype;
  binding.shape = std::move(shape);
  outputs_.clear();
  return Status::ok();
}

void Session::clear_inputs() {
  if (in_flight_) (void)wait();  // never free what the stream may still read
  for (auto& in : inputs_) in = InputBinding{};
  outputs_.clear();
  bindings_.clear();
}

Status Session::set_output_host(std::string_view name, void* data, size_t capacity_bytes) {
  KILN_RETURN_IF_ERROR(check_not_in_flight("bind an output"));
  KILN_ASSIGN_OR_RETURN(size_t index, output_index(name));
  if (!data && capacity_bytes > 0)
    return invalid_argument("output '" + output_specs_[index].name +
                            "': host memory is null but its capacity is " +
                            std::to_string(capacity_bytes) + " bytes");
  output_bindings_[index] = OutputBinding{data, capacity_bytes, nullptr};
  return Status::ok();
}

Status Session::set_output_buffer(std::string_view name, hal::Buffer& buffer) {
  KILN_RETURN_IF_ERROR(check_not_in_flight("bind an output"));
  KILN_ASSIGN_OR_RETURN(size_t index, output_index(name));
  output_bindings_[index] = OutputBinding{nullptr, 0, &buffer};
  return Status::ok();
}

Status Session::reset_output(std::string_view name) {
  KILN_RETURN_IF_ERROR(check_not_in_flight("bind an output"));
  KILN_ASSIGN_OR_RETURN(size_t index, output_index(name));
  output_bindings_[index] = OutputBinding{};
  return Status::ok();
}

// Checks that every input is bound and that inputs agree on every symbol, with a message that
// names both inputs; the bindings themselves come from ir::bind_inputs.
Result<ir::SymbolBindings> Session::bind_symbols() const {
  std::map<std::string, std::pair<int64_t, std::string>> seen;  // symbol -> (size, input)
  std::vector<ir::Tensor> shapes;  // dtype + shape only (views without data)
  shapes.reserve(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const TensorSpec& spec = input_specs_[i];
    const InputBinding& in = inputs_[i];
    if (!in.bound())
      return invalid_argument("input '" + spec.name + "' (" + spec.type.to_string() +
                              ") was not set");
    for (size_t d = 0; d < spec.type.shape.size(); ++d) {
      const ir::Dim& dim = spec.type.shape[d];
      if (!dim.is_symbolic()) continue;
      auto [it, inserted] = seen.emplace(dim.symbol_name(), std::make_pair(in.shape[d], spec.name));
      if (!inserted && it->second.first != in.shape[d])
        return invalid_argument("input '" + spec.name + "': expected " + spec.type.to_string() +
                                ", given " + given_string(in.dtype, in.shape) + ": symbol " +
                                dim.symbol_name() + " is " + std::to_string(in.shape[d]) +
                                " here but " + std::to_string(it->second.first) + " in input '" +
                                it->second.second + "'");
    }
    shapes.push_back(ir::Tensor::view(in.dtype, in.shape, nullptr, nullptr));
  }
  return ir::bind_inputs(artifact_->graph, shapes);
}

Result<hal::Buffer*> Session::buffer_of_size(std::unique_ptr<hal::Buffer>& slot, size_t bytes) {
  if (!slot || slot->size() != bytes) {
    slot.reset();
    KILN_ASSIGN_OR_RETURN(slot, allocate(bytes));
  }
  return slot.get();
}

Status Session::run() {
  KILN_RETURN_IF_ERROR(submit());
  return wait();
}

Status Session::submit() {
  KILN_RETURN_IF_ERROR(check_not_in_flight("start a run"));
  outputs_.clear();
  output_shapes_.clear();
  profile_ = hal::Profile{};
  KILN_ASSIGN_OR_RETURN(bindings_, bind_symbols());

  // Inputs: caller device buffers in place, host tensors uploaded into session buffers.
  std::vector<hal::Buffer*> input_ptrs;
  std::vector<std::vector<int64_t>> input_shapes;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const InputBinding& in = inputs_[i];
    hal::Buffer* buffer = in.device;
    if (!buffer) {
      const ir::Tensor& t = *in.host;
      KILN_ASSIGN_OR_RETURN(buffer, buffer_of_size(input_buffers_[i], t.size_bytes()));
      KILN_RETURN_IF_ERROR(buffer->write(0, std::span<const std::byte>(t.data(), t.size_bytes())));
    }
    input_ptrs.push_back(buffer);
    input_shapes.push_back(in.shape);
  }

  // Outputs: shapes from the signature with the bound symbols.
  std::vector<hal::Buffer*> output_ptrs;
  std::vector<std::vector<int64_t>> output_shapes;
  for (size_t i = 0; i < output_specs_.size(); ++i) {
    const TensorSpec& spec = output_specs_[i];
    const std::string what = "output '" + spec.name + "'";
    Result<std::vector<int64_t>> sizes = ir::resolve_shape(spec.type.shape, bindings_);
    if (!sizes.is_ok())
      return unsupported(what + " (" + spec.type.to_string() +
                         ") has a size no input determines: " + sizes.status().message());
    KILN_ASSIGN_OR_RETURN(size_t bytes, byte_size(spec.type.dtype, *sizes, what));
    const OutputBinding& binding = output_bindings_[i];
    hal::Buffer* buffer = binding.device;
    if (buffer) {
      if (buffer->size() != bytes)
        return invalid_argument(what + " is " + given_string(spec.type.dtype, *sizes) + " (" +
                                std::to_string(bytes) + " bytes) but its device buffer holds " +
                                std::to_string(buffer->size()) + " bytes");
    } else {
      if (binding.host && binding.host_capacity < bytes)
        return invalid_argument(what + " is " + given_string(spec.type.dtype, *sizes) + " (" +
                                std::to_string(bytes) + " bytes) but its host memory holds only " +
                                std::to_string(binding.host_capacity) + " bytes");
      KILN_ASSIGN_OR_RETURN(buffer, buffer_of_size(output_buffers_[i], bytes));
    }
    output_ptrs.push_back(buffer);
    output_shapes.push_back(std::move(sizes).value());
  }

  // The arena, for devices that follow the memory plan.
  hal::Buffer* arena = nullptr;
  if (executable_->uses_arena()) {
    Result<int64_t> arena_bytes = artifact_->plan.arena_size(bindings_);
    if (!arena_bytes.is_ok()) return std::move(arena_bytes).status();
    if (*arena_bytes < 0) return internal_error("the plan's arena size is negative");
    if (*arena_bytes > 0) {
      KILN_ASSIGN_OR_RETURN(arena, buffer_of_size(arena_, size_t(*arena_bytes)));
    }
  }

  hal::ExecuteArgs args;
  args.inputs = input_ptrs;
  args.input_shapes = input_shapes;
  args.outputs = output_ptrs;
  args.arena = arena;
  args.bindings = &bindings_;
  args.profile = profiling_ ? &profile_ : nullptr;
  args.host_threads = host_threads_;
  Status executed = stream_->execute(*executable_, args);
  if (!executed.is_ok()) {
    (void)stream_->synchronize();  // drain whatever was enqueued before the failure
    return executed;
  }
  output_shapes_ = std::move(output_shapes);
  pending_outputs_ = std::move(output_ptrs);
  in_flight_ = true;
  return Status::ok();
}

Status Session::wait() {
  if (!in_flight_) return invalid_argument("no run is in flight: submit one first");
  in_flight_ = false;
  Status synced = stream_->synchronize();
  if (!synced.is_ok()) {
    output_shapes_.clear();
    return synced;
  }
  return deliver_outputs();
}

// Downloads outputs with the default binding into host tensors and copies those bound to host
// memory; outputs bound to device buffers are already in place.
Status Session::deliver_outputs() {
  std::vector<ir::Tensor> outputs(output_specs_.size());
  for (size_t i = 0; i < output_specs_.size(); ++i) {
    const OutputBinding& binding = output_bindings_[i];
    if (binding.device) continue;
    hal::Buffer& buffer = *pending_outputs_[i];
    if (binding.host) {
      if (buffer.size() > 0)
        KILN_RETURN_IF_ERROR(buffer.read(0, std::span<std::byte>(static_cast<std::byte*>(binding.host),
                                                                 buffer.size())));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(outputs[i], ir::Tensor::zeros(output_specs_[i].type.dtype, output_shapes_[i]));
    if (outputs[i].size_bytes() > 0)
      KILN_RETURN_IF_ERROR(buffer.read(0, std::span<std::byte>(outputs[i].mutable_data(),
                                                               outputs[i].size_bytes())));
  }
  pending_outputs_.clear();
  outputs_ = std::move(outputs);
  return Status::ok();
}

Result<std::vector<ir::Tensor>> Session::run(std::span<const ir::Tensor> inputs) {
  if (inputs.size() != input_specs_.size())
    return invalid_argument("the artifact takes " + std::to_string(input_specs_.size()) +
                            " input(s), given " + std::to_string(inputs.size()));
  KILN_RETURN_IF_ERROR(check_not_in_flight("start a run"));
  clear_inputs();
  for (size_t i = 0; i < inputs.size(); ++i)
    KILN_RETURN_IF_ERROR(set_input(input_specs_[i].name, inputs[i]));
  KILN_RETURN_IF_ERROR(run());
  return outputs_;
}

Result<ir::Tensor> Session::output(std::string_view name) const {
  KILN_ASSIGN_OR_RETURN(size_t i, output_index(name));
  if (i >= outputs_.size())
    return invalid_argument("output '" + std::string(name) + "' is not computed yet (call run())");
  if (output_bindings_[i].device || output_bindings_[i].host)
    return invalid_argument("output '" + std::string(name) +
                            "' is bound to caller memory; read it there");
  return outputs_[i];
}

}  // namespace kiln::runtime
