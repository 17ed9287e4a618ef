// The cuDNN entry points the CUDA driver uses to run convolutions (artifact::ConvCall), loaded at
// run time with dlopen: libcudnn.so.9. Without it the driver runs the generated convolution
// kernels instead; nothing fails.
//
// These are cuDNN's descriptor-based convolution calls (deprecated in cuDNN 9 in favour of the
// graph API, which implements them, but present through 9.x): they pick among the same engines,
// and fuse the bias, a residual and relu into one call.
//
// Handles and enum values are declared here, not included: the values are those of cuDNN 9's
// cudnn_graph.h, cudnn_ops.h and cudnn_cnn.h. Each constant names the header enum it comes from.
//
// Ownership and thread-safety: loaded once per process on first use and never unloaded;
// immutable afterwards. A cuDNN handle is used by one stream (one thread) at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/drivers/cuda/cuda_api.h"
#include "support/status.h"

namespace kiln::runtime::cuda {

using cudnnStatus_t = int;
using cudnnHandle_t = struct cudnnContext*;
using cudnnTensorDescriptor_t = struct cudnnTensorStruct*;
using cudnnFilterDescriptor_t = struct cudnnFilterStruct*;
using cudnnConvolutionDescriptor_t = struct cudnnConvolutionStruct*;
using cudnnActivationDescriptor_t = struct cudnnActivationStruct*;

// cudnn_cnn.h: cudnnConvolutionFwdAlgoPerf_t.
struct cudnnConvolutionFwdAlgoPerf_t {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  int determinism;
  int mathType;
  int reserved[3];
};
static_assert(sizeof(cudnnConvolutionFwdAlgoPerf_t) == 48, "layout of cudnn_cnn.h's struct");

inline constexpr cudnnStatus_t CUDNN_STATUS_SUCCESS = 0;  // cudnn_graph.h cudnnStatus_t
// cudnn_graph.h cudnnDataType_t
inline constexpr int CUDNN_DATA_FLOAT = 0;
inline constexpr int CUDNN_DATA_HALF = 2;
inline constexpr int CUDNN_DATA_BFLOAT16 = 9;
// cudnn_graph.h cudnnMathType_t
inline constexpr int CUDNN_DEFAULT_MATH = 0;
inline constexpr int CUDNN_TENSOR_OP_MATH = 1;
inline constexpr int CUDNN_FMA_MATH = 3;
// cudnn_graph.h cudnnNanPropagation_t
inline constexpr int CUDNN_PROPAGATE_NAN = 1;
// cudnn_graph.h cudnnTensorFormat_t
inline constexpr int CUDNN_TENSOR_NCHW = 0;
inline constexpr int CUDNN_TENSOR_NHWC = 1;
// cudnn_graph.h cudnnActivationMode_t
inline constexpr int CUDNN_ACTIVATION_RELU = 1;
inline constexpr int CUDNN_ACTIVATION_IDENTITY = 5;
// cudnn_graph.h cudnnConvolutionMode_t
inline constexpr int CUDNN_CROSS_CORRELATION = 1;
// cudnn_ops.h cudnnConvolutionFwdAlgo_t
inline constexpr int CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1;

struct CudnnApi {
  std::string library;  // the file that was loaded, for messages
  size_t version = 0;   // cudnnGetVersion(), e.g. 91400
  size_t (*cudnnGetVersion)() = nullptr;
  const char* (*cudnnGetErrorString)(cudnnStatus_t status) = nullptr;
  cudnnStatus_t (*cudnnCreate)(cudnnHandle_t* handle) = nullptr;
  cudnnStatus_t (*cudnnDestroy)(cudnnHandle_t handle) = nullptr;
  cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t handle, CUstream stream) = nullptr;
  cudnnStatus_t (*cudnnCreateTensorDescriptor)(cudnnTensorDescriptor_t* desc) = nullptr;
  cudnnStatus_t (*cudnnSetTensor4dDescriptor)(cudnnTensorDescriptor_t desc, int format, int data_type, int n, int c,
                                              int h, int w) = nullptr;
  cudnnStatus_t (*cudnnDestroyTensorDescriptor)(cudnnTensorDescriptor_t desc) = nullptr;
  cudnnStatus_t (*cudnnCreateFilterDescriptor)(cudnnFilterDescriptor_t* desc) = nullptr;
  cudnnStatus_t (*cudnnSetFilter4dDescriptor)(cudnnFilterDescriptor_t desc, int data_type, int format, int k, int c,
                                              int h, int w) = nullptr;
  cudnnStatus_t (*cudnnDestroyFilterDescriptor)(cudnnFilterDescriptor_t desc) = nullptr;
  cudnnStatus_t (*cudnnCreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t* desc) = nullptr;
  cudnnStatus_t (*cudnnSetConvolution2dDescriptor)(cudnnConvolutionDescriptor_t desc, int pad_h, int pad_w,
                                                   int stride_h, int stride_w, int dilation_h, int dilation_w,
                                                   int mode, int compute_type) = nullptr;
  cudnnStatus_t (*cudnnSetConvolutionGroupCount)(cudnnConvolutionDescriptor_t desc, int groups) = nullptr;
  cudnnStatus_t (*cudnnSetConvolutionMathType)(cudnnConvolutionDescriptor_t desc, int math_type) = nullptr;
  cudnnStatus_t (*cudnnDestroyConvolutionDescriptor)(cudnnConvolutionDescriptor_t desc) = nullptr;
  cudnnStatus_t (*cudnnCreateActivationDescriptor)(cudnnActivationDescriptor_t* desc) = nullptr;
  cudnnStatus_t (*cudnnSetActivationDescriptor)(cudnnActivationDescriptor_t desc, int mode, int nan_propagation,
                                                double coef) = nullptr;
  cudnnStatus_t (*cudnnDestroyActivationDescriptor)(cudnnActivationDescriptor_t desc) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionForwardAlgorithm_v7)(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                          cudnnFilterDescriptor_t w,
                                                          cudnnConvolutionDescriptor_t conv,
                                                          cudnnTensorDescriptor_t y, int requested, int* returned,
                                                          cudnnConvolutionFwdAlgoPerf_t* results) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionForwardWorkspaceSize)(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                           cudnnFilterDescriptor_t w,
                                                           cudnnConvolutionDescriptor_t conv,
                                                           cudnnTensorDescriptor_t y, int algo,
                                                           size_t* bytes) = nullptr;
  cudnnStatus_t (*cudnnConvolutionForward)(cudnnHandle_t handle, const void* alpha, cudnnTensorDescriptor_t x_desc,
                                           const void* x, cudnnFilterDescriptor_t w_desc, const void* w,
                                           cudnnConvolutionDescriptor_t conv, int algo, void* workspace,
                                           size_t workspace_bytes, const void* beta,
                                           cudnnTensorDescriptor_t y_desc, void* y) = nullptr;
  cudnnStatus_t (*cudnnConvolutionBiasActivationForward)(
      cudnnHandle_t handle, const void* alpha1, cudnnTensorDescriptor_t x_desc, const void* x,
      cudnnFilterDescriptor_t w_desc, const void* w, cudnnConvolutionDescriptor_t conv, int algo, void* workspace,
      size_t workspace_bytes, const void* alpha2, cudnnTensorDescriptor_t z_desc, const void* z,
      cudnnTensorDescriptor_t bias_desc, const void* bias, cudnnActivationDescriptor_t activation,
      cudnnTensorDescriptor_t y_desc, void* y) = nullptr;
};

// The process-wide table, or kUnavailable saying why (no library, a missing entry point).
// Safe to call concurrently. KILN_CUDNN=0 in the environment disables the library (the
// generated kernels run instead), for comparisons and for testing the fallback.
Result<const CudnnApi*> cudnn_api();

// "CUDNN_STATUS_NOT_SUPPORTED (3000)", from the library when it is loaded.
std::string cudnn_status_name(cudnnStatus_t status);

}  // namespace kiln::runtime::cuda
