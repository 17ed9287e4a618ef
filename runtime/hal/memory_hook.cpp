#include "runtime/hal/memory_hook.h"

#include <string>

#include "runtime/hal/device.h"

namespace kiln::runtime::hal {

Result<std::unique_ptr<Buffer>> allocate_buffer(Device& device, size_t bytes, const MemoryHook* hook) {
  if (!hook) return device.allocate(bytes);
  const size_t asked = bytes > 0 ? bytes : 1;  // every buffer has an address of its own
  void* native = nullptr;
  if (hook->allocate(hook->user_data, asked, &native) != 0 || !native)
    return Status(ErrorCode::kOutOfMemory, device.info().id + ": the application's allocator could not allocate " +
                                               std::to_string(asked) + " bytes");
  // The device's own buffer type over the allocation (drivers bind only their own buffers),
  // handing it back to the hook when the buffer goes.
  const MemoryHook copy = *hook;
  Result<std::unique_ptr<Buffer>> wrapped =
      device.wrap_native(native, bytes, [copy, native, asked] { copy.deallocate(copy.user_data, native, asked); });
  if (!wrapped.is_ok()) {
    hook->deallocate(hook->user_data, native, asked);
    return wrapped.status();
  }
  return wrapped;
}

}  // namespace kiln::runtime::hal
