#include "runtime/hal/host_buffer.h"

#include <cstring>
#include <new>

namespace kiln::runtime::hal {

Result<std::unique_ptr<Buffer>> HostBuffer::allocate(std::string_view device, size_t bytes) {
  std::byte* data = nullptr;
  if (bytes > 0) {
    data = static_cast<std::byte*>(::operator new(bytes, std::align_val_t(kAlignment), std::nothrow));
    if (!data)
      return Status(ErrorCode::kOutOfMemory, std::string(device) + ": cannot allocate " + std::to_string(bytes) +
                                                 " bytes of host memory");
  }
  return std::unique_ptr<Buffer>(new HostBuffer(data, bytes, /*owned=*/true, nullptr));
}

std::unique_ptr<Buffer> HostBuffer::borrow(std::byte* data, size_t bytes, std::function<void()> on_release) {
  return std::unique_ptr<Buffer>(new HostBuffer(data, bytes, /*owned=*/false, std::move(on_release)));
}

HostBuffer::~HostBuffer() {
  if (owned_ && data_) ::operator delete(data_, std::align_val_t(kAlignment));
  if (on_release_) on_release_();
}

Status HostBuffer::write(size_t offset, std::span<const std::byte> data) {
  KILN_RETURN_IF_ERROR(check_range(offset, data.size()));
  if (!data.empty()) std::memcpy(data_ + offset, data.data(), data.size());
  return Status::ok();
}

Status HostBuffer::read(size_t offset, std::span<std::byte> out) const {
  KILN_RETURN_IF_ERROR(check_range(offset, out.size()));
  if (!out.empty()) std::memcpy(out.data(), data_ + offset, out.size());
  return Status::ok();
}

Status HostBuffer::check_range(size_t offset, size_t count) const {
  if (offset > size_ || count > size_ - offset)
    return invalid_argument("buffer access of " + std::to_string(count) + " bytes at offset " +
                            std::to_string(offset) + " is outside the " + std::to_string(size_) + "-byte buffer");
  return Status::ok();
}

}  // namespace kiln::runtime::hal
