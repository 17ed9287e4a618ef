// CUDA C: 16-bit attention on tensor cores, flash-attention style (one pass over the keys with an
// online softmax; the scores stay in registers).
//
// A block of 4 warps takes 64 query rows of one batch entry (head); warp w owns rows 16w..16w+15.
// Its q rows are loaded once as mma A fragments. For each tile of 64 keys, the block stages K as
// [key][d] and V transposed as [dv][key] in shared memory (16-bit bits, rows padded by 8 so that
// fragment loads spread over the banks, zeros beyond Sk; read 16 bytes at a time when K and V are
// 16-byte aligned, which makes every row start aligned too), then each warp
//   - computes its 16 x 64 scores S = q k^T with mma.sync.m16n8k16 (f32 accumulators),
//   - scales them, adds the mask, masks keys beyond Sk (and after the row, when causal) with -inf,
//   - updates each row's running maximum (the 4 threads of a quad share a row: two shuffles),
//     rescales its output accumulators and partial sums, and turns the scores into
//     probabilities p = 2^(s * log2(e) - max), in log2 units,
//   - packs p to 16-bit A fragments (an m16n8 accumulator tile is half of an m16n8k16 A fragment,
//     so no shuffling is needed) and accumulates O += p V with mma.sync.
// The partial row sums are added across the quad at the end, and O / sum is written.
// Fragment layouts are PTX's for m16n8k16 (lane = 4g + t): A(g [+8], 2t [+8] .. +1),
// B(2t [+8] .. +1, g), C(g [+8], 2t .. +1).
#include "codegen/c_family_internal.h"

