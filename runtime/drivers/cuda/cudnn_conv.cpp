#include "runtime/drivers/cuda/cudnn_conv.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <vector>

#include "support/cache_dir.h"

namespace kiln::runtime::cuda {

// The descriptors and algorithm of one convolution at one batch size. `usable` is false when
// cuDNN cannot run it (then the generated kernel runs); `why_not` says why.
struct CudnnConvPlan {
  bool usable = false;
  std::string why_not;
  bool fused = false;  // cudnnConvolutionBiasActivationForward rather than cudnnConvolutionForward
  bool has_bias = false, has_residual = false;
  int algo = 0;
  size_t workspace_bytes = 0;
  size_t bias_bytes = 0;  // out_channels elements
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t activation = nullptr;
};

namespace {

// The most workspace one convolution may take; the heuristics' faster picks need far less.
constexpr size_t kMaxWorkspaceBytes = size_t(256) << 20;

constexpr size_t kUnknownWorkspace = SIZE_MAX;

struct Choice {
  int algo = 0;
  int math = 0;
  // The workspace the algorithm needs (kUnknownWorkspace until asked). Remembered because
  // cudnnGetConvolutionForwardWorkspaceSize took about 0.2 ms a convolution (cuDNN 9.14, H200):
  // MobileNetV2's 52 queries were 10-14 ms of a 17-22 ms first run.
  size_t workspace = kUnknownWorkspace;
};

// The algorithms chosen so far: in memory, and one "key<TAB>algo<TAB>math<TAB>workspace" line per
// choice in <kiln_cache_dir()>/cudnn-algorithms.txt, read once and appended to (a line is one
// small O_APPEND write, so processes sharing the file do not interleave within lines; a damaged
// or foreign line is skipped; a later line for a key replaces an earlier one; a line without the
// workspace, as earlier versions wrote, leaves it to be asked).
class AlgorithmMemory {
 public:
  static AlgorithmMemory& instance() {
    static AlgorithmMemory memory;
    return memory;
  }

  std::optional<Choice> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    load_locked();
    auto found = choices_.find(key);
    if (found == choices_.end()) return std::nullopt;
    return found->second;
  }

  // Adds or replaces the choice for `key` (the same algorithm with its workspace size known).
  void remember(const std::string& key, Choice choice) {
    std::lock_guard<std::mutex> lock(mutex_);
    load_locked();
    auto [it, added] = choices_.emplace(key, choice);
    if (!added) {
      if (it->second.algo == choice.algo && it->second.math == choice.math && it->second.workspace == choice.workspace)
        return;
      it->second = choice;
    }
    if (path_.empty()) return;
    if (!directory_made_) {  // once per process, not per choice
      std::error_code ignored;
      std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ignored);
      directory_made_ = true;
    }
    std::string line = key + "\t" + std::to_string(choice.algo) + "\t" + std::to_string(choice.math);
    if (choice.workspace != kUnknownWorkspace) line += "\t" + std::to_string(choice.workspace);
    line += "\n";
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;  // no cache directory: the choice lasts for the process
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }

 private:
  void load_locked() {
    if (loaded_) return;
    loaded_ = true;
    const std::string dir = kiln_cache_dir();
    if (dir.empty()) return;
    path_ = (std::filesystem::path(dir) / "cudnn-algorithms.txt").string();
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      const size_t tab1 = line.find('\t'), tab2 = line.find('\t', tab1 == std::string::npos ? tab1 : tab1 + 1);
      if (tab1 == std::string::npos || tab2 == std::string::npos) continue;
      const size_t tab3 = line.find('\t', tab2 + 1);
      const char* end = line.data() + line.size();
      const char* math_end = tab3 == std::string::npos ? end : line.data() + tab3;
      Choice choice;
      auto parsed = [](const char* begin, const char* stop, auto& value) {
        const auto [ptr, ec] = std::from_chars(begin, stop, value);
        return ec == std::errc() && ptr == stop;
      };
      if (!parsed(line.data() + tab1 + 1, line.data() + tab2, choice.algo) ||
          !parsed(line.data() + tab2 + 1, math_end, choice.math) ||
          (tab3 != std::string::npos && (!parsed(line.data() + tab3 + 1, end, choice.workspace) ||
                                         choice.workspace > kMaxWorkspaceBytes)) ||
          choice.algo < 0 || choice.algo > 7 || choice.math < 0 || choice.math > 3)
        continue;
      choices_[line.substr(0, tab1)] = choice;
    }
  }

  std::mutex mutex_;
  bool loaded_ = false;
  bool directory_made_ = false;
  std::string path_;
  std::map<std::string, Choice> choices_;
};

