// The OpenCL driver: every device of every OpenCL platform, as "opencl:0", "opencl:1", ...
// (in platform order, then device order within the platform).
//
// libOpenCL.so.1 is loaded with dlopen on first use (see cl_api.h): without it the driver lists
// no devices and unavailable_reason() says why.
//
// Device types and priorities: a GPU with its own memory is a discrete GPU (300), one sharing
// host memory (CL_DEVICE_HOST_UNIFIED_MEMORY) an integrated GPU (200), a CPU implementation
// such as PoCL a CPU (100); an accelerator is listed as a discrete GPU of priority 250 with
// "(accelerator)" in its description (the HAL has no accelerator type). The description is
// "PLATFORM NAME / DEVICE NAME".
//
// Kernels: the artifact's "opencl" KernelBinary list, format "opencl-c" (the blob is OpenCL C
// source). The executable builds one cl_program per distinct kernel source (kernels of one
// artifact are built separately so that helpers each kernel defines never collide). Program
// binaries are cached in memory per OpenCL device (keyed by a hash of source and build options,
// CL_PROGRAM_BINARIES -> clCreateProgramWithBinary): a second session, or a second load of the
// same artifact on the same device, does not compile again. The cache lives with the driver
// (and with any device still open) and is not written to disk.
//
// Features: a kernel's required_features are OpenCL extension names ("cl_khr_fp16", ...);
// cl_khr_int64 is also met by every FULL_PROFILE device (64-bit integers are core there) and
// cl_khr_fp64 by any device reporting a double-precision configuration. A missing feature makes
// load_executable fail with kUnsupported naming the feature and the kernel.
//
// Thread-safety: per the HAL headers; many sessions (each with its own stream, i.e. its own
// in-order command queue and kernel objects) may run concurrently on one device.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/hal/driver.h"
#include "support/status.h"

namespace kiln::runtime::opencl {

std::unique_ptr<hal::Driver> create_opencl_driver();

// How often programs were compiled from source and loaded from the in-memory binary cache on
// the OpenCL device behind `device` (counts are per OpenCL device, over the process lifetime).
struct ProgramCacheStats {
  uint64_t source_builds = 0;
  uint64_t binary_loads = 0;
};
// kInvalidArgument when `device` is not an OpenCL device.
Result<ProgramCacheStats> program_cache_stats(const hal::Device& device);

}  // namespace kiln::runtime::opencl
