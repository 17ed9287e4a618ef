// Converters for ONNX's linear quantization operators: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.
//
// Each is decomposed into Kiln ops: casts, the integer product of the zero-point-shifted
// operands (an i32 matmul; a convolution in f32, taken only where its int32 accumulation is
// provably exact there) and an f32 rescale, rounded half to even and saturated to the
// quantized type. The elementwise parts fuse into the kernels around them: a QDQ model's
// constant weights are dequantized at import, and a QuantizeLinear -> DequantizeLinear pair on
// an activation joins the epilogue of the kernel producing it, so its convolutions and matmuls
// run as float ones.
//
// Quantized types are Kiln's int8, uint8, int16 and uint16 (the integer products, MatMulInteger
// and the convolutions, take the 8-bit ones), and for QuantizeLinear and DequantizeLinear also its
// 8-bit floats (ONNX's float8 types): x / scale converted to the float type with its rounding
// (nearest even) and, by default, saturation (onnx_cast); their zero point must be zero. Others
// (int4, int2, float8e8m0, float4) have no Kiln dtype; their tensors are refused where they enter
// the graph, and an output_dtype naming one is refused here.
#include <algorithm>
#include <cmath>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::DType;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

bool is_8bit_quantized_type(DType d) { return d == DType::kI8 || d == DType::kU8; }
bool is_quantized_type(DType d) { return is_8bit_quantized_type(d) || d == DType::kI16 || d == DType::kU16; }

// ONNX defines the zero point of an 8-bit float quantization as zero: a constant one that is not
// is refused (a computed one is not checked, and is not used).
Status check_float8_zero_point(Importer& im, int input) {
  if (!im.has_input(input)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(NodeId zp, im.input(input));
  if (const ir::Tensor* t = im.const_data(zp)) {
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      if (t->element_as_double(i) != 0.0) return im.error("the zero point of an 8-bit float type must be zero");
    }
  }
  return Status::ok();
}

// A scale or zero point made broadcastable against x (ONNX's three granularities):
// - per tensor: a scalar or a one-element tensor;
// - per axis: a 1-D tensor of x's size along `axis`;
// - blocked (block_size > 0): x's shape with ceil(size / block_size) along `axis`, each entry
//   repeated over its block (a gather of the parameter by position / block_size).
Result<NodeId> broadcast_parameter(Importer& im, NodeId param, const Shape& xs, int64_t axis, int64_t block_size,
                                   std::string_view what) {
  const Shape ps = im.type(param).shape;
  const int64_t rank = int64_t(xs.size());
  if (ir::static_num_elements(ps) == 1 && block_size == 0) return im.reshape(param, {});
  if (block_size < 0) return im.error("block_size must not be negative");
  Result<int64_t> normalized = ir::normalize_axis(axis, rank);
  if (!normalized.is_ok()) return im.error(normalized.status().message());
  axis = *normalized;
  if (block_size == 0) {
    if (ps.size() != 1) {
      return im.error(std::string(what) + " must be a scalar or 1-D (per-axis) without block_size");
    }
    if (ps[0] != xs[axis]) {
      return im.error(std::string(what) + " has " + ps[0].to_string() + " entries for an axis of " +
                      xs[axis].to_string());
    }
    Shape along(xs.size(), ir::Dim::of(1));
    along[axis] = ps[0];
    return im.reshape(param, along);
  }
  if (int64_t(ps.size()) != rank) return im.error(std::string(what) + " must have the input's rank for blocked quantization");
  if (!xs[axis].is_static() || !ps[axis].is_static()) {
    return im.unsupported("blocked quantization needs a static size along the blocked axis");
  }
  const int64_t size = xs[axis].size();
  const int64_t blocks = ps[axis].size();
  if (blocks != (size + block_size - 1) / block_size) {
    return im.error(std::string(what) + " has " + std::to_string(blocks) + " blocks along axis " +
                    std::to_string(axis) + "; " + std::to_string(size) + " elements in blocks of " +
                    std::to_string(block_size) + " need " + std::to_string((size + block_size - 1) / block_size));
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis && ps[i] != xs[i]) return im.error(std::string(what) + " must match the input's shape off the blocked axis");
  }
  std::vector<int64_t> block_of(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) block_of[size_t(i)] = i / block_size;
  KILN_ASSIGN_OR_RETURN(NodeId index, im.ints_constant(block_of));
  return im.add(OpKind::kGather, {param, index}, ir::AxisAttrs{axis});
}