// What a choice depends on: the device, cuDNN's version, the convolution and how it runs.
std::string remember_key(const CudaDevice& device, size_t cudnn_version, const artifact::ConvCall& c, int64_t batch,
                         bool fused) {
  std::string key = device.record().info.description + ",sm" + std::to_string(device.record().sm) + ",cudnn" +
                    std::to_string(cudnn_version);
  for (int64_t v : {int64_t(c.dtype), batch, c.channels, c.height, c.width, c.out_channels, c.kernel_h, c.kernel_w,
                    c.groups, c.pad_h, c.pad_w, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w,
                    int64_t(c.activation), int64_t(c.allow_tf32), int64_t(fused), int64_t(c.channels_last)})
    key += "," + std::to_string(v);
  return key;
}

const char* algorithm_label(int algo) {
  static const char* const kNames[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                       "FFT",           "FFT_TILING",            "WINOGRAD", "WINOGRAD_NONFUSED"};
  return algo >= 0 && algo < 8 ? kNames[algo] : "unknown";
}

}  // namespace

CudnnConvs::CudnnConvs(CudaDevice& device, CUstream stream, cudnnHandle_t handle)
    : device_(device), stream_(stream), handle_(handle) {}

CudnnConvs::~CudnnConvs() {
  if (!dnn_) {
    if (handle_) (*cudnn_api())->cudnnDestroy(handle_);  // made ahead, never used
    return;
  }
  for (auto& [key, plan] : plans_) {
    for (cudnnTensorDescriptor_t t : {plan->x, plan->y, plan->bias})
      if (t) dnn_->cudnnDestroyTensorDescriptor(t);
    if (plan->w) dnn_->cudnnDestroyFilterDescriptor(plan->w);
    if (plan->conv) dnn_->cudnnDestroyConvolutionDescriptor(plan->conv);
    if (plan->activation) dnn_->cudnnDestroyActivationDescriptor(plan->activation);
  }
  if (handle_) dnn_->cudnnDestroy(handle_);
}

std::string CudnnConvs::algorithm_name(const CudnnConvPlan& plan) { return algorithm_label(plan.algo); }

