// CudaStream: one non-blocking CUstream per stream (per session) that runs a CudaProgram's plan.
//
// Preparing. The first execute() for a given (program, input/output/arena addresses, symbol
// sizes) resolves every launch once into an Op: a kernel launch with its parameter values and
// grid, a cuBLASLt matmul (for a kernel with a GemmCall, when the library is there and has an
// algorithm for the shape), a cuDNN convolution (for a kernel with a ConvCall, likewise;
// cudnn_conv.h), or a device-to-device copy (an output no kernel wrote in place). A profile names
// what ran each kernel: the kernel kind, then "(cuBLASLt)", "(cuDNN <algorithm>)", or, where a
// library was eligible but not used, "(generated: <why>)".
// Later executions with the same key reuse the ops as they are.
//
// CUDA graphs. When graphs are on, the second execution with the same key captures the op
// sequence (cuStreamBeginCapture in thread-local mode, so sessions on other threads are not
// disturbed) and instantiates it; every later execution with that key is one cuGraphLaunch.
// A new key (other buffers, other sizes) drops the graph and starts over. The first run of a
// key runs the ops directly: it loads lazily-loaded kernels and warms cuBLASLt outside any
// capture, and a one-shot run pays no capture. If capturing fails, the stream says why in its
// profile clock and runs the ops directly from then on.
//
// cuBLASLt. Per stream: one handle, one 32 MiB workspace (allocated on the first GEMM), and one
// plan per (kernel, batch, m, n, k, pointer alignments): the matmul descriptor, the three
// layouts and the algorithm chosen once by cublasLtMatmulAlgoGetHeuristic. Row-major products
// use the transpose identity C^T = B^T A^T: cuBLASLt's column-major A is our B ([k, n]
// row-major is [n, k] column-major, ld n), its B is our A, its D is our output (ld n), its C
// the residual (laid out as D, beta 1) or D itself (beta 0), and the bias (length n) is added
// per row of its D, i.e. per column of ours. A batch with a shared B and a
// batched A is one product of (batch * m) rows; otherwise a strided batch with stride 0 for a
// shared operand.
//
// Timing. Every execution records a timed event before and after its work, so
// last_execution_device_seconds() is the device time of the last run. With a profile, ops are
// launched directly (never replayed from a graph) between per-op event pairs; each op's start
// is taken from the execution's first event.
//
// Empty tensors: a launch with no work items becomes no op (nor library call), and a zero-byte
// arena value gets a null pointer (nothing reads or writes it; the arena may be absent).
//
// Thread-safety: a stream is used by one thread at a time (hal/stream.h); its state is private.
#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "runtime/drivers/cuda/cublaslt_api.h"
#include "runtime/drivers/cuda/cudnn_conv.h"
#include "runtime/drivers/cuda/cuda_internal.h"
#include "runtime/hal/stream.h"
#include "runtime/log.h"

namespace kiln::runtime::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr int kMaxAliasDepth = 64;
constexpr int64_t kMaxGemmDim = 0x7fffffff;

// The largest power of two (at most 256) dividing the address: what cuBLASLt may assume.
uint32_t pointer_alignment(CUdeviceptr p) {
  uint32_t a = 1;
  while (a < 256 && p % (uint64_t(a) * 2) == 0) a *= 2;
  return a;
}

struct GemmKey {
  uint32_t kernel = 0;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_d = 0, align_bias = 0;
  bool operator<(const GemmKey& o) const {
    return std::tie(kernel, batch, m, n, k, align_a, align_b, align_c, align_d, align_bias) <
           std::tie(o.kernel, o.batch, o.m, o.n, o.k, o.align_a, o.align_b, o.align_c, o.align_d, o.align_bias);
  }
};

// A cuBLASLt matmul prepared for one GemmKey. `usable` is false when cuBLASLt has no algorithm
// for it (then the generated kernel runs); `why_not` says why.
struct GemmPlan {
  bool usable = false;
  std::string why_not;
  bool has_bias = false;
  float alpha = 1.0f, beta = 0.0f;  // beta 1: a residual is added (cuBLASLt's C operand)
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct Op {
  enum class Kind : uint8_t { kKernel, kGemm, kConv, kCopy };
  Kind kind = Kind::kKernel;
  uint32_t kernel_index = hal::kNoKernel;
  std::string name;  // for messages: the kernel's provenance name, or what is copied
  // kKernel
  CUfunction function = nullptr;
  unsigned grid = 1, block = 1;
  std::vector<uint64_t> params;  // each parameter's 8 bytes: a device pointer or a long long
  // kGemm (pointers in cuBLASLt's operand order: its A is our b, its B is our a; its C is the
  // residual, or D when there is none)
  GemmPlan* gemm = nullptr;
  CUdeviceptr lt_a = 0, lt_b = 0, lt_c = 0, lt_d = 0, bias = 0;
  // kConv
  const CudnnConvPlan* conv = nullptr;
  ConvOperands conv_operands;
  // kCopy
  CUdeviceptr dst = 0, src = 0;
  size_t bytes = 0;
};

struct PreparedKey {
  uint64_t program = 0;
  std::vector<uint64_t> buffers;  // addresses and sizes of inputs, outputs, arena
  ir::SymbolBindings bindings;
  bool operator==(const PreparedKey&) const = default;
};

class CudaStream final : public hal::Stream {
 public:
  CudaStream(CudaDevice& device, bool use_graphs)
      : device_(device), api_(device.api()), use_graphs_(use_graphs) {}
  ~CudaStream() override;
  // Creates the stream, or adopts `application_stream` (not destroyed here) when it is not null.
  Status init(CUstream application_stream);