// `value` (f32, already a whole number or beyond the range) saturated to `dtype`'s range, as `dtype`.
Result<NodeId> saturate(Importer& im, NodeId value, DType dtype) {
  const auto [lo, hi] = ir::integer_range(dtype);
  KILN_ASSIGN_OR_RETURN(NodeId saturated, im.add(OpKind::kClamp, {value}, ir::ClampAttrs{double(lo), double(hi)}));
  return im.cast(saturated, dtype);
}

// round_half_even(value / scale) + zero_point (when not kNoNode), saturated to `dtype`.
Result<NodeId> quantize(Importer& im, NodeId value, NodeId scale, NodeId zero_point, DType dtype) {
  KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kDiv, {value, scale}));
  KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kRound, {value}));
  if (zero_point != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kAdd, {value, zero_point}));
  }
  return saturate(im, value, dtype);
}

// Input i as f32 (broadcast per ONNX's granularity rules), or kNoNode when it is absent.
Result<NodeId> f32_parameter(Importer& im, int i, const Shape& xs, int64_t axis, int64_t block_size,
                             std::string_view what) {
  if (!im.has_input(i)) return ir::kNoNode;
  KILN_ASSIGN_OR_RETURN(NodeId p, im.input(i));
  KILN_ASSIGN_OR_RETURN(p, broadcast_parameter(im, p, xs, axis, block_size, what));
  return im.cast(p, DType::kF32);
}

// The type a QuantizeLinear produces: its zero point's, else output_dtype, else uint8.
Result<DType> quantized_output_type(Importer& im) {
  std::optional<DType> from_zero_point;
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(NodeId zp, im.input(2));
    from_zero_point = im.type(zp).dtype;
  }
  const int64_t output_dtype = im.attr_int("output_dtype", 0);
  std::optional<DType> from_attr;
  if (output_dtype != 0) {
    from_attr = dtype_from_onnx(int32_t(output_dtype));
    if (!from_attr) {
      return im.unsupported(std::string("quantization to ") + onnx_type_name(int32_t(output_dtype)) +
                            " is not supported (Kiln quantizes to int8, uint8, int16, uint16 and the float8 types)");
    }
  }
  if (from_zero_point && from_attr && *from_zero_point != *from_attr) {
    return im.error("output_dtype disagrees with the zero point's type");
  }
  const DType dtype = from_zero_point.value_or(from_attr.value_or(DType::kU8));
  if (!is_quantized_type(dtype) && !ir::is_float8(dtype)) {
    return im.unsupported("quantization to " + std::string(ir::dtype_name(dtype)) +
                          " is not supported (Kiln quantizes to int8, uint8, int16, uint16 and the float8 types)");
  }
  return dtype;
}

// opset 23's `precision`: the type x / y_scale is computed in. Kiln computes it in f32, so
// only f32 (or the default) is exact.
Status check_precision(Importer& im) {
  const int64_t precision = im.attr_int("precision", 0);
  if (precision != 0 && precision != onnx::TensorProto::FLOAT) {
    return im.unsupported(std::string("precision=") + onnx_type_name(int32_t(precision)) +
                          " is not supported (Kiln divides by the scale in float32)");
  }
  return Status::ok();
}

// QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point), computed in f32
// (the quotient of an f16 or bf16 input is not rounded to its type before rounding to an
// integer, as ONNX Runtime also does). To an 8-bit float: y = x / y_scale converted with the
// `saturate` attribute (onnx_cast).
Status quantize_linear(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  if (!ir::is_float(im.type(x).dtype)) {
    return im.unsupported("quantizing a " + std::string(ir::dtype_name(im.type(x).dtype)) +
                          " input is not supported (float inputs only)");
  }
  KILN_RETURN_IF_ERROR(check_precision(im));
  KILN_ASSIGN_OR_RETURN(DType dtype, quantized_output_type(im));
  const Shape xs = im.type(x).shape;
  const int64_t axis = im.attr_int("axis", 1);
  const int64_t block_size = im.attr_int("block_size", 0);
  KILN_ASSIGN_OR_RETURN(NodeId scale, f32_parameter(im, 1, xs, axis, block_size, "y_scale"));
  KILN_ASSIGN_OR_RETURN(NodeId value, im.cast(x, DType::kF32));
  if (ir::is_float8(dtype)) {
    KILN_RETURN_IF_ERROR(check_float8_zero_point(im, 2));
    KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kDiv, {value, scale}));
    KILN_ASSIGN_OR_RETURN(NodeId y, onnx_cast(im, value, dtype, im.attr_int("saturate", 1) != 0));
    return im.set_output(0, y);
  }
  KILN_ASSIGN_OR_RETURN(NodeId zero_point, f32_parameter(im, 2, xs, axis, block_size, "y_zero_point"));
  KILN_ASSIGN_OR_RETURN(NodeId y, quantize(im, value, scale, zero_point, dtype));
  return im.set_output(0, y);
}

// DequantizeLinear: y = (x - x_zero_point) * x_scale in f32, as the scale's type (or
// output_dtype). int32 and 8-bit float inputs take no zero point but a zero one.
Status dequantize_linear(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId scale_input, im.input(1));
  const DType x_dtype = im.type(x).dtype;
  if (!is_quantized_type(x_dtype) && x_dtype != DType::kI32 && !ir::is_float8(x_dtype)) {
    return im.unsupported("dequantizing " + std::string(ir::dtype_name(x_dtype)) +
                          " is not supported (int8, uint8, int16, uint16, int32 and the float8 types only)");
  }
  DType out_dtype = im.type(scale_input).dtype;
  if (!ir::is_float(out_dtype)) return im.error("x_scale must be a float tensor");
  if (const int64_t output_dtype = im.attr_int("output_dtype", 0); output_dtype != 0) {
    std::optional<DType> d = dtype_from_onnx(int32_t(output_dtype));
    if (!d || !ir::is_float(*d) || ir::is_float8(*d)) {
      return im.unsupported(std::string("output_dtype=") + onnx_type_name(int32_t(output_dtype)) +
                            " is not supported (float32, float16 and bfloat16 only)");
    }
    out_dtype = *d;
  }
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(NodeId zp, im.input(2));
    if (im.type(zp).dtype != x_dtype) return im.error("x_zero_point must have x's type");
  }
  const Shape xs = im.type(x).shape;
  const int64_t axis = im.attr_int("axis", 1);
  const int64_t block_size = im.attr_int("block_size", 0);
  KILN_ASSIGN_OR_RETURN(NodeId scale, f32_parameter(im, 1, xs, axis, block_size, "x_scale"));
  NodeId zero_point = ir::kNoNode;
  if (ir::is_float8(x_dtype)) {
    KILN_RETURN_IF_ERROR(check_float8_zero_point(im, 2));
  } else {
    KILN_ASSIGN_OR_RETURN(zero_point, f32_parameter(im, 2, xs, axis, block_size, "x_zero_point"));
  }
  KILN_ASSIGN_OR_RETURN(NodeId value, im.cast(x, DType::kF32));
  if (zero_point != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kSub, {value, zero_point}));
  }
  KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kMul, {value, scale}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.cast(value, out_dtype));
  return im.set_output(0, y);
}

