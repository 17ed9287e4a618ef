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
#include "support/check.h"

namespace kiln::codegen::cfam {

namespace {
constexpr int64_t kKeyTile = 64;
constexpr int64_t kMaxFlashHead = 128;  // K and V^T tiles of 64 keys fit the 48 KB of static shared memory
constexpr int64_t kMaxF32Head = 64;     // f32: q^T, k^T (then p) and v tiles in 41 KB
constexpr uint32_t kF32Rows = 32;       // f32: query rows per block (8 row groups of 4 threads' rows)
constexpr uint32_t kPad = 8;  // ushorts of padding per staged row
// The attention anchor's operand sizes (ir::attention_shape).
Result<ir::AttentionShape> shape_of(const KernelModel& m) {
  const ir::Node& a = m.node(m.anchor);
  return ir::attention_shape(m.node(a.inputs[0]).type.shape, m.node(a.inputs[1]).type.shape,
                             m.node(a.inputs[2]).type.shape, std::get<ir::AttentionAttrs>(a.attrs).seq_major);
}

}  // namespace

bool cuda_flash_attention_config(const KernelModel& m, CudaConfig& c) {
  if (m.kind != KernelTemplate::kAttention) return false;
  const ir::DType t = m.node(m.anchor).type.dtype;
  Result<ir::AttentionShape> s = shape_of(m);
  if (!s || !s->d.is_static() || !s->dv.is_static()) return false;
  const int64_t d = s->d.size(), dv = s->dv.size();
  if (t == ir::DType::kF32) {
    if (d % 4 != 0 || d == 0 || d > kMaxF32Head || dv % 64 != 0 || dv == 0 || dv > kMaxF32Head) return false;
    c.mode = CudaConfig::Mode::kAttentionFma;
    c.block = 128;
    c.bm = kF32Rows;
    return true;
  }
  if (t != ir::DType::kF16 && t != ir::DType::kBF16) return false;
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
  // Stages `width` columns of the tile's 64 rows of `src` (row r at base + r * stride) into
  // `tile`, row-major with `pitch` or transposed; 16-byte loads when K and V are 16-byte aligned
  // (row offsets are multiples of 16 elements, so every row start is then aligned too).
  auto stage = [&](const std::string& src, const std::string& base, const std::string& stride, int64_t width,
                   const std::string& tile, uint32_t pitch, bool transposed, bool vector) {
    const int64_t per = vector ? 8 : 1;
    const std::string cols = std::to_string(width / per), pitch_text = std::to_string(pitch);
    const std::string at = src + " + " + base + " + (k0 + TO_IDX(key)) * " + stride + " + TO_IDX(c)";
    line(vector ? "#pragma unroll" : "#pragma unroll 4");
    open("for (int e = (int)lid; e < " + std::to_string(kKeyTile * width / per) + "; e += " + block + ")");
    line("int key = e / " + cols + ", c = (e % " + cols + ") * " + std::to_string(per) + ";");
    line("bool in = k0 + TO_IDX(key) < Sk;");
    if (!vector) {
      line(tile + "[" + (transposed ? "c * " + pitch_text + " + key" : "key * " + pitch_text + " + c") +
           "] = in ? *(" + at + ") : (ushort)0;");
    } else if (!transposed) {
      line("*(uint4*)(" + tile + " + key * " + pitch_text + " + c) = in ? *(const uint4*)(" + at +
           ") : make_uint4(0u, 0u, 0u, 0u);");
    } else {
      line("uint4 w = in ? *(const uint4*)(" + at + ") : make_uint4(0u, 0u, 0u, 0u);");
      const char* words[] = {"w.x", "w.y", "w.z", "w.w"};
      for (int i = 0; i < 8; ++i)
        line(tile + "[(c + " + std::to_string(i) + ") * " + pitch_text + " + key] = (ushort)(" + words[i / 2] +
             (i % 2 ? " >> 16" : "") + ");");
    }
    close();
  };
  for (bool vector : {true, false}) {
    open(vector ? "if (vec)" : "else");
    stage(k, "kr", "ks", d, sk, kp, /*transposed=*/false, vector);
    stage(v, "vr", "vs", dv, sv, vp, /*transposed=*/true, vector);
    close();
  }
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
  emit_mma_m16n8k16(type, "s[j]", "qf[kc]", "b0", "b1");
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
  emit_mma_m16n8k16(type, "oacc[n]", "pa", "b0", "b1");
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
  // Work units are query tiles of c.bm rows per batch entry (as the matmul templates count tiles).
  const Result<ir::AttentionShape> s = shape_of(m);
  KILN_CHECK(s.is_ok(), "the attention config accepted a kernel whose shapes disagree");
  ir::Shape batch = s->batch;
  const ir::Dim sq = s->sq;
  artifact::KernelDispatch d;
  d.workgroup_size = c.block;
  if (sq.is_static()) {
    batch.push_back(ir::Dim::of((sq.size() + c.bm - 1) / c.bm));
    d.work_items = ir::SizeExpr::of_shape(batch, 1);
    d.items_per_group = 1;
  } else {
    // Sq + bm - 1 units of 1/bm tile each per batch entry: ceil(units / bm) covers every tile.
    ir::Shape rows = batch;
    rows.push_back(sq);
    d.work_items = ir::SizeExpr::of_shape(rows, 1) + ir::SizeExpr::of_shape(batch, c.bm - 1);
    d.items_per_group = c.bm;
  }
  return d;
}

// The f32 variant (Mode::kAttentionFma): no tensor cores (f32 keeps f32 accuracy), register tiles
// of FMAs. A block of 128 threads takes 32 query rows; thread (ty, tx) = (tid / 16, tid % 16)
// owns rows 4ty..4ty+3 of both the 32 x 64 score tile (keys 4tx..4tx+3) and the output (columns
// 4tx..4tx+3 of each 64-wide chunk of Dv), so the row rescaling stays in registers. q and k are
// staged transposed ([d][row], [d][key]) so that both operands of a score step are one float4
// read (q broadcast over the 16 threads of a row group, k over consecutive keys); after the
// scores, the probabilities overwrite the k^T tile as [row][key] and the output step reads them
// (broadcast) with float4 rows of v. Row maxima and sums combine over the 16 lanes of a row group
// (shuffles by 1, 2, 4 and 8 stay inside it).
void Emitter::emit_cuda_f32_attention(const CudaConfig& c) {
  const std::optional<AttentionOperands> o = attention_operands();
  if (!o) return;
  const int64_t d = o->d, dv = o->dv, chunks = dv / 64;
  constexpr uint32_t kKeyPitch = 68, kProbPitch = 68;  // padded by 4 floats
  const std::string rows = std::to_string(kF32Rows);
  const std::string sq = shared_array("__align__(16) float", "tile_qt", uint32_t(d) * kF32Rows);
  const std::string sk = shared_array("__align__(16) float", "tile_kt", uint32_t(std::max<int64_t>(d * kKeyPitch, kF32Rows * kProbPitch)));
  const std::string sv = shared_array("__align__(16) float", "tile_v", uint32_t(kKeyTile * dv));
  const std::string q = "b" + std::to_string(o->q), k = "b" + std::to_string(o->k), v = "b" + std::to_string(o->v);
  const ir::NodeId qn = o->anchor->inputs[0], kn = o->anchor->inputs[1], vn = o->anchor->inputs[2];
  const std::string dn = std::to_string(d), dvn = std::to_string(dv), ch = std::to_string(chunks);
  const std::string kp = std::to_string(kKeyPitch), pp = std::to_string(kProbPitch);
  const std::string ninf = "U2F(0xff800000u)";

  line("IDX Sq = " + o->sq + ", Sk = " + o->sk + ";");
  line("IDX qtiles = (Sq + TO_IDX(" + std::to_string(c.bm - 1) + ")) / TO_IDX(" + std::to_string(c.bm) + ");");
  line("IDX ntiles = " + product(o->shape.batch) + " * qtiles;");
  line("int ty = (int)lid / 16, tx = (int)lid % 16;");
  open("for (IDX tile = gid; tile < ntiles; tile += ngroups)");
  line("IDX bidx = tile / qtiles, q0 = (tile % qtiles) * TO_IDX(" + std::to_string(c.bm) + ");");
  const std::vector<std::string> bc = decompose("bidx", o->shape.batch);
  line("IDX qr = " + attention_row(*o, qn, bc, "TO_IDX(0)") + ", qs = " + attention_row(*o, qn, bc, "TO_IDX(1)") + " - qr;");
  line("IDX kr = " + attention_row(*o, kn, bc, "TO_IDX(0)") + ", ks = " + attention_row(*o, kn, bc, "TO_IDX(1)") + " - kr;");
  line("IDX vr = " + attention_row(*o, vn, bc, "TO_IDX(0)") + ", vs = " + attention_row(*o, vn, bc, "TO_IDX(1)") + " - vr;");
  line("__syncthreads();");  // the previous tile's last reads of the q^T tile are done
  open("for (int e = (int)lid; e < " + std::to_string(d * kF32Rows) + "; e += " + std::to_string(c.block) + ")");
  line("int row = e / " + dn + ", col = e % " + dn + ";");
  line(sq + "[col * " + rows + " + row] = q0 + TO_IDX(row) < Sq ? " + q + "[qr + (q0 + TO_IDX(row)) * qs + TO_IDX(col)] * " +
       float_lit(*o->attrs->scale) + " : 0.0f;");
  close();
  line("float oacc[" + ch + "][4][4];");
  line("#pragma unroll");
  open("for (int n = 0; n < " + ch + "; ++n)");
  line("for (int i = 0; i < 4; ++i) oacc[n][i][0] = oacc[n][i][1] = oacc[n][i][2] = oacc[n][i][3] = 0.0f;");
  close();
  line("float m[4] = {" + ninf + ", " + ninf + ", " + ninf + ", " + ninf + "}, l[4] = {0.0f, 0.0f, 0.0f, 0.0f};");
  line("IDX kend = " + (o->attrs->causal ? "(q0 + TO_IDX(" + rows + ") < Sk ? q0 + TO_IDX(" + rows + ") : Sk)" : std::string("Sk")) + ";");
  line("#pragma unroll 1");
  open("for (IDX k0 = TO_IDX(0); k0 < kend; k0 += TO_IDX(64))");
  line("__syncthreads();");  // the previous tile's probabilities and v rows are read
  open("for (int e = (int)lid; e < " + std::to_string(kKeyTile * d) + "; e += " + std::to_string(c.block) + ")");
  line("int key = e / " + dn + ", col = e % " + dn + ";");
  line(sk + "[col * " + kp + " + key] = k0 + TO_IDX(key) < Sk ? " + k + "[kr + (k0 + TO_IDX(key)) * ks + TO_IDX(col)] : 0.0f;");
  close();
  open("for (int e = (int)lid; e < " + std::to_string(kKeyTile * dv) + "; e += " + std::to_string(c.block) + ")");
  line("int key = e / " + dvn + ", col = e % " + dvn + ";");
  line(sv + "[key * " + dvn + " + col] = k0 + TO_IDX(key) < Sk ? " + v + "[vr + (k0 + TO_IDX(key)) * vs + TO_IDX(col)] : 0.0f;");
  close();
  line("__syncthreads();");
  // Scores: rows 4ty + i, keys 4tx + j.
  line("float s[4][4];");
  line("#pragma unroll");
  line("for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;");
  line("#pragma unroll 8");
  open("for (int kk = 0; kk < " + dn + "; ++kk)");
  line("float4 a = *(const float4*)(" + sq + " + kk * " + rows + " + ty * 4);");
  line("float4 b = *(const float4*)(" + sk + " + kk * " + kp + " + tx * 4);");
  line("float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};");
  line("#pragma unroll");
  line("for (int i = 0; i < 4; ++i)");
  line("#pragma unroll");
  line("  for (int j = 0; j < 4; ++j) s[i][j] += av[i] * bv[j];");
  close();
  // Mask, bounds, causal; the row maxima over the row group's 16 lanes; the probabilities.
  line("float alpha[4], shift[4];");
  line("#pragma unroll");
  open("for (int i = 0; i < 4; ++i)");
  line("IDX row = q0 + TO_IDX(ty * 4 + i);");
  line("float mx = " + ninf + ";");
  line("#pragma unroll");
  open("for (int j = 0; j < 4; ++j)");
  line("IDX key = k0 + TO_IDX(tx * 4 + j);");
  line("float x = s[i][j];");
  if (o->mask >= 0) line("if (row < Sq && key < Sk) x += " + load(o->mask, attention_mask(*o, bc, "row", "key")) + ";");
  line("if (key >= Sk" + std::string(o->attrs->causal ? " || key > row" : "") + ") x = " + ninf + ";");
  line("s[i][j] = x;");
  line("mx = k_fmax(mx, x);");
  close();
  line("for (int off = 1; off < 16; off *= 2) mx = k_fmax(mx, __shfl_xor_sync(0xffffffffu, mx, off));");
  line("float next = k_fmax(m[i], mx);");
  line("shift[i] = next == " + ninf + " ? 0.0f : next;");  // every score -inf so far: no -inf - -inf
  line("alpha[i] = expf(m[i] - shift[i]);");
  line("m[i] = next;");
  line("float sum = 0.0f;");
  line("#pragma unroll");
  line("for (int j = 0; j < 4; ++j) { s[i][j] = expf(s[i][j] - shift[i]); sum += s[i][j]; }");
  line("l[i] = l[i] * alpha[i] + sum;");
  line("#pragma unroll");
  line("for (int n = 0; n < " + ch + "; ++n) { oacc[n][i][0] *= alpha[i]; oacc[n][i][1] *= alpha[i]; oacc[n][i][2] *= alpha[i]; oacc[n][i][3] *= alpha[i]; }");
  close();
  line("__syncthreads();");  // every thread is done reading the k^T tile
  line("#pragma unroll");
  line("for (int i = 0; i < 4; ++i) *(float4*)(" + sk + " + (ty * 4 + i) * " + pp + " + tx * 4) = make_float4(s[i][0], s[i][1], s[i][2], s[i][3]);");
  line("__syncthreads();");
  // Output: rows 4ty + i, columns 64n + 4tx + j.
  line("#pragma unroll 4");
  open("for (int j = 0; j < 64; ++j)");
  line("float p[4];");
  line("#pragma unroll");
  line("for (int i = 0; i < 4; ++i) p[i] = " + sk + "[(ty * 4 + i) * " + pp + " + j];");
  line("#pragma unroll");
  open("for (int n = 0; n < " + ch + "; ++n)");
  line("float4 w = *(const float4*)(" + sv + " + j * " + dvn + " + n * 64 + tx * 4);");
  line("#pragma unroll");
  line("for (int i = 0; i < 4; ++i) { oacc[n][i][0] += p[i] * w.x; oacc[n][i][1] += p[i] * w.y; oacc[n][i][2] += p[i] * w.z; oacc[n][i][3] += p[i] * w.w; }");
  close();
  close();
  close();  // key tiles
  line("#pragma unroll");
  open("for (int i = 0; i < 4; ++i)");
  line("float total = l[i];");
  line("for (int off = 1; off < 16; off *= 2) total += __shfl_xor_sync(0xffffffffu, total, off);");
  line("IDX row = q0 + TO_IDX(ty * 4 + i);");
  open("if (row < Sq)");
  line("IDX o0 = " + attention_row(*o, m_.anchor, bc, "row") + ";");
  line("#pragma unroll");
  open("for (int n = 0; n < " + ch + "; ++n)");
  line("#pragma unroll");
  open("for (int j = 0; j < 4; ++j)");
  store(o->out, "o0 + TO_IDX(n * 64 + tx * 4 + j)", "oacc[n][i][j] / total");
  close();
  close();
  close();
  close();
  close();  // query tiles
}

}  // namespace kiln::codegen::cfam
