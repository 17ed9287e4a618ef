// Converters for ONNX control flow: If, Loop and Scan. Kiln graphs have no control flow, so each
// is resolved at import, its subgraphs inlined under fresh names (inline_graph):
// - If takes the branch a constant condition selects; with a condition computed at run time it
//   computes both branches and selects each output with `where`, which needs the branches'
//   outputs to agree in type (both run: the cost of the other branch is paid).
// - Loop and Scan are unrolled over a trip count, condition and sequence length known at import
//   (at most kMaxUnrolledIterations iterations); one computed at run time is reported, as Kiln
//   graphs have no data-dependent control flow.
#include <algorithm>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

// Unrolling stops here: a model that loops longer is reported rather than grown without bound.
constexpr int64_t kMaxUnrolledIterations = 1024;

// The node's GRAPH attribute `name`, or null.
const onnx::GraphProto* graph_attr(const Importer& im, std::string_view name) {
  const onnx::AttributeProto* a = im.attr(name);
  if (a == nullptr || a->type() != onnx::AttributeProto::GRAPH || !a->has_g()) return nullptr;
  return &a->g();
}

Value of_node(NodeId id) {
  Value v;
  v.node = id;
  return v;
}

// A boolean value that must be known at import: `what` names it in the diagnostic.
Result<bool> constant_condition(Importer& im, NodeId cond, std::string_view what) {
  const ir::Tensor* t = im.const_data(cond);
  if (t == nullptr) {
    return im.unsupported(std::string(what) + " must be a constant (computed at import): Kiln unrolls loops, and a loop "
                          "controlled at run time is not supported");
  }
  if (t->num_elements() != 1) return im.error(std::string(what) + " must hold one element");
  return t->element_as_double(0) != 0;
}

// A node id for a subgraph result (materializing an import-time shape vector).
Result<NodeId> node_of(Importer& im, const Value& v) {
  if (v.node != ir::kNoNode) return v.node;
  if (!v.dims) return im.error("a subgraph result has no value");
  if (!ir::is_static(*v.dims)) return im.unsupported("a dynamic shape vector crossing a subgraph boundary");
  KILN_ASSIGN_OR_RETURN(NodeId id, im.ints_constant(ir::static_sizes(*v.dims)));
  if (v.dims_scalar) {
    KILN_ASSIGN_OR_RETURN(id, im.reshape(id, {}));
  }
  return id;
}

// `parts` (each one iteration's value) stacked along a new axis `axis`, in order.
Result<NodeId> stack(Importer& im, const std::vector<NodeId>& parts, int64_t axis) {
  std::vector<NodeId> lifted;
  for (NodeId p : parts) {
    Shape s = im.type(p).shape;
    if (axis < 0 || axis > int64_t(s.size())) return im.error("scan output axis out of range");
    s.insert(s.begin() + axis, Dim::of(1));
    KILN_ASSIGN_OR_RETURN(NodeId l, im.reshape(p, s));
    lifted.push_back(l);
  }
  if (lifted.size() == 1) return lifted[0];
  return im.add(OpKind::kConcat, lifted, ir::AxisAttrs{axis});
}

std::string label_of(const Importer& im, std::string_view what) {
  const onnx::NodeProto& n = *im.current;
  return std::string(n.name().empty() ? (n.output_size() > 0 ? n.output(0) : "node") : n.name()) + "/" + std::string(what);
}