// DynamicQuantizeLinear: uint8 quantization with the scale and zero point of x's range
// extended to hold 0 (scale = (max - min) / 255, or 1/255 when the range is empty;
// zero point = round(saturate(-min / scale))), as the ONNX reference computes them.
Status dynamic_quantize_linear(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  if (im.type(x).dtype != DType::kF32) return im.error("DynamicQuantizeLinear takes a float32 input");
  ir::ReduceAttrs everything;
  for (int64_t i = 0; i < im.type(x).rank(); ++i) everything.axes.push_back(i);
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId max, im.add(OpKind::kReduceMax, {x}, everything));
  KILN_ASSIGN_OR_RETURN(max, im.apply(OpKind::kMaximum, {max, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId min, im.add(OpKind::kReduceMin, {x}, everything));
  KILN_ASSIGN_OR_RETURN(min, im.apply(OpKind::kMinimum, {min, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId range, im.apply(OpKind::kSub, {max, min}));
  KILN_ASSIGN_OR_RETURN(NodeId empty, im.apply(OpKind::kEqual, {max, min}));
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1.0, DType::kF32));
  KILN_ASSIGN_OR_RETURN(range, im.apply(OpKind::kWhere, {empty, one, range}));
  KILN_ASSIGN_OR_RETURN(NodeId levels, im.scalar(255.0, DType::kF32));
  KILN_ASSIGN_OR_RETURN(NodeId scale, im.apply(OpKind::kDiv, {range, levels}));
  KILN_ASSIGN_OR_RETURN(NodeId zero_point, im.apply(OpKind::kDiv, {min, scale}));
  KILN_ASSIGN_OR_RETURN(zero_point, im.apply(OpKind::kNeg, {zero_point}));
  KILN_ASSIGN_OR_RETURN(zero_point, im.add(OpKind::kClamp, {zero_point}, ir::ClampAttrs{0.0, 255.0}));
  KILN_ASSIGN_OR_RETURN(zero_point, im.apply(OpKind::kRound, {zero_point}));
  KILN_ASSIGN_OR_RETURN(NodeId y, quantize(im, x, scale, zero_point, DType::kU8));
  KILN_ASSIGN_OR_RETURN(NodeId zero_point_u8, im.cast(zero_point, DType::kU8));
  KILN_RETURN_IF_ERROR(im.set_output(0, y));
  KILN_RETURN_IF_ERROR(im.set_output(1, scale));
  return im.set_output(2, zero_point_u8);
}

// An int8/uint8 operand minus its zero point, as i32. The zero point is a scalar, or (with
// `per_entry_shape`) a 1-D tensor reshaped to it: per row of MatMulInteger's A ([M, 1]), per
// column of B ([N] as is), per output channel of a convolution's weight ([O, 1, 1, ...]).
Result<NodeId> shifted_i32(Importer& im, NodeId operand, int zero_point_input, std::string_view what,
                           std::optional<Shape> per_entry_shape) {
  if (!is_8bit_quantized_type(im.type(operand).dtype)) {
    return im.unsupported(std::string(what) + " of type " + std::string(ir::dtype_name(im.type(operand).dtype)) +
                          " is not supported (int8 and uint8 only)");
  }
  KILN_ASSIGN_OR_RETURN(NodeId value, im.cast(operand, DType::kI32));
  if (!im.has_input(zero_point_input)) return value;
  KILN_ASSIGN_OR_RETURN(NodeId zp, im.input(zero_point_input));
  if (im.type(zp).dtype != im.type(operand).dtype) {
    return im.error(std::string(what) + "'s zero point must have its type");
  }
  const Shape zs = im.type(zp).shape;
  if (ir::static_num_elements(zs) == 1) {
    KILN_ASSIGN_OR_RETURN(zp, im.reshape(zp, {}));
  } else if (zs.size() == 1 && per_entry_shape) {
    KILN_ASSIGN_OR_RETURN(zp, im.reshape(zp, *per_entry_shape));
  } else {
    return im.error(std::string(what) + "'s zero point has an unsupported shape " + ir::shape_to_string(zs));
  }
  KILN_ASSIGN_OR_RETURN(zp, im.cast(zp, DType::kI32));
  return im.apply(OpKind::kSub, {value, zp});
}

// (A - a_zero_point) @ (B - b_zero_point) in int32; input indices of A, B and their zero points.
Result<NodeId> integer_matmul(Importer& im, int a_input, int a_zp_input, int b_input, int b_zp_input) {
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(a_input));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(b_input));
  if (im.type(a).rank() < 1 || im.type(b).rank() < 1) return im.error("the operands must have rank 1 or more");
  // Per-row zero points of A apply along its second to last axis.
  std::optional<Shape> a_rows;
  if (im.type(a).rank() >= 2) a_rows = Shape{im.type(a).shape[size_t(im.type(a).rank() - 2)], ir::Dim::of(1)};
  KILN_ASSIGN_OR_RETURN(NodeId a32, shifted_i32(im, a, a_zp_input, "A", a_rows));
  KILN_ASSIGN_OR_RETURN(NodeId b32, shifted_i32(im, b, b_zp_input, "B", Shape{im.type(b).shape.back()}));
  return im.apply(OpKind::kMatMul, {a32, b32});
}

