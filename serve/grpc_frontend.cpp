#include "serve/grpc_frontend.h"

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "serve/log.h"
#include "serve/proto/grpc_service.grpc.pb.h"
#include "serve/server.h"

namespace kiln::serve {
namespace {

using InputTensor = inference::ModelInferRequest::InferInputTensor;
using TensorMetadata = inference::ModelMetadataResponse::TensorMetadata;

// The synchronous handlers (everything but ModelInfer) run on gRPC's threads, at most this many.
constexpr int kMaxThreads = 256;
// How long stop() lets the calls in flight finish before cancelling them.
constexpr auto kShutdownGrace = std::chrono::seconds(5);

grpc::Status to_grpc(const Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(grpc_status_for(status.code())), status.message());
}

std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

// The values of a typed contents field as the tensor's bytes: each converted to T, refused when it
// does not fit (300 for a UINT8 tensor).
template <class T, class Values>
Result<std::string> pack_values(const Values& values, const std::string& input, std::string_view type_name) {
  std::string bytes(values.size() * sizeof(T), '\0');
  char* out = bytes.data();
  for (auto value : values) {
    using V = decltype(value);
    if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
      if (!std::in_range<T>(value)) {
        return invalid_argument("input " + in_quotes(input) + ": value " + std::to_string(value) +
                                " is out of range for " + std::string(type_name));
      }
    }
    const T converted = static_cast<T>(value);
    std::memcpy(out, &converted, sizeof(T));
    out += sizeof(T);
  }
  return bytes;
}

// An input's data from its typed `contents`: the field the protocol has for its datatype, holding
// exactly `count` values, and no other field.
Result<std::string> typed_input_data(const InputTensor& input, DataType type, int64_t count) {
  const inference::InferTensorContents& contents = input.contents();
  const std::string_view type_name = datatype_name(type);
  const int given = contents.bool_contents_size() + contents.int_contents_size() +
                    contents.int64_contents_size() + contents.uint_contents_size() +
                    contents.uint64_contents_size() + contents.fp32_contents_size() +
                    contents.fp64_contents_size() + contents.bytes_contents_size();
  auto field = [&](int size, std::string_view name) -> Status {
    if (given != size) {
      return invalid_argument("input " + in_quotes(input.name()) + " is " + std::string(type_name) +
                              ": its values go in contents." + std::string(name));
    }
    if (size != count) {
      return invalid_argument("input " + in_quotes(input.name()) + " has shape " +
                              shape_string({input.shape().begin(), input.shape().end()}) + " (" +
                              std::to_string(count) + " elements) but " + std::to_string(size) + " values");
    }
    return Status::ok();
  };
  switch (type) {
    case DataType::kBool:
      KILN_RETURN_IF_ERROR(field(contents.bool_contents_size(), "bool_contents"));
      return pack_values<uint8_t>(contents.bool_contents(), input.name(), type_name);
    case DataType::kUint8:
      KILN_RETURN_IF_ERROR(field(contents.uint_contents_size(), "uint_contents"));
      return pack_values<uint8_t>(contents.uint_contents(), input.name(), type_name);
    case DataType::kUint16:
      KILN_RETURN_IF_ERROR(field(contents.uint_contents_size(), "uint_contents"));
      return pack_values<uint16_t>(contents.uint_contents(), input.name(), type_name);
    case DataType::kUint32:
      KILN_RETURN_IF_ERROR(field(contents.uint_contents_size(), "uint_contents"));
      return pack_values<uint32_t>(contents.uint_contents(), input.name(), type_name);
    case DataType::kInt8:
      KILN_RETURN_IF_ERROR(field(contents.int_contents_size(), "int_contents"));
      return pack_values<int8_t>(contents.int_contents(), input.name(), type_name);
    case DataType::kInt16:
      KILN_RETURN_IF_ERROR(field(contents.int_contents_size(), "int_contents"));
      return pack_values<int16_t>(contents.int_contents(), input.name(), type_name);
    case DataType::kInt32:
      KILN_RETURN_IF_ERROR(field(contents.int_contents_size(), "int_contents"));
      return pack_values<int32_t>(contents.int_contents(), input.name(), type_name);
    case DataType::kInt64:
      KILN_RETURN_IF_ERROR(field(contents.int64_contents_size(), "int64_contents"));
      return pack_values<int64_t>(contents.int64_contents(), input.name(), type_name);
    case DataType::kFp32:
      KILN_RETURN_IF_ERROR(field(contents.fp32_contents_size(), "fp32_contents"));
      return pack_values<float>(contents.fp32_contents(), input.name(), type_name);
    case DataType::kFp64:
      KILN_RETURN_IF_ERROR(field(contents.fp64_contents_size(), "fp64_contents"));
      return pack_values<double>(contents.fp64_contents(), input.name(), type_name);
    case DataType::kFp16:
    case DataType::kBf16:
      break;
  }
  return invalid_argument("input " + in_quotes(input.name()) + " is " + std::string(type_name) +
                          ": the protocol has no typed contents for it; send it in raw_input_contents");
}

