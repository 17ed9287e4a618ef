// The helper functions each rendered kernel starts with (CUDA: each program, once). One text
// serves every dialect through a few macros (casts and bit reinterpretation are spelled differently in C and GLSL); the helpers
// that only one dialect needs (erf, tanh and pow for GLSL, wrap-safe signed arithmetic for
// OpenCL C, whose signed overflow is undefined) are dialect-specific.
#include "codegen/c_family_internal.h"

namespace kiln::codegen::cfam {

using ir::DType;

namespace {

constexpr const char* kOpenClMacros = R"(#define IDX long
#define I64 long
#define TO_F(x) ((float)(x))
#define TO_I(x) ((int)(x))
#define TO_L(x) ((long)(x))
#define TO_U(x) ((uint)(x))
#define TO_IDX(x) ((long)(x))
#define F2U(x) as_uint(x)
#define U2F(x) as_float(x)
#define k_erf erf
#define k_tanh tanh
#define k_powf pow
#define k_fmodf fmod
#define k_rsqrt rsqrt
#define k_round rint
#define k_fabs fabs
int k_add_i(int a, int b) { return as_int(as_uint(a) + as_uint(b)); }
int k_sub_i(int a, int b) { return as_int(as_uint(a) - as_uint(b)); }
int k_mul_i(int a, int b) { return as_int(as_uint(a) * as_uint(b)); }
int k_neg_i(int a) { return as_int(0u - as_uint(a)); }
int k_shl_i(int a, int b) { return as_int(as_uint(a) << b); }
int k_f2i(float x) { return convert_int_sat_rtz(x); }
)";

constexpr const char* kOpenClI64 = R"(long k_add_l(long a, long b) { return as_long(as_ulong(a) + as_ulong(b)); }
long k_sub_l(long a, long b) { return as_long(as_ulong(a) - as_ulong(b)); }
long k_mul_l(long a, long b) { return as_long(as_ulong(a) * as_ulong(b)); }
long k_neg_l(long a) { return as_long((ulong)0 - as_ulong(a)); }
long k_shl_l(long a, long b) { return as_long(as_ulong(a) << b); }
long k_f2l(float x) { return convert_long_sat_rtz(x); }
)";

constexpr const char* kGlslMacros = R"(#define IDX int
#define I64 int64_t
#define TO_F(x) float(x)
#define TO_I(x) int(x)
#define TO_L(x) int64_t(x)
#define TO_U(x) uint(x)
#define TO_IDX(x) int(x)
#define F2U(x) floatBitsToUint(x)
#define U2F(x) uintBitsToFloat(x)
#define k_rsqrt inversesqrt
#define k_round roundEven
#define k_fabs abs
int k_add_i(int a, int b) { return a + b; }
int k_sub_i(int a, int b) { return a - b; }
int k_mul_i(int a, int b) { return a * b; }
int k_neg_i(int a) { return -a; }
int k_shl_i(int a, int b) { return a << b; }
int k_f2i(float x) {
  if (isnan(x)) return 0;
  if (x >= 2147483648.0) return 2147483647;
  if (x <= -2147483648.0) return -2147483647 - 1;
  return int(x);
}
float k_tanh(float x) {
  float a = abs(x);
  if (a < 0.5) return tanh(x);
  float e = exp(-2.0 * a);
  float t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;
}
float k_erf(float x) {
  float a = abs(x);
  if (a < 1.0) {
    float x2 = x * x, term = x, sum = x;
    for (int n = 1; n < 14; ++n) { term *= -x2 / float(n); sum += term / float(2 * n + 1); }
    return 1.1283791670955126 * sum;
  }
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                   0.254829592) * t * exp(-a * a);
  return x < 0.0 ? -y : y;
}
// GLSL has no C fmod (its mod() floors): |a| - |b| * trunc(|a| / |b|), corrected by one |b| where
// the rounded quotient is off by one, with the dividend's sign. Exact while |a / b| < 2^24.
float k_fmodf(float a, float b) {
  if (isnan(a) || isnan(b) || isinf(a) || b == 0.0) return uintBitsToFloat(0x7fc00000u);
  if (isinf(b)) return a;
  float x = abs(a), y = abs(b);
  float r = x - y * trunc(x / y);
  if (r < 0.0) r += y;
  if (r >= y) r -= y;
  return a < 0.0 ? -r : r;
}
float k_powf(float a, float b) {
  if (b == 0.0) return 1.0;
  if (isnan(a) || isnan(b)) return a + b;
  if (a == 0.0) return b > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
  if (a < 0.0) {
    if (b != floor(b)) return uintBitsToFloat(0x7fc00000u);
    float r = pow(-a, b);
    return mod(b, 2.0) == 1.0 ? -r : r;
  }
  return pow(a, b);
}
)";