namespace kiln::codegen::cfam {

namespace {
constexpr int64_t kKeyTile = 64;
constexpr int64_t kMaxFlashHead = 128;  // K and V^T tiles of 64 keys fit the 48 KB of static shared memory
constexpr uint32_t kPad = 8;  // ushorts of padding per staged row
}  // namespace

bool cuda_flash_attention_config(const KernelModel& m, CudaConfig& c) {
  if (m.kind != KernelTemplate::kAttention) return false;
  const ir::Node& a = m.node(m.anchor);
  const ir::DType t = a.type.dtype;
  if (t != ir::DType::kF16 && t != ir::DType::kBF16) return false;
  const auto& attrs = std::get<ir::AttentionAttrs>(a.attrs);
  Result<ir::AttentionShape> s = ir::attention_shape(m.node(a.inputs[0]).type.shape, m.node(a.inputs[1]).type.shape,
                                                     m.node(a.inputs[2]).type.shape, attrs.seq_major);
  if (!s || !s->d.is_static() || !s->dv.is_static()) return false;
  const int64_t d = s->d.size(), dv = s->dv.size();
  if (d % 16 != 0 || dv % 16 != 0 || d > kMaxFlashHead || dv > kMaxFlashHead || d == 0 || dv == 0) return false;
  c.mode = CudaConfig::Mode::kAttentionMma;
  // Four warps of 16 query rows each. Two (32-row tiles, twice the blocks) were tried: BERT f16
  // ran 1-3% slower at batch 1 and 8 on an H200 (each key tile is staged by twice the blocks).
  c.block = 128;
  c.bm = 64;
  return true;
}

void Emitter::emit_cuda_flash_attention(const CudaConfig& c) {
  const std::optional<AttentionOperands> o = attention_operands();
  if (!o) return;
  const bool bf16 = o->anchor->type.dtype == ir::DType::kBF16;
  const std::string type = bf16 ? "bf16" : "f16";
  const int64_t d = o->d, dv = o->dv;
  const uint32_t kp = uint32_t(d) + kPad, vp = uint32_t(kKeyTile) + kPad;
  const std::string sk = shared_array("__align__(16) ushort", "tile_k", uint32_t(kKeyTile) * kp);
  const std::string sv = shared_array("__align__(16) ushort", "tile_vt", uint32_t(dv) * vp);
  const std::string q = "b" + std::to_string(o->q), k = "b" + std::to_string(o->k), v = "b" + std::to_string(o->v);
  const std::string dn = std::to_string(d), dvn = std::to_string(dv);
  const ir::NodeId qn = o->anchor->inputs[0], kn = o->anchor->inputs[1], vn = o->anchor->inputs[2];
  const std::string log2e = "1.4426950408889634f";

  line("IDX Sq = " + o->sq + ", Sk = " + o->sk + ";");
  const std::string bm = std::to_string(c.bm), block = std::to_string(c.block);
  line("IDX qtiles = (Sq + TO_IDX(" + bm + " - 1)) / TO_IDX(" + bm + ");");
  line("IDX ntiles = " + product(o->shape.batch) + " * qtiles;");
  line("int warp = (int)lid / 32, lane = (int)lid % 32, g = lane / 4, t = lane % 4;");
  line("bool vec = ((((unsigned long long)" + k + ") | ((unsigned long long)" + v + ")) & 15ull) == 0ull;");
  open("for (IDX tile = gid; tile < ntiles; tile += ngroups)");
  line("IDX bidx = tile / qtiles, q0 = (tile % qtiles) * TO_IDX(" + bm + ");");
  const std::vector<std::string> bc = decompose("bidx", o->shape.batch);
  line("IDX qr = " + attention_row(*o, qn, bc, "TO_IDX(0)") + ", qs = " +
       attention_row(*o, qn, bc, "TO_IDX(1)") + " - qr;");
  line("IDX kr = " + attention_row(*o, kn, bc, "TO_IDX(0)") + ", ks = " +
       attention_row(*o, kn, bc, "TO_IDX(1)") + " - kr;");
  line("IDX vr = " + attention_row(*o, vn, bc, "TO_IDX(0)") + ", vs = " +
       attention_row(*o, vn, bc, "TO_IDX(1)") + " - vr;");
  // This thread's two rows and their q fragments.
  line("IDX row0 = q0 + TO_IDX(warp * 16 + g), row1 = row0 + TO_IDX(8);");
  line("uint qf[" + std::to_string(d / 16) + "][4];");
  line("#pragma unroll");
  open("for (int kc = 0; kc < " + std::to_string(d / 16) + "; ++kc)");
  line("#pragma unroll");
  open("for (int r = 0; r < 4; ++r)");
  line("IDX row = (r % 2) ? row1 : row0;");
  line("int col = kc * 16 + 2 * t + (r / 2) * 8;");
  line("const ushort* p = " + q + " + qr + row * qs + TO_IDX(col);");
  line("qf[kc][r] = row < Sq ? ((uint)p[0] | ((uint)p[1] << 16)) : 0u;");
  close();
  close();
  line("float oacc[" + std::to_string(dv / 8) + "][4];");
  line("#pragma unroll");
  line("for (int n = 0; n < " + std::to_string(dv / 8) + "; ++n) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.0f;");
  line("float m0 = U2F(0xff800000u), m1 = U2F(0xff800000u), l0 = 0.0f, l1 = 0.0f;");
  // Causal: keys after the tile's last row are masked for every row of it.
  line("IDX kend = " + (o->attrs->causal ? "(q0 + TO_IDX(" + bm + ") < Sk ? q0 + TO_IDX(" + bm + ") : Sk)" : "Sk") + ";");
  line("#pragma unroll 1");
  open("for (IDX k0 = TO_IDX(0); k0 < kend; k0 += TO_IDX(64))");
  line("__syncthreads();");  // the previous tile's fragments are read
  // 16-byte loads when K and V are 16-byte aligned (row offsets are multiples of 16 elements).
  open("if (vec)");
  line("#pragma unroll");
  open("for (int e = (int)lid; e < " + std::to_string(kKeyTile * d / 8) + "; e += " + block + ")");
  line("int key = e / " + std::to_string(d / 8) + ", c = (e % " + std::to_string(d / 8) + ") * 8;");
  line("uint4 w = k0 + TO_IDX(key) < Sk ? *(const uint4*)(" + k + " + kr + (k0 + TO_IDX(key)) * ks + TO_IDX(c)) : make_uint4(0u, 0u, 0u, 0u);");
  line("*(uint4*)(" + sk + " + key * " + std::to_string(kp) + " + c) = w;");
  close();
  line("#pragma unroll");
  open("for (int e = (int)lid; e < " + std::to_string(kKeyTile * dv / 8) + "; e += " + block + ")");
  line("int key = e / " + std::to_string(dv / 8) + ", c = (e % " + std::to_string(dv / 8) + ") * 8;");
  line("uint4 w = k0 + TO_IDX(key) < Sk ? *(const uint4*)(" + v + " + vr + (k0 + TO_IDX(key)) * vs + TO_IDX(c)) : make_uint4(0u, 0u, 0u, 0u);");
  const char* words[] = {"w.x", "w.y", "w.z", "w.w"};
  for (int i = 0; i < 8; ++i)
    line(sv + "[(c + " + std::to_string(i) + ") * " + std::to_string(vp) + " + key] = (ushort)(" + words[i / 2] +
         (i % 2 ? " >> 16" : "") + ");");
  close();
  close();
  open("else");
  line("#pragma unroll 4");
  open("for (int e = (int)lid; e < " + std::to_string(kKeyTile * d) + "; e += " + block + ")");
  line("int key = e / " + dn + ", c = e % " + dn + ";");
  line(sk + "[key * " + std::to_string(kp) + " + c] = k0 + TO_IDX(key) < Sk ? " + k +
       "[kr + (k0 + TO_IDX(key)) * ks + TO_IDX(c)] : (ushort)0;");
  close();
  line("#pragma unroll 4");
  open("for (int e = (int)lid; e < " + std::to_string(kKeyTile * dv) + "; e += " + block + ")");
  line("int key = e / " + dvn + ", c = e % " + dvn + ";");
  line(sv + "[c * " + std::to_string(vp) + " + key] = k0 + TO_IDX(key) < Sk ? " + v +
       "[vr + (k0 + TO_IDX(key)) * vs + TO_IDX(c)] : (ushort)0;");
  close();
  close();
  line("__syncthreads();");
  // S = q k^T for this warp's 16 rows and the tile's 64 keys.
  line("float s[8][4];");
  line("#pragma unroll");
  line("for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;");
  line("#pragma unroll");
  open("for (int kc = 0; kc < " + std::to_string(d / 16) + "; ++kc)");
  line("#pragma unroll");
  open("for (int j = 0; j < 8; ++j)");
  line("const ushort* pb = " + sk + " + (j * 8 + g) * " + std::to_string(kp) + " + kc * 16 + 2 * t;");
  line("uint b0 = *(const uint*)pb, b1 = *(const uint*)(pb + 8);");
  line("asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type +
       ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"");
  line("    : \"+f\"(s[j][0]), \"+f\"(s[j][1]), \"+f\"(s[j][2]), \"+f\"(s[j][3])");
  line("    : \"r\"(qf[kc][0]), \"r\"(qf[kc][1]), \"r\"(qf[kc][2]), \"r\"(qf[kc][3]), \"r\"(b0), \"r\"(b1));");
  close();
  close();
  // Scale, mask, bounds; in log2 units.
  line("float x0 = U2F(0xff800000u), x1 = U2F(0xff800000u);");
  line("#pragma unroll");
  open("for (int j = 0; j < 8; ++j)");
  line("#pragma unroll");
  open("for (int r = 0; r < 4; ++r)");
  line("IDX row = r < 2 ? row0 : row1, key = k0 + TO_IDX(j * 8 + 2 * t + r % 2);");
  line("float x = s[j][r] * " + float_lit(*o->attrs->scale) + ";");
  if (o->mask >= 0)
    line("if (row < Sq && key < Sk) x += " + load(o->mask, attention_mask(*o, bc, "row", "key")) + ";");
  line("if (key >= Sk" + std::string(o->attrs->causal ? " || key > row" : "") + ") x = U2F(0xff800000u);");
  line("x *= " + log2e + ";");
  line("s[j][r] = x;");
  line("if (r < 2) x0 = k_fmax(x0, x); else x1 = k_fmax(x1, x);");
  close();
  close();
  line("x0 = k_fmax(x0, __shfl_xor_sync(0xffffffffu, x0, 1)); x0 = k_fmax(x0, __shfl_xor_sync(0xffffffffu, x0, 2));");
  line("x1 = k_fmax(x1, __shfl_xor_sync(0xffffffffu, x1, 1)); x1 = k_fmax(x1, __shfl_xor_sync(0xffffffffu, x1, 2));");
  // A row whose scores are all -inf so far shifts by 0, which keeps -inf - -inf out of exp2.
  line("float n0 = k_fmax(m0, x0), n1 = k_fmax(m1, x1);");
  line("float h0 = n0 == U2F(0xff800000u) ? 0.0f : n0, h1 = n1 == U2F(0xff800000u) ? 0.0f : n1;");
  line("float a0 = exp2f(m0 - h0), a1 = exp2f(m1 - h1);");
  line("m0 = n0; m1 = n1; l0 *= a0; l1 *= a1;");
  line("#pragma unroll");
  open("for (int n = 0; n < " + std::to_string(dv / 8) + "; ++n)");
  line("oacc[n][0] *= a0; oacc[n][1] *= a0; oacc[n][2] *= a1; oacc[n][3] *= a1;");
  close();
  line("#pragma unroll");
  open("for (int j = 0; j < 8; ++j)");
  line("s[j][0] = exp2f(s[j][0] - h0); s[j][1] = exp2f(s[j][1] - h0);");
  line("s[j][2] = exp2f(s[j][2] - h1); s[j][3] = exp2f(s[j][3] - h1);");
  line("l0 += s[j][0] + s[j][1]; l1 += s[j][2] + s[j][3];");
  close();
  // O += p V: key chunk kc of 16 is accumulator tiles 2kc and 2kc + 1.
  line("#pragma unroll");
  open("for (int kc = 0; kc < 4; ++kc)");
  line("uint pa[4];");
  const std::string cvt = "cvt.rn." + type + "x2.f32";
  line("asm(\"" + cvt + " %0, %1, %2;\" : \"=r\"(pa[0]) : \"f\"(s[2 * kc][1]), \"f\"(s[2 * kc][0]));");
  line("asm(\"" + cvt + " %0, %1, %2;\" : \"=r\"(pa[1]) : \"f\"(s[2 * kc][3]), \"f\"(s[2 * kc][2]));");
  line("asm(\"" + cvt + " %0, %1, %2;\" : \"=r\"(pa[2]) : \"f\"(s[2 * kc + 1][1]), \"f\"(s[2 * kc + 1][0]));");
  line("asm(\"" + cvt + " %0, %1, %2;\" : \"=r\"(pa[3]) : \"f\"(s[2 * kc + 1][3]), \"f\"(s[2 * kc + 1][2]));");
  line("#pragma unroll");
  open("for (int n = 0; n < " + std::to_string(dv / 8) + "; ++n)");
  line("const ushort* pb = " + sv + " + (n * 8 + g) * " + std::to_string(vp) + " + kc * 16 + 2 * t;");
  line("uint b0 = *(const uint*)pb, b1 = *(const uint*)(pb + 8);");
  line("asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type +
       ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"");
  line("    : \"+f\"(oacc[n][0]), \"+f\"(oacc[n][1]), \"+f\"(oacc[n][2]), \"+f\"(oacc[n][3])");
  line("    : \"r\"(pa[0]), \"r\"(pa[1]), \"r\"(pa[2]), \"r\"(pa[3]), \"r\"(b0), \"r\"(b1));");
  close();
  close();
  close();  // key tiles
  line("l0 += __shfl_xor_sync(0xffffffffu, l0, 1); l0 += __shfl_xor_sync(0xffffffffu, l0, 2);");
  line("l1 += __shfl_xor_sync(0xffffffffu, l1, 1); l1 += __shfl_xor_sync(0xffffffffu, l1, 2);");
  line("IDX or0 = " + attention_row(*o, m_.anchor, bc, "row0") + ", or1 = " + attention_row(*o, m_.anchor, bc, "row1") + ";");
  line("#pragma unroll");
  open("for (int n = 0; n < " + std::to_string(dv / 8) + "; ++n)");
  line("IDX col = TO_IDX(n * 8 + 2 * t);");
  open("if (row0 < Sq)");
  store(o->out, "or0 + col", "oacc[n][0] / l0");
  store(o->out, "or0 + col + TO_IDX(1)", "oacc[n][1] / l0");
  close();
  open("if (row1 < Sq)");
  store(o->out, "or1 + col", "oacc[n][2] / l1");
  store(o->out, "or1 + col + TO_IDX(1)", "oacc[n][3] / l1");
  close();
  close();
  close();  // query tiles
}

artifact::KernelDispatch cuda_flash_attention_dispatch(const KernelModel& m, const CudaConfig& c) {
  // Work units are query tiles of 64 rows per batch entry (as the matmul templates count tiles).
  const ir::Node& a = m.node(m.anchor);
  const auto& attrs = std::get<ir::AttentionAttrs>(a.attrs);
  const ir::Shape& qs = m.node(a.inputs[0]).type.shape;
  ir::Shape batch = attrs.seq_major ? ir::Shape{qs[0], qs[2]} : ir::Shape(qs.begin(), qs.end() - 2);
  const ir::Dim sq = attrs.seq_major ? qs[1] : qs[qs.size() - 2];
  artifact::KernelDispatch d;
  d.workgroup_size = c.block;
  if (sq.is_static()) {
    batch.push_back(ir::Dim::of((sq.size() + c.bm - 1) / c.bm));
    d.work_items = ir::SizeExpr::of_shape(batch, 1);
    d.items_per_group = 1;
  } else {
    // Sq + 63 units of 1/64 tile each per batch entry: ceil(units / 64) covers every tile.
    ir::Shape rows = batch;
    rows.push_back(sq);
    d.work_items = ir::SizeExpr::of_shape(rows, 1) + ir::SizeExpr::of_shape(batch, c.bm - 1);
    d.items_per_group = c.bm;
  }
  return d;
}

}  // namespace kiln::codegen::cfam
