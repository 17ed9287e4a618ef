// The cpu driver: one device, "cpu:0", that runs the artifact's "cpu" kernels (native x86-64
// code compiled by the cpu codegen target) on the host's cores, following the memory plan like
// the GPU drivers do. Its memory is host memory (Buffer::host_data() is always set, 64-byte
// aligned), so application memory is used in place (Device::wrap_native takes a host pointer,
// and with it the memory hook works) and constants are never copied: kernels read them where the
// loaded artifact holds them.
//
// Availability: x86-64 Linux hosts (elsewhere the driver lists no device and says why).
//
// Priority 150: below every GPU (CUDA 400, discrete 300, integrated 200), above the CPU
// implementations of the GPU APIs (PoCL, lavapipe: 100) and the reference interpreter (0), so an
// artifact compiled for cpu and opencl runs on an OpenCL GPU when there is one, else natively.
//
// Device options:
//   cpu.threads = N   threads a launch runs on, the calling thread included, oneDNN's calls
//                     too (0 or unset: one per hardware thread, hardware_concurrency())
//
// Artifact records (target "cpu"):
//   ModuleBinary {target "cpu", format "so:x86_64" (on AArch64 machines "so:aarch64"), id}: the
//     bytes of an ELF shared object; a module for another architecture is refused by name. The
//     executable writes each module the kernels name into an anonymous in-memory file
//     (memfd_create) and dlopens it (RTLD_NOW | RTLD_LOCAL); nothing touches the disk.
//   KernelBinary {target "cpu", format "module", module_id, entry_point, args, dispatch}: the
//     exported function `entry_point` of module `module_id`, with the C ABI
//
//       extern "C" void ENTRY(void* const* buffers, const int64_t* symbols,
//                             int64_t begin, int64_t end);
//
//     buffers[i]: the host address of the i-th kBuffer arg (counting kBuffer args only, in args
//     order; a zero-byte value may be null); symbols[j]: the value of the j-th kSymbol arg. The
//     call computes work units [begin, end) of dispatch.work_items; several threads call it at
//     once with disjoint ranges of one launch. dispatch.items_per_group is the grain: the fewest
//     units worth one thread's task (0 is taken as 1); workgroup_size is not used. A launch with
//     no work units is skipped. A kernel's gemm/conv records are ignored: the generated function
//     always runs. required_features are /proc/cpuinfo flag names ("avx2", "avx512f"): a kernel
//     runs its first variant, in file order, whose features the CPU has, and the load is
//     kUnsupported, naming the feature, when none has.
//
// Execution is synchronous at submission (like the reference device): launches run in plan
// order, each split over the device's thread pool, and the outputs no kernel wrote in place are
// copied at the end. Profiles give per-kernel host wall times.
//
// Thread-safety: per the HAL headers; sessions on one device may run concurrently (their
// launches share the device's thread pool, one parallel launch at a time).
#pragma once

#include <memory>

#include "runtime/hal/driver.h"

namespace kiln::runtime::cpu {

std::unique_ptr<hal::Driver> create_cpu_driver();

}  // namespace kiln::runtime::cpu