constexpr const char* kGlslI64 = R"(int64_t k_add_l(int64_t a, int64_t b) { return a + b; }
int64_t k_sub_l(int64_t a, int64_t b) { return a - b; }
int64_t k_mul_l(int64_t a, int64_t b) { return a * b; }
int64_t k_neg_l(int64_t a) { return -a; }
int64_t k_shl_l(int64_t a, int64_t b) { return a << b; }
int64_t k_f2l(float x) {
  if (isnan(x)) return 0l;
  if (x >= 9.2233720368547758e18) return 9223372036854775807l;
  if (x <= -9.2233720368547758e18) return -9223372036854775807l - 1l;
  return int64_t(x);
}
)";

// CUDA C (NVRTC, compiled with -default-device so these plain functions are device functions).
// f16 is 16-bit storage converted with PTX cvt (no cuda_fp16.h at compile or run time); float ->
// int conversions use the saturating round-toward-zero intrinsics (NaN -> 0), like OpenCL's
// convert_*_sat_rtz; signed arithmetic goes through unsigned because overflow is UB in C++.
constexpr const char* kCudaMacros = R"(typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
#define IDX long long
#define I64 long long
#define TO_F(x) ((float)(x))
#define TO_I(x) ((int)(x))
#define TO_L(x) ((long long)(x))
#define TO_U(x) ((uint)(x))
#define TO_IDX(x) ((long long)(x))
#define F2U(x) __float_as_uint(x)
#define U2F(x) __uint_as_float(x)
#define k_erf erff
#define k_tanh tanhf
#define k_powf powf
#define k_fmodf fmodf
#define k_rsqrt rsqrtf
#define k_round rintf
#define k_fabs fabsf
__forceinline__ float k_h2f(ushort h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__forceinline__ ushort k_f2h(float f) { ushort h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__forceinline__ long long clamp(long long x, long long lo, long long hi) { return x < lo ? lo : (x > hi ? hi : x); }
__forceinline__ int k_add_i(int a, int b) { return (int)((uint)a + (uint)b); }
__forceinline__ int k_sub_i(int a, int b) { return (int)((uint)a - (uint)b); }
__forceinline__ int k_mul_i(int a, int b) { return (int)((uint)a * (uint)b); }
__forceinline__ int k_neg_i(int a) { return (int)(0u - (uint)a); }
__forceinline__ int k_shl_i(int a, int b) { return (int)((uint)a << b); }
__forceinline__ int k_f2i(float x) { return __float2int_rz(x); }
typedef unsigned long long ulong_t;
__forceinline__ long long k_add_l(long long a, long long b) { return (long long)((ulong_t)a + (ulong_t)b); }
__forceinline__ long long k_sub_l(long long a, long long b) { return (long long)((ulong_t)a - (ulong_t)b); }
__forceinline__ long long k_mul_l(long long a, long long b) { return (long long)((ulong_t)a * (ulong_t)b); }
__forceinline__ long long k_neg_l(long long a) { return (long long)(0ull - (ulong_t)a); }
__forceinline__ long long k_shl_l(long long a, long long b) { return (long long)((ulong_t)a << b); }
__forceinline__ long long k_f2l(float x) { return __float2ll_rz(x); }
__forceinline__ float k_fmax(float a, float b) { return fmaxf(a, b); }  // one FMNMX; NaN-ignoring
)";

// C++ for the host CPU (the cpu target compiles it with clang, without system headers: the math
// functions are clang builtins, which lower to instructions or libm calls). OpenCL C's overloaded
// float math (exp, sqrt, ...) is spelled the same here through float overloads, so the operator
// table's forms serve this dialect unchanged. f16 is 16-bit storage converted in software
// (round to nearest even); float -> int conversions saturate toward zero with NaN -> 0, like
// OpenCL's convert_*_sat_rtz; signed arithmetic wraps through unsigned.
constexpr const char* kCpuMacros = R"(typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long long ulong_t;
#define IDX long long
#define I64 long long
#define TO_F(x) ((float)(x))
#define TO_I(x) ((int)(x))
#define TO_L(x) ((long long)(x))
#define TO_U(x) ((uint)(x))
#define TO_IDX(x) ((long long)(x))
#define F2U(x) __builtin_bit_cast(uint, (float)(x))
#define U2F(x) __builtin_bit_cast(float, (uint)(x))
#define K_MATH1(name) inline float name(float x) { return __builtin_##name##f(x); }
K_MATH1(exp) K_MATH1(log) K_MATH1(sqrt) K_MATH1(sin) K_MATH1(cos) K_MATH1(atan) K_MATH1(floor)
K_MATH1(ceil) K_MATH1(trunc) K_MATH1(fabs) K_MATH1(tanh) K_MATH1(erf) K_MATH1(rint) K_MATH1(nearbyint)
inline float pow(float a, float b) { return __builtin_powf(a, b); }
inline float fmod(float a, float b) { return __builtin_fmodf(a, b); }
inline float fmin(float a, float b) { return __builtin_fminf(a, b); }
inline float fmax(float a, float b) { return __builtin_fmaxf(a, b); }
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
#define k_tanh tanh
#define k_powf pow
#define k_fmodf fmod
#define k_round rint
#define k_fabs fabs
// Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7): no branch and one exp, so loops
// over it vectorize (exp through libmvec), where libm's erff is a scalar call per element.
inline float k_erf(float x) {
  float a = fabs(x), t = 1.0f / (1.0f + 0.3275911f * a);
  float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) *
                    t * exp(-a * a));
  return x < 0.0f ? -y : y;
}
inline float k_rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
inline long long clamp(long long x, long long lo, long long hi) { return x < lo ? lo : (x > hi ? hi : x); }
inline float k_h2f(ushort h) {
  uint sign = (uint)(h & 0x8000u) << 16, e = (h >> 10) & 31u, man = h & 1023u;
  if (e == 31u) return U2F(sign | 0x7f800000u | (man << 13));
  if (e == 0u) {
    float f = (float)man * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -f : f;
  }
  return U2F(sign | ((e + 112u) << 23) | (man << 13));
}
inline ushort k_f2h(float f) {
  uint u = F2U(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (ushort)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {  // below 2^-14: subnormal; rint applies round-to-nearest-even
    float m = U2F(a) * 16777216.0f;  // in units of 2^-24
    return (ushort)(sign | (uint)__builtin_rintf(m));
  }
  uint r = a + 0xfffu + ((a >> 13) & 1u);
  return (ushort)(sign | ((r - 0x38000000u) >> 13));
}
inline int k_add_i(int a, int b) { return (int)((uint)a + (uint)b); }
inline int k_sub_i(int a, int b) { return (int)((uint)a - (uint)b); }
inline int k_mul_i(int a, int b) { return (int)((uint)a * (uint)b); }
inline int k_neg_i(int a) { return (int)(0u - (uint)a); }
inline int k_shl_i(int a, int b) { return (int)((uint)a << b); }
inline int k_f2i(float x) { return isnan(x) ? 0 : (x >= 2147483648.0f ? 2147483647 : (x <= -2147483648.0f ? -2147483647 - 1 : (int)x)); }
inline long long k_add_l(long long a, long long b) { return (long long)((ulong_t)a + (ulong_t)b); }
inline long long k_sub_l(long long a, long long b) { return (long long)((ulong_t)a - (ulong_t)b); }
inline long long k_mul_l(long long a, long long b) { return (long long)((ulong_t)a * (ulong_t)b); }
inline long long k_neg_l(long long a) { return (long long)(0ull - (ulong_t)a); }
inline long long k_shl_l(long long a, long long b) { return (long long)((ulong_t)a << b); }
inline long long k_f2l(float x) {
  if (isnan(x)) return 0;
  if (x >= 9.2233720368547758e18f) return 9223372036854775807ll;
  if (x <= -9.2233720368547758e18f) return -9223372036854775807ll - 1ll;
  return (long long)x;
}
)";

