// The protocol-independent server: the repository, the metrics, readiness and shutdown. The
// HTTP and gRPC frontends translate the protocol and call this; neither knows of the other.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "serve/inference.h"
#include "serve/metrics.h"
#include "serve/repository.h"

namespace kiln::serve {

class InferenceServer {
 public:
  explicit InferenceServer(RepositoryOptions options);

  ModelRepository& repository() { return repository_; }
  Metrics& metrics() { return metrics_; }

  // Server metadata (GET /v2, ServerMetadata).
  static std::string name() { return "kiln"; }
  static std::string version();
  static std::vector<std::string> extensions();

  bool live() const { return true; }
  // Ready to serve: not shutting down and every model asked for is loaded.
  bool ready() const;

  // Routes a request to its model version; `done` is called once (see InferCallback). Lookup
  // failures (unknown model or version, not ready, shutting down) are reported through `done`
  // and counted as protocol errors of request.protocol.
  void infer(InferRequest request, InferCallback done);
  // infer() for frontends that answer on the calling thread: waits for the result.
  Result<InferResponse> infer_and_wait(InferRequest request);

  // Stops taking requests (ready() turns false; new requests fail with kUnavailable), lets the
  // queued ones finish. The frontends are stopped by their owner after this.
  void begin_shutdown();
  void finish_shutdown();

 private:
  Metrics metrics_;
  ModelRepository repository_;
  std::atomic<bool> shutting_down_{false};
};

// The status code a frontend answers with for an ErrorCode: HTTP's, and gRPC's (grpc::StatusCode
// values, kept as int so that this header needs no gRPC). The caller's mistakes (including an
// artifact the server cannot use: corrupt, untrusted, unsupported) are 400 / INVALID_ARGUMENT.
int http_status_for(ErrorCode code);
int grpc_status_for(ErrorCode code);

}  // namespace kiln::serve
