// conv2d on CUDA as an implicit GEMM. Per group g, the convolution is the matrix product
//   out[m][oc] = sum_k A[m][k] * B[k][oc]   with
//   m  = (n, oh, ow)       M = N*OH*OW output pixels (N may be symbolic),
//   oc = output channel of the group (OC/groups columns),
//   k  = (ci, kh, kw)      K = (C/groups)*KH*KW,
//   A[m][k] = x[n, g*C/groups + ci, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw] (0 in the padding),
//   B[k][oc] = w[g*OC/groups + oc, ci, kh, kw] (the filter is already [OC][K] row-major).
// In NHWC (channels_last) k = (kh, kw, ci) instead, which is again the filter's [OC][K] order
// ([OC, KH, KW, C/groups]); the gather then reads along the channels, neighbouring threads'
// pixels C apart (this template is the fallback there: cuDNN runs NHWC convs where it loads).
// A is never materialized: each k step gathers its bm x bk tile of A from the input into shared
// memory, and a bk x bn tile of B from the filter; the product runs on register tiles as in the
// matmul template (c_family_cuda.cpp), with f32 accumulation. The bias and the elementwise
// epilogue run per output element at its (n, oc, oh, ow). Blocks walk (group, pixel tile,
// channel tile) grid-stride.
//
// Thread roles differ from the matmul template because memory lies differently: neighbouring
// output pixels are neighbouring input columns (stride 1) and neighbouring output elements, so
// consecutive threads take consecutive pixels both when gathering A and when storing results,
// while the filter is read along k (contiguous in [OC][K]). A thread's pixel in the gather is the
// same for every k step of a tile, so its (n, oh, ow) decomposition is done once per tile.
//
// The direct template (one thread per output element, c_family_pointwise.cpp) stays for what a
// 64-pixel x 16..128-channel tile would mostly waste or what this template does not index:
// fewer than 16 output channels per group (depthwise included), a reduction K < 16, fewer than
// 32 output pixels in all, and shapes that are symbolic beyond the batch or whose per-image
// input or filter exceeds 2^31 elements (32-bit offsets inside the tile loop).
#include "codegen/c_family_internal.h"

namespace kiln::codegen::cfam {

using ir::Node;
using ir::NodeId;
using ir::OpKind;

namespace {

constexpr uint32_t kConvThreads = 256;
constexpr int64_t kMinChannels = 16;  // output channels per group
constexpr int64_t kMinReduction = 16;  // K = C/groups * KH * KW
constexpr int64_t kMinPixels = 32;     // N*OH*OW when N is static

// The static facts of a conv the implicit GEMM can run; false when it should stay direct.
struct ConvGemmShape {
  ir::Dim batch;
  int64_t c = 0, h = 0, w = 0, oc = 0, kh = 0, kw = 0, oh = 0, ow = 0, groups = 1;
  int64_t cg = 0, ocg = 0, k = 0;
  ir::Conv2dAttrs attrs;
};

bool conv_gemm_shape(const KernelModel& m, ConvGemmShape& s) {
  if (m.kind != KernelTemplate::kPointwise || m.anchor == ir::kNoNode || !m.prologue.empty()) return false;
  const Node& a = m.node(m.anchor);
  if (a.op != OpKind::kConv2d || num_of(a.type.dtype) != Num::kF) return false;
  for (NodeId in : a.inputs) {
    if (m.buffer_index(in) < 0 || num_of(m.node(in).type.dtype) != Num::kF) return false;
  }
  const ir::Shape& xs = m.node(a.inputs[0]).type.shape;
  const ir::Shape& ws = m.node(a.inputs[1]).type.shape;
  const ir::Shape& ys = a.type.shape;
  if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4) return false;
  if (!ir::is_static_from(xs, 1) || !ir::is_static(ws) || !ir::is_static_from(ys, 1)) return false;
  s.attrs = std::get<ir::Conv2dAttrs>(a.attrs);
  const ir::ImageAxes ax = ir::image_axes(s.attrs.channels_last);
  s.batch = xs[ax.n];
  s.c = xs[ax.c].size(); s.h = xs[ax.h].size(); s.w = xs[ax.w].size();
  s.oc = ws[ax.n].size(); s.cg = ws[ax.c].size(); s.kh = ws[ax.h].size(); s.kw = ws[ax.w].size();
  s.oh = ys[ax.h].size(); s.ow = ys[ax.w].size();
  s.groups = s.attrs.groups;
  if (s.groups < 1 || s.oc % s.groups != 0) return false;
  s.ocg = s.oc / s.groups;
  s.k = s.cg * s.kh * s.kw;
  constexpr int64_t kInt = int64_t(1) << 31;
  if (s.c * s.h * s.w >= kInt || s.oc * s.k >= kInt || s.oh * s.ow >= kInt) return false;
  if (s.ocg < kMinChannels || s.k < kMinReduction) return false;
  if (s.batch.is_static() && s.batch.size() * s.oh * s.ow < kMinPixels) return false;
  return true;
}

}  // namespace

