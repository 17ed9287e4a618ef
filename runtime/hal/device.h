// hal::Device: one device of one driver (a GPU, a CPU implementation, the reference
// interpreter). The runtime's Session talks only to this interface, so a driver for a new API
// is a new folder under runtime/drivers/ implementing Driver, Device, Buffer, Executable and
// Stream (see runtime/drivers/reference/ for the smallest complete example).
//
// Ownership: opened by Driver::open_device and owned through std::unique_ptr; it must outlive
// every Buffer, Executable, Stream and Session created on it.
// Thread-safety: all methods are safe to call concurrently (sessions on one device may be
// created and run from many threads).
#pragma once

#include <functional>
#include <memory>

#include "artifact/reader.h"
#include "runtime/hal/buffer.h"
#include "runtime/hal/executable.h"
#include "runtime/hal/stream.h"
#include "runtime/hal/types.h"
#include "support/status.h"

namespace kiln::runtime::hal {

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual const DeviceInfo& info() const = 0;
  // True when Profile times come from device timers rather than host wall time.
  virtual bool has_device_timers() const = 0;

  virtual Result<std::unique_ptr<Buffer>> allocate(size_t bytes) = 0;
  // A Buffer over memory the application already holds on this device, used in place and never
  // freed by Kiln (the application keeps it alive until the Buffer is destroyed and no stream
  // uses it). `native` is the API's handle: CUDA, a CUdeviceptr; the reference device, a host
  // pointer. `on_release`, when given, runs when the Buffer is destroyed (the memory hook
  // returns its allocation there). kUnsupported for devices whose driver cannot wrap memory;
  // kInvalidArgument when the handle is not `bytes` of this device's memory.
  virtual Result<std::unique_ptr<Buffer>> wrap_native(void* native, size_t bytes,
                                                      std::function<void()> on_release = nullptr) {
    (void)native;
    (void)bytes;
    (void)on_release;
    return unsupported("device '" + info().id + "' cannot use application-owned memory in place");
  }
  // Prepares `artifact` for this device. kUnsupported when the artifact holds no kernels for
  // the device's target (naming the targets it does hold).
  virtual Result<std::unique_ptr<Executable>> load_executable(
      std::shared_ptr<const artifact::LoadedArtifact> artifact) = 0;
  virtual Result<std::unique_ptr<Stream>> create_stream() = 0;
  // A Stream that enqueues its work on the application's own queue `native` (CUDA: a CUstream),
  // which stays the application's (never destroyed by Kiln; it must outlive the Stream).
  // kUnsupported for devices whose driver cannot.
  virtual Result<std::unique_ptr<Stream>> create_stream_on(void* native) {
    (void)native;
    return unsupported("device '" + info().id + "' cannot run on an application's stream or queue");
  }

 protected:
  Device() = default;
};

}  // namespace kiln::runtime::hal
