#include "serve/http_frontend.h"

#include <google/protobuf/util/json_util.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/log.h"
#include "serve/metrics.h"
#include "serve/server.h"
#include "support/half.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
using Handler = httplib::Server::Handler;

constexpr const char* kJsonType = "application/json";
constexpr const char* kBinaryType = "application/octet-stream";
constexpr const char* kHeaderLength = "Inference-Header-Content-Length";

// ---------------------------------------------------------------------------------------------
// Answers

// Names taken from the URL may be any bytes; dump() would throw on invalid UTF-8.
std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), kJsonType);
}

void reply_error(httplib::Response& res, int status, const std::string& message) {
  reply_json(res, status, {{"error", message}});
}

void reply_status(httplib::Response& res, const Status& status) {
  reply_error(res, http_status_for(status.code()), status.message());
}

// A request refused before it reaches a model counts as a protocol error.
void refuse(Metrics& metrics, httplib::Response& res, const Status& status) {
  metrics.protocol_error("http");
  reply_status(res, status);
}

// ---------------------------------------------------------------------------------------------
// Reading the request's JSON, with errors that name the field

// The body as a JSON object; an empty body is {} when `empty_ok` (optional bodies).
Result<json> parse_object(std::string_view text, bool empty_ok) {
  if (text.empty() && empty_ok) return json::object();
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error& e) {
    return invalid_argument(std::string("malformed JSON: ") + e.what());
  }
  if (!value.is_object()) return invalid_argument("the request body must be a JSON object");
  return value;
}

