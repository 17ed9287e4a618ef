// TensorProto decoding: dtype mapping, raw_data and typed fields, external data files, and the
// .pb reader used by the conformance runner. Every size read from the file is checked against
// the bytes actually present before it is used.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "frontend/onnx/onnx_importer.h"
#include "frontend/onnx/onnx_internal.h"
#include "support/file_io.h"
#include "support/half.h"

namespace kiln::onnx_import {
namespace {

using ir::DType;

// Refuses tensors larger than this (a corrupt dims list must not make us allocate terabytes).
constexpr int64_t kMaxTensorBytes = int64_t(1) << 34;

Result<std::string> read_external(const onnx::TensorProto& proto, const std::string& base_dir,
                                  size_t want_bytes) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      char* end = nullptr;
      const long long v = std::strtoll(entry.value().c_str(), &end, 10);
      if (entry.value().empty() || *end != '\0' || v < 0) {
        return corrupt("tensor '" + proto.name() + "': bad external data " + entry.key() + " '" +
                       entry.value() + "'");
      }
      (entry.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) return corrupt("tensor '" + proto.name() + "': external data without a location");
  if (base_dir.empty()) {
    return unsupported("tensor '" + proto.name() + "': external data needs the model's directory");
  }
  const std::filesystem::path rel(location);
  if (rel.is_absolute()) {
    return corrupt("tensor '" + proto.name() + "': external data location '" + location + "' is absolute");
  }
  for (const auto& part : rel) {
    if (part == "..") {
      return corrupt("tensor '" + proto.name() + "': external data location '" + location +
                     "' leaves the model's directory");
    }
  }
  const std::filesystem::path path = std::filesystem::path(base_dir) / rel;
  // Checked first: opening a FIFO here would block forever.
  KILN_RETURN_IF_ERROR(check_regular_file(
      path.string(), "tensor '" + proto.name() + "': its external data file '" + path.string() + "'"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("tensor '" + proto.name() + "': cannot open external data file '" + path.string() + "'");
  in.seekg(0, std::ios::end);
  const int64_t file_size = int64_t(in.tellg());
  if (length < 0) length = file_size - offset;
  if (offset > file_size || length > file_size - offset) {
    return corrupt("tensor '" + proto.name() + "': external data [" + std::to_string(offset) + ", +" +
                   std::to_string(length) + ") lies outside '" + path.string() + "' (" +
                   std::to_string(file_size) + " bytes)");
  }
  if (size_t(length) != want_bytes) {
    return corrupt("tensor '" + proto.name() + "': external data holds " + std::to_string(length) +
                   " bytes, the tensor needs " + std::to_string(want_bytes));
  }
  std::string bytes(size_t(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) return corrupt("tensor '" + proto.name() + "': cannot read external data from '" + path.string() + "'");
  return bytes;
}

template <class Field>
Status check_count(const onnx::TensorProto& proto, const Field& field, int64_t numel) {
  if (int64_t(field.size()) != numel) {
    return corrupt("tensor '" + proto.name() + "' holds " + std::to_string(field.size()) +
                   " values, its shape needs " + std::to_string(numel));
  }
  return Status::ok();
}

// TensorProto data types newer than the onnx 1.12 protobuf headers Kiln builds against (the
// field is a plain int32, so models carrying them still parse).
enum NewerOnnxType : int32_t {
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUint2 = 25,
  kInt2 = 26,
};

}  // namespace

std::optional<DType> dtype_from_onnx(int32_t t) {
  switch (t) {
    case onnx::TensorProto::DOUBLE: return DType::kF64;
    case onnx::TensorProto::FLOAT: return DType::kF32;
    case onnx::TensorProto::FLOAT16: return DType::kF16;
    case onnx::TensorProto::BFLOAT16: return DType::kBF16;
    case onnx::TensorProto::INT64: return DType::kI64;
    case onnx::TensorProto::INT32: return DType::kI32;
    case onnx::TensorProto::INT16: return DType::kI16;
    case onnx::TensorProto::INT8: return DType::kI8;
    case onnx::TensorProto::UINT32: return DType::kU32;
    case onnx::TensorProto::UINT16: return DType::kU16;
    case onnx::TensorProto::UINT8: return DType::kU8;
    case onnx::TensorProto::BOOL: return DType::kBool;
    case kFloat8E4M3FN: return DType::kF8E4M3FN;
    case kFloat8E4M3FNUZ: return DType::kF8E4M3FNUZ;
    case kFloat8E5M2: return DType::kF8E5M2;
    case kFloat8E5M2FNUZ: return DType::kF8E5M2FNUZ;
    default: return std::nullopt;
  }
}

const char* onnx_type_name(int32_t t) {
  switch (t) {
    case kFloat8E4M3FN: return "FLOAT8E4M3FN";
    case kFloat8E4M3FNUZ: return "FLOAT8E4M3FNUZ";
    case kFloat8E5M2: return "FLOAT8E5M2";
    case kFloat8E5M2FNUZ: return "FLOAT8E5M2FNUZ";
    case kUint4: return "UINT4";
    case kInt4: return "INT4";
    case kFloat4E2M1: return "FLOAT4E2M1";
    case kFloat8E8M0: return "FLOAT8E8M0";
    case kUint2: return "UINT2";
    case kInt2: return "INT2";
    default: break;
  }
  if (onnx::TensorProto::DataType_IsValid(t)) {
    return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t)).c_str();
  }
  return "an unknown type";
}

namespace {

// The proto's dims, checked: none negative, the element count and byte size within limits.
Result<std::vector<int64_t>> checked_shape(const onnx::TensorProto& proto, DType dtype) {
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0) return corrupt("tensor '" + proto.name() + "' has a negative dim " + std::to_string(d));
    if (__builtin_mul_overflow(numel, d, &numel) || numel > kMaxTensorBytes) {
      return corrupt("tensor '" + proto.name() + "' is too large");
    }
    shape.push_back(d);
  }
  if (numel * int64_t(ir::dtype_size(dtype)) > kMaxTensorBytes) return corrupt("tensor '" + proto.name() + "' is too large");
  return shape;
}

