// Unit tests for support/float8.h: ONNX's 8-bit floats. Decoding is checked over all 256 bit
// patterns of each type against the format's definition; encoding at the edges that differ
// between the types (rounding ties, the largest value, overflow, infinities, NaN, -0,
// subnormals), with the expected bits as ml_dtypes (ONNX's reference) gives them.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "support/float8.h"

using namespace kiln;

namespace {

struct Named {
  const char* name;
  Float8Format format;
};
constexpr Named kFormats[] = {{"e4m3fn", kFloat8E4M3FN},
                              {"e4m3fnuz", kFloat8E4M3FNUZ},
                              {"e5m2", kFloat8E5M2},
                              {"e5m2fnuz", kFloat8E5M2FNUZ}};

// The value of bits `b` from the definition: sign, exponent field e, mantissa field m;
// subnormal when e == 0. Specials are decided by the caller.
double defined_value(uint32_t b, Float8Format f) {
  const int mb = int(f.mantissa_bits);
  const int e = int((b & 0x7f) >> mb), m = int(b & ((1u << mb) - 1));
  const double mag = e == 0 ? std::ldexp(double(m), 1 - int(f.bias) - mb)
                            : std::ldexp(1.0 + std::ldexp(double(m), -mb), e - int(f.bias));
  return (b & 0x80) ? -mag : mag;
}

float f(double v) { return float(v); }
const float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("support.float8: every bit pattern decodes as the format defines it") {
  for (const Named& n : kFormats) {
    INFO(n.name);
    const Float8Format fmt = n.format;
    const uint32_t exp_all_ones = 0x7fu >> fmt.mantissa_bits;
    int nans = 0, infs = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      INFO("bits " << b);
      const float v = float8_to_f32(uint8_t(b), fmt);
      const uint32_t c = b & 0x7f;
      bool nan = false, inf = false;
      switch (fmt.kind) {
        case Float8Kind::kIeee:
          nan = (c >> fmt.mantissa_bits) == exp_all_ones && (c & ((1u << fmt.mantissa_bits) - 1)) != 0;
          inf = (c >> fmt.mantissa_bits) == exp_all_ones && !nan;
          break;
        case Float8Kind::kFiniteNan: nan = c == 0x7f; break;
        case Float8Kind::kFnuz: nan = b == 0x80; break;
      }
      nans += nan;
      infs += inf;
      if (nan) {
        CHECK(std::isnan(v));
      } else if (inf) {
        CHECK(v == ((b & 0x80) ? -kInf : kInf));
      } else {
        CHECK(double(v) == defined_value(b, fmt));
        CHECK(std::signbit(v) == ((b & 0x80) != 0));  // -0 included (fn types)
        // Every value encodes back to its own bits.
        CHECK(f32_to_float8(v, fmt) == b);
      }
    }
    CHECK(nans == (fmt.kind == Float8Kind::kIeee ? 6 : fmt.kind == Float8Kind::kFiniteNan ? 2 : 1));
    CHECK(infs == (fmt.kind == Float8Kind::kIeee ? 2 : 0));
  }
}

TEST_CASE("support.float8: largest values") {
  CHECK(float8_to_f32(uint8_t(float8_max_code(kFloat8E4M3FN)), kFloat8E4M3FN) == 448.0f);
  CHECK(float8_to_f32(uint8_t(float8_max_code(kFloat8E4M3FNUZ)), kFloat8E4M3FNUZ) == 240.0f);
  CHECK(float8_to_f32(uint8_t(float8_max_code(kFloat8E5M2)), kFloat8E5M2) == 57344.0f);
  CHECK(float8_to_f32(uint8_t(float8_max_code(kFloat8E5M2FNUZ)), kFloat8E5M2FNUZ) == 57344.0f);
}