  Status execute(const hal::Executable& executable, const hal::ExecuteArgs& args) override;
  Status synchronize() override;
  std::optional<double> last_execution_device_seconds() const override { return last_seconds_; }

 private:
  Status prepare(const CudaProgram& program, const hal::ExecuteArgs& args, const ir::SymbolBindings& bindings);
  Result<CUdeviceptr> resolve(const CudaProgram& program, const hal::ExecuteArgs& args,
                              const ir::SymbolBindings& bindings, ir::NodeId value) const;
  // A usable cuBLASLt plan for this product, or nullptr when the generated kernel must run.
  Result<GemmPlan*> gemm_plan(const GemmKey& key, const artifact::GemmCall& call, CUdeviceptr bias);
  Status create_gemm_plan(const GemmKey& key, const artifact::GemmCall& call, CUdeviceptr bias, GemmPlan& plan);
  Status enqueue(const Op& op);
  Status enqueue_all();
  Status capture_graph();
  void release_graph();
  void release_gemm_plans();
  Result<CUevent> profile_event(size_t index);

  CudaDevice& device_;
  const CudaApi& api_;
  bool use_graphs_;
  std::string graphs_off_reason_;  // set when a capture failed
  CUstream stream_ = nullptr;
  bool owns_stream_ = true;  // false on an application's stream (create_stream_on)
  CUevent start_ = nullptr, end_ = nullptr;  // timed, around every execution

  bool prepared_ = false;
  PreparedKey key_;
  std::vector<Op> ops_;
  std::vector<hal::KernelTiming> op_timings_;  // per op: provenance for profiles
  int runs_with_key_ = 0;
  CUgraphExec graph_ = nullptr;

  // cuBLASLt, created on the first GEMM.
  const CublasLtApi* lt_ = nullptr;
  bool lt_checked_ = false;
  std::string lt_unavailable_;
  cublasLtHandle_t lt_handle_ = nullptr;
  std::unique_ptr<CudaBuffer> workspace_;
  std::map<GemmKey, std::unique_ptr<GemmPlan>> gemm_plans_;

  // cuDNN, created on the first convolution.
  std::unique_ptr<CudnnConvs> convs_;

