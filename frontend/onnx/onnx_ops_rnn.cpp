// Converters for the ONNX recurrent operators RNN, GRU and LSTM (opsets 7-22), unrolled over the
// sequence axis at import into matmuls and elementwise ops: Kiln's IR has no loops, so the
// sequence length must be static (and at most kMaxUnrolledSteps).
//
// The input projection X * W^T does not depend on the state, so it is one matmul over every time
// step and direction before the loop; each unrolled step only multiplies the previous hidden
// state by R^T (twice for GRU's default form, whose reset gate scales the state before its
// product). The biases Wb + Rb are added to the projection once, except GRU's Rbh under
// linear_before_reset, which the reset gate scales.
//
// sequence_lens that are not all the sequence length (or are known only at run time) mask each
// step per batch entry: past its length an entry's state is held and its Y rows are 0, as
// onnxruntime computes. A reverse direction then starts at each entry's own last step (the
// masked steps before it hold the initial state). An entry of length 0 has Y_h (and Y_c) 0.
//
// Activations (with activation_alpha / activation_beta consumed in order by the functions that
// take them) and clip (a clamp of every gate's input before its activation; LSTM's h(C) reads
// the unclamped cell state) follow the specification as onnxruntime reads it where the text is
// open to two readings.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

// The unrolled graph grows linearly with the sequence; past this many steps the graph (tens of
// nodes per step and direction) is refused rather than built.
constexpr int64_t kMaxUnrolledSteps = 1024;

enum class Cell { kRnn, kGru, kLstm };

// The activation functions ONNX's recurrent operators name, each built from Kiln ops exactly.
enum class ActivationKind {
  kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu, kSoftsign, kSoftplus
};

struct ActivationInfo {
  const char* name;
  ActivationKind kind;
  bool takes_alpha, takes_beta;
  // The defaults of the ONNX operators of the same name. Affine, ScaledTanh and ThresholdedRelu
  // have none here: their operators' defaults and onnxruntime's (0) differ, so their values must
  // be given.
  std::optional<double> default_alpha, default_beta;
};

const std::vector<ActivationInfo>& activation_table() {
  static const std::vector<ActivationInfo> table = {
      {"Relu", ActivationKind::kRelu, false, false, {}, {}},
      {"Tanh", ActivationKind::kTanh, false, false, {}, {}},
      {"Sigmoid", ActivationKind::kSigmoid, false, false, {}, {}},
      {"Affine", ActivationKind::kAffine, true, true, {}, {}},
      {"LeakyRelu", ActivationKind::kLeakyRelu, true, false, 0.01, {}},
      {"ThresholdedRelu", ActivationKind::kThresholdedRelu, true, false, {}, {}},
      {"ScaledTanh", ActivationKind::kScaledTanh, true, true, {}, {}},
      {"HardSigmoid", ActivationKind::kHardSigmoid, true, true, 0.2, 0.5},
      {"Elu", ActivationKind::kElu, true, false, 1.0, {}},
      {"Softsign", ActivationKind::kSoftsign, false, false, {}, {}},
      {"Softplus", ActivationKind::kSoftplus, false, false, {}, {}},
  };
  return table;
}

struct Activation {
  ActivationKind kind;
  double alpha = 0.0, beta = 0.0;
};

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// The node's activation functions, `per_direction` for each of `directions` (forward first),
// with their parameters. ONNX gives activation_alpha / activation_beta as one list each,
// "consumed in the order of the activation functions": each function that takes a parameter
// takes the next value, or its default when the list has run out (onnxruntime's reading).
Result<std::vector<Activation>> read_activations(const Importer& im, const std::vector<std::string>& defaults,
                                                 int64_t directions) {
  std::vector<std::string> names;
  if (const std::optional<std::vector<std::string>> given = im.attr_strings("activations")) {
    names = *given;
    if (int64_t(names.size()) != int64_t(defaults.size()) * directions) {
      return im.error("activations lists " + std::to_string(names.size()) + " functions; the operator takes " +
                      std::to_string(defaults.size()) + " per direction (" +
                      std::to_string(int64_t(defaults.size()) * directions) + " here)");
    }
  } else {
    for (int64_t d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  const std::vector<double> alphas = im.attr_floats("activation_alpha").value_or(std::vector<double>{});
  const std::vector<double> betas = im.attr_floats("activation_beta").value_or(std::vector<double>{});
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& candidate : activation_table()) {
      if (equal_ignoring_case(name, candidate.name)) info = &candidate;
    }
    if (info == nullptr) {
      return im.unsupported("activation '" + name +
                            "' is not supported (Kiln builds Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
                            "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign and Softplus)");
    }
    Activation a{info->kind};
    auto take = [&](bool takes, const std::vector<double>& values, size_t& next, std::optional<double> fallback,
                    const char* what, double& into) -> Status {
      if (!takes) return Status::ok();
      if (next < values.size()) {
        into = values[next++];
        return Status::ok();
      }
      if (!fallback) {
        return im.unsupported("activation " + std::string(info->name) + " needs its " + what + " in activation_" +
                              what + " (ONNX gives it no default that runtimes agree on)");
      }
      into = *fallback;
      return Status::ok();
    };
    KILN_RETURN_IF_ERROR(take(info->takes_alpha, alphas, next_alpha, info->default_alpha, "alpha", a.alpha));
    KILN_RETURN_IF_ERROR(take(info->takes_beta, betas, next_beta, info->default_beta, "beta", a.beta));
    out.push_back(a);
  }
  // Values left over were meant for functions that take none (a list per function rather than
  // per parameter): which value belongs to which function is then ambiguous.
  if (next_alpha < alphas.size() || next_beta < betas.size()) {
    return im.unsupported("activation_alpha / activation_beta hold " + std::to_string(alphas.size()) + " / " +
                          std::to_string(betas.size()) + " values, but the activations take only " +
                          std::to_string(next_alpha) + " / " + std::to_string(next_beta) +
                          " (which value belongs to which function is ambiguous)");
  }
  return out;
}

