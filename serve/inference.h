// The protocol-neutral inference types of kiln-serve: what the HTTP and gRPC frontends turn a
// request into and what they turn back into a response (KServe v2 / Open Inference Protocol).
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime.h"
#include "support/status.h"

namespace kiln::serve {

// The protocol's tensor element types that Kiln has (the KServe v2 names are BOOL, UINT8, ...).
enum class DataType : uint8_t { kBool, kUint8, kInt8, kInt32, kInt64, kFp16, kBf16, kFp32, kInt16, kUint16, kUint32, kFp64 };

// "FP32", as the protocol spells it.
std::string_view datatype_name(DataType type);
// The protocol name ("FP32") to a type; nullopt for names Kiln has no type for ("UINT64", "BYTES").
std::optional<DataType> datatype_from_name(std::string_view name);
// "BOOL, UINT8, ..., FP32": every type a request may use, for messages.
std::string datatype_names();
// "TYPE_FP32", as Triton's model configuration spells it (inference::DataType's names).
std::string_view datatype_config_name(DataType type);
size_t datatype_size(DataType type);
// Whether the protocol has a datatype for a Kiln dtype (not for the 8-bit floats); a model with
// a tensor of one it has not is refused at load.
bool has_datatype(kiln_dtype dtype);
DataType datatype_from_kiln(kiln_dtype dtype);
kiln_dtype datatype_to_kiln(DataType type);

// Element count of a shape; nullopt when a dimension is negative or the count overflows.
std::optional<int64_t> element_count(const std::vector<int64_t>& shape);
// "[1, 3, 224]"
std::string shape_string(const std::vector<int64_t>& shape);

// One tensor of a request or response: row-major, little-endian bytes.
struct Tensor {
  std::string name;
  DataType datatype = DataType::kFp32;
  std::vector<int64_t> shape;
  std::string data;  // element_count(shape) * datatype_size(datatype) bytes
};

struct InferRequest {
  std::string model_name;
  std::string model_version;  // "" = the newest ready version
  std::string id;             // echoed in the response
  std::vector<Tensor> inputs;
  std::vector<std::string> outputs;  // the outputs wanted; empty = all of them
  std::string protocol;              // "http" or "grpc": labels the metrics of refused requests
};

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<Tensor> outputs;  // in the order asked for (or the model's order)
};

// Called exactly once with the response or the error, from a model's worker thread (or from the
// caller's thread when the request is refused before it is queued). ErrorCode maps to the
// protocols' codes: kInvalidArgument 400 / INVALID_ARGUMENT, kNotFound 404 / NOT_FOUND,
// kUnavailable 503 / UNAVAILABLE (queue full, shutting down, model not ready), anything else
// 500 / INTERNAL.
using InferCallback = std::function<void(Result<InferResponse>)>;

// One input or output of a model as its metadata shows it: shape has -1 for a symbolic dimension.
struct TensorSpec {
  std::string name;
  DataType datatype = DataType::kFp32;
  std::vector<int64_t> shape;
};

}  // namespace kiln::serve