// The byte size of a checked shape.
size_t byte_size(const std::vector<int64_t>& shape, DType dtype) {
  size_t n = ir::dtype_size(dtype);
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

}  // namespace

Result<ir::Tensor> take_tensor_from_proto(onnx::TensorProto& proto, const std::string& base_dir) {
  const std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype || proto.data_location() == onnx::TensorProto::EXTERNAL || !proto.has_raw_data() ||
      proto.raw_data().empty())
    return tensor_from_proto(proto, base_dir);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, checked_shape(proto, *dtype));
  if (proto.raw_data().size() != byte_size(shape, *dtype))
    return tensor_from_proto(proto, base_dir);  // its error
  // The tensor views the released string (heap storage: aligned for every dtype).
  std::shared_ptr<const std::string> bytes(proto.release_raw_data());
  const std::byte* data = reinterpret_cast<const std::byte*>(bytes->data());
  return ir::Tensor::view(*dtype, std::move(shape), data, std::move(bytes));
}

Result<ir::Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir) {
  const std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype) {
    return unsupported("tensor '" + proto.name() + "' has element type " + onnx_type_name(proto.data_type()) +
                       ", which Kiln does not support");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, checked_shape(proto, *dtype));
  const size_t want_bytes = byte_size(shape, *dtype);
  const int64_t numel = int64_t(want_bytes / ir::dtype_size(*dtype));

  std::string external;
  const std::string* raw = nullptr;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    KILN_ASSIGN_OR_RETURN(external, read_external(proto, base_dir, want_bytes));
    raw = &external;
  } else if (proto.has_raw_data()) {
    raw = &proto.raw_data();
  }
  if (raw != nullptr) {
    if (raw->size() != want_bytes) {
      return corrupt("tensor '" + proto.name() + "' has " + std::to_string(raw->size()) +
                     " bytes of data, its shape needs " + std::to_string(want_bytes));
    }
    // ONNX raw data is little-endian, as is every host Kiln runs on.
    return ir::Tensor::from_bytes(*dtype, shape, std::as_bytes(std::span(raw->data(), raw->size())));
  }
  // Check the typed field's length before allocating: a corrupt dims list must not allocate.
  switch (*dtype) {
    case DType::kF32: KILN_RETURN_IF_ERROR(check_count(proto, proto.float_data(), numel)); break;
    case DType::kI64: KILN_RETURN_IF_ERROR(check_count(proto, proto.int64_data(), numel)); break;
    case DType::kU32: KILN_RETURN_IF_ERROR(check_count(proto, proto.uint64_data(), numel)); break;
    case DType::kF64: KILN_RETURN_IF_ERROR(check_count(proto, proto.double_data(), numel)); break;
    default: KILN_RETURN_IF_ERROR(check_count(proto, proto.int32_data(), numel)); break;
  }
  KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(*dtype, shape));
  switch (*dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < numel; ++i) t.mutable_data_as<float>()[i] = proto.float_data(int(i));
      break;
    case DType::kI64:
      for (int64_t i = 0; i < numel; ++i) t.mutable_data_as<int64_t>()[i] = proto.int64_data(int(i));
      break;
    case DType::kF16: case DType::kBF16: {
      // int32_data holds the 16-bit patterns.
      auto* out = t.mutable_data_as<uint16_t>();
      for (int64_t i = 0; i < numel; ++i) out[i] = uint16_t(proto.int32_data(int(i)));
      break;
    }
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ: {
      // int32_data holds the 8-bit patterns.
      auto* out = t.mutable_data_as<uint8_t>();
      for (int64_t i = 0; i < numel; ++i) out[i] = uint8_t(proto.int32_data(int(i)));
      break;
    }
    case DType::kF64:
      for (int64_t i = 0; i < numel; ++i) t.mutable_data_as<double>()[i] = proto.double_data(int(i));
      break;
    case DType::kU32:  // ONNX keeps uint32 values in uint64_data
      for (int64_t i = 0; i < numel; ++i) t.mutable_data_as<uint32_t>()[i] = uint32_t(proto.uint64_data(int(i)));
      break;
    case DType::kI32: case DType::kI16: case DType::kI8: case DType::kU16: case DType::kU8: case DType::kBool:
      for (int64_t i = 0; i < numel; ++i) t.set_element_from_double(i, double(proto.int32_data(int(i))));
      break;
  }
  return t;
}

Result<ir::Tensor> parse_tensor_proto(std::span<const std::byte> bytes, const std::string& what) {
  if (bytes.size() > size_t(std::numeric_limits<int>::max())) return corrupt(what + ": file too large");
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), int(bytes.size()))) {
    return corrupt(what + ": not a valid ONNX TensorProto (malformed or truncated)");
  }
  return tensor_from_proto(proto, "");
}

Result<ir::Tensor> read_tensor_proto_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::byte> data, read_regular_file(path));
  return parse_tensor_proto(data, path);
}

}  // namespace kiln::onnx_import
