// kiln-serve-load: a closed-loop gRPC load generator for kiln-serve (or any server that speaks
// Triton's inference.GRPCInferenceService), in the manner of Triton's perf_analyzer.
//
// Why: bench/serve_load.py's Python clients (tritonclient in several processes) saturate at
// about 25k requests/s on a 16-core machine, below what the server does, so the benchmark then
// measures the client. This one uses the gRPC C++ async API: --concurrency requests are always in
// flight (each slot sends its next request as soon as its previous response arrives), spread over
// --threads threads, each with its own CompletionQueue and its own channel (its own connection).
// The request is built once (seeded random raw_input_contents) and sent again and again.
//
// Latency is send to Finish, steady clock, counted for the requests that complete within the
// measured window (after --warmup-seconds); throughput is their count over the window's length,
// in requests per second (the caller multiplies by rows per request). Any non-OK status is an
// error; the first message is kept. Exit status 1 on errors or when nothing completed.
//
//   kiln-serve-load --url 127.0.0.1:8001 --model encoder --input x:FP32:1,8,16
//                   --concurrency 64 --warmup-seconds 3 --seconds 20 --json load.json
//
// It links the generated Triton protos only, not the Kiln runtime: it is a client.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "serve/grpc_process.h"
#include "serve/proto/grpc_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using inference::GRPCInferenceService;

struct InputSpec {
  std::string name, datatype;
  std::vector<int64_t> shape;
};

const std::map<std::string, size_t> kElementBytes = {
    {"FP32", 4}, {"FP16", 2}, {"INT64", 8}, {"INT32", 4}, {"INT8", 1}, {"UINT8", 1}, {"BOOL", 1}};

// NAME:DTYPE:d0,d1,... (the name may itself hold colons: the last two separate the fields).
InputSpec parse_input(const std::string& text) {
  size_t b = text.rfind(':');
  size_t a = b == std::string::npos || b == 0 ? std::string::npos : text.rfind(':', b - 1);
  if (a == std::string::npos || a == 0)
    throw CLI::ValidationError("--input", "'" + text + "' is not NAME:DTYPE:d0,d1,...");
  InputSpec spec{text.substr(0, a), text.substr(a + 1, b - a - 1), {}};
  if (!kElementBytes.count(spec.datatype))
    throw CLI::ValidationError("--input", "datatype '" + spec.datatype +
                                              "' is not FP32, FP16, INT64, INT32, INT8, UINT8 or BOOL");
  std::string dims = text.substr(b + 1);
  for (size_t pos = 0; pos <= dims.size();) {
    size_t end = dims.find(',', pos);
    if (end == std::string::npos) end = dims.size();
    std::string d = dims.substr(pos, end - pos);
    if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos)
      throw CLI::ValidationError("--input", "'" + text + "': dimensions are sizes >= 0, comma-separated");
    spec.shape.push_back(std::stoll(d));
    pos = end + 1;
  }
  return spec;
}

// IEEE half from a float in [-1, 1] (normal and subnormal; rounds to nearest).
uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  float a = std::fabs(f);
  if (a < 6.1035156e-05f)  // subnormal half: units of 2^-24
    return sign | static_cast<uint16_t>(std::lround(a * 16777216.0f));
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  long frac = std::lround((m * 2.0f - 1.0f) * 1024.0f);
  if (frac == 1024) frac = 0, ++e;
  return sign | static_cast<uint16_t>(((e - 1 + 15) << 10) | frac);
}

// The request, built once: raw_input_contents with seeded random values (floats in [-1, 1],
// integers in 0..3, booleans 0 or 1, as bench/serve_load.py's Python clients send).
inference::ModelInferRequest make_request(const std::string& model, const std::string& version,
                                          const std::vector<InputSpec>& inputs, uint64_t seed) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_model_version(version);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const InputSpec& spec : inputs) {
    auto* tensor = request.add_inputs();
    tensor->set_name(spec.name);
    tensor->set_datatype(spec.datatype);
    size_t count = 1;
    for (int64_t d : spec.shape) {
      tensor->add_shape(d);
      count *= static_cast<size_t>(d);
    }
    std::string bytes(count * kElementBytes.at(spec.datatype), '\0');
    char* p = bytes.data();
    for (size_t i = 0; i < count; ++i) {
      if (spec.datatype == "FP32") {
        float v = uniform(rng);
        std::memcpy(p + 4 * i, &v, 4);
      } else if (spec.datatype == "FP16") {
        uint16_t v = to_half(uniform(rng));
        std::memcpy(p + 2 * i, &v, 2);
      } else if (spec.datatype == "BOOL") {
        p[i] = static_cast<char>(rng() & 1);
      } else {
        int64_t v = static_cast<int64_t>(rng() % 4);  // little-endian: the low bytes first
        std::memcpy(p + kElementBytes.at(spec.datatype) * i, &v, kElementBytes.at(spec.datatype));
      }
    }
    request.add_raw_input_contents(std::move(bytes));
  }
  return request;
}

