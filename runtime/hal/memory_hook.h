// hal::MemoryHook: device memory that the application supplies (kiln_allocator in the C API),
// and the one function through which a Session allocates its buffers with or without it.
//
// With a hook, a buffer is the hook's allocation (its native handle: a CUdeviceptr on CUDA, a
// host pointer on the reference device) wrapped by the device (Device::wrap_native) and handed
// back to the hook when the buffer is destroyed. Devices that cannot wrap native memory (OpenCL,
// Vulkan) cannot use a hook: allocate_buffer then fails with kUnsupported.
//
// Ownership: the hook's function pointers and user_data belong to the application, which keeps
// them valid while any buffer allocated through them lives. Thread-safety: the hook is called
// from whichever thread allocates or frees a buffer, possibly several at once.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/hal/buffer.h"
#include "support/status.h"

namespace kiln::runtime::hal {

class Device;

struct MemoryHook {
  void* user_data = nullptr;
  // Returns 0 and the allocation's native handle in *native, or non-zero when it cannot.
  int (*allocate)(void* user_data, size_t bytes, void** native) = nullptr;
  void (*deallocate)(void* user_data, void* native, size_t bytes) = nullptr;
};

// `bytes` of memory on `device`: the device's own allocation, or the hook's when one is given.
Result<std::unique_ptr<Buffer>> allocate_buffer(Device& device, size_t bytes, const MemoryHook* hook);

}  // namespace kiln::runtime::hal
