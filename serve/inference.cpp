#include "serve/inference.h"

#include <limits>

namespace kiln::serve {

namespace {

struct TypeRow {
  DataType type;
  std::string_view name;
  std::string_view config_name;
  kiln_dtype kiln;
};

// One row per type: the protocol's name, Triton's config name and Kiln's dtype.
constexpr TypeRow kTypes[] = {
    {DataType::kBool, "BOOL", "TYPE_BOOL", KILN_DTYPE_BOOL},
    {DataType::kUint8, "UINT8", "TYPE_UINT8", KILN_DTYPE_U8},
    {DataType::kInt8, "INT8", "TYPE_INT8", KILN_DTYPE_I8},
    {DataType::kInt32, "INT32", "TYPE_INT32", KILN_DTYPE_I32},
    {DataType::kInt64, "INT64", "TYPE_INT64", KILN_DTYPE_I64},
    {DataType::kFp16, "FP16", "TYPE_FP16", KILN_DTYPE_F16},
    {DataType::kBf16, "BF16", "TYPE_BF16", KILN_DTYPE_BF16},
    {DataType::kFp32, "FP32", "TYPE_FP32", KILN_DTYPE_F32},
    {DataType::kInt16, "INT16", "TYPE_INT16", KILN_DTYPE_I16},
    {DataType::kUint16, "UINT16", "TYPE_UINT16", KILN_DTYPE_U16},
    {DataType::kUint32, "UINT32", "TYPE_UINT32", KILN_DTYPE_U32},
    {DataType::kFp64, "FP64", "TYPE_FP64", KILN_DTYPE_F64},
};

const TypeRow& row(DataType type) { return kTypes[static_cast<size_t>(type)]; }

}  // namespace

std::string_view datatype_name(DataType type) { return row(type).name; }
std::string_view datatype_config_name(DataType type) { return row(type).config_name; }
size_t datatype_size(DataType type) { return kiln_dtype_size(row(type).kiln); }
kiln_dtype datatype_to_kiln(DataType type) { return row(type).kiln; }

std::optional<DataType> datatype_from_name(std::string_view name) {
  for (const TypeRow& r : kTypes)
    if (r.name == name) return r.type;
  return std::nullopt;
}

std::string datatype_names() {
  std::string names;
  for (const TypeRow& r : kTypes) names += (names.empty() ? "" : ", ") + std::string(r.name);
  return names;
}

bool has_datatype(kiln_dtype dtype) {
  for (const TypeRow& r : kTypes)
    if (r.kiln == dtype) return true;
  return false;
}

DataType datatype_from_kiln(kiln_dtype dtype) {
  for (const TypeRow& r : kTypes)
    if (r.kiln == dtype) return r.type;
  return DataType::kFp32;  // unreachable: Model::load refuses a dtype without a row (has_datatype)
}

std::optional<int64_t> element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    count *= d;
  }
  return count;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace kiln::serve
