// CUDA C specifics of the C-family emitter: storage types, loads and stores, the launch
// configuration (cuda_config, cuda_dispatch) and the templates written for NVIDIA GPUs:
//   - pointwise: 256-thread blocks, grid-stride; pure elementwise kernels move 16 bytes per
//     buffer access (float4 / 8 x f16 / ...) when every buffer is contiguous in the output's
//     index space, with a scalar path for misaligned pointers and the tail;
//   - rows (reductions, argmax, softmax, log_softmax, layer_norm): one thread per row when the
//     innermost axis is not reduced (coalesced), one warp per short row, one block per long row;
//     partial results combine with __shfl_xor_sync and, across warps, 32 shared-memory slots.
//     Normalizations read the row once when it fits in registers, else twice (online max+sum,
//     Welford mean+variance), and write it once;
//   - matmul: block tiles of 64x64 (or 128x128, 16x64), each thread owning a 4x4 (8x8, 1x4)
//     register tile, A and B staged through shared memory (static, at most 8.3 KB); with f16 or
//     bf16 operands (and more than 16 rows), tensor cores instead: 64x64 block tiles of four
//     warps, each warp a 32x32 tile of mma.sync.m16n8k16 products with f32 accumulators, A and
//     B staged as 16-bit bits (B transposed, so both fragments load as 32-bit pairs).
// Numerics are the OpenCL dialect's (c_family.h): f32 compute, f16/bf16 as 16-bit storage,
// wrap-safe integer arithmetic, saturating float -> int conversions.
#include <algorithm>
#include <functional>

#include "codegen/c_family_internal.h"

