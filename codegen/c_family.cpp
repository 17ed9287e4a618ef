// C-family emitter core: the dialect vocabulary, types, memory access, elementwise expressions
// and the final assembly of a kernel (see c_family_internal.h for the file split).
#include <cmath>
#include <cstdio>

#include "codegen/c_family_internal.h"
#include "support/check.h"

namespace kiln::codegen {
namespace cfam {

using ir::DType;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

Num num_of(DType dtype) {
  if (ir::is_float(dtype)) return Num::kF;
  // u32 computes in 64 bits, where every value is non-negative, so that division, comparison
  // and conversion behave as unsigned; stores keep the low 32 bits.
  return dtype == DType::kI64 || dtype == DType::kU32 ? Num::kL : Num::kI;
}

void Emitter::line(const std::string& text) {
  body_.append(size_t(indent_) * 2, ' ');
  body_ += text;
  body_ += '\n';
}

std::string Emitter::units_loop(const std::string& var, const std::string& total, uint32_t group_size) const {
  if (cpu()) return "for (IDX " + var + " = begin; " + var + " < end; ++" + var + ")";
  if (group_size == 0) return "for (IDX " + var + " = gid; " + var + " < " + total + "; " + var + " += ngroups)";
  const std::string wg = "TO_IDX(" + std::to_string(group_size) + ")";
  return "for (IDX " + var + " = gid * " + wg + " + lid; " + var + " < " + total + "; " + var + " += ngroups * " + wg + ")";
}

std::string Emitter::barrier() const {
  if (cpu()) return "";  // one thread per work-group
  if (cuda()) return "__syncthreads();";
  return glsl() ? "memoryBarrierShared(); barrier();" : "barrier(CLK_LOCAL_MEM_FENCE);";
}

std::string Emitter::shared_array(const std::string& type, const std::string& base, uint32_t size) {
  std::string name = fresh(base);
  const std::string decl = type + " " + name + "[" + std::to_string(size) + "];\n";
  shared_decls_ += glsl() ? "shared " + decl : (cuda() ? "  __shared__ " : cpu() ? "  " : "  __local ") + decl;
  return name;
}

std::string Emitter::lit(Num n, const std::string& v) const {
  if (n == Num::kF) return "TO_F(" + v + ")";
  return n == Num::kL ? "TO_L(" + v + "l)" : v;  // GLSL needs the suffix beyond 32 bits
}

std::string Emitter::float_lit(double v) const {
  if (std::isnan(v)) return "U2F(0x7fc00000u)";
  if (std::isinf(v)) return v > 0 ? "U2F(0x7f800000u)" : "U2F(0xff800000u)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (std::fabs(v) > 3.4e38) return v > 0 ? "U2F(0x7f800000u)" : "U2F(0xff800000u)";
  return s + "f";
}

std::string Emitter::dim(const ir::Dim& d) const {
  if (d.is_static()) return "TO_IDX(" + std::to_string(d.size()) + ")";
  // "k_N": a symbol argument; a product of symbols multiplies them.
  const std::vector<std::string> factors = d.symbol_factors();
  if (factors.size() == 1 && d.coefficient() == 1) return sanitize_identifier(factors[0]);
  std::string out = "(TO_IDX(" + std::to_string(d.coefficient()) + ")";
  for (const std::string& f : factors) out += " * " + sanitize_identifier(f);
  return out + ")";
}

std::string Emitter::product(const ir::Shape& shape) const {
  std::string out;
  int64_t constant = 1;
  for (const ir::Dim& d : shape) {
    if (d.is_static()) constant *= d.size();
    else out += (out.empty() ? "" : " * ") + dim(d);
  }
  if (out.empty()) return "TO_IDX(" + std::to_string(constant) + ")";
  if (constant != 1) out += " * TO_IDX(" + std::to_string(constant) + ")";
  return "(" + out + ")";
}

std::vector<std::string> Emitter::decompose(const std::string& lin, const ir::Shape& shape) {
  std::vector<std::string> coords(shape.size());
  if (shape.empty()) return coords;
  const std::string rest = fresh("r");
  line("IDX " + rest + " = " + lin + ";");
  for (size_t i = shape.size(); i-- > 0;) {
    coords[i] = fresh("c");
    if (i == 0) {
      line("IDX " + coords[i] + " = " + rest + ";");
    } else if (shape[i].is_one()) {
      line("IDX " + coords[i] + " = TO_IDX(0);");
    } else {
      line("IDX " + coords[i] + " = " + rest + " % " + dim(shape[i]) + "; " + rest + " = " + rest +
           " / " + dim(shape[i]) + ";");
    }
  }
  return coords;
}

std::string Emitter::row_major_offset(const ir::Shape& shape, const std::vector<std::string>& coords) const {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i].is_one()) continue;
    ir::Shape rest(shape.begin() + long(i) + 1, shape.end());
    std::string term = coords[i];
    if (!rest.empty()) term = "(" + term + ") * " + product(rest);
    out += (out.empty() ? "" : " + ") + term;
  }
  return out.empty() ? "TO_IDX(0)" : "(" + out + ")";
}