const json* find_field(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

Result<std::string> required_string(const json& object, const char* key, const std::string& where) {
  const json* value = find_field(object, key);
  if (!value) return invalid_argument(where + ": \"" + key + "\" is missing");
  if (!value->is_string()) return invalid_argument(where + ": \"" + key + "\" must be a string");
  return value->get<std::string>();
}

Result<bool> optional_bool(const json& object, const char* key, bool fallback, const std::string& where) {
  const json* value = find_field(object, key);
  if (!value) return fallback;
  if (!value->is_boolean()) return invalid_argument(where + ": \"" + key + "\" must be true or false");
  return value->get<bool>();
}

// The object under `key`, or an empty one when it is absent.
Result<json> optional_object(const json& object, const char* key, const std::string& where) {
  const json* value = find_field(object, key);
  if (!value) return json::object();
  if (!value->is_object()) return invalid_argument(where + ": \"" + key + "\" must be an object");
  return *value;
}

// A JSON number that is a non-negative integer (nlohmann reads 3 as unsigned, -3 as signed).
std::optional<uint64_t> as_count(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<uint64_t>();
  return std::nullopt;
}

Result<std::vector<int64_t>> parse_shape(const json& object, const std::string& where) {
  const json* value = find_field(object, "shape");
  if (!value) return invalid_argument(where + ": \"shape\" is missing");
  std::vector<int64_t> shape;
  bool ok = value->is_array();
  for (size_t i = 0; ok && i < value->size(); ++i) {
    std::optional<uint64_t> dim = as_count((*value)[i]);
    ok = dim && *dim <= uint64_t(std::numeric_limits<int64_t>::max());
    if (ok) shape.push_back(int64_t(*dim));
  }
  if (!ok) return invalid_argument(where + ": \"shape\" must be an array of non-negative integers");
  return shape;
}

Result<DataType> parse_datatype(const json& object, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(std::string name, required_string(object, "datatype", where));
  if (std::optional<DataType> type = datatype_from_name(name)) return *type;
  return invalid_argument(where + ": datatype \"" + name + "\" is not supported (Kiln has " + datatype_names() +
                          ")");
}

// Triton's parameters that this server does not implement: refused rather than ignored, since
// ignoring them would answer something other than what was asked.
Status refuse_unsupported(const json& parameters, std::initializer_list<const char*> keys,
                          const std::string& where) {
  for (const char* key : keys)
    if (parameters.contains(key)) return unsupported(where + ": parameter \"" + key + "\" is not supported");
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Tensor data: JSON elements to bytes and back

template <class T>
void append_bytes(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <class T>
T read_element(const std::string& data, size_t index) {
  T value;
  std::memcpy(&value, data.data() + index * sizeof(T), sizeof(T));
  return value;
}

// A JSON number as the integer type T: exact (3.0 is 3, 3.5 is not) and in T's range.
template <class T>
std::optional<T> integral_value(const json& value) {
  constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    return u <= uint64_t(hi) ? std::optional<T>(T(u)) : std::nullopt;
  }
  if (value.is_number_integer()) {
    int64_t i = value.get<int64_t>();
    return i >= int64_t(lo) && (i < 0 || uint64_t(i) <= uint64_t(hi)) ? std::optional<T>(T(i)) : std::nullopt;
  }
  if (value.is_number_float()) {
    double d = value.get<double>();
    // double(hi) + 1 is exact (a power of two) where double(hi) is not (INT64_MAX).
    bool ok = std::trunc(d) == d && d >= double(lo) && d < double(hi) + 1.0;
    return ok ? std::optional<T>(T(d)) : std::nullopt;
  }
  return std::nullopt;
}

template <class T>
bool append_integral(const json& value, std::string& out) {
  std::optional<T> v = integral_value<T>(value);
  if (v) append_bytes(out, *v);
  return v.has_value();
}

// One JSON element as `type`'s little-endian bytes; false when it is not a value of that type.
bool append_element(const json& value, DataType type, std::string& out) {
  switch (type) {
    case DataType::kBool:
      if (!value.is_boolean()) return false;
      append_bytes(out, uint8_t(value.get<bool>()));
      return true;
    case DataType::kUint8: return append_integral<uint8_t>(value, out);
    case DataType::kUint16: return append_integral<uint16_t>(value, out);
    case DataType::kUint32: return append_integral<uint32_t>(value, out);
    case DataType::kInt8: return append_integral<int8_t>(value, out);
    case DataType::kInt16: return append_integral<int16_t>(value, out);
    case DataType::kInt32: return append_integral<int32_t>(value, out);
    case DataType::kInt64: return append_integral<int64_t>(value, out);
    case DataType::kFp64:
      if (!value.is_number()) return false;
      append_bytes(out, value.get<double>());
      return true;
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kFp32: {
      if (!value.is_number()) return false;
      float f = float(value.get<double>());
      if (type == DataType::kFp32) {
        append_bytes(out, f);
      } else {
        append_bytes(out, type == DataType::kFp16 ? f32_to_f16(f) : f32_to_bf16(f));
      }
      return true;
    }
  }
  return false;
}

// Appends the elements of "data" (a scalar, or arrays nested at most `depth` deep, flattened in
// row-major order). The depth bound keeps a hostile nesting from exhausting the stack.
Status append_data(const json& data, DataType type, int depth, const std::string& where, std::string& out) {
  if (!data.is_array()) {
    if (append_element(data, type, out)) return Status::ok();
    size_t index = out.size() / datatype_size(type);
    return invalid_argument(where + ": data element " + std::to_string(index) + " (" + dump(data) +
                            ") is not a valid " + std::string(datatype_name(type)));
  }
  if (depth == 0) return invalid_argument(where + ": \"data\" is nested deeper than the shape");
  for (const json& item : data) KILN_RETURN_IF_ERROR(append_data(item, type, depth - 1, where, out));
  return Status::ok();
}

// A tensor's elements as a flat JSON array (FP16 and BF16 as their float values).
json data_json(const Tensor& tensor) {
  json out = json::array();
  size_t count = tensor.data.size() / datatype_size(tensor.datatype);
  for (size_t i = 0; i < count; ++i) {
    const std::string& d = tensor.data;
    switch (tensor.datatype) {
      case DataType::kBool: out.push_back(read_element<uint8_t>(d, i) != 0); break;
      case DataType::kUint8: out.push_back(read_element<uint8_t>(d, i)); break;
      case DataType::kUint16: out.push_back(read_element<uint16_t>(d, i)); break;
      case DataType::kUint32: out.push_back(read_element<uint32_t>(d, i)); break;
      case DataType::kInt8: out.push_back(read_element<int8_t>(d, i)); break;
      case DataType::kInt16: out.push_back(read_element<int16_t>(d, i)); break;
      case DataType::kInt32: out.push_back(read_element<int32_t>(d, i)); break;
      case DataType::kInt64: out.push_back(read_element<int64_t>(d, i)); break;
      case DataType::kFp16: out.push_back(f16_to_f32(read_element<uint16_t>(d, i))); break;
      case DataType::kBf16: out.push_back(bf16_to_f32(read_element<uint16_t>(d, i))); break;
      case DataType::kFp32: out.push_back(read_element<float>(d, i)); break;
      case DataType::kFp64: out.push_back(read_element<double>(d, i)); break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Inference requests and responses

// An infer request as the protocol gives it: the JSON header and the binary tensor data after it.
struct InferBody {
  json header;
  std::string_view binary;
};

// The binary tensor extension: Inference-Header-Content-Length says how many of the body's bytes
// are JSON; the rest are the inputs' raw bytes.
Result<InferBody> split_infer_body(const httplib::Request& req, std::string_view body) {
  size_t json_length = body.size();
  if (req.has_header(kHeaderLength)) {
    std::string text = req.get_header_value(kHeaderLength);
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), json_length);
    if (error != std::errc() || end != text.data() + text.size() || json_length > body.size())
      return invalid_argument(std::string(kHeaderLength) + " is \"" + text +
                              "\"; it must be a byte count of at most " + std::to_string(body.size()) +
                              " (the body's size)");
  }
  KILN_ASSIGN_OR_RETURN(json header, parse_object(body.substr(0, json_length), false));
  return InferBody{std::move(header), body.substr(json_length)};
}

// One input: its bytes come from "data" or, with parameters.binary_data_size, from the binary
// part of the body at `binary_offset` (advanced past them).
Result<Tensor> parse_input(const json& input, size_t position, std::string_view binary,
                           size_t& binary_offset) {
  std::string where = "inputs[" + std::to_string(position) + "]";
  if (!input.is_object()) return invalid_argument(where + " must be an object");
  Tensor tensor;
  KILN_ASSIGN_OR_RETURN(tensor.name, required_string(input, "name", where));
  where = "input '" + tensor.name + "'";
  KILN_ASSIGN_OR_RETURN(tensor.datatype, parse_datatype(input, where));
  KILN_ASSIGN_OR_RETURN(tensor.shape, parse_shape(input, where));
  KILN_ASSIGN_OR_RETURN(json parameters, optional_object(input, "parameters", where));
  KILN_RETURN_IF_ERROR(refuse_unsupported(parameters, {"shared_memory_region"}, where));

  std::optional<int64_t> count = element_count(tensor.shape);
  size_t element_size = datatype_size(tensor.datatype);
  if (!count || uint64_t(*count) > std::numeric_limits<size_t>::max() / element_size)
    return invalid_argument(where + ": shape " + shape_string(tensor.shape) + " is too large");
  size_t expected = size_t(*count) * element_size;
  std::string shape_text =
      "its shape " + shape_string(tensor.shape) + " of " + std::string(datatype_name(tensor.datatype));

  const json* data = find_field(input, "data");
  if (const json* size_field = find_field(parameters, "binary_data_size")) {
    std::optional<uint64_t> size = as_count(*size_field);
    if (!size) return invalid_argument(where + ": \"binary_data_size\" must be a non-negative integer");
    if (data) return invalid_argument(where + " has both \"data\" and \"binary_data_size\"");
    if (*size != expected)
      return invalid_argument(where + " has " + std::to_string(*size) + " bytes of binary data, " +
                              shape_text + " needs " + std::to_string(expected));
    if (*size > binary.size() - binary_offset)
      return invalid_argument(where + ": binary_data_size " + std::to_string(*size) +
                              " runs past the end of the body's binary data (" +
                              std::to_string(binary.size()) + " bytes)");
    tensor.data.assign(binary.substr(binary_offset, *size));
    binary_offset += *size;
    return tensor;
  }
  if (!data) return invalid_argument(where + " has neither \"data\" nor parameters.binary_data_size");
  tensor.data.reserve(expected);
  int depth = std::max<int>(1, int(tensor.shape.size()));
  KILN_RETURN_IF_ERROR(append_data(*data, tensor.datatype, depth, where, tensor.data));
  if (tensor.data.size() != expected)
    return invalid_argument(where + " has " + std::to_string(tensor.data.size() / element_size) +
                            " data elements, " + shape_text + " needs " + std::to_string(*count));
  return tensor;
}

// What the client asked of the response beyond the request itself: which outputs come as binary.
struct ResponseForm {
  bool binary_by_default = false;
  std::map<std::string, bool> binary;  // outputs[].parameters.binary_data, where given

  bool is_binary(const std::string& output) const {
    auto it = binary.find(output);
    return it == binary.end() ? binary_by_default : it->second;
  }
};

Status parse_outputs(const json& header, InferRequest& request, ResponseForm& form) {
  const json* outputs = find_field(header, "outputs");
  if (!outputs) return Status::ok();
  if (!outputs->is_array()) return invalid_argument("\"outputs\" must be an array");
  for (size_t i = 0; i < outputs->size(); ++i) {
    const json& output = (*outputs)[i];
    std::string where = "outputs[" + std::to_string(i) + "]";
    if (!output.is_object()) return invalid_argument(where + " must be an object");
    KILN_ASSIGN_OR_RETURN(std::string name, required_string(output, "name", where));
    where = "output '" + name + "'";
    KILN_ASSIGN_OR_RETURN(json parameters, optional_object(output, "parameters", where));
    KILN_RETURN_IF_ERROR(refuse_unsupported(parameters, {"classification", "shared_memory_region"}, where));
    if (parameters.contains("binary_data")) {
      KILN_ASSIGN_OR_RETURN(form.binary[name], optional_bool(parameters, "binary_data", false, where));
    }
    request.outputs.push_back(std::move(name));
  }
  return Status::ok();
}

Status parse_infer_request(const httplib::Request& req, std::string_view text, InferRequest& request,
                           ResponseForm& form) {
  KILN_ASSIGN_OR_RETURN(InferBody body, split_infer_body(req, text));
  const json& header = body.header;
  if (const json* id = find_field(header, "id")) {
    if (!id->is_string()) return invalid_argument("\"id\" must be a string");
    request.id = id->get<std::string>();
  }
  KILN_ASSIGN_OR_RETURN(json parameters, optional_object(header, "parameters", "the request"));
  KILN_ASSIGN_OR_RETURN(form.binary_by_default,
                        optional_bool(parameters, "binary_data_output", false, "the request's parameters"));
  const json* inputs = find_field(header, "inputs");
  if (!inputs || !inputs->is_array()) return invalid_argument("\"inputs\" must be an array of input tensors");
  size_t binary_offset = 0;
  for (size_t i = 0; i < inputs->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor tensor, parse_input((*inputs)[i], i, body.binary, binary_offset));
    request.inputs.push_back(std::move(tensor));
  }
  if (binary_offset != body.binary.size())
    return invalid_argument(std::to_string(body.binary.size()) +
                            " bytes of binary data follow the JSON header, " +
                            "but the inputs' binary_data_size add up to " + std::to_string(binary_offset));
  return parse_outputs(header, request, form);
}

// The response's JSON, followed by the binary outputs' bytes when any output is binary.
void reply_inference(httplib::Response& res, const InferResponse& response, const ResponseForm& form) {
  json header = {{"model_name", response.model_name}, {"model_version", response.model_version}};
  if (!response.id.empty()) header["id"] = response.id;
  json outputs = json::array();
  std::string binary;
  bool any_binary = false;
  for (const Tensor& tensor : response.outputs) {
    json output = {
        {"name", tensor.name}, {"datatype", datatype_name(tensor.datatype)}, {"shape", tensor.shape}};
    if (form.is_binary(tensor.name)) {
      output["parameters"] = {{"binary_data_size", tensor.data.size()}};
      binary += tensor.data;
      any_binary = true;
    } else {
      output["data"] = data_json(tensor);
    }
    outputs.push_back(std::move(output));
  }
  header["outputs"] = std::move(outputs);
  std::string text = dump(header);
  res.status = 200;
  if (!any_binary) {
    res.set_content(std::move(text), kJsonType);
    return;
  }
  res.set_header(kHeaderLength, std::to_string(text.size()));
  res.set_content(text + binary, kBinaryType);
}

// ---------------------------------------------------------------------------------------------
// The endpoints

std::string model_name(const httplib::Request& req) { return req.matches[1].str(); }
std::string model_version(const httplib::Request& req) { return req.matches[2].str(); }

// The model a metadata request names; an unknown one is a protocol error (an unready one is not).
Result<std::shared_ptr<Model>> find_model(InferenceServer& server, const httplib::Request& req) {
  Result<std::shared_ptr<Model>> model = server.repository().find(model_name(req), model_version(req));
  if (!model && model.status().code() == ErrorCode::kNotFound) server.metrics().protocol_error("http");
  return model;
}

json tensor_specs_json(const std::vector<TensorSpec>& specs) {
  json out = json::array();
  for (const TensorSpec& spec : specs)
    out.push_back({{"name", spec.name}, {"datatype", datatype_name(spec.datatype)}, {"shape", spec.shape}});
  return out;
}

void model_metadata(InferenceServer& server, const httplib::Request& req, httplib::Response& res) {
  Result<std::shared_ptr<Model>> model = find_model(server, req);
  if (!model) return reply_status(res, model.status());
  const Model& m = **model;
  reply_json(res, 200,
             {{"name", m.name()},
              {"versions", server.repository().ready_versions(m.name())},
              {"platform", "kiln"},
              {"inputs", tensor_specs_json(m.inputs())},
              {"outputs", tensor_specs_json(m.outputs())}});
}

void model_ready(InferenceServer& server, const httplib::Request& req, httplib::Response& res) {
  Result<std::shared_ptr<Model>> model = find_model(server, req);
  if (!model) return reply_status(res, model.status());
  res.status = 200;
}

void int64_fields_to_numbers(json& message, const google::protobuf::Descriptor& descriptor);

// One field's value: a 64-bit integer's string back to a number, a message's fields in turn.
void int64_field_to_number(json& value, const google::protobuf::FieldDescriptor& field) {
  using google::protobuf::FieldDescriptor;
  if (field.message_type()) return int64_fields_to_numbers(value, *field.message_type());
  if (!value.is_string()) return;
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_INT64) value = std::stoll(value.get<std::string>());
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64) value = std::stoull(value.get<std::string>());
}

