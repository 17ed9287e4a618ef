#include "runtime/drivers/cuda/cudnn_api.h"

#include "support/vendor_library.h"

namespace kiln::runtime::cuda {
namespace {

struct LoadedCudnn {
  CudnnApi api;
  Status status;
};

LoadedCudnn load_cudnn() {
  LoadedCudnn loaded;
  loaded.status = load_vendor_api({"libcudnn.so.9"}, "cuDNN", "KILN_CUDNN", loaded.api, [&](auto&& load) {
#define KILN_CUDNN_LOAD(name) load(#name, loaded.api.name);
    KILN_CUDNN_LOAD(cudnnGetVersion)
    KILN_CUDNN_LOAD(cudnnGetErrorString)
    KILN_CUDNN_LOAD(cudnnCreate)
    KILN_CUDNN_LOAD(cudnnDestroy)
    KILN_CUDNN_LOAD(cudnnSetStream)
    KILN_CUDNN_LOAD(cudnnCreateTensorDescriptor)
    KILN_CUDNN_LOAD(cudnnSetTensor4dDescriptor)
    KILN_CUDNN_LOAD(cudnnDestroyTensorDescriptor)
    KILN_CUDNN_LOAD(cudnnCreateFilterDescriptor)
    KILN_CUDNN_LOAD(cudnnSetFilter4dDescriptor)
    KILN_CUDNN_LOAD(cudnnDestroyFilterDescriptor)
    KILN_CUDNN_LOAD(cudnnCreateConvolutionDescriptor)
    KILN_CUDNN_LOAD(cudnnSetConvolution2dDescriptor)
    KILN_CUDNN_LOAD(cudnnSetConvolutionGroupCount)
    KILN_CUDNN_LOAD(cudnnSetConvolutionMathType)
    KILN_CUDNN_LOAD(cudnnDestroyConvolutionDescriptor)
    KILN_CUDNN_LOAD(cudnnCreateActivationDescriptor)
    KILN_CUDNN_LOAD(cudnnSetActivationDescriptor)
    KILN_CUDNN_LOAD(cudnnDestroyActivationDescriptor)
    KILN_CUDNN_LOAD(cudnnGetConvolutionForwardAlgorithm_v7)
    KILN_CUDNN_LOAD(cudnnGetConvolutionForwardWorkspaceSize)
    KILN_CUDNN_LOAD(cudnnConvolutionForward)
    KILN_CUDNN_LOAD(cudnnConvolutionBiasActivationForward)
#undef KILN_CUDNN_LOAD
  });
  if (!loaded.status.is_ok()) return loaded;
  loaded.api.version = loaded.api.cudnnGetVersion();
  if (loaded.api.version < 90000 || loaded.api.version >= 100000)
    loaded.status = Status(ErrorCode::kUnavailable, loaded.api.library + " reports version " +
                                                        std::to_string(loaded.api.version) + ", not 9.x");
  return loaded;
}

}  // namespace

Result<const CudnnApi*> cudnn_api() {
  static const LoadedCudnn loaded = load_cudnn();  // once per process, thread-safe
  if (!loaded.status.is_ok()) return loaded.status;
  return &loaded.api;
}

std::string cudnn_status_name(cudnnStatus_t status) {
  Result<const CudnnApi*> api = cudnn_api();
  const char* name = api.is_ok() ? (*api)->cudnnGetErrorString(status) : nullptr;
  return std::string(name ? name : "cuDNN status") + " (" + std::to_string(status) + ")";
}

}  // namespace kiln::runtime::cuda