std::string describe(const grpc::Status& status) {
  static const char* const names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  int code = static_cast<int>(status.error_code());
  std::string name = code >= 0 && code <= 16 ? names[code] : "code " + std::to_string(code);
  return name + ": " + status.error_message();
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& url, int index) {
  grpc::ChannelArguments args;
  // A channel of its own per thread: without these, channels with equal arguments share one
  // subchannel, hence one TCP connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("kiln.load_channel", index);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(url, grpc::InsecureChannelCredentials(), args);
}

// One request in flight. Its address is the completion-queue tag.
struct Slot {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> call;
  inference::ModelInferResponse response;
  grpc::Status status;
  Clock::time_point sent;
};

struct ThreadResult {
  std::vector<double> latency_s;  // requests completed OK within the window
  uint64_t errors = 0;            // any non-OK status, warm-up included
  std::string first_error;
  Clock::time_point first_error_time = Clock::time_point::max();
};

// One thread: `slots` closed loops on its own channel and completion queue until t_end.
void run_thread(const std::string& url, int index, int slots, const inference::ModelInferRequest& request,
                Clock::time_point t_start, Clock::time_point t_end, ThreadResult& out) {
  auto channel = make_channel(url, index);
  auto stub = GRPCInferenceService::NewStub(channel);
  grpc::CompletionQueue cq;
  // gRPC deadlines are system_clock times: the window's end plus a minute.
  const auto deadline = std::chrono::system_clock::now() + (t_end - Clock::now()) + std::chrono::seconds(60);
  std::vector<Slot> pool(static_cast<size_t>(slots));
  auto send = [&](Slot& s) {
    s.context = std::make_unique<grpc::ClientContext>();
    s.context->set_deadline(deadline);  // a hung server ends the run
    s.response.Clear();
    s.sent = Clock::now();
    s.call = stub->PrepareAsyncModelInfer(s.context.get(), request, &cq);
    s.call->StartCall();
    s.call->Finish(&s.response, &s.status, &s);
  };
  for (Slot& s : pool) send(s);
  int in_flight = slots;
  void* tag;
  bool ok;
  while (in_flight > 0 && cq.Next(&tag, &ok)) {
    Clock::time_point done = Clock::now();
    Slot& s = *static_cast<Slot*>(tag);
    --in_flight;
    if (!ok || !s.status.ok()) {
      ++out.errors;
      if (out.first_error.empty()) {
        out.first_error = ok ? describe(s.status)
                             : "the completion queue reported a failed call";
        out.first_error_time = done;
      }
    } else if (done >= t_start && done <= t_end) {
      out.latency_s.push_back(std::chrono::duration<double>(done - s.sent).count());
    }
    if (done < t_end) {
      send(s);
      ++in_flight;
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

// Nearest rank, as bench/serve_load.py and kiln-run's --bench.
double percentile_ms(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return NAN;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::max<size_t>(rank, 1) - 1] * 1e3;
}

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

int main(int argc, char** argv) {
  kiln::serve::configure_grpc_process();
  CLI::App app{"kiln-serve-load: closed-loop gRPC load generator for kiln-serve (KServe v2 / Triton protocol)"};
  std::string url = "127.0.0.1:8001", model, version, json_path;
  std::vector<std::string> input_texts;
  int concurrency = 1, threads = 0;
  double warmup_seconds = 1, seconds = 10;
  uint64_t seed = 0;
  bool skip_ready_check = false;
  app.add_option("--url", url, "server's gRPC address, host:port")->capture_default_str();
  app.add_option("--model", model, "model name")->required();
  app.add_option("--model-version", version, "model version (default: the server's choice)");
  app.add_option("--input", input_texts, "NAME:DTYPE:d0,d1,... (repeatable; FP32 FP16 INT64 INT32 INT8 UINT8 BOOL)")
      ->required();
  app.add_option("--concurrency", concurrency, "requests always in flight")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "client threads, each with its own connection (default min(N, cores/2))")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup-seconds", warmup_seconds, "load before the measured window")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--seconds", seconds, "length of the measured window")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", seed, "seed of the input values")->capture_default_str();
  app.add_flag("--skip-ready-check", skip_ready_check, "do not ask ModelReady first");
  app.add_option("--json", json_path, "write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  std::vector<InputSpec> inputs;
  try {
    for (const std::string& text : input_texts) inputs.push_back(parse_input(text));
  } catch (const CLI::Error& e) {
    return app.exit(e);
  }
  if (threads == 0) {
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, std::min(concurrency, cores / 2));
  }
  threads = std::min(threads, concurrency);

  if (!skip_ready_check) {
    auto stub = GRPCInferenceService::NewStub(make_channel(url, -1));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    inference::ModelReadyRequest request;
    request.set_name(model);
    request.set_version(version);
    inference::ModelReadyResponse response;
    grpc::Status status = stub->ModelReady(&context, request, &response);
    if (!status.ok() || !response.ready()) {
      std::fprintf(stderr, "kiln-serve-load: model '%s' at %s is not ready: %s\n", model.c_str(), url.c_str(),
                   status.ok() ? "ModelReady answered false" : describe(status).c_str());
      return 1;
    }
  }

  const inference::ModelInferRequest request = make_request(model, version, inputs, seed);
  std::fprintf(stderr, "kiln-serve-load: %d requests in flight on %d thread(s), %g s warm-up, %g s measured\n",
               concurrency, threads, warmup_seconds, seconds);
  const Clock::time_point t_start =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup_seconds));
  const Clock::time_point t_end =
      t_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<ThreadResult> results(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    int slots = concurrency / threads + (i < concurrency % threads ? 1 : 0);
    pool.emplace_back(run_thread, std::cref(url), i, slots, std::cref(request), t_start, t_end,
                      std::ref(results[static_cast<size_t>(i)]));
  }
  // The caller (bench/serve_load.py) reads this line to sample the server's metrics at the
  // window's start.
  std::this_thread::sleep_until(t_start);
  std::fprintf(stderr, "kiln-serve-load: measuring\n");
  std::fflush(stderr);
  for (std::thread& t : pool) t.join();

  std::vector<double> latency;
  uint64_t errors = 0;
  std::string first_error;
  Clock::time_point first_error_time = Clock::time_point::max();
  for (const ThreadResult& r : results) {
    latency.insert(latency.end(), r.latency_s.begin(), r.latency_s.end());
    errors += r.errors;
    if (r.errors && r.first_error_time < first_error_time) {
      first_error = r.first_error;
      first_error_time = r.first_error_time;
    }
  }
  std::sort(latency.begin(), latency.end());
  double mean_ms = NAN;
  if (!latency.empty()) {
    double sum = 0;
    for (double v : latency) sum += v;
    mean_ms = sum / static_cast<double>(latency.size()) * 1e3;
  }
  const double rps = static_cast<double>(latency.size()) / seconds;
  const double p50 = percentile_ms(latency, 50), p90 = percentile_ms(latency, 90), p99 = percentile_ms(latency, 99);

  std::printf("kiln-serve-load: %s, concurrency %d, %d thread(s): %zu requests in %g s, %.1f req/s, "
              "p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, mean %.3f ms, %llu errors%s%s\n",
              model.c_str(), concurrency, threads, latency.size(), seconds, rps, p50, p90, p99, mean_ms,
              static_cast<unsigned long long>(errors), errors ? "; first: " : "", first_error.c_str());
  if (!json_path.empty()) {
    nlohmann::json input_json = nlohmann::json::array();
    for (const InputSpec& spec : inputs)
      input_json.push_back({{"name", spec.name}, {"datatype", spec.datatype}, {"shape", spec.shape}});
    nlohmann::json out = {
        {"tool", "kiln-serve-load"}, {"url", url}, {"model", model}, {"model_version", version},
        {"inputs", input_json}, {"concurrency", concurrency}, {"threads", threads},
        {"warmup_seconds", warmup_seconds}, {"seconds", seconds}, {"requests", latency.size()},
        {"errors", errors}, {"first_error", errors ? nlohmann::json(first_error) : nlohmann::json(nullptr)},
        {"requests_per_second", rps}, {"p50_ms", number(p50)}, {"p90_ms", number(p90)},
        {"p99_ms", number(p99)}, {"mean_ms", number(mean_ms)}};
    std::ofstream file(json_path);
    file << out.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "kiln-serve-load: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  if (errors) std::fprintf(stderr, "kiln-serve-load: %llu failed requests; the first: %s\n",
                           static_cast<unsigned long long>(errors), first_error.c_str());
  if (latency.empty()) std::fprintf(stderr, "kiln-serve-load: no request completed in the measured window\n");
  return errors || latency.empty() ? 1 : 0;
}
