// KernelModel: one fused ir::Kernel lowered to what every code generator needs, independent of
// the target language: the kernel template (how threads map to work), the index space, the
// buffers it reads and writes (with dtypes, shapes and their KernelArg), the symbol arguments,
// the anchor op with its elementwise prologue/epilogue, and the 1-D dispatch.
//
// Calling convention (artifact/artifact.h): args are every buffer (reads first, then writes, in
// kernel.inputs / kernel.outputs order), then one kSymbol arg per distinct symbol the kernel's
// shapes mention (sorted by name). A buffer's Vulkan binding is its position among the buffers.
//
// Ownership: a model points into the Graph and ExecutionPlan it was built from (which must
// outlive it).
// Thread-safety: plain data, built by a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::codegen {

// How work maps to threads; each C-family dialect has one code template per kind.
enum class KernelTemplate : uint8_t {
  kPointwise,  // one work item per output element (elementwise, layout, conv, pooling)
  kRowReduce,  // one work-group per output row, tree reduction in shared memory
               // (reduce_*, argmax, softmax, log_softmax, layer_norm)
  kMatMul,     // one work-group per 16x16 output tile, tiles of A and B staged in shared memory
  kAttention,  // one work item per query row: scores, online softmax and the weighted sum of
               // value rows in one pass over the keys (CUDA: tensor-core query tiles, c_family_cuda)
};

struct ModelBuffer {
  ir::NodeId value = ir::kNoNode;
  ir::DType dtype = ir::DType::kF32;
  ir::Shape shape;
  bool written = false;
};

struct KernelModel {
  const ir::Graph* graph = nullptr;
  const ir::Kernel* kernel = nullptr;
  const ir::ExecutionPlan* plan = nullptr;  // buffer placement facts (alignment) for the emitters
  uint32_t kernel_index = 0;
  std::string entry_point;  // kernel name sanitized to a C identifier
  KernelTemplate kind = KernelTemplate::kPointwise;
  std::vector<ModelBuffer> buffers;  // arg order; position = Vulkan binding
  std::vector<std::string> symbols;  // symbol args, after the buffers
  std::vector<artifact::KernelArg> args;
  ir::NodeId anchor = ir::kNoNode;   // kNoNode for a pure elementwise kernel
  std::vector<ir::NodeId> prologue;  // elementwise nodes before the anchor (operand's space)
  std::vector<ir::NodeId> epilogue;  // elementwise nodes after the anchor (output's space)
  // kPointwise: the output shape. kRowReduce: the reduced operand's shape. kMatMul, kAttention:
  // the output.
  ir::Shape space;
  std::vector<bool> reduced_axes;    // kRowReduce: which axes of `space` one row spans
  artifact::KernelDispatch dispatch;
  // The first buffer is the written one's memory, read then overwritten element by element (a
  // GEMM epilogue kernel, codegen/gemm_call.h): the buffers are not declared restrict.
  bool in_place = false;

  // Position of `value` among the buffers, or -1 when the kernel computes it in registers.
  int buffer_index(ir::NodeId value) const;
  const ir::Node& node(ir::NodeId id) const { return graph->node(id); }
};

// Workgroup sizes per template (the emitters rely on these being powers of two).
inline constexpr uint32_t kPointwiseGroupSize = 64;
inline constexpr uint32_t kRowGroupSize = 64;
inline constexpr uint32_t kMatMulTile = 16;
inline constexpr uint32_t kAttentionGroupSize = 64;

// Lowers graph.kernels()[kernel_index]. Fails with kUnsupported for an op the codegen lacks.
Result<KernelModel> build_kernel_model(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                       uint32_t kernel_index);

// "fused_mul_add_0" -> a valid, non-reserved C/GLSL identifier ("k_fused_mul_add_0").
std::string sanitize_identifier(const std::string& name);

}  // namespace kiln::codegen
