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
// was expected and what was given. The API uses only ir::Tensor, hal::Buffer and plain types so
// that the C API (include/kiln/runtime.h, runtime/c_api.cpp) wraps it one to one.
//
// Bindings. An input is bound either to a host tensor (uploaded into a session-owned device
// buffer at each run) or to a caller's device buffer on this session's device (used in place,
// no copy). An output is, by default, downloaded into a session-owned host tensor (outputs());
// it may instead be bound to caller host memory (written at the end of each run) or to a
// caller's device buffer (written in place, never downloaded). Bindings persist across runs
// until replaced or cleared. Caller buffers and memory must stay alive while bound.
//
// Asynchronous runs: submit() uploads the inputs and enqueues the execution on the session's
// stream, then returns; wait() waits for it and delivers the outputs. Between the two the
// session is "in flight": every other mutating call fails with kInvalidArgument, and the caller
// must not touch bound device buffers or bound output memory. run() is submit() + wait().
// Destroying an in-flight session waits for its work first.
//
// Ownership and thread-safety: a Session owns its device buffers, stream and results; it is not
// thread-safe (use one session per thread, or serialize access). The artifact is shared
// read-only, so many sessions on one artifact, on one or several devices, may run concurrently
// from many threads.
#pragma once

#include <cstddef>
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
#include "runtime/hal/memory_hook.h"
#include "runtime/hal/types.h"
#include "support/status.h"

