// The pointwise template (one work item per output element, grid-stride) and the anchors it
// hosts: layout ops (reshape copy, transpose, broadcast_to, slice, concat, gather, topk, iota,
// scatter), conv2d and pooling. Their elementwise epilogues run at the same output coordinates.
#include <algorithm>

#include "codegen/c_family_internal.h"

namespace kiln::codegen::cfam {

using ir::DType;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

void Emitter::emit_pointwise() {
  const std::string wg = "TO_IDX(" + std::to_string(m_.dispatch.workgroup_size) + ")";
  line("IDX total = " + product(m_.space) + ";");
  if (cpu()) emit_cpu_pointwise();
  else emit_pointwise_loop("gid * " + wg + " + lid", "ngroups * " + wg);
}

void Emitter::emit_pointwise_loop(const std::string& start, const std::string& step, const std::string& bound) {
  // CPU: no iteration reads what another writes (outputs never overlap other buffers, and an
  // in-place kernel reads each element where it writes it), which LLVM cannot prove for in-place
  // kernels without restrict.
  if (cpu()) line("#pragma clang loop vectorize(assume_safety)");
  open("for (IDX lin = " + start + "; lin < " + bound + "; lin += " + step + ")");
  Point p;
  p.space = m_.space;
  p.linear = "lin";
  p.coords = decompose("lin", m_.space);
  emit_pointwise_element(p, [&](const Node& anchor) { return pointwise_anchor(anchor, p, "lin"); });
  close();
}

void Emitter::emit_pointwise_element(Point& p, const std::function<std::string(const ir::Node&)>& anchor_value) {
  for (NodeId n : m_.kernel->nodes) {
    if (n == m_.anchor) {
      const Node& anchor = m_.node(n);
      const std::string v = anchor_value(anchor);
      const std::string name = fresh("a");
      line(ctype(num_of(anchor.type.dtype)) + " " + name + " = " + v + ";");
      p.vals[n] = name;
    } else {
      emit_elementwise(n, p);
    }
  }
  store_outputs(p);
}

namespace {

// The CPU's pointwise rows hold at least this many elements (innermost axes join until they
// do): shorter rows would spend more on their bookkeeping than the divisions they save. A space
// whose static trailing axes never reach it runs the plain element loop.
constexpr int64_t kCpuMinRowLength = 16;
// Channels-last pooling keeps one row of accumulators on the stack: at most this many.
constexpr int64_t kCpuMaxPoolRow = 4096;

bool is_pool(OpKind op) {
  return op == OpKind::kMaxPool2d || op == OpKind::kAvgPool2d || op == OpKind::kGlobalAvgPool2d;
}

}  // namespace

void Emitter::emit_cpu_pointwise() {
  // The element loop divides each linear index into coordinates; rows of the innermost axes do
  // that once per row, and the loop over a row is what LLVM vectorizes (unit-stride accesses of
  // pointwise ops, strided ones of transposes). A short innermost axis (NCHW -> NHWC's 3
  // channels) joins the axes before it until the row is long enough; the coordinates within the
  // row then come from its column in 32-bit arithmetic, which vectorizes.
  size_t row_axes = 0;
  int64_t row = 1;
  while (row_axes < m_.space.size() && row < kCpuMinRowLength) {
    const ir::Dim& d = m_.space[m_.space.size() - 1 - row_axes];
    if (!d.is_static() || d.size() > (int64_t(1) << 31) / row) break;
    row *= d.size();
    ++row_axes;
  }
  if (row_axes == 0 || row < kCpuMinRowLength) {
    emit_pointwise_loop("begin", "TO_IDX(1)", "end");
    return;
  }
  const ir::Shape outer(m_.space.begin(), m_.space.end() - long(row_axes));
  const Node* anchor = m_.anchor == ir::kNoNode ? nullptr : &m_.node(m_.anchor);
  std::optional<ir::Pool2dAttrs> pool;
  if (anchor && is_pool(anchor->op) && row_axes == 1) {
    ir::Pool2dAttrs pa;
    if (const auto* attrs = std::get_if<ir::Pool2dAttrs>(&anchor->attrs)) pa = *attrs;
    if (pa.channels_last && row <= kCpuMaxPoolRow) pool = pa;
  }
  line("IDX row_length = TO_IDX(" + std::to_string(row) + ");");
  open("for (IDX row = begin / row_length; row * row_length < end; ++row)");
  Point p;
  p.space = m_.space;
  p.linear = "lin";
  p.coords = decompose("row", outer);
  line("IDX row_start = row * row_length;");
  line("IDX col_begin = begin > row_start ? begin - row_start : TO_IDX(0);");
  line("IDX col_end = end < row_start + row_length ? end - row_start : row_length;");
  // Declared inside the column loop below: the column's coordinates on the row's axes.
  std::vector<std::string> row_coords;
  if (row_axes == 1) row_coords.push_back("col");
  else
    for (size_t i = 0; i < row_axes; ++i) row_coords.push_back(fresh("rc"));
  p.coords.insert(p.coords.end(), row_coords.begin(), row_coords.end());
  std::function<std::string(const Node&)> anchor_value = [&](const Node& a) { return pointwise_anchor(a, p, "lin"); };
  std::string pooled;
  if (pool) {
    // Channels-last pooling: the window's loops outside, the row of channels inside, so that
    // every window position is one vectorized pass over contiguous channels.
    std::vector<std::string> window_coords = p.coords;
    window_coords.back() = "TO_IDX(0)";
    pooled = emit_cpu_pool_row(*anchor, *pool, window_coords);
    anchor_value = [&](const Node& a) { return pool_result(a, pooled + "[col]", pooled + "_count"); };
  }
  line("#pragma clang loop vectorize(assume_safety)");
  open("for (IDX col = col_begin; col < col_end; ++col)");
  line("IDX lin = row_start + col;");
  if (row_axes > 1) {
    const std::string rest = fresh("ru");
    line("unsigned " + rest + " = (unsigned)col;");
    for (size_t i = row_axes; i-- > 0;) {
      const std::string size = std::to_string(m_.space[m_.space.size() - row_axes + i].size()) + "u";
      if (i == 0) line("IDX " + row_coords[i] + " = (IDX)" + rest + ";");
      else line("IDX " + row_coords[i] + " = (IDX)(" + rest + " % " + size + "); " + rest + " /= " + size + ";");
    }
  }
  emit_pointwise_element(p, anchor_value);
  close();
  close();
}

namespace {

// The coordinates of an image tensor's element (n, c, h, w) in its layout's axis order.
std::vector<std::string> image_coords(const ir::ImageAxes& ax, const std::string& n, const std::string& c,
                                      const std::string& h, const std::string& w) {
  std::vector<std::string> coords(4);
  coords[ax.n] = n;
  coords[ax.c] = c;
  coords[ax.h] = h;
  coords[ax.w] = w;
  return coords;
}

std::string clamp_literal(int64_t v, bool glsl) {
  const int64_t limit = glsl ? (int64_t(1) << 30) : (int64_t(1) << 62);
  return "TO_IDX(" + std::to_string(std::clamp(v, -limit, limit)) + ")";
}

}  // namespace

std::string Emitter::pointwise_anchor(const Node& a, Point& p, const std::string& lin) {
  auto buffer_of = [&](NodeId v) {
    const int b = m_.buffer_index(v);
    if (b < 0) fail(unsupported("kernel '" + m_.kernel->name + "': operand '" + m_.node(v).name +
                                "' of " + std::string(ir::op_name(a.op)) + " is not in memory"));
    return std::max(b, 0);
  };
  const Num kind = num_of(a.type.dtype);
  switch (a.op) {
    case OpKind::kReshape: {
      const int b = buffer_of(a.inputs[0]);
      return load(b, lin);
    }
    case OpKind::kBroadcastTo: {
      const int b = buffer_of(a.inputs[0]);
      return load(b, broadcast_offset(m_.node(a.inputs[0]).type.shape, p.coords));
    }
    case OpKind::kTranspose: {
      const int b = buffer_of(a.inputs[0]);
      const ir::Shape& in = m_.node(a.inputs[0]).type.shape;
      std::vector<int64_t> perm = std::get<ir::TransposeAttrs>(a.attrs).perm;
      if (perm.empty()) for (size_t d = in.size(); d-- > 0;) perm.push_back(int64_t(d));
      std::vector<std::string> in_coords(in.size(), "TO_IDX(0)");
      for (size_t d = 0; d < perm.size(); ++d) in_coords[size_t(perm[d])] = p.coords[d];
      return load(b, row_major_offset(in, in_coords));
    }
    case OpKind::kSlice: {
      const int b = buffer_of(a.inputs[0]);
      const ir::Shape& in = m_.node(a.inputs[0]).type.shape;
      const auto& s = std::get<ir::SliceAttrs>(a.attrs);
      std::vector<std::string> in_coords = p.coords;
      for (size_t i = 0; i < s.axes.size(); ++i) {
        const size_t axis = size_t(s.axes[i] < 0 ? s.axes[i] + int64_t(in.size()) : s.axes[i]);
        const int64_t step = i < s.steps.size() ? s.steps[i] : 1;
        const std::string start = fresh("st");
        line("IDX " + start + " = k_slice_start(" + clamp_literal(s.starts[i], glsl()) + ", " +
             clamp_literal(step, glsl()) + ", " + dim(in[axis]) + ");");
        in_coords[axis] = "(" + start + " + " + p.coords[axis] + " * " + clamp_literal(step, glsl()) + ")";
      }
      return load(b, row_major_offset(in, in_coords));
    }
    case OpKind::kConcat: {
      const size_t axis = size_t(std::get<ir::AxisAttrs>(a.attrs).axis < 0
                                     ? std::get<ir::AxisAttrs>(a.attrs).axis + int64_t(a.type.shape.size())
                                     : std::get<ir::AxisAttrs>(a.attrs).axis);
      const std::string out = fresh("cc");
      line(ctype(kind) + " " + out + ";");
      std::string begin = "TO_IDX(0)";
      for (size_t i = 0; i < a.inputs.size(); ++i) {
        const ir::Shape& in = m_.node(a.inputs[i]).type.shape;
        const std::string end = "(" + begin + " + " + dim(in[axis]) + ")";
        const bool last = i + 1 == a.inputs.size();
        if (i == 0) open(last ? "if (true)" : "if (" + p.coords[axis] + " < " + end + ")");
        else open(last ? "else" : "else if (" + p.coords[axis] + " < " + end + ")");
        std::vector<std::string> in_coords = p.coords;
        in_coords[axis] = "(" + p.coords[axis] + " - " + begin + ")";
        line(out + " = " + load(buffer_of(a.inputs[i]), row_major_offset(in, in_coords)) + ";");
        close();
        begin = end;
      }
      return out;
    }
    case OpKind::kGather: {
      const ir::Shape& x = m_.node(a.inputs[0]).type.shape;
      const ir::Shape& idx = m_.node(a.inputs[1]).type.shape;
      int64_t axis = std::get<ir::AxisAttrs>(a.attrs).axis;
      if (axis < 0) axis += int64_t(x.size());
      std::vector<std::string> idx_coords(p.coords.begin() + axis, p.coords.begin() + axis + long(idx.size()));
      // The index semantics of every device and the reference interpreter (docs/graph-format.md):
      // a negative index counts from the end once, then anything out of range is clamped to
      // [0, size - 1]. i64 indices are wrapped and clamped in 64 bits before they narrow to IDX
      // (32-bit in GLSL), so huge values clamp instead of wrapping around.
      const bool wide = m_.node(a.inputs[1]).type.dtype == ir::DType::kI64;
      const std::string to = wide ? "TO_L" : "TO_IDX";
      const std::string size = to + "(" + dim(x[size_t(axis)]) + ")", zero = to + "(0)";
      const std::string g = fresh("g");
      line(std::string(wide ? "I64 " : "IDX ") + g + " = " + to + "(" +
           load(buffer_of(a.inputs[1]), row_major_offset(idx, idx_coords)) + ");");
      line("if (" + g + " < " + zero + ") " + g + " += " + size + ";");
      line(g + " = " + g + " < " + zero + " ? " + zero + " : (" + g + " >= " + size + " ? " + size + " - " + to +
           "(1) : " + g + ");");
      std::vector<std::string> x_coords(p.coords.begin(), p.coords.begin() + axis);
      x_coords.push_back("TO_IDX(" + g + ")");
      x_coords.insert(x_coords.end(), p.coords.begin() + axis + long(idx.size()), p.coords.end());
      const std::string value = load(buffer_of(a.inputs[0]), row_major_offset(x, x_coords));
      // An empty axis has no element to clamp to: the result is 0 (as the reference's).
      if (x[size_t(axis)].is_static() && x[size_t(axis)].size() > 0) return value;
      return "(" + dim(x[size_t(axis)]) + " > TO_IDX(0) ? " + value + " : " +
             lit(num_of(m_.node(a.inputs[0]).type.dtype), "0") + ")";
    }
    case OpKind::kTopK: {
      // The output's coordinate along the axis is the rank r: pick the best element r + 1 times,
      // each pick the best one ranked after the previous pick. O(k^2 n / 2) per row, which suits
      // the small k of classification and sampling heads.
      const auto& attrs = std::get<ir::TopKAttrs>(a.attrs);
      const size_t axis = size_t(attrs.axis);
      const ir::Shape& x = m_.node(a.inputs[0]).type.shape;
      const int bx = buffer_of(a.inputs[0]);
      const Num xk = num_of(m_.node(a.inputs[0]).type.dtype);
      const std::string t = ctype(xk);
      // before(v, i, w, j): v at index i ranks before w at j (ir::interp's topk_before).
      auto before = [&](const std::string& v, const std::string& i, const std::string& w, const std::string& j) {
        const std::string order = attrs.largest ? ">" : "<";
        const std::string plain = "(" + v + " " + order + " " + w + " || (" + v + " == " + w + " && " + i + " < " + j + "))";
        if (xk != Num::kF) return plain;
        const std::string vn = "isnan(" + v + ")", wn = "isnan(" + w + ")";
        return "((" + vn + " || " + wn + ") ? ((" + vn + " && " + wn + ") ? " + i + " < " + j + " : " +
               (attrs.largest ? vn : wn) + ") : " + plain + ")";
      };
      const std::string pv = fresh("pv"), pi = fresh("pi"), bv = fresh("bv"), bi = fresh("bi");
      const std::string r = fresh("r"), s = fresh("s"), v = fresh("v");
      line(t + " " + pv + " = " + lit(xk, "0") + ";");
      line("IDX " + pi + " = TO_IDX(-1);");
      open("for (IDX " + r + " = TO_IDX(0); " + r + " <= " + p.coords[axis] + "; ++" + r + ")");
      line(t + " " + bv + " = " + lit(xk, "0") + ";");
      line("IDX " + bi + " = TO_IDX(-1);");
      open("for (IDX " + s + " = TO_IDX(0); " + s + " < " + dim(x[axis]) + "; ++" + s + ")");
      std::vector<std::string> xc = p.coords;
      xc[axis] = s;
      line(t + " " + v + " = " + load(bx, row_major_offset(x, xc)) + ";");
      line("if (" + pi + " >= TO_IDX(0) && !" + before(pv, pi, v, s) + ") continue;");
      line("if (" + bi + " < TO_IDX(0) || " + before(v, s, bv, bi) + ") { " + bv + " = " + v + "; " + bi + " = " + s + "; }");
      close();
      line(pv + " = " + bv + ";");
      line(pi + " = " + bi + ";");
      close();
      return convert(pi, glsl() ? Num::kI : Num::kL, a.type.dtype);
    }
    case OpKind::kScatter: {
      // Each output element starts from the data and applies, in order, the updates of its line
      // along the axis (the same coordinates off the axis, within the updates' extents) whose
      // index hits it: no atomics, and duplicates resolve as in the reference (the last one
      // wins without a reduction). The work per element is the updates' extent along the axis.
      const auto& attrs = std::get<ir::ScatterAttrs>(a.attrs);
      const size_t axis = size_t(attrs.axis);
      const ir::Shape& x = m_.node(a.inputs[0]).type.shape;
      const ir::Shape& u = m_.node(a.inputs[2]).type.shape;
      const int bi = buffer_of(a.inputs[1]), bu = buffer_of(a.inputs[2]);
      const std::string acc = fresh("sc");
      line(ctype(kind) + " " + acc + " = " + load(buffer_of(a.inputs[0]), lin) + ";");
      // Off the axis, an output coordinate beyond the updates' extent has no update.
      std::string inside;
      for (size_t d = 0; d < x.size(); ++d) {
        if (d == axis || u[d] == x[d] || (u[d].is_static() && x[d].is_static() && u[d].size() >= x[d].size())) continue;
        inside += (inside.empty() ? "" : " && ") + p.coords[d] + " < " + dim(u[d]);
      }
      if (!inside.empty()) open("if (" + inside + ")");
      // The index semantics of every device and the reference: a negative index counts from the
      // end once; one still out of range matches no element (the update is dropped). i64
      // indices compare in 64 bits, so huge values cannot wrap onto a valid coordinate in GLSL.
      const bool wide = m_.node(a.inputs[1]).type.dtype == DType::kI64;
      const std::string to = wide ? "TO_L" : "TO_IDX";
      const std::string j = fresh("j"), off = fresh("uo"), g = fresh("g");
      open("for (IDX " + j + " = TO_IDX(0); " + j + " < " + dim(u[axis]) + "; ++" + j + ")");
      std::vector<std::string> uc = p.coords;
      uc[axis] = j;
      line("IDX " + off + " = " + row_major_offset(u, uc) + ";");
      line(std::string(wide ? "I64 " : "IDX ") + g + " = " + to + "(" + load(bi, off) + ");");
      line("if (" + g + " < " + to + "(0)) " + g + " += " + to + "(" + dim(x[axis]) + ");");
      line("if (" + g + " != " + to + "(" + p.coords[axis] + ")) continue;");
      const std::string v = load(bu, off);
      if (const std::optional<OpKind> op = ir::scatter_combine_op(attrs.reduction)) {
        // add, mul, maximum, minimum: their table templates (NaN-propagating max and min).
        const ir::CExpr& e = ir::op_info(*op).expr;
        line(acc + " = " + expand(kind == Num::kF ? e.float_form : e.int_form, {acc, v}, kind) + ";");
      } else {
        line(acc + " = " + v + ";");
      }
      close();
      if (!inside.empty()) close();
      return acc;
    }
    case OpKind::kIota: {
      const auto& attrs = std::get<ir::IotaAttrs>(a.attrs);
      // Coordinates are IDX: 32-bit in GLSL, 64-bit in OpenCL C and CUDA.
      return convert(p.coords[size_t(attrs.axis)], glsl() ? Num::kI : Num::kL, a.type.dtype);
    }
    case OpKind::kConv2d: {
      const auto& c = std::get<ir::Conv2dAttrs>(a.attrs);
      const ir::ImageAxes ax = ir::image_axes(c.channels_last);
      const ir::Shape& x = m_.node(a.inputs[0]).type.shape;
      const ir::Shape& w = m_.node(a.inputs[1]).type.shape;
      const int bx = buffer_of(a.inputs[0]), bw = buffer_of(a.inputs[1]);
      const std::string acc = fresh("acc");
      const std::string cg = dim(w[ax.c]);
      const std::string og = "(" + dim(w[ax.n]) + " / TO_IDX(" + std::to_string(c.groups) + "))";
      line(ctype(kind) + " " + acc + " = " + lit(kind, "0") + ";");
      const std::string n = p.coords[ax.n], o = p.coords[ax.c], oh = p.coords[ax.h], ow = p.coords[ax.w];
      const std::string ci = fresh("ci"), kh = fresh("kh"), kw = fresh("kw"), ih = fresh("ih"), iw = fresh("iw");
      open("for (IDX " + ci + " = TO_IDX(0); " + ci + " < " + cg + "; ++" + ci + ")");
      open("for (IDX " + kh + " = TO_IDX(0); " + kh + " < " + dim(w[ax.h]) + "; ++" + kh + ")");
      line("IDX " + ih + " = " + oh + " * TO_IDX(" + std::to_string(c.strides[0]) + ") - TO_IDX(" +
           std::to_string(c.pads[0]) + ") + " + kh + " * TO_IDX(" + std::to_string(c.dilations[0]) + ");");
      line("if (" + ih + " < TO_IDX(0) || " + ih + " >= " + dim(x[ax.h]) + ") continue;");
      open("for (IDX " + kw + " = TO_IDX(0); " + kw + " < " + dim(w[ax.w]) + "; ++" + kw + ")");
      line("IDX " + iw + " = " + ow + " * TO_IDX(" + std::to_string(c.strides[1]) + ") - TO_IDX(" +
           std::to_string(c.pads[1]) + ") + " + kw + " * TO_IDX(" + std::to_string(c.dilations[1]) + ");");
      line("if (" + iw + " < TO_IDX(0) || " + iw + " >= " + dim(x[ax.w]) + ") continue;");
      const std::string xc = "(" + o + " / " + og + ") * " + cg + " + " + ci;
      const std::string xv = load(bx, row_major_offset(x, image_coords(ax, n, xc, ih, iw)));
      const std::string wv = load(bw, row_major_offset(w, image_coords(ax, o, ci, kh, kw)));
      if (kind == Num::kF) line(acc + " += TO_F(" + xv + ") * TO_F(" + wv + ");");
      else line(acc + " = " + int_fn("add", kind) + "(" + acc + ", " + int_fn("mul", kind) + "(" + xv + ", " + wv + "));");
      close();
      close();
      close();
      if (a.inputs.size() > 2) {
        const std::string bv = load(buffer_of(a.inputs[2]), o);
        if (kind == Num::kF) line(acc + " += TO_F(" + bv + ");");
        else line(acc + " = " + int_fn("add", kind) + "(" + acc + ", " + bv + ");");
      }
      return convert(acc, kind, a.type.dtype);
    }
    case OpKind::kMaxPool2d: case OpKind::kAvgPool2d: case OpKind::kGlobalAvgPool2d: {
      ir::Pool2dAttrs pa;
      if (const auto* attrs = std::get_if<ir::Pool2dAttrs>(&a.attrs)) pa = *attrs;
      const int bx = buffer_of(a.inputs[0]);
      const std::string acc = fresh("acc"), count = fresh("cnt");
      line(ctype(kind) + " " + acc + " = " + pool_init(a) + ";");
      line("IDX " + count + " = TO_IDX(0);");
      pool_window(a, pa, p.coords, [&](const std::vector<std::string>& x_coords) {
        line(pool_accumulate(a, acc, load(bx, row_major_offset(m_.node(a.inputs[0]).type.shape, x_coords))));
      }, count);
      return pool_result(a, acc, count);
    }
    // Elementwise ops are computed by emit_elementwise, and the other anchors have their own
    // templates: none reaches the pointwise anchor.
    case OpKind::kInput: case OpKind::kConstant: case OpKind::kNeg: case OpKind::kAbs: case OpKind::kExp:
    case OpKind::kLog: case OpKind::kSqrt: case OpKind::kRsqrt: case OpKind::kReciprocal: case OpKind::kTanh:
    case OpKind::kSigmoid: case OpKind::kRelu: case OpKind::kSilu: case OpKind::kErf: case OpKind::kSin:
    case OpKind::kCos: case OpKind::kAtan: case OpKind::kFloor: case OpKind::kCeil: case OpKind::kRound: case OpKind::kSign:
    case OpKind::kGelu: case OpKind::kNot: case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul:
    case OpKind::kDiv: case OpKind::kPow: case OpKind::kMaximum: case OpKind::kMinimum: case OpKind::kFmod:
    case OpKind::kBitwiseNot: case OpKind::kBitwiseAnd: case OpKind::kBitwiseOr: case OpKind::kBitwiseXor:
    case OpKind::kShiftLeft: case OpKind::kShiftRight: case OpKind::kEqual:
    case OpKind::kNotEqual: case OpKind::kLess: case OpKind::kLessEqual: case OpKind::kGreater:
    case OpKind::kGreaterEqual: case OpKind::kAnd: case OpKind::kOr: case OpKind::kXor: case OpKind::kWhere:
    case OpKind::kCast: case OpKind::kClamp: case OpKind::kReduceSum: case OpKind::kReduceMean:
    case OpKind::kReduceMax: case OpKind::kReduceMin: case OpKind::kReduceProd: case OpKind::kArgMax:
    case OpKind::kSoftmax: case OpKind::kLogSoftmax: case OpKind::kLayerNorm: case OpKind::kMatMul: case OpKind::kAttention:
      break;
  }
  fail(unsupported("kernel '" + m_.kernel->name + "': no pointwise code for op '" +
                   std::string(ir::op_name(a.op)) + "'"));
  return "0";
}

// ---- pooling ----------------------------------------------------------------------------------

std::string Emitter::pool_init(const Node& a) const {
  if (a.op != OpKind::kMaxPool2d) return lit(num_of(a.type.dtype), "0");
  switch (a.type.dtype) {
    case DType::kI64: return "(-9223372036854775807l - 1l)";
    case DType::kI32: return "(-2147483647 - 1)";
    case DType::kI16: return "(-32768)";
    case DType::kI8: return "(-128)";
    case DType::kU32: case DType::kU16: case DType::kU8: case DType::kBool: return "0";
    default: return "U2F(0xff800000u)";
  }
}

std::string Emitter::pool_accumulate(const Node& a, const std::string& acc, const std::string& x) const {
  const Num kind = num_of(a.type.dtype);
  if (a.op == OpKind::kMaxPool2d)
    return acc + " = " + (kind == Num::kF ? "k_maxf(" + acc + ", " + x + ")" : "(" + x + " > " + acc + " ? " + x + " : " + acc + ")") + ";";
  if (kind == Num::kF) return acc + " += " + x + ";";
  return acc + " = " + int_fn("add", kind) + "(" + acc + ", " + x + ");";
}

void Emitter::pool_window(const Node& a, const ir::Pool2dAttrs& pa, const std::vector<std::string>& out_coords,
                          const std::function<void(const std::vector<std::string>&)>& visit, const std::string& count) {
  const ir::Shape& x = m_.node(a.inputs[0]).type.shape;
  const ir::ImageAxes ax = ir::image_axes(pa.channels_last);
  const bool global = a.op == OpKind::kGlobalAvgPool2d;
  const std::string n = out_coords[ax.n], ch = out_coords[ax.c], oh = out_coords[ax.h], ow = out_coords[ax.w];
  const std::string kh = fresh("kh"), kw = fresh("kw"), ih = fresh("ih"), iw = fresh("iw");
  const std::string kh_end = global ? dim(x[ax.h]) : "TO_IDX(" + std::to_string(pa.kernel[0]) + ")";
  const std::string kw_end = global ? dim(x[ax.w]) : "TO_IDX(" + std::to_string(pa.kernel[1]) + ")";
  open("for (IDX " + kh + " = TO_IDX(0); " + kh + " < " + kh_end + "; ++" + kh + ")");
  line("IDX " + ih + " = " + (global ? kh : oh + " * TO_IDX(" + std::to_string(pa.strides[0]) +
                                            ") - TO_IDX(" + std::to_string(pa.pads[0]) + ") + " + kh) + ";");
  line("if (" + ih + " < TO_IDX(0) || " + ih + " >= " + dim(x[ax.h]) + ") continue;");
  open("for (IDX " + kw + " = TO_IDX(0); " + kw + " < " + kw_end + "; ++" + kw + ")");
  line("IDX " + iw + " = " + (global ? kw : ow + " * TO_IDX(" + std::to_string(pa.strides[1]) +
                                            ") - TO_IDX(" + std::to_string(pa.pads[1]) + ") + " + kw) + ";");
  line("if (" + iw + " < TO_IDX(0) || " + iw + " >= " + dim(x[ax.w]) + ") continue;");
  visit(image_coords(ax, n, ch, ih, iw));
  line(count + " += TO_IDX(1);");
  close();
  close();
}

std::string Emitter::pool_result(const Node& a, const std::string& acc, const std::string& count) const {
  const Num kind = num_of(a.type.dtype);
  if (a.op == OpKind::kMaxPool2d) return acc;
  ir::Pool2dAttrs pa;
  if (const auto* attrs = std::get_if<ir::Pool2dAttrs>(&a.attrs)) pa = *attrs;
  const ir::ImageAxes ax = ir::image_axes(pa.channels_last);
  const ir::Shape& x = m_.node(a.inputs[0]).type.shape;
  const bool global = a.op == OpKind::kGlobalAvgPool2d;
  std::string divisor = count;
  if (global) divisor = "(" + dim(x[ax.h]) + " * " + dim(x[ax.w]) + ")";
  else if (pa.count_include_pad) divisor = "TO_IDX(" + std::to_string(pa.kernel[0] * pa.kernel[1]) + ")";
  if (kind == Num::kF) {
    if (global) return "(" + acc + " / TO_F(" + divisor + "))";
    return "(" + divisor + " == TO_IDX(0) ? 0.0f : " + acc + " / TO_F(" + divisor + "))";
  }
  return int_fn("div", kind) + "(" + acc + ", " + (kind == Num::kL ? "TO_L(" : "TO_I(") + divisor + "))";
}

std::string Emitter::emit_cpu_pool_row(const Node& a, const ir::Pool2dAttrs& pa,
                                       const std::vector<std::string>& window_coords) {
  const Num kind = num_of(a.type.dtype);
  const int bx = m_.buffer_index(a.inputs[0]);
  if (bx < 0) {
    fail(unsupported("kernel '" + m_.kernel->name + "': the pooled operand is not in memory"));
    return "0";
  }
  const ir::Shape& x = m_.node(a.inputs[0]).type.shape;
  const std::string acc = fresh("pool");
  line(ctype(kind) + " " + acc + "[" + std::to_string(m_.space.back().size()) + "];");
  line("for (IDX col = col_begin; col < col_end; ++col) " + acc + "[col] = " + pool_init(a) + ";");
  line("IDX " + acc + "_count = TO_IDX(0);");
  pool_window(a, pa, window_coords, [&](const std::vector<std::string>& x_coords) {
    const std::string at = fresh("at");
    line("IDX " + at + " = " + row_major_offset(x, x_coords) + ";");
    line("#pragma clang loop vectorize(assume_safety)");
    line("for (IDX col = col_begin; col < col_end; ++col) " +
         pool_accumulate(a, acc + "[col]", load(bx, at + " + col")));
  }, acc + "_count");
  return acc;
}

}  // namespace kiln::codegen::cfam
