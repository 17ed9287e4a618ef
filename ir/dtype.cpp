#include "ir/dtype.h"

#include <limits>

namespace kiln::ir {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
    case DType::kI16: return "i16";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kF64: return "f64";
    case DType::kF8E4M3FN: return "f8e4m3fn";
    case DType::kF8E4M3FNUZ: return "f8e4m3fnuz";
    case DType::kF8E5M2: return "f8e5m2";
    case DType::kF8E5M2FNUZ: return "f8e5m2fnuz";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI64: return 8;
    case DType::kI32: return 4;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
    case DType::kBool: return 1;
    case DType::kI16: return 2;
    case DType::kU16: return 2;
    case DType::kU32: return 4;
    case DType::kF64: return 8;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ: return 1;
  }
  return 0;
}

std::pair<int64_t, int64_t> integer_range(DType dtype) {
  switch (dtype) {
    case DType::kI64: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    case DType::kI32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::kI16: return {std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()};
    case DType::kI8: return {std::numeric_limits<int8_t>::min(), std::numeric_limits<int8_t>::max()};
    case DType::kU32: return {0, std::numeric_limits<uint32_t>::max()};
    case DType::kU16: return {0, std::numeric_limits<uint16_t>::max()};
    case DType::kU8: return {0, std::numeric_limits<uint8_t>::max()};
    case DType::kBool: return {0, 1};
    case DType::kF64: case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kF8E4M3FN:
    case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ: break;
  }
  return {0, 0};
}

std::optional<Float8Format> float8_format(DType dtype) {
  switch (dtype) {
    case DType::kF8E4M3FN: return kFloat8E4M3FN;
    case DType::kF8E4M3FNUZ: return kFloat8E4M3FNUZ;
    case DType::kF8E5M2: return kFloat8E5M2;
    case DType::kF8E5M2FNUZ: return kFloat8E5M2FNUZ;
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kI64: case DType::kI32: case DType::kI8:
    case DType::kU8: case DType::kBool: case DType::kI16: case DType::kU16: case DType::kU32: case DType::kF64:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace kiln::ir
