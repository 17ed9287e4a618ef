#include "frontend/safetensors.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "ir/shape.h"
#include "support/file_io.h"

namespace kiln::frontend {
namespace {

using json = nlohmann::json;

// The safetensors library refuses headers above 100 MB; so do we (it also bounds the JSON work).
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

struct DTypeName {
  ir::DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypeNames[] = {
    {ir::DType::kF64, "F64"}, {ir::DType::kF32, "F32"}, {ir::DType::kF16, "F16"}, {ir::DType::kBF16, "BF16"},
    {ir::DType::kI64, "I64"}, {ir::DType::kI32, "I32"}, {ir::DType::kI16, "I16"},
    {ir::DType::kI8, "I8"},   {ir::DType::kU32, "U32"}, {ir::DType::kU16, "U16"},
    {ir::DType::kU8, "U8"},   {ir::DType::kBool, "BOOL"},
    // safetensors names two 8-bit floats, PyTorch's float8_e4m3fn and float8_e5m2; the fnuz
    // variants have no name there.
    {ir::DType::kF8E4M3FN, "F8_E4M3"}, {ir::DType::kF8E5M2, "F8_E5M2"},
};

Status corrupt_file(const std::string& name, const std::string& what) {
  return corrupt("'" + name + "' is not a valid safetensors file: " + what);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Parses one header entry; `data_size` bounds its offsets.
Result<SafetensorsEntry> parse_entry(const std::string& file, const std::string& key,
                                     const json& value, uint64_t data_size) {
  auto bad = [&](const std::string& what) { return corrupt_file(file, "tensor '" + key + "' " + what); };
  if (!value.is_object()) return bad("is not described by a JSON object");
  auto dtype_it = value.find("dtype");
  auto shape_it = value.find("shape");
  auto offsets_it = value.find("data_offsets");
  if (dtype_it == value.end() || !dtype_it->is_string()) return bad("has no \"dtype\" string");
  if (shape_it == value.end() || !shape_it->is_array()) return bad("has no \"shape\" array");
  if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return bad("has no \"data_offsets\" pair");
  }
  SafetensorsEntry entry;
  entry.dtype_name = dtype_it->get<std::string>();
  entry.dtype = parse_safetensors_dtype(entry.dtype_name);

  uint64_t count = 1;
  for (const json& dim : *shape_it) {
    if (!dim.is_number_unsigned()) return bad("has a shape entry that is not a non-negative integer");
    uint64_t d = dim.get<uint64_t>();
    if (d > uint64_t(std::numeric_limits<int64_t>::max()) ||
        (d != 0 && count > uint64_t(std::numeric_limits<int64_t>::max()) / d)) {
      return bad("has a shape whose size overflows 64 bits");
    }
    count *= d;
    entry.shape.push_back(int64_t(d));
  }
  for (const json& off : *offsets_it) {
    if (!off.is_number_unsigned()) return bad("has data_offsets that are not non-negative integers");
  }
  entry.begin = (*offsets_it)[0].get<uint64_t>();
  entry.end = (*offsets_it)[1].get<uint64_t>();
  if (entry.begin > entry.end) return bad("has data_offsets that end before they begin");
  if (entry.end > data_size) {
    return bad("has data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
               "] outside the data section (" + std::to_string(data_size) + " bytes)");
  }
  if (entry.dtype) {
    uint64_t elem = ir::dtype_size(*entry.dtype);
    if (count > std::numeric_limits<uint64_t>::max() / elem || count * elem != entry.end - entry.begin) {
      return bad("holds " + std::to_string(entry.end - entry.begin) + " bytes, but " +
                 entry.dtype_name + shape_string(entry.shape) + " needs " +
                 (count > std::numeric_limits<uint64_t>::max() / elem ? std::string("more")
                                                                      : std::to_string(count * elem)));
    }
  }
  return entry;
}

}  // namespace

std::string SafetensorsEntry::type_string() const {
  std::string s = dtype ? std::string(ir::dtype_name(*dtype)) : dtype_name;
  return s + shape_string(shape);
}

std::string_view safetensors_dtype_name(ir::DType dtype) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

std::optional<ir::DType> parse_safetensors_dtype(std::string_view name) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path, const std::string& display_name) {
  const std::string& name = display_name.empty() ? path : display_name;
  KILN_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, read_regular_file(path, "safetensors file '" + name + "'"));
  return from_bytes(std::move(bytes), name);
}