Status CudnnConvs::create_plan(const artifact::ConvCall& call, int64_t batch, CudnnConvPlan& plan) {
  const CudnnApi& dnn = *dnn_;
  int data_type = CUDNN_DATA_FLOAT;
  switch (call.dtype) {
    case ir::DType::kF32: break;
    case ir::DType::kF16: data_type = CUDNN_DATA_HALF; break;
    case ir::DType::kBF16: data_type = CUDNN_DATA_BFLOAT16; break;
    default:
      plan.why_not = "cuDNN is not used for " + std::string(ir::dtype_name(call.dtype)) + " convolutions";
      return Status::ok();
  }
  if (batch < 1 || batch > INT_MAX) {
    plan.why_not = "batch " + std::to_string(batch) + " is out of cuDNN's range";
    return Status::ok();
  }
  auto check = [&](cudnnStatus_t s, const char* what) -> Status {
    if (s == CUDNN_STATUS_SUCCESS) return Status::ok();
    return internal_error(std::string("cuDNN ") + what + ": " + cudnn_status_name(s));
  };
  const int n = int(batch);
  // The sizes are given in NCHW order whatever the format; NHWC filters are [K][R][S][C].
  const int format = call.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  KILN_RETURN_IF_ERROR(check(dnn.cudnnCreateTensorDescriptor(&plan.x), "cudnnCreateTensorDescriptor"));
  KILN_RETURN_IF_ERROR(check(dnn.cudnnSetTensor4dDescriptor(plan.x, format, data_type, n, int(call.channels),
                                                            int(call.height), int(call.width)), "input descriptor"));
  KILN_RETURN_IF_ERROR(check(dnn.cudnnCreateTensorDescriptor(&plan.y), "cudnnCreateTensorDescriptor"));
  KILN_RETURN_IF_ERROR(check(dnn.cudnnSetTensor4dDescriptor(plan.y, format, data_type, n,
                                                            int(call.out_channels), int(call.out_height()),
                                                            int(call.out_width())), "output descriptor"));
  KILN_RETURN_IF_ERROR(check(dnn.cudnnCreateFilterDescriptor(&plan.w), "cudnnCreateFilterDescriptor"));
  KILN_RETURN_IF_ERROR(check(dnn.cudnnSetFilter4dDescriptor(plan.w, data_type, format, int(call.out_channels),
                                                            int(call.channels / call.groups), int(call.kernel_h),
                                                            int(call.kernel_w)), "filter descriptor"));
  KILN_RETURN_IF_ERROR(check(dnn.cudnnCreateConvolutionDescriptor(&plan.conv), "cudnnCreateConvolutionDescriptor"));
  KILN_RETURN_IF_ERROR(check(dnn.cudnnSetConvolution2dDescriptor(plan.conv, int(call.pad_h), int(call.pad_w),
                                                                 int(call.stride_h), int(call.stride_w),
                                                                 int(call.dilation_h), int(call.dilation_w),
                                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                             "convolution descriptor"));
  KILN_RETURN_IF_ERROR(check(dnn.cudnnSetConvolutionGroupCount(plan.conv, int(call.groups)), "group count"));
  // f32 keeps f32 arithmetic unless TF32 is allowed (cuDNN's default math would use TF32).
  const bool strict_f32 = call.dtype == ir::DType::kF32 && !call.allow_tf32;
  int math = call.dtype == ir::DType::kF32 ? (strict_f32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH) : CUDNN_TENSOR_OP_MATH;
  KILN_RETURN_IF_ERROR(check(dnn.cudnnSetConvolutionMathType(plan.conv, math), "math type"));

  plan.has_bias = call.bias_arg >= 0;
  plan.has_residual = call.residual_arg >= 0;
  const bool relu = call.activation == artifact::ConvCall::Activation::kRelu;
  plan.fused = plan.has_bias || plan.has_residual || relu;
  plan.bias_bytes = size_t(call.out_channels) * ir::dtype_size(call.dtype);
  if (plan.fused) {
    KILN_RETURN_IF_ERROR(check(dnn.cudnnCreateTensorDescriptor(&plan.bias), "cudnnCreateTensorDescriptor"));
    KILN_RETURN_IF_ERROR(check(dnn.cudnnSetTensor4dDescriptor(plan.bias, CUDNN_TENSOR_NCHW, data_type, 1,
                                                              int(call.out_channels), 1, 1), "bias descriptor"));
    KILN_RETURN_IF_ERROR(check(dnn.cudnnCreateActivationDescriptor(&plan.activation), "cudnnCreateActivationDescriptor"));
    KILN_RETURN_IF_ERROR(check(dnn.cudnnSetActivationDescriptor(plan.activation,
                                                                relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                                                CUDNN_PROPAGATE_NAN, 0.0), "activation descriptor"));
  }

  // The algorithm: remembered, forced (identity activation), or the heuristics' first fit.
  const std::string key = remember_key(device_, dnn.version, call, batch, plan.fused);
  AlgorithmMemory& memory = AlgorithmMemory::instance();
  std::optional<Choice> choice = memory.find(key);
  if (!choice && plan.fused && !relu) choice = Choice{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, math};
  if (!choice) {
    cudnnConvolutionFwdAlgoPerf_t results[8] = {};
    int returned = 0;
    const cudnnStatus_t s = dnn.cudnnGetConvolutionForwardAlgorithm_v7(handle_, plan.x, plan.w, plan.conv, plan.y, 8,
                                                                        &returned, results);
    if (s != CUDNN_STATUS_SUCCESS) {
      plan.why_not = "cuDNN's heuristics failed: " + cudnn_status_name(s);
      return Status::ok();
    }
    for (int i = 0; i < returned && !choice; ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& r = results[i];
      if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspaceBytes) continue;
      if (strict_f32 && r.mathType != CUDNN_FMA_MATH && r.mathType != CUDNN_DEFAULT_MATH) continue;
      choice = Choice{r.algo, strict_f32 ? math : r.mathType};
    }
    if (!choice) {
      plan.why_not = "cuDNN has no algorithm for it";
      return Status::ok();
    }
  }
  if (strict_f32 && choice->math != math) {  // whatever the cache file says: no TF32 unless allowed
    choice->math = math;
    choice->workspace = kUnknownWorkspace;
  }
  KILN_RETURN_IF_ERROR(check(dnn.cudnnSetConvolutionMathType(plan.conv, choice->math), "math type"));
  if (choice->workspace == kUnknownWorkspace) {
    const cudnnStatus_t s = dnn.cudnnGetConvolutionForwardWorkspaceSize(handle_, plan.x, plan.w, plan.conv, plan.y,
                                                                        choice->algo, &choice->workspace);
    if (s != CUDNN_STATUS_SUCCESS || choice->workspace > kMaxWorkspaceBytes) {
      plan.why_not = std::string("cuDNN's ") + algorithm_label(choice->algo) + " algorithm does not fit (" +
                     (s != CUDNN_STATUS_SUCCESS ? cudnn_status_name(s) : std::to_string(choice->workspace) + " bytes of workspace") + ")";
      return Status::ok();
    }
    memory.remember(key, *choice);
  }
  plan.workspace_bytes = choice->workspace;
  plan.algo = choice->algo;
  plan.usable = true;
  return Status::ok();
}