// Protobuf's JSON mapping writes 64-bit integers as strings ("dims": ["-1", "16"]); Triton turns
// them back into numbers, and clients use its configuration as such.
void int64_fields_to_numbers(json& message, const google::protobuf::Descriptor& descriptor) {
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& field = *descriptor.field(i);
    auto it = message.find(field.name());
    if (it == message.end()) continue;
    if (field.is_map()) {
      for (json& value : *it) int64_field_to_number(value, *field.message_type()->map_value());
    } else if (field.is_repeated()) {
      for (json& value : *it) int64_field_to_number(value, field);
    } else {
      int64_field_to_number(*it, field);
    }
  }
}

// The configuration as protobuf's JSON mapping with the .proto's field names and every field
// shown, 64-bit integers as numbers: what tritonclient's get_model_config returns from Triton.
void model_config(InferenceServer& server, const httplib::Request& req, httplib::Response& res) {
  Result<std::shared_ptr<Model>> model = find_model(server, req);
  if (!model) return reply_status(res, model.status());
  const inference::ModelConfig& config = (*model)->config();
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  auto printed = google::protobuf::util::MessageToJsonString(config, &text, options);
  if (!printed.ok())
    return reply_error(res, 500, "cannot print the model configuration: " + printed.ToString());
  json body = json::parse(text);
  int64_fields_to_numbers(body, *config.GetDescriptor());
  reply_json(res, 200, body);
}

