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

// Layout, linear algebra and convolution families (infer_shapes.cpp).
Result<TensorType> infer_matmul(const Operands& in);
Result<TensorType> infer_reshape(const Operands& in, ReshapeAttrs& attrs);
Result<TensorType> infer_transpose(const Operands& in, TransposeAttrs& attrs);
Result<TensorType> infer_broadcast_to(const Operands& in, BroadcastToAttrs& attrs);
Result<TensorType> infer_slice(const Operands& in, SliceAttrs& attrs);
Result<TensorType> infer_concat(const Operands& in, AxisAttrs& attrs);
Result<TensorType> infer_gather(const Operands& in, AxisAttrs& attrs);
Result<TensorType> infer_conv2d(const Operands& in, Conv2dAttrs& attrs);
Result<TensorType> infer_pool2d(OpKind op, const Operands& in, Pool2dAttrs& attrs);
Result<TensorType> infer_global_avg_pool2d(const Operands& in);

}  // namespace kiln::ir::infer_detail
