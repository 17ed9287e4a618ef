// The .graph parser: checks named attributes against their operator and stores them in the
// op's typed attribute struct (ir/ops.h). Each operator accepts exactly the attributes the spec
// lists for it; anything else is an "unknown attribute" error naming the op and the attribute.
#include <array>
#include <cmath>

#include "frontend/parser_internal.h"

namespace kiln::frontend::detail {
namespace {

using Kind = AttrValue::Kind;

// Either a message (the attribute's value is wrong) or nothing.
using Check = std::optional<std::string>;

struct Context {
  std::string op;
  const NamedAttr& attr;
  SourceLoc& error_loc;

  Check wrong(const std::string& expected, const AttrValue& found) const {
    error_loc = found.loc;
    return "attribute '" + attr.name + "' of '" + op + "' must be " + expected + ", found " +
           describe_attr_value(found);
  }
  Check bad(const std::string& message, const AttrValue& at) const {
    error_loc = at.loc;
    return "attribute '" + attr.name + "' of '" + op + "': " + message;
  }
};

Check get_int(const Context& c, int64_t& out) {
  if (c.attr.value.kind != Kind::kInt) return c.wrong("an integer", c.attr.value);
  out = c.attr.value.int_value;
  return std::nullopt;
}

Check get_bool(const Context& c, bool& out) {
  if (c.attr.value.kind != Kind::kBool) return c.wrong("true or false", c.attr.value);
  out = c.attr.value.bool_value;
  return std::nullopt;
}

Check get_float(const Context& c, double& out) {
  const AttrValue& v = c.attr.value;
  if (v.kind == Kind::kInt) {
    out = double(v.int_value);
  } else if (v.kind == Kind::kFloat) {
    out = v.float_value;
  } else {
    return c.wrong("a number", v);
  }
  return std::nullopt;
}

Check get_int_list(const Context& c, std::vector<int64_t>& out) {
  const AttrValue& v = c.attr.value;
  if (v.kind != Kind::kList) return c.wrong("a list of integers", v);
  out.clear();
  for (const AttrValue& e : v.list) {
    if (e.kind != Kind::kInt) return c.wrong("a list of integers", e);
    out.push_back(e.int_value);
  }
  return std::nullopt;
}

template <size_t N>
Check get_fixed_list(const Context& c, std::array<int64_t, N>& out) {
  std::vector<int64_t> values;
  if (Check e = get_int_list(c, values)) return e;
  if (values.size() != N) {
    c.error_loc = c.attr.value.loc;
    return "attribute '" + c.attr.name + "' of '" + c.op + "' must be a list of " + std::to_string(N) +
           " integers, found " + std::to_string(values.size());
  }
  for (size_t i = 0; i < N; ++i) out[i] = values[i];
  return std::nullopt;
}

// A shape list: integers (>= -1 for reshape's inferred dim; >= 0 otherwise) and symbols.
Check get_shape(const Context& c, ir::Shape& out, bool allow_minus_one) {
  const AttrValue& v = c.attr.value;
  if (v.kind != Kind::kList) return c.wrong("a list of sizes", v);
  out.clear();
  for (const AttrValue& e : v.list) {
    if (e.kind == Kind::kInt) {
      if (e.int_value < (allow_minus_one ? -1 : 0)) {
        return c.bad("size " + std::to_string(e.int_value) + " is not allowed" +
                         (allow_minus_one ? " (only -1, for the inferred size)" : ""),
                     e);
      }
      out.push_back(ir::Dim::of(e.int_value));
    } else if (e.kind == Kind::kIdent) {
      out.push_back(ir::Dim::symbol(e.text));
    } else {
      return c.wrong("a list of sizes (integers or symbolic sizes)", e);
    }
  }
  return std::nullopt;
}

Check unknown(const Context& c) {
  c.error_loc = c.attr.name_loc;
  return "unknown attribute '" + c.attr.name + "' for operator '" + c.op + "'";
}

}  // namespace

std::string describe_attr_value(const AttrValue& value) {
  switch (value.kind) {
    case Kind::kInt: return "an integer";
    case Kind::kFloat: return "a floating-point number";
    case Kind::kString: return "a string";
    case Kind::kDType: return "a dtype";
    case Kind::kBool: return "a boolean";
    case Kind::kIdent: return "identifier '" + value.text + "'";
    case Kind::kList: return "a list";
  }
  return "a value";
}

std::vector<std::string_view> required_attributes(ir::OpKind kind) {
  std::vector<std::string_view> out;
  for (std::string_view name : ir::op_info(kind).required_attrs) {
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

std::optional<std::string> apply_attribute(ir::OpKind kind, ir::Attrs& attrs, const NamedAttr& attr,
                                           SourceLoc& error_loc) {
  Context c{std::string(ir::op_name(kind)), attr, error_loc};
  const std::string& name = attr.name;
  const AttrValue& v = attr.value;

  // Symbols are only meaningful in shape lists; elsewhere they are wrong-type errors.
  if (auto* a = std::get_if<ir::GeluAttrs>(&attrs)) {
    if (name != "approximate") return unknown(c);
    if (v.kind != Kind::kString) return c.wrong("\"none\" or \"tanh\"", v);
    if (v.text != "none" && v.text != "tanh") return c.bad("must be \"none\" or \"tanh\", not \"" + v.text + "\"", v);
    a->tanh_approximation = v.text == "tanh";
    return std::nullopt;
  }
  if (auto* a = std::get_if<ir::CastAttrs>(&attrs)) {
    if (name != "to") return unknown(c);
    if (v.kind != Kind::kDType) return c.wrong("a dtype (f32, f16, bf16, i64, i32, i8, u8, bool)", v);
    a->to = v.dtype;
    return std::nullopt;
  }
  if (auto* a = std::get_if<ir::ClampAttrs>(&attrs)) {
    if (name != "min" && name != "max") return unknown(c);
    double bound = 0;
    if (Check e = get_float(c, bound)) return e;
    if (std::isnan(bound)) return c.bad("a bound cannot be nan", v);
    (name == "min" ? a->min : a->max) = bound;
    return std::nullopt;
  }
  if (auto* a = std::get_if<ir::ReduceAttrs>(&attrs)) {
    if (name == "axes") {
      if (Check e = get_int_list(c, a->axes)) return e;
      a->all_axes = false;
      return std::nullopt;
    }
    if (name == "keepdims") return get_bool(c, a->keepdims);
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::ArgMaxAttrs>(&attrs)) {
    if (name == "axis") return get_int(c, a->axis);
    if (name == "keepdims") return get_bool(c, a->keepdims);
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::AxisAttrs>(&attrs)) {
    if (name == "axis") return get_int(c, a->axis);
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::LayerNormAttrs>(&attrs)) {
    if (name == "axis") return get_int(c, a->axis);
    if (name == "epsilon") {
      if (Check e = get_float(c, a->epsilon)) return e;
      if (!(a->epsilon >= 0) || std::isinf(a->epsilon)) return c.bad("must be a finite number >= 0", v);
      return std::nullopt;
    }
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::ReshapeAttrs>(&attrs)) {
    if (name != "shape") return unknown(c);
    return get_shape(c, a->shape, /*allow_minus_one=*/true);
  }
  if (auto* a = std::get_if<ir::TransposeAttrs>(&attrs)) {
    if (name != "perm") return unknown(c);
    return get_int_list(c, a->perm);
  }
  if (auto* a = std::get_if<ir::BroadcastToAttrs>(&attrs)) {
    if (name != "shape") return unknown(c);
    return get_shape(c, a->shape, /*allow_minus_one=*/false);
  }
  if (auto* a = std::get_if<ir::TopKAttrs>(&attrs)) {
    if (name == "k") return get_int(c, a->k);
    if (name == "axis") return get_int(c, a->axis);
    if (name == "largest") return get_bool(c, a->largest);
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::ScatterAttrs>(&attrs)) {
    if (name == "axis") return get_int(c, a->axis);
    if (name == "reduction") {
      const char* expected = "\"none\", \"add\", \"mul\", \"max\" or \"min\"";
      if (v.kind != Kind::kString) return c.wrong(expected, v);
      std::optional<ir::ScatterReduction> r = ir::parse_scatter_reduction(v.text);
      if (!r) return c.bad("must be " + std::string(expected) + ", not \"" + v.text + "\"", v);
      a->reduction = *r;
      return std::nullopt;
    }
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::IotaAttrs>(&attrs)) {
    if (name == "shape") return get_shape(c, a->shape, /*allow_minus_one=*/false);
    if (name == "axis") return get_int(c, a->axis);
    if (name == "dtype") {
      if (v.kind != Kind::kDType) return c.wrong("a dtype (f32, f16, bf16, i64, i32, i8, u8)", v);
      a->dtype = v.dtype;
      return std::nullopt;
    }
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::SliceAttrs>(&attrs)) {
    if (name == "starts") return get_int_list(c, a->starts);
    if (name == "ends") return get_int_list(c, a->ends);
    if (name == "axes") return get_int_list(c, a->axes);
    if (name == "steps") return get_int_list(c, a->steps);
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::Conv2dAttrs>(&attrs)) {
    if (name == "strides") return get_fixed_list(c, a->strides);
    if (name == "pads") return get_fixed_list(c, a->pads);
    if (name == "dilations") return get_fixed_list(c, a->dilations);
    if (name == "groups") return get_int(c, a->groups);
    if (name == "channels_last") return get_bool(c, a->channels_last);
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::Pool2dAttrs>(&attrs)) {
    if (name == "kernel") return get_fixed_list(c, a->kernel);
    if (name == "strides") return get_fixed_list(c, a->strides);
    if (name == "pads") return get_fixed_list(c, a->pads);
    if (name == "count_include_pad" && kind == ir::OpKind::kAvgPool2d) return get_bool(c, a->count_include_pad);
    if (name == "channels_last") return get_bool(c, a->channels_last);
    return unknown(c);
  }
  if (auto* a = std::get_if<ir::AttentionAttrs>(&attrs)) {
    if (name == "scale") {
      double scale = 0;
      if (Check e = get_float(c, scale)) return e;
      if (!std::isfinite(scale)) return c.bad("must be a finite number", v);
      a->scale = scale;
      return std::nullopt;
    }
    if (name == "causal") return get_bool(c, a->causal);
    if (name == "layout") {
      if (v.kind != Kind::kString) return c.wrong("\"bhsd\" or \"bshd\"", v);
      if (v.text != "bhsd" && v.text != "bshd") return c.bad("must be \"bhsd\" or \"bshd\", not \"" + v.text + "\"", v);
      a->seq_major = v.text == "bshd";
      return std::nullopt;
    }
    return unknown(c);
  }
  // NoAttrs (and the source kinds, which are never called by name).
  return unknown(c);
}

}  // namespace kiln::frontend::detail
