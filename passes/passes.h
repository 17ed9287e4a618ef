// Every pass of the pipeline, one function per pass (one .cpp file per pass). Internal to
// passes/: tools go through passes/pipeline.h. Each function has the PassFunction signature of
// passes/pass_manager.h and leaves the graph valid for ir::verify_graph.
#pragma once

#include "ir/graph.h"
#include "passes/pass_manager.h"
#include "support/status.h"

namespace kiln::passes {

// infer_shapes.cpp: re-runs shape and dtype inference over the whole graph (ir::infer_graph).
Status infer_shapes_pass(ir::Graph& graph, const PassContext& context);

// topo_sort.cpp: a stable topological sort (user order is kept wherever it is already valid).
Status topo_sort_pass(ir::Graph& graph, const PassContext& context);

// fold_constants.cpp: evaluates nodes whose operands are all constants (with ir::evaluate_node)
// and replaces them by constants, unless the result would exceed kMaxFoldedElements.
Status fold_constants_pass(ir::Graph& graph, const PassContext& context);

// simplify.cpp: algebraic identities (x*1, x+0, neg(neg x), reshape/transpose chains, ...).
Status simplify_pass(ir::Graph& graph, const PassContext& context);

// cse.cpp: common-subexpression elimination (same op, operands and attributes; equal constants).
Status cse_pass(ir::Graph& graph, const PassContext& context);

// fold_conv_affine.cpp: folds per-channel constant shifts and scales (inference batch norm)
// into the bias and weights of the convolution before them.
Status fold_conv_affine_pass(ir::Graph& graph, const PassContext& context);

// channels_last.cpp: runs convolutions (per PipelineOptions::channels_last) and what follows
// them in NHWC, with layout changes only where an NCHW value is needed.
Status channels_last_pass(ir::Graph& graph, const PassContext& context);

// fuse_attention.cpp: replaces matmul -> scale -> mask -> softmax -> matmul by one attention
// op, with the head-split transposes folded into its layout.
Status fuse_attention_pass(ir::Graph& graph, const PassContext& context);

// dce.cpp: removes nodes no graph output depends on (graph inputs always stay).
Status dce_pass(ir::Graph& graph, const PassContext& context);

// fuse.cpp: groups nodes into fused kernels (see docs/fusion.md for the rules).
Status fuse_pass(ir::Graph& graph, const PassContext& context);

// kernels.cpp: one kernel per op (used at -O0, -O1 and with -fno-fuse).
Status one_kernel_per_op_pass(ir::Graph& graph, const PassContext& context);

// memory_plan.cpp: liveness-based arena planning; writes *context.plan.
Status plan_memory_pass(ir::Graph& graph, const PassContext& context);

// Largest constant (in elements) that constant folding creates.
inline constexpr int64_t kMaxFoldedElements = int64_t(1) << 20;

}  // namespace kiln::passes