// If: the branch a constant condition selects, inlined; with a run-time condition, both
// branches and a `where` per output.
Status if_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId cond, im.input(0));
  if (ir::static_num_elements(im.type(cond).shape) != 1) return im.error("the condition must hold one element");
  const onnx::GraphProto* then_branch = graph_attr(im, "then_branch");
  const onnx::GraphProto* else_branch = graph_attr(im, "else_branch");
  if (then_branch == nullptr || else_branch == nullptr) return im.error("then_branch and else_branch are required");
  auto outputs_of = [&](const onnx::GraphProto& branch, const char* name) -> Result<std::vector<NodeId>> {
    KILN_ASSIGN_OR_RETURN(std::vector<Value> results, inline_graph(im, branch, label_of(im, name), {}));
    if (int(results.size()) < im.current->output_size()) return im.error("a branch has fewer outputs than the node");
    std::vector<NodeId> ids;
    for (int i = 0; i < im.current->output_size(); ++i) {
      KILN_ASSIGN_OR_RETURN(NodeId id, node_of(im, results[size_t(i)]));
      ids.push_back(id);
    }
    return ids;
  };
  std::vector<NodeId> outputs;
  if (const ir::Tensor* known = im.const_data(cond)) {
    const bool taken = known->element_as_double(0) != 0;
    KILN_ASSIGN_OR_RETURN(outputs, outputs_of(taken ? *then_branch : *else_branch, taken ? "then" : "else"));
  } else {
    KILN_ASSIGN_OR_RETURN(std::vector<NodeId> then_outputs, outputs_of(*then_branch, "then"));
    KILN_ASSIGN_OR_RETURN(std::vector<NodeId> else_outputs, outputs_of(*else_branch, "else"));
    if (im.type(cond).dtype != ir::DType::kBool) return im.error("the condition must be a bool");
    KILN_ASSIGN_OR_RETURN(NodeId flag, im.reshape(cond, {}));
    for (size_t i = 0; i < then_outputs.size(); ++i) {
      if (im.type(then_outputs[i]) != im.type(else_outputs[i])) {
        return im.unsupported("output " + std::to_string(i) + " is " + im.type(then_outputs[i]).to_string() +
                              " in then_branch and " + im.type(else_outputs[i]).to_string() +
                              " in else_branch: an If whose condition is computed at run time is supported only "
                              "when both branches compute the same types");
      }
      KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kWhere, {flag, then_outputs[i], else_outputs[i]}));
      outputs.push_back(y);
    }
  }
  for (int i = 0; i < im.current->output_size(); ++i) {
    if (!im.current->output(i).empty()) {
      KILN_RETURN_IF_ERROR(im.set_output(i, outputs[size_t(i)]));
    }
  }
  return Status::ok();
}

// Loop(M, cond, v_initial...): the body (iteration_num, cond_in, v...) -> (cond_out, v..., scan
// outputs...) unrolled while the iteration count is below M and the condition holds; both must
// be known at import at every iteration. Scan outputs are stacked along a new first axis.
Status loop_op(Importer& im) {
  const onnx::GraphProto* body = graph_attr(im, "body");
  if (body == nullptr) return im.error("body is missing");
  std::optional<int64_t> trip_count;
  if (im.has_input(0)) {
    KILN_ASSIGN_OR_RETURN(NodeId m, im.input(0));
    const ir::Tensor* t = im.const_data(m);
    if (t == nullptr || t->num_elements() != 1) {
      return im.unsupported("the trip count M must be a constant (computed at import): Kiln unrolls loops, and a loop "
                            "controlled at run time is not supported");
    }
    trip_count = int64_t(t->element_as_double(0));
  }
  bool running = true;
  NodeId cond = ir::kNoNode;
  if (im.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(cond, im.input(1));
    KILN_ASSIGN_OR_RETURN(running, constant_condition(im, cond, "the loop condition"));
  } else {
    KILN_ASSIGN_OR_RETURN(cond, im.scalar(1.0, ir::DType::kBool));
  }
  if (!trip_count && !im.has_input(1)) return im.error("a Loop needs a trip count M or a condition");
  const int carried = im.num_inputs() - 2;
  if (carried < 0 || body->input_size() != carried + 2) {
    return im.error("the body takes " + std::to_string(body->input_size()) + " inputs for " +
                    std::to_string(std::max(carried, 0)) + " loop-carried values (it needs 2 more)");
  }
  const int scan_outputs = body->output_size() - 1 - carried;
  if (scan_outputs < 0) return im.error("the body returns fewer values than the loop carries");
  std::vector<NodeId> state;
  for (int i = 0; i < carried; ++i) {
    KILN_ASSIGN_OR_RETURN(NodeId v, im.input(2 + i));
    state.push_back(v);
  }
  std::vector<std::vector<NodeId>> scanned(static_cast<size_t>(scan_outputs));
  int64_t iteration = 0;
  for (; running && (!trip_count || iteration < *trip_count); ++iteration) {
    if (iteration >= kMaxUnrolledIterations) {
      return im.unsupported("a Loop of more than " + std::to_string(kMaxUnrolledIterations) + " iterations is not supported (Kiln unrolls loops at import)");
    }
    KILN_ASSIGN_OR_RETURN(NodeId count, im.ints_constant({iteration}));
    KILN_ASSIGN_OR_RETURN(count, im.reshape(count, {}));
    std::vector<Value> bound = {of_node(count), of_node(cond)};
    for (NodeId v : state) bound.push_back(of_node(v));
    KILN_ASSIGN_OR_RETURN(std::vector<Value> results,
                          inline_graph(im, *body, label_of(im, "iteration" + std::to_string(iteration)), bound));
    KILN_ASSIGN_OR_RETURN(cond, node_of(im, results[0]));
    KILN_ASSIGN_OR_RETURN(running, constant_condition(im, cond, "the loop condition"));
    for (int i = 0; i < carried; ++i) {
      KILN_ASSIGN_OR_RETURN(state[size_t(i)], node_of(im, results[size_t(1 + i)]));
    }
    for (int i = 0; i < scan_outputs; ++i) {
      KILN_ASSIGN_OR_RETURN(NodeId v, node_of(im, results[size_t(1 + carried + i)]));
      scanned[size_t(i)].push_back(v);
    }
  }
  for (int i = 0; i < carried; ++i) KILN_RETURN_IF_ERROR(im.set_output(i, state[size_t(i)]));
  for (int i = 0; i < scan_outputs; ++i) {
    if (scanned[size_t(i)].empty()) {
      if (carried + i < im.current->output_size() && !im.current->output(carried + i).empty()) {
        return im.unsupported("a scan output of a Loop that runs no iteration (its shape is unknown)");
      }
      continue;
    }
    KILN_ASSIGN_OR_RETURN(NodeId y, stack(im, scanned[size_t(i)], 0));
    KILN_RETURN_IF_ERROR(im.set_output(carried + i, y));
  }
  return Status::ok();
}