Result<const CudnnConvPlan*> CudnnConvs::plan(uint32_t kernel, const artifact::ConvCall& call, int64_t batch) {
  if (!checked_) {
    checked_ = true;
    Result<const CudnnApi*> loaded = cudnn_api();
    if (!loaded.is_ok()) {
      why_not_ = loaded.status().message();
    } else {
      cudnnStatus_t s = handle_ ? CUDNN_STATUS_SUCCESS : (*loaded)->cudnnCreate(&handle_);
      if (s == CUDNN_STATUS_SUCCESS) s = (*loaded)->cudnnSetStream(handle_, stream_);
      if (s != CUDNN_STATUS_SUCCESS) {
        if (handle_) (*loaded)->cudnnDestroy(handle_);
        handle_ = nullptr;
        why_not_ = "cudnnCreate failed: " + cudnn_status_name(s);
      } else {
        dnn_ = *loaded;
      }
    }
  }
  if (!dnn_) return nullptr;
  auto found = plans_.find({kernel, batch});
  if (found == plans_.end()) {
    auto plan = std::make_unique<CudnnConvPlan>();
    Status created = create_plan(call, batch, *plan);
    if (!created.is_ok()) {  // a descriptor call failed: keep the half-built plan for cleanup, unused
      plan->usable = false;
      plan->why_not = created.message();
    }
    found = plans_.emplace(std::pair{kernel, batch}, std::move(plan)).first;
  }
  CudnnConvPlan& plan = *found->second;
  if (!plan.usable) {
    why_not_ = plan.why_not;
    return nullptr;
  }
  // Scratch memory, grown before any run that needs it (the stream prepares before it enqueues).
  if (plan.workspace_bytes > 0 && (!workspace_ || workspace_->size() < plan.workspace_bytes)) {
    workspace_.reset();
    KILN_ASSIGN_OR_RETURN(workspace_, CudaBuffer::create(device_, plan.workspace_bytes));
  }
  if (plan.fused && !plan.has_bias && (!zero_bias_ || zero_bias_->size() < plan.bias_bytes)) {
    zero_bias_.reset();
    KILN_ASSIGN_OR_RETURN(zero_bias_, CudaBuffer::create(device_, plan.bias_bytes));
    const std::vector<std::byte> zeros(plan.bias_bytes);
    KILN_RETURN_IF_ERROR(zero_bias_->write(0, zeros));
  }
  return &plan;
}

Status CudnnConvs::run(const CudnnConvPlan& plan, const ConvOperands& p) {
  auto ptr = [](CUdeviceptr a) { return reinterpret_cast<void*>(uintptr_t(a)); };
  void* workspace = plan.workspace_bytes > 0 ? ptr(workspace_->pointer()) : nullptr;
  const float one = 1.0f, zero = 0.0f;  // scaling factors are float for float, half and bfloat16 data
  cudnnStatus_t s;
  if (plan.fused) {
    const float alpha2 = plan.has_residual ? 1.0f : 0.0f;
    const CUdeviceptr z = plan.has_residual ? p.residual : p.y;  // read only when alpha2 != 0
    const CUdeviceptr bias = plan.has_bias ? p.bias : zero_bias_->pointer();
    s = dnn_->cudnnConvolutionBiasActivationForward(handle_, &one, plan.x, ptr(p.x), plan.w, ptr(p.w), plan.conv,
                                                    plan.algo, workspace, plan.workspace_bytes, &alpha2, plan.y, ptr(z),
                                                    plan.bias, ptr(bias), plan.activation, plan.y, ptr(p.y));
  } else {
    s = dnn_->cudnnConvolutionForward(handle_, &one, plan.x, ptr(p.x), plan.w, ptr(p.w), plan.conv, plan.algo,
                                      workspace, plan.workspace_bytes, &zero, plan.y, ptr(p.y));
  }
  if (s != CUDNN_STATUS_SUCCESS) return internal_error("cuDNN convolution failed: " + cudnn_status_name(s));
  return Status::ok();
}

}  // namespace kiln::runtime::cuda