// IEEE maxNum (a NaN operand is ignored), written out for GLSL, whose max() leaves NaN
// undefined, and for OpenCL C; CUDA's own definition above is fmaxf, one instruction.
constexpr const char* kPortableFmax =
    "float k_fmax(float a, float b) { return isnan(a) ? b : (isnan(b) ? a : (a > b ? a : b)); }\n";

// Written once for both dialects with the macros above.
constexpr const char* kCommon = R"(float k_bf2f(uint b) { return U2F(b << 16); }
uint k_f2bf(float f) {
  uint u = F2U(f);
  if (isnan(f)) return (u >> 16) | 64u;
  return (u + 32767u + ((u >> 16) & 1u)) >> 16;
}
float k_maxf(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : (a > b ? a : b); }
float k_minf(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : (a < b ? a : b); }
float k_sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + exp(-x));
  float e = exp(x);
  return e / (1.0f + e);
}
float k_relu(float x) { return isnan(x) ? x : (x > 0.0f ? x : 0.0f); }
float k_signf(float x) { return isnan(x) ? x : (x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f)); }
float k_gelu(float x) { return 0.5f * x * (1.0f + k_erf(x * 0.70710678118654752f)); }
float k_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + k_tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
int k_div_i(int a, int b) { return b == 0 ? 0 : (b == -1 ? k_neg_i(a) : a / b); }
int k_rem_i(int a, int b) { return (b == 0 || b == -1) ? 0 : k_sub_i(a, k_mul_i(a / b, b)); }
int k_pow_i(int b, int e) {
  if (e < 0) return b == 1 ? 1 : (b == -1 ? ((e & 1) == 0 ? 1 : -1) : 0);
  int r = 1;
  while (e != 0) {
    if ((e & 1) != 0) r = k_mul_i(r, b);
    b = k_mul_i(b, b);
    e = e >> 1;
  }
  return r;
}
IDX k_slice_start(IDX s, IDX step, IDX dim) {
  if (s < TO_IDX(0)) s += dim;
  if (s < TO_IDX(0)) return step > TO_IDX(0) ? TO_IDX(0) : TO_IDX(-1);
  if (s >= dim) return step > TO_IDX(0) ? dim : dim - TO_IDX(1);
  return s;
}
bool k_better_f(float v, IDX i, float bv, IDX bi) {
  bool vn = isnan(v), bn = isnan(bv);
  if (vn || bn) return vn && (!bn || i < bi);
  return v > bv || (v == bv && i < bi);
}
bool k_better_i(int v, IDX i, int bv, IDX bi) { return v > bv || (v == bv && i < bi); }
)";

