// The CUDA driver: every CUDA device the NVIDIA driver reports, as "cuda:0", "cuda:1", ...
// (CUDA ordinal order), listed as discrete GPUs of priority 400 (the default device when the
// artifact has CUDA kernels). The description names the GPU, its architecture, SM count and
// memory, e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.2 GiB)".
//
// libcuda.so.1 is loaded with dlopen on first use (cuda_api.h); without it, without a GPU, or
// when cuInit fails, the driver lists no devices and unavailable_reason() says why. The runtime
// never links CUDA, NVRTC or cuBLAS; cuBLASLt is dlopen'ed too, on first use (cublaslt_api.h).
//
// Devices: a device uses its primary context (cuDevicePrimaryCtxRetain), shared with any CUDA
// code of the embedding application, and makes it current only around its own calls. Buffers are
// cuMemAlloc memory; host copies go through pinned staging memory (cuMemHostAlloc).
//
// Kernels: the artifact's "cuda" KernelBinary records have format "module" and name their
// function (entry_point) in one of its "cuda" ModuleBinary records: the "cubin:sm_XY" cubin of
// exactly the device's architecture when present, else the "ptx" module, compiled by the
// driver's JIT. One program (module, functions, constants) is loaded per artifact and device and
// shared by all sessions. Launches use ceil(work_items / items_per_group) blocks of
// workgroup_size threads, capped at one full wave (SMs x resident blocks per SM, from
// cuOccupancyMaxActiveBlocksPerMultiprocessor): the kernels are grid-stride loops.
//
// Streams (one per session, see cuda_stream.cpp): a non-blocking CUstream; the whole launch
// sequence of a run is captured into a CUDA graph once and replayed while the buffers and symbol
// sizes stay the same. Kernels with a GemmCall run through cuBLASLt and kernels with a ConvCall
// through cuDNN when those are installed (KILN_CUBLASLT=0 and KILN_CUDNN=0 turn them off).
//
// Options: CUDA graphs are on unless the device option cuda.graphs=off is given to open_device
// (runtime/hal/device_options.h), or, without that option, the environment variable
// KILN_CUDA_GRAPHS is "0" when the device is opened; set_cuda_graphs_enabled() changes it for
// streams created later. KILN_CUBLASLT=0 makes GEMM kernels run as generated code.
//
// Thread-safety: per the HAL headers; sessions on one device run concurrently.
#pragma once

#include <memory>

#include "runtime/hal/driver.h"
#include "support/status.h"

namespace kiln::runtime::cuda {

std::unique_ptr<hal::Driver> create_cuda_driver();

// Whether streams created on `device` from now on capture and replay CUDA graphs (existing
// streams keep their setting). kInvalidArgument when `device` is not a CUDA device.
Status set_cuda_graphs_enabled(hal::Device& device, bool enabled);

}  // namespace kiln::runtime::cuda
