// Converters for ONNX elementwise operators: unary math, activations (decomposed into Kiln
// elementwise ops where Kiln has no direct op), binary arithmetic and Mod, comparisons, logic, Where,
// Cast, Clip, Identity.
#include <algorithm>
#include <cmath>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::NodeId;
using ir::OpKind;
using ir::DType;

Converter unary(OpKind op) {
  return [op](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
    KILN_ASSIGN_OR_RETURN(NodeId y, im.add(op, {x}, ir::default_attrs(op)));
    return im.set_output(0, y);
  };
}

// Whether input i is an import-time shape vector holding a symbolic dim (which has no tensor
// form: it must be computed on at import).
Result<bool> is_dynamic_shape_vector(Importer& im, int i) {
  KILN_ASSIGN_OR_RETURN(Value v, im.input_value(i));
  return v.has_dynamic_dims();
}

// Whether input i is a tensor whose values exist only at run time (neither a shape vector nor a
// constant).
Result<bool> is_runtime_tensor(Importer& im, int i) {
  KILN_ASSIGN_OR_RETURN(Value v, im.input_value(i));
  return !v.dims && im.const_data(v.node) == nullptr;
}

// One element of arithmetic or comparison on shape vectors: static sizes compute, products and
// exact quotients of symbolic sizes are sizes too (batch*heads), and the identities S + 0,
// S - S, S == S, S == -1 apply. Sums of symbolic sizes have no name in Kiln's shapes.
Result<ir::Dim> dim_arithmetic(Importer& im, OpKind op, const ir::Dim& a, const ir::Dim& b) {
  using ir::Dim;
  if (a.is_static() && b.is_static()) {
    const int64_t x = a.size(), y = b.size();
    switch (op) {
      case OpKind::kAdd: return Dim::of(int64_t(uint64_t(x) + uint64_t(y)));
      case OpKind::kSub: return Dim::of(int64_t(uint64_t(x) - uint64_t(y)));
      case OpKind::kMul: return Dim::of(int64_t(uint64_t(x) * uint64_t(y)));
      case OpKind::kDiv:
        if (y == 0) return im.error("division by zero in shape arithmetic");
        if (y == -1) return Dim::of(int64_t(0 - uint64_t(x)));
        return Dim::of(x / y);
      case OpKind::kEqual: return Dim::of(x == y);
      default: break;
    }
  }
  const bool same = a == b;
  auto zero = [](const Dim& d) { return d.is_static() && d.size() == 0; };
  switch (op) {
    case OpKind::kAdd:
      if (zero(b)) return a;
      if (zero(a)) return b;
      break;
    case OpKind::kSub:
      if (zero(b)) return a;
      if (same) return Dim::of(0);
      break;
    case OpKind::kMul:
      if (std::optional<Dim> p = Dim::product(a, b)) return *p;  // batch*heads
      break;
    case OpKind::kDiv:
      if (std::optional<Dim> q = Dim::quotient(a, b)) return *q;  // exact only
      break;
    case OpKind::kEqual:
      // A size is never negative (PyTorch's exports compare with -1 before an Expand).
      if (same) return Dim::of(1);
      if ((a.is_static() && a.size() < 0) || (b.is_static() && b.size() < 0)) return Dim::of(0);
      break;
    default: break;
  }
  return im.unsupported(im.current->op_type() + " of the sizes " + a.to_string() + " and " + b.to_string() +
                        ": the result is not a size Kiln can name (symbolic sizes are names or products of names)");
}

