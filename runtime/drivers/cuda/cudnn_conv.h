// Convolutions through cuDNN for one CUDA stream (artifact::ConvCall): per (kernel, batch size)
// a plan holding the tensor, filter, convolution and activation descriptors and the algorithm,
// chosen once when the stream prepares a run; one workspace per stream, grown to the largest
// plan's need.
//
// The algorithm: cuDNN's heuristics (cudnnGetConvolutionForwardAlgorithm_v7), remembered with its
// workspace size per device, cuDNN version and convolution shape: in the process, and in
// <kiln_cache_dir()>/cudnn-algorithms.txt (support/cache_dir.h) for the next process, so a load
// after the first asks cuDNN nothing. (Timing the candidates with
// cudnnFindConvolutionForwardAlgorithmEx was tried: it times the bare convolution, and its
// picks made the fused calls of ResNet-50 f16 2.5x slower than the heuristics' on an H200.)
//
// What runs: cudnnConvolutionBiasActivationForward, y = act(conv(x, w) + z + bias), when the call
// has a bias, a residual (z) or relu; cudnnConvolutionForward for a bare convolution. cuDNN
// implements the identity activation only with the IMPLICIT_PRECOMP_GEMM algorithm, which is then
// used. f32 convolutions keep f32 arithmetic (FMA math) unless the artifact allows TF32; f16 and
// bf16 ones use tensor cores with f32 accumulation.
//
// Thread-safety: an instance is used by its stream's thread only; the shared algorithm memory is
// guarded by a mutex.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "artifact/artifact.h"
#include "runtime/drivers/cuda/cudnn_api.h"
#include "runtime/drivers/cuda/cuda_internal.h"

namespace kiln::runtime::cuda {

struct CudnnConvPlan;

// Device addresses of one convolution's tensors (bias and residual 0 when absent).
struct ConvOperands {
  CUdeviceptr x = 0, w = 0, y = 0, bias = 0, residual = 0;
};

class CudnnConvs {
 public:
  // `handle`: a cuDNN handle made ahead (CudaProgram::take_cudnn_handle), owned from here on; or
  // nullptr, and the first plan() makes one.
  CudnnConvs(CudaDevice& device, CUstream stream, cudnnHandle_t handle = nullptr);
  ~CudnnConvs();
  CudnnConvs(const CudnnConvs&) = delete;
  CudnnConvs& operator=(const CudnnConvs&) = delete;

  // A plan for graph kernel `kernel` running `call` at this batch size, or nullptr when the
  // generated kernel must run (no cuDNN, or cuDNN has no algorithm for the shape: why_not()
  // says why). An error only for a failure that would also break the generated kernel (out of
  // device memory for the workspace, a CUDA error).
  Result<const CudnnConvPlan*> plan(uint32_t kernel, const artifact::ConvCall& call, int64_t batch);
  // Enqueues the convolution on the stream. `plan` came from this instance.
  Status run(const CudnnConvPlan& plan, const ConvOperands& operands);
  // The cuDNN algorithm a plan uses, for profiles: "IMPLICIT_PRECOMP_GEMM".
  static std::string algorithm_name(const CudnnConvPlan& plan);
  const std::string& why_not() const { return why_not_; }

 private:
  Status create_plan(const artifact::ConvCall& call, int64_t batch, CudnnConvPlan& plan);

  CudaDevice& device_;
  CUstream stream_;
  const CudnnApi* dnn_ = nullptr;
  bool checked_ = false;
  cudnnHandle_t handle_ = nullptr;
  std::string why_not_;
  std::map<std::pair<uint32_t, int64_t>, std::unique_ptr<CudnnConvPlan>> plans_;
  std::unique_ptr<CudaBuffer> workspace_;
  std::unique_ptr<CudaBuffer> zero_bias_;  // for a fused call without a bias of its own
};

}  // namespace kiln::runtime::cuda