void infer(InferenceServer& server, const httplib::Request& req, std::string_view body,
           httplib::Response& res) {
  InferRequest request;
  request.model_name = model_name(req);
  request.model_version = model_version(req);
  request.protocol = "http";
  ResponseForm form;
  if (Status parsed = parse_infer_request(req, body, request, form); !parsed)
    return refuse(server.metrics(), res, parsed);
  Result<InferResponse> response = server.infer_and_wait(std::move(request));
  if (!response) return reply_status(res, response.status());
  reply_inference(res, *response, form);
}

// Rows omit an empty version, state or reason, as Triton's do.
void repository_index(InferenceServer& server, const httplib::Request&, std::string_view text,
                      httplib::Response& res) {
  Result<json> body = parse_object(text, true);
  if (!body) return refuse(server.metrics(), res, body.status());
  Result<bool> ready_only = optional_bool(*body, "ready", false, "the request");
  if (!ready_only) return refuse(server.metrics(), res, ready_only.status());
  json rows = json::array();
  for (const RepositoryIndexEntry& entry : server.repository().index(*ready_only)) {
    json row = {{"name", entry.name}};
    if (!entry.version.empty()) row["version"] = entry.version;
    if (!entry.state.empty()) row["state"] = entry.state;
    if (!entry.reason.empty()) row["reason"] = entry.reason;
    rows.push_back(std::move(row));
  }
  reply_json(res, 200, rows);
}

