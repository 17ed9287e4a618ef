#include "runtime/session.h"

#include <map>

#include "ir/interpreter.h"

namespace kiln::runtime {
namespace {

std::string sizes_to_string(const std::vector<int64_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

std::string given_string(const ir::Tensor& t) {
  return std::string(ir::dtype_name(t.dtype())) + sizes_to_string(t.shape());
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

}  // namespace

Session::Session(std::shared_ptr<const artifact::LoadedArtifact> artifact, hal::Device& device)
    : artifact_(std::move(artifact)), device_(device) {}

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::create(
    std::shared_ptr<const artifact::LoadedArtifact> artifact, hal::Device& device) {
  if (!artifact) return invalid_argument("cannot create a session without an artifact");
  std::unique_ptr<Session> session(new Session(artifact, device));
  KILN_ASSIGN_OR_RETURN(session->executable_, device.load_executable(artifact));
  KILN_ASSIGN_OR_RETURN(session->stream_, device.create_stream());
  const ir::Graph& graph = artifact->graph;
  for (ir::NodeId id : graph.inputs())
    session->input_specs_.push_back({graph.node(id).name, graph.node(id).type});
  for (const ir::GraphOutput& out : graph.outputs())
    session->output_specs_.push_back({out.name, out.declared});
  session->inputs_.resize(session->input_specs_.size());
  session->input_buffers_.resize(session->input_specs_.size());
  session->output_buffers_.resize(session->output_specs_.size());
  return session;
}

Status Session::set_input(std::string_view name, ir::Tensor tensor) {
  size_t index = input_specs_.size();
  for (size_t i = 0; i < input_specs_.size(); ++i)
    if (input_specs_[i].name == name) index = i;
  if (index == input_specs_.size()) {
    std::string names;
    for (const TensorSpec& s : input_specs_) names += (names.empty() ? "'" : ", '") + s.name + "'";
    return not_found("the artifact has no input named '" + std::string(name) + "' (its inputs: " +
                     (names.empty() ? std::string("none") : names) + ")");
  }
  const TensorSpec& spec = input_specs_[index];
  const std::string expected = spec.type.to_string();
  const std::string prefix = "input '" + spec.name + "': expected " + expected + ", given " +
                             given_string(tensor);
  if (tensor.dtype() != spec.type.dtype)
    return invalid_argument(prefix + " (dtype " + std::string(ir::dtype_name(tensor.dtype())) +
                            " instead of " + std::string(ir::dtype_name(spec.type.dtype)) + ")");
  if (tensor.rank() != spec.type.rank())
    return invalid_argument(prefix + " (rank " + std::to_string(tensor.rank()) + " instead of " +
                            std::to_string(spec.type.rank()) + ")");
  for (size_t d = 0; d < spec.type.shape.size(); ++d) {
    const ir::Dim& dim = spec.type.shape[d];
    if (dim.is_static() && dim.size() != tensor.shape()[d])
      return invalid_argument(prefix + " (dimension " + std::to_string(d) + " is " +
                              std::to_string(tensor.shape()[d]) + " instead of " +
                              std::to_string(dim.size()) + ")");
  }
  inputs_[index] = std::move(tensor);
  outputs_.clear();
  return Status::ok();
}

void Session::clear_inputs() {
  for (auto& in : inputs_) in.reset();
  outputs_.clear();
  bindings_.clear();
}

// Checks that every input is bound and that inputs agree on every symbol, with a message that
// names both inputs; the bindings themselves come from ir::bind_inputs.
Result<ir::SymbolBindings> Session::bind_symbols() const {
  std::map<std::string, std::pair<int64_t, std::string>> seen;  // symbol -> (size, input)
  std::vector<ir::Tensor> tensors;
  tensors.reserve(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const TensorSpec& spec = input_specs_[i];
    if (!inputs_[i])
      return invalid_argument("input '" + spec.name + "' (" + spec.type.to_string() +
                              ") was not set");
    const ir::Tensor& t = *inputs_[i];
    for (size_t d = 0; d < spec.type.shape.size(); ++d) {
      const ir::Dim& dim = spec.type.shape[d];
      if (!dim.is_symbolic()) continue;
      auto [it, inserted] = seen.emplace(dim.symbol_name(), std::make_pair(t.shape()[d], spec.name));
      if (!inserted && it->second.first != t.shape()[d])
        return invalid_argument("input '" + spec.name + "': expected " + spec.type.to_string() +
                                ", given " + given_string(t) + ": symbol " + dim.symbol_name() +
                                " is " + std::to_string(t.shape()[d]) + " here but " +
                                std::to_string(it->second.first) + " in input '" +
                                it->second.second + "'");
    }
    tensors.push_back(t);
  }
  return ir::bind_inputs(artifact_->graph, tensors);
}

Result<hal::Buffer*> Session::buffer_of_size(std::unique_ptr<hal::Buffer>& slot, size_t bytes) {
  if (!slot || slot->size() != bytes) {
    slot.reset();
    KILN_ASSIGN_OR_RETURN(slot, device_.allocate(bytes));
  }
  return slot.get();
}

Status Session::run() {
  outputs_.clear();
  profile_ = hal::Profile{};
  KILN_ASSIGN_OR_RETURN(bindings_, bind_symbols());

  // Upload inputs.
  std::vector<hal::Buffer*> input_ptrs;
  std::vector<std::vector<int64_t>> input_shapes;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const ir::Tensor& t = *inputs_[i];
    KILN_ASSIGN_OR_RETURN(hal::Buffer * buffer, buffer_of_size(input_buffers_[i], t.size_bytes()));
    KILN_RETURN_IF_ERROR(buffer->write(0, std::span<const std::byte>(t.data(), t.size_bytes())));
    input_ptrs.push_back(buffer);
    input_shapes.push_back(t.shape());
  }

  // Outputs: shapes from the signature with the bound symbols.
  std::vector<hal::Buffer*> output_ptrs;
  std::vector<std::vector<int64_t>> output_shapes;
  for (size_t i = 0; i < output_specs_.size(); ++i) {
    const TensorSpec& spec = output_specs_[i];
    Result<std::vector<int64_t>> sizes = ir::resolve_shape(spec.type.shape, bindings_);
    if (!sizes.is_ok())
      return unsupported("output '" + spec.name + "' (" + spec.type.to_string() +
                         ") has a size no input determines: " + sizes.status().message());
    KILN_ASSIGN_OR_RETURN(size_t bytes, byte_size(spec.type.dtype, *sizes, "output '" + spec.name + "'"));
    KILN_ASSIGN_OR_RETURN(hal::Buffer * buffer, buffer_of_size(output_buffers_[i], bytes));
    output_ptrs.push_back(buffer);
    output_shapes.push_back(std::move(sizes).value());
  }

  // The arena, for devices that follow the memory plan.
  hal::Buffer* arena = nullptr;
  if (executable_->uses_arena()) {
    Result<int64_t> arena_bytes = artifact_->plan.arena_bytes.evaluate(bindings_);
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
  KILN_RETURN_IF_ERROR(stream_->execute(*executable_, args));
  KILN_RETURN_IF_ERROR(stream_->synchronize());

  // Download outputs into host tensors owned by the session.
  std::vector<ir::Tensor> outputs;
  for (size_t i = 0; i < output_specs_.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(output_specs_[i].type.dtype, output_shapes[i]));
    if (t.size_bytes() > 0)
      KILN_RETURN_IF_ERROR(output_ptrs[i]->read(0, std::span<std::byte>(t.mutable_data(), t.size_bytes())));
    outputs.push_back(std::move(t));
  }
  outputs_ = std::move(outputs);
  return Status::ok();
}

Result<std::vector<ir::Tensor>> Session::run(std::span<const ir::Tensor> inputs) {
  if (inputs.size() != input_specs_.size())
    return invalid_argument("the artifact takes " + std::to_string(input_specs_.size()) +
                            " input(s), given " + std::to_string(inputs.size()));
  clear_inputs();
  for (size_t i = 0; i < inputs.size(); ++i)
    KILN_RETURN_IF_ERROR(set_input(input_specs_[i].name, inputs[i]));
  KILN_RETURN_IF_ERROR(run());
  return outputs_;
}

Result<ir::Tensor> Session::output(std::string_view name) const {
  for (size_t i = 0; i < output_specs_.size(); ++i) {
    if (output_specs_[i].name != name) continue;
    if (i >= outputs_.size()) return invalid_argument("output '" + std::string(name) + "' is not computed yet (call run())");
    return outputs_[i];
  }
  return not_found("the artifact has no output named '" + std::string(name) + "'");
}

}  // namespace kiln::runtime
