// match_gemm_call: see gemm_call.h and artifact::GemmCall for the exact pattern. The checks, in
// order: a matmul kernel with 2-D-or-more operands in memory; one float dtype for a, b and the
// result; each operand's batch dims either the output's batch dims (batched) or all 1 (shared);
// an epilogue that is exactly [* a one-element constant, or / a power of two] then [+ bias[n]] and [+ residual
// shaped as the output] in either order, then [relu | gelu(tanh)], a chain in which each node
// consumes the previous one; one written buffer, the chain's last value.
#include "codegen/gemm_call.h"

#include <cmath>

#include "codegen/library_epilogue.h"

namespace kiln::codegen {
namespace {

using ir::Node;
using ir::NodeId;
using ir::OpKind;

bool all_ones(const ir::Shape& shape) {
  for (const ir::Dim& d : shape)
    if (!d.is_one()) return false;
  return true;
}

ir::SizeExpr size_of(const ir::Dim& d) { return ir::SizeExpr::of_shape({d}, 1); }

// What the library computes of a matmul kernel: the call (without out_arg and the epilogue
// kernel), the last node it covers, and the epilogue nodes after it.
struct GemmPrefix {
  artifact::GemmCall call;
  NodeId last = ir::kNoNode;
  std::vector<NodeId> rest;
};

std::optional<GemmPrefix> gemm_prefix(const KernelModel& model, bool allow_tf32) {
  if (model.kind != KernelTemplate::kMatMul || model.anchor == ir::kNoNode) return std::nullopt;
  if (!model.prologue.empty()) return std::nullopt;
  const Node& mm = model.node(model.anchor);
  if (mm.op != OpKind::kMatMul || mm.inputs.size() != 2) return std::nullopt;
  const ir::DType dtype = mm.type.dtype;
  if (dtype != ir::DType::kF32 && dtype != ir::DType::kF16 && dtype != ir::DType::kBF16) return std::nullopt;

  const Node& a = model.node(mm.inputs[0]);
  const Node& b = model.node(mm.inputs[1]);
  if (a.type.dtype != dtype || b.type.dtype != dtype) return std::nullopt;
  const ir::Shape& as = a.type.shape;
  const ir::Shape& bs = b.type.shape;
  const ir::Shape& os = mm.type.shape;
  if (as.size() < 2 || bs.size() < 2 || os.size() < 2) return std::nullopt;
  const int a_index = model.buffer_index(mm.inputs[0]);
  const int b_index = model.buffer_index(mm.inputs[1]);
  if (a_index < 0 || b_index < 0) return std::nullopt;

  // Batch dims: each operand has the output's (batched) or only 1s (one matrix shared by all).
  const ir::Shape batch(os.begin(), os.end() - 2);
  const ir::Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  auto batched = [&](const ir::Shape& operand_batch) -> std::optional<bool> {
    if (all_ones(operand_batch)) return false;
    if (operand_batch == batch) return true;
    return std::nullopt;  // a partial broadcast: no single stride describes it
  };
  const std::optional<bool> a_batched = batched(a_batch), b_batched = batched(b_batch);
  if (!a_batched || !b_batched) return std::nullopt;

  artifact::GemmCall call;
  call.a_arg = uint32_t(a_index);
  call.b_arg = uint32_t(b_index);
  call.dtype = dtype;
  call.batch = ir::SizeExpr::of_shape(batch, 1);
  call.m = size_of(as[as.size() - 2]);
  call.k = size_of(as.back());
  call.n = size_of(bs.back());
  call.a_batched = *a_batched;
  call.b_batched = *b_batched;
  call.allow_tf32 = allow_tf32 && dtype == ir::DType::kF32;

  // The epilogue chain: [scale], then adds of a bias and a residual (either order, at most one
  // each), then [relu | gelu(tanh)]: cuBLASLt's act(alpha * a @ b + beta * c + bias).
  NodeId prev = model.anchor;
  size_t i = 0;
  const std::vector<NodeId>& epi = model.epilogue;
  auto other_operand = [&](const Node& node) {
    return node.inputs[0] == prev ? node.inputs[1] : node.inputs[1] == prev ? node.inputs[0] : ir::kNoNode;
  };
  if (i < epi.size()) {  // x * s or x / s with a one-element constant s: alpha
    const Node& scale = model.node(epi[i]);
    const bool mul = scale.op == OpKind::kMul, div = scale.op == OpKind::kDiv;
    if ((mul || div) && scale.inputs.size() == 2 && scale.type == mm.type && (mul || scale.inputs[0] == prev)) {
      const NodeId factor = mul ? other_operand(scale) : scale.inputs[1];
      if (factor != ir::kNoNode && factor != prev && model.node(factor).op == OpKind::kConstant &&
          model.graph->constant_of(factor).num_elements() == 1) {
        const double v = model.graph->constant_of(factor).element_as_double(0);
        const double alpha = mul ? v : 1.0 / v;
        if (!std::isfinite(alpha)) return std::nullopt;
        // x / s equals x * (1 / s) only when 1 / s is exact in float (s a power of two); otherwise
        // the two differ in the last bit, which a rounding after it (QuantizeLinear's x / scale,
        // then round) turns into a whole quantum. Such a division stays in the epilogue kernel.
        int exponent = 0;
        const bool exact = mul || std::abs(std::frexp(v, &exponent)) == 0.5;
        if (exact) {
          call.alpha = float(alpha);
          prev = epi[i++];
        }
      }
    }
  }
  // Adds and the activation: the chain stops at the first node the library cannot take; the
  // rest is the in-place epilogue's (library_epilogue.h).
  while (i < epi.size() && model.node(epi[i]).op == OpKind::kAdd) {
    const Node& add = model.node(epi[i]);
    if (add.inputs.size() != 2 || add.type.dtype != dtype || !(add.type.shape == os)) break;
    const NodeId other = other_operand(add);
    if (other == ir::kNoNode || other == prev) break;
    const Node& operand = model.node(other);
    const ir::Shape& shape = operand.type.shape;
    const int index = model.buffer_index(other);
    if (operand.type.dtype != dtype || index < 0) break;
    if (shape == os && call.residual_arg < 0) {
      call.residual_arg = index;
    } else if (call.bias_arg < 0 && !shape.empty() && shape.back() == os.back() &&
               all_ones(ir::Shape(shape.begin(), shape.end() - 1))) {
      call.bias_arg = index;
    } else {
      break;
    }
    prev = epi[i++];
  }
  if (i < epi.size()) {
    const Node& act = model.node(epi[i]);
    if (act.inputs.size() == 1 && act.inputs[0] == prev && act.type.dtype == dtype) {
      if (act.op == OpKind::kRelu) {
        call.epilogue = artifact::GemmCall::Epilogue::kRelu;
        prev = epi[i++];
      } else if (act.op == OpKind::kGelu && std::get_if<ir::GeluAttrs>(&act.attrs) &&
                 std::get<ir::GeluAttrs>(act.attrs).tanh_approximation) {
        call.epilogue = artifact::GemmCall::Epilogue::kGeluTanh;
        prev = epi[i++];
      }
    }
  }
  return GemmPrefix{call, prev, std::vector<NodeId>(epi.begin() + long(i), epi.end())};
}

}  // namespace

std::unique_ptr<LibraryEpilogueKernel> gemm_epilogue_kernel(const KernelModel& model) {
  std::optional<GemmPrefix> prefix = gemm_prefix(model, false);
  return prefix ? library_epilogue_kernel(model, prefix->last, prefix->rest) : nullptr;
}

std::optional<artifact::GemmCall> match_gemm_call(const KernelModel& model, bool allow_tf32) {
  std::optional<GemmPrefix> prefix = gemm_prefix(model, allow_tf32);
  if (!prefix) return std::nullopt;
  artifact::GemmCall call = prefix->call;
  const std::optional<uint32_t> out = library_output(model, prefix->last, prefix->rest, call.in_place_epilogue);
  if (!out) return std::nullopt;
  call.out_arg = *out;
  return call;
}


}  // namespace kiln::codegen