bool cuda_conv_gemm_config(const KernelModel& m, CudaConfig& c) {
  ConvGemmShape s;
  if (!conv_gemm_shape(m, s)) return false;
  c.mode = CudaConfig::Mode::kConvGemm;
  // Every configuration is 16 x 16 threads (bm/tm = bn/tn = 16), and bm divides the block so
  // that a thread gathers the same pixel of A at every k step.
  // The tile count with the batch at its smallest (1 when symbolic): 128x128 tiles only where
  // they still give two waves on a 132-SM GPU, as in the matmul template.
  const int64_t images = s.batch.is_static() ? s.batch.size() : 1;
  const int64_t big_tiles = s.groups * ((images * s.oh * s.ow + 127) / 128) * ((s.ocg + 127) / 128);
  if (s.ocg <= 32) {
    c.bm = 128; c.bn = 32; c.bk = 16; c.tm = 8; c.tn = 2;  // few channels: taller tiles
  } else if (s.ocg >= 128 && big_tiles >= 264) {
    c.bm = 128; c.bn = 128; c.bk = 8; c.tm = 8; c.tn = 8;
  } else {
    c.bm = 64; c.bn = 64; c.bk = 16; c.tm = 4; c.tn = 4;
  }
  c.block = kConvThreads;
  return true;
}

artifact::KernelDispatch cuda_conv_gemm_dispatch(const KernelModel& m, const CudaConfig& c) {
  ConvGemmShape s;
  conv_gemm_shape(m, s);
  artifact::KernelDispatch d;
  d.workgroup_size = c.block;
  const int64_t tiles_n = s.groups * ((s.ocg + c.bn - 1) / c.bn);
  if (s.batch.is_static()) {
    d.work_items = ir::SizeExpr::constant(tiles_n * ((s.batch.size() * s.oh * s.ow + c.bm - 1) / c.bm));
    d.items_per_group = 1;
  } else {
    // M = N*OH*OW pixels in tiles of bm: (M + bm - 1) units of 1/bm pixel tile per channel
    // tile, so that ceil(work_items / bm) is the tile count.
    d.work_items = (ir::SizeExpr::of_shape({s.batch}, s.oh * s.ow) + ir::SizeExpr::constant(c.bm - 1)) * tiles_n;
    d.items_per_group = c.bm;
  }
  return d;
}