namespace kiln::codegen {
namespace cfam {

using ir::DType;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

namespace {

constexpr uint32_t kCudaBlock = 256;          // threads per block of every template but rows-per-block
constexpr uint32_t kMaxRowRegisters = 16;     // normalizations keep up to this many elements per thread
constexpr uint32_t kMaxWarpRow = 128;         // rows up to this long (static) get one warp each
constexpr uint32_t kDynamicWarpRow = 512;     // rows of run-time length up to this get one warp each

bool static_product(const ir::Shape& shape, int64_t& out) {
  out = 1;
  for (const ir::Dim& d : shape) {
    if (!d.is_static()) return false;
    out *= d.size();
  }
  return true;
}

uint32_t pow2_at_least(uint64_t v) {
  uint32_t p = 1;
  while (p < v && p < (1u << 30)) p <<= 1;
  return p;
}

// How a pure elementwise kernel reads one of its buffers in the output's index space.
enum class Access : uint8_t {
  kFull,    // the output's shape: element lin
  kSuffix,  // the output's trailing dims (broadcast along leading axes): element lin % size
  kScalar,  // one element, read once
  kOther,   // any other broadcast: no vector path
};

Access access_of(const ir::Shape& shape, const ir::Shape& space) {
  if (shape == space) return Access::kFull;
  size_t lead = 0;
  while (lead < shape.size() && shape[lead].is_one()) ++lead;
  if (lead == shape.size()) return Access::kScalar;
  const size_t rank = shape.size() - lead;
  if (rank > space.size()) return Access::kOther;
  for (size_t i = 0; i < rank; ++i) {
    if (!(shape[lead + i] == space[space.size() - rank + i])) return Access::kOther;
  }
  return Access::kSuffix;
}

// The vector width (elements per thread) of a pure elementwise kernel, or 1 when it cannot move
// 16-byte vectors: some buffer is broadcast other than along leading axes, a broadcast buffer's
// size is not a multiple of the width, or the plan does not align arena offsets to 16 bytes.
// Pointer alignment of inputs, outputs and constants (placed by the driver or the caller) is
// checked at run time by the kernel itself.
uint32_t vector_width_of(const KernelModel& m) {
  if (m.anchor != ir::kNoNode || m.kind != KernelTemplate::kPointwise || m.space.empty()) return 1;
  size_t widest = 1;
  for (const ModelBuffer& b : m.buffers) widest = std::max(widest, ir::dtype_size(b.dtype));
  const uint32_t width = uint32_t(16 / widest);
  if (width < 2) return 1;
  for (const ModelBuffer& b : m.buffers) {
    const Access access = access_of(b.shape, m.space);
    if (access == Access::kOther) return 1;
    if (b.written && access != Access::kFull) return 1;
    if (access == Access::kSuffix) {
      int64_t size = 0;
      if (static_product(b.shape, size) && size % width != 0) return 1;
    }
    if (m.plan != nullptr && access != Access::kScalar) {
      const ir::BufferAssignment* placed = m.plan->find_buffer(b.value);
      const bool in_arena = placed && (placed->storage == ir::Storage::kArena || placed->storage == ir::Storage::kAlias);
      if (in_arena && m.plan->alignment % 16 != 0) return 1;
    }
  }
  return width;
}

// The buffers a cached row kernel can move in 16-byte vectors, with their offsets relative to
// the vector's first element (row, k0): read buffers of the kernel's full shape (row * K + k0)
// or of the reduced shape alone (k0: layer_norm's scale and bias), and every written buffer,
// which must be of the full shape. Empty when the kernel cannot use vectors: the reduced axes
// are not the innermost ones (so a row is not contiguous), a written buffer is broadcast, a
// buffer wider than 2 bytes takes part (f32 rows already move 128 bytes per warp access), or
// the plan does not align arena offsets to 16 bytes.
struct RowVectors {
  uint32_t width = 1;
  std::vector<std::pair<int, bool>> buffers;  // buffer index, whether at the row's offset
};

RowVectors row_vectors_of(const KernelModel& m, const ir::Shape& red_shape) {
  RowVectors rv;
  size_t first_reduced = m.space.size();
  while (first_reduced > 0 && m.reduced_axes[first_reduced - 1]) --first_reduced;
  for (size_t d = 0; d < first_reduced; ++d)
    if (m.reduced_axes[d]) return rv;
  size_t widest = 1;
  for (size_t b = 0; b < m.buffers.size(); ++b) {
    const ModelBuffer& buf = m.buffers[b];
    ir::Shape trimmed = buf.shape;
    while (!trimmed.empty() && trimmed.front().is_one() && trimmed.size() > red_shape.size())
      trimmed.erase(trimmed.begin());
    const bool full = buf.shape == m.space;
    const bool reduced_only = !full && trimmed == red_shape;
    if (buf.written && !full) return rv;
    if (!full && !reduced_only) continue;
    if (m.plan != nullptr) {
      const ir::BufferAssignment* placed = m.plan->find_buffer(buf.value);
      const bool in_arena = placed && (placed->storage == ir::Storage::kArena || placed->storage == ir::Storage::kAlias);
      if (in_arena && m.plan->alignment % 16 != 0) return rv;
    }
    widest = std::max(widest, ir::dtype_size(buf.dtype));
    rv.buffers.push_back({int(b), full});
  }
  if (widest != 2 || rv.buffers.empty()) return RowVectors{};
  rv.width = 8;
  return rv;
}

}  // namespace

CudaConfig cuda_config(const KernelModel& m) {
  CudaConfig c;
  c.block = kCudaBlock;
  switch (m.kind) {
    case KernelTemplate::kPointwise: {
      if (cuda_conv_gemm_config(m, c)) break;  // conv2d as an implicit GEMM (c_family_cuda_conv.cpp)
      c.vector_width = vector_width_of(m);
      c.mode = c.vector_width > 1 ? CudaConfig::Mode::kVectorized : CudaConfig::Mode::kPointwise;
      break;
    }
    case KernelTemplate::kRowReduce: {
      const OpKind op = m.node(m.anchor).op;
      const bool normalize = ir::op_info(op).family == ir::OpFamily::kNormalize;
      ir::Shape reduced;
      for (size_t d = 0; d < m.space.size(); ++d)
        if (m.reduced_axes[d]) reduced.push_back(m.space[d]);
      int64_t k = 0;
      const bool k_static = static_product(reduced, k);
      if (m.space.empty() || !m.reduced_axes.back() || (k_static && k <= 1)) {
        // The innermost axis is kept: neighbouring threads take neighbouring rows.
        c.mode = CudaConfig::Mode::kRowsPerThread;
        c.row_threads = 1;
      } else if (k_static && k <= int64_t(kMaxWarpRow)) {
        c.mode = CudaConfig::Mode::kRowsPerWarp;
        c.row_threads = 32;
        if (normalize) c.row_registers = uint32_t((k + 31) / 32);
      } else {
        c.mode = CudaConfig::Mode::kRowsPerBlock;
        // About 8 elements per thread, 128 to 1024 threads; 256 for rows of run-time length.
        // Normalizations that move f16/bf16 rows in 16-byte vectors take about 16 per thread
        // (two vectors): smaller blocks put more rows in flight per SM between the barriers
        // of the row reductions, and a 1024-thread block holding one vector per thread was
        // latency-bound.
        const bool vectors = normalize && k_static && row_vectors_of(m, reduced).width > 1;
        const int64_t per_thread = vectors ? 16 : 8;
        c.block = k_static ? std::clamp(pow2_at_least(uint64_t((k + per_thread - 1) / per_thread)), 128u, 1024u) : 256u;
        c.row_threads = c.block;
        if (normalize && k_static && (k + c.block - 1) / c.block <= int64_t(kMaxRowRegisters))
          c.row_registers = uint32_t((k + c.block - 1) / c.block);
      }
      break;
    }
    case KernelTemplate::kAttention: {
      if (cuda_flash_attention_config(m, c)) break;  // c_family_cuda_attention.cpp
      c.mode = CudaConfig::Mode::kAttentionRows;
      c.block = 128;
      break;
    }
    case KernelTemplate::kMatMul: {
      c.mode = CudaConfig::Mode::kMatMul;
      const Node& a = m.node(m.anchor);
      const ir::Shape& as = m.node(a.inputs[0]).type.shape;
      const ir::Shape& bs = m.node(a.inputs[1]).type.shape;
      const ir::Dim rows = as.size() == 1 ? ir::Dim::of(1) : as[as.size() - 2];
      const ir::Dim cols = bs.size() == 1 ? ir::Dim::of(1) : bs.back();
      int64_t batch = 0;
      const size_t trailing = (as.size() == 1 ? 0 : 1) + (bs.size() == 1 ? 0 : 1);
      const bool batch_static = static_product(ir::Shape(m.space.begin(), m.space.end() - long(trailing)), batch);
      const bool is_float = num_of(a.type.dtype) == Num::kF;
      const DType at = m.node(a.inputs[0]).type.dtype, bt = m.node(a.inputs[1]).type.dtype;
      const bool sixteen_bit = at == bt && (at == DType::kF16 || at == DType::kBF16);
      if (rows.is_static() && rows.size() <= 16) {
        c.bm = 16; c.bn = 64; c.bk = 16; c.tm = 1; c.tn = 4;  // skinny: matrix-vector-like
      } else if (is_float && sixteen_bit && as.size() >= 2 && bs.size() >= 2) {
        c.bm = 64; c.bn = 64; c.bk = 32; c.tm = 0; c.tn = 0;  // tensor cores: 2x2 warps of 32x32
        c.tensor_cores = true;
        c.block = 128;
        break;
      } else if (is_float && rows.is_static() && cols.is_static() && batch_static &&
                 batch * ((rows.size() + 127) / 128) * ((cols.size() + 127) / 128) >= 264) {
        c.bm = 128; c.bn = 128; c.bk = 8; c.tm = 8; c.tn = 8;  // enough 128x128 tiles for 2 waves
      } else {
        c.bm = 64; c.bn = 64; c.bk = 16; c.tm = 4; c.tn = 4;
      }
      c.block = (c.bm / c.tm) * (c.bn / c.tn);
      break;
    }
  }
  return c;
}

void Emitter::emit_cuda() {
  const CudaConfig c = cuda_config(m_);
  switch (c.mode) {
    case CudaConfig::Mode::kPointwise: emit_cuda_pointwise(c); return;
    case CudaConfig::Mode::kVectorized: emit_cuda_vectorized(c); return;
    case CudaConfig::Mode::kRowsPerThread:
    case CudaConfig::Mode::kRowsPerWarp:
    case CudaConfig::Mode::kRowsPerBlock: emit_cuda_rows(c); return;
    case CudaConfig::Mode::kMatMul: emit_cuda_matmul(c); return;
    case CudaConfig::Mode::kConvGemm: emit_cuda_conv_gemm(c); return;
    case CudaConfig::Mode::kAttentionRows: emit_attention(c.block); return;
    case CudaConfig::Mode::kAttentionMma: emit_cuda_flash_attention(c); return;
    case CudaConfig::Mode::kAttentionFma: emit_cuda_f32_attention(c); return;
  }
}

void Emitter::emit_cuda_pointwise(const CudaConfig& c) {
  const std::string block = "TO_IDX(" + std::to_string(c.block) + ")";
  line("IDX total = " + product(m_.space) + ";");
  emit_pointwise_loop("gid * " + block + " + lid", "ngroups * " + block);
}

namespace {

// The unsigned type that carries `bytes` bytes in one access, and its 32-bit words.
std::string carrier_type(size_t bytes) {
  return bytes == 16 ? "uint4" : bytes == 8 ? "uint2" : bytes == 4 ? "uint" : "ushort";
}
std::string carrier_word(const std::string& var, size_t bytes, size_t word) {
  static const char* kParts[] = {".x", ".y", ".z", ".w"};
  if (bytes >= 8) return var + kParts[word];
  return "((uint)" + var + ")";
}

}  // namespace

// Reads `points.size()` consecutive elements of buffer b from `offset` (aligned) in one access and
// records their compute values in the points.
void Emitter::cuda_vector_load(int b, const std::string& offset, std::vector<Point>& points) {
  const ModelBuffer& buf = m_.buffers[size_t(b)];
  const uint32_t width = uint32_t(points.size());
  const size_t size = ir::dtype_size(buf.dtype);
  const size_t bytes = width * size;
  const std::string type = carrier_type(bytes);
  const std::string raw = fresh("raw");
  line(type + " " + raw + " = *(const " + type + "*)(b" + std::to_string(b) + " + " + offset + ");");
  for (uint32_t j = 0; j < width; ++j) {
    std::string bits;
    if (size == 4) bits = carrier_word(raw, bytes, j);
    else if (size == 8)
      bits = "(((unsigned long long)" + carrier_word(raw, bytes, 2 * j + 1) + " << 32) | (unsigned long long)" +
             carrier_word(raw, bytes, 2 * j) + ")";
    else
      bits = "((" + carrier_word(raw, bytes, j * size / 4) + " >> " + std::to_string(8 * ((j * size) % 4)) +
             ") & " + (size == 2 ? "0xffffu" : "0xffu") + ")";
    std::string value;
    switch (buf.dtype) {
      case DType::kF32: value = "U2F(" + bits + ")"; break;
      case DType::kF16: value = "k_h2f((ushort)" + bits + ")"; break;
      case DType::kBF16: value = "k_bf2f(" + bits + ")"; break;
      case DType::kI32: value = "(int)" + bits; break;
      case DType::kI64: value = "(long long)" + bits; break;
      case DType::kI8: value = "(int)(signed char)" + bits; break;
      case DType::kU8: case DType::kBool: case DType::kU16: value = "(int)" + bits; break;
      case DType::kI16: value = "(int)(short)" + bits; break;
      case DType::kU32: value = "(long long)" + bits; break;
      case DType::kF64: value = "(float)__longlong_as_double((long long)" + bits + ")"; break;
      case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
        value = float8_decode(buf.dtype, bits);
        break;
    }
    const std::string name = fresh("x");
    line(ctype(num_of(buf.dtype)) + " " + name + " = " + value + ";");
    points[j].vals[buf.value] = name;
  }
}

// Writes buffer b's value at each point to consecutive elements from `offset` (aligned), in one access.
void Emitter::cuda_vector_store(int b, const std::string& offset, const std::vector<Point>& points) {
  const ModelBuffer& buf = m_.buffers[size_t(b)];
  const uint32_t width = uint32_t(points.size());
  const size_t size = ir::dtype_size(buf.dtype);
  const size_t bytes = width * size;
  const size_t words = std::max<size_t>(bytes / 4, 1);
  std::vector<std::string> word(words);
  for (uint32_t j = 0; j < width; ++j) {
    auto it = points[j].vals.find(buf.value);
    if (it == points[j].vals.end()) {
      fail(internal_error("kernel '" + m_.kernel->name + "': output '" + m_.node(buf.value).name +
                          "' is not computed by the kernel"));
      return;
    }
    const std::string& v = it->second;
    auto put = [&](size_t w, const std::string& bits, size_t shift) {
      const std::string term = shift ? "(" + bits + " << " + std::to_string(shift) + ")" : bits;
      word[w] += (word[w].empty() ? "" : " | ") + term;
    };
    switch (buf.dtype) {
      case DType::kF32: put(j, "F2U(" + v + ")", 0); break;
      case DType::kI32: case DType::kU32: put(j, "(uint)(" + v + ")", 0); break;
      case DType::kI64:
        put(2 * j, "(uint)((unsigned long long)(" + v + "))", 0);
        put(2 * j + 1, "(uint)((unsigned long long)(" + v + ") >> 32)", 0);
        break;
      case DType::kF64:
        put(2 * j, "(uint)((unsigned long long)__double_as_longlong((double)(" + v + ")))", 0);
        put(2 * j + 1, "(uint)((unsigned long long)__double_as_longlong((double)(" + v + ")) >> 32)", 0);
        break;
      case DType::kF16: put(j / 2, "(uint)k_f2h(" + v + ")", 16 * (j % 2)); break;
      case DType::kBF16: put(j / 2, "(k_f2bf(" + v + ") & 0xffffu)", 16 * (j % 2)); break;
      case DType::kI16: case DType::kU16: put(j / 2, "((uint)(" + v + ") & 0xffffu)", 16 * (j % 2)); break;
      case DType::kI8: case DType::kU8: case DType::kBool:
        put(j / 4, "((uint)(" + v + ") & 0xffu)", 8 * (j % 4));
        break;
      case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
        put(j / 4, float8_encode(buf.dtype, v), 8 * (j % 4));
        break;
    }
  }
  const std::string dst = "(b" + std::to_string(b) + " + " + offset + ")";
  if (bytes == 16) {
    line("*(uint4*)" + dst + " = make_uint4(" + word[0] + ", " + word[1] + ", " + word[2] + ", " + word[3] + ");");
  } else if (bytes == 8) {
    line("*(uint2*)" + dst + " = make_uint2(" + word[0] + ", " + word[1] + ");");
  } else if (bytes == 4) {
    line("*(uint*)" + dst + " = " + word[0] + ";");
  } else {
    line("*(ushort*)" + dst + " = (ushort)(" + word[0] + ");");
  }
}

void Emitter::emit_cuda_vectorized(const CudaConfig& c) {
  const uint32_t width = c.vector_width;
  const std::string W = "TO_IDX(" + std::to_string(width) + ")";
  const std::string block = "TO_IDX(" + std::to_string(c.block) + ")";
  line("IDX total = " + product(m_.space) + ";");

  // Run-time conditions of the vector path: every vector-accessed pointer aligned to its access
  // size, every broadcast buffer's size a multiple of the width.
  std::string ok;
  std::vector<Access> access(m_.buffers.size());
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    access[b] = access_of(m_.buffers[b].shape, m_.space);
    if (access[b] == Access::kScalar) continue;
    const size_t bytes = width * ir::dtype_size(m_.buffers[b].dtype);
    ok += std::string(ok.empty() ? "" : " && ") + "(((unsigned long long)b" + std::to_string(b) + ") & " +
          std::to_string(bytes - 1) + "ull) == 0ull";
    int64_t size = 0;
    if (access[b] == Access::kSuffix && !static_product(m_.buffers[b].shape, size))
      ok += " && " + product(m_.buffers[b].shape) + " % " + W + " == TO_IDX(0)";
  }
  line("bool vec_ok = " + (ok.empty() ? std::string("true") : ok) + ";");
  line("IDX nvec = vec_ok ? total / " + W + " : TO_IDX(0);");