// ---- small builders ---------------------------------------------------------------------

// x[begin:end] along `axis`.
Result<NodeId> slice_axis(Importer& im, NodeId x, int64_t axis, int64_t begin, int64_t end) {
  return im.add(OpKind::kSlice, {x}, ir::SliceAttrs{{begin}, {end}, {axis}, {1}});
}

// Entry `index` of x's first axis, without that axis.
Result<NodeId> take_first(Importer& im, NodeId x, int64_t index) {
  KILN_ASSIGN_OR_RETURN(NodeId sliced, slice_axis(im, x, 0, index, index + 1));
  Shape rest = im.type(x).shape;
  rest.erase(rest.begin());
  return im.reshape(sliced, rest);
}

Result<NodeId> binary(Importer& im, OpKind op, NodeId a, NodeId b) { return im.apply(op, {a, b}); }

// parts joined along `axis`, in order (kernel formation splits a concat of many step outputs
// into kernels a device can bind: passes/graph_edit.h).
Result<NodeId> concat(Importer& im, std::vector<NodeId> parts, int64_t axis) {
  if (parts.size() == 1) return parts[0];
  return im.add(OpKind::kConcat, std::move(parts), ir::AxisAttrs{axis});
}

Result<NodeId> times_scalar(Importer& im, NodeId x, double v) {
  KILN_ASSIGN_OR_RETURN(NodeId s, im.scalar_like(x, v));
  return binary(im, OpKind::kMul, x, s);
}

Result<NodeId> plus_scalar(Importer& im, NodeId x, double v) {
  KILN_ASSIGN_OR_RETURN(NodeId s, im.scalar_like(x, v));
  return binary(im, OpKind::kAdd, x, s);
}