void Emitter::emit_cuda_conv_gemm(const CudaConfig& c) {
  ConvGemmShape s;
  if (!conv_gemm_shape(m_, s)) {
    fail(internal_error("kernel '" + m_.kernel->name + "': not an implicit-GEMM conv"));
    return;
  }
  const Node& a = m_.node(m_.anchor);
  const int bx = m_.buffer_index(a.inputs[0]), bw = m_.buffer_index(a.inputs[1]);
  const int bb = a.inputs.size() > 2 ? m_.buffer_index(a.inputs[2]) : -1;
  auto num = [](int64_t v) { return std::to_string(v); };
  auto idx = [&](int64_t v) { return "TO_IDX(" + num(v) + ")"; };
  const uint32_t threads = c.block, rows_step = c.bm / c.tm, cols_step = c.bn / c.tn;
  const uint32_t b_pitch = c.bn + 1;  // the B stores walk k (stride pitch): the pad spreads banks
  const std::string sa = shared_array("float", "tile_a", c.bk * c.bm);
  const std::string sb = shared_array("float", "tile_b", c.bk * b_pitch);
  const int64_t pixels = s.oh * s.ow, tiles_n = (s.ocg + c.bn - 1) / c.bn;
  const auto& at = s.attrs;

  line("// implicit GEMM: M = N*" + num(pixels) + " pixels, " + num(s.groups) + " group(s) of " + num(s.ocg) +
       " channels, K = " + num(s.k));
  line("IDX M = " + dim(s.batch) + " * " + idx(pixels) + ";");
  line("IDX tiles_m = (M + " + idx(c.bm - 1) + ") / " + idx(c.bm) + ";");
  line("IDX ntiles = " + idx(s.groups * tiles_n) + " * tiles_m;");
  line("int tx = (int)lid % " + num(rows_step) + ", ty = (int)lid / " + num(rows_step) + ";");
  line("int am = (int)lid % " + num(c.bm) + ", ak0 = (int)lid / " + num(c.bm) + ";");
  // Channel tiles vary fastest: consecutive blocks gather the same input pixels.
  open("for (IDX tile = gid; tile < ntiles; tile += ngroups)");
  line("int tn = (int)(tile % " + idx(tiles_n) + ");");
  line("IDX tm = (tile / " + idx(tiles_n) + ") % tiles_m;");
  line("int grp = (int)(tile / (" + idx(tiles_n) + " * tiles_m));");
  line("IDX row0 = tm * " + idx(c.bm) + ";");
  line("int col0 = tn * " + num(c.bn) + ";");
  // This thread's pixel of the A gather, fixed for the whole tile.
  line("IDX gr = row0 + TO_IDX(am);");
  line("bool row_ok = gr < M;");
  line("IDX img = gr / " + idx(pixels) + ";");
  line("int pix = (int)(gr - img * " + idx(pixels) + ");");
  line("int ih0 = (pix / " + num(s.ow) + ") * " + num(at.strides[0]) + " - " + num(at.pads[0]) + ";");
  line("int iw0 = (pix % " + num(s.ow) + ") * " + num(at.strides[1]) + " - " + num(at.pads[1]) + ";");
  const bool nhwc = at.channels_last;
  line("IDX xbase = img * " + idx(s.c * s.h * s.w) + " + TO_IDX(grp) * " + idx(nhwc ? s.cg : s.cg * s.h * s.w) + ";");
  line("int wbase = grp * " + num(s.ocg * s.k) + ";");
  line("float acc[" + num(c.tm) + "][" + num(c.tn) + "];");
  line("#pragma unroll");
  open("for (int i = 0; i < " + num(c.tm) + "; ++i)");
  line("#pragma unroll");
  line("for (int j = 0; j < " + num(c.tn) + "; ++j) acc[i][j] = 0.0f;");
  close();
  // Rolled, as the matmul's tile loop (c_family_cuda.cpp): unrolling a literal trip count
  // tripled NVRTC's time on ResNet-50 for no speed.
  line("#pragma unroll 1");
  open("for (int k0 = 0; k0 < " + num(s.k) + "; k0 += " + num(c.bk) + ")");
  // A: k -> (ci, kh, kw) with constant divisors; out-of-image taps and rows past M read 0.
  line("#pragma unroll");
  open("for (int l = 0; l < " + num(c.bm * c.bk / threads) + "; ++l)");
  line("int ak = ak0 + l * " + num(threads / c.bm) + ", gk = k0 + ak;");
  line("float v = 0.0f;");
  open("if (row_ok && gk < " + num(s.k) + ")");
  if (nhwc) {
    line("int ci = gk % " + num(s.cg) + ", r = gk / " + num(s.cg) + ";");
  } else {
    line("int ci = gk / " + num(s.kh * s.kw) + ", r = gk % " + num(s.kh * s.kw) + ";");
  }
  line("int ih = ih0 + (r / " + num(s.kw) + ") * " + num(at.dilations[0]) + ";");
  line("int iw = iw0 + (r % " + num(s.kw) + ") * " + num(at.dilations[1]) + ";");
  const std::string x_offset = nhwc ? "(ih * " + num(s.w) + " + iw) * " + num(s.c) + " + ci"
                                    : "ci * " + num(s.h * s.w) + " + ih * " + num(s.w) + " + iw";
  line("if ((unsigned)ih < " + num(s.h) + "u && (unsigned)iw < " + num(s.w) + "u) v = TO_F(" +
       load(bx, "xbase + TO_IDX(" + x_offset + ")") + ");");
  close();
  line(sa + "[ak * " + num(c.bm) + " + am] = v;");
  close();
  // B: consecutive threads read consecutive k of one filter row.
  line("#pragma unroll");
  open("for (int l = 0; l < " + num(c.bk * c.bn / threads) + "; ++l)");
  line("int e = (int)lid + l * " + num(threads) + ", kb = e % " + num(c.bk) + ", nb = e / " + num(c.bk) + ";");
  line("int gk = k0 + kb, gc = col0 + nb;");
  line(sb + "[kb * " + num(b_pitch) + " + nb] = (gk < " + num(s.k) + " && gc < " + num(s.ocg) + ") ? TO_F(" +
       load(bw, "TO_IDX(wbase + gc * " + num(s.k) + " + gk)") + ") : 0.0f;");
  close();
  line("__syncthreads();");
  line("#pragma unroll");
  open("for (int kk = 0; kk < " + num(c.bk) + "; ++kk)");
  line("float af[" + num(c.tm) + "], bf[" + num(c.tn) + "];");
  line("#pragma unroll");
  line("for (int i = 0; i < " + num(c.tm) + "; ++i) af[i] = " + sa + "[kk * " + num(c.bm) + " + tx + i * " +
       num(rows_step) + "];");
  line("#pragma unroll");
  line("for (int j = 0; j < " + num(c.tn) + "; ++j) bf[j] = " + sb + "[kk * " + num(b_pitch) + " + ty + j * " +
       num(cols_step) + "];");
  line("#pragma unroll");
  open("for (int i = 0; i < " + num(c.tm) + "; ++i)");
  line("#pragma unroll");
  line("for (int j = 0; j < " + num(c.tn) + "; ++j) acc[i][j] += af[i] * bf[j];");
  close();
  close();
  line("__syncthreads();");
  close();
  // Outputs: pixels tx + i * rows_step (consecutive threads, consecutive ow: coalesced stores),
  // channels ty + j * cols_step.
  line("#pragma unroll");
  open("for (int i = 0; i < " + num(c.tm) + "; ++i)");
  line("IDX row = row0 + TO_IDX(tx + i * " + num(rows_step) + ");");
  line("IDX on = row / " + idx(pixels) + ";");
  line("int opix = (int)(row - on * " + idx(pixels) + ");");
  line("IDX ooh = TO_IDX(opix / " + num(s.ow) + "), oow = TO_IDX(opix % " + num(s.ow) + ");");
  line("#pragma unroll");
  open("for (int j = 0; j < " + num(c.tn) + "; ++j)");
  line("int col = col0 + ty + j * " + num(cols_step) + ";");
  open("if (row < M && col < " + num(s.ocg) + ")");
  line("IDX oc = TO_IDX(grp * " + num(s.ocg) + " + col);");
  line("float y = acc[i][j];");
  if (bb >= 0) line("y += TO_F(" + load(bb, "oc") + ");");
  Point p;
  p.space = m_.space;
  p.coords = nhwc ? std::vector<std::string>{"on", "ooh", "oow", "oc"} : std::vector<std::string>{"on", "oc", "ooh", "oow"};
  finish_anchor(p, "float", convert("y", Num::kF, a.type.dtype));
  close();
  close();
  close();
  close();
}

}  // namespace kiln::codegen::cfam