// Load parameters that replace the configuration or the files ("config", "file:<path>") are
// refused: the repository loads what is on disk only.
Status check_load_parameters(const json& body) {
  KILN_ASSIGN_OR_RETURN(json parameters, optional_object(body, "parameters", "the request"));
  for (const auto& [key, value] : parameters.items()) {
    if (key == "config" || key.rfind("file:", 0) == 0)
      return unsupported("load parameter \"" + key +
                         "\" is not supported: kiln-serve loads the repository's files");
  }
  return Status::ok();
}

void repository_load(InferenceServer& server, const httplib::Request& req, std::string_view text,
                     httplib::Response& res, bool load) {
  Result<json> body = parse_object(text, true);
  if (!body) return refuse(server.metrics(), res, body.status());
  if (load) {
    if (Status checked = check_load_parameters(*body); !checked) {
      return refuse(server.metrics(), res, Status(ErrorCode::kInvalidArgument, checked.message()));
    }
  }
  Status done =
      load ? server.repository().load(model_name(req)) : server.repository().unload(model_name(req));
  if (!done) return reply_status(res, done);
  res.status = 200;
}

// ---------------------------------------------------------------------------------------------
// Routing

// An endpoint with the request's body (POST bodies are read by post_reading_body, not httplib).
using Endpoint = std::function<void(const httplib::Request&, std::string_view body, httplib::Response&)>;