  bool pending_ = false;
  std::optional<double> last_seconds_;
  std::vector<CUevent> profile_events_;
  hal::Profile* pending_profile_ = nullptr;
};

CudaStream::~CudaStream() {
  ScopedContext current(api_, device_.context());
  if (stream_) (void)api_.cuStreamSynchronize(stream_);
  release_graph();
  release_gemm_plans();
  if (lt_handle_) lt_->cublasLtDestroy(lt_handle_);
  workspace_.reset();
  convs_.reset();
  for (CUevent e : profile_events_) api_.cuEventDestroy_v2(e);
  if (start_) api_.cuEventDestroy_v2(start_);
  if (end_) api_.cuEventDestroy_v2(end_);
  if (stream_ && owns_stream_) api_.cuStreamDestroy_v2(stream_);
}

Status CudaStream::init(CUstream application_stream) {
  ScopedContext current(api_, device_.context());
  KILN_RETURN_IF_ERROR(current.status());
  CUresult r = CUDA_SUCCESS;
  if (application_stream) {
    stream_ = application_stream;
    owns_stream_ = false;
  } else {
    r = api_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuStreamCreate");
  }
  r = api_.cuEventCreate(&start_, CU_EVENT_DEFAULT);
  if (r == CUDA_SUCCESS) r = api_.cuEventCreate(&end_, CU_EVENT_DEFAULT);
  if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuEventCreate");
  return Status::ok();
}

void CudaStream::release_graph() {
  if (graph_) api_.cuGraphExecDestroy(graph_);
  graph_ = nullptr;
}

void CudaStream::release_gemm_plans() {
  for (auto& [key, plan] : gemm_plans_) {
    if (plan->desc) lt_->cublasLtMatmulDescDestroy(plan->desc);
    for (cublasLtMatrixLayout_t layout : {plan->lt_a, plan->lt_b, plan->lt_d})
      if (layout) lt_->cublasLtMatrixLayoutDestroy(layout);
  }
  gemm_plans_.clear();
}

Result<CUdeviceptr> CudaStream::resolve(const CudaProgram& program, const hal::ExecuteArgs& args,
                                        const ir::SymbolBindings& bindings, ir::NodeId value) const {
  const artifact::LoadedArtifact& art = program.artifact();
  const ir::Graph& graph = art.graph;
  auto value_name = [&](ir::NodeId v) { return v < graph.num_nodes() ? graph.node(v).name : std::to_string(v); };
  for (int depth = 0; depth < kMaxAliasDepth; ++depth) {
    const ir::BufferAssignment* b = art.plan.find_buffer(value);
    if (!b) return corrupt("value '" + value_name(value) + "' has no buffer in the plan");
    switch (b->storage) {
      case ir::Storage::kInput:
        for (size_t i = 0; i < graph.inputs().size(); ++i)
          if (graph.inputs()[i] == value) return static_cast<CudaBuffer*>(args.inputs[i])->pointer();
        return corrupt("the plan's input buffer '" + value_name(value) + "' is not a graph input");
      case ir::Storage::kOutput:
        for (size_t i = 0; i < graph.outputs().size(); ++i)
          if (graph.outputs()[i].node == value) return static_cast<CudaBuffer*>(args.outputs[i])->pointer();
        return corrupt("the plan's output buffer '" + value_name(value) + "' is not a graph output");
      case ir::Storage::kConstant: {
        const CUdeviceptr p = program.constant(value);
        if (!p) return corrupt("constant '" + value_name(value) + "' was not uploaded");
        return p;
      }
      case ir::Storage::kArena: {
        KILN_ASSIGN_OR_RETURN(int64_t bytes, b->size.evaluate(bindings));
        // A zero-byte value is never read or written; the arena may be absent or end at it.
        if (bytes == 0) return CUdeviceptr(0);
        if (!args.arena) return invalid_argument("CUDA stream: the plan needs an arena but none was given");
        KILN_ASSIGN_OR_RETURN(int64_t offset, art.plan.arena_offset(*b, bindings));
        const auto* arena = static_cast<const CudaBuffer*>(args.arena);
        if (offset < 0 || bytes < 0 || uint64_t(offset) + uint64_t(bytes) > arena->size())
          return internal_error("arena slice [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                ") of value '" + value_name(value) + "' is outside the " +
                                std::to_string(arena->size()) + "-byte arena");
        return arena->pointer() + uint64_t(offset);
      }
      case ir::Storage::kAlias:
        value = b->alias_of;
        continue;
    }
    return corrupt("value '" + value_name(value) + "' has an unknown storage kind");
  }
  return corrupt("the plan's aliases form a cycle");
}

Status CudaStream::create_gemm_plan(const GemmKey& key, const artifact::GemmCall& call, CUdeviceptr bias,
                                    GemmPlan& plan) {
  const CublasLtApi& lt = *lt_;
  int data_type = CUDA_R_32F;
  int compute = CUBLAS_COMPUTE_32F;
  switch (call.dtype) {
    case ir::DType::kF32: compute = call.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; break;
    case ir::DType::kF16: data_type = CUDA_R_16F; break;
    case ir::DType::kBF16: data_type = CUDA_R_16BF; break;
    default:
      plan.why_not = "cuBLASLt is not used for " + std::string(ir::dtype_name(call.dtype)) + " products";
      return Status::ok();
  }
  auto check = [&](cublasStatus_t s, const char* what) -> Status {
    if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
    return internal_error(std::string("cuBLASLt ") + what + ": " + cublas_status_name(s));
  };
  KILN_RETURN_IF_ERROR(check(lt.cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  const int32_t op_n = CUBLAS_OP_N;
  KILN_RETURN_IF_ERROR(check(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_n, sizeof(op_n)), "TRANSA"));
  KILN_RETURN_IF_ERROR(check(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)), "TRANSB"));
  plan.has_bias = call.bias_arg >= 0;
  plan.alpha = call.alpha;
  plan.beta = call.residual_arg >= 0 ? 1.0f : 0.0f;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  switch (call.epilogue) {
    case artifact::GemmCall::Epilogue::kNone:
      epilogue = plan.has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      break;
    case artifact::GemmCall::Epilogue::kRelu:
      epilogue = plan.has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
      break;
    case artifact::GemmCall::Epilogue::kGeluTanh:
      epilogue = plan.has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      break;
  }
  KILN_RETURN_IF_ERROR(check(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "EPILOGUE"));
  if (plan.has_bias) {
    // The heuristic reads the bias address for its alignment; execution sets it again per run.
    const void* bias_pointer = reinterpret_cast<const void*>(uintptr_t(bias));
    KILN_RETURN_IF_ERROR(check(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer, sizeof(bias_pointer)), "BIAS_POINTER"));
  }
  // Column-major views (see the header comment): A' = b as [n, k] ld n, B' = a as [k, m] ld k,
  // D' = out as [n, m] ld n.
  const uint64_t m = uint64_t(key.m), n = uint64_t(key.n), k = uint64_t(key.k);
  KILN_RETURN_IF_ERROR(check(lt.cublasLtMatrixLayoutCreate(&plan.lt_a, data_type, n, k, int64_t(n)), "cublasLtMatrixLayoutCreate"));
  KILN_RETURN_IF_ERROR(check(lt.cublasLtMatrixLayoutCreate(&plan.lt_b, data_type, k, m, int64_t(k)), "cublasLtMatrixLayoutCreate"));
  KILN_RETURN_IF_ERROR(check(lt.cublasLtMatrixLayoutCreate(&plan.lt_d, data_type, n, m, int64_t(n)), "cublasLtMatrixLayoutCreate"));
  if (key.batch > 1) {
    const int32_t count = int32_t(key.batch);
    const int64_t stride_a = call.b_batched ? int64_t(k * n) : 0;
    const int64_t stride_b = call.a_batched ? int64_t(m * k) : 0;
    const int64_t stride_d = int64_t(m * n);
    for (auto [layout, stride] : {std::pair{plan.lt_a, stride_a}, std::pair{plan.lt_b, stride_b}, std::pair{plan.lt_d, stride_d}}) {
      KILN_RETURN_IF_ERROR(check(lt.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), "BATCH_COUNT"));
      KILN_RETURN_IF_ERROR(check(lt.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)), "STRIDED_BATCH_OFFSET"));
    }
    const int64_t bias_stride = 0;  // one bias row shared by the batch
    if (plan.has_bias)
      KILN_RETURN_IF_ERROR(check(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride, sizeof(bias_stride)), "BIAS_BATCH_STRIDE"));
  }
  cublasLtMatmulPreference_t pref = nullptr;
  KILN_RETURN_IF_ERROR(check(lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace = kWorkspaceBytes;
  cublasStatus_t s = lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  const std::pair<int, uint32_t> alignments[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
                                                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
                                                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
                                                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d}};
  for (const auto& [attribute, bytes] : alignments)
    if (s == CUBLAS_STATUS_SUCCESS) s = lt.cublasLtMatmulPreferenceSetAttribute(pref, attribute, &bytes, sizeof(bytes));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.cublasLtMatmulAlgoGetHeuristic(lt_handle_, plan.desc, plan.lt_a, plan.lt_b, plan.lt_d, plan.lt_d, pref, 1,
                                          &result, &returned);
  lt.cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || returned < 1 || result.state != CUBLAS_STATUS_SUCCESS ||
      result.workspaceSize > kWorkspaceBytes) {
    plan.why_not = "cuBLASLt has no algorithm for it (" + cublas_status_name(s != CUBLAS_STATUS_SUCCESS ? s : result.state) + ")";
    return Status::ok();
  }
  plan.algo = result.algo;
  plan.usable = true;
  return Status::ok();
}

