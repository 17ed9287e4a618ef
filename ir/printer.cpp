// The .graph text printer.
//
// Output rules (a fixpoint with the frontend: print(parse(print(g))) == print(g)):
//  - `weights "PATH"` (only when set), a blank line, then
//    `graph NAME(in: type, ...) -> (out: type, ...) {`, one statement per live non-input node,
//    `}`.
//  - Compute statements are flat (one op per statement, operands by name) and always carry the
//    checked ` : type` annotation. `const` and `param` statements do not: their type is already
//    written in the expression.
//  - Attributes equal to their spec default (ir::default_attrs) are omitted; an axis whose
//    default is -1 is also omitted when it names the last axis. Reduce ops with all_axes print
//    no axes=. Attributes that have no default (cast to=, reshape shape=, ...) always print.
//  - Floats print in the shortest form that reads back to the same value, always with a '.' or
//    an exponent; infinities and NaN print as the identifiers inf, -inf and nan.
//  - A graph output whose name differs from the node that defines it (after a pass rewired it)
//    is printed by renaming that node when possible, otherwise by an identity reshape
//    statement `OUT = reshape(VALUE, shape=[..])`, so the text stays valid.
//  - Fused graphs print nodes outside any kernel first (as soon as their operands are defined),
//    then each kernel's nodes in kernel order after a `# kernel ...` comment line.
#include "ir/printer.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>
#include <variant>
#include <unordered_map>

#include "support/half.h"

namespace kiln::ir {
namespace {

// Appends ".0" when a number would otherwise read back as an integer.
std::string as_float_token(std::string text) {
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // 'n': inf / nan
  return text;
}

std::string non_finite(double v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

std::string format_double(double v) {
  if (!std::isfinite(v)) return non_finite(v);
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return as_float_token(std::string(buf, end));
}

std::string format_f32(float v) {
  if (!std::isfinite(v)) return non_finite(v);
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return as_float_token(std::string(buf, end));
}

// Shortest decimal that reads back to the same 16- or 8-bit value (`to_bits` rounds an f32 to
// it), both when the reader parses to f32 and rounds, and when it parses to double, narrows to
// f32 and rounds (so double rounding in either reader cannot change the value).
template <class ToBits>
std::string format_narrow(float v, ToBits to_bits) {
  if (!std::isfinite(v)) return non_finite(v);
  const auto bits = to_bits(v);
  auto reads_back = [&](const std::string& text) {
    return to_bits(std::strtof(text.c_str(), nullptr)) == bits &&
           to_bits(float(std::strtod(text.c_str(), nullptr))) == bits;
  };
  char buf[64];
  for (int precision = 1; precision <= 9; ++precision) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, precision);
    std::string text(buf, end);
    if (!reads_back(text)) continue;
    // Re-spell through the f32 shortest form, which picks fixed or scientific notation by
    // length ("100" rather than "1e+02"), when that spelling reads back too.
    std::string respelled = format_f32(std::strtof(text.c_str(), nullptr));
    return reads_back(respelled) ? respelled : as_float_token(std::move(text));
  }
  return format_f32(v);  // exact: every 16- and 8-bit value is an f32
}

std::string format_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF64: return format_double(t.element_as_double(i));
    case DType::kF32: return format_f32(float(t.element_as_double(i)));
    case DType::kF16: return format_narrow(float(t.element_as_double(i)), f32_to_f16);
    case DType::kBF16: return format_narrow(float(t.element_as_double(i)), f32_to_bf16);
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ: {
      const Float8Format f = *float8_format(t.dtype());
      return format_narrow(float(t.element_as_double(i)), [f](float x) { return f32_to_float8(x, f); });
    }
    case DType::kBool: return t.element_as_int(i) != 0 ? "true" : "false";
    case DType::kI64: case DType::kI32: case DType::kI16: case DType::kI8:
    case DType::kU32: case DType::kU16: case DType::kU8:
      return std::to_string(t.element_as_int(i));
  }
  return "0";
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

bool all_elements_equal(const Tensor& t) {
  const size_t width = dtype_size(t.dtype());
  const int64_t n = t.num_elements();
  for (int64_t i = 1; i < n; ++i) {
    if (std::memcmp(t.data(), t.data() + size_t(i) * width, width) != 0) return false;
  }
  return true;
}

void append_nested(std::string& out, const Tensor& t, size_t dim, int64_t& index) {
  if (dim == t.shape().size()) {
    out += format_element(t, index++);
    return;
  }
  out += "[";
  for (int64_t i = 0; i < t.shape()[dim]; ++i) {
    if (i > 0) out += ", ";
    append_nested(out, t, dim + 1, index);
  }
  out += "]";
}

