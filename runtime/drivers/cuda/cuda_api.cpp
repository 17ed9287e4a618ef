#include "runtime/drivers/cuda/cuda_api.h"

#include <dlfcn.h>

#include <cstdlib>

namespace kiln::runtime::cuda {
namespace {

struct LoadedApi {
  CudaApi api;
  Status status;
};

LoadedApi load_api() {
  LoadedApi loaded;
  const char* override_path = std::getenv("KILN_CUDA_LIBRARY");
  const std::string library_name = override_path && *override_path ? override_path : "libcuda.so.1";
  // RTLD_LOCAL: the driver's symbols stay out of the process's global namespace.
  void* library = dlopen(library_name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    loaded.status = Status(ErrorCode::kUnavailable, library_name + " not found (" +
                                                        (why ? why : "dlopen failed") +
                                                        "): the NVIDIA driver is not installed");
    return loaded;
  }
#define KILN_CU_LOAD(name)                                                                        \
  loaded.api.name = reinterpret_cast<decltype(loaded.api.name)>(dlsym(library, #name));          \
  if (!loaded.api.name) {                                                                         \
    loaded.status = Status(ErrorCode::kUnavailable,                                               \
                           library_name + " lacks the entry point " #name " (driver too old?)"); \
    return loaded;                                                                                \
  }
  KILN_CU_LOAD(cuInit)
  KILN_CU_LOAD(cuDriverGetVersion)
  KILN_CU_LOAD(cuGetErrorName)
  KILN_CU_LOAD(cuGetErrorString)
  KILN_CU_LOAD(cuDeviceGetCount)
  KILN_CU_LOAD(cuDeviceGet)
  KILN_CU_LOAD(cuDeviceGetName)
  KILN_CU_LOAD(cuDeviceGetAttribute)
  KILN_CU_LOAD(cuDeviceTotalMem_v2)
  KILN_CU_LOAD(cuDevicePrimaryCtxRetain)
  KILN_CU_LOAD(cuDevicePrimaryCtxRelease_v2)
  KILN_CU_LOAD(cuCtxGetCurrent)
  KILN_CU_LOAD(cuCtxSetCurrent)
  KILN_CU_LOAD(cuMemAlloc_v2)
  KILN_CU_LOAD(cuMemFree_v2)
  KILN_CU_LOAD(cuMemGetAddressRange_v2)
  KILN_CU_LOAD(cuPointerGetAttribute)
  KILN_CU_LOAD(cuMemHostAlloc)
  KILN_CU_LOAD(cuMemFreeHost)
  KILN_CU_LOAD(cuMemcpyHtoDAsync_v2)
  KILN_CU_LOAD(cuMemcpyDtoHAsync_v2)
  KILN_CU_LOAD(cuMemcpyDtoDAsync_v2)
  KILN_CU_LOAD(cuModuleLoadDataEx)
  KILN_CU_LOAD(cuModuleUnload)
  KILN_CU_LOAD(cuModuleGetFunction)
  KILN_CU_LOAD(cuFuncGetAttribute)
  KILN_CU_LOAD(cuOccupancyMaxActiveBlocksPerMultiprocessor)
  KILN_CU_LOAD(cuLaunchKernel)
  KILN_CU_LOAD(cuStreamCreate)
  KILN_CU_LOAD(cuStreamDestroy_v2)
  KILN_CU_LOAD(cuStreamSynchronize)
  KILN_CU_LOAD(cuEventCreate)
  KILN_CU_LOAD(cuEventDestroy_v2)
  KILN_CU_LOAD(cuEventRecord)
  KILN_CU_LOAD(cuEventSynchronize)
  KILN_CU_LOAD(cuEventElapsedTime)
  KILN_CU_LOAD(cuStreamBeginCapture_v2)
  KILN_CU_LOAD(cuStreamEndCapture)
  KILN_CU_LOAD(cuGraphInstantiateWithFlags)
  KILN_CU_LOAD(cuGraphLaunch)
  KILN_CU_LOAD(cuGraphDestroy)
  KILN_CU_LOAD(cuGraphExecDestroy)
#undef KILN_CU_LOAD
  return loaded;
}

const LoadedApi& loaded_api() {
  // A function-local static is initialized once, thread-safely; the library stays loaded.
  static const LoadedApi loaded = load_api();
  return loaded;
}

}  // namespace

Result<const CudaApi*> cuda_api() {
  const LoadedApi& loaded = loaded_api();
  if (!loaded.status.is_ok()) return loaded.status;
  return &loaded.api;
}

std::string cu_error_name(CUresult code) {
  const LoadedApi& loaded = loaded_api();
  const char* name = nullptr;
  const char* text = nullptr;
  if (loaded.status.is_ok()) {
    if (loaded.api.cuGetErrorName(code, &name) != CUDA_SUCCESS) name = nullptr;
    if (loaded.api.cuGetErrorString(code, &text) != CUDA_SUCCESS) text = nullptr;
  }
  std::string out = std::string(name ? name : "CUDA error") + " (" + std::to_string(code) + ")";
  if (text) out += std::string(": ") + text;
  return out;
}

Status cu_status(CUresult code, const std::string& what) {
  return Status(code == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
                what + ": " + cu_error_name(code));
}

ScopedContext::ScopedContext(const CudaApi& api, CUcontext context) : api_(api) {
  CUresult r = api_.cuCtxGetCurrent(&previous_);
  if (r != CUDA_SUCCESS) {
    status_ = cu_status(r, "cuCtxGetCurrent");
    return;
  }
  if (previous_ == context) return;
  r = api_.cuCtxSetCurrent(context);
  if (r != CUDA_SUCCESS) {
    status_ = cu_status(r, "cuCtxSetCurrent");
    return;
  }
  switched_ = true;
}

ScopedContext::~ScopedContext() {
  if (switched_) (void)api_.cuCtxSetCurrent(previous_);
}

}  // namespace kiln::runtime::cuda
