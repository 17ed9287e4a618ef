// hal::HostBuffer: a Buffer over plain host memory, shared by the drivers whose device memory is
// host memory (the reference interpreter, the cpu driver).
//
// Memory is 64-byte aligned (like ir::Tensor storage, and wide enough for any vector load a
// generated kernel makes). A buffer either owns its allocation (allocate) or borrows the
// application's memory (borrow: Device::wrap_native, and through it the memory hook), which it
// never frees; `on_release`, when given, runs at destruction (the hook returns its allocation
// there).
//
// Ownership: owned by the caller through std::unique_ptr, like every Buffer. Thread-safety: as
// hal::Buffer: concurrent read() calls are safe; write() and use by a stream need external
// synchronization.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "runtime/hal/buffer.h"
#include "support/status.h"

namespace kiln::runtime::hal {

class HostBuffer final : public Buffer {
 public:
  inline static constexpr size_t kAlignment = 64;

  // `bytes` of new host memory (uninitialized; none for 0 bytes, host_data() is then null).
  // Running out of memory is kOutOfMemory, "<device>: cannot allocate N bytes of host memory".
  static Result<std::unique_ptr<Buffer>> allocate(std::string_view device, size_t bytes);
  // The application's memory at `data`, used in place.
  static std::unique_ptr<Buffer> borrow(std::byte* data, size_t bytes, std::function<void()> on_release);
  ~HostBuffer() override;

  size_t size() const override { return size_; }
  std::byte* host_data() override { return data_; }
  Status write(size_t offset, std::span<const std::byte> data) override;
  Status read(size_t offset, std::span<std::byte> out) const override;

 private:
  HostBuffer(std::byte* data, size_t size, bool owned, std::function<void()> on_release)
      : data_(data), size_(size), owned_(owned), on_release_(std::move(on_release)) {}
  Status check_range(size_t offset, size_t count) const;

  std::byte* data_;
  size_t size_;
  bool owned_;
  std::function<void()> on_release_;
};

}  // namespace kiln::runtime::hal
