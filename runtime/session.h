// Session: runs one loaded artifact on one Device.
//
// Usage:
//   auto artifact = std::make_shared<const LoadedArtifact>(...read_artifact_file(path)...);
//   auto session = Session::create(artifact, device);       // device outlives the session
//   session->set_input("x", tensor);                        // validated against the signature
//   session->run();                                         // binds symbols, executes, waits
//   const ir::Tensor& y = session->outputs()[0];
//
// Inputs are checked as they are set (name, dtype, rank, static dims) and together at run()
// (every input set, symbolic dims consistent across inputs); every error names the input, what
// was expected and what was given. The API uses only ir::Tensor and plain types so that the C
// API (include/kiln/runtime.h, a later issue) can wrap it one to one.
//
// Ownership and thread-safety: a Session owns its device buffers, stream and results; it is not
// thread-safe (use one session per thread). The artifact is shared read-only, so many sessions
// on one artifact, on one or several devices, may run concurrently from many threads.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/reader.h"
#include "ir/shape.h"
#include "ir/tensor.h"
#include "runtime/hal/device.h"
#include "runtime/hal/types.h"
#include "support/status.h"

namespace kiln::runtime {

// One entry of the artifact's signature.
struct TensorSpec {
  std::string name;
  ir::TensorType type;  // shape may hold symbols
};

class Session {
 public:
  // Loads `artifact` onto `device` (which must outlive the session).
  static Result<std::unique_ptr<Session>> create(
      std::shared_ptr<const artifact::LoadedArtifact> artifact, hal::Device& device);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<TensorSpec>& input_specs() const { return input_specs_; }
  const std::vector<TensorSpec>& output_specs() const { return output_specs_; }
  const artifact::LoadedArtifact& artifact() const { return *artifact_; }
  const hal::Device& device() const { return device_; }

  // Binds an input by name. kNotFound for an unknown name (listing the inputs);
  // kInvalidArgument for a dtype, rank or static-dim mismatch. The tensor is shared, not copied,
  // until run().
  Status set_input(std::string_view name, ir::Tensor tensor);
  // Forgets every bound input (and the previous outputs).
  void clear_inputs();

  // Records per-kernel times during run() (read them with last_profile()).
  void set_profiling(bool enabled) { profiling_ = enabled; }

  // Runs once with the bound inputs and waits for the results. Fails (naming the input) if an
  // input is missing or the inputs bind a symbol to different sizes.
  Status run();
  // Convenience: binds `inputs` in signature order, runs, and returns the outputs.
  Result<std::vector<ir::Tensor>> run(std::span<const ir::Tensor> inputs);

  // Valid after a successful run(): outputs in signature order, owned host tensors.
  const std::vector<ir::Tensor>& outputs() const { return outputs_; }
  Result<ir::Tensor> output(std::string_view name) const;
  // The symbol sizes bound by the last run().
  const ir::SymbolBindings& bindings() const { return bindings_; }
  // Per-kernel times of the last run() with profiling on.
  const hal::Profile& last_profile() const { return profile_; }

 private:
  Session(std::shared_ptr<const artifact::LoadedArtifact> artifact, hal::Device& device);
  Result<ir::SymbolBindings> bind_symbols() const;
  // Device buffer of at least `bytes`, reusing `slot` across runs when its size matches.
  Result<hal::Buffer*> buffer_of_size(std::unique_ptr<hal::Buffer>& slot, size_t bytes);

  std::shared_ptr<const artifact::LoadedArtifact> artifact_;
  hal::Device& device_;
  std::unique_ptr<hal::Executable> executable_;
  std::unique_ptr<hal::Stream> stream_;
  std::vector<TensorSpec> input_specs_;
  std::vector<TensorSpec> output_specs_;

  std::vector<std::optional<ir::Tensor>> inputs_;  // per input spec
  std::vector<std::unique_ptr<hal::Buffer>> input_buffers_;
  std::vector<std::unique_ptr<hal::Buffer>> output_buffers_;
  std::unique_ptr<hal::Buffer> arena_;
  std::vector<ir::Tensor> outputs_;
  ir::SymbolBindings bindings_;
  bool profiling_ = false;
  hal::Profile profile_;
};

}  // namespace kiln::runtime