// Add/Sub/Mul/Div/Equal on shape vectors with symbolic dims, elementwise with broadcasting of
// one-element operands; Equal yields a bool constant.
Status shape_vector_binary(Importer& im, OpKind op) {
  KILN_ASSIGN_OR_RETURN(Value va, im.input_value(0));
  KILN_ASSIGN_OR_RETURN(Value vb, im.input_value(1));
  KILN_ASSIGN_OR_RETURN(ir::Shape a, im.input_dims(0, "a shape arithmetic operand"));
  KILN_ASSIGN_OR_RETURN(ir::Shape b, im.input_dims(1, "a shape arithmetic operand"));
  auto is_scalar = [&](const Value& v) { return v.dims ? v.dims_scalar : im.type(v.node).rank() == 0; };
  const bool scalar = is_scalar(va) && is_scalar(vb);
  const size_t n = std::max(a.size(), b.size());
  if ((a.size() != n && a.size() != 1) || (b.size() != n && b.size() != 1)) {
    return im.error("shape vectors of lengths " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
                    " do not broadcast");
  }
  ir::Shape out;
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Dim d, dim_arithmetic(im, op, a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]));
    out.push_back(d);
  }
  if (op != OpKind::kEqual) return im.set_output_dims(0, out, scalar);
  KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(ir::DType::kBool, scalar ? std::vector<int64_t>{}
                                                                                  : std::vector<int64_t>{int64_t(n)}));
  for (size_t i = 0; i < n; ++i) t.set_element_from_double(int64_t(i), double(out[i].size()));
  return im.set_output(0, im.add_constant(std::move(t), "equal"));
}

Converter binary_op(OpKind op) {
  return [op](Importer& im) -> Status {
    const bool shape_op = op == OpKind::kAdd || op == OpKind::kSub || op == OpKind::kMul ||
                          op == OpKind::kDiv || op == OpKind::kEqual;
    if (shape_op) {
      KILN_ASSIGN_OR_RETURN(bool a_dynamic, is_dynamic_shape_vector(im, 0));
      KILN_ASSIGN_OR_RETURN(bool b_dynamic, is_dynamic_shape_vector(im, 1));
      // With a tensor computed at run time on the other side (index arithmetic such as
      // b * seq + k), the sizes become data instead (Importer::input computes them).
      KILN_ASSIGN_OR_RETURN(bool a_runtime, is_runtime_tensor(im, 0));
      KILN_ASSIGN_OR_RETURN(bool b_runtime, is_runtime_tensor(im, 1));
      if ((a_dynamic || b_dynamic) && !a_runtime && !b_runtime) return shape_vector_binary(im, op);
    }
    KILN_ASSIGN_OR_RETURN(NodeId a, im.input(0));
    KILN_ASSIGN_OR_RETURN(NodeId b, im.input(1));
    KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(op, {a, b}));
    return im.set_output(0, y);
  };
}

// Max / Min / Sum / Mean: variadic, folded left to right.
Converter variadic(OpKind op, bool mean) {
  return [op, mean](Importer& im) -> Status {
    if (im.num_inputs() < 1) return im.error("needs at least one input");
    KILN_ASSIGN_OR_RETURN(NodeId acc, im.input(0));
    for (int i = 1; i < im.num_inputs(); ++i) {
      KILN_ASSIGN_OR_RETURN(NodeId next, im.input(i));
      KILN_ASSIGN_OR_RETURN(acc, im.apply(op, {acc, next}));
    }
    if (mean && im.num_inputs() > 1) {
      KILN_ASSIGN_OR_RETURN(NodeId n, im.scalar_like(acc, im.num_inputs()));
      KILN_ASSIGN_OR_RETURN(acc, im.apply(OpKind::kDiv, {acc, n}));
    }
    return im.set_output(0, acc);
  };
}

// where(x < 0, negative_branch, positive_branch); `strict` false uses x <= 0.
Result<NodeId> select_negative(Importer& im, NodeId x, NodeId negative, NodeId positive, bool strict = true) {
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId cond, im.apply(strict ? OpKind::kLess : OpKind::kLessEqual, {x, zero}));
  return im.add(OpKind::kWhere, {cond, negative, positive}, ir::NoAttrs{});
}

// alpha * (exp(x) - 1)
Result<NodeId> expm1_scaled(Importer& im, NodeId x, double alpha) {
  KILN_ASSIGN_OR_RETURN(NodeId e, im.add(OpKind::kExp, {x}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar_like(x, 1.0));
  KILN_ASSIGN_OR_RETURN(NodeId em1, im.apply(OpKind::kSub, {e, one}));
  KILN_ASSIGN_OR_RETURN(NodeId a, im.scalar_like(x, alpha));
  return im.apply(OpKind::kMul, {em1, a});
}

Status leaky_relu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId alpha, im.scalar_like(x, im.attr_float("alpha", 0.01)));
  KILN_ASSIGN_OR_RETURN(NodeId scaled, im.apply(OpKind::kMul, {x, alpha}));
  KILN_ASSIGN_OR_RETURN(NodeId y, select_negative(im, x, scaled, x));
  return im.set_output(0, y);
}