  // Scalars are read once, before the loop.
  std::vector<Point> points(width);
  for (Point& p : points) p.space = m_.space;
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    if (m_.buffers[b].written || access[b] != Access::kScalar) continue;
    const std::string name = fresh("s");
    line(ctype(num_of(m_.buffers[b].dtype)) + " " + name + " = " + load(int(b), "TO_IDX(0)") + ";");
    for (Point& p : points) p.vals[m_.buffers[b].value] = name;
  }

  open("for (IDX chunk = gid * " + block + " + lid; chunk < nvec; chunk += ngroups * " + block + ")");
  line("IDX lin = chunk * " + W + ";");
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    const ModelBuffer& buf = m_.buffers[b];
    if (buf.written || access[b] == Access::kScalar) continue;
    const std::string offset = access[b] == Access::kFull ? "lin" : "(lin % " + product(buf.shape) + ")";
    cuda_vector_load(int(b), offset, points);
  }
  for (uint32_t j = 0; j < width; ++j) {
    for (NodeId n : m_.kernel->nodes) emit_elementwise(n, points[j]);
  }
  for (size_t b = 0; b < m_.buffers.size(); ++b)
    if (m_.buffers[b].written) cuda_vector_store(int(b), "lin", points);
  close();
  // The tail (and everything, when the vector path is off) element by element.
  emit_pointwise_loop("nvec * " + W + " + gid * " + block + " + lid", "ngroups * " + block);
}

