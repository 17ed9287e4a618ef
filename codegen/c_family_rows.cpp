// The row-reduction template (reduce_*, argmax, softmax, log_softmax, layer_norm) and the tiled
// matmul template. A row is every element of the operand that one output element (reduction)
// or one normalization group depends on; one work-group handles a row at a time (grid-stride
// over rows), its threads stride over the row and combine with a shared-memory tree.
#include <functional>

#include "codegen/c_family_internal.h"

namespace kiln::codegen::cfam {

using ir::DType;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

namespace {

// Tree reduction over `wg` shared slots; combine(a, b) returns the expression a (+) b.
template <class Combine>
void tree_reduce(Emitter& e, const std::string& sh, uint32_t wg, Combine combine) {
  e.line(e.barrier());
  e.open("for (IDX s = TO_IDX(" + std::to_string(wg / 2) + "); s > TO_IDX(0); s = s / TO_IDX(2))");
  e.line("if (lid < s) " + sh + "[lid] = " + combine(sh + "[lid]", sh + "[lid + s]") + ";");
  e.line(e.barrier());
  e.close();
}

}  // namespace

Emitter::RowReduction Emitter::row_reduction(OpKind op, Num xk) {
  // Partials combine with the expression of the row's binary op (add, mul, maximum, minimum).
  const ir::ReduceFns& r = ir::op_info(op).reduce;
  const ir::CExpr& combine = ir::op_info(r.combine).expr;
  const std::string_view form = xk == Num::kF ? combine.float_form : combine.int_form;
  return {expand(r.c_identity, {}, xk), [this, form, xk](const std::string& u, const std::string& v) {
            return expand(form, {u, v}, xk);
          }};
}

std::string Emitter::argmax_better(Num xk) {
  return xk == Num::kF ? "k_better_f" : xk == Num::kL ? "k_better_l" : "k_better_i";
}

void Emitter::emit_row_result(const std::vector<std::string>& row_coords, const std::string& result) {
  const Node& a = m_.node(m_.anchor);
  Point p;
  p.space = a.type.shape;
  const bool keep_rank = a.type.shape.size() == m_.space.size();
  size_t ri = 0;
  for (size_t d = 0; d < m_.space.size(); ++d) {
    if (!m_.reduced_axes[d]) p.coords.push_back(row_coords[ri++]);
    else if (keep_rank) p.coords.push_back("TO_IDX(0)");
  }
  finish_anchor(p, ctype(num_of(a.type.dtype)), float8_rounded(result, a.type.dtype));
}

void Emitter::emit_rows() {
  const Node& a = m_.node(m_.anchor);
  const uint32_t wg = m_.dispatch.workgroup_size;
  const std::string wgs = "TO_IDX(" + std::to_string(wg) + ")";
  ir::Shape row_shape, red_shape;
  for (size_t d = 0; d < m_.space.size(); ++d) (m_.reduced_axes[d] ? red_shape : row_shape).push_back(m_.space[d]);
  const NodeId operand = a.inputs[0];
  const Num xk = num_of(m_.node(operand).type.dtype);
  const bool normalize = ir::op_info(a.op).family == ir::OpFamily::kNormalize;

  line("IDX rows = " + product(row_shape) + ";");
  line("IDX K = " + product(red_shape) + ";");
  open(units_loop("row", "rows", /*group_size=*/0));
  // CPU: one thread walks the row; letting its sums reassociate is what lets LLVM vectorize them
  // (several partial sums, as a GPU work-group's tree has).
  if (cpu()) line("#pragma clang fp reassociate(on)");
  const std::vector<std::string> row_coords = decompose("row", row_shape);

  // One pass over the row: `per_element(p, x)` runs at each element the thread owns.
  auto pass = [&](auto&& per_element) {
    open("for (IDX k = lid; k < K; k += " + wgs + ")");
    const std::vector<std::string> red_coords = decompose("k", red_shape);
    Point p;
    p.space = m_.space;
    size_t ri = 0, ki = 0;
    for (size_t d = 0; d < m_.space.size(); ++d)
      p.coords.push_back(m_.reduced_axes[d] ? red_coords[ki++] : row_coords[ri++]);
    for (NodeId n : m_.prologue) emit_elementwise(n, p);
    per_element(p, value(operand, p));
    close();
  };
  auto as_f = [&](const std::string& x) { return xk == Num::kF ? x : "TO_F(" + x + ")"; };

  if (!normalize) {
    std::string result;
    if (a.op == OpKind::kArgMax) {
      const std::string sv = shared_array(ctype(xk), "shv", wg), si = shared_array("IDX", "shi", wg);
      const std::string lowest = argmax_lowest(xk), better = argmax_better(xk);
      line(ctype(xk) + " bv = " + lowest + ";");
      line("IDX bi = K;");
      pass([&](Point&, const std::string& x) {
        line("if (" + better + "(" + x + ", k, bv, bi)) { bv = " + x + "; bi = k; }");
      });
      line(sv + "[lid] = bv; " + si + "[lid] = bi;");
      line(barrier());
      open("for (IDX s = TO_IDX(" + std::to_string(wg / 2) + "); s > TO_IDX(0); s = s / TO_IDX(2))");
      open("if (lid < s && " + better + "(" + sv + "[lid + s], " + si + "[lid + s], " + sv + "[lid], " + si + "[lid]))");
      line(sv + "[lid] = " + sv + "[lid + s]; " + si + "[lid] = " + si + "[lid + s];");
      close();
      line(barrier());
      close();
      result = fresh("res");
      line("I64 " + result + " = TO_L(" + si + "[0]);");
      line(barrier());
      result = convert(result, Num::kL, a.type.dtype);
    } else {
      const std::string sh = shared_array(ctype(xk), "sh", wg);
      const bool is_f = xk == Num::kF;
      const RowReduction reduction = row_reduction(a.op, xk);
      const std::string& init = reduction.init;
      const auto& combine = reduction.combine;
      line(ctype(xk) + " acc = " + init + ";");
      pass([&](Point&, const std::string& x) { line("acc = " + combine("acc", x) + ";"); });
      line(sh + "[lid] = acc;");
      tree_reduce(*this, sh, wg, combine);
      result = fresh("res");
      line(ctype(xk) + " " + result + " = " + sh + "[0];");
      line(barrier());
      if (ir::op_info(a.op).reduce.mean) {
        result = is_f ? "(" + result + " / TO_F(K))" : int_fn("div", xk) + "(" + result + ", " + (xk == Num::kL ? "TO_L(K)" : "TO_I(K)") + ")";
      }
      result = convert(result, xk, a.type.dtype);
    }
    // Thread 0 finishes the row.
    open("if (lid == TO_IDX(0))");
    emit_row_result(row_coords, result);
    close();
    close();
    return;
  }

  // Normalizations: two reductions over the row, then a pass writing every element.
  const std::string sh = shared_array("float", "sh", wg);
  auto sum = [](const std::string& u, const std::string& v) { return "(" + u + " + " + v + ")"; };
  const bool softmax = a.op != OpKind::kLayerNorm;
  if (softmax) {
    auto fmax = [](const std::string& u, const std::string& v) { return "k_fmax(" + u + ", " + v + ")"; };
    line("float acc = U2F(0xff800000u);");
    pass([&](Point&, const std::string& x) { line("acc = k_fmax(acc, " + as_f(x) + ");"); });
    line(sh + "[lid] = acc;");
    tree_reduce(*this, sh, wg, fmax);
    line("float mx = " + sh + "[0];");
    line("if (isinf(mx) && mx < 0.0f) mx = 0.0f;");
    line(barrier());
    line("acc = 0.0f;");
    pass([&](Point&, const std::string& x) { line("acc += exp(" + as_f(x) + " - mx);"); });
    line(sh + "[lid] = acc;");
    tree_reduce(*this, sh, wg, sum);
    line("float total = " + sh + "[0];");
    line("float log_total = log(total);");
    line(barrier());
  } else {
    const double eps = std::get<ir::LayerNormAttrs>(a.attrs).epsilon;
    line("float acc = 0.0f;");
    pass([&](Point&, const std::string& x) { line("acc += " + as_f(x) + ";"); });
    line(sh + "[lid] = acc;");
    tree_reduce(*this, sh, wg, sum);
    line("float mean = " + sh + "[0] / TO_F(K);");
    line(barrier());
    line("acc = 0.0f;");
    pass([&](Point&, const std::string& x) {
      line("float dv = " + as_f(x) + " - mean;");
      line("acc += dv * dv;");
    });
    line(sh + "[lid] = acc;");
    tree_reduce(*this, sh, wg, sum);
    line("float inv_std = 1.0f / sqrt(" + sh + "[0] / TO_F(K) + " + float_lit(eps) + ");");
    line(barrier());
  }
  pass([&](Point& p, const std::string& x) {
    std::string y;
    if (a.op == OpKind::kSoftmax) y = "exp(" + as_f(x) + " - mx) / total";
    else if (a.op == OpKind::kLogSoftmax) y = "(" + as_f(x) + " - mx) - log_total";
    else {
      const std::string s = value(a.inputs[1], p), b = value(a.inputs[2], p);
      y = "(" + as_f(x) + " - mean) * inv_std * " + s + " + " + b;
    }
    finish_anchor(p, "float", float8_rounded(y, a.type.dtype));
  });
  close();
}

std::optional<Emitter::MatmulOperands> Emitter::matmul_operands() {
  MatmulOperands o;
  o.anchor = &m_.node(m_.anchor);
  const NodeId an = o.anchor->inputs[0], bn = o.anchor->inputs[1];
  const ir::Shape& as = m_.node(an).type.shape;
  const ir::Shape& bs = m_.node(bn).type.shape;
  o.a_buffer = m_.buffer_index(an);
  o.b_buffer = m_.buffer_index(bn);
  if (o.a_buffer < 0 || o.b_buffer < 0) {
    fail(unsupported("kernel '" + m_.kernel->name + "': matmul operands must be in memory"));
    return std::nullopt;
  }
  o.a_vector = as.size() == 1;
  o.b_vector = bs.size() == 1;
  o.kind = num_of(o.anchor->type.dtype);
  o.m = o.a_vector ? "TO_IDX(1)" : dim(as[as.size() - 2]);
  o.k = dim(as.back());
  o.n = o.b_vector ? "TO_IDX(1)" : dim(bs.back());
  const size_t trailing = (o.a_vector ? 0 : 1) + (o.b_vector ? 0 : 1);
  o.batch.assign(m_.space.begin(), m_.space.end() - long(trailing));
  o.a_batch.assign(as.begin(), as.end() - long(o.a_vector ? 1 : 2));
  o.b_batch.assign(bs.begin(), bs.end() - long(o.b_vector ? 1 : 2));
  return o;
}

std::string Emitter::multiply_add(Num kind, const std::string& acc, const std::string& x, const std::string& y) const {
  if (kind == Num::kF) return acc + " += " + x + " * " + y + ";";
  return acc + " = " + int_fn("add", kind) + "(" + acc + ", " + int_fn("mul", kind) + "(" + x + ", " + y + "));";
}

void Emitter::emit_matmul() {
  const std::optional<MatmulOperands> o = matmul_operands();
  if (!o) return;
  const Num kind = o->kind;
  const uint32_t t = kMatMulTile;
  const std::string T = "TO_IDX(" + std::to_string(t) + ")";
  const std::string sa = shared_array(ctype(kind), "tile_a", t * t), sb = shared_array(ctype(kind), "tile_b", t * t);

  line("IDX M = " + o->m + ", K = " + o->k + ", N = " + o->n + ";");
  line("IDX tiles_m = (M + " + T + " - TO_IDX(1)) / " + T + ", tiles_n = (N + " + T + " - TO_IDX(1)) / " + T + ";");
  line("IDX ntiles = " + product(o->batch) + " * tiles_m * tiles_n;");
  line("IDX ty = lid / " + T + ", tx = lid % " + T + ";");
  open("for (IDX tile = gid; tile < ntiles; tile += ngroups)");
  line("IDX tn = tile % tiles_n, tm = (tile / tiles_n) % tiles_m, bidx = tile / (tiles_n * tiles_m);");
  std::vector<std::string> bc = decompose("bidx", o->batch);
  line("IDX row = tm * " + T + " + ty, col = tn * " + T + " + tx;");
  const std::string a_base = "(" + broadcast_offset(o->a_batch, bc) + " * M * K)";
  const std::string b_base = "(" + broadcast_offset(o->b_batch, bc) + " * K * N)";
  line(ctype(kind) + " acc = " + lit(kind, "0") + ";");
  open("for (IDX k0 = TO_IDX(0); k0 < K; k0 += " + T + ")");
  line("IDX ka = k0 + tx, kb = k0 + ty;");
  line(sa + "[lid] = " + lit(kind, "0") + "; " + sb + "[lid] = " + lit(kind, "0") + ";");
  line("if (row < M && ka < K) " + sa + "[lid] = " + load(o->a_buffer, a_base + " + row * K + ka") + ";");
  line("if (kb < K && col < N) " + sb + "[lid] = " + load(o->b_buffer, b_base + " + kb * N + col") + ";");
  line(barrier());
  open("for (IDX kk = TO_IDX(0); kk < " + T + "; ++kk)");
  line(multiply_add(kind, "acc", sa + "[ty * " + T + " + kk]", sb + "[kk * " + T + " + tx]"));
  close();
  line(barrier());
  close();
  open("if (row < M && col < N)");
  finish_matmul_element(*o, bc, "acc");
  close();
  close();
}

void Emitter::finish_matmul_element(const MatmulOperands& o, const std::vector<std::string>& batch_coords,
                                    const std::string& acc) {
  Point p;
  p.space = m_.space;
  p.coords = batch_coords;
  if (!o.a_vector) p.coords.push_back("row");
  if (!o.b_vector) p.coords.push_back("col");
  finish_anchor(p, ctype(o.kind), convert(acc, o.kind, o.anchor->type.dtype));
}

// CPU: the work units are output rows (batch entries x M). A function call takes its rows in
// blocks of up to kCpuRows rows of one batch entry and the columns in strips of kCpuCols; each
// block x strip accumulates in a local array (kept in L1, the inner loop vectorized over
// columns), so B is read once per block of rows instead of once per row. Vendor GEMMs replace it
// where the artifact's GemmCall allows (runtime/drivers/cpu/).
void Emitter::emit_cpu_matmul() {
  const std::optional<MatmulOperands> o = matmul_operands();
  if (!o) return;
  constexpr int kCpuRows = 4, kCpuCols = 64;
  const std::string R = std::to_string(kCpuRows), C = std::to_string(kCpuCols);
  const Num kind = o->kind;
  line("IDX M = " + o->m + ", K = " + o->k + ", N = " + o->n + ";");
  open("for (IDX unit = begin; unit < end;)");
  line("IDX bidx = unit / M, first_row = unit % M;");
  line("IDX nr = M - first_row < end - unit ? M - first_row : end - unit;");
  line("if (nr > " + R + ") nr = " + R + ";");
  std::vector<std::string> bc = decompose("bidx", o->batch);
  line("IDX a_base = " + broadcast_offset(o->a_batch, bc) + " * M * K;");
  line("IDX b_base = " + broadcast_offset(o->b_batch, bc) + " * K * N;");
  open("for (IDX first_col = TO_IDX(0); first_col < N; first_col += " + C + ")");
  line("IDX nj = N - first_col < " + C + " ? N - first_col : " + C + ";");
  line(ctype(kind) + " acc[" + R + "][" + C + "];");
  line("for (int i = 0; i < " + R + "; ++i) for (int j = 0; j < " + C + "; ++j) acc[i][j] = " + lit(kind, "0") + ";");
  open("for (IDX k = TO_IDX(0); k < K; ++k)");
  open("for (IDX i = TO_IDX(0); i < nr; ++i)");
  line(ctype(kind) + " av = " + load(o->a_buffer, "a_base + (first_row + i) * K + k") + ";");
  open("for (IDX j = TO_IDX(0); j < nj; ++j)");
  line(multiply_add(kind, "acc[i][j]", "av", load(o->b_buffer, "b_base + k * N + first_col + j")));
  close();
  close();
  close();
  open("for (IDX i = TO_IDX(0); i < nr; ++i)");
  open("for (IDX j = TO_IDX(0); j < nj; ++j)");
  line("IDX row = first_row + i, col = first_col + j;");
  finish_matmul_element(*o, bc, "acc[i][j]");
  close();
  close();
  close();
  line("unit += nr;");
  close();
}

}  // namespace kiln::codegen::cfam