std::string ints(const int64_t* values, size_t n) {
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}
std::string ints(const std::vector<int64_t>& v) { return ints(v.data(), v.size()); }
template <size_t N>
std::string ints(const std::array<int64_t, N>& v) { return ints(v.data(), N); }

// `name=value` strings for a node's attributes, omitting spec defaults (see the file comment).
std::vector<std::string> attribute_strings(const Node& node) {
  std::vector<std::string> out;
  const int64_t rank = node.type.rank();
  auto is_last_axis = [rank](int64_t axis) { return axis == -1 || axis == rank - 1; };
  const Attrs defaults = default_attrs(node.op);
  // One case per attribute struct: an op with a new struct fails to compile here until the
  // printer knows it (the static_assert below).
  std::visit(
      [&](const auto& a) {
        using A = std::decay_t<decltype(a)>;
        [[maybe_unused]] const A& d = std::get<A>(defaults);
        if constexpr (std::is_same_v<A, GeluAttrs>) {
          if (a.tanh_approximation) out.push_back("approximate=\"tanh\"");
        } else if constexpr (std::is_same_v<A, CastAttrs>) {
          out.push_back("to=" + std::string(dtype_name(a.to)));
        } else if constexpr (std::is_same_v<A, ClampAttrs>) {
          if (a.min) out.push_back("min=" + format_double(*a.min));
          if (a.max) out.push_back("max=" + format_double(*a.max));
        } else if constexpr (std::is_same_v<A, ReduceAttrs>) {
          if (!a.all_axes) out.push_back("axes=" + ints(a.axes));
          if (a.keepdims) out.push_back("keepdims=true");
        } else if constexpr (std::is_same_v<A, ArgMaxAttrs>) {
          if (a.axis != d.axis) out.push_back("axis=" + std::to_string(a.axis));
          if (a.keepdims) out.push_back("keepdims=true");
        } else if constexpr (std::is_same_v<A, AxisAttrs>) {
          // A default of -1 means "the last axis", however it is written.
          if (d.axis == -1 ? !is_last_axis(a.axis) : a.axis != d.axis) out.push_back("axis=" + std::to_string(a.axis));
        } else if constexpr (std::is_same_v<A, LayerNormAttrs>) {
          if (!is_last_axis(a.axis)) out.push_back("axis=" + std::to_string(a.axis));
          if (a.epsilon != d.epsilon) out.push_back("epsilon=" + format_double(a.epsilon));
        } else if constexpr (std::is_same_v<A, ReshapeAttrs>) {
          out.push_back("shape=" + shape_to_string(a.shape));
        } else if constexpr (std::is_same_v<A, TransposeAttrs>) {
          out.push_back("perm=" + ints(a.perm));
        } else if constexpr (std::is_same_v<A, BroadcastToAttrs>) {
          out.push_back("shape=" + shape_to_string(a.shape));
        } else if constexpr (std::is_same_v<A, TopKAttrs>) {
          out.push_back("k=" + std::to_string(a.k));
          if (!is_last_axis(a.axis)) out.push_back("axis=" + std::to_string(a.axis));
          if (!a.largest) out.push_back("largest=false");
        } else if constexpr (std::is_same_v<A, ScatterAttrs>) {
          if (a.axis != d.axis) out.push_back("axis=" + std::to_string(a.axis));
          if (a.reduction != d.reduction) {
            out.push_back("reduction=\"" + std::string(scatter_reduction_name(a.reduction)) + "\"");
          }
        } else if constexpr (std::is_same_v<A, IotaAttrs>) {
          out.push_back("shape=" + shape_to_string(a.shape));
          if (a.axis != d.axis) out.push_back("axis=" + std::to_string(a.axis));
          if (a.dtype != d.dtype) out.push_back("dtype=" + std::string(dtype_name(a.dtype)));
        } else if constexpr (std::is_same_v<A, SliceAttrs>) {
          out.push_back("starts=" + ints(a.starts));
          out.push_back("ends=" + ints(a.ends));
          bool default_axes = a.axes.empty() || a.axes.size() == a.starts.size();
          for (size_t i = 0; i < a.axes.size() && default_axes; ++i) default_axes = a.axes[i] == int64_t(i);
          if (!default_axes) out.push_back("axes=" + ints(a.axes));
          bool unit_steps = true;
          for (int64_t s : a.steps) unit_steps = unit_steps && s == 1;
          if (!unit_steps) out.push_back("steps=" + ints(a.steps));
        } else if constexpr (std::is_same_v<A, Conv2dAttrs>) {
          if (a.strides != d.strides) out.push_back("strides=" + ints(a.strides));
          if (a.pads != d.pads) out.push_back("pads=" + ints(a.pads));
          if (a.dilations != d.dilations) out.push_back("dilations=" + ints(a.dilations));
          if (a.groups != d.groups) out.push_back("groups=" + std::to_string(a.groups));
          if (a.channels_last) out.push_back("channels_last=true");
        } else if constexpr (std::is_same_v<A, Pool2dAttrs>) {
          out.push_back("kernel=" + ints(a.kernel));
          if (a.strides != d.strides) out.push_back("strides=" + ints(a.strides));
          if (a.pads != d.pads) out.push_back("pads=" + ints(a.pads));
          if (node.op == OpKind::kAvgPool2d && a.count_include_pad) out.push_back("count_include_pad=true");
          if (a.channels_last) out.push_back("channels_last=true");
        } else if constexpr (std::is_same_v<A, AttentionAttrs>) {
          if (a.scale) out.push_back("scale=" + format_double(*a.scale));
          if (a.causal) out.push_back("causal=true");
          if (a.seq_major) out.push_back("layout=\"bshd\"");
        } else {
          static_assert(std::is_same_v<A, NoAttrs> || std::is_same_v<A, InputAttrs> ||
                            std::is_same_v<A, ConstantAttrs>,
                        "attribute_strings: print the new attribute struct");
        }
      },
      node.attrs);
  return out;
}