Result<GemmPlan*> CudaStream::gemm_plan(const GemmKey& key, const artifact::GemmCall& call, CUdeviceptr bias) {
  if (!lt_checked_) {
    lt_checked_ = true;
    Result<const CublasLtApi*> loaded = cublaslt_api();
    if (!loaded.is_ok()) {
      lt_unavailable_ = loaded.status().message();
    } else {
      const cublasStatus_t s = (*loaded)->cublasLtCreate(&lt_handle_);
      if (s != CUBLAS_STATUS_SUCCESS) {
        lt_handle_ = nullptr;
        lt_unavailable_ = "cublasLtCreate failed: " + cublas_status_name(s);
      } else {
        lt_ = *loaded;
        Result<std::unique_ptr<CudaBuffer>> workspace = CudaBuffer::create(device_, kWorkspaceBytes);
        if (!workspace.is_ok()) {
          lt_unavailable_ = "no memory for its workspace: " + workspace.status().message();
        } else {
          workspace_ = std::move(workspace).value();
        }
      }
    }
    if (!lt_unavailable_.empty())
      log(LogLevel::kInfo, device_.name() + ": matrix products run as generated kernels: cuBLASLt is unavailable (" +
                               lt_unavailable_ + ")");
  }
  if (!lt_ || !workspace_) return nullptr;
  auto found = gemm_plans_.find(key);
  if (found == gemm_plans_.end()) {
    auto plan = std::make_unique<GemmPlan>();
    Status created = create_gemm_plan(key, call, bias, *plan);
    if (!created.is_ok()) {  // a descriptor call failed: keep the half-built plan for cleanup, unused
      plan->usable = false;
      plan->why_not = created.message();
    }
    found = gemm_plans_.emplace(key, std::move(plan)).first;
  }
  return found->second->usable ? found->second.get() : nullptr;
}