namespace kiln::runtime {

// How a session is set up beyond its artifact and device.
struct SessionOptions {
  // The application's stream or queue to enqueue on (CUDA: a CUstream), or null for the
  // session's own. Device::create_stream_on says which devices can.
  void* native_stream = nullptr;
  // The application's allocator for the session's buffers (inputs, outputs, the plan's arena),
  // or empty for the device's. The artifact's constants are not the session's: sessions of one
  // artifact on one device share them, in memory the device allocates.
  std::optional<hal::MemoryHook> memory;
  // Host threads for the device's host work (the reference interpreter); 0: one per hardware
  // thread.
  unsigned host_threads = 1;
};

// One entry of the artifact's signature.
struct TensorSpec {
  std::string name;
  ir::TensorType type;  // shape may hold symbols
};

class Session {
 public:
  // Loads `artifact` onto `device` (which must outlive the session).
  static Result<std::unique_ptr<Session>> create(
      std::shared_ptr<const artifact::LoadedArtifact> artifact, hal::Device& device,
      const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<TensorSpec>& input_specs() const { return input_specs_; }
  const std::vector<TensorSpec>& output_specs() const { return output_specs_; }
  const artifact::LoadedArtifact& artifact() const { return *artifact_; }
  const hal::Device& device() const { return device_; }
  hal::Device& device() { return device_; }
  // A buffer of `bytes` on the session's device, from the session's allocator when it has one.
  Result<std::unique_ptr<hal::Buffer>> allocate(size_t bytes) {
    return hal::allocate_buffer(device_, bytes, memory_ ? &*memory_ : nullptr);
  }

  // Index of an input / output by name. kNotFound for an unknown name (listing the names).
  Result<size_t> input_index(std::string_view name) const;
  Result<size_t> output_index(std::string_view name) const;
  // Whether a `dtype` tensor of `shape` fits input `index` (dtype, rank, static dims), with the
  // message set_input would give.
  Status check_input(size_t index, ir::DType dtype, const std::vector<int64_t>& shape) const;

  // Binds an input by name to a host tensor. kNotFound for an unknown name (listing the
  // inputs); kInvalidArgument for a dtype, rank or static-dim mismatch. The tensor is shared,
  // not copied, until run().
  Status set_input(std::string_view name, ir::Tensor tensor);
  // Binds an input to `buffer` (a buffer of this session's device holding exactly the bytes of
  // a `dtype` tensor of `shape`, row-major), used in place by every run.
  Status set_input_buffer(std::string_view name, ir::DType dtype, std::vector<int64_t> shape,
                          hal::Buffer& buffer);
  // Forgets every bound input (and the previous outputs).
  void clear_inputs();

  // Output destinations. set_output_host: each run writes the output's bytes to `data`, which
  // must hold at least the output's byte size (checked at run, naming the output).
  // set_output_buffer: each run writes the output in place into `buffer` (a buffer of this
  // device of exactly the output's byte size). reset_output: back to the session-owned tensor.
  Status set_output_host(std::string_view name, void* data, size_t capacity_bytes);
  Status set_output_buffer(std::string_view name, hal::Buffer& buffer);
  Status reset_output(std::string_view name);

  // Records per-kernel times during run() (read them with last_profile()).
  // Takes effect at the next submit(); a run in flight keeps the setting it started with.
  void set_profiling(bool enabled) { profiling_ = enabled; }

  // Runs once with the bound inputs and waits for the results. Fails (naming the input) if an
  // input is missing or the inputs bind a symbol to different sizes.
  Status run();
  // Convenience: binds `inputs` in signature order, runs, and returns the outputs.
  Result<std::vector<ir::Tensor>> run(std::span<const ir::Tensor> inputs);
  // Asynchronous halves of run(); see the header comment.
  Status submit();
  Status wait();
  bool in_flight() const { return in_flight_; }

  // Valid after a successful run(): outputs in signature order. Outputs with the default
  // binding are owned host tensors; outputs bound to host memory or a device buffer are empty
  // tensors here (their data went to the binding).
  const std::vector<ir::Tensor>& outputs() const { return outputs_; }
  Result<ir::Tensor> output(std::string_view name) const;
  // The resolved output shapes of the last successful run (every binding kind).
  const std::vector<std::vector<int64_t>>& output_shapes() const { return output_shapes_; }
  // The symbol sizes bound by the last run().
  const ir::SymbolBindings& bindings() const { return bindings_; }
  // Per-kernel times of the last run() with profiling on.
  const hal::Profile& last_profile() const { return profile_; }
  // Device time of the last run (device timers), when the device's stream measures it (CUDA).
  std::optional<double> last_device_seconds() const {
    return stream_ ? stream_->last_execution_device_seconds() : std::nullopt;
  }

 private:
  struct InputBinding {
    std::optional<ir::Tensor> host;  // a host tensor, uploaded at each run
    hal::Buffer* device = nullptr;   // or a caller's device buffer, used in place
    ir::DType dtype = ir::DType::kF32;
    std::vector<int64_t> shape;
    bool bound() const { return host.has_value() || device != nullptr; }
  };
  struct OutputBinding {
    void* host = nullptr;  // caller host memory
    size_t host_capacity = 0;
    hal::Buffer* device = nullptr;  // caller device buffer
  };

  Session(std::shared_ptr<const artifact::LoadedArtifact> artifact, hal::Device& device);
  Status check_not_in_flight(const char* what) const;
  Result<ir::SymbolBindings> bind_symbols() const;
  Status deliver_outputs();
  // Device buffer of at least `bytes`, reusing `slot` across runs when its size matches.
  Result<hal::Buffer*> buffer_of_size(std::unique_ptr<hal::Buffer>& slot, size_t bytes);

  std::shared_ptr<const artifact::LoadedArtifact> artifact_;
  hal::Device& device_;
  std::optional<hal::MemoryHook> memory_;
  unsigned host_threads_ = 1;
  std::unique_ptr<hal::Executable> executable_;
  std::unique_ptr<hal::Stream> stream_;
  std::vector<TensorSpec> input_specs_;
  std::vector<TensorSpec> output_specs_;

  std::vector<InputBinding> inputs_;  // per input spec
  std::vector<OutputBinding> output_bindings_;  // per output spec
  std::vector<std::unique_ptr<hal::Buffer>> input_buffers_;
  std::vector<std::unique_ptr<hal::Buffer>> output_buffers_;
  std::unique_ptr<hal::Buffer> arena_;
  std::vector<ir::Tensor> outputs_;
  std::vector<std::vector<int64_t>> output_shapes_;
  std::vector<hal::Buffer*> pending_outputs_;  // the output buffers of the run in flight
  ir::SymbolBindings bindings_;
  bool profiling_ = false;
  bool in_flight_ = false;
  hal::Profile profile_;
};

}  // namespace kiln::runtime