class TextPrinter {
 public:
  TextPrinter(const Graph& graph, const PrintOptions& options) : graph_(graph), options_(options) {
    names_.reserve(graph.num_nodes());
    for (const Node& n : graph.nodes()) names_.push_back(n.name);
    plan_output_names();
  }

  std::string print() {
    if (!graph_.weights_path.empty()) out_ += "weights " + quote(graph_.weights_path) + "\n\n";
    print_signature();
    if (graph_.kernels().empty()) {
      for (NodeId id = 0; id < graph_.num_nodes(); ++id) {
        if (is_statement(id)) print_statement(id);
      }
    } else {
      print_fused();
    }
    for (const auto& [name, node] : aliases_) {
      const Node& n = graph_.node(node);
      out_ += "  " + name + " = reshape(" + names_[node] + ", shape=" + shape_to_string(n.type.shape) +
              ") : " + n.type.to_string() + "  # output alias\n";
    }
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  bool live(NodeId id) const { return id < graph_.num_nodes() && !graph_.node(id).erased; }
  bool is_statement(NodeId id) const { return live(id) && graph_.node(id).op != OpKind::kInput; }

  // Gives each graph output a defining statement of its own name (see the file comment).
  void plan_output_names() {
    std::set<std::string> taken;
    for (NodeId id = 0; id < graph_.num_nodes(); ++id) {
      if (live(id)) taken.insert(graph_.node(id).name);
    }
    std::vector<bool> renamed(graph_.num_nodes(), false);
    for (const GraphOutput& out : graph_.outputs()) {
      if (!live(out.node) || names_[out.node] == out.name) continue;
      bool node_name_is_an_output = false;
      for (const GraphOutput& other : graph_.outputs()) {
        node_name_is_an_output |= other.node == out.node && other.name == graph_.node(out.node).name;
      }
      const bool can_rename = graph_.node(out.node).op != OpKind::kInput && !renamed[out.node] &&
                              !node_name_is_an_output && !taken.count(out.name);
      if (can_rename) {
        names_[out.node] = out.name;
        renamed[out.node] = true;
      } else {
        aliases_.emplace_back(out.name, out.node);
      }
      taken.insert(out.name);
    }
  }

  void print_signature() {
    out_ += "graph " + (graph_.name.empty() ? std::string("main") : graph_.name) + "(";
    bool first = true;
    for (NodeId id : graph_.inputs()) {
      if (!live(id)) continue;
      out_ += (first ? "" : ", ") + names_[id] + ": " + graph_.node(id).type.to_string();
      first = false;
    }
    out_ += ") -> (";
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const GraphOutput& o = graph_.outputs()[i];
      out_ += (i > 0 ? ", " : "") + o.name + ": " + o.declared.to_string();
    }
    out_ += ") {\n";
  }

  void print_statement(NodeId id) {
    const Node& node = graph_.node(id);
    out_ += "  " + names_[id] + " = ";
    if (node.op == OpKind::kConstant) {
      print_constant(node);
      return;
    }
    out_ += std::string(op_name(node.op)) + "(";
    bool first = true;
    for (NodeId in : node.inputs) {
      out_ += (first ? "" : ", ") + (in < names_.size() ? names_[in] : "<missing>");
      first = false;
    }
    for (const std::string& attr : attribute_strings(node)) {
      out_ += (first ? "" : ", ") + attr;
      first = false;
    }
    out_ += ") : " + node.type.to_string() + "\n";
  }