// The weight's per-output-channel shape [O, 1, 1, ...] for its zero point.
Shape per_output_channel(Importer& im, NodeId w) {
  Shape s(size_t(im.type(w).rank()), ir::Dim::of(1));
  s[0] = im.type(w).shape[0];
  return s;
}

// An f32 scale of a quantized product: a scalar, or 1-D per `entry_shape` (rows of A, columns
// of B, output channels of a convolution).
Result<NodeId> product_scale(Importer& im, int input, std::string_view what, std::optional<Shape> entry_shape) {
  KILN_ASSIGN_OR_RETURN(NodeId scale, im.input(input));
  if (!ir::is_float(im.type(scale).dtype)) return im.error(std::string(what) + " must be a float tensor");
  const Shape ss = im.type(scale).shape;
  if (ir::static_num_elements(ss) == 1) {
    KILN_ASSIGN_OR_RETURN(scale, im.reshape(scale, {}));
  } else if (ss.size() == 1 && entry_shape) {
    KILN_ASSIGN_OR_RETURN(scale, im.reshape(scale, *entry_shape));
  } else {
    return im.error(std::string(what) + " has an unsupported shape " + ir::shape_to_string(ss));
  }
  return im.cast(scale, DType::kF32);
}

// The requantization shared by QLinearMatMul and QLinearConv: the i32 product times
// input_scale * weight_scale / y_scale, plus y_zero_point, rounded and saturated to y's type.
Result<NodeId> requantize(Importer& im, NodeId product, NodeId scale_a, NodeId scale_b, int y_scale_input,
                          int y_zero_point_input, DType y_dtype) {
  KILN_ASSIGN_OR_RETURN(NodeId y_scale, product_scale(im, y_scale_input, "y_scale", std::nullopt));
  KILN_ASSIGN_OR_RETURN(NodeId multiplier, im.apply(OpKind::kMul, {scale_a, scale_b}));
  KILN_ASSIGN_OR_RETURN(multiplier, im.apply(OpKind::kDiv, {multiplier, y_scale}));
  KILN_ASSIGN_OR_RETURN(NodeId value, im.cast(product, DType::kF32));
  KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kMul, {value, multiplier}));
  if (im.has_input(y_zero_point_input)) {
    KILN_ASSIGN_OR_RETURN(NodeId zp, im.input(y_zero_point_input));
    if (im.type(zp).dtype != y_dtype) return im.error("y_zero_point's type must be the output's");
    if (ir::static_num_elements(im.type(zp).shape) != 1) {
      return im.error("y_zero_point must be a scalar");
    }
    KILN_ASSIGN_OR_RETURN(zp, im.reshape(zp, {}));
    KILN_ASSIGN_OR_RETURN(zp, im.cast(zp, DType::kF32));
    KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kAdd, {value, zp}));
  }
  KILN_ASSIGN_OR_RETURN(value, im.apply(OpKind::kRound, {value}));
  return saturate(im, value, y_dtype);
}