constexpr const char* kCommonI64 = R"(I64 k_div_l(I64 a, I64 b) { return b == TO_L(0) ? TO_L(0) : (b == TO_L(-1) ? k_neg_l(a) : a / b); }
I64 k_rem_l(I64 a, I64 b) { return (b == TO_L(0) || b == TO_L(-1)) ? TO_L(0) : k_sub_l(a, k_mul_l(a / b, b)); }
I64 k_pow_l(I64 b, I64 e) {
  if (e < TO_L(0)) return b == TO_L(1) ? TO_L(1) : (b == TO_L(-1) ? ((e & TO_L(1)) == TO_L(0) ? TO_L(1) : TO_L(-1)) : TO_L(0));
  I64 r = TO_L(1);
  while (e != TO_L(0)) {
    if ((e & TO_L(1)) != TO_L(0)) r = k_mul_l(r, b);
    b = k_mul_l(b, b);
    e = e >> 1;
  }
  return r;
}
bool k_better_l(I64 v, IDX i, I64 bv, IDX bi) { return v > bv || (v == bv && i < bi); }
)";

// Only in the kernels that hold 8-bit floats, except on cpu and CUDA (prelude()).
constexpr const char* kFloat8 = R"(// ONNX's 8-bit floats, as support/float8.h converts them (the same steps, which the backends
// suite checks against it): m mantissa bits, exponent bias `bias`, `kind` Float8Kind's number
// (0 IEEE-like, 1 no inf and NaN 0x7f/0xff, 2 fnuz: 0x80 the only NaN, no -0). f32 -> f8
// rounds to nearest even without saturating.
float k_f8_to_f(uint b, uint m, uint bias, uint kind) {
  uint c = b & 127u, e = c >> m, man = c & ((1u << m) - 1u), sg = (b & 128u) << 24;
  if (kind == 2u && b == 128u) return U2F(0x7fc00000u);
  if ((kind == 1u && c == 127u) || (kind == 0u && e == (127u >> m) && man != 0u)) return U2F(sg | 0x7fc00000u);
  if (kind == 0u && e == (127u >> m)) return U2F(sg | 0x7f800000u);
  // Subnormals: man units of 2^(1 - bias - m), whose f32 exponent field is 128 - bias - m.
  float mag = e == 0u ? TO_F(man) * U2F((128u - bias - m) << 23)
                      : U2F(((e + 127u - bias) << 23) | (man << (23u - m)));
  return sg != 0u ? -mag : mag;
}
uint k_f_to_f8(float x, uint m, uint bias, uint kind) {
  uint a = F2U(x) & 0x7fffffffu, sg = (F2U(x) >> 24) & 128u, infc = 127u >> m << m, code;
  if (a > 0x7f800000u) return kind == 2u ? 128u : (sg | (kind == 0u ? (infc | (1u << (m - 1u))) : 127u));
  if (a < ((128u - bias) << 23)) {
    code = TO_U(k_round(U2F(a) * U2F((126u + bias + m) << 23)));  // subnormal units, nearest even
  } else {
    uint s = 23u - m;  // round the mantissa to m bits, nearest even, then rebias the exponent
    code = ((a + (1u << (s - 1u)) - 1u + ((a >> s) & 1u)) >> s) - ((127u - bias) << m);
  }
  if (code > (kind == 0u ? infc - 1u : (kind == 1u ? 126u : 127u))) {  // beyond the largest value
    return kind == 0u ? (sg | infc) : (kind == 2u ? 128u : (sg | 127u));
  }
  return (kind == 2u && code == 0u) ? 0u : (sg | code);
}
)";

}  // namespace