void Emitter::emit_cuda_rows(const CudaConfig& c) {
  const Node& a = m_.node(m_.anchor);
  ir::Shape row_shape, red_shape;
  for (size_t d = 0; d < m_.space.size(); ++d) (m_.reduced_axes[d] ? red_shape : row_shape).push_back(m_.space[d]);
  const bool normalize = ir::op_info(a.op).family == ir::OpFamily::kNormalize;
  line("IDX rows = " + product(row_shape) + ";");
  line("IDX K = " + product(red_shape) + ";");

  // Both variants of one configuration: 16-byte vectors when every vector buffer is aligned and
  // K is a multiple of the width (so every row start is aligned too), else scalar accesses.
  auto variants = [&](const CudaConfig& cc) {
    const RowVectors rv = cc.row_registers > 0 ? row_vectors_of(m_, red_shape) : RowVectors{};
    if (rv.width == 1 || cc.row_registers % rv.width != 0) {
      emit_cuda_rows_body(cc, 1);
      return;
    }
    std::string ok = "K % TO_IDX(" + std::to_string(rv.width) + ") == TO_IDX(0)";
    for (const auto& [b, full] : rv.buffers)
      ok += " && (((unsigned long long)b" + std::to_string(b) + ") & 15ull) == 0ull";
    open("if (" + ok + ")");
    emit_cuda_rows_body(cc, rv.width);
    close();
    open("else");
    emit_cuda_rows_body(cc, 1);
    close();
  };

  int64_t k = 0;
  if (c.mode == CudaConfig::Mode::kRowsPerBlock && !static_product(red_shape, k)) {
    // Rows of run-time length: a block per row is latency-bound for short rows (attention
    // scores [B, H, S, S] with S = 128 leave most of 256 threads idle and pay two barriers per
    // reduction), so short rows take one warp each, 8 rows per block, held in registers. K is
    // uniform over the launch, so every thread of a block takes the same branch. The dispatch
    // (one row per block, at most the occupancy limit of blocks) suits both: the loops are
    // grid-stride, and the warp path strides by 8 rows per block.
    CudaConfig warp = c;
    warp.mode = CudaConfig::Mode::kRowsPerWarp;
    warp.row_threads = 32;
    warp.row_registers = normalize ? kDynamicWarpRow / 32 : 0;
    open("if (K <= TO_IDX(" + std::to_string(kDynamicWarpRow) + "))");
    variants(warp);
    close();
    open("else");
    variants(c);
    close();
    return;
  }
  variants(c);
}

namespace {

// One variant of the CUDA rows template (Emitter::emit_cuda_rows_body), by concern:
//   - the row loop: how G = c.row_threads threads share a row (1, a warp or the block);
//   - passes over a row: streamed from memory (pass) or over the registers that cache it
//     (load_row_registers, cached_pass), plain or in 16-byte vectors (vec > 1);
//   - combine: the per-thread partial state merged across the threads of a row;
//   - the row kinds: a reduction or argmax (one result per row), softmax / log_softmax (maximum
//     and sum), layer_norm (mean and inverse standard deviation), then write_row.
// It emits through the Emitter, in the same order as one long function would.
class CudaRowsBody {
 public:
  CudaRowsBody(Emitter& e, const CudaConfig& c, uint32_t vec)
      : e_(e), m_(e.m_), c_(c), vec_(vec), a_(e.m_.node(e.m_.anchor)) {
    for (size_t d = 0; d < m_.space.size(); ++d) (m_.reduced_axes[d] ? red_shape_ : row_shape_).push_back(m_.space[d]);
    operand_ = a_.inputs[0];
    xk_ = num_of(m_.node(operand_).type.dtype);
    G_ = c.row_threads;
    Gs_ = "TO_IDX(" + std::to_string(G_) + ")";
    rv_ = vec > 1 ? row_vectors_of(m_, red_shape_) : RowVectors{};
    V_ = std::to_string(vec);
    // Every register slot holds an element when a static row fills them exactly; then the
    // per-slot `k < K` tests, a compare and branch per element and pass, are left out.
    int64_t static_k = 0;
    slots_full_ = c.row_registers > 0 && static_product(red_shape_, static_k) &&
                  static_k == int64_t(c.row_registers) * int64_t(G_);
    cached_ = c.row_registers > 0;
  }

  void emit() {
    open_row_loop();
    row_coords_ = e_.decompose("row", row_shape_);
    const bool normalize = ir::op_info(a_.op).family == ir::OpFamily::kNormalize;
    if (!normalize) {
      emit_reduction();
    } else {
      if (cached_) load_row_registers();
      write_row(a_.op == OpKind::kLayerNorm ? layer_norm_stats() : softmax_stats());
    }
    e_.close();  // the row loop
  }

 private:
  struct Var {
    std::string type, name, idle;
  };
  using Merge = std::function<void(const std::vector<std::string>&)>;
  using PerElement = std::function<void(Point&, const std::string&)>;
  using Output = std::function<std::string(Point&, const std::string&)>;  // y at element x

  void line(const std::string& text) { e_.line(text); }
  void open(const std::string& head) { e_.open(head); }
  void close() { e_.close(); }

  // Opens the grid-stride loop over the rows this thread (G = 1), warp or block works on.
  void open_row_loop() {
    if (G_ == 1) {
      line("IDX tid = TO_IDX(0);");
      open("for (IDX row = gid * TO_IDX(" + std::to_string(c_.block) + ") + lid; row < rows; row += ngroups * TO_IDX(" +
           std::to_string(c_.block) + "))");
    } else if (G_ == 32) {
      const std::string per_block = "TO_IDX(" + std::to_string(c_.block / 32) + ")";
      line("IDX tid = lid & TO_IDX(31);");
      open("for (IDX row = gid * " + per_block + " + (lid >> 5); row < rows; row += ngroups * " + per_block + ")");
    } else {
      line("IDX tid = lid;");
      open("for (IDX row = gid; row < rows; row += ngroups)");
    }
  }

  // Element k of register slot i: slots go in runs of `vec` consecutive elements per thread.
  std::string slot_k(const std::string& i) const {
    if (vec_ == 1) return "tid + TO_IDX(" + i + ") * " + Gs_;
    return "tid * TO_IDX(" + V_ + ") + TO_IDX((" + i + ") % " + V_ + ") + TO_IDX((" + i + ") / " + V_ + ") * TO_IDX(" +
           std::to_string(G_ * vec_) + ")";
  }
  void open_in_row(const std::string& k) {
    if (!slots_full_) open("if (" + k + " < K)");
  }
  void close_in_row() {
    if (!slots_full_) close();
  }

  Point point_at(const std::string& k) {
    const std::vector<std::string> red_coords = e_.decompose(k, red_shape_);
    Point p;
    p.space = m_.space;
    size_t ri = 0, ki = 0;
    for (size_t d = 0; d < m_.space.size(); ++d)
      p.coords.push_back(m_.reduced_axes[d] ? red_coords[ki++] : row_coords_[ri++]);
    return p;
  }
  // One pass over the row, streaming: per_element(p, x) at each element the thread owns.
  void pass(const PerElement& per_element) {
    open("for (IDX k = tid; k < K; k += " + Gs_ + ")");
    Point p = point_at("k");
    for (NodeId n : m_.prologue) e_.emit_elementwise(n, p);
    per_element(p, e_.value(operand_, p));
    close();
  }
  // The same over the row's elements cached in registers: per_element(p, slot) at element
  // slot_k(slot) (point_at is only computed when `with_point`).
  void cached_pass(bool with_point, const PerElement& per_element) {
    line("#pragma unroll");
    open("for (int i = 0; i < " + std::to_string(c_.row_registers) + "; ++i)");
    line("IDX k = " + slot_k("i") + ";");
    open_in_row("k");
    Point p;
    if (with_point) p = point_at("k");
    per_element(p, std::string("xr[i]"));
    close_in_row();
    close();
  }
  std::string as_f(const std::string& x) const { return xk_ == Num::kF ? x : "TO_F(" + x + ")"; }