  void print_constant(const Node& node) {
    const auto& attrs = std::get<ConstantAttrs>(node.attrs);
    if (attrs.constant_index >= graph_.constants().size()) {
      out_ += "const " + node.type.to_string() + " [...]  # missing constant data\n";
      return;
    }
    const Tensor& data = graph_.constant(attrs.constant_index);
    const std::string type = data.type().to_string();
    if (!attrs.weight_name.empty()) {
      out_ += "param " + type + " " + quote(attrs.weight_name) + "\n";
      return;
    }
    out_ += "const " + type + " ";
    const int64_t n = data.num_elements();
    if (n == 0) {
      // A splat over no elements; the value is never read.
      out_ += data.dtype() == DType::kBool ? "false" : is_float(data.dtype()) ? "0.0" : "0";
    } else if (all_elements_equal(data)) {
      out_ += format_element(data, 0);
    } else if (constant_is_elided(data, options_)) {
      std::string first_values;
      for (int64_t i = 0; i < std::min<int64_t>(n, 8); ++i) {
        first_values += (i > 0 ? ", " : "") + format_element(data, i);
      }
      out_ += "[...]  # " + std::to_string(n) + " elements elided (not parseable); first: " + first_values;
    } else {
      int64_t index = 0;
      append_nested(out_, data, 0, index);
    }
    out_ += "\n";
  }

  // Kernel groups in kernel order; nodes outside every kernel are printed as soon as all their
  // operands are defined, so the text keeps definitions before uses.
  void print_fused() {
    const size_t count = graph_.num_nodes();
    std::vector<bool> in_kernel(count, false);
    for (const Kernel& k : graph_.kernels()) {
      for (NodeId id : k.nodes) {
        if (id < count) in_kernel[id] = true;
      }
    }
    std::vector<bool> defined(count, false);
    for (NodeId id = 0; id < count; ++id) {
      if (live(id) && graph_.node(id).op == OpKind::kInput) defined[id] = true;
    }
    std::vector<bool> printed(count, false);
    auto ready = [&](NodeId id) {
      for (NodeId in : graph_.node(id).inputs) {
        if (in >= count || !defined[in]) return false;
      }
      return true;
    };
    auto emit_free_nodes = [&](bool force) {
      bool progress = true;
      while (progress) {
        progress = false;
        for (NodeId id = 0; id < count; ++id) {
          if (printed[id] || in_kernel[id] || !is_statement(id) || !(force || ready(id))) continue;
          print_statement(id);
          printed[id] = defined[id] = true;
          progress = true;
        }
      }
    };
    emit_free_nodes(false);
    for (const Kernel& k : graph_.kernels()) {
      out_ += "  # kernel " + k.name + " (" + std::string(kernel_kind_name(k.kind)) + ") from: " +
              name_list(k.nodes) + " -> writes: " + name_list(k.outputs) + "\n";
      for (NodeId id : k.nodes) {
        if (id >= count || printed[id] || !is_statement(id)) continue;
        print_statement(id);
        printed[id] = defined[id] = true;
      }
      emit_free_nodes(false);
    }
    emit_free_nodes(true);  // whatever a broken graph left over, in node order
  }

  std::string name_list(const std::vector<NodeId>& ids) const {
    std::string out;
    for (NodeId id : ids) out += (out.empty() ? "" : ", ") + (id < names_.size() ? names_[id] : "<missing>");
    return out;
  }

  const Graph& graph_;
  const PrintOptions& options_;
  std::vector<std::string> names_;  // the name each node prints under
  std::vector<std::pair<std::string, NodeId>> aliases_;  // output name -> value, printed last
  std::string out_;
};

}  // namespace

std::string print_graph(const Graph& graph, const PrintOptions& options) {
  return TextPrinter(graph, options).print();
}

bool constant_is_elided(const Tensor& data, const PrintOptions& options) {
  return options.max_literal_elements > 0 && data.num_elements() > options.max_literal_elements &&
         !all_elements_equal(data);
}

size_t count_elided_constants(const Graph& graph, const PrintOptions& options) {
  size_t count = 0;
  for (const Node& node : graph.nodes()) {
    const auto* c = std::get_if<ConstantAttrs>(&node.attrs);
    if (!node.erased && c && c->weight_name.empty() && c->constant_index < graph.constants().size() &&
        constant_is_elided(graph.constant(c->constant_index), options))
      ++count;
  }
  return count;
}

}  // namespace kiln::ir