Status prelu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId slope, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId scaled, im.apply(OpKind::kMul, {x, slope}));
  KILN_ASSIGN_OR_RETURN(NodeId y, select_negative(im, x, scaled, x));
  return im.set_output(0, y);
}

Status elu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId neg, expm1_scaled(im, x, im.attr_float("alpha", 1.0)));
  KILN_ASSIGN_OR_RETURN(NodeId y, select_negative(im, x, neg, x));
  return im.set_output(0, y);
}

Status selu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const double alpha = im.attr_float("alpha", 1.67326319217681884765625);
  const double gamma = im.attr_float("gamma", 1.05070102214813232421875);
  KILN_ASSIGN_OR_RETURN(NodeId neg, expm1_scaled(im, x, alpha));
  KILN_ASSIGN_OR_RETURN(NodeId sel, select_negative(im, x, neg, x, /*strict=*/false));
  KILN_ASSIGN_OR_RETURN(NodeId g, im.scalar_like(x, gamma));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMul, {sel, g}));
  return im.set_output(0, y);
}

Status celu(Importer& im) {
  // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const double alpha = im.attr_float("alpha", 1.0);
  KILN_ASSIGN_OR_RETURN(NodeId a, im.scalar_like(x, alpha));
  KILN_ASSIGN_OR_RETURN(NodeId xa, im.apply(OpKind::kDiv, {x, a}));
  KILN_ASSIGN_OR_RETURN(NodeId neg, expm1_scaled(im, xa, alpha));
  KILN_ASSIGN_OR_RETURN(NodeId y, select_negative(im, x, neg, x));
  return im.set_output(0, y);
}

// clamp(alpha * x + beta, 0, 1), optionally times x (HardSwish).
Result<NodeId> hard_sigmoid_of(Importer& im, NodeId x, double alpha, double beta) {
  KILN_ASSIGN_OR_RETURN(NodeId a, im.scalar_like(x, alpha));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.scalar_like(x, beta));
  KILN_ASSIGN_OR_RETURN(NodeId ax, im.apply(OpKind::kMul, {x, a}));
  KILN_ASSIGN_OR_RETURN(NodeId axb, im.apply(OpKind::kAdd, {ax, b}));
  return im.add(OpKind::kClamp, {axb}, ir::ClampAttrs{0.0, 1.0});
}

Status hard_sigmoid(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId y, hard_sigmoid_of(im, x, im.attr_float("alpha", 0.2), im.attr_float("beta", 0.5)));
  return im.set_output(0, y);
}

Status hard_swish(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId s, hard_sigmoid_of(im, x, 1.0 / 6.0, 0.5));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMul, {x, s}));
  return im.set_output(0, y);
}

// log(exp(x) + 1)
Result<NodeId> softplus_of(Importer& im, NodeId x) {
  KILN_ASSIGN_OR_RETURN(NodeId e, im.add(OpKind::kExp, {x}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar_like(x, 1.0));
  KILN_ASSIGN_OR_RETURN(NodeId e1, im.apply(OpKind::kAdd, {e, one}));
  return im.add(OpKind::kLog, {e1}, ir::NoAttrs{});
}

Status softplus(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId y, softplus_of(im, x));
  return im.set_output(0, y);
}

Status mish(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId sp, softplus_of(im, x));
  KILN_ASSIGN_OR_RETURN(NodeId t, im.add(OpKind::kTanh, {sp}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMul, {x, t}));
  return im.set_output(0, y);
}

Status softsign(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId ax, im.add(OpKind::kAbs, {x}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar_like(x, 1.0));
  KILN_ASSIGN_OR_RETURN(NodeId d, im.apply(OpKind::kAdd, {ax, one}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kDiv, {x, d}));
  return im.set_output(0, y);
}

Status thresholded_relu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId alpha, im.scalar_like(x, im.attr_float("alpha", 1.0)));
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId cond, im.apply(OpKind::kGreater, {x, alpha}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kWhere, {cond, x, zero}, ir::NoAttrs{}));
  return im.set_output(0, y);
}