Status CudaStream::prepare(const CudaProgram& program, const hal::ExecuteArgs& args,
                           const ir::SymbolBindings& bindings) {
  const artifact::LoadedArtifact& art = program.artifact();
  const ir::Graph& graph = art.graph;
  ops_.clear();
  op_timings_.clear();
  auto timing_of = [&](uint32_t kernel_index, const std::string& fallback_name, const std::string& suffix) {
    hal::KernelTiming timing;
    timing.kernel_index = kernel_index;
    if (kernel_index < graph.kernels().size()) {
      const ir::Kernel& k = graph.kernels()[kernel_index];
      timing.name = k.name;
      timing.kind = std::string(ir::kernel_kind_name(k.kind)) + suffix;
      for (ir::NodeId id : k.nodes)
        if (id < graph.num_nodes()) timing.source_nodes.push_back(graph.node(id).name);
    } else {
      timing.name = fallback_name;
    }
    return timing;
  };

  for (const ir::Launch& launch : art.plan.launches) {
    const LoadedKernel* kernel = program.kernel(launch.kernel);
    if (!kernel) return internal_error("CUDA stream: graph kernel " + std::to_string(launch.kernel) + " was not loaded");
    const artifact::KernelBinary& binary = *kernel->binary;
    KILN_ASSIGN_OR_RETURN(int64_t launch_items, binary.dispatch.work_items.evaluate(bindings));
    if (launch_items <= 0) continue;  // an empty tensor: nothing to compute, no library call
    auto arg_pointer = [&](int64_t arg_index, const char* role) -> Result<CUdeviceptr> {
      if (arg_index < 0 || size_t(arg_index) >= binary.args.size() ||
          binary.args[size_t(arg_index)].kind != artifact::KernelArg::Kind::kBuffer)
        return corrupt("CUDA kernel '" + binary.kernel_name + "': its library call's " + role +
                       " is not one of its buffer args");
      return resolve(program, args, bindings, binary.args[size_t(arg_index)].value);
    };
    // A launch of `function` with the kernel's args at `arg_indices`, sized by `dispatch`.
    auto kernel_op = [&](CUfunction function, uint64_t max_blocks, const std::vector<uint32_t>& arg_indices,
                         const artifact::KernelDispatch& dispatch) -> Result<Op> {
      Op op;
      op.kind = Op::Kind::kKernel;
      op.kernel_index = launch.kernel;
      op.name = binary.kernel_name;
      op.function = function;
      op.params.reserve(arg_indices.size());
      for (uint32_t index : arg_indices) {
        if (index >= binary.args.size()) return corrupt("CUDA kernel '" + binary.kernel_name + "': argument out of range");
        const artifact::KernelArg& arg = binary.args[index];
        if (arg.kind == artifact::KernelArg::Kind::kSymbol) {
          auto found = bindings.find(arg.symbol);
          if (found == bindings.end())
            return invalid_argument("CUDA kernel '" + binary.kernel_name + "' takes the size of symbol '" + arg.symbol +
                                    "', which the inputs do not bind");
          const long long value = found->second;
          uint64_t bits = 0;
          std::memcpy(&bits, &value, sizeof(bits));
          op.params.push_back(bits);
        } else {
          KILN_ASSIGN_OR_RETURN(CUdeviceptr p, resolve(program, args, bindings, arg.value));
          op.params.push_back(p);
        }
      }
      KILN_ASSIGN_OR_RETURN(int64_t work_items, dispatch.work_items.evaluate(bindings));
      const uint64_t per_block = std::max<uint32_t>(dispatch.items_per_group, 1);
      const uint64_t needed = (uint64_t(std::max<int64_t>(work_items, 0)) + per_block - 1) / per_block;
      op.grid = unsigned(std::clamp<uint64_t>(needed, 1, max_blocks));
      op.block = dispatch.workgroup_size;
      return op;
    };
    std::vector<uint32_t> all_args(binary.args.size());
    std::iota(all_args.begin(), all_args.end(), 0u);
    // After a library call that covers the kernel's start: the rest of its epilogue, in place.
    auto push_library_epilogue = [&](const artifact::LibraryEpilogue& epilogue, const char* library) -> Status {
      if (epilogue.empty()) return Status::ok();
      KILN_ASSIGN_OR_RETURN(Op rest, kernel_op(kernel->epilogue_function, kernel->epilogue_max_blocks, epilogue.args,
                                               epilogue.dispatch));
      ops_.push_back(std::move(rest));
      op_timings_.push_back(timing_of(launch.kernel, binary.kernel_name, std::string(" (epilogue after ") + library + ")"));
      return Status::ok();
    };

    std::string library_not_used;  // why an eligible library did not run this kernel
    if (binary.conv) {
      const artifact::ConvCall& call = *binary.conv;
      KILN_ASSIGN_OR_RETURN(int64_t batch, call.batch.evaluate(bindings));
      if (!convs_) convs_ = std::make_unique<CudnnConvs>(device_, stream_, program.take_cudnn_handle());
      ConvOperands operands;
      KILN_ASSIGN_OR_RETURN(operands.x, arg_pointer(call.x_arg, "input"));
      KILN_ASSIGN_OR_RETURN(operands.w, arg_pointer(call.w_arg, "filter"));
      KILN_ASSIGN_OR_RETURN(operands.y, arg_pointer(call.out_arg, "output"));
      if (call.bias_arg >= 0) {
        KILN_ASSIGN_OR_RETURN(operands.bias, arg_pointer(call.bias_arg, "bias"));
      }
      if (call.residual_arg >= 0) {
        KILN_ASSIGN_OR_RETURN(operands.residual, arg_pointer(call.residual_arg, "residual"));
      }
      const CudnnConvPlan* plan = nullptr;
      // cuDNN reads the input while it writes the output (only the residual may share it).
      if (operands.x == operands.y || operands.w == operands.y) {
        library_not_used = "its output shares memory with its input";
      } else if (call.activation == artifact::ConvCall::Activation::kClamp) {
        library_not_used = "cuDNN's fused convolution takes no clamp";  // not recorded by the CUDA target
      } else {
        KILN_ASSIGN_OR_RETURN(plan, convs_->plan(launch.kernel, call, batch));
        if (!plan) library_not_used = convs_->why_not();
      }
      if (plan) {
        Op op;
        op.kind = Op::Kind::kConv;
        op.kernel_index = launch.kernel;
        op.name = binary.kernel_name;
        op.conv = plan;
        op.conv_operands = operands;
        ops_.push_back(std::move(op));
        op_timings_.push_back(
            timing_of(launch.kernel, binary.kernel_name, " (cuDNN " + CudnnConvs::algorithm_name(*plan) + ")"));
        KILN_RETURN_IF_ERROR(push_library_epilogue(call.in_place_epilogue, "cuDNN"));
        continue;
      }
    }

    if (binary.gemm) {
      const artifact::GemmCall& call = *binary.gemm;
      KILN_ASSIGN_OR_RETURN(int64_t batch, call.batch.evaluate(bindings));
      KILN_ASSIGN_OR_RETURN(int64_t m, call.m.evaluate(bindings));
      KILN_ASSIGN_OR_RETURN(int64_t n, call.n.evaluate(bindings));
      KILN_ASSIGN_OR_RETURN(int64_t k, call.k.evaluate(bindings));
      // A batched a times a shared b is one product of batch * m rows (rows are contiguous).
      if (call.a_batched && !call.b_batched && batch > 1 && m <= kMaxGemmDim / batch) {
        m *= batch;
        batch = 1;
      }
      if (batch >= 1 && m >= 1 && n >= 1 && k >= 1 && batch <= kMaxGemmDim && m <= kMaxGemmDim &&
          n <= kMaxGemmDim && k <= kMaxGemmDim) {
        KILN_ASSIGN_OR_RETURN(CUdeviceptr a, arg_pointer(call.a_arg, "a operand"));
        KILN_ASSIGN_OR_RETURN(CUdeviceptr b, arg_pointer(call.b_arg, "b operand"));
        KILN_ASSIGN_OR_RETURN(CUdeviceptr out, arg_pointer(call.out_arg, "output"));
        CUdeviceptr bias = 0, residual = out;
        if (call.bias_arg >= 0) {
          KILN_ASSIGN_OR_RETURN(bias, arg_pointer(call.bias_arg, "bias"));
        }
        if (call.residual_arg >= 0) {
          KILN_ASSIGN_OR_RETURN(residual, arg_pointer(call.residual_arg, "residual"));
        }
        GemmKey key{launch.kernel,
                    batch,
                    m,
                    n,
                    k,
                    pointer_alignment(b),
                    pointer_alignment(a),
                    pointer_alignment(residual),
                    pointer_alignment(out),
                    call.bias_arg >= 0 ? pointer_alignment(bias) : 0};
        KILN_ASSIGN_OR_RETURN(GemmPlan * plan, gemm_plan(key, call, bias));
        if (plan) {
          Op op;
          op.kind = Op::Kind::kGemm;
          op.kernel_index = launch.kernel;
          op.name = binary.kernel_name;
          op.gemm = plan;
          op.lt_a = b;
          op.lt_b = a;
          op.lt_c = residual;
          op.lt_d = out;
          op.bias = bias;
          ops_.push_back(std::move(op));
          op_timings_.push_back(timing_of(launch.kernel, binary.kernel_name, " (cuBLASLt)"));
          KILN_RETURN_IF_ERROR(push_library_epilogue(call.in_place_epilogue, "cuBLASLt"));
          continue;
        }
        library_not_used = lt_ ? "cuBLASLt has no algorithm for it" : lt_unavailable_;
      }
    }

    KILN_ASSIGN_OR_RETURN(Op op, kernel_op(kernel->function, kernel->max_blocks, all_args, binary.dispatch));
    ops_.push_back(std::move(op));
    op_timings_.push_back(timing_of(launch.kernel, binary.kernel_name,
                                    library_not_used.empty() ? "" : " (generated: " + library_not_used + ")"));
  }

  // Outputs no kernel wrote in place (an input or constant returned as is, an output computed
  // into the arena, or one value returned under two names).
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    KILN_ASSIGN_OR_RETURN(CUdeviceptr src, resolve(program, args, bindings, graph.outputs()[i].node));
    const auto* out = static_cast<const CudaBuffer*>(args.outputs[i]);
    if (src == out->pointer() || out->size() == 0) continue;
    Op op;
    op.kind = Op::Kind::kCopy;
    op.name = "copy to output '" + graph.outputs()[i].name + "'";
    op.dst = out->pointer();
    op.src = src;
    op.bytes = out->size();
    ops_.push_back(std::move(op));
    hal::KernelTiming timing;
    timing.name = ops_.back().name;
    timing.kind = "copy";
    op_timings_.push_back(std::move(timing));
  }
  return Status::ok();
}

