// The Vulkan driver: one hal::Device per physical device with a compute queue ("vulkan:0", ...),
// over libvulkan.so.1 loaded at run time (no link-time dependency). Without the loader or
// without devices it lists no devices and unavailable_reason() says why.
//
// Ownership: the driver owns the Vulkan instance (shared with the devices it opens, which keep
// it alive). Thread-safety: all methods are safe to call concurrently; the instance is created
// once, on first use.
#pragma once

#include <memory>

#include "runtime/hal/driver.h"

namespace kiln::runtime::vulkan {

std::unique_ptr<hal::Driver> create_vulkan_driver();

}  // namespace kiln::runtime::vulkan