Result<Tensor> to_tensor(const inference::ModelInferRequest& request, int index) {
  const InputTensor& input = request.inputs(index);
  Tensor tensor;
  tensor.name = input.name();
  const std::optional<DataType> type = datatype_from_name(input.datatype());
  if (!type) {
    return invalid_argument("input " + in_quotes(input.name()) + " has datatype " +
                            in_quotes(input.datatype()) + ", which Kiln does not have (it has " +
                            datatype_names() + ")");
  }
  tensor.datatype = *type;
  tensor.shape.assign(input.shape().begin(), input.shape().end());
  const std::optional<int64_t> count = element_count(tensor.shape);
  if (!count) {
    return invalid_argument("input " + in_quotes(input.name()) + " has an invalid shape " +
                            shape_string(tensor.shape));
  }
  if (request.raw_input_contents().empty()) {
    KILN_ASSIGN_OR_RETURN(tensor.data, typed_input_data(input, *type, *count));
    return tensor;
  }
  if (input.has_contents()) {
    return invalid_argument(
        "input " + in_quotes(input.name()) +
        " has typed contents while the request has raw_input_contents: use one or the other");
  }
  tensor.data = request.raw_input_contents(index);
  const size_t element_size = datatype_size(*type);
  // Divided rather than multiplied: a huge shape must not overflow.
  if (tensor.data.size() % element_size != 0 ||
      tensor.data.size() / element_size != static_cast<uint64_t>(*count)) {
    return invalid_argument("input " + in_quotes(input.name()) + " has shape " + shape_string(tensor.shape) +
                            " (" + std::to_string(*count) + " elements of " + std::to_string(element_size) +
                            " bytes) but " + std::to_string(tensor.data.size()) +
                            " bytes of raw_input_contents");
  }
  return tensor;
}

// gRPC's own messages (a port in use, say) go to the server's log as JSON lines too.
void log_from_grpc(gpr_log_func_args* args) {
  LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR ? LogLevel::kError : LogLevel::kVerbose;
  log(level, args->message, {{"source", "grpc"}, {"file", args->file}, {"line", args->line}});
}

Result<InferRequest> to_infer_request(const inference::ModelInferRequest& request) {
  if (!request.raw_input_contents().empty() && request.raw_input_contents_size() != request.inputs_size()) {
    return invalid_argument("the request has " + std::to_string(request.inputs_size()) + " inputs but " +
                            std::to_string(request.raw_input_contents_size()) +
                            " raw_input_contents (one per input, in order)");
  }
  InferRequest out;
  out.model_name = request.model_name();
  out.model_version = request.model_version();
  out.id = request.id();
  out.protocol = "grpc";
  for (int i = 0; i < request.inputs_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor tensor, to_tensor(request, i));
    out.inputs.push_back(std::move(tensor));
  }
  for (const auto& output : request.outputs()) out.outputs.push_back(output.name());
  return out;
}

void fill_infer_response(InferResponse result, inference::ModelInferResponse& response) {
  response.set_model_name(std::move(result.model_name));
  response.set_model_version(std::move(result.model_version));
  response.set_id(std::move(result.id));
  for (Tensor& tensor : result.outputs) {
    auto* output = response.add_outputs();
    output->set_name(std::move(tensor.name));
    output->set_datatype(std::string(datatype_name(tensor.datatype)));
    for (int64_t dim : tensor.shape) output->add_shape(dim);
    response.add_raw_output_contents(std::move(tensor.data));
  }
}