  // Combines the per-thread partial state `vars` (type, name, value for idle lanes) across the
  // threads sharing a row; merge(others) emits statements folding the state named `others`
  // into `vars`. Afterwards every thread of the row holds the row's result.
  void combine(const std::vector<Var>& vars, const Merge& merge) {
    if (G_ == 1) return;
    auto butterfly = [&]() {
      const std::string o = e_.fresh("off");
      open("for (int " + o + " = 16; " + o + " > 0; " + o + " >>= 1)");
      std::vector<std::string> others;
      for (const Var& v : vars) {
        others.push_back(e_.fresh("o_" + v.name));
        line(v.type + " " + others.back() + " = __shfl_xor_sync(0xffffffffu, " + v.name + ", " + o + ");");
      }
      merge(others);
      close();
    };
    butterfly();
    if (G_ <= 32) return;
    std::vector<std::string> slots;
    for (const Var& v : vars) slots.push_back(e_.shared_array(v.type, "part", 32));
    open("if ((lid & TO_IDX(31)) == TO_IDX(0))");
    for (size_t i = 0; i < vars.size(); ++i) line(slots[i] + "[lid >> 5] = " + vars[i].name + ";");
    close();
    line("__syncthreads();");
    for (size_t i = 0; i < vars.size(); ++i)
      line(vars[i].name + " = (lid & TO_IDX(31)) < TO_IDX(" + std::to_string(G_ / 32) + ") ? " + slots[i] +
           "[lid & TO_IDX(31)] : " + vars[i].idle + ";");
    butterfly();
    line("__syncthreads();");  // the slots are reused by the next row
  }
  Merge sum_merge(const std::string& var) {
    return [this, var](const std::vector<std::string>& o) { line(var + " += " + o[0] + ";"); };
  }

  // reduce_* and argmax: one streamed pass, the combine, and one thread per row finishes it.
  void emit_reduction() {
    std::string result;
    if (a_.op == OpKind::kArgMax) {
      const std::string lowest = e_.argmax_lowest(xk_), better = Emitter::argmax_better(xk_);
      line(e_.ctype(xk_) + " bv = " + lowest + ";");
      line("IDX bi = K;");
      pass([&](Point&, const std::string& x) {
        line("if (" + better + "(" + x + ", k, bv, bi)) { bv = " + x + "; bi = k; }");
      });
      combine({{e_.ctype(xk_), "bv", lowest}, {"IDX", "bi", "K"}}, [&](const std::vector<std::string>& o) {
        line("if (" + better + "(" + o[0] + ", " + o[1] + ", bv, bi)) { bv = " + o[0] + "; bi = " + o[1] + "; }");
      });
      result = e_.convert("TO_L(bi)", Num::kL, a_.type.dtype);
    } else {
      const bool is_f = xk_ == Num::kF;
      const Emitter::RowReduction reduction = e_.row_reduction(a_.op, xk_);
      const std::string& init = reduction.init;
      const auto& op = reduction.combine;
      line(e_.ctype(xk_) + " acc = " + init + ";");
      pass([&](Point&, const std::string& x) { line("acc = " + op("acc", x) + ";"); });
      combine({{e_.ctype(xk_), "acc", init}}, [&](const std::vector<std::string>& o) { line("acc = " + op("acc", o[0]) + ";"); });
      result = "acc";
      if (ir::op_info(a_.op).reduce.mean) {
        result = is_f ? "(acc / TO_F(K))"
                      : e_.int_fn("div", xk_) + "(acc, " + (xk_ == Num::kL ? "TO_L(K)" : "TO_I(K)") + ")";
      }
      result = e_.convert(result, xk_, a_.type.dtype);
    }
    open("if (tid == TO_IDX(0))");
    e_.emit_row_result(row_coords_, result);
    close();
  }

  // The `vec` points of the run of slots that starts at element k0, the vector buffers read there.
  std::vector<Point> vector_points(const std::string& k0) {
    std::vector<Point> points;
    for (uint32_t j = 0; j < vec_; ++j) points.push_back(point_at("(" + k0 + " + TO_IDX(" + std::to_string(j) + "))"));
    for (const auto& [b, full] : rv_.buffers) {
      if (m_.buffers[size_t(b)].written) continue;
      e_.cuda_vector_load(b, full ? "row * K + " + k0 : k0, points);
    }
    return points;
  }

  // Reads the row once (prologue included) into the registers xr[], `vec` consecutive elements
  // per 16-byte access when vec > 1.
  void load_row_registers() {
    line("float xr[" + std::to_string(c_.row_registers) + "];");
    line("#pragma unroll");
    if (vec_ > 1) {
      open("for (int i = 0; i < " + std::to_string(c_.row_registers / vec_) + "; ++i)");
      line("IDX k0 = " + slot_k("i * " + V_) + ";");
      line("#pragma unroll");
      line("for (int j = 0; j < " + V_ + "; ++j) xr[i * " + V_ + " + j] = 0.0f;");
      open_in_row("k0");
      std::vector<Point> points = vector_points("k0");
      for (uint32_t j = 0; j < vec_; ++j) {
        for (NodeId n : m_.prologue) e_.emit_elementwise(n, points[j]);
        line("xr[i * " + V_ + " + " + std::to_string(j) + "] = " + as_f(e_.value(operand_, points[j])) + ";");
      }
    } else {
      open("for (int i = 0; i < " + std::to_string(c_.row_registers) + "; ++i)");
      line("IDX k = tid + TO_IDX(i) * " + Gs_ + ";");
      line("xr[i] = 0.0f;");
      open_in_row("k");
      Point p = point_at("k");
      for (NodeId n : m_.prologue) e_.emit_elementwise(n, p);
      line("xr[i] = " + as_f(e_.value(operand_, p)) + ";");
    }
    close_in_row();
    close();
  }