// The output type of QLinearMatMul / QLinearConv: y_zero_point's, else the first operand's.
Result<DType> qlinear_output_type(Importer& im, int y_zero_point_input) {
  int source = 0;
  if (im.has_input(y_zero_point_input)) source = y_zero_point_input;
  KILN_ASSIGN_OR_RETURN(NodeId v, im.input(source));
  const DType dtype = im.type(v).dtype;
  if (!is_8bit_quantized_type(dtype)) {
    return im.unsupported("a quantized output of type " + std::string(ir::dtype_name(dtype)) +
                          " is not supported (int8 and uint8 only)");
  }
  return dtype;
}

Status matmul_integer(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId y, integer_matmul(im, 0, 2, 1, 3));
  return im.set_output(0, y);
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp).
Status qlinear_matmul(Importer& im) {
  KILN_ASSIGN_OR_RETURN(DType y_dtype, qlinear_output_type(im, 7));
  KILN_ASSIGN_OR_RETURN(NodeId product, integer_matmul(im, 0, 2, 3, 5));
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(3));
  std::optional<Shape> a_rows;
  if (im.type(a).rank() >= 2) a_rows = Shape{im.type(a).shape[size_t(im.type(a).rank() - 2)], ir::Dim::of(1)};
  KILN_ASSIGN_OR_RETURN(NodeId a_scale, product_scale(im, 1, "a_scale", a_rows));
  KILN_ASSIGN_OR_RETURN(NodeId b_scale, product_scale(im, 4, "b_scale", Shape{im.type(b).shape.back()}));
  KILN_ASSIGN_OR_RETURN(NodeId y, requantize(im, product, a_scale, b_scale, 6, 7, y_dtype));
  return im.set_output(0, y);
}

// Kiln's convolutions compute in floating point, and an int32 accumulation is exact in float32
// while every partial sum stays below 2^24 in magnitude. This is the bound of the quantized
// convolution of the shifted operands (each |x - x_zero_point| <= 255) plus its bias: from the
// weights' and bias's values when they are constants, from the worst case of 8-bit weights
// otherwise. nullopt when a bias computed at run time leaves it unbounded.
std::optional<double> accumulation_bound(Importer& im, NodeId w_shifted, NodeId bias) {
  constexpr double kMaxShifted = 255.0;
  const Shape ws = im.type(w_shifted).shape;
  const int64_t per_output = ir::static_num_elements(ws).value_or(0) / std::max<int64_t>(1, ws[0].size());
  double weight_sum = double(per_output) * kMaxShifted;
  if (const ir::Tensor* w = im.const_data(w_shifted)) {
    weight_sum = 0;
    for (int64_t o = 0; o < ws[0].size(); ++o) {
      double sum = 0;
      for (int64_t i = 0; i < per_output; ++i) sum += std::abs(w->element_as_double(o * per_output + i));
      weight_sum = std::max(weight_sum, sum);
    }
  }
  double bias_max = 0;
  if (bias != ir::kNoNode) {
    const ir::Tensor* b = im.const_data(bias);
    if (!b) return std::nullopt;
    for (int64_t i = 0; i < b->num_elements(); ++i) bias_max = std::max(bias_max, std::abs(b->element_as_double(i)));
  }
  return kMaxShifted * weight_sum + bias_max;
}

