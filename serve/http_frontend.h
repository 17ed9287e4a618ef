// The HTTP/REST frontend (KServe v2 / Open Inference Protocol over cpp-httplib):
//   GET  /v2, /v2/health/live, /v2/health/ready
//   GET  /v2/models/{m}[/versions/{v}], .../ready, .../config
//   POST /v2/models/{m}[/versions/{v}]/infer   JSON tensors, or the binary tensor extension
//        (Inference-Header-Content-Length: the JSON header's length; tensor bytes follow it)
//   POST /v2/repository/index, /v2/repository/models/{m}/load, /v2/repository/models/{m}/unload
// and the metrics endpoint (GET /metrics) on its own port.
//
// Errors answer {"error": "<message>"} with 400 (bad request), 404 (unknown model or version),
// 413 (body over the limit), 503 (not ready, queue full, shutting down) or 500.
//
// Ownership: a frontend borrows the InferenceServer (which must outlive it) and owns its
// listening thread and connection threads; stop() (also run by the destructor) stops accepting,
// waits for the requests being answered, and joins them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "support/status.h"

namespace kiln::serve {

class InferenceServer;
class Metrics;

struct HttpOptions {
  std::string address = "0.0.0.0";
  int port = 8000;  // 0: pick a free port (port() says which)
  // Connections served at once (each keeps a thread while open, as HTTP/1.1 keep-alive does).
  int threads = 64;
  size_t max_request_bytes = size_t{64} << 20;
};

class HttpFrontend {
 public:
  // Binds and starts serving on a thread of its own; fails when the address cannot be bound.
  static Result<std::unique_ptr<HttpFrontend>> start(InferenceServer& server, const HttpOptions& options);
  ~HttpFrontend();
  int port() const;
  void stop();

  struct Impl;

 private:
  explicit HttpFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// GET /metrics (Prometheus text format) on its own port, as tritonserver's --metrics-port.
class MetricsFrontend {
 public:
  static Result<std::unique_ptr<MetricsFrontend>> start(Metrics& metrics, const std::string& address, int port);
  ~MetricsFrontend();
  int port() const;
  void stop();

  struct Impl;

 private:
  explicit MetricsFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serve