Status CudaStream::enqueue(const Op& op) {
  switch (op.kind) {
    case Op::Kind::kKernel: {
      void* params[64];
      std::vector<void*> many;
      void** pointers = params;
      if (op.params.size() > 64) {
        many.resize(op.params.size());
        pointers = many.data();
      }
      for (size_t i = 0; i < op.params.size(); ++i) pointers[i] = const_cast<uint64_t*>(&op.params[i]);
      const CUresult r = api_.cuLaunchKernel(op.function, op.grid, 1, 1, op.block, 1, 1, 0, stream_, pointers, nullptr);
      if (r != CUDA_SUCCESS)
        return cu_status(r, device_.name() + ": launching kernel '" + op.name + "' (" + std::to_string(op.grid) +
                                " blocks of " + std::to_string(op.block) + " threads)");
      return Status::ok();
    }
    case Op::Kind::kGemm: {
      const GemmPlan& plan = *op.gemm;
      if (plan.has_bias) {
        const void* bias = reinterpret_cast<const void*>(uintptr_t(op.bias));
        const cublasStatus_t s =
            lt_->cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
        if (s != CUBLAS_STATUS_SUCCESS)
          return internal_error("kernel '" + op.name + "': cuBLASLt bias pointer: " + cublas_status_name(s));
      }
      // Host pointer mode: alpha and beta are read during the call.
      auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(uintptr_t(p)); };
      const cublasStatus_t s = lt_->cublasLtMatmul(lt_handle_, plan.desc, &plan.alpha, ptr(op.lt_a), plan.lt_a,
                                                   ptr(op.lt_b), plan.lt_b, &plan.beta, ptr(op.lt_c), plan.lt_d,
                                                   ptr(op.lt_d), plan.lt_d,
                                                   &plan.algo, ptr(workspace_->pointer()), kWorkspaceBytes, stream_);
      if (s != CUBLAS_STATUS_SUCCESS)
        return internal_error(device_.name() + ": kernel '" + op.name + "': cublasLtMatmul failed: " + cublas_status_name(s));
      return Status::ok();
    }
    case Op::Kind::kConv: {
      Status ran = convs_->run(*op.conv, op.conv_operands);
      if (!ran.is_ok()) return internal_error(device_.name() + ": kernel '" + op.name + "': " + ran.message());
      return Status::ok();
    }
    case Op::Kind::kCopy: {
      const CUresult r = api_.cuMemcpyDtoDAsync_v2(op.dst, op.src, op.bytes, stream_);
      if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": " + op.name);
      return Status::ok();
    }
  }
  return internal_error("CUDA stream: unknown op kind");
}

