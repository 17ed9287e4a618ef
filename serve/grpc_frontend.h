// The gRPC frontend: the protocol's inference.GRPCInferenceService (Triton's grpc_service.proto,
// which tritonclient speaks): ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata,
// ModelConfig, ModelInfer (typed contents or raw_input_contents in; raw_output_contents out),
// RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload. Other methods answer UNIMPLEMENTED.
//
// Ownership: borrows the InferenceServer (which must outlive it); owns the grpc::Server. stop()
// (also run by the destructor) stops accepting and waits for the calls in flight.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "support/status.h"

namespace kiln::serve {

class InferenceServer;

struct GrpcOptions {
  std::string address = "0.0.0.0";
  int port = 8001;  // 0: pick a free port (port() says which)
  size_t max_request_bytes = size_t{64} << 20;
};

class GrpcFrontend {
 public:
  static Result<std::unique_ptr<GrpcFrontend>> start(InferenceServer& server, const GrpcOptions& options);
  ~GrpcFrontend();
  int port() const;
  void stop();

  struct Impl;

 private:
  explicit GrpcFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serve