struct Route {
  std::string method;   // "GET" or "POST"
  std::string pattern;  // a regex over the whole path; groups 1 and 2 are the model and version
  Endpoint endpoint;
};

// Runs an endpoint so that nothing escapes it: httplib would answer a bare 500 without a JSON body.
// JSON type errors not caught by the explicit checks are the client's; anything else is ours.
Endpoint guarded(Metrics& metrics, Endpoint endpoint) {
  return [&metrics, endpoint = std::move(endpoint)](const httplib::Request& req, std::string_view body,
                                                    httplib::Response& res) {
    try {
      endpoint(req, body, res);
    } catch (const json::exception& e) {
      refuse(metrics, res, invalid_argument(std::string("malformed request: ") + e.what()));
    } catch (const std::exception& e) {
      reply_error(res, 500, std::string("internal error: ") + e.what());
    } catch (...) {
      reply_error(res, 500, "internal error");
    }
  };
}

// POST endpoints read their bodies themselves: httplib, given a POST with neither Content-Length
// nor chunked encoding, waits out its read timeout and answers 400, where a POST without a body
// (curl -X POST .../v2/repository/index) is valid. Over the size limit, httplib sets 413.
httplib::Server::HandlerWithContentReader post_reading_body(Endpoint endpoint) {
  return [endpoint = std::move(endpoint)](const httplib::Request& req, httplib::Response& res,
                                          const httplib::ContentReader& reader) {
    std::string body;
    if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
      bool read = reader([&body](const char* data, size_t size) {
        body.append(data, size);
        return true;
      });
      if (!read) {
        if (res.status < 400) res.status = 400;
        return;
      }
    }
    endpoint(req, body, res);
  };
}

