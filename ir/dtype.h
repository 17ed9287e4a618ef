// Element types of Kiln tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "support/float8.h"

namespace kiln::ir {

// Values are appended, never reordered: artifact/kiln.fbs mirrors them.
enum class DType : uint8_t {
  kF32, kF16, kBF16, kI64, kI32, kI8, kU8, kBool, kI16, kU16, kU32, kF64,
  // ONNX's 8-bit floats (support/float8.h): storage types, computed on in f32.
  kF8E4M3FN, kF8E4M3FNUZ, kF8E5M2, kF8E5M2FNUZ,
};

inline constexpr DType kAllDTypes[] = {
    DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kI16, DType::kI8,
    DType::kU32, DType::kU16, DType::kU8, DType::kBool, DType::kF8E4M3FN, DType::kF8E4M3FNUZ, DType::kF8E5M2,
    DType::kF8E5M2FNUZ,
};

// The spelling used by the .graph format: "f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8",
// "u32", "u16", "u8", "bool", and the 8-bit floats "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz".
std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);

// Bytes per element (bool is stored as one byte, 0 or 1).
size_t dtype_size(DType dtype);

// The lowest and highest value of an integer dtype (bool: 0 and 1; other dtypes: {0, 0}).
std::pair<int64_t, int64_t> integer_range(DType dtype);

// The format of an 8-bit float dtype; nullopt for every other dtype.
std::optional<Float8Format> float8_format(DType dtype);
inline bool is_float8(DType d) { return float8_format(d).has_value(); }

// f64 is stored as IEEE double; kernels compute every float dtype in f32 registers.
inline bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF64 || is_float8(d);
}
inline bool is_signed_integer(DType d) {
  return d == DType::kI64 || d == DType::kI32 || d == DType::kI16 || d == DType::kI8;
}
inline bool is_unsigned_integer(DType d) { return d == DType::kU32 || d == DType::kU16 || d == DType::kU8; }
inline bool is_integer(DType d) { return is_signed_integer(d) || is_unsigned_integer(d); }
inline bool is_numeric(DType d) { return d != DType::kBool; }

}  // namespace kiln::ir