// Swish (opset 24): x * sigmoid(alpha * x); Kiln's silu when alpha is 1.
Status swish(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const double alpha = im.attr_float("alpha", 1.0);
  NodeId y;
  if (alpha == 1.0) {
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kSilu, {x}, ir::NoAttrs{}));
  } else {
    KILN_ASSIGN_OR_RETURN(NodeId a, im.scalar_like(x, alpha));
    KILN_ASSIGN_OR_RETURN(NodeId ax, im.apply(OpKind::kMul, {a, x}));
    KILN_ASSIGN_OR_RETURN(NodeId s, im.add(OpKind::kSigmoid, {ax}, ir::NoAttrs{}));
    KILN_ASSIGN_OR_RETURN(y, im.apply(OpKind::kMul, {x, s}));
  }
  return im.set_output(0, y);
}

Status gelu(Importer& im) {
  const std::string approximate = im.attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    return im.unsupported("approximate='" + approximate + "' is not supported");
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kGelu, {x}, ir::GeluAttrs{approximate == "tanh"}));
  return im.set_output(0, y);
}

Status pow_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(1));
  // ONNX lets the exponent's type differ from the base's; the result has the base's type.
  if (im.type(b).dtype != im.type(a).dtype) {
    KILN_ASSIGN_OR_RETURN(b, im.add(OpKind::kCast, {b}, ir::CastAttrs{im.type(a).dtype}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kPow, {a, b}));
  return im.set_output(0, y);
}

// Mod: fmod=1 is C's fmod (the dividend's sign); the default is the floored remainder (the
// divisor's sign, as NumPy's mod): fmod, plus the divisor where the two signs differ and the
// remainder is not 0 (for floats too, so -5 mod inf is inf, as in NumPy).
Status mod_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(1));
  const bool c_fmod = im.attr_int("fmod", 0) != 0;
  const ir::DType dtype = im.type(a).dtype;
  KILN_ASSIGN_OR_RETURN(NodeId r, im.apply(OpKind::kFmod, {a, b}));
  if (c_fmod || !(ir::is_signed_integer(dtype) || ir::is_float(dtype))) return im.set_output(0, r);
  KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(r, 0.0));
  KILN_ASSIGN_OR_RETURN(NodeId nonzero, im.apply(OpKind::kNotEqual, {r, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId r_negative, im.apply(OpKind::kLess, {r, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId b_negative, im.apply(OpKind::kLess, {b, zero}));
  KILN_ASSIGN_OR_RETURN(NodeId signs_differ, im.apply(OpKind::kXor, {r_negative, b_negative}));
  KILN_ASSIGN_OR_RETURN(NodeId fix, im.apply(OpKind::kAnd, {nonzero, signs_differ}));
  KILN_ASSIGN_OR_RETURN(NodeId shifted, im.apply(OpKind::kAdd, {r, b}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kWhere, {fix, shifted, r}, ir::NoAttrs{}));
  return im.set_output(0, y);
}

// BitShift: the IR's shifts, which give ONNX's results for shift amounts outside the width too.
Status bit_shift(Importer& im) {
  const std::string direction = im.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    return im.error("direction must be \"LEFT\" or \"RIGHT\", got \"" + direction + "\"");
  }
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(direction == "LEFT" ? OpKind::kShiftLeft : OpKind::kShiftRight, {a, b}));
  return im.set_output(0, y);
}

Status where_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(bool a_dynamic, is_dynamic_shape_vector(im, 1));
  KILN_ASSIGN_OR_RETURN(bool b_dynamic, is_dynamic_shape_vector(im, 2));
  KILN_ASSIGN_OR_RETURN(NodeId cond, im.input(0));
  const ir::Tensor* c = im.const_data(cond);
  if ((a_dynamic || b_dynamic) && c != nullptr && c->dtype() == ir::DType::kBool && c->rank() <= 1) {
    // Choosing between shape vectors (PyTorch's Expand exports: where(shape == -1, 1, shape));
    // with a condition known only at run time the sizes become data (Importer::input).
    KILN_ASSIGN_OR_RETURN(ir::Shape a, im.input_dims(1, "a shape"));
    KILN_ASSIGN_OR_RETURN(ir::Shape b, im.input_dims(2, "a shape"));
    const size_t n = std::max({size_t(c->num_elements()), a.size(), b.size()});
    for (size_t len : {size_t(c->num_elements()), a.size(), b.size()}) {
      if (len != n && len != 1) return im.error("the condition and shape vectors do not broadcast");
    }
    ir::Shape out;
    for (size_t i = 0; i < n; ++i) {
      const bool pick_a = c->element_as_int(c->num_elements() == 1 ? 0 : int64_t(i)) != 0;
      out.push_back(pick_a ? a[a.size() == 1 ? 0 : i] : b[b.size() == 1 ? 0 : i]);
    }
    KILN_ASSIGN_OR_RETURN(Value va, im.input_value(1));
    return im.set_output_dims(0, out, c->rank() == 0 && va.dims_scalar);
  }
  KILN_ASSIGN_OR_RETURN(NodeId a, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId b, im.input(2));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kWhere, {cond, a, b}, ir::NoAttrs{}));
  return im.set_output(0, y);
}