// f(x) for one of the activation functions, clamped to [-clip, clip] first when clip is set.
Result<NodeId> activate(Importer& im, const Activation& f, NodeId x, std::optional<double> clip) {
  if (clip) {
    KILN_ASSIGN_OR_RETURN(x, im.add(OpKind::kClamp, {x}, ir::ClampAttrs{-*clip, *clip}));
  }
  switch (f.kind) {
    case ActivationKind::kRelu: return im.apply(OpKind::kRelu, {x});
    case ActivationKind::kTanh: return im.apply(OpKind::kTanh, {x});
    case ActivationKind::kSigmoid: return im.apply(OpKind::kSigmoid, {x});
    case ActivationKind::kAffine: {  // alpha * x + beta
      KILN_ASSIGN_OR_RETURN(NodeId scaled, times_scalar(im, x, f.alpha));
      return plus_scalar(im, scaled, f.beta);
    }
    case ActivationKind::kLeakyRelu: {  // x >= 0 ? x : alpha * x
      KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
      KILN_ASSIGN_OR_RETURN(NodeId negative, binary(im, OpKind::kLess, x, zero));
      KILN_ASSIGN_OR_RETURN(NodeId scaled, times_scalar(im, x, f.alpha));
      return im.apply(OpKind::kWhere, {negative, scaled, x});
    }
    case ActivationKind::kThresholdedRelu: {  // x > alpha ? x : 0, as the ThresholdedRelu operator
      KILN_ASSIGN_OR_RETURN(NodeId alpha, im.scalar_like(x, f.alpha));
      KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
      KILN_ASSIGN_OR_RETURN(NodeId above, binary(im, OpKind::kGreater, x, alpha));
      return im.apply(OpKind::kWhere, {above, x, zero});
    }
    case ActivationKind::kScaledTanh: {  // alpha * tanh(beta * x)
      KILN_ASSIGN_OR_RETURN(NodeId inner, times_scalar(im, x, f.beta));
      KILN_ASSIGN_OR_RETURN(NodeId t, im.apply(OpKind::kTanh, {inner}));
      return times_scalar(im, t, f.alpha);
    }
    case ActivationKind::kHardSigmoid: {  // clamp(alpha * x + beta, 0, 1)
      KILN_ASSIGN_OR_RETURN(NodeId scaled, times_scalar(im, x, f.alpha));
      KILN_ASSIGN_OR_RETURN(NodeId shifted, plus_scalar(im, scaled, f.beta));
      return im.add(OpKind::kClamp, {shifted}, ir::ClampAttrs{0.0, 1.0});
    }
    case ActivationKind::kElu: {  // x >= 0 ? x : alpha * (exp(x) - 1)
      KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
      KILN_ASSIGN_OR_RETURN(NodeId negative, binary(im, OpKind::kLess, x, zero));
      KILN_ASSIGN_OR_RETURN(NodeId e, im.apply(OpKind::kExp, {x}));
      KILN_ASSIGN_OR_RETURN(NodeId em1, plus_scalar(im, e, -1.0));
      KILN_ASSIGN_OR_RETURN(NodeId scaled, times_scalar(im, em1, f.alpha));
      return im.apply(OpKind::kWhere, {negative, scaled, x});
    }
    case ActivationKind::kSoftsign: {  // x / (1 + |x|)
      KILN_ASSIGN_OR_RETURN(NodeId a, im.apply(OpKind::kAbs, {x}));
      KILN_ASSIGN_OR_RETURN(NodeId d, plus_scalar(im, a, 1.0));
      return binary(im, OpKind::kDiv, x, d);
    }
    case ActivationKind::kSoftplus: {  // log(exp(x) + 1), as the Softplus converter
      KILN_ASSIGN_OR_RETURN(NodeId e, im.apply(OpKind::kExp, {x}));
      KILN_ASSIGN_OR_RETURN(NodeId e1, plus_scalar(im, e, 1.0));
      return im.apply(OpKind::kLog, {e1});
    }
  }
  return im.error("unknown activation");
}

// ---- the converter ------------------------------------------------------------------------

struct CellForm {
  const char* op;
  int64_t gates;                          // blocks of hidden_size rows in W and R
  std::vector<std::string> activations;   // the default functions of one direction
  int outputs;                            // Y, Y_h (, Y_c)
};

CellForm form_of(Cell cell) {
  switch (cell) {
    case Cell::kRnn: return {"RNN", 1, {"Tanh"}, 2};
    case Cell::kGru: return {"GRU", 3, {"Sigmoid", "Tanh"}, 2};
    case Cell::kLstm: return {"LSTM", 4, {"Sigmoid", "Tanh", "Tanh"}, 3};
  }
  return {"?", 1, {}, 0};
}

// The per-direction weights the unrolled steps read, sliced out of the stacked inputs once.
struct DirectionWeights {
  NodeId recurrent_t = ir::kNoNode;     // R^T [hidden, gates * hidden]
  NodeId recurrent_zr_t = ir::kNoNode;  // GRU default form: the update/reset columns of R^T
  NodeId recurrent_h_t = ir::kNoNode;   // GRU default form: the hidden-gate columns of R^T
  NodeId recurrent_h_bias = ir::kNoNode;  // GRU linear_before_reset: Rbh [hidden]
  NodeId peephole_i = ir::kNoNode, peephole_o = ir::kNoNode, peephole_f = ir::kNoNode;  // LSTM P [hidden]
  NodeId h0 = ir::kNoNode, c0 = ir::kNoNode;  // initial state [batch, hidden]
};

// The value of one direction after the last step.
struct DirectionResult {
  std::vector<NodeId> steps;  // Y of each time step, in time order, [batch, hidden]
  NodeId h = ir::kNoNode, c = ir::kNoNode;
};

Status check_dtype(const Importer& im, NodeId x, ir::DType dtype, const char* what) {
  if (im.type(x).dtype != dtype) {
    return im.error(std::string(what) + " is " + std::string(ir::dtype_name(im.type(x).dtype)) + "; X is " +
                    std::string(ir::dtype_name(dtype)));
  }
  return Status::ok();
}

Status check_shape(const Importer& im, NodeId x, const Shape& expected, const char* what) {
  const Shape& got = im.type(x).shape;
  bool ok = got.size() == expected.size();
  for (size_t i = 0; ok && i < got.size(); ++i) {
    // Two sizes only disagree for certain when both are known.
    ok = !(got[i].is_static() && expected[i].is_static()) || got[i] == expected[i];
  }
  if (!ok) {
    return im.error(std::string(what) + " has shape " + ir::shape_to_string(got) + "; expected " +
                    ir::shape_to_string(expected));
  }
  return Status::ok();
}

