// ONNX's 8-bit float formats (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ) and
// their conversions to and from f32. Kiln stores them one byte an element and computes on them
// in f32, like f16 and bf16.
//
// One byte: a sign bit, then 7 - mantissa_bits exponent bits and mantissa_bits mantissa bits.
// A zero exponent field is subnormal (mantissa * 2^(1 - bias - mantissa_bits)). The kinds differ
// in their special values:
//   kIeee      (e5m2):       exponent all ones is inf (mantissa 0) or NaN, as in IEEE 754;
//   kFiniteNan (e4m3fn):     no infinities; magnitude 0x7f (either sign) is NaN;
//   kFnuz      (*fnuz):      no infinities and no -0; 0x80 is the only NaN.
//
// f32 -> f8 rounds to nearest even and does not saturate: a value that rounds beyond the largest
// finite one, and an infinity, becomes inf (kIeee) or NaN (the others); NaN stays NaN (the
// type's quiet NaN, with the input's sign where the type has signed NaNs; payloads are not
// kept); -0 and negative values rounding to zero are 0 in the fnuz types. This is ml_dtypes'
// astype, which ONNX's reference uses for Cast with saturate=0; ONNX's default (saturate=1) is
// a clamp to [-max, max] before it (frontend/onnx: Cast, QuantizeLinear). The same algorithm
// runs in every kernel dialect (codegen/c_family_prelude.cpp, k_f_to_f8 / k_f8_to_f).
#pragma once

#include <cmath>
#include <cstdint>

#include "support/half.h"

namespace kiln {

// The numbers are the kernels' too (codegen/c_family_prelude.cpp: k_f8_to_f's `kind`).
enum class Float8Kind : uint8_t { kIeee = 0, kFiniteNan = 1, kFnuz = 2 };

struct Float8Format {
  uint32_t mantissa_bits;
  uint32_t bias;
  Float8Kind kind;
};

inline constexpr Float8Format kFloat8E4M3FN{3, 7, Float8Kind::kFiniteNan};
inline constexpr Float8Format kFloat8E4M3FNUZ{3, 8, Float8Kind::kFnuz};
inline constexpr Float8Format kFloat8E5M2{2, 15, Float8Kind::kIeee};
inline constexpr Float8Format kFloat8E5M2FNUZ{2, 16, Float8Kind::kFnuz};

// The magnitude bits (sign cleared) of the largest finite value.
inline constexpr uint32_t float8_max_code(Float8Format f) {
  switch (f.kind) {
    case Float8Kind::kIeee: return ((0x7fu >> f.mantissa_bits) << f.mantissa_bits) - 1;  // below inf
    case Float8Kind::kFiniteNan: return 0x7e;  // below the NaN
    case Float8Kind::kFnuz: return 0x7f;
  }
  return 0x7f;
}

inline float float8_to_f32(uint8_t b, Float8Format f) {
  const uint32_t m = f.mantissa_bits, c = b & 0x7fu;
  const bool negative = (b & 0x80u) != 0;
  const float nan = f32_from_bits(negative ? 0xffc00000u : 0x7fc00000u);
  switch (f.kind) {
    case Float8Kind::kFnuz:
      if (b == 0x80u) return f32_from_bits(0x7fc00000u);
      break;
    case Float8Kind::kFiniteNan:
      if (c == 0x7fu) return nan;
      break;
    case Float8Kind::kIeee:
      if ((c >> m) == (0x7fu >> m)) return (c & ((1u << m) - 1)) != 0 ? nan : (negative ? -1.0f : 1.0f) / 0.0f;
      break;
  }
  const uint32_t e = c >> m, mant = c & ((1u << m) - 1);
  // Subnormals: mant units of 2^(1 - bias - m), a power of two with f32 exponent field 128 - bias - m.
  const float mag = e == 0 ? float(mant) * f32_from_bits((128u - f.bias - m) << 23)
                           : f32_from_bits(((e + 127u - f.bias) << 23) | (mant << (23u - m)));
  return negative ? -mag : mag;
}

inline uint8_t f32_to_float8(float x, Float8Format f) {
  const uint32_t m = f.mantissa_bits, u = f32_bits(x), a = u & 0x7fffffffu;
  const uint32_t sign = (u >> 24) & 0x80u;
  if (a > 0x7f800000u) {  // NaN
    if (f.kind == Float8Kind::kFnuz) return 0x80;
    return uint8_t(sign | (f.kind == Float8Kind::kIeee ? (0x7fu >> m << m) | (1u << (m - 1)) : 0x7fu));
  }
  uint32_t code;
  if (a < ((128u - f.bias) << 23)) {
    // Below the smallest normal 2^(1 - bias): in subnormal units 2^(1 - bias - m) (an exact
    // scaling), rounded to nearest even. Rounding up to 2^m gives the smallest normal's code.
    code = uint32_t(std::rint(f32_from_bits(a) * f32_from_bits((126u + f.bias + m) << 23)));
  } else {
    // Round the f32 mantissa to m bits (nearest even; a carry moves into the exponent), then
    // rebias the exponent. Infinity and huge values give codes above the maximum.
    const uint32_t shift = 23u - m;
    const uint32_t rounded = a + (1u << (shift - 1)) - 1u + ((a >> shift) & 1u);
    code = (rounded >> shift) - ((127u - f.bias) << m);
  }
  if (code > float8_max_code(f)) {
    if (f.kind == Float8Kind::kIeee) return uint8_t(sign | (0x7fu >> m << m));  // inf
    return f.kind == Float8Kind::kFnuz ? 0x80 : uint8_t(sign | 0x7fu);           // NaN
  }
  if (code == 0 && f.kind == Float8Kind::kFnuz) return 0;  // no -0
  return uint8_t(sign | code);
}

}  // namespace kiln