std::string Emitter::broadcast_offset(const ir::Shape& shape, const std::vector<std::string>& coords) const {
  const size_t rank = coords.size();
  std::vector<std::string> aligned;
  for (size_t i = 0; i < shape.size(); ++i) aligned.push_back(coords[rank - shape.size() + i]);
  return row_major_offset(shape, aligned);
}

// CUDA C and the host C++ dialect spell loads and stores alike (16-bit floats through k_h2f and
// k_f2h, signed char for i8); OpenCL C differs there, GLSL in its casts.
std::string Emitter::load(int buffer, const std::string& offset) const {
  if (word_buffer(buffer)) return load_word(buffer, offset);  // GLSL fallback variant
  const std::string b = "b" + std::to_string(buffer) + (glsl() ? ".d" : "");
  const std::string at = b + "[" + offset + "]";
  switch (m_.buffers[size_t(buffer)].dtype) {
    case DType::kF32: case DType::kI32: case DType::kI64: return at;
    case DType::kU32: return "TO_L(" + at + ")";
    case DType::kF64: return "TO_F(" + at + ")";
    case DType::kF16:
      if (cpu() || cuda()) return "k_h2f(" + at + ")";
      return glsl() ? "float(" + at + ")" : "vload_half((size_t)(" + offset + "), " + b + ")";
    case DType::kBF16: return "k_bf2f(" + std::string(glsl() ? "uint(" : "(uint)(") + at + "))";
    case DType::kI16: case DType::kU16: case DType::kI8: case DType::kU8: case DType::kBool:
      return "TO_I(" + at + ")";
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      return float8_decode(m_.buffers[size_t(buffer)].dtype, "TO_U(" + at + ")");
  }
  return at;
}

void Emitter::store(int buffer, const std::string& offset, const std::string& v) {
  if (word_buffer(buffer)) return store_word(buffer, offset, v);  // GLSL fallback variant
  const std::string b = "b" + std::to_string(buffer) + (glsl() ? ".d" : "");
  const std::string at = b + "[" + offset + "]";
  switch (m_.buffers[size_t(buffer)].dtype) {
    case DType::kF32: case DType::kI32: case DType::kI64: line(at + " = " + v + ";"); return;
    case DType::kF16:
      if (cpu() || cuda()) return line(at + " = k_f2h(" + v + ");");
      line(glsl() ? at + " = float16_t(" + v + ");" : "vstore_half_rte(" + v + ", (size_t)(" + offset + "), " + b + ");");
      return;
    case DType::kBF16: line(at + " = " + (glsl() ? "uint16_t(" : "(ushort)(") + "k_f2bf(" + v + "));"); return;
    case DType::kI8: line(at + " = " + (glsl() ? "int8_t(" : cpu() || cuda() ? "(signed char)(" : "(char)(") + v + ");"); return;
    case DType::kU8: case DType::kBool: line(at + " = " + (glsl() ? "uint8_t(" : "(uchar)(") + v + ");"); return;
    case DType::kI16: line(at + " = " + (glsl() ? "int16_t(" : "(short)(") + v + ");"); return;
    case DType::kU16: line(at + " = " + (glsl() ? "uint16_t(" : "(ushort)(") + v + ");"); return;
    case DType::kU32: line(at + " = " + (glsl() ? "uint(" : "(uint)(") + v + ");"); return;
    case DType::kF64: line(at + " = " + (glsl() ? "double(" : "(double)(") + v + ");"); return;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      line(at + " = " + (glsl() ? "uint8_t(" : "(uchar)(") + float8_encode(m_.buffers[size_t(buffer)].dtype, v) + ");");
      return;
  }
}