void fill_tensor_metadata(const std::vector<TensorSpec>& specs,
                          google::protobuf::RepeatedPtrField<TensorMetadata>& out) {
  for (const TensorSpec& spec : specs) {
    auto* tensor = out.Add();
    tensor->set_name(spec.name);
    tensor->set_datatype(std::string(datatype_name(spec.datatype)));
    for (int64_t dim : spec.shape) tensor->add_shape(dim);
  }
}

// Runs a handler's body; an exception (a bug, or memory running out) becomes the call's status
// rather than ending the process.
template <class Body>
grpc::Status guarded(std::string_view rpc, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    log_error("grpc handler out of memory", {{"rpc", rpc}});
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    log_error("grpc handler failed", {{"rpc", rpc}, {"error", e.what()}});
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(rpc) + ": " + e.what());
  }
}

// Finishes inference calls off the models' worker threads: serializing a response and handing
// it to gRPC costs more than a small model's share of a batch per request, so a worker that did it
// for each request of its batch would keep its instance idle meanwhile (measured on the H100: a
// batch cycle of 1.3 ms for 0.15 ms of execution).
// Thread-safety: post() from any thread; the destructor runs what was posted, then joins.
class Finisher {
 public:
  explicit Finisher(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Finisher() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (true) {
      ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// ModelInfer is a raw callback method: gRPC hands over the request's bytes and a reactor, the
// request is queued at its model, and the model's worker finishes the call when the batch has
// run, so no thread waits per call in flight (a synchronous handler would hold one thread for each
// of them). Parsing the bytes here, not in gRPC, lets a message that does not parse answer
// INVALID_ARGUMENT (counted as a protocol error) rather than INTERNAL. The other methods are
// plain synchronous ones: they answer at once.
using ServiceBase = inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
    inference::GRPCInferenceService::Service>;

class Service final : public ServiceBase {
 public:
  explicit Service(InferenceServer& server) : server_(server) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override {
    return guarded("ServerLive", [&] {
      response->set_live(server_.live());
      return grpc::Status::OK;
    });
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override {
    return guarded("ServerReady", [&] {
      response->set_ready(server_.ready());
      return grpc::Status::OK;
    });
  }

  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override {
    return guarded("ModelReady", [&] {
      response->set_ready(server_.repository().find(request->name(), request->version()).is_ok());
      return grpc::Status::OK;
    });
  }

  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override {
    return guarded("ServerMetadata", [&] {
      response->set_name(InferenceServer::name());
      response->set_version(InferenceServer::version());
      for (const std::string& extension : InferenceServer::extensions()) response->add_extensions(extension);
      return grpc::Status::OK;
    });
  }

  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override {
    return guarded("ModelMetadata", [&] {
      auto model = server_.repository().find(request->name(), request->version());
      if (!model) return to_grpc(model.status());
      response->set_name(request->name());
      for (const std::string& version : server_.repository().ready_versions(request->name())) {
        response->add_versions(version);
      }
      response->set_platform("kiln");
      fill_tensor_metadata((*model)->inputs(), *response->mutable_inputs());
      fill_tensor_metadata((*model)->outputs(), *response->mutable_outputs());
      return grpc::Status::OK;
    });
  }

  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest* request,
                           inference::ModelConfigResponse* response) override {
    return guarded("ModelConfig", [&] {
      auto model = server_.repository().find(request->name(), request->version());
      if (!model) return to_grpc(model.status());
      *response->mutable_config() = (*model)->config();
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes,
                                       grpc::ByteBuffer* response_bytes) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status refused = guarded("ModelInfer", [&] {
      inference::ModelInferRequest request;
      grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(request_bytes));
      if (!request.ParseFromZeroCopyStream(&reader)) {
        server_.metrics().protocol_error("grpc");
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the message is no valid ModelInferRequest");
      }
      Result<InferRequest> infer_request = to_infer_request(request);
      if (!infer_request) {
        server_.metrics().protocol_error("grpc");
        return to_grpc(infer_request.status());
      }
      // Called once, on a model worker's thread (or on this one when refused before queueing):
      // the call is finished on the finisher's threads.
      server_.infer(std::move(infer_request).value(), [this, reactor, response_bytes](Result<InferResponse> result) {
        finisher_.post([reactor, response_bytes, result = std::move(result)]() mutable {
          grpc::Status status = guarded("ModelInfer", [&] {
            if (!result) return to_grpc(result.status());
            inference::ModelInferResponse response;
            fill_infer_response(std::move(result).value(), response);
            bool own_buffer = false;
            return grpc::GenericSerialize<grpc::ProtoBufferWriter, inference::ModelInferResponse>(
                response, response_bytes, &own_buffer);
          });
          reactor->Finish(status);
        });
      });
      return grpc::Status::OK;
    });
    if (!refused.ok()) reactor->Finish(refused);
    return reactor;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext*, const inference::RepositoryIndexRequest* request,
                               inference::RepositoryIndexResponse* response) override {
    return guarded("RepositoryIndex", [&] {
      for (const RepositoryIndexEntry& entry : server_.repository().index(request->ready())) {
        auto* model = response->add_models();
        model->set_name(entry.name);
        model->set_version(entry.version);
        model->set_state(entry.state);
        model->set_reason(entry.reason);
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext*, const inference::RepositoryModelLoadRequest* request,
                                   inference::RepositoryModelLoadResponse*) override {
    return guarded("RepositoryModelLoad", [&] {
      // Triton lets a load request carry a configuration ("config") and model files ("file:<path>")
      // in place of the repository's; kiln-serve loads only what the repository holds.
      for (const auto& [key, value] : request->parameters()) {
        if (key == "config" || key.starts_with("file:")) {
          server_.metrics().protocol_error("grpc");
          const std::string message = "load of model " + in_quotes(request->model_name()) + ": parameter " +
                                      in_quotes(key) + " (configuration or files inline) is unsupported";
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
        }
      }
      Status status = server_.repository().load(request->model_name());
      return status ? grpc::Status::OK : to_grpc(status);
    });
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext*,
                                     const inference::RepositoryModelUnloadRequest* request,
                                     inference::RepositoryModelUnloadResponse*) override {
    return guarded("RepositoryModelUnload", [&] {
      Status status = server_.repository().unload(request->model_name());
      return status ? grpc::Status::OK : to_grpc(status);
    });
  }

 private:
  InferenceServer& server_;
  Finisher finisher_{std::clamp(std::thread::hardware_concurrency() / 4, 2u, 8u)};
};

// "host:port" as gRPC parses it: an IPv6 address goes in brackets.
std::string listen_address(const std::string& address, int port) {
  const bool ipv6 = address.find(':') != std::string::npos && !address.starts_with("[");
  return (ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

}  // namespace

struct GrpcFrontend::Impl {
  Service service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::mutex stop_mutex;  // stop() may race with the destructor's or another thread's

  explicit Impl(InferenceServer& inference_server) : service(inference_server) {}
};

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::start(InferenceServer& server,
                                                          const GrpcOptions& options) {
  gpr_set_log_function(log_from_grpc);
  auto impl = std::make_unique<Impl>(server);
  const std::string address = listen_address(options.address, options.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl->port);
  // gRPC sets SO_REUSEPORT by default: a second server on a taken port would share it silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<size_t>(options.max_request_bytes, INT_MAX)));
  builder.SetMaxSendMessageSize(-1);  // unlimited: a response is as large as the model makes it
  grpc::ResourceQuota quota("kiln-serve-grpc");
  quota.SetMaxThreads(kMaxThreads);
  builder.SetResourceQuota(quota);
  // The sync server keeps idle polling threads per completion queue and starts a new one whenever
  // one takes a call; several queues and pollers let a burst of concurrent calls start at once.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 4);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 8);
  builder.RegisterService(&impl->service);
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return Status(ErrorCode::kUnavailable, "gRPC: cannot listen on " + address);
  }
  log_info("listening", {{"protocol", "grpc"}, {"address", options.address}, {"port", impl->port}});
  return std::unique_ptr<GrpcFrontend>(new GrpcFrontend(std::move(impl)));
}

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcFrontend::~GrpcFrontend() { stop(); }

int GrpcFrontend::port() const { return impl_->port; }

void GrpcFrontend::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  if (!impl_->server) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace kiln::serve