Status cast_op(Importer& im) {
  const int64_t to = im.attr_int("to", 0);
  const std::optional<ir::DType> dtype = dtype_from_onnx(int32_t(to));
  if (!dtype) return im.unsupported(std::string("cast to ") + onnx_type_name(int32_t(to)) + " is not supported");
  KILN_ASSIGN_OR_RETURN(Value v, im.input_value(0));
  if (v.dims && *dtype == ir::DType::kI64) {
    return im.set_output_dims(0, *v.dims, v.dims_scalar);  // a shape vector stays one
  }
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId y, onnx_cast(im, x, *dtype, im.attr_int("saturate", 1) != 0));
  return im.set_output(0, y);
}

}  // namespace

Result<NodeId> onnx_cast(Importer& im, NodeId x, DType to, bool saturate) {
  const DType from = im.type(x).dtype;
  if (from == to) return x;
  if (const std::optional<Float8Format> f = ir::float8_format(to); f && saturate && from != DType::kBool) {
    // The clamp must hold the bound exactly: every 8-bit float's maximum (448, 240, 57344) is an
    // f32, f16 and bf16 value and a whole number, but not a value of every other 8-bit float.
    if (ir::is_float8(from)) {
      KILN_ASSIGN_OR_RETURN(x, im.cast(x, DType::kF32));
    }
    const double max = float8_to_f32(uint8_t(float8_max_code(*f)), *f);
    KILN_ASSIGN_OR_RETURN(x, im.add(OpKind::kClamp, {x}, ir::ClampAttrs{-max, max}));
  }
  return im.cast(x, to);
}

namespace {

Status identity(Importer& im) {
  KILN_RETURN_IF_ERROR(im.only_first_outputs(1));
  KILN_ASSIGN_OR_RETURN(Value v, im.input_value(0));
  if (v.dims) return im.set_output_dims(0, *v.dims, v.dims_scalar);
  return im.set_output(0, v.node);
}

Status dropout(Importer& im) {
  // Inference: the identity, and a mask of ones (bool from opset 10, the input's type before). A
  // training_mode input that is not a constant false cannot be expressed, unless the ratio is a
  // constant 0 (torchvision 0.14's Swin exports training_mode=true with ratio 0): no dropout.
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(NodeId mode, im.input(2));
    const ir::Tensor* t = im.const_data(mode);
    bool zero_ratio = false;
    if (im.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(NodeId ratio, im.input(1));
      const ir::Tensor* r = im.const_data(ratio);
      zero_ratio = r != nullptr && r->num_elements() == 1 && r->element_as_double(0) == 0.0;
    }
    if (!zero_ratio && (t == nullptr || t->num_elements() != 1 || t->element_as_int(0) != 0)) {
      return im.unsupported("training_mode must be a constant false, or the ratio a constant 0 (training-mode dropout is not supported)");
    }
  }
  if (im.current->output_size() < 2 || im.current->output(1).empty()) return identity(im);
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1.0, im.opset >= 10 ? ir::DType::kBool : im.type(x).dtype));
  KILN_ASSIGN_OR_RETURN(NodeId mask, im.add(OpKind::kBroadcastTo, {one}, ir::BroadcastToAttrs{im.type(x).shape}));
  KILN_RETURN_IF_ERROR(im.set_output(1, mask));
  return im.set_output(0, x);
}