std::string Emitter::convert(const std::string& e, Num from, DType to) const {
  switch (to) {
    case DType::kF64: case DType::kF32: case DType::kF16: case DType::kBF16:
      return from == Num::kF ? e : "TO_F(" + e + ")";
    case DType::kI64:
      return from == Num::kF ? "k_f2l(" + e + ")" : from == Num::kI ? "TO_L(" + e + ")" : e;
    case DType::kI32:
      return from == Num::kF ? "k_f2i(" + e + ")" : from == Num::kL ? "TO_I(" + e + ")" : e;
    case DType::kI8: case DType::kU8: case DType::kI16: case DType::kU16: {
      // Floats truncate and saturate (NaN -> 0); integers wrap: the low bits kept and, for a
      // signed type, the sign bit flipped and subtracted, which sign-extends without C's
      // undefined signed shifts.
      const auto [lo, hi] = ir::integer_range(to);
      if (from == Num::kF)
        return "TO_I(clamp(k_f2i(" + e + "), " + std::to_string(lo) + ", " + std::to_string(hi) + "))";
      const std::string low_bits = "(TO_I(" + e + ") & " + std::to_string(hi - lo) + ")";
      if (lo == 0) return low_bits;
      return "((" + low_bits + " ^ " + std::to_string(-lo) + ") - " + std::to_string(-lo) + ")";
    }
    case DType::kU32:
      return from == Num::kF ? "clamp(k_f2l(" + e + "), " + lit(Num::kL, "0") + ", " + lit(Num::kL, "4294967295") + ")"
                             : "(TO_L(" + e + ") & " + lit(Num::kL, "4294967295") + ")";
    case DType::kBool:
      return "(" + e + " != " + lit(from, "0") + " ? 1 : 0)";
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      // Rounded to the type here, not only when stored: with 2 or 3 mantissa bits, keeping the
      // f32 value through the rest of a fused kernel would be far from the reference's result.
      return float8_decode(to, float8_encode(to, from == Num::kF ? e : "TO_F(" + e + ")"));
  }
  return e;
}

std::string Emitter::value(NodeId v, Point& p) {
  auto it = p.vals.find(v);
  if (it != p.vals.end()) return it->second;
  const int b = m_.buffer_index(v);
  if (b < 0) {
    fail(internal_error("kernel '" + m_.kernel->name + "': value '" + m_.node(v).name +
                        "' is neither computed in the kernel nor read from memory"));
    return "0";
  }
  const std::string name = fresh("t");
  const ir::Shape& shape = m_.buffers[size_t(b)].shape;
  const std::string offset = !p.linear.empty() && shape == p.space ? p.linear : broadcast_offset(shape, p.coords);
  line(ctype(num_of(m_.buffers[size_t(b)].dtype)) + " " + name + " = " + load(b, offset) + ";");
  p.vals[v] = name;
  return name;
}

std::string Emitter::expand(std::string_view form, const std::vector<std::string>& operands, Num kind) const {
  std::string out;
  for (size_t i = 0; i < form.size(); ++i) {
    if (form[i] != '{') {
      out += form[i];
      continue;
    }
    const size_t end = form.find('}', i);
    const std::string_view key = form.substr(i + 1, end - i - 1);
    i = end;
    if (key.size() == 1 && key[0] >= '0' && key[0] <= '9') out += operands.at(size_t(key[0] - '0'));
    else if (key == "k") out += kind == Num::kL ? "l" : "i";
    else if (key.substr(0, 4) == "lit:") out += lit(kind, std::string(key.substr(4)));
    else if (key == "lowest") out += kind == Num::kF ? "U2F(0xff800000u)" : kind == Num::kL ? "(-9223372036854775807l - 1l)" : "(-2147483647 - 1)";
    else if (key == "highest") out += kind == Num::kF ? "U2F(0x7f800000u)" : kind == Num::kL ? "9223372036854775807l" : "2147483647";
    else KILN_CHECK(false, "unknown placeholder in a C expression template");
  }
  return out;
}