// The convolution of the zero-point-shifted int8/uint8 operands (plus an int32 bias), in f32,
// refused when its int32 accumulation might not be exact there (see accumulation_bound). The
// padding adds zeros after the shift, as ONNX's reference does.
Result<NodeId> quantized_convolution(Importer& im, int x_input, int x_zp_input, int w_input, int w_zp_input,
                                     NodeId bias) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(x_input));
  KILN_ASSIGN_OR_RETURN(NodeId w, im.input(w_input));
  if (im.type(w).rank() < 3 || !ir::is_static(im.type(w).shape)) return im.error("the weight must be static with rank 3 or more");
  KILN_ASSIGN_OR_RETURN(NodeId x_shifted, shifted_i32(im, x, x_zp_input, "x", std::nullopt));
  KILN_ASSIGN_OR_RETURN(NodeId w_shifted, shifted_i32(im, w, w_zp_input, "w", per_output_channel(im, w)));
  const std::optional<double> bound = accumulation_bound(im, w_shifted, bias);
  constexpr double kExactF32 = 16777216.0;  // 2^24
  if (!bound) return im.unsupported("a quantized convolution with a bias computed at run time is not supported (Kiln accumulates in float32 and cannot bound it)");
  if (*bound >= kExactF32) {
    return im.unsupported("the int32 accumulation of this quantized convolution may reach " +
                          std::to_string(int64_t(*bound)) +
                          ", beyond float32's exact integers (2^24); Kiln has no integer convolution");
  }
  KILN_ASSIGN_OR_RETURN(x_shifted, im.cast(x_shifted, DType::kF32));
  KILN_ASSIGN_OR_RETURN(w_shifted, im.cast(w_shifted, DType::kF32));
  if (bias != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(bias, im.cast(bias, DType::kF32));
  }
  return convolution(im, x_shifted, w_shifted, bias);
}

// ConvInteger(x, w, x_zero_point, w_zero_point) -> int32.
Status conv_integer(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId product, quantized_convolution(im, 0, 2, 1, 3, ir::kNoNode));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.cast(product, DType::kI32));
  return im.set_output(0, y);
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): the convolution plus the
// int32 bias, requantized with a per-tensor or per-output-channel weight scale.
Status qlinear_conv(Importer& im) {
  KILN_ASSIGN_OR_RETURN(DType y_dtype, qlinear_output_type(im, 7));
  NodeId bias = ir::kNoNode;
  if (im.has_input(8)) {
    KILN_ASSIGN_OR_RETURN(bias, im.input(8));
    if (im.type(bias).dtype != DType::kI32) return im.error("the bias B must be int32");
  }
  KILN_ASSIGN_OR_RETURN(NodeId product, quantized_convolution(im, 0, 2, 3, 5, bias));
  KILN_ASSIGN_OR_RETURN(NodeId w, im.input(3));
  KILN_ASSIGN_OR_RETURN(NodeId x_scale, product_scale(im, 1, "x_scale", std::nullopt));
  // A per-channel weight scale applies along the output's channel axis.
  Shape channel(size_t(im.type(product).rank()), ir::Dim::of(1));
  channel[1] = im.type(w).shape[0];
  KILN_ASSIGN_OR_RETURN(NodeId w_scale, product_scale(im, 4, "w_scale", channel));
  KILN_ASSIGN_OR_RETURN(NodeId y, requantize(im, product, x_scale, w_scale, 6, 7, y_dtype));
  return im.set_output(0, y);
}

}  // namespace

void register_quantization_ops(std::map<std::string, Converter>& t) {
  t["QuantizeLinear"] = quantize_linear;
  t["DequantizeLinear"] = dequantize_linear;
  t["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  t["MatMulInteger"] = matmul_integer;
  t["QLinearMatMul"] = qlinear_matmul;
  t["ConvInteger"] = conv_integer;
  t["QLinearConv"] = qlinear_conv;
}

}  // namespace kiln::onnx_import