std::vector<Route> http_routes(InferenceServer& server) {
  using Get = void (*)(InferenceServer&, const httplib::Request&, httplib::Response&);
  using Post = void (*)(InferenceServer&, const httplib::Request&, std::string_view, httplib::Response&);
  auto get = [&server](Get endpoint) -> Endpoint {
    return [&server, endpoint](const httplib::Request& req, std::string_view, httplib::Response& res) {
      endpoint(server, req, res);
    };
  };
  auto post = [&server](Post endpoint) -> Endpoint {
    return [&server, endpoint](const httplib::Request& req, std::string_view body, httplib::Response& res) {
      endpoint(server, req, body, res);
    };
  };
  const std::string model = "/v2/models/([^/]+)(?:/versions/([0-9]+))?";
  const std::string repository_model = "/v2/repository/models/([^/]+)";
  return {
      {"GET", "/v2", get([](InferenceServer&, const httplib::Request&, httplib::Response& res) {
         reply_json(res, 200,
                    {{"name", InferenceServer::name()},
                     {"version", InferenceServer::version()},
                     {"extensions", InferenceServer::extensions()}});
       })},
      {"GET", "/v2/health/live",
       get([](InferenceServer& server, const httplib::Request&, httplib::Response& res) {
         res.status = server.live() ? 200 : 503;
       })},
      {"GET", "/v2/health/ready",
       get([](InferenceServer& server, const httplib::Request&, httplib::Response& res) {
         res.status = server.ready() ? 200 : 503;
       })},
      {"GET", model, get(model_metadata)},
      {"GET", model + "/ready", get(model_ready)},
      {"GET", model + "/config", get(model_config)},
      {"POST", model + "/infer", post(infer)},
      {"POST", "/v2/repository/index", post(repository_index)},
      {"POST", repository_model + "/load",
       post([](InferenceServer& server, const httplib::Request& req, std::string_view body,
               httplib::Response& res) { repository_load(server, req, body, res, true); })},
      {"POST", repository_model + "/unload",
       post([](InferenceServer& server, const httplib::Request& req, std::string_view body,
               httplib::Response& res) { repository_load(server, req, body, res, false); })},
  };
}

// Registers the routes, then catch-alls for every method that answer 405 for a known path asked
// with another method and 404 otherwise, with a JSON error (httplib's own answers are empty).
void add_routes(httplib::Server& http, const std::vector<Route>& routes, Metrics& metrics) {
  std::vector<std::pair<std::regex, std::string>> known;  // pattern, method
  for (const Route& route : routes) {
    Endpoint endpoint = guarded(metrics, route.endpoint);
    if (route.method == "GET") {
      http.Get(route.pattern, [endpoint](const httplib::Request& req, httplib::Response& res) {
        endpoint(req, req.body, res);
      });
    } else {
      http.Post(route.pattern, post_reading_body(endpoint));
    }
    known.emplace_back(std::regex(route.pattern), route.method);
  }
  Handler unrouted = [&metrics, known = std::move(known)](const httplib::Request& req,
                                                          httplib::Response& res) {
    metrics.protocol_error("http");
    for (const auto& [pattern, method] : known) {
      if (!std::regex_match(req.path, pattern)) continue;
      res.set_header("Allow", method);
      return reply_error(res, 405, req.method + " is not allowed for " + req.path + " (use " + method + ")");
    }
    reply_error(res, 404, "no endpoint " + req.method + " " + req.path);
  };
  const std::string anything = ".*";
  http.Get(anything, unrouted).Post(anything, unrouted).Put(anything, unrouted);
  http.Patch(anything, unrouted).Delete(anything, unrouted).Options(anything, unrouted);
}

// httplib's own refusals (413 body over the limit, 400 unreadable HTTP, 414 URI too long) come
// with an empty body; give them the JSON error every other answer has.
httplib::Server::HandlerResponse describe_refusal(Metrics& metrics, size_t max_request_bytes,
                                                  const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  std::string message;
  switch (res.status) {
    case 413:
      message = "the request body is over the limit of " + std::to_string(max_request_bytes) + " bytes";
      break;
    case 414: message = "the request URI is too long"; break;
    case 400: message = "malformed HTTP request"; break;
    default: return httplib::Server::HandlerResponse::Unhandled;
  }
  metrics.protocol_error("http");
  reply_error(res, res.status, message + " (" + req.method + " " + req.path + ")");
  return httplib::Server::HandlerResponse::Handled;
}

// ---------------------------------------------------------------------------------------------
// Listening