std::string_view Emitter::float_form(const ir::Node& n) const {
  const ir::CExpr& e = ir::op_info(n.op).expr;
  // The CPU dialect spells C math as OpenCL C does (float overloads, c_family_prelude.cpp).
  const std::string_view override_form = cuda() ? e.cuda_float_form : glsl() ? e.glsl_float_form : e.opencl_float_form;
  if (!override_form.empty()) return override_form;
  return e.float_form_for ? e.float_form_for(n.attrs) : e.float_form;
}

std::string Emitter::elementwise_expr(const Node& n, const std::vector<std::string>& a,
                                      const std::vector<DType>& t, Num& kind) {
  const OpKind op = n.op;
  const ir::OpInfo& info = ir::op_info(op);
  auto any_float = [&]() {
    for (DType d : t) if (ir::is_float(d)) return true;
    return false;
  };
  auto as_kind = [&](size_t i, Num k) {
    const Num from = num_of(t[i]);
    if (from == k) return a[i];
    return k == Num::kF ? "TO_F(" + a[i] + ")" : k == Num::kL ? "TO_L(" + a[i] + ")" : "TO_I(" + a[i] + ")";
  };
  // Expands the table's `form` over `operands` in the number kind `k`.
  auto from_table = [&](std::string_view form, const std::vector<std::string>& operands, Num k) -> std::string {
    if (form.empty()) {
      fail(unsupported("kernel '" + m_.kernel->name + "': op '" + std::string(info.name) +
                       "' has no C expression in the operator table"));
      return "0";
    }
    kind = info.expr.bool_result ? Num::kI : k;
    std::string sized(form);  // {bits}: the result dtype's width (shifts)
    for (size_t at; (at = sized.find("{bits}")) != std::string::npos;)
      sized.replace(at, 6, std::to_string(8 * ir::dtype_size(n.type.dtype)));
    return expand(sized, operands, k);
  };
  // The table's template in the number kind `k`, every operand converted to it.
  auto templated = [&](Num k) {
    std::vector<std::string> operands;
    for (size_t i = 0; i < a.size(); ++i) operands.push_back(as_kind(i, k));
    return from_table(k == Num::kF ? float_form(n) : info.expr.int_form, operands, k);
  };
  // Integer operands compute in 64 bits when either is 64-bit.
  auto int_kind = [&]() {
    for (DType d : t) if (num_of(d) == Num::kL) return Num::kL;
    return Num::kI;
  };
  switch (info.family) {
    case ir::OpFamily::kUnary:
      // An integer operand stays integer where the op has an integer form.
      if (!ir::is_float(t[0]) && !ir::is_float(n.type.dtype) && !info.expr.int_form.empty()) {
        return templated(num_of(t[0]));
      }
      return templated(Num::kF);
    case ir::OpFamily::kBinary:
    case ir::OpFamily::kCompare:
      return templated(any_float() ? Num::kF : int_kind());
    case ir::OpFamily::kLogic: {
      // Operands are truth-tested in their own kind.
      std::vector<std::string> truths;
      for (size_t i = 0; i < a.size(); ++i) truths.push_back("(" + a[i] + " != " + lit(num_of(t[i]), "0") + ")");
      return from_table(info.expr.int_form, truths, Num::kI);
    }
    case ir::OpFamily::kSelect: {
      kind = num_of(n.type.dtype);
      return "(" + a[0] + " != " + lit(num_of(t[0]), "0") + " ? " + as_kind(1, kind) + " : " + as_kind(2, kind) + ")";
    }
    case ir::OpFamily::kConvert: {
      if (op == OpKind::kCast) {
        // To an 8-bit float: the operand as f32; emit_elementwise's convert rounds it, once.
        if (ir::is_float8(n.type.dtype)) return as_kind(0, Num::kF);
        kind = num_of(n.type.dtype);
        return convert(a[0], num_of(t[0]), n.type.dtype);
      }
      ir::ClampAttrs c;
      if (const auto* attrs = std::get_if<ir::ClampAttrs>(&n.attrs)) c = *attrs;
      if (ir::is_float(t[0]) || ir::is_float(n.type.dtype)) {
        kind = Num::kF;
        std::string x = as_kind(0, Num::kF);
        if (c.min) x = "(" + x + " < " + float_lit(*c.min) + " ? " + float_lit(*c.min) + " : " + x + ")";
        if (c.max) x = "(" + x + " > " + float_lit(*c.max) + " ? " + float_lit(*c.max) + " : " + x + ")";
        return x;
      }
      kind = num_of(t[0]);
      const double lo_limit = kind == Num::kL ? -9.2e18 : -2147483648.0;
      const double hi_limit = kind == Num::kL ? 9.2e18 : 2147483647.0;
      std::string x = a[0];
      auto bound = [&](double v) {
        v = std::fmin(std::fmax(v, lo_limit), hi_limit);
        return lit(kind, std::to_string(int64_t(v)));
      };
      if (c.min) { std::string lo = bound(std::ceil(*c.min)); x = "(" + x + " < " + lo + " ? " + lo + " : " + x + ")"; }
      if (c.max) { std::string hi = bound(std::floor(*c.max)); x = "(" + x + " > " + hi + " ? " + hi + " : " + x + ")"; }
      return x;
    }
    case ir::OpFamily::kSource: case ir::OpFamily::kReduce: case ir::OpFamily::kNormalize:
    case ir::OpFamily::kLinalg: case ir::OpFamily::kAttention: case ir::OpFamily::kLayout: case ir::OpFamily::kConv:
      break;
  }
  fail(unsupported("kernel '" + m_.kernel->name + "': op '" + std::string(ir::op_name(op)) +
                   "' is not elementwise"));
  kind = Num::kF;
  return "0.0f";
}