Status clip(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  ir::ClampAttrs attrs;
  NodeId y = x;
  if (im.opset < 11) {
    // Opsets 6-10: the bounds are attributes.
    if (im.attr("min")) attrs.min = im.attr_float("min", 0.0);
    if (im.attr("max")) attrs.max = im.attr_float("max", 0.0);
  }
  for (int i = 1; i <= 2 && im.opset >= 11; ++i) {
    if (!im.has_input(i)) continue;
    KILN_ASSIGN_OR_RETURN(NodeId bound, im.input(i));
    const ir::Tensor* t = im.const_data(bound);
    if (t != nullptr && t->num_elements() == 1) {
      (i == 1 ? attrs.min : attrs.max) = t->element_as_double(0);
      continue;
    }
    // A bound computed at run time: maximum / minimum with it.
    KILN_ASSIGN_OR_RETURN(y, im.apply(i == 1 ? OpKind::kMaximum : OpKind::kMinimum, {y, bound}));
  }
  if (attrs.min || attrs.max) {
    if (attrs.min && attrs.max && *attrs.min > *attrs.max) {
      // ONNX: every element becomes max when min > max.
      attrs.min = attrs.max;
    }
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kClamp, {y}, attrs));
  }
  return im.set_output(0, y);
}

}  // namespace

void register_elementwise_ops(std::map<std::string, Converter>& t) {
  const std::pair<const char*, OpKind> unaries[] = {
      {"Abs", OpKind::kAbs}, {"Neg", OpKind::kNeg}, {"Exp", OpKind::kExp}, {"Log", OpKind::kLog},
      {"Sqrt", OpKind::kSqrt}, {"Reciprocal", OpKind::kReciprocal}, {"Tanh", OpKind::kTanh},
      {"Sigmoid", OpKind::kSigmoid}, {"Relu", OpKind::kRelu}, {"Erf", OpKind::kErf}, {"Sin", OpKind::kSin},
      {"Cos", OpKind::kCos}, {"Atan", OpKind::kAtan}, {"Floor", OpKind::kFloor}, {"Ceil", OpKind::kCeil}, {"Round", OpKind::kRound},
      {"Sign", OpKind::kSign}, {"Not", OpKind::kNot}, {"BitwiseNot", OpKind::kBitwiseNot}};
  for (const auto& [name, op] : unaries) t[name] = unary(op);
  const std::pair<const char*, OpKind> binaries[] = {
      {"Add", OpKind::kAdd}, {"Sub", OpKind::kSub}, {"Mul", OpKind::kMul}, {"Div", OpKind::kDiv},
      {"Equal", OpKind::kEqual}, {"Less", OpKind::kLess}, {"LessOrEqual", OpKind::kLessEqual},
      {"Greater", OpKind::kGreater}, {"GreaterOrEqual", OpKind::kGreaterEqual}, {"And", OpKind::kAnd},
      {"Or", OpKind::kOr}, {"Xor", OpKind::kXor}, {"BitwiseAnd", OpKind::kBitwiseAnd},
      {"BitwiseOr", OpKind::kBitwiseOr}, {"BitwiseXor", OpKind::kBitwiseXor}};
  for (const auto& [name, op] : binaries) t[name] = binary_op(op);
  t["Max"] = variadic(OpKind::kMaximum, false);
  t["Min"] = variadic(OpKind::kMinimum, false);
  t["Sum"] = variadic(OpKind::kAdd, false);
  t["Mean"] = variadic(OpKind::kAdd, true);
  t["Pow"] = pow_op;
  t["Mod"] = mod_op;
  t["BitShift"] = bit_shift;
  t["LeakyRelu"] = leaky_relu;
  t["PRelu"] = prelu;
  t["Elu"] = elu;
  t["Selu"] = selu;
  t["Celu"] = celu;
  t["HardSigmoid"] = hard_sigmoid;
  t["HardSwish"] = hard_swish;
  t["Softplus"] = softplus;
  t["Softsign"] = softsign;
  t["Mish"] = mish;
  t["ThresholdedRelu"] = thresholded_relu;
  t["Gelu"] = gelu;
  t["Swish"] = swish;
  t["Where"] = where_op;
  t["Cast"] = cast_op;
  t["Identity"] = identity;
  t["Dropout"] = dropout;
  t["Clip"] = clip;
}

}  // namespace kiln::onnx_import
