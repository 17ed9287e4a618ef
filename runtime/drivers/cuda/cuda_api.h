// The CUDA driver-API entry points the CUDA driver uses, loaded from libcuda.so.1 with
// dlopen/dlsym at run time, so the Kiln runtime builds without a CUDA toolkit, links no CUDA
// library and loads on machines without the NVIDIA driver (the driver then reports itself
// unavailable with the reason).
//
// The few types and constants needed are declared here with the values of the CUDA 13.0
// cuda.h (/usr/local/cuda/include/cuda.h); the driver API keeps them stable across versions.
// Symbols are looked up by their versioned ABI names (cuMemAlloc_v2, cuStreamBeginCapture_v2,
// ...), the ones cuda.h's macros map the plain names to, and which every driver since CUDA 11.4
// exports. No CUDA header is included.
//
// Ownership and thread-safety: the library is loaded once per process, on first use, and never
// unloaded. The table is immutable after loading; the driver API is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "support/status.h"

namespace kiln::runtime::cuda {

// ---- driver-API types (cuda.h) ----
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906;

// CUdevice_attribute
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_INTEGRATED = 18;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
// CUpointer_attribute, CUmemorytype
inline constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
inline constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
inline constexpr unsigned CU_MEMORYTYPE_DEVICE = 2;
// CUfunction_attribute
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
// CUstream_flags, CUevent_flags, cuMemHostAlloc flags, CUstreamCaptureMode
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
// CUjit_option
inline constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

struct CudaApi {
  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDeviceTotalMem_v2)(size_t* bytes, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice device) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext* context) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext context) = nullptr;
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t bytes) = nullptr;
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr) = nullptr;
  CUresult (*cuMemGetAddressRange_v2)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) = nullptr;
  CUresult (*cuPointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr) = nullptr;
  CUresult (*cuMemHostAlloc)(void** ptr, size_t bytes, unsigned flags) = nullptr;
  CUresult (*cuMemFreeHost)(void* ptr) = nullptr;
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) = nullptr;
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options, int* options,
                                 void** option_values) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule module) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name) = nullptr;
  CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction function) = nullptr;
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int* blocks, CUfunction function, int block_size,
                                                          size_t dynamic_shared_bytes) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                             CUstream stream, void** params, void** extra) = nullptr;
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy_v2)(CUstream stream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags) = nullptr;
  CUresult (*cuEventDestroy_v2)(CUevent event) = nullptr;
  CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent event) = nullptr;
  CUresult (*cuEventElapsedTime)(float* milliseconds, CUevent start, CUevent end) = nullptr;
  CUresult (*cuStreamBeginCapture_v2)(CUstream stream, int mode) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long flags) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph graph) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec) = nullptr;
};

// The process-wide table, loading libcuda.so.1 on the first call. kUnavailable (saying which
// library or symbol is missing) when the NVIDIA driver is not installed. Safe to call
// concurrently. (The KILN_CUDA_LIBRARY environment variable names another file to load, so
// tests can point the driver at a library that is not libcuda.)
Result<const CudaApi*> cuda_api();

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory" for a CUresult, through cuGetErrorName /
// cuGetErrorString when the library is loaded.
std::string cu_error_name(CUresult code);

// A Status for a failed CUDA call: "<what>: <CUDA error name>", kOutOfMemory for
// CUDA_ERROR_OUT_OF_MEMORY, kInternal otherwise.
Status cu_status(CUresult code, const std::string& what);

// Makes `context` current on the calling thread for the guard's lifetime and restores the
// thread's previous context afterwards, so an embedding application's own context survives
// calls into Kiln. Every CUDA call of the driver runs under one.
class ScopedContext {
 public:
  ScopedContext(const CudaApi& api, CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  // Non-OK when the context could not be made current.
  const Status& status() const { return status_; }

 private:
  const CudaApi& api_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
  Status status_;
};

}  // namespace kiln::runtime::cuda