void Emitter::emit_elementwise(NodeId id, Point& p) {
  const Node& n = m_.node(id);
  std::vector<std::string> args;
  std::vector<DType> types;
  for (NodeId in : n.inputs) {
    args.push_back(value(in, p));
    types.push_back(m_.node(in).type.dtype);
  }
  Num kind = Num::kF;
  const std::string expr = elementwise_expr(n, args, types, kind);
  const std::string name = fresh("v");
  line(ctype(num_of(n.type.dtype)) + " " + name + " = " + convert(expr, kind, n.type.dtype) + ";");
  p.vals[id] = name;
}

void Emitter::finish_anchor(Point& p, const std::string& type, const std::string& value) {
  const std::string av = fresh("a");
  line(type + " " + av + " = " + value + ";");
  p.vals[m_.anchor] = av;
  for (NodeId n : m_.epilogue) emit_elementwise(n, p);
  store_outputs(p);
}

void Emitter::store_outputs(Point& p) {
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    if (!m_.buffers[b].written) continue;
    auto it = p.vals.find(m_.buffers[b].value);
    if (it == p.vals.end()) continue;
    const ir::Shape& shape = m_.buffers[b].shape;
    store(int(b), !p.linear.empty() && shape == p.space ? p.linear : row_major_offset(shape, p.coords), it->second);
  }
}

namespace {

// A buffer's element type in each dialect's kernel signature; the host C++ dialect (cpu) spells
// them as CUDA C does. 16-bit floats are raw 16-bit words where the dialect lacks the type, and
// 8-bit floats are bytes.
struct StorageTypes {
  const char* glsl;
  const char* opencl;
  const char* cuda;
};

StorageTypes storage_types(DType d) {
  switch (d) {
    case DType::kF64: return {"double", "double", "double"};
    case DType::kF32: return {"float", "float", "float"};
    case DType::kF16: return {"float16_t", "half", "ushort"};
    case DType::kBF16: return {"uint16_t", "ushort", "ushort"};
    case DType::kI64: return {"int64_t", "long", "long long"};
    case DType::kI32: return {"int", "int", "int"};
    case DType::kI16: return {"int16_t", "short", "short"};
    case DType::kI8: return {"int8_t", "char", "signed char"};
    case DType::kU32: return {"uint", "uint", "uint"};
    case DType::kU16: return {"uint16_t", "ushort", "ushort"};
    case DType::kU8: case DType::kBool: return {"uint8_t", "uchar", "uchar"};
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      return {"uint8_t", "uchar", "uchar"};
  }
  return {"float", "float", "float"};
}

}  // namespace

