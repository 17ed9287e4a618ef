// hal::Buffer: a block of memory owned by one Device.
//
// Ownership: created by Device::allocate and owned by the caller through std::unique_ptr; it
// must be destroyed before its Device. Thread-safety: concurrent read() calls are safe; write()
// and use by a Stream need external synchronization (a Session serializes its own buffers).
#pragma once

#include <cstddef>
#include <span>

#include "support/status.h"

namespace kiln::runtime::hal {

class Buffer {
 public:
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  virtual size_t size() const = 0;
  // The memory as host bytes when the device's memory is host-visible (the reference device,
  // unified memory), or nullptr when it can only be reached through read()/write().
  virtual std::byte* host_data() = 0;
  // Synchronous copies between host memory and the buffer at `offset`. A range outside the
  // buffer is kInvalidArgument.
  virtual Status write(size_t offset, std::span<const std::byte> data) = 0;
  virtual Status read(size_t offset, std::span<std::byte> out) const = 0;

 protected:
  Buffer() = default;
};

}  // namespace kiln::runtime::hal
