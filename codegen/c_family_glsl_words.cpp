// GLSL word storage: the fallback rendering of a kernel for Vulkan devices that lack 8- or 16-bit
// storage-buffer access (storageBuffer8BitAccess / storageBuffer16BitAccess) or 8/16-bit shader
// arithmetic (shaderInt8 / shaderInt16 / shaderFloat16). Every buffer of a 1- or 2-byte dtype is
// declared `uint d[]` and element i is addressed inside its 32-bit word:
//   loads   f16 via unpackHalf2x16, bf16 via shifts (k_bf2f), i16 / u16 / i8 / u8 / bool / 8-bit
//           floats via bitfieldExtract (the floats then through k_f8_to_f);
//   stores  clear the element's bits with atomicAnd, then set them with atomicOr, so that
//           neighbouring elements of one word written by different invocations never lose each
//           other's updates (a plain read-modify-write of the word would race).
// The runtime binds such buffers with their ranges rounded up to whole words (the Vulkan driver
// sizes every VkBuffer and arena range to a multiple of 4 bytes), so the last, partial word is
// never outside the binding; the padding bytes are read but never used and never changed.
//
// Only the GLSL branches of Emitter::load/store and Emitter::render consult `word_storage_`;
// everything else renders exactly as in the primary variant. Thread-safety: pure functions.
#include "codegen/c_family_internal.h"

namespace kiln::codegen {
namespace cfam {

using ir::DType;

namespace {

// Appended after the prelude (it uses k_bf2f / k_f2bf from there). `i` is the element index
// within the buffer; the word index is i >> 1 (16-bit) or i >> 2 (8-bit).
constexpr const char* kWordHelpers = R"(uint k_w_shift16(IDX i) { return uint(i & 1) * 16u; }
uint k_w_shift8(IDX i) { return uint(i & 3) * 8u; }
float k_w_ld_f16(uint w, IDX i) { return unpackHalf2x16(w >> k_w_shift16(i)).x; }
float k_w_ld_bf16(uint w, IDX i) { return k_bf2f((w >> k_w_shift16(i)) & 0xffffu); }
int k_w_ld_i8(uint w, IDX i) { return bitfieldExtract(int(w), int(k_w_shift8(i)), 8); }
int k_w_ld_u8(uint w, IDX i) { return int(bitfieldExtract(w, int(k_w_shift8(i)), 8)); }
int k_w_ld_i16(uint w, IDX i) { return bitfieldExtract(int(w), int(k_w_shift16(i)), 16); }
int k_w_ld_u16(uint w, IDX i) { return int(bitfieldExtract(w, int(k_w_shift16(i)), 16)); }
uint k_w_bits_f16(float v) { return packHalf2x16(vec2(v, 0.0)) & 0xffffu; }
uint k_w_bits_bf16(float v) { return k_f2bf(v) & 0xffffu; }
uint k_w_bits_8(int v) { return uint(v) & 0xffu; }
uint k_w_bits_16(int v) { return uint(v) & 0xffffu; }
)";

}  // namespace

bool Emitter::word_buffer(int buffer) const {
  return glsl() && word_storage_ && ir::dtype_size(m_.buffers[size_t(buffer)].dtype) < 4;
}

std::string Emitter::word_storage_prelude() { return kWordHelpers; }

std::string Emitter::load_word(int buffer, const std::string& offset) const {
  const std::string b = "b" + std::to_string(buffer) + ".d";
  const std::string i = "(" + offset + ")";
  switch (m_.buffers[size_t(buffer)].dtype) {
    case DType::kF16: return "k_w_ld_f16(" + b + "[" + i + " >> 1], " + i + ")";
    case DType::kBF16: return "k_w_ld_bf16(" + b + "[" + i + " >> 1], " + i + ")";
    case DType::kI16: return "k_w_ld_i16(" + b + "[" + i + " >> 1], " + i + ")";
    case DType::kU16: return "k_w_ld_u16(" + b + "[" + i + " >> 1], " + i + ")";
    case DType::kI8: return "k_w_ld_i8(" + b + "[" + i + " >> 2], " + i + ")";
    case DType::kU8: case DType::kBool: return "k_w_ld_u8(" + b + "[" + i + " >> 2], " + i + ")";
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      return float8_decode(m_.buffers[size_t(buffer)].dtype, "uint(k_w_ld_u8(" + b + "[" + i + " >> 2], " + i + "))");
    case DType::kF32: case DType::kI32: case DType::kI64: case DType::kU32: case DType::kF64: break;
  }
  return b + "[" + offset + "]";  // not reached: word_buffer() holds only for 1- and 2-byte dtypes
}

void Emitter::store_word(int buffer, const std::string& offset, const std::string& v) {
  const DType dtype = m_.buffers[size_t(buffer)].dtype;
  const bool half = ir::dtype_size(dtype) == 2;
  const std::string o = fresh("wo"), s = fresh("ws"), word = "b" + std::to_string(buffer) + ".d[" + o +
                                                                 (half ? " >> 1]" : " >> 2]");
  std::string bits;
  switch (dtype) {
    case DType::kF16: bits = "k_w_bits_f16(" + v + ")"; break;
    case DType::kBF16: bits = "k_w_bits_bf16(" + v + ")"; break;
    case DType::kI16: case DType::kU16: bits = "k_w_bits_16(" + v + ")"; break;
    case DType::kI8: case DType::kU8: case DType::kBool: bits = "k_w_bits_8(" + v + ")"; break;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      bits = float8_encode(dtype, v);
      break;
    case DType::kF32: case DType::kI32: case DType::kI64: case DType::kU32: case DType::kF64:
      fail(internal_error("kernel '" + m_.kernel->name + "': word storage of a 4- or 8-byte dtype"));
      return;
  }
  const std::string mask = half ? "0xffffu" : "0xffu";
  line("{ IDX " + o + " = " + offset + "; uint " + s + " = " + (half ? "k_w_shift16(" : "k_w_shift8(") + o +
       "); atomicAnd(" + word + ", ~(" + mask + " << " + s + ")); atomicOr(" + word + ", " + bits + " << " + s +
       "); }");
}

}  // namespace cfam

Result<RenderedKernel> render_glsl_word_storage(const KernelModel& model) {
  cfam::Emitter emitter(model, Dialect::kGlsl);
  emitter.word_storage_ = true;
  return emitter.render();
}

}  // namespace kiln::codegen