  // softmax / log_softmax: the row's maximum mx and sum of exp(x - mx), then y(x).
  Output softmax_stats() {
    const std::string neg_inf = "U2F(0xff800000u)";
    if (cached_) {
      line("float mx = " + neg_inf + ";");
      cached_pass(false, [&](Point&, const std::string& x) { line("mx = k_fmax(mx, " + x + ");"); });
      combine({{"float", "mx", neg_inf}}, [&](const std::vector<std::string>& o) { line("mx = k_fmax(mx, " + o[0] + ");"); });
      line("if (isinf(mx) && mx < 0.0f) mx = 0.0f;");
      line("float total = 0.0f;");
      if (a_.op == OpKind::kSoftmax) {
        // The registers keep exp(x - mx) for the output pass: one exponential per element, not
        // two (they were a large share of the f16 kernel's instructions).
        cached_pass(false, [&](Point&, const std::string& x) {
          line(x + " = exp(" + x + " - mx);");
          line("total += " + x + ";");
        });
      } else {
        cached_pass(false, [&](Point&, const std::string& x) { line("total += exp(" + x + " - mx);"); });
      }
      combine({{"float", "total", "0.0f"}}, sum_merge("total"));
    } else {
      // Online maximum and sum: one read of the row. The sum is kept relative to the running
      // maximum and rescaled when it grows; -inf elements add nothing, NaN poisons the sum.
      line("float mx = " + neg_inf + ", total = 0.0f;");
      pass([&](Point&, const std::string& x) {
        line("float xv = " + as_f(x) + ";");
        line("if (xv > mx) { total = total * exp(mx - xv) + 1.0f; mx = xv; }");
        line("else if (xv != " + neg_inf + ") total += exp(xv - mx);");
      });
      combine({{"float", "mx", neg_inf}, {"float", "total", "0.0f"}}, [&](const std::vector<std::string>& o) {
        line("float nmx = k_fmax(mx, " + o[0] + ");");
        line("total = (mx == nmx ? total : total * exp(mx - nmx)) + (" + o[0] + " == nmx ? " + o[1] + " : " + o[1] +
             " * exp(" + o[0] + " - nmx));");
        line("mx = nmx;");
      });
      // As in the two-pass form: an all -inf row has maximum 0; a +inf element makes the sum NaN.
      line("if (isinf(mx) && mx < 0.0f) mx = 0.0f;");
      line("if (isinf(mx) && mx > 0.0f) total = U2F(0x7fc00000u);");
    }
    if (a_.op == OpKind::kSoftmax) {
      // One division per row; a multiply per element.
      line("float inv_total = 1.0f / total;");
      if (cached_) return [](Point&, const std::string& x) { return x + " * inv_total"; };
      return [](Point&, const std::string& x) { return "exp(" + x + " - mx) * inv_total"; };
    }
    line("float log_total = log(total);");
    return [](Point&, const std::string& x) { return "(" + x + " - mx) - log_total"; };
  }

  // layer_norm: the row's mean and inverse standard deviation, then y(x) with scale and bias.
  Output layer_norm_stats() {
    const double eps = std::get<ir::LayerNormAttrs>(a_.attrs).epsilon;
    if (cached_) {
      line("float mean = 0.0f;");
      cached_pass(false, [&](Point&, const std::string& x) { line("mean += " + x + ";"); });
      combine({{"float", "mean", "0.0f"}}, sum_merge("mean"));
      line("mean = mean / TO_F(K);");
      line("float var = 0.0f;");
      cached_pass(false, [&](Point&, const std::string& x) {
        line("float dv = " + x + " - mean;");
        line("var += dv * dv;");
      });
      combine({{"float", "var", "0.0f"}}, sum_merge("var"));
      line("float inv_std = 1.0f / sqrt(var / TO_F(K) + " + e_.float_lit(eps) + ");");
    } else {
      // Welford per thread, Chan et al.'s pairwise merge across threads: one read of the row.
      line("float wn = 0.0f, mean = 0.0f, m2 = 0.0f;");
      pass([&](Point&, const std::string& x) {
        line("float xv = " + as_f(x) + ";");
        line("wn += 1.0f;");
        line("float dv = xv - mean;");
        line("mean += dv / wn;");
        line("m2 += dv * (xv - mean);");
      });
      combine({{"float", "wn", "0.0f"}, {"float", "mean", "0.0f"}, {"float", "m2", "0.0f"}},
              [&](const std::vector<std::string>& o) {
                line("float nn = wn + " + o[0] + ";");
                line("float f = nn > 0.0f ? " + o[0] + " / nn : 0.0f;");
                line("float dm = " + o[1] + " - mean;");
                line("m2 = m2 + " + o[2] + " + dm * dm * wn * f;");
                line("mean = mean + dm * f;");
                line("wn = nn;");
              });
      line("float inv_std = 1.0f / sqrt(m2 / TO_F(K) + " + e_.float_lit(eps) + ");");
    }
    return [this](Point& p, const std::string& x) {
      const std::string s = e_.value(a_.inputs[1], p), b = e_.value(a_.inputs[2], p);
      return "(" + x + " - mean) * inv_std * " + s + " + " + b;
    };
  }

  // The normalized row: y = output(x) at every element, the epilogue and the stores.
  void write_row(const Output& output) {
    const DType dtype = m_.node(m_.anchor).type.dtype;
    auto write = [&](Point& p, const std::string& x) {
      e_.finish_anchor(p, "float", e_.float8_rounded(output(p, x), dtype));
    };
    if (cached_ && vec_ > 1) {
      // Write the row from registers: each run of `vec` results in one 16-byte store per output.
      line("#pragma unroll");
      open("for (int i = 0; i < " + std::to_string(c_.row_registers / vec_) + "; ++i)");
      line("IDX k0 = " + slot_k("i * " + V_) + ";");
      open_in_row("k0");
      std::vector<Point> points = vector_points("k0");
      for (uint32_t j = 0; j < vec_; ++j) {
        const std::string av = e_.fresh("a");
        line("float " + av + " = " +
             e_.float8_rounded(output(points[j], "xr[i * " + V_ + " + " + std::to_string(j) + "]"), dtype) + ";");
        points[j].vals[m_.anchor] = av;
        for (NodeId n : m_.epilogue) e_.emit_elementwise(n, points[j]);
      }
      for (const auto& [b, full] : rv_.buffers)
        // As store_outputs: a written buffer the points do not hold is stored elsewhere.
        if (m_.buffers[size_t(b)].written && points[0].vals.count(m_.buffers[size_t(b)].value))
          e_.cuda_vector_store(b, "row * K + k0", points);
      close_in_row();
      close();
    } else if (cached_) {
      cached_pass(true, write);
    } else {
      pass([&](Point& p, const std::string& x) { write(p, as_f(x)); });
    }
  }

  Emitter& e_;
  const KernelModel& m_;
  const CudaConfig& c_;
  const uint32_t vec_;
  const Node& a_;
  ir::Shape row_shape_, red_shape_;
  NodeId operand_ = ir::kNoNode;
  Num xk_ = Num::kF;
  uint32_t G_ = 1;
  std::string Gs_, V_;
  RowVectors rv_;
  bool slots_full_ = false;
  bool cached_ = false;
  std::vector<std::string> row_coords_;
};

}  // namespace

void Emitter::emit_cuda_rows_body(const CudaConfig& c, uint32_t vec) { CudaRowsBody(*this, c, vec).emit(); }

std::vector<std::string> Emitter::open_matmul_tiles(const CudaConfig& c, const MatmulOperands& o) {
  auto num = [](uint32_t v) { return std::to_string(v); };
  line("IDX M = " + o.m + ", K = " + o.k + ", N = " + o.n + ";");
  line("IDX tiles_m = (M + TO_IDX(" + num(c.bm - 1) + ")) / TO_IDX(" + num(c.bm) + "), tiles_n = (N + TO_IDX(" +
       num(c.bn - 1) + ")) / TO_IDX(" + num(c.bn) + ");");
  line("IDX ntiles = " + product(o.batch) + " * tiles_m * tiles_n;");
  open("for (IDX tile = gid; tile < ntiles; tile += ngroups)");
  line("IDX tn = tile % tiles_n, tm = (tile / tiles_n) % tiles_m, bidx = tile / (tiles_n * tiles_m);");
  std::vector<std::string> bc = decompose("bidx", o.batch);
  line("IDX row0 = tm * TO_IDX(" + num(c.bm) + "), col0 = tn * TO_IDX(" + num(c.bn) + ");");
  line("IDX a_base = " + broadcast_offset(o.a_batch, bc) + " * M * K;");
  line("IDX b_base = " + broadcast_offset(o.b_batch, bc) + " * K * N;");
  return bc;
}