Result<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<std::byte> bytes, const std::string& name) {
  if (bytes.size() < 8) {
    return corrupt_file(name, "it is " + std::to_string(bytes.size()) +
                                  " bytes long, too short for the 8-byte header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | uint64_t(bytes[size_t(i)]);
  uint64_t available = bytes.size() - 8;
  if (header_len > available) {
    return corrupt_file(name, "the header length " + std::to_string(header_len) +
                                  " exceeds the file size (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (header_len > kMaxHeaderBytes) {
    return corrupt_file(name, "the header length " + std::to_string(header_len) + " exceeds 100 MB");
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  json header;
  try {
    header = json::parse(header_begin, header_begin + header_len, nullptr, /*allow_exceptions=*/false);
  } catch (...) {
    header = json::value_t::discarded;
  }
  if (header.is_discarded()) return corrupt_file(name, "the header is not valid JSON");
  if (!header.is_object()) return corrupt_file(name, "the header is not a JSON object");

  SafetensorsFile file;
  file.name_ = name;
  file.data_start_ = size_t(8 + header_len);
  uint64_t data_size = available - header_len;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        if (!it.value().is_object()) return corrupt_file(name, "__metadata__ is not an object");
        for (auto m = it.value().begin(); m != it.value().end(); ++m) {
          if (!m.value().is_string()) return corrupt_file(name, "__metadata__ values must be strings");
          file.metadata_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      KILN_ASSIGN_OR_RETURN(SafetensorsEntry entry, parse_entry(name, it.key(), it.value(), data_size));
      file.entries_.emplace(it.key(), std::move(entry));
    }
  } catch (...) {
    // Every access above is type-checked first; this only guards library surprises.
    return corrupt_file(name, "the header has an unexpected structure");
  }
  file.bytes_ = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  return file;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

Result<ir::Tensor> SafetensorsFile::load(const std::string& name) const {
  const SafetensorsEntry* entry = find(name);
  if (entry == nullptr) return not_found("no tensor named '" + name + "' in '" + name_ + "'");
  if (!entry->dtype) {
    std::string known;
    for (const DTypeName& d : kDTypeNames) known += (known.empty() ? "" : ", ") + std::string(d.name);
    return unsupported("tensor '" + name + "' in '" + name_ + "' has dtype " + entry->dtype_name +
                       ", which Kiln does not support (" + known + ")");
  }
  std::span<const std::byte> data(bytes_->data() + data_start_ + entry->begin, entry->end - entry->begin);
  KILN_ASSIGN_OR_RETURN(ir::Tensor tensor, ir::Tensor::from_bytes(*entry->dtype, entry->shape, data));
  if (*entry->dtype == ir::DType::kBool) {
    // Bool must be 0 or 1 everywhere in Kiln; normalize foreign encodings of true.
    std::byte* p = tensor.mutable_data();
    for (size_t i = 0; i < tensor.size_bytes(); ++i) p[i] = p[i] != std::byte{0} ? std::byte{1} : std::byte{0};
  }
  return tensor;
}

Result<std::map<std::string, ir::Tensor>> read_safetensors(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  std::map<std::string, ir::Tensor> tensors;
  for (const auto& [name, entry] : file.entries()) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, file.load(name));
    tensors.emplace(name, std::move(t));
  }
  return tensors;
}

std::vector<std::byte> encode_safetensors(const std::map<std::string, ir::Tensor>& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    uint64_t size = tensor.size_bytes();
    header[name] = {{"dtype", std::string(safetensors_dtype_name(tensor.dtype()))},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  while ((8 + text.size()) % 8 != 0) text += ' ';  // keep the data section 8-byte aligned
  std::vector<std::byte> out(8 + text.size() + offset);
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = std::byte((len >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t pos = 8 + text.size();
  for (const auto& [name, tensor] : tensors) {
    if (tensor.size_bytes() > 0) std::memcpy(out.data() + pos, tensor.data(), tensor.size_bytes());
    pos += tensor.size_bytes();
  }
  return out;
}

Status write_safetensors(const std::string& path, const std::map<std::string, ir::Tensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  for (const auto& [name, tensor] : tensors) {
    if (!parse_safetensors_dtype(safetensors_dtype_name(tensor.dtype()))) {
      return unsupported("cannot write tensor '" + name + "' to '" + path + "': safetensors has no " +
                         std::string(ir::dtype_name(tensor.dtype())) + " dtype");
    }
  }
  std::vector<std::byte> bytes = encode_safetensors(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return not_found("cannot create '" + path + "': " + std::strerror(errno));
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) return Status(ErrorCode::kInvalidArgument, "cannot write '" + path + "'");
  return Status::ok();
}

}  // namespace kiln::frontend