// The axes and directions of a Scan's scan inputs and outputs.
struct ScanForm {
  std::vector<int64_t> input_axes, input_directions, output_axes, output_directions;
};

// The final states and the stacked scan outputs of running `body` (state..., slices...) ->
// (state..., scan output elements...) once per position of the scan inputs along their axes
// (a static length, the same for all), forward or reversed per input; the elements are stacked
// along the output axes, reversed per output. `label` starts the inlined values' names.
Result<std::pair<std::vector<NodeId>, std::vector<NodeId>>> unroll_scan(Importer& im, const onnx::GraphProto& body,
                                                                         std::vector<NodeId> state,
                                                                         const std::vector<NodeId>& scan_inputs,
                                                                         ScanForm form, const std::string& label) {
  const size_t states = state.size();
  const int scan_outputs = body.output_size() - int(states);
  if (body.input_size() != int(states + scan_inputs.size()) || scan_outputs < 0 ||
      form.output_axes.size() != size_t(scan_outputs) || form.output_directions.size() != size_t(scan_outputs)) {
    return im.error("the body's inputs and outputs do not match the state and scan values");
  }
  int64_t length = -1;
  for (size_t i = 0; i < scan_inputs.size(); ++i) {
    const int64_t rank = im.type(scan_inputs[i]).rank();
    Result<int64_t> axis = ir::normalize_axis(form.input_axes[i], rank);
    if (!axis.is_ok()) return im.error(axis.status().message());
    form.input_axes[i] = *axis;
    const Dim& d = im.type(scan_inputs[i]).shape[size_t(*axis)];
    if (d.is_symbolic()) return im.unsupported("a scan over a dynamic sequence length (Kiln unrolls scans at import)");
    if (length >= 0 && d.size() != length) return im.error("the scan inputs differ in sequence length");
    length = d.size();
  }
  if (length > kMaxUnrolledIterations) {
    return im.unsupported("a Scan of more than " + std::to_string(kMaxUnrolledIterations) + " steps is not supported (Kiln unrolls scans at import)");
  }
  std::vector<std::vector<NodeId>> scanned(static_cast<size_t>(scan_outputs));
  for (int64_t step = 0; step < length; ++step) {
    std::vector<Value> bound;
    for (NodeId v : state) bound.push_back(of_node(v));
    for (size_t i = 0; i < scan_inputs.size(); ++i) {
      const int64_t at = form.input_directions[i] != 0 ? length - 1 - step : step;
      const int64_t axis = form.input_axes[i];
      KILN_ASSIGN_OR_RETURN(NodeId slice, im.add(OpKind::kSlice, {scan_inputs[i]}, ir::SliceAttrs{{at}, {at + 1}, {axis}, {1}}));
      Shape s = im.type(slice).shape;
      s.erase(s.begin() + axis);
      KILN_ASSIGN_OR_RETURN(slice, im.reshape(slice, s));
      bound.push_back(of_node(slice));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Value> results, inline_graph(im, body, label + "/step" + std::to_string(step), bound));
    for (size_t i = 0; i < states; ++i) {
      KILN_ASSIGN_OR_RETURN(state[i], node_of(im, results[i]));
    }
    for (int i = 0; i < scan_outputs; ++i) {
      KILN_ASSIGN_OR_RETURN(NodeId v, node_of(im, results[states + size_t(i)]));
      scanned[size_t(i)].push_back(v);
    }
  }
  std::vector<NodeId> stacked;
  for (int i = 0; i < scan_outputs; ++i) {
    std::vector<NodeId>& parts = scanned[size_t(i)];
    if (parts.empty()) return im.unsupported("a Scan over an empty sequence (its outputs' shapes are unknown)");
    if (form.output_directions[size_t(i)] != 0) std::reverse(parts.begin(), parts.end());
    const int64_t rank = im.type(parts[0]).rank() + 1;
    Result<int64_t> axis = ir::normalize_axis(form.output_axes[size_t(i)], rank);
    if (!axis.is_ok()) return im.error(axis.status().message());
    KILN_ASSIGN_OR_RETURN(NodeId y, stack(im, parts, *axis));
    stacked.push_back(y);
  }
  return std::pair{state, stacked};
}