void Emitter::emit_cuda_matmul(const CudaConfig& c) {
  const std::optional<MatmulOperands> o = matmul_operands();
  if (!o) return;
  if (c.tensor_cores) {
    emit_cuda_mma_matmul(c, *o);
    return;
  }
  const Num kind = o->kind;
  const std::string ct = ctype(kind);
  const uint32_t threads = c.block, rows_step = c.bm / c.tm, cols_step = c.bn / c.tn;
  auto num = [](uint32_t v) { return std::to_string(v); };
  // A is staged transposed (k-major) with one pad column so that the stores of a warp, which
  // walk k, hit distinct banks; B is staged as it lies.
  const uint32_t a_pitch = c.bm + 1;
  const std::string sa = shared_array(ct, "tile_a", c.bk * a_pitch);
  const std::string sb = shared_array(ct, "tile_b", c.bk * c.bn);
  const std::string zero = lit(kind, "0");

  line("int tx = (int)lid % " + num(cols_step) + ", ty = (int)lid / " + num(cols_step) + ";");
  const std::vector<std::string> bc = open_matmul_tiles(c, *o);
  line(ct + " acc[" + num(c.tm) + "][" + num(c.tn) + "];");
  line("#pragma unroll");
  open("for (int i = 0; i < " + num(c.tm) + "; ++i)");
  line("#pragma unroll");
  line("for (int j = 0; j < " + num(c.tn) + "; ++j) acc[i][j] = " + zero + ";");
  close();
  // The tile loop stays rolled: its body is already a whole tile of FMAs between two barriers,
  // and letting NVRTC unroll it (K is often a literal) tripled compile times for no speed.
  line("#pragma unroll 1");
  open("for (IDX k0 = TO_IDX(0); k0 < K; k0 += TO_IDX(" + num(c.bk) + "))");
  line("#pragma unroll");
  open("for (int l = 0; l < " + num(c.bm * c.bk / threads) + "; ++l)");
  line("int e = (int)lid + l * " + num(threads) + ", ak = e % " + num(c.bk) + ", am = e / " + num(c.bk) + ";");
  line("IDX gr = row0 + TO_IDX(am), gk = k0 + TO_IDX(ak);");
  line(sa + "[ak * " + num(a_pitch) + " + am] = (gr < M && gk < K) ? " + load(o->a_buffer, "a_base + gr * K + gk") + " : " +
       zero + ";");
  close();
  line("#pragma unroll");
  open("for (int l = 0; l < " + num(c.bk * c.bn / threads) + "; ++l)");
  line("int e = (int)lid + l * " + num(threads) + ", bn = e % " + num(c.bn) + ", bk = e / " + num(c.bn) + ";");
  line("IDX gk = k0 + TO_IDX(bk), gc = col0 + TO_IDX(bn);");
  line(sb + "[bk * " + num(c.bn) + " + bn] = (gk < K && gc < N) ? " + load(o->b_buffer, "b_base + gk * N + gc") + " : " +
       zero + ";");
  close();
  line("__syncthreads();");
  line("#pragma unroll");
  open("for (int kk = 0; kk < " + num(c.bk) + "; ++kk)");
  line(ct + " af[" + num(c.tm) + "], bf[" + num(c.tn) + "];");
  line("#pragma unroll");
  line("for (int i = 0; i < " + num(c.tm) + "; ++i) af[i] = " + sa + "[kk * " + num(a_pitch) + " + ty + i * " +
       num(rows_step) + "];");
  line("#pragma unroll");
  line("for (int j = 0; j < " + num(c.tn) + "; ++j) bf[j] = " + sb + "[kk * " + num(c.bn) + " + tx + j * " +
       num(cols_step) + "];");
  line("#pragma unroll");
  open("for (int i = 0; i < " + num(c.tm) + "; ++i)");
  line("#pragma unroll");
  line("for (int j = 0; j < " + num(c.tn) + "; ++j) " + multiply_add(kind, "acc[i][j]", "af[i]", "bf[j]"));
  close();
  close();
  line("__syncthreads();");
  close();
  // Each thread's outputs: rows ty + i * rows_step, columns tx + j * cols_step (coalesced stores).
  line("#pragma unroll");
  open("for (int i = 0; i < " + num(c.tm) + "; ++i)");
  line("#pragma unroll");
  open("for (int j = 0; j < " + num(c.tn) + "; ++j)");
  line("IDX row = row0 + TO_IDX(ty + i * " + num(rows_step) + "), col = col0 + TO_IDX(tx + j * " + num(cols_step) + ");");
  open("if (row < M && col < N)");
  finish_matmul_element(*o, bc, "acc[i][j]");
  close();
  close();
  close();
  close();
}


void Emitter::emit_mma_m16n8k16(const std::string& type, const std::string& acc, const std::string& a,
                                const std::string& b0, const std::string& b1) {
  line("asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type +
       ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"");
  line("    : \"+f\"(" + acc + "[0]), \"+f\"(" + acc + "[1]), \"+f\"(" + acc + "[2]), \"+f\"(" + acc + "[3])");
  line("    : \"r\"(" + a + "[0]), \"r\"(" + a + "[1]), \"r\"(" + a + "[2]), \"r\"(" + a + "[3]), \"r\"(" + b0 +
       "), \"r\"(" + b1 + "));");
}