Status recurrent_op(Importer& im, Cell cell) {
  const CellForm form = form_of(cell);
  KILN_RETURN_IF_ERROR(im.only_first_outputs(form.outputs));
  auto wants_output = [&](int i) { return i < im.current->output_size() && !im.current->output(i).empty(); };

  // Attributes.
  const std::string direction = im.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return im.error("unknown direction '" + direction + "' (forward, reverse or bidirectional)");
  }
  const int64_t directions = direction == "bidirectional" ? 2 : 1;
  const int64_t layout = im.attr_int("layout", 0);
  if (layout != 0 && layout != 1) return im.error("layout must be 0 or 1, got " + std::to_string(layout));
  if (layout != 0 && im.opset < 14) return im.error("layout is an attribute from opset 14");
  std::optional<double> clip;
  if (im.attr("clip") != nullptr) {
    const double c = im.attr_float("clip", 0.0);
    if (!(c > 0.0)) return im.error("clip must be positive, got " + std::to_string(c));
    if (!std::isinf(c)) clip = c;
  }
  const bool input_forget = cell == Cell::kLstm && im.attr_int("input_forget", 0) != 0;
  const bool linear_before_reset = cell == Cell::kGru && im.attr_int("linear_before_reset", 0) != 0;
  KILN_ASSIGN_OR_RETURN(std::vector<Activation> activations, read_activations(im, form.activations, directions));

  // Inputs and their shapes: X [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1),
  // W [directions, gates * hidden, input], R [directions, gates * hidden, hidden].
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId w, im.input(1));
  KILN_ASSIGN_OR_RETURN(NodeId r, im.input(2));
  const ir::DType dtype = im.type(x).dtype;
  if (!ir::is_float(dtype)) return im.error("X must be a floating-point tensor");
  KILN_RETURN_IF_ERROR(check_dtype(im, w, dtype, "W"));
  KILN_RETURN_IF_ERROR(check_dtype(im, r, dtype, "R"));
  const Shape xs = im.type(x).shape;
  const Shape ws = im.type(w).shape;
  const Shape rs = im.type(r).shape;
  if (xs.size() != 3) return im.error("X must have rank 3, got " + ir::shape_to_string(xs));
  if (ws.size() != 3 || rs.size() != 3 || !ir::is_static(ws) || !ir::is_static(rs)) {
    return im.error("W and R must be static tensors of rank 3, got " + ir::shape_to_string(ws) + " and " +
                    ir::shape_to_string(rs));
  }
  const int64_t hidden = rs[2].size();
  if (const int64_t hidden_attr = im.attr_int("hidden_size", hidden); hidden_attr != hidden) {
    return im.error("hidden_size is " + std::to_string(hidden_attr) + " but R is " + ir::shape_to_string(rs));
  }
  const int64_t gate_width = form.gates * hidden;
  const Dim& seq_dim = xs[layout == 0 ? 0 : 1];
  const Dim batch = xs[layout == 0 ? 1 : 0];
  KILN_RETURN_IF_ERROR(check_shape(im, w, {Dim::of(directions), Dim::of(gate_width), xs[2]}, "W"));
  KILN_RETURN_IF_ERROR(check_shape(im, r, {Dim::of(directions), Dim::of(gate_width), Dim::of(hidden)}, "R"));
  if (seq_dim.is_symbolic()) {
    return im.unsupported("the sequence length '" + seq_dim.to_string() +
                          "' is dynamic; Kiln unrolls recurrences, which needs a static sequence length");
  }
  const int64_t seq = seq_dim.size();
  if (seq < 1 || seq > kMaxUnrolledSteps) {
    return im.unsupported("a sequence of " + std::to_string(seq) + " steps is not supported (Kiln unrolls 1 to " +
                          std::to_string(kMaxUnrolledSteps) + " steps)");
  }
  // The state tensors: [directions, batch, hidden] (layout 0) or [batch, directions, hidden].
  const Shape state_shape = layout == 0 ? Shape{Dim::of(directions), batch, Dim::of(hidden)}
                                        : Shape{batch, Dim::of(directions), Dim::of(hidden)};
  auto optional_input = [&](int i, const char* what, const Shape& shape) -> Result<NodeId> {
    if (!im.has_input(i)) return ir::kNoNode;
    KILN_ASSIGN_OR_RETURN(NodeId v, im.input(i));
    KILN_RETURN_IF_ERROR(check_dtype(im, v, dtype, what));
    KILN_RETURN_IF_ERROR(check_shape(im, v, shape, what));
    return v;
  };
  KILN_ASSIGN_OR_RETURN(NodeId bias, optional_input(3, "B", {Dim::of(directions), Dim::of(2 * gate_width)}));
  KILN_ASSIGN_OR_RETURN(NodeId initial_h, optional_input(5, "initial_h", state_shape));
  NodeId initial_c = ir::kNoNode, peepholes = ir::kNoNode;
  if (cell == Cell::kLstm) {
    KILN_ASSIGN_OR_RETURN(initial_c, optional_input(6, "initial_c", state_shape));
    KILN_ASSIGN_OR_RETURN(peepholes, optional_input(7, "P", {Dim::of(directions), Dim::of(3 * hidden)}));
  } else if (im.num_inputs() > 6) {
    return im.error(std::string(form.op) + " takes at most 6 inputs");
  }

  // sequence_lens: per-step masks unless every length is the sequence length.
  NodeId lengths = ir::kNoNode;  // [batch, 1], integers
  if (im.has_input(4)) {
    KILN_ASSIGN_OR_RETURN(NodeId lens, im.input(4));
    if (!ir::is_integer(im.type(lens).dtype)) return im.error("sequence_lens must be integers");
    KILN_RETURN_IF_ERROR(check_shape(im, lens, {batch}, "sequence_lens"));
    bool all_full = false;
    if (im.const_data(lens) != nullptr) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> values, im.const_ints(lens, "sequence_lens"));
      for (int64_t v : values) {
        if (v < 0 || v > seq) {
          return im.error("sequence_lens holds " + std::to_string(v) + ", outside [0, " + std::to_string(seq) + "]");
        }
      }
      all_full = std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == seq; });
    }
    if (!all_full) {
      KILN_ASSIGN_OR_RETURN(lengths, im.reshape(lens, {batch, Dim::of(1)}));
    }
  }

  // The input projection of every step and direction, one matmul: X [.., input] times
  // W^T [directions, 1, input, gates * hidden] -> [directions, seq, batch, gates * hidden]
  // (layout 0) or [directions, batch, seq, gates * hidden] (layout 1), plus the biases that are
  // added outside the gates' nonlinear terms.
  KILN_ASSIGN_OR_RETURN(NodeId w_t, im.add(OpKind::kTranspose, {w}, ir::TransposeAttrs{{0, 2, 1}}));
  KILN_ASSIGN_OR_RETURN(w_t, im.reshape(w_t, {Dim::of(directions), Dim::of(1), ws[2], Dim::of(gate_width)}));
  KILN_ASSIGN_OR_RETURN(NodeId projection, im.apply(OpKind::kMatMul, {x, w_t}));
  const int64_t time_axis = layout == 0 ? 1 : 2;
  NodeId recurrent_h_bias = ir::kNoNode;  // GRU linear_before_reset: Rbh [directions, hidden]
  if (bias != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(NodeId input_bias, slice_axis(im, bias, 1, 0, gate_width));
    KILN_ASSIGN_OR_RETURN(NodeId recurrent_bias, slice_axis(im, bias, 1, gate_width, 2 * gate_width));
    if (linear_before_reset) {
      // Rbh is scaled by the reset gate each step: only Rbz and Rbr join the projection.
      KILN_ASSIGN_OR_RETURN(recurrent_h_bias, slice_axis(im, recurrent_bias, 1, 2 * hidden, 3 * hidden));
      KILN_ASSIGN_OR_RETURN(NodeId zr_bias, slice_axis(im, recurrent_bias, 1, 0, 2 * hidden));
      KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, dtype));
      KILN_ASSIGN_OR_RETURN(NodeId no_h_bias, im.add(OpKind::kBroadcastTo, {zero},
                                                     ir::BroadcastToAttrs{{Dim::of(directions), Dim::of(hidden)}}));
      KILN_ASSIGN_OR_RETURN(recurrent_bias, im.add(OpKind::kConcat, {zr_bias, no_h_bias}, ir::AxisAttrs{1}));
    }
    KILN_ASSIGN_OR_RETURN(NodeId both, binary(im, OpKind::kAdd, input_bias, recurrent_bias));
    KILN_ASSIGN_OR_RETURN(both, im.reshape(both, {Dim::of(directions), Dim::of(1), Dim::of(1), Dim::of(gate_width)}));
    KILN_ASSIGN_OR_RETURN(projection, binary(im, OpKind::kAdd, projection, both));
  }

  // One direction's weights and initial state.
  auto direction_weights = [&](int64_t d) -> Result<DirectionWeights> {
    DirectionWeights dw;
    KILN_ASSIGN_OR_RETURN(NodeId r_d, take_first(im, r, d));
    KILN_ASSIGN_OR_RETURN(dw.recurrent_t, im.add(OpKind::kTranspose, {r_d}, ir::TransposeAttrs{{1, 0}}));
    if (cell == Cell::kGru && !linear_before_reset) {
      KILN_ASSIGN_OR_RETURN(dw.recurrent_zr_t, slice_axis(im, dw.recurrent_t, 1, 0, 2 * hidden));
      KILN_ASSIGN_OR_RETURN(dw.recurrent_h_t, slice_axis(im, dw.recurrent_t, 1, 2 * hidden, 3 * hidden));
    }
    if (recurrent_h_bias != ir::kNoNode) {
      KILN_ASSIGN_OR_RETURN(dw.recurrent_h_bias, take_first(im, recurrent_h_bias, d));
    }
    if (peepholes != ir::kNoNode) {
      KILN_ASSIGN_OR_RETURN(NodeId p_d, take_first(im, peepholes, d));
      KILN_ASSIGN_OR_RETURN(dw.peephole_i, slice_axis(im, p_d, 0, 0, hidden));
      KILN_ASSIGN_OR_RETURN(dw.peephole_o, slice_axis(im, p_d, 0, hidden, 2 * hidden));
      KILN_ASSIGN_OR_RETURN(dw.peephole_f, slice_axis(im, p_d, 0, 2 * hidden, 3 * hidden));
    }
    auto initial_state = [&](NodeId given) -> Result<NodeId> {
      const Shape shape{batch, Dim::of(hidden)};
      if (given == ir::kNoNode) {
        KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, dtype));
        return im.add(OpKind::kBroadcastTo, {zero}, ir::BroadcastToAttrs{shape});
      }
      KILN_ASSIGN_OR_RETURN(NodeId sliced, slice_axis(im, given, layout == 0 ? 0 : 1, d, d + 1));
      return im.reshape(sliced, shape);
    };
    KILN_ASSIGN_OR_RETURN(dw.h0, initial_state(initial_h));
    if (cell == Cell::kLstm) {
      KILN_ASSIGN_OR_RETURN(dw.c0, initial_state(initial_c));
    }
    return dw;
  };

  auto run_direction = [&](int64_t d, bool reverse) -> Result<DirectionResult> {
    KILN_ASSIGN_OR_RETURN(DirectionWeights dw, direction_weights(d));
    const Activation* acts = &activations[size_t(d) * form.activations.size()];
    const Activation& f = acts[0];
    DirectionResult out;
    out.steps.assign(size_t(seq), ir::kNoNode);
    NodeId h = dw.h0, c = dw.c0;
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      // This step's projection [batch, gates * hidden].
      KILN_ASSIGN_OR_RETURN(NodeId xp, im.add(OpKind::kSlice, {projection},
                                              ir::SliceAttrs{{d, t}, {d + 1, t + 1}, {0, time_axis}, {1, 1}}));
      KILN_ASSIGN_OR_RETURN(xp, im.reshape(xp, {batch, Dim::of(gate_width)}));
      NodeId h_next = ir::kNoNode, c_next = ir::kNoNode;
      if (cell == Cell::kRnn) {
        // H = f(x W^T + H R^T + Wb + Rb)
        KILN_ASSIGN_OR_RETURN(NodeId rec, im.apply(OpKind::kMatMul, {h, dw.recurrent_t}));
        KILN_ASSIGN_OR_RETURN(NodeId pre, binary(im, OpKind::kAdd, xp, rec));
        KILN_ASSIGN_OR_RETURN(h_next, activate(im, f, pre, clip));
      } else if (cell == Cell::kGru) {
        // z = f(..z), r = f(..r); the hidden gate is g(x Wh^T + (r * H) Rh^T + Rbh + Wbh), or
        // with linear_before_reset g(x Wh^T + r * (H Rh^T + Rbh) + Wbh); H = (1 - z) h + z H.
        const Activation& g = acts[1];
        KILN_ASSIGN_OR_RETURN(NodeId xp_zr, slice_axis(im, xp, 1, 0, 2 * hidden));
        KILN_ASSIGN_OR_RETURN(NodeId xp_h, slice_axis(im, xp, 1, 2 * hidden, 3 * hidden));
        NodeId rec_zr = ir::kNoNode, rec_h = ir::kNoNode;
        if (linear_before_reset) {
          KILN_ASSIGN_OR_RETURN(NodeId rec, im.apply(OpKind::kMatMul, {h, dw.recurrent_t}));
          KILN_ASSIGN_OR_RETURN(rec_zr, slice_axis(im, rec, 1, 0, 2 * hidden));
          KILN_ASSIGN_OR_RETURN(rec_h, slice_axis(im, rec, 1, 2 * hidden, 3 * hidden));
          if (dw.recurrent_h_bias != ir::kNoNode) {
            KILN_ASSIGN_OR_RETURN(rec_h, binary(im, OpKind::kAdd, rec_h, dw.recurrent_h_bias));
          }
        } else {
          KILN_ASSIGN_OR_RETURN(rec_zr, im.apply(OpKind::kMatMul, {h, dw.recurrent_zr_t}));
        }
        KILN_ASSIGN_OR_RETURN(NodeId zr, binary(im, OpKind::kAdd, xp_zr, rec_zr));
        KILN_ASSIGN_OR_RETURN(NodeId z_pre, slice_axis(im, zr, 1, 0, hidden));
        KILN_ASSIGN_OR_RETURN(NodeId r_pre, slice_axis(im, zr, 1, hidden, 2 * hidden));
        KILN_ASSIGN_OR_RETURN(NodeId z, activate(im, f, z_pre, clip));
        KILN_ASSIGN_OR_RETURN(NodeId reset, activate(im, f, r_pre, clip));
        NodeId h_pre = ir::kNoNode;
        if (linear_before_reset) {
          KILN_ASSIGN_OR_RETURN(NodeId gated, binary(im, OpKind::kMul, reset, rec_h));
          KILN_ASSIGN_OR_RETURN(h_pre, binary(im, OpKind::kAdd, xp_h, gated));
        } else {
          KILN_ASSIGN_OR_RETURN(NodeId reset_h, binary(im, OpKind::kMul, reset, h));
          KILN_ASSIGN_OR_RETURN(rec_h, im.apply(OpKind::kMatMul, {reset_h, dw.recurrent_h_t}));
          KILN_ASSIGN_OR_RETURN(h_pre, binary(im, OpKind::kAdd, xp_h, rec_h));
        }
        KILN_ASSIGN_OR_RETURN(NodeId candidate, activate(im, g, h_pre, clip));
        KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1.0, dtype));
        KILN_ASSIGN_OR_RETURN(NodeId keep_new, binary(im, OpKind::kSub, one, z));
        KILN_ASSIGN_OR_RETURN(NodeId new_part, binary(im, OpKind::kMul, keep_new, candidate));
        KILN_ASSIGN_OR_RETURN(NodeId old_part, binary(im, OpKind::kMul, z, h));
        KILN_ASSIGN_OR_RETURN(h_next, binary(im, OpKind::kAdd, new_part, old_part));
      } else {
        // Gates in W's order i, o, f, c; peepholes P = [Pi, Po, Pf] read C(t-1) for i and f and
        // C(t) for o. i = f(..i + Pi C), f = f(..f + Pf C) (or 1 - i with input_forget),
        // c = g(..c), C = f C + i c, o = f(..o + Po C), H = o h(C).
        const Activation& g = acts[1];
        const Activation& hact = acts[2];
        KILN_ASSIGN_OR_RETURN(NodeId rec, im.apply(OpKind::kMatMul, {h, dw.recurrent_t}));
        KILN_ASSIGN_OR_RETURN(NodeId gates, binary(im, OpKind::kAdd, xp, rec));
        KILN_ASSIGN_OR_RETURN(NodeId i_pre, slice_axis(im, gates, 1, 0, hidden));
        KILN_ASSIGN_OR_RETURN(NodeId o_pre, slice_axis(im, gates, 1, hidden, 2 * hidden));
        KILN_ASSIGN_OR_RETURN(NodeId f_pre, slice_axis(im, gates, 1, 2 * hidden, 3 * hidden));
        KILN_ASSIGN_OR_RETURN(NodeId c_pre, slice_axis(im, gates, 1, 3 * hidden, 4 * hidden));
        auto with_peephole = [&](NodeId pre, NodeId p, NodeId state) -> Result<NodeId> {
          if (p == ir::kNoNode) return pre;
          KILN_ASSIGN_OR_RETURN(NodeId term, binary(im, OpKind::kMul, p, state));
          return binary(im, OpKind::kAdd, pre, term);
        };
        KILN_ASSIGN_OR_RETURN(i_pre, with_peephole(i_pre, dw.peephole_i, c));
        KILN_ASSIGN_OR_RETURN(NodeId input_gate, activate(im, f, i_pre, clip));
        NodeId forget_gate = ir::kNoNode;
        if (input_forget) {
          KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1.0, dtype));
          KILN_ASSIGN_OR_RETURN(forget_gate, binary(im, OpKind::kSub, one, input_gate));
        } else {
          KILN_ASSIGN_OR_RETURN(f_pre, with_peephole(f_pre, dw.peephole_f, c));
          KILN_ASSIGN_OR_RETURN(forget_gate, activate(im, f, f_pre, clip));
        }
        KILN_ASSIGN_OR_RETURN(NodeId cell_input, activate(im, g, c_pre, clip));
        KILN_ASSIGN_OR_RETURN(NodeId kept, binary(im, OpKind::kMul, forget_gate, c));
        KILN_ASSIGN_OR_RETURN(NodeId added, binary(im, OpKind::kMul, input_gate, cell_input));
        KILN_ASSIGN_OR_RETURN(c_next, binary(im, OpKind::kAdd, kept, added));
        KILN_ASSIGN_OR_RETURN(o_pre, with_peephole(o_pre, dw.peephole_o, c_next));
        KILN_ASSIGN_OR_RETURN(NodeId output_gate, activate(im, f, o_pre, clip));
        // clip bounds the gates' inputs only: h() reads the cell state unclamped, as onnxruntime
        // computes it.
        KILN_ASSIGN_OR_RETURN(NodeId squashed, activate(im, hact, c_next, std::nullopt));
        KILN_ASSIGN_OR_RETURN(h_next, binary(im, OpKind::kMul, output_gate, squashed));
      }
      if (lengths == ir::kNoNode) {
        out.steps[size_t(t)] = h_next;
        h = h_next;
        c = c_next;
        continue;
      }
      // Past its length a batch entry keeps its state and outputs zeros.
      KILN_ASSIGN_OR_RETURN(NodeId t_value, im.scalar(double(t), im.type(lengths).dtype));
      KILN_ASSIGN_OR_RETURN(NodeId valid, binary(im, OpKind::kGreater, lengths, t_value));
      KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, dtype));
      KILN_ASSIGN_OR_RETURN(out.steps[size_t(t)], im.apply(OpKind::kWhere, {valid, h_next, zero}));
      KILN_ASSIGN_OR_RETURN(h, im.apply(OpKind::kWhere, {valid, h_next, h}));
      if (c_next != ir::kNoNode) {
        KILN_ASSIGN_OR_RETURN(c, im.apply(OpKind::kWhere, {valid, c_next, c}));
      }
    }
    out.h = h;
    out.c = c;
    return out;
  };

  std::vector<DirectionResult> results;
  for (int64_t d = 0; d < directions; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    KILN_ASSIGN_OR_RETURN(DirectionResult result, run_direction(d, reverse));
    results.push_back(std::move(result));
  }

  // Y: [seq, directions, batch, hidden] (layout 0) or [batch, seq, directions, hidden].
  if (wants_output(0)) {
    const Shape step_shape = layout == 0 ? Shape{Dim::of(1), Dim::of(1), batch, Dim::of(hidden)}
                                         : Shape{batch, Dim::of(1), Dim::of(1), Dim::of(hidden)};
    const int64_t seq_axis = layout == 0 ? 0 : 1, direction_axis = layout == 0 ? 1 : 2;
    std::vector<NodeId> per_direction;
    for (const DirectionResult& result : results) {
      std::vector<NodeId> steps;
      for (NodeId y_t : result.steps) {
        KILN_ASSIGN_OR_RETURN(NodeId lifted, im.reshape(y_t, step_shape));
        steps.push_back(lifted);
      }
      KILN_ASSIGN_OR_RETURN(NodeId joined, concat(im, std::move(steps), seq_axis));
      per_direction.push_back(joined);
    }
    KILN_ASSIGN_OR_RETURN(NodeId y, concat(im, std::move(per_direction), direction_axis));
    KILN_RETURN_IF_ERROR(im.set_output(0, y));
  }
  // Y_h, Y_c: [directions, batch, hidden] (layout 0) or [batch, directions, hidden].
  auto final_state = [&](NodeId DirectionResult::*member) -> Result<NodeId> {
    const Shape lifted_shape = layout == 0 ? Shape{Dim::of(1), batch, Dim::of(hidden)}
                                           : Shape{batch, Dim::of(1), Dim::of(hidden)};
    // A batch entry of length 0 ends in a zero state, not its initial one (as onnxruntime).
    NodeId nonempty = ir::kNoNode;
    if (lengths != ir::kNoNode) {
      KILN_ASSIGN_OR_RETURN(NodeId zero_length, im.scalar(0.0, im.type(lengths).dtype));
      KILN_ASSIGN_OR_RETURN(nonempty, binary(im, OpKind::kGreater, lengths, zero_length));
    }
    std::vector<NodeId> parts;
    for (const DirectionResult& result : results) {
      NodeId state = result.*member;
      if (nonempty != ir::kNoNode) {
        KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar(0.0, dtype));
        KILN_ASSIGN_OR_RETURN(state, im.apply(OpKind::kWhere, {nonempty, state, zero}));
      }
      KILN_ASSIGN_OR_RETURN(NodeId lifted, im.reshape(state, lifted_shape));
      parts.push_back(lifted);
    }
    return concat(im, std::move(parts), layout == 0 ? 0 : 1);
  };
  if (wants_output(1)) {
    KILN_ASSIGN_OR_RETURN(NodeId y_h, final_state(&DirectionResult::h));
    KILN_RETURN_IF_ERROR(im.set_output(1, y_h));
  }
  if (cell == Cell::kLstm && wants_output(2)) {
    KILN_ASSIGN_OR_RETURN(NodeId y_c, final_state(&DirectionResult::c));
    KILN_RETURN_IF_ERROR(im.set_output(2, y_c));
  }
  return Status::ok();
}

}  // namespace

void register_rnn_ops(std::map<std::string, Converter>& t) {
  t["RNN"] = [](Importer& im) { return recurrent_op(im, Cell::kRnn); };
  t["GRU"] = [](Importer& im) { return recurrent_op(im, Cell::kGru); };
  t["LSTM"] = [](Importer& im) { return recurrent_op(im, Cell::kLstm); };
}

}  // namespace kiln::onnx_import