namespace {

// The arguments of k_f8_to_f and k_f_to_f8 that name an 8-bit float dtype's format.
std::string float8_args(DType dtype) {
  const Float8Format f = *ir::float8_format(dtype);
  return std::to_string(f.mantissa_bits) + "u, " + std::to_string(f.bias) + "u, " + std::to_string(int(f.kind)) + "u";
}

}  // namespace

std::string float8_decode(DType dtype, const std::string& bits) {
  return "k_f8_to_f(" + bits + ", " + float8_args(dtype) + ")";
}
std::string float8_encode(DType dtype, const std::string& value) {
  return "k_f_to_f8(" + value + ", " + float8_args(dtype) + ")";
}

std::string prelude(Dialect dialect, bool with_i64, bool with_float8) {
  std::string text;
  if (dialect == Dialect::kCuda || dialect == Dialect::kCpu) {
    // CUDA: one prelude per program (all kernels of a graph). cpu: every kernel is its own
    // translation unit, linked with the others into one shared object, with the helpers internal
    // to it (an unnamed namespace), where unused ones cost nothing.
    text = dialect == Dialect::kCuda ? std::string(kCudaMacros) : std::string(kCpuMacros) + kPortableFmax;
    text += kCommon;
    if (with_i64) text += kCommonI64;
    if (with_float8) text += kFloat8;
    return dialect == Dialect::kCpu ? "namespace {\n" + text + "}  // namespace\n" : text;
  }
  text = dialect == Dialect::kGlsl ? kGlslMacros : kOpenClMacros;
  if (with_i64) text += dialect == Dialect::kGlsl ? kGlslI64 : kOpenClI64;
  text += kPortableFmax;
  text += kCommon;
  if (with_i64) text += kCommonI64;
  if (with_float8) text += kFloat8;
  return text;
}

}  // namespace kiln::codegen::cfam
