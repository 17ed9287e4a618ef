// The pipeline itself: which passes run at which optimization level, in which order.
//
//   -O0:            infer-shapes, topo-sort, one-kernel-per-op, plan-memory
//   -O1, -fno-fuse: infer-shapes, topo-sort, fold-constants, simplify, cse, fold-conv-affine,
//                   channels-last, fuse-attention, dce, one-kernel-per-op, plan-memory
//   -O2 (default):  infer-shapes, topo-sort, fold-constants, simplify, cse, fold-conv-affine,
//                   channels-last, fuse-attention, dce, fuse, plan-memory
#include <vector>

#include "passes/pass_manager.h"
#include "passes/passes.h"
#include "passes/pipeline.h"

namespace kiln::passes {
namespace {

// Every pass, in pipeline order. The single source of truth for names and descriptions.
const Pass kInferShapes{"infer-shapes", "infer the dtype and shape of every value",
                        infer_shapes_pass};
const Pass kTopoSort{"topo-sort", "order nodes topologically, keeping the user's order when valid",
                     topo_sort_pass, /*sorts_nodes=*/true};
const Pass kFoldConstants{"fold-constants",
                          "evaluate ops whose operands are all constants (up to 1M elements)",
                          fold_constants_pass};
const Pass kSimplify{"simplify",
                     "algebraic identities: x*1, x+0, neg(neg x), reshape and transpose chains, ...",
                     simplify_pass};
const Pass kCse{"cse", "merge identical ops and equal constants", cse_pass};
const Pass kFoldConvAffine{"fold-conv-affine",
                          "fold per-channel constant shifts and scales (batch norm) into convolution bias and weights",
                          fold_conv_affine_pass};
const Pass kChannelsLast{"channels-last",
                         "run convolutions and what follows them in NHWC (f16/bf16 ones when targeting cuda)",
                         channels_last_pass};
const Pass kFuseAttention{"fuse-attention",
                           "replace matmul -> scale -> mask -> softmax -> matmul by one attention op "
                           "reading the heads in place",
                           fuse_attention_pass};
const Pass kDce{"dce", "remove values no output depends on", dce_pass};
const Pass kFuse{"fuse",
                 "fuse elementwise chains, reduction/normalization prologues and epilogues, "
                 "matmul and conv epilogues into kernels",
                 fuse_pass};
const Pass kOneKernelPerOp{"one-kernel-per-op", "one kernel per op (when fusion is off)",
                           one_kernel_per_op_pass};
const Pass kPlanMemory{"plan-memory",
                       "order kernel launches and assign buffers in one arena with liveness reuse",
                       plan_memory_pass};

const std::vector<Pass>& all_passes() {
  static const std::vector<Pass> passes = {kInferShapes,    kTopoSort,     kFoldConstants, kSimplify,
                                           kCse,            kFoldConvAffine, kChannelsLast, kFuseAttention, kDce,
                                           kFuse,           kOneKernelPerOp, kPlanMemory};
  return passes;
}

std::vector<Pass> build_pipeline(const PipelineOptions& options) {
  std::vector<Pass> pipeline = {kInferShapes, kTopoSort};
  if (options.opt_level >= 1) {
    pipeline.insert(pipeline.end(), {kFoldConstants, kSimplify, kCse, kFoldConvAffine, kChannelsLast, kFuseAttention, kDce});
  }
  bool fuse = options.opt_level >= 2 && options.fuse;
  pipeline.push_back(fuse ? kFuse : kOneKernelPerOp);
  pipeline.push_back(kPlanMemory);
  return pipeline;
}

}  // namespace

const std::vector<PassInfo>& list_passes() {
  static const std::vector<PassInfo> infos = [] {
    std::vector<PassInfo> result;
    for (const Pass& pass : all_passes()) result.push_back({pass.name, pass.description});
    return result;
  }();
  return infos;
}

Result<ir::ExecutionPlan> run_pipeline(ir::Graph& graph, const PipelineOptions& options) {
  if (options.opt_level < 0 || options.opt_level > 2) {
    return invalid_argument("unknown optimization level -O" + std::to_string(options.opt_level) +
                            " (use -O0, -O1 or -O2)");
  }
  KILN_RETURN_IF_ERROR(check_print_after_names(options, all_passes()));
  ir::ExecutionPlan plan;
  PassContext context{options, &plan};
  std::vector<Pass> pipeline = build_pipeline(options);
  KILN_RETURN_IF_ERROR(run_passes(graph, pipeline, context));
  return plan;
}

}  // namespace kiln::passes