// An INTS attribute with one entry per value (all 0 when absent).
Result<std::vector<int64_t>> per_value(Importer& im, std::string_view name, size_t count) {
  std::vector<int64_t> v = im.attr_ints(name).value_or(std::vector<int64_t>(count, 0));
  if (v.size() != count) return im.error(std::string(name) + " must hold " + std::to_string(count) + " entries");
  return v;
}

// Scan (opsets 9+): N state values and M scan inputs, unrolled (unroll_scan). Opset 8's form
// batches: every input has a leading batch axis, the scan runs per batch entry along axis 1,
// and `sequence_lens` (when given) must be a constant equal to the sequence length everywhere.
Status scan_op(Importer& im) {
  const onnx::GraphProto* body = graph_attr(im, "body");
  if (body == nullptr) return im.error("body is missing");
  const bool batched = im.opset < 9;
  const int first = batched ? 1 : 0;  // opset 8's sequence_lens comes first
  const int64_t num_scan_inputs = im.attr_int("num_scan_inputs", -1);
  const int num_inputs = im.num_inputs() - first;
  if (num_scan_inputs < 1 || num_scan_inputs > num_inputs) return im.error("num_scan_inputs must be in [1, inputs]");
  const int states = num_inputs - int(num_scan_inputs);
  const int scan_outputs = body->output_size() - states;
  if (scan_outputs < 0) return im.error("the body returns fewer values than the scan's states");
  std::vector<NodeId> state, scan_inputs;
  for (int i = 0; i < num_inputs; ++i) {
    KILN_ASSIGN_OR_RETURN(NodeId v, im.input(first + i));
    (i < states ? state : scan_inputs).push_back(v);
  }
  ScanForm form;
  const std::string label = label_of(im, "scan");
  if (!batched) {
    KILN_ASSIGN_OR_RETURN(form.input_axes, per_value(im, "scan_input_axes", size_t(num_scan_inputs)));
    KILN_ASSIGN_OR_RETURN(form.input_directions, per_value(im, "scan_input_directions", size_t(num_scan_inputs)));
    KILN_ASSIGN_OR_RETURN(form.output_axes, per_value(im, "scan_output_axes", size_t(scan_outputs)));
    KILN_ASSIGN_OR_RETURN(form.output_directions, per_value(im, "scan_output_directions", size_t(scan_outputs)));
    KILN_ASSIGN_OR_RETURN(auto results, unroll_scan(im, *body, state, scan_inputs, form, label));
    for (int i = 0; i < states; ++i) KILN_RETURN_IF_ERROR(im.set_output(i, results.first[size_t(i)]));
    for (int i = 0; i < scan_outputs; ++i) KILN_RETURN_IF_ERROR(im.set_output(states + i, results.second[size_t(i)]));
    return Status::ok();
  }
  // Opset 8: per batch entry, the sequence along axis 0 of each entry's slice.
  KILN_ASSIGN_OR_RETURN(form.input_directions, per_value(im, "directions", size_t(num_scan_inputs)));
  form.input_axes.assign(size_t(num_scan_inputs), 0);
  form.output_axes.assign(size_t(scan_outputs), 0);
  form.output_directions.assign(size_t(scan_outputs), 0);
  const Dim batch = im.type(scan_inputs[0]).shape.empty() ? Dim::of(0) : im.type(scan_inputs[0]).shape[0];
  if (batch.is_symbolic()) return im.unsupported("the opset 8 form of Scan over a dynamic batch (Kiln unrolls it per batch entry)");
  if (im.has_input(0)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, im.input_ints(0, "sequence_lens"));
    const Shape& xs = im.type(scan_inputs[0]).shape;
    for (int64_t l : lengths) {
      if (xs.size() < 2 || !xs[1].is_static() || l != xs[1].size()) {
        return im.unsupported("sequence_lens shorter than the sequence (per-entry lengths) is not supported");
      }
    }
  }
  std::vector<std::vector<NodeId>> finals(static_cast<size_t>(states)), outputs(static_cast<size_t>(scan_outputs));
  for (int64_t b = 0; b < batch.size(); ++b) {
    auto entry = [&](NodeId v) -> Result<NodeId> {
      KILN_ASSIGN_OR_RETURN(NodeId slice, im.add(OpKind::kSlice, {v}, ir::SliceAttrs{{b}, {b + 1}, {0}, {1}}));
      Shape s = im.type(slice).shape;
      s.erase(s.begin());
      return im.reshape(slice, s);
    };
    std::vector<NodeId> entry_state, entry_inputs;
    for (NodeId v : state) {
      KILN_ASSIGN_OR_RETURN(NodeId e, entry(v));
      entry_state.push_back(e);
    }
    for (NodeId v : scan_inputs) {
      KILN_ASSIGN_OR_RETURN(NodeId e, entry(v));
      entry_inputs.push_back(e);
    }
    KILN_ASSIGN_OR_RETURN(auto results, unroll_scan(im, *body, entry_state, entry_inputs, form,
                                                    label + "/batch" + std::to_string(b)));
    for (int i = 0; i < states; ++i) finals[size_t(i)].push_back(results.first[size_t(i)]);
    for (int i = 0; i < scan_outputs; ++i) outputs[size_t(i)].push_back(results.second[size_t(i)]);
  }
  for (int i = 0; i < states; ++i) {
    if (finals[size_t(i)].empty()) return im.unsupported("the opset 8 form of Scan over an empty batch");
    KILN_ASSIGN_OR_RETURN(NodeId y, stack(im, finals[size_t(i)], 0));
    KILN_RETURN_IF_ERROR(im.set_output(i, y));
  }
  for (int i = 0; i < scan_outputs; ++i) {
    if (outputs[size_t(i)].empty()) return im.unsupported("the opset 8 form of Scan over an empty batch");
    KILN_ASSIGN_OR_RETURN(NodeId y, stack(im, outputs[size_t(i)], 0));
    KILN_RETURN_IF_ERROR(im.set_output(states + i, y));
  }
  return Status::ok();
}

}  // namespace

void register_control_flow_ops(std::map<std::string, Converter>& t) {
  t["If"] = if_op;
  t["Loop"] = loop_op;
  t["Scan"] = scan_op;
}

}  // namespace kiln::onnx_import