TEST_CASE("support.float8: e4m3fn encoding") {
  const Float8Format e = kFloat8E4M3FN;
  CHECK(f32_to_float8(1.0f, e) == 0x38);
  CHECK(f32_to_float8(-0.0f, e) == 0x80);
  CHECK(f32_to_float8(1.0625f, e) == 0x38);  // tie between 1 and 1.125: even (1)
  CHECK(f32_to_float8(1.1875f, e) == 0x3a);  // tie between 1.125 and 1.25: even (1.25)
  CHECK(f32_to_float8(448.0f, e) == 0x7e);
  CHECK(f32_to_float8(464.0f, e) == 0x7e);  // tie between 448 (even) and the NaN's place
  CHECK(f32_to_float8(std::nextafter(464.0f, kInf), e) == 0x7f);  // overflow: NaN
  CHECK(f32_to_float8(-1e10f, e) == 0xff);
  CHECK(f32_to_float8(kInf, e) == 0x7f);
  CHECK(f32_to_float8(-kInf, e) == 0xff);
  CHECK(f32_to_float8(kNan, e) == 0x7f);
  CHECK(f32_to_float8(-kNan, e) == 0xff);
  // Subnormals: units of 2^-9.
  CHECK(f32_to_float8(f(std::ldexp(1.0, -9)), e) == 0x01);
  CHECK(f32_to_float8(f(std::ldexp(1.0, -10)), e) == 0x00);  // half a unit: even (0)
  CHECK(f32_to_float8(f(std::ldexp(1.0, -10)) * 1.0001f, e) == 0x01);
  CHECK(f32_to_float8(f(std::ldexp(1.5, -9)), e) == 0x02);  // 1.5 units: even (2)
  CHECK(f32_to_float8(f(-std::ldexp(1.0, -11)), e) == 0x80);  // rounds to -0
  CHECK(f32_to_float8(f(std::ldexp(7.5, -9)), e) == 0x08);  // rounds up to the smallest normal
}

TEST_CASE("support.float8: e4m3fnuz encoding") {
  const Float8Format e = kFloat8E4M3FNUZ;
  CHECK(f32_to_float8(1.0f, e) == 0x40);
  CHECK(f32_to_float8(-0.0f, e) == 0x00);  // no -0
  CHECK(f32_to_float8(f(-std::ldexp(1.0, -12)), e) == 0x00);
  CHECK(f32_to_float8(240.0f, e) == 0x7f);
  CHECK(f32_to_float8(std::nextafter(248.0f, 0.0f), e) == 0x7f);
  CHECK(f32_to_float8(248.0f, e) == 0x80);  // tie between 240 (odd) and 256: 256 overflows, NaN
  CHECK(f32_to_float8(-248.0f, e) == 0x80);
  CHECK(f32_to_float8(kInf, e) == 0x80);
  CHECK(f32_to_float8(-kInf, e) == 0x80);
  CHECK(f32_to_float8(-kNan, e) == 0x80);
  CHECK(f32_to_float8(f(std::ldexp(1.0, -10)), e) == 0x01);
  CHECK(f32_to_float8(f(-std::ldexp(1.0, -10)), e) == 0x81);
}

TEST_CASE("support.float8: e5m2 encoding") {
  const Float8Format e = kFloat8E5M2;
  CHECK(f32_to_float8(1.0f, e) == 0x3c);
  CHECK(f32_to_float8(-0.0f, e) == 0x80);
  CHECK(f32_to_float8(1.125f, e) == 0x3c);  // tie between 1 and 1.25: even (1)
  CHECK(f32_to_float8(1.375f, e) == 0x3e);  // tie between 1.25 and 1.5: even (1.5)
  CHECK(f32_to_float8(57344.0f, e) == 0x7b);
  CHECK(f32_to_float8(std::nextafter(61440.0f, 0.0f), e) == 0x7b);
  CHECK(f32_to_float8(61440.0f, e) == 0x7c);  // tie between 57344 (odd) and 65536: inf
  CHECK(f32_to_float8(-1e30f, e) == 0xfc);
  CHECK(f32_to_float8(kInf, e) == 0x7c);
  CHECK(f32_to_float8(-kInf, e) == 0xfc);
  CHECK(f32_to_float8(kNan, e) == 0x7e);
  CHECK(f32_to_float8(-kNan, e) == 0xfe);
  CHECK(f32_to_float8(f(std::ldexp(1.0, -16)), e) == 0x01);
  CHECK(f32_to_float8(f(std::ldexp(1.0, -17)), e) == 0x00);
  CHECK(f32_to_float8(f(std::ldexp(3.0, -17)), e) == 0x02);
}

TEST_CASE("support.float8: e5m2fnuz encoding") {
  const Float8Format e = kFloat8E5M2FNUZ;
  CHECK(f32_to_float8(1.0f, e) == 0x40);
  CHECK(f32_to_float8(-0.0f, e) == 0x00);
  CHECK(f32_to_float8(57344.0f, e) == 0x7f);
  CHECK(f32_to_float8(61440.0f, e) == 0x80);
  CHECK(f32_to_float8(-kInf, e) == 0x80);
  CHECK(f32_to_float8(kNan, e) == 0x80);
  CHECK(f32_to_float8(f(std::ldexp(1.0, -17)), e) == 0x01);
  CHECK(f32_to_float8(f(-std::ldexp(1.0, -18)), e) == 0x00);  // a tie to zero, without its sign
}
