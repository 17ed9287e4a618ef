// hal::Stream: an ordered queue of work on one Device (a CUDA stream, a Vulkan queue + command
// buffers, an OpenCL command queue; the reference device runs work at submission).
//
// Ownership: created by Device::create_stream, owned through std::unique_ptr, destroyed before
// its Device. Thread-safety: not thread-safe; a Stream is used by one thread at a time (each
// Session owns its stream). Different Streams of one Device may be used concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ir/shape.h"
#include "runtime/hal/buffer.h"
#include "runtime/hal/executable.h"
#include "runtime/hal/types.h"
#include "support/status.h"

namespace kiln::runtime::hal {

// Everything one execution of an Executable reads and writes. The buffers belong to the
// Executable's device and stay alive (and untouched by the host) until the stream is
// synchronized.
struct ExecuteArgs {
  // One buffer per graph input, in signature order, holding the tensor bytes (row-major).
  std::span<Buffer* const> inputs;
  // The actual input shapes (the symbols in the signature are bound from these).
  std::span<const std::vector<int64_t>> input_shapes;
  // One buffer per graph output, in signature order, each exactly the output's byte size.
  std::span<Buffer* const> outputs;
  // The plan's arena (plan.arena_size() for these bindings); may be null when the
  // arena is empty or the device does not use the plan (reference).
  Buffer* arena = nullptr;
  const ir::SymbolBindings* bindings = nullptr;
  // When non-null, per-kernel times of this execution are written here (valid after
  // synchronize()).
  Profile* profile = nullptr;
  // Host threads for work the device runs on the host (the reference interpreter's loops); 0:
  // one per hardware thread. Devices that compute elsewhere ignore it.
  unsigned host_threads = 1;
};

class Stream {
 public:
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Enqueues one execution of `executable` (which must belong to this stream's device).
  // Errors detected at submission are returned here; errors during execution by synchronize().
  virtual Status execute(const Executable& executable, const ExecuteArgs& args) = 0;
  // Waits for all enqueued work; returns the first execution error, if any.
  virtual Status synchronize() = 0;
  // Device time of the last execution that synchronize() waited for, measured with device
  // timers (CUDA events); nullopt when this stream does not measure it.
  virtual std::optional<double> last_execution_device_seconds() const { return std::nullopt; }

 protected:
  Stream() = default;
};

}  // namespace kiln::runtime::hal
