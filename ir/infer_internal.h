// Internal to ir/infer*.cpp: per-family inference functions and message helpers.
//
// Each function receives the operand types (already inferred) and a copy of the node's
// attributes, which it may normalize in place; infer_node writes the copy back only on success.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/ops.h"
#include "ir/shape.h"
#include "support/status.h"

namespace kiln::ir::infer_detail {

using Operands = std::vector<TensorType>;

inline std::string quoted_op(OpKind op) { return std::string(op_name(op)); }

// "[0, 1]"
std::string ints_to_string(const std::vector<int64_t>& values);

// The shape/type rules named by the operator table (ir/ops.cpp), all of the InferFn signature.
// Elementwise, reduce and normalize families (infer.cpp):
Result<TensorType> infer_unary(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_binary(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_compare(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_logic(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_where(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_cast(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_clamp(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_reduce(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_argmax(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_softmax(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_layer_norm(OpKind op, const Operands& in, Attrs& attrs);
// Layout, linear algebra and convolution families (infer_shapes.cpp):
Result<TensorType> infer_matmul(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_attention(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_reshape(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_transpose(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_broadcast_to(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_iota(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_topk(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_scatter(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_slice(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_concat(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_gather(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_conv2d(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_pool2d(OpKind op, const Operands& in, Attrs& attrs);
Result<TensorType> infer_global_avg_pool2d(OpKind op, const Operands& in, Attrs& attrs);

// The check of the op's row DTypeClass on one operand, with the op named in the message.
Status check_operand_dtype(OpKind op, const TensorType& x);

}  // namespace kiln::ir::infer_detail