Status CudaStream::enqueue_all() {
  for (const Op& op : ops_) KILN_RETURN_IF_ERROR(enqueue(op));
  return Status::ok();
}

Status CudaStream::capture_graph() {
  CUresult r = api_.cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS) return cu_status(r, "cuStreamBeginCapture");
  Status enqueued = enqueue_all();
  CUgraph graph = nullptr;
  r = api_.cuStreamEndCapture(stream_, &graph);  // always ends the capture, even after a failure
  if (!enqueued.is_ok()) {
    if (graph) api_.cuGraphDestroy(graph);
    return enqueued;
  }
  if (r != CUDA_SUCCESS || !graph) return cu_status(r, "cuStreamEndCapture");
  r = api_.cuGraphInstantiateWithFlags(&graph_, graph, 0);
  api_.cuGraphDestroy(graph);  // the executable graph does not need it
  if (r != CUDA_SUCCESS) {
    graph_ = nullptr;
    return cu_status(r, "cuGraphInstantiate");
  }
  return Status::ok();
}

Result<CUevent> CudaStream::profile_event(size_t index) {
  while (profile_events_.size() <= index) {
    CUevent e = nullptr;
    const CUresult r = api_.cuEventCreate(&e, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuEventCreate");
    profile_events_.push_back(e);
  }
  return profile_events_[index];
}

Status CudaStream::execute(const hal::Executable& executable, const hal::ExecuteArgs& args) {
  const auto* exe = dynamic_cast<const CudaExecutable*>(&executable);
  if (!exe || &exe->program().device() != &device_)
    return invalid_argument("CUDA stream: the executable belongs to another device");
  if (pending_) return invalid_argument("CUDA stream: the previous execution was not synchronized");
  const CudaProgram& program = exe->program();
  const ir::Graph& graph = program.artifact().graph;
  if (args.inputs.size() != graph.inputs().size() || args.outputs.size() != graph.outputs().size())
    return invalid_argument("CUDA stream: wrong number of input or output buffers");
  PreparedKey key;
  key.program = program.serial();
  key.buffers.reserve(2 * (args.inputs.size() + args.outputs.size() + 1));
  for (auto* list : {&args.inputs, &args.outputs}) {
    for (hal::Buffer* b : *list) {
      const auto* cb = dynamic_cast<const CudaBuffer*>(b);
      if (!cb || &cb->device() != &device_)
        return invalid_argument("CUDA stream: a bound buffer is not memory of " + device_.name());
      key.buffers.push_back(cb->pointer());
      key.buffers.push_back(cb->size());
    }
  }
  if (args.arena) {
    const auto* arena = dynamic_cast<const CudaBuffer*>(args.arena);
    if (!arena || &arena->device() != &device_)
      return invalid_argument("CUDA stream: the arena is not memory of " + device_.name());
    key.buffers.push_back(arena->pointer());
    key.buffers.push_back(arena->size());
  }
  static const ir::SymbolBindings kNoBindings;
  key.bindings = args.bindings ? *args.bindings : kNoBindings;

  ScopedContext current(api_, device_.context());
  KILN_RETURN_IF_ERROR(current.status());
  if (!prepared_ || !(key == key_)) {
    release_graph();
    prepared_ = false;
    runs_with_key_ = 0;
    KILN_RETURN_IF_ERROR(prepare(program, args, key.bindings));
    key_ = std::move(key);
    prepared_ = true;
  }
  ++runs_with_key_;

  CUresult r = api_.cuEventRecord(start_, stream_);
  if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuEventRecord");
  if (args.profile) {
    args.profile->clock = "device timer (CUDA events)";
    if (!graphs_off_reason_.empty()) args.profile->clock += "; CUDA graphs off: " + graphs_off_reason_;
    args.profile->kernels.clear();
    for (size_t i = 0; i < ops_.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(CUevent before, profile_event(2 * i));
      KILN_ASSIGN_OR_RETURN(CUevent after, profile_event(2 * i + 1));
      r = api_.cuEventRecord(before, stream_);
      if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuEventRecord");
      KILN_RETURN_IF_ERROR(enqueue(ops_[i]));
      r = api_.cuEventRecord(after, stream_);
      if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuEventRecord");
    }
    pending_profile_ = args.profile;
  } else if (use_graphs_ && runs_with_key_ >= 2 && !ops_.empty()) {  // (nothing to capture when all is empty)
    if (!graph_) {
      Status captured = capture_graph();
      if (!captured.is_ok()) {
        // Run without graphs from now on; the ops themselves are fine to launch directly (a
        // real launch error shows up again below).
        use_graphs_ = false;
        graphs_off_reason_ = captured.message();
        log(LogLevel::kWarning, device_.name() + ": CUDA graph capture failed, launching kernels one by one: " +
                                    graphs_off_reason_);
      }
    }
    if (graph_) {
      r = api_.cuGraphLaunch(graph_, stream_);
      if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuGraphLaunch");
    } else {
      KILN_RETURN_IF_ERROR(enqueue_all());
    }
  } else {
    KILN_RETURN_IF_ERROR(enqueue_all());
  }
  r = api_.cuEventRecord(end_, stream_);
  if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuEventRecord");
  pending_ = true;
  return Status::ok();
}

Status CudaStream::synchronize() {
  ScopedContext current(api_, device_.context());
  KILN_RETURN_IF_ERROR(current.status());
  if (!pending_) {
    // Drains work of a failed execute() that was partly enqueued.
    const CUresult r = api_.cuStreamSynchronize(stream_);
    return r == CUDA_SUCCESS ? Status::ok() : cu_status(r, device_.name() + ": running the artifact");
  }
  pending_ = false;
  hal::Profile* profile = pending_profile_;
  pending_profile_ = nullptr;
  last_seconds_.reset();
  CUresult r = api_.cuEventSynchronize(end_);
  if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": running the artifact");
  float ms = 0;
  if (api_.cuEventElapsedTime(&ms, start_, end_) == CUDA_SUCCESS) last_seconds_ = double(ms) * 1e-3;
  if (profile) {
    for (size_t i = 0; i < ops_.size() && 2 * i + 1 < profile_events_.size(); ++i) {
      hal::KernelTiming timing = op_timings_[i];
      r = api_.cuEventElapsedTime(&ms, profile_events_[2 * i], profile_events_[2 * i + 1]);
      if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuEventElapsedTime");
      timing.seconds = double(ms) * 1e-3;
      r = api_.cuEventElapsedTime(&ms, start_, profile_events_[2 * i]);
      if (r != CUDA_SUCCESS) return cu_status(r, device_.name() + ": cuEventElapsedTime");
      timing.start_seconds = double(ms) * 1e-3;
      profile->kernels.push_back(std::move(timing));
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<hal::Stream>> create_cuda_stream(CudaDevice& device, bool use_graphs,
                                                        CUstream application_stream) {
  auto stream = std::make_unique<CudaStream>(device, use_graphs);
  KILN_RETURN_IF_ERROR(stream->init(application_stream));
  return std::unique_ptr<hal::Stream>(std::move(stream));
}

}  // namespace kiln::runtime::cuda
