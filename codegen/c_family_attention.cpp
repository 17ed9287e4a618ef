// The attention template (KernelTemplate::kAttention) shared by OpenCL C, GLSL and CUDA C: one
// work item per query row keeps the scaled query row and the output row in registers and makes
// one pass over the keys with an online softmax (running maximum and sum, the output rescaled
// when the maximum grows), so the [Sq, Sk] scores never reach memory. Neighbouring work items
// take neighbouring rows of one head and read the same key and value rows at the same time
// (broadcast loads). CUDA runs most attention flash-attention style instead
// (cuda/c_family_cuda_attention.cpp: tensor cores in 16 bits, FMA register tiles in f32).
#include "codegen/c_family_internal.h"

namespace kiln::codegen::cfam {

std::optional<Emitter::AttentionOperands> Emitter::attention_operands() {
  AttentionOperands o;
  o.anchor = &m_.node(m_.anchor);
  o.attrs = &std::get<ir::AttentionAttrs>(o.anchor->attrs);
  const auto& in = o.anchor->inputs;
  o.q = m_.buffer_index(in[0]);
  o.k = m_.buffer_index(in[1]);
  o.v = m_.buffer_index(in[2]);
  if (in.size() == 4) o.mask = m_.buffer_index(in[3]);
  o.out = m_.buffer_index(m_.anchor);
  if (o.q < 0 || o.k < 0 || o.v < 0 || o.out < 0 || (in.size() == 4 && o.mask < 0)) {
    fail(unsupported("kernel '" + m_.kernel->name + "': attention operands must be in memory"));
    return std::nullopt;
  }
  Result<ir::AttentionShape> s = ir::attention_shape(m_.node(in[0]).type.shape, m_.node(in[1]).type.shape,
                                                     m_.node(in[2]).type.shape, o.attrs->seq_major);
  if (!s) {
    fail(s.status());
    return std::nullopt;
  }
  o.shape = *s;
  if (!o.shape.d.is_static() || !o.shape.dv.is_static() || o.shape.d.size() > ir::kMaxAttentionHeadSize ||
      o.shape.dv.size() > ir::kMaxAttentionHeadSize) {
    fail(unsupported("kernel '" + m_.kernel->name + "': attention needs static head sizes of at most " +
                     std::to_string(ir::kMaxAttentionHeadSize)));
    return std::nullopt;
  }
  o.d = o.shape.d.size();
  o.dv = o.shape.dv.size();
  o.sq = dim(o.shape.sq);
  o.sk = dim(o.shape.sk);
  return o;
}

std::string Emitter::attention_row(const AttentionOperands& o, ir::NodeId value, const std::vector<std::string>& bc,
                                   const std::string& row) const {
  const ir::Shape& shape = m_.node(value).type.shape;
  std::vector<std::string> coords = bc;
  if (o.attrs->seq_major) coords = {bc[0], row, bc[1], "TO_IDX(0)"};  // [B, S, H, F]
  else {
    coords.push_back(row);
    coords.push_back("TO_IDX(0)");
  }
  return row_major_offset(shape, coords);
}

std::string Emitter::attention_mask(const AttentionOperands& o, const std::vector<std::string>& bc,
                                    const std::string& i, const std::string& j) const {
  std::vector<std::string> coords = bc;
  coords.push_back(i);
  coords.push_back(j);
  return broadcast_offset(m_.node(o.anchor->inputs[3]).type.shape, coords);
}

void Emitter::emit_attention(uint32_t group_size) {
  const std::optional<AttentionOperands> o = attention_operands();
  if (!o) return;
  const std::string d = std::to_string(o->d), dv = std::to_string(o->dv);
  line("IDX Sq = " + o->sq + ", Sk = " + o->sk + ";");
  line("IDX rows = " + product(o->shape.batch) + " * Sq;");
  open(units_loop("r", "rows", group_size));
  line("IDX i = r % Sq, bidx = r / Sq;");
  const std::vector<std::string> bc = decompose("bidx", o->shape.batch);
  const ir::NodeId qn = o->anchor->inputs[0], kn = o->anchor->inputs[1], vn = o->anchor->inputs[2];
  line("IDX q0 = " + attention_row(*o, qn, bc, "i") + ";");
  line("float qrow[" + d + "];");
  line("float acc[" + dv + "];");
  open("for (int c = 0; c < " + d + "; ++c)");
  line("qrow[c] = " + load(o->q, "q0 + TO_IDX(c)") + " * " + float_lit(*o->attrs->scale) + ";");
  close();
  line("for (int c = 0; c < " + dv + "; ++c) acc[c] = 0.0f;");
  line("float mx = U2F(0xff800000u), total = 0.0f;");
  line("IDX keys = " + std::string(o->attrs->causal ? "(i + TO_IDX(1) < Sk ? i + TO_IDX(1) : Sk)" : "Sk") + ";");
  open("for (IDX j = TO_IDX(0); j < keys; ++j)");
  line("IDX k0 = " + attention_row(*o, kn, bc, "j") + ", v0 = " + attention_row(*o, vn, bc, "j") + ";");
  line("float s = 0.0f;");
  line("for (int c = 0; c < " + d + "; ++c) s += qrow[c] * " + load(o->k, "k0 + TO_IDX(c)") + ";");
  if (o->mask >= 0) line("s += " + load(o->mask, attention_mask(*o, bc, "i", "j")) + ";");
  // Shifting by 0 while every score so far is -inf keeps exp() from computing -inf - -inf.
  line("float next = k_fmax(mx, s);");
  line("float shift = next == U2F(0xff800000u) ? 0.0f : next;");
  line("float rescale = exp(mx - shift), p = exp(s - shift);");
  line("total = total * rescale + p;");
  line("for (int c = 0; c < " + dv + "; ++c) acc[c] = acc[c] * rescale + p * " + load(o->v, "v0 + TO_IDX(c)") + ";");
  line("mx = next;");
  close();
  line("IDX o0 = " + attention_row(*o, m_.anchor, bc, "i") + ";");
  open("for (int c = 0; c < " + dv + "; ++c)");
  store(o->out, "o0 + TO_IDX(c)", "acc[c] / total");
  close();
  close();
}

}  // namespace kiln::codegen::cfam
