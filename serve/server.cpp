#include "serve/server.h"

#include <future>

#include "kiln/runtime.h"

namespace kiln::serve {

InferenceServer::InferenceServer(RepositoryOptions options) : repository_(std::move(options), metrics_) {}

std::string InferenceServer::version() { return kiln_runtime_version(); }

std::vector<std::string> InferenceServer::extensions() {
  return {"binary_tensor_data", "model_repository", "model_configuration", "metrics"};
}

bool InferenceServer::ready() const { return !shutting_down_ && repository_.all_ready(); }

void InferenceServer::infer(InferRequest request, InferCallback done) {
  if (shutting_down_) {
    metrics_.protocol_error(request.protocol);
    done(Status(ErrorCode::kUnavailable, "the server is shutting down"));
    return;
  }
  auto model = repository_.find(request.model_name, request.model_version);
  if (!model.is_ok()) {
    metrics_.protocol_error(request.protocol);
    done(std::move(model).status());
    return;
  }
  model.value()->infer(std::move(request), std::move(done));
}

Result<InferResponse> InferenceServer::infer_and_wait(InferRequest request) {
  // The callback may run on a worker thread after infer() returns: the promise is shared with it.
  auto promise = std::make_shared<std::promise<Result<InferResponse>>>();
  std::future<Result<InferResponse>> result = promise->get_future();
  infer(std::move(request), [promise](Result<InferResponse> response) { promise->set_value(std::move(response)); });
  return result.get();
}

void InferenceServer::begin_shutdown() { shutting_down_ = true; }

void InferenceServer::finish_shutdown() { repository_.shutdown(); }

int http_status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return 200;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
    case ErrorCode::kCorrupt:
    case ErrorCode::kUntrusted: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kUnavailable: return 503;
    default: return 500;
  }
}

int grpc_status_for(ErrorCode code) {
  // grpc::StatusCode values (grpcpp/impl/codegen/status_code_enum.h).
  constexpr int kOk = 0, kInvalidArgument = 3, kNotFound = 5, kResourceExhausted = 8, kInternal = 13,
                kUnavailable = 14;
  switch (code) {
    case ErrorCode::kOk: return kOk;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
    case ErrorCode::kCorrupt:
    case ErrorCode::kUntrusted: return kInvalidArgument;
    case ErrorCode::kNotFound: return kNotFound;
    case ErrorCode::kUnavailable: return kUnavailable;
    case ErrorCode::kOutOfMemory: return kResourceExhausted;
    default: return kInternal;
  }
}

}  // namespace kiln::serve