// The tensor-core matmul (cuda_config sets c.tensor_cores): f16 or bf16 operands of one dtype.
// A block of 4 warps computes a 64x64 output tile; warp w owns rows 32 * (w / 2) and columns
// 32 * (w % 2) of it as 2 x 4 mma.sync.m16n8k16 tiles (f32 accumulators, 32 per thread). Each
// k step of 32 stages A as [64 rows][32 k] and B transposed as [64 cols][32 k] (16-bit bits,
// rows padded to 40 elements so fragment loads of a warp spread over the banks), zero-filled
// outside M, N and K. Fragment layouts are PTX's for m16n8k16 (row-major A, column-major B):
// lane = 4 * g + t holds A(g [+8], 2t [+8] .. +1), B(2t [+8] .. +1, g) and C(g [+8], 2t .. +1).
void Emitter::emit_cuda_mma_matmul(const CudaConfig& c, const MatmulOperands& o) {
  const std::string type = m_.node(o.anchor->inputs[0]).type.dtype == DType::kBF16 ? "bf16" : "f16";
  constexpr uint32_t kPitch = 40;  // 32 k values + 8 of padding per staged row
  const std::string sa = shared_array("__align__(16) ushort", "tile_a", c.bm * kPitch);
  const std::string sb = shared_array("__align__(16) ushort", "tile_b", c.bn * kPitch);
  const std::string a_buf = "b" + std::to_string(o.a_buffer), b_buf = "b" + std::to_string(o.b_buffer);
  line("int warp = (int)lid / 32, lane = (int)lid % 32, g = lane / 4, t = lane % 4;");
  line("int wm = (warp / 2) * 32, wn = (warp % 2) * 32;");
  const std::vector<std::string> bc = open_matmul_tiles(c, o);
  line("float acc[2][4][4];");
  line("#pragma unroll");
  line("for (int i = 0; i < 2; ++i)");
  line("  for (int j = 0; j < 4; ++j)");
  line("    for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;");
  line("#pragma unroll 1");
  open("for (IDX k0 = TO_IDX(0); k0 < K; k0 += TO_IDX(32))");
  line("#pragma unroll");
  open("for (int l = 0; l < 16; ++l)");
  line("int e = (int)lid + l * 128, ak = e % 32, am = e / 32;");
  line("IDX gr = row0 + TO_IDX(am), gk = k0 + TO_IDX(ak);");
  line(sa + "[am * " + std::to_string(kPitch) + " + ak] = (gr < M && gk < K) ? " + a_buf +
       "[a_base + gr * K + gk] : (ushort)0;");
  close();
  line("#pragma unroll");
  open("for (int l = 0; l < 16; ++l)");
  line("int e = (int)lid + l * 128, bn = e % 64, bk = e / 64;");
  line("IDX gk = k0 + TO_IDX(bk), gc = col0 + TO_IDX(bn);");
  line(sb + "[bn * " + std::to_string(kPitch) + " + bk] = (gk < K && gc < N) ? " + b_buf +
       "[b_base + gk * N + gc] : (ushort)0;");
  close();
  line("__syncthreads();");
  line("#pragma unroll");
  open("for (int kk = 0; kk < 32; kk += 16)");
  line("uint af[2][4], bf[4][2];");
  line("#pragma unroll");
  open("for (int i = 0; i < 2; ++i)");
  line("const ushort* pa = " + sa + " + (wm + i * 16 + g) * " + std::to_string(kPitch) + " + kk + 2 * t;");
  line("af[i][0] = *(const uint*)(pa);");
  line("af[i][1] = *(const uint*)(pa + 8 * " + std::to_string(kPitch) + ");");
  line("af[i][2] = *(const uint*)(pa + 8);");
  line("af[i][3] = *(const uint*)(pa + 8 * " + std::to_string(kPitch) + " + 8);");
  close();
  line("#pragma unroll");
  open("for (int j = 0; j < 4; ++j)");
  line("const ushort* pb = " + sb + " + (wn + j * 8 + g) * " + std::to_string(kPitch) + " + kk + 2 * t;");
  line("bf[j][0] = *(const uint*)(pb);");
  line("bf[j][1] = *(const uint*)(pb + 8);");
  close();
  line("#pragma unroll");
  open("for (int i = 0; i < 2; ++i)");
  line("#pragma unroll");
  open("for (int j = 0; j < 4; ++j)");
  emit_mma_m16n8k16(type, "acc[i][j]", "af[i]", "bf[j][0]", "bf[j][1]");
  close();
  close();
  close();
  line("__syncthreads();");
  close();
  // Each accumulator's output element, then the epilogue there.
  line("#pragma unroll");
  open("for (int i = 0; i < 2; ++i)");
  line("#pragma unroll");
  open("for (int j = 0; j < 4; ++j)");
  line("#pragma unroll");
  open("for (int r = 0; r < 4; ++r)");
  line("IDX row = row0 + TO_IDX(wm + i * 16 + g + (r / 2) * 8), col = col0 + TO_IDX(wn + j * 8 + 2 * t + r % 2);");
  open("if (row < M && col < N)");
  Point p;
  p.space = m_.space;
  p.coords = bc;
  p.coords.push_back("row");
  p.coords.push_back("col");
  finish_anchor(p, "float", convert("acc[i][j][r]", Num::kF, o.anchor->type.dtype));
  close();
  close();
  close();
  close();
  close();
}

}  // namespace cfam

artifact::KernelDispatch cuda_dispatch(const KernelModel& m) {
  const cfam::CudaConfig c = cfam::cuda_config(m);
  artifact::KernelDispatch d;
  d.workgroup_size = c.block;
  switch (c.mode) {
    case cfam::CudaConfig::Mode::kPointwise:
      d.work_items = ir::SizeExpr::of_shape(m.space, 1);
      d.items_per_group = c.block;
      break;
    case cfam::CudaConfig::Mode::kVectorized:
      d.work_items = ir::SizeExpr::of_shape(m.space, 1);
      d.items_per_group = c.block * c.vector_width;
      break;
    case cfam::CudaConfig::Mode::kRowsPerThread:
    case cfam::CudaConfig::Mode::kRowsPerWarp:
    case cfam::CudaConfig::Mode::kRowsPerBlock: {
      ir::Shape rows;
      for (size_t i = 0; i < m.space.size(); ++i)
        if (!m.reduced_axes[i]) rows.push_back(m.space[i]);
      d.work_items = ir::SizeExpr::of_shape(rows, 1);
      d.items_per_group = c.block / c.row_threads;
      break;
    }
    case cfam::CudaConfig::Mode::kConvGemm:
      d = cfam::cuda_conv_gemm_dispatch(m, c);
      break;
    case cfam::CudaConfig::Mode::kAttentionMma:
    case cfam::CudaConfig::Mode::kAttentionFma:
      d = cfam::cuda_flash_attention_dispatch(m, c);
      break;
    case cfam::CudaConfig::Mode::kAttentionRows:
      d.work_items = m.dispatch.work_items;  // query rows
      d.items_per_group = c.block;
      break;
    case cfam::CudaConfig::Mode::kMatMul: {
      // Work units are output tiles. A symbolic extent E contributes E + (tile - 1) units of
      // 1/tile tile each, so that ceil(work_items / items_per_group) covers every tile.
      const ir::Node& a = m.node(m.anchor);
      const ir::Shape& as = m.node(a.inputs[0]).type.shape;
      const ir::Shape& bs = m.node(a.inputs[1]).type.shape;
      const size_t trailing = (as.size() == 1 ? 0 : 1) + (bs.size() == 1 ? 0 : 1);
      ir::SizeExpr units = ir::SizeExpr::of_shape(ir::Shape(m.space.begin(), m.space.end() - long(trailing)), 1);
      uint32_t per_group = 1;
      auto extent = [&](const ir::Dim& dim, uint32_t tile) {
        if (dim.is_static()) {
          std::map<std::vector<std::string>, int64_t> scaled;
          for (const auto& [monomial, coeff] : units.terms()) scaled[monomial] = coeff * ((dim.size() + tile - 1) / tile);
          units.mutable_terms() = scaled;
          return;
        }
        ir::SizeExpr grown;
        for (const auto& [monomial, coeff] : units.terms()) {
          std::vector<std::string> with = monomial;
          for (const std::string& f : dim.symbol_factors()) with.insert(std::upper_bound(with.begin(), with.end(), f), f);
          grown.mutable_terms()[with] += coeff * dim.coefficient();
          grown.mutable_terms()[monomial] += coeff * (int64_t(tile) - 1);
        }
        units = grown;
        per_group *= tile;
      };
      extent(as.size() == 1 ? ir::Dim::of(1) : as[as.size() - 2], c.bm);
      extent(bs.size() == 1 ? ir::Dim::of(1) : bs.back(), c.bn);
      d.work_items = units;
      d.items_per_group = per_group;
      break;
    }
  }
  return d;
}

}  // namespace kiln::codegen
