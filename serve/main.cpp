// kiln-serve: serves the models of a repository folder over KServe v2 (HTTP and gRPC), with
// Prometheus metrics. Flags follow tritonserver's where it has them. docs/serving.md explains
// the repository, the flags and the protocol.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <CLI/CLI.hpp>

#include "serve/grpc_frontend.h"
#include "serve/grpc_process.h"
#include "serve/http_frontend.h"
#include "serve/log.h"
#include "serve/server.h"
#include "support/file_io.h"
#include "tools/common/main_guard.h"

namespace {

using namespace kiln::serve;

struct Options {
  std::string repository;
  bool allow_http = true, allow_grpc = true, allow_metrics = true;
  std::string http_address = "0.0.0.0", grpc_address = "0.0.0.0", metrics_address = "0.0.0.0";
  int http_port = 8000, grpc_port = 8001, metrics_port = 8002;
  int http_threads = 64;
  std::string control_mode = "none";
  std::vector<std::string> load_models;
  bool exit_on_error = true;
  int exit_timeout_seconds = 30;
  size_t max_request_bytes = size_t{64} << 20;
  uint32_t max_queue_size = 0;
  std::vector<std::string> trusted_keys;
  std::string log_format = "json";
  int log_verbose = 0;
};

int fail(const std::string& message) {
  log_error(message);
  return 1;
}

int serve(const Options& options) {
  configure_logging(options.log_format == "text" ? LogFormat::kText : LogFormat::kJson,
                    options.log_verbose > 0 ? LogLevel::kVerbose : LogLevel::kInfo);
  forward_runtime_log();

  // SIGTERM and SIGINT are taken by sigwait below, on this thread only: blocked before any
  // other thread starts, so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RepositoryOptions repo;
  repo.root = options.repository;
  repo.control_mode = options.control_mode == "explicit" ? ModelControlMode::kExplicit : ModelControlMode::kNone;
  repo.startup_models = options.load_models;
  repo.load.default_max_queue_size = options.max_queue_size;
  for (const std::string& path : options.trusted_keys) {
    auto bytes = kiln::read_regular_file(path, "trusted key");
    if (!bytes.is_ok()) return fail(bytes.status().message());
    repo.load.trusted_keys.emplace_back(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(repo.root, ec))
    return fail("--model-repository: " + repo.root.string() + " is not a folder");

  InferenceServer server(repo);
  kiln::Status loaded = server.repository().load_startup_models();
  if (!loaded.is_ok() && options.exit_on_error)
    return fail("a model failed to load and --exit-on-error is on: " + loaded.message());

  std::unique_ptr<HttpFrontend> http;
  std::unique_ptr<GrpcFrontend> grpc;
  std::unique_ptr<MetricsFrontend> metrics;
  if (options.allow_http) {
    auto started = HttpFrontend::start(server, {options.http_address, options.http_port, options.http_threads,
                                                options.max_request_bytes});
    if (!started.is_ok()) return fail(started.status().message());
    http = std::move(started.value());
  }
  if (options.allow_grpc) {
    auto started = GrpcFrontend::start(server, {options.grpc_address, options.grpc_port, options.max_request_bytes});
    if (!started.is_ok()) return fail(started.status().message());
    grpc = std::move(started.value());
  }
  if (options.allow_metrics) {
    auto started = MetricsFrontend::start(server.metrics(), options.metrics_address, options.metrics_port);
    if (!started.is_ok()) return fail(started.status().message());
    metrics = std::move(started.value());
  }
  log_info("server started", {{"ready", server.ready()}, {"repository", repo.root.string()}});

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  log_info("shutting down", {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"},
                             {"timeout_seconds", options.exit_timeout_seconds}});
  // Past the timeout, exit without waiting further (requests still running are cut off).
  std::thread([timeout = options.exit_timeout_seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(timeout));
    log_error("shutdown timed out; exiting with requests unfinished");
    std::_Exit(1);
  }).detach();
  server.begin_shutdown();
  // The frontends wait for the requests they are answering, which the models' workers finish.
  if (http) http->stop();
  if (grpc) grpc->stop();
  server.finish_shutdown();
  if (metrics) metrics->stop();
  log_info("shut down");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kiln::serve::configure_grpc_process();
  return kiln::tools::run_guarded("kiln-serve", [&] {
    Options options;
    CLI::App app{"kiln-serve: serves Kiln artifacts over the KServe v2 inference protocol (HTTP, gRPC)"};
    app.option_defaults()->always_capture_default();
    app.add_option("--model-repository", options.repository, "The model repository folder: <model>/<version>/model.kiln")
        ->required();
    app.add_option("--allow-http", options.allow_http, "Serve HTTP/REST");
    app.add_option("--allow-grpc", options.allow_grpc, "Serve gRPC");
    app.add_option("--allow-metrics", options.allow_metrics, "Serve Prometheus metrics");
    app.add_option("--http-address", options.http_address, "Address the HTTP server binds");
    app.add_option("--grpc-address", options.grpc_address, "Address the gRPC server binds");
    app.add_option("--metrics-address", options.metrics_address, "Address the metrics server binds");
    app.add_option("--http-port", options.http_port, "HTTP port (0: any free port, logged)")->check(CLI::Range(0, 65535));
    app.add_option("--grpc-port", options.grpc_port, "gRPC port (0: any free port, logged)")->check(CLI::Range(0, 65535));
    app.add_option("--metrics-port", options.metrics_port, "Metrics port (0: any free port, logged)")
        ->check(CLI::Range(0, 65535));
    app.add_option("--http-thread-count", options.http_threads, "HTTP connections served at once")
        ->check(CLI::Range(1, 4096));
    app.add_option("--model-control-mode", options.control_mode,
                   "none: load every model at start; explicit: load --load-model's, then by request")
        ->check(CLI::IsMember({"none", "explicit"}));
    app.add_option("--load-model", options.load_models, "Explicit mode: a model to load at start ('*': all)");
    app.add_option("--exit-on-error", options.exit_on_error, "Exit when a model fails to load at start");
    app.add_option("--exit-timeout-secs", options.exit_timeout_seconds,
                   "On SIGTERM, how long to let requests in flight finish")
        ->check(CLI::Range(0, 86400));
    app.add_option("--max-request-bytes", options.max_request_bytes, "Largest request body or message")
        ->check(CLI::Range(size_t{1024}, size_t{1} << 34));
    app.add_option("--max-queue-size", options.max_queue_size,
                   "Queued requests per model version when its config sets none (0: unlimited)");
    app.add_option("--trusted-key", options.trusted_keys,
                   "Only load artifacts signed by this key (kilnc --new-signing-key's .pub; repeatable)");
    app.add_option("--log-format", options.log_format, "json (one object per line) or text")
        ->check(CLI::IsMember({"json", "text"}));
    app.add_option("--log-verbose", options.log_verbose, "1: verbose logs");
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app.exit(e);
      std::fprintf(stderr, "kiln-serve: error: %s\n", e.what());
      return 1;
    }
    return serve(options);
  });
}
