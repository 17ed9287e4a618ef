// Unit tests for support/half.h: f16 and bf16 conversions (exact values, subnormals, rounding
// to nearest even, overflow, infinities and NaN).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "support/half.h"

using namespace kiln;

TEST_CASE("support.half: f16 exact values and round trips") {
  CHECK(f32_to_f16(0.0f) == 0x0000);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(-2.0f) == 0xc000);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f16_to_f32(0x3c00) == 1.0f);
  CHECK(f16_to_f32(0x7bff) == 65504.0f);
  CHECK(f16_to_f32(0x3555) == 0.333251953125f);
  // Every finite f16 survives f16 -> f32 -> f16.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = uint16_t(bits);
    if ((h & 0x7c00) == 0x7c00) continue;  // inf / NaN checked below
    REQUIRE(f32_to_f16(f16_to_f32(h)) == h);
  }
}

TEST_CASE("support.half: f16 subnormals") {
  const float smallest = std::ldexp(1.0f, -24);  // 2^-24, f16 0x0001
  CHECK(f16_to_f32(0x0001) == smallest);
  CHECK(f16_to_f32(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(f16_to_f32(0x8001) == -smallest);
  CHECK(f32_to_f16(smallest) == 0x0001);
  CHECK(f32_to_f16(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  // Half of the smallest subnormal is a tie: rounds to even (zero); just above rounds up.
  CHECK(f32_to_f16(smallest * 0.5f) == 0x0000);
  CHECK(f32_to_f16(smallest * 0.5f * 1.0001f) == 0x0001);
  // 1.5 * 2^-24 is a tie between 0x0001 and 0x0002: even wins.
  CHECK(f32_to_f16(smallest * 1.5f) == 0x0002);
  // 2.5 * 2^-24 is a tie between 0x0002 and 0x0003: even wins.
  CHECK(f32_to_f16(smallest * 2.5f) == 0x0002);
  CHECK(f32_to_f16(std::ldexp(1.0f, -30)) == 0x0000);
}

TEST_CASE("support.half: f16 rounding ties to even and overflow") {
  // Between 1.0 (0x3c00) and the next f16 (1 + 2^-10): the midpoint rounds to even (1.0).
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  // Between 1 + 2^-10 (0x3c01, odd) and 1 + 2^-9 (0x3c02): the midpoint rounds up to even.
  CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);
  // 65519 rounds down to 65504; 65520 (the midpoint to 65536) overflows to infinity.
  CHECK(f32_to_f16(65519.0f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);
  CHECK(f32_to_f16(1e10f) == 0x7c00);
  CHECK(f32_to_f16(-1e10f) == 0xfc00);
}

TEST_CASE("support.half: f16 infinities and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(f32_to_f16(inf) == 0x7c00);
  CHECK(f32_to_f16(-inf) == 0xfc00);
  CHECK(std::isinf(f16_to_f32(0x7c00)));
  CHECK(f16_to_f32(0xfc00) < 0);
  const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  CHECK(std::isnan(f16_to_f32(0x7e00)));
  CHECK(std::isnan(f16_to_f32(0x7c01)));
}

TEST_CASE("support.half: bf16") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bf16_to_f32(0xc040) == -3.0f);
  // 1 + 2^-8 is the midpoint between 1.0 and 1 + 2^-7: even (1.0) wins.
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  // 1 + 3*2^-8 is the midpoint between 0x3f81 (odd) and 0x3f82: rounds up to even.
  CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  // Overflow past the largest bf16 gives infinity; infinities stay.
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(f32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  // NaN stays NaN (even a NaN whose payload sits only in the low bits).
  const uint16_t nan = f32_to_bf16(f32_from_bits(0x7f800001u));
  CHECK(std::isnan(bf16_to_f32(nan)));
  // Subnormal f32 values keep their top bits.
  CHECK(bf16_to_f32(f32_to_bf16(std::ldexp(1.0f, -130))) == std::ldexp(1.0f, -130));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = uint16_t(bits);
    if ((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0) continue;  // NaN payloads may be quieted
    REQUIRE(f32_to_bf16(bf16_to_f32(h)) == h);
  }
}