// An httplib::Server accepting on a thread of its own.
struct Listener {
  httplib::Server http;
  std::thread thread;
  std::atomic<bool> finished{false};  // listen_after_bind() returned
  int port = 0;

  // Binds (port 0: any free port), then serves on `thread`. Returns once the server runs, so that
  // a stop() right after start() cannot miss it (httplib's stop() ignores a server not yet running).
  Status start(const std::string& address, int wanted_port, const char* protocol) {
    // httplib's default socket options add SO_REUSEPORT, with which a second server would bind the
    // same port and quietly share its connections; SO_REUSEADDR alone still allows a quick restart.
    http.set_socket_options([](socket_t sock) {
      int on = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    });
    port = wanted_port;
    if (wanted_port == 0) port = http.bind_to_any_port(address);
    else if (!http.bind_to_port(address, wanted_port)) port = -1;
    if (port < 0)
      return Status(ErrorCode::kUnavailable, std::string("cannot listen for ") + protocol + " on " + address +
                                                 ":" + std::to_string(wanted_port));
    thread = std::thread([this] {
      http.listen_after_bind();
      finished = true;
    });
    while (!http.is_running() && !finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (finished) {
      thread.join();
      return Status(ErrorCode::kUnavailable, std::string("the ") + protocol + " server on " + address + ":" +
                                                 std::to_string(port) + " stopped as it started");
    }
    log_info("listening", {{"protocol", protocol}, {"address", address}, {"port", port}});
    return Status::ok();
  }

  // Stops accepting, waits for the connections being served (idle keep-alive ones end at their
  // timeout) and joins. Idempotent.
  void stop() {
    if (!thread.joinable()) return;
    http.stop();
    thread.join();
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// HttpFrontend

struct HttpFrontend::Impl {
  Listener listener;
};

Result<std::unique_ptr<HttpFrontend>> HttpFrontend::start(InferenceServer& server,
                                                          const HttpOptions& options) {
  auto impl = std::make_unique<Impl>();
  httplib::Server& http = impl->listener.http;
  // Each connection keeps a thread while open (keep-alive): `threads` clients are served at once.
  http.new_task_queue = [threads = size_t(std::max(1, options.threads))] {
    return new httplib::ThreadPool(threads);
  };
  // An idle connection is closed after 5 s: stop() waits for them, and tritonclient's connection
  // pool drops a connection that the server closed before reusing it.
  http.set_keep_alive_max_count(10000);
  http.set_keep_alive_timeout(5);
  http.set_tcp_nodelay(true);  // small answers would otherwise wait on the client's delayed ACK
  http.set_payload_max_length(options.max_request_bytes);
  Metrics& metrics = server.metrics();
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [&metrics, limit = options.max_request_bytes](const httplib::Request& req, httplib::Response& res) {
        return describe_refusal(metrics, limit, req, res);
      }));
  add_routes(http, http_routes(server), metrics);
  KILN_RETURN_IF_ERROR(impl->listener.start(options.address, options.port, "http"));
  return std::unique_ptr<HttpFrontend>(new HttpFrontend(std::move(impl)));
}

HttpFrontend::HttpFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpFrontend::~HttpFrontend() { stop(); }
int HttpFrontend::port() const { return impl_->listener.port; }
void HttpFrontend::stop() { impl_->listener.stop(); }

// ---------------------------------------------------------------------------------------------
// MetricsFrontend

struct MetricsFrontend::Impl {
  Listener listener;
};

Result<std::unique_ptr<MetricsFrontend>> MetricsFrontend::start(Metrics& metrics, const std::string& address,
                                                                int port) {
  auto impl = std::make_unique<Impl>();
  httplib::Server& http = impl->listener.http;
  http.new_task_queue = [] { return new httplib::ThreadPool(4); };
  http.Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4");
  });
  KILN_RETURN_IF_ERROR(impl->listener.start(address, port, "metrics"));
  return std::unique_ptr<MetricsFrontend>(new MetricsFrontend(std::move(impl)));
}

MetricsFrontend::MetricsFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsFrontend::~MetricsFrontend() { stop(); }
int MetricsFrontend::port() const { return impl_->listener.port; }
void MetricsFrontend::stop() { impl_->listener.stop(); }

}  // namespace kiln::serve
