// Element types of Kiln tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln::ir {

enum class DType : uint8_t { kF32, kF16, kBF16, kI64, kI32, kI8, kU8, kBool };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64,
                                       DType::kI32, DType::kI8,  DType::kU8,   DType::kBool};

// The spelling used by the .graph format: "f32", "f16", "bf16", "i64", "i32", "i8", "u8", "bool".
std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);

// Bytes per element (bool is stored as one byte, 0 or 1).
size_t dtype_size(DType dtype);

inline bool is_float(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }
inline bool is_integer(DType d) {
  return d == DType::kI64 || d == DType::kI32 || d == DType::kI8 || d == DType::kU8;
}
inline bool is_signed_integer(DType d) { return d == DType::kI64 || d == DType::kI32 || d == DType::kI8; }
inline bool is_numeric(DType d) { return d != DType::kBool; }

}  // namespace kiln::ir