Result<RenderedKernel> Emitter::render() {
  // Does anything need 64-bit integers (i64 and u32 values, argmax results)? 8-bit floats?
  // Does a buffer hold f64 (Vulkan's shaderFloat64, OpenCL's cl_khr_fp64)?
  auto is_64 = [](DType d) { return num_of(d) == Num::kL; };
  bool holds_f64 = false;
  for (const ModelBuffer& b : m_.buffers) {
    uses_i64_ = uses_i64_ || is_64(b.dtype);
    uses_float8_ = uses_float8_ || ir::is_float8(b.dtype);
    holds_f64 = holds_f64 || b.dtype == DType::kF64;
  }
  for (NodeId n : m_.kernel->nodes) {
    uses_i64_ = uses_i64_ || is_64(m_.node(n).type.dtype);
    uses_float8_ = uses_float8_ || ir::is_float8(m_.node(n).type.dtype);
    for (NodeId in : m_.node(n).inputs) uses_i64_ = uses_i64_ || is_64(m_.node(in).type.dtype);
  }
  if (cpu()) {
    line("IDX lid = TO_IDX(0);");  // a work-group of one
  } else {
    line("IDX lid = TO_IDX(" + std::string(glsl() ? "gl_LocalInvocationID.x" : cuda() ? "threadIdx.x" : "get_local_id(0)") + ");");
    line("IDX gid = TO_IDX(" + std::string(glsl() ? "gl_WorkGroupID.x" : cuda() ? "blockIdx.x" : "get_group_id(0)") + ");");
    line("IDX ngroups = TO_IDX(" + std::string(glsl() ? "gl_NumWorkGroups.x" : cuda() ? "gridDim.x" : "get_num_groups(0)") + ");");
  }
  if (cuda()) emit_cuda();
  else switch (m_.kind) {
    case KernelTemplate::kPointwise: emit_pointwise(); break;
    case KernelTemplate::kRowReduce: emit_rows(); break;
    case KernelTemplate::kMatMul: cpu() ? emit_cpu_matmul() : emit_matmul(); break;
    case KernelTemplate::kAttention: emit_attention(m_.dispatch.workgroup_size); break;
  }
  if (!error_.is_ok()) return error_;

  const uint32_t wg = m_.dispatch.workgroup_size;
  std::string src;
  RenderedKernel out;
  const std::string header = "// Kiln kernel " + m_.kernel->name + " (" +
                             std::string(ir::kernel_kind_name(m_.kernel->kind)) + ")\n";
  if (glsl()) {
    std::set<std::string> exts;
    for (const ModelBuffer& b : m_.buffers) {
      if (word_storage_ && ir::dtype_size(b.dtype) < 4) continue;  // uint words: no 8/16-bit feature
      if (ir::dtype_size(b.dtype) == 2) {
        exts.insert("GL_EXT_shader_16bit_storage");
        if (b.dtype == DType::kF16) {
          exts.insert("GL_EXT_shader_explicit_arithmetic_types_float16");
          features_.insert("shader_float16");
        }
        if (b.dtype != DType::kF16) {  // bf16's bits and i16 / u16 are 16-bit integers
          exts.insert("GL_EXT_shader_explicit_arithmetic_types_int16");
          features_.insert("shader_int16");
        }
        features_.insert("storage_buffer_16bit");
      }
      if (ir::dtype_size(b.dtype) == 1) {
        exts.insert("GL_EXT_shader_8bit_storage");
        exts.insert("GL_EXT_shader_explicit_arithmetic_types_int8");
        features_.insert("shader_int8");
        features_.insert("storage_buffer_8bit");
      }
    }
    if (uses_i64_) {
      exts.insert("GL_EXT_shader_explicit_arithmetic_types_int64");
      features_.insert("shader_int64");
    }
    if (holds_f64) features_.insert("shader_float64");  // double is core GLSL 4.00
    src = "#version 450\n" + header;
    for (const std::string& e : exts) src += "#extension " + e + " : require\n";
    src += "layout(local_size_x = " + std::to_string(wg) + ") in;\n";
    for (size_t b = 0; b < m_.buffers.size(); ++b) {
      src += "layout(std430, set = 0, binding = " + std::to_string(b) + ") " +
             (m_.buffers[b].written ? "" : "readonly ") + "buffer B" + std::to_string(b) + " { " +
             (word_buffer(int(b)) ? std::string("uint") : storage_types(m_.buffers[b].dtype).glsl) + " d[]; } b" +
             std::to_string(b) + ";\n";
    }
    if (!m_.symbols.empty()) {
      src += "layout(push_constant) uniform PushConstants {";
      for (size_t i = 0; i < m_.symbols.size(); ++i) src += " uint p" + std::to_string(i) + ";";
      src += " } pc;\n";
    }
    src += prelude(d_, uses_i64_, uses_float8_);
    if (word_storage_) src += word_storage_prelude();
    src += shared_decls_;
    src += "void main() {\n";
    for (size_t i = 0; i < m_.symbols.size(); ++i)
      src += "  int " + sanitize_identifier(m_.symbols[i]) + " = int(pc.p" + std::to_string(i) + ");\n";
    src += body_ + "}\n";
  } else if (cpu()) {
    // Buffers are restrict for the reason given for CUDA below. The function is the module's
    // only exported symbol for this kernel (-fvisibility=hidden hides the helpers).
    src = header + prelude(d_, true, true) + "extern \"C\" __attribute__((visibility(\"default\"))) void " + m_.entry_point +
          "(void* const* kb, const long long* ks, long long begin, long long end) {\n";
    for (size_t b = 0; b < m_.buffers.size(); ++b) {
      const std::string type = std::string(m_.buffers[b].written ? "" : "const ") + storage_types(m_.buffers[b].dtype).cuda;
      src += "  " + type + (m_.in_place ? "* b" : "* __restrict b") + std::to_string(b) + " = (" + type + "*)kb[" +
             std::to_string(b) + "];\n";
    }
    for (size_t i = 0; i < m_.symbols.size(); ++i)
      src += "  long long " + sanitize_identifier(m_.symbols[i]) + " = ks[" + std::to_string(i) + "];\n";
    src += shared_decls_ + body_ + "}\n";
  } else if (cuda()) {
    // No prelude here: the CUDA target puts cuda_program_prelude() once atop the program.
    // Every buffer is __restrict__: the plan never lets a kernel's output overlap another of
    // its buffer arguments (outputs are placed before the launch's inputs are freed), except in
    // an in-place kernel (KernelModel::in_place).
    src = header + "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(wg) + ") " +
          m_.entry_point + "(";
    std::string params;
    for (size_t b = 0; b < m_.buffers.size(); ++b) {
      params += std::string(params.empty() ? "" : ", ") + (m_.buffers[b].written ? "" : "const ") +
                storage_types(m_.buffers[b].dtype).cuda + (m_.in_place ? "* b" : "* __restrict__ b") +
                std::to_string(b);
    }
    for (const std::string& s : m_.symbols)
      params += std::string(params.empty() ? "" : ", ") + "long long " + sanitize_identifier(s);
    src += params + ") {\n" + shared_decls_ + body_ + "}\n";
  } else {
    src = header + (holds_f64 ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" : "") +
          prelude(d_, uses_i64_, uses_float8_);
    src += "__kernel __attribute__((reqd_work_group_size(" + std::to_string(wg) + ", 1, 1))) void " +
           m_.entry_point + "(";
    std::string params;
    for (size_t b = 0; b < m_.buffers.size(); ++b) {
      params += std::string(params.empty() ? "" : ", ") + "__global " + (m_.buffers[b].written ? "" : "const ") +
                storage_types(m_.buffers[b].dtype).opencl + "* b" + std::to_string(b);
    }
    for (const std::string& s : m_.symbols)
      params += std::string(params.empty() ? "" : ", ") + "long " + sanitize_identifier(s);
    src += params + ") {\n" + shared_decls_ + body_ + "}\n";
  }
  out.source = std::move(src);
  out.required_features.assign(features_.begin(), features_.end());
  return out;
}

}  // namespace cfam

Result<RenderedKernel> render_c_family(const KernelModel& model, Dialect dialect) {
  if (dialect == Dialect::kCuda) {
    // The CUDA templates choose their own block sizes (cuda_config); render for exactly the
    // dispatch the target records.
    KernelModel cuda_model = model;
    cuda_model.dispatch = cuda_dispatch(model);
    cfam::Emitter emitter(cuda_model, dialect);
    return emitter.render();
  }
  if (dialect == Dialect::kCpu) {
    // One thread runs each work unit: the templates' work-groups have one thread.
    KernelModel cpu_model = model;
    cpu_model.dispatch.workgroup_size = 1;
    cfam::Emitter emitter(cpu_model, dialect);
    return emitter.render();
  }
  cfam::Emitter emitter(model, dialect);
  return emitter.render();
}

std::string cuda_program_prelude() { return cfam::prelude(Dialect::kCuda, true, true); }

}  // namespace kiln::codegen
