// kiln-concurrency-stress: the C API under concurrent use, for the sanitizer builds (ThreadSanitizer
// finds races in it, AddressSanitizer use-after-free across threads) and as an ordinary test.
//
//   kiln-concurrency-stress ARTIFACT [--threads=N] [--rounds=M]
//
// ARTIFACT must have inputs "x" (f32[N, K], N symbolic) and one f32 output (examples/mlp.graph
// compiled by kilnc). On the reference device and on every listed device the artifact has kernels
// for, it first runs each batch size once on one thread (the expected bytes), then:
//   1. shared artifact: N threads share one loaded artifact; each round creates a session on a
//      device (the devices taken in turn), runs it synchronously or asynchronously, checks the
//      bytes and destroys it; one long-lived session per thread runs in between;
//   2. concurrent loads: N threads load the same file at once, run, destroy the artifact while
//      their session is alive (allowed by kiln/runtime.h), run again;
//   3. teardown with work in flight: a session destroyed while its async run is in flight, and an
//      event destroyed without a wait;
//   4. errors: every thread provokes an error and must read its own message (per-thread slot).
// Every result must be byte-identical to the single-threaded run on the same device. Exit 0 and
// "concurrency stress: PASS" when all checks pass; 1 with the failures listed otherwise.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime.h"

namespace {

constexpr int64_t kBatchSizes[] = {1, 2, 3, 5};
constexpr size_t kBatchCount = sizeof(kBatchSizes) / sizeof(kBatchSizes[0]);

// Failures from every thread; guarded by its mutex.
struct Failures {
  std::mutex mutex;
  std::vector<std::string> messages;
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(what);
  }
};

// The artifact's signature, read once on the main thread (the artifact is immutable after loading).
struct Signature {
  int64_t features = 0;  // K of x: f32[N, K]
  std::string output;    // the one output's name
};

bool read_signature(const kiln_artifact* artifact, Signature* sig, std::string* error) {
  size_t inputs = 0, outputs = 0;
  kiln_tensor_info x{}, out{};
  if (kiln_artifact_input_count(artifact, &inputs) != KILN_OK || inputs != 1 ||
      kiln_artifact_input_info(artifact, 0, &x) != KILN_OK || std::strcmp(x.name, "x") != 0 ||
      x.dtype != KILN_DTYPE_F32 || x.rank != 2 || x.dims[0] != -1 || x.dims[1] <= 0 ||
      kiln_artifact_output_count(artifact, &outputs) != KILN_OK || outputs != 1 ||
      kiln_artifact_output_info(artifact, 0, &out) != KILN_OK || out.dtype != KILN_DTYPE_F32) {
    *error = "the artifact must have one input x: f32[N, K] and one f32 output (examples/mlp.graph)";
    return false;
  }
  sig->features = x.dims[1];
  sig->output = out.name;
  return true;
}

// Deterministic input of `rows` rows.
std::vector<float> make_input(const Signature& sig, int64_t rows) {
  std::vector<float> x(size_t(rows * sig.features));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 13) - 6) * 0.05f;
  return x;
}

std::string describe(const char* what, const std::string& device, kiln_status st) {
  return std::string(what) + " on " + device + ": " + kiln_status_name(st) + ": " + kiln_last_error_message();
}

// Binds x for `rows` rows; runs synchronously, or asynchronously and waits; reads the output.
// Returns false (with `error`) on any failing call.
bool run_session(kiln_session* session, const Signature& sig, int64_t rows, bool async,
                 std::vector<uint8_t>* output, std::string* error, const std::string& device) {
  const std::vector<float> x = make_input(sig, rows);
  const int64_t dims[2] = {rows, sig.features};
  kiln_status st = kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, x.data(), x.size() * sizeof(float));
  if (st != KILN_OK) return *error = describe("set_input", device, st), false;
  if (async) {
    kiln_event* event = nullptr;
    if ((st = kiln_session_run_async(session, &event)) != KILN_OK) return *error = describe("run_async", device, st), false;
    st = kiln_event_wait(event);
    kiln_event_destroy(event);
    if (st != KILN_OK) return *error = describe("event_wait", device, st), false;
  } else if ((st = kiln_session_run(session)) != KILN_OK) {
    return *error = describe("run", device, st), false;
  }
  const void* data = nullptr;
  size_t bytes = 0;
  if ((st = kiln_session_get_output(session, sig.output.c_str(), &data, &bytes)) != KILN_OK)
    return *error = describe("get_output", device, st), false;
  const auto* p = static_cast<const uint8_t*>(data);
  output->assign(p, p + bytes);
  return true;
}

// One device under test and its expected output bytes per batch size (written before the
// threads start, read-only afterwards).
struct DeviceCase {
  std::string id;
  std::vector<std::vector<uint8_t>> expected;  // [batch index]
};

// Creates a session on `device`, runs batch `batch`, checks the bytes, destroys it.
void run_and_check(kiln_artifact* artifact, const Signature& sig, const DeviceCase& device, size_t batch,
                   bool async, Failures& failures, const std::string& where) {
  kiln_session* session = nullptr;
  kiln_status st = kiln_session_create(artifact, device.id.c_str(), &session);
  if (st != KILN_OK) return failures.add(where + ": " + describe("session_create", device.id, st));
  std::vector<uint8_t> output;
  std::string error;
  if (!run_session(session, sig, kBatchSizes[batch], async, &output, &error, device.id))
    failures.add(where + ": " + error);
  else if (output != device.expected[batch])
    failures.add(where + ": " + device.id + ": batch " + std::to_string(kBatchSizes[batch]) +
                 " differs from the single-threaded run");
  kiln_session_destroy(session);
}

void shared_artifact_phase(kiln_artifact* artifact, const Signature& sig, const std::vector<DeviceCase>& devices,
                           int threads, int rounds, Failures& failures) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const std::string where = "shared artifact, thread " + std::to_string(t);
      // A long-lived session of this thread, run between the short-lived ones.
      const DeviceCase& home = devices[size_t(t) % devices.size()];
      kiln_session* session = nullptr;
      kiln_status st = kiln_session_create(artifact, home.id.c_str(), &session);
      if (st != KILN_OK) return failures.add(where + ": " + describe("session_create", home.id, st));
      for (int r = 0; r < rounds; ++r) {
        const DeviceCase& device = devices[size_t(t + r) % devices.size()];
        const size_t batch = size_t(t * 3 + r) % kBatchCount;
        run_and_check(artifact, sig, device, batch, (t + r) % 2 == 1, failures, where);
        std::vector<uint8_t> output;
        std::string error;
        if (!run_session(session, sig, kBatchSizes[batch], r % 2 == 0, &output, &error, home.id))
          failures.add(where + ", long-lived session: " + error);
        else if (output != home.expected[batch])
          failures.add(where + ", long-lived session: " + home.id + " differs from the single-threaded run");
      }
      kiln_session_destroy(session);
    });
  }
  for (std::thread& w : workers) w.join();
}

void concurrent_load_phase(const char* path, const Signature& sig, const std::vector<DeviceCase>& devices,
                           int threads, Failures& failures) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const std::string where = "concurrent load, thread " + std::to_string(t);
      const DeviceCase& device = devices[size_t(t) % devices.size()];
      kiln_artifact* artifact = nullptr;
      kiln_status st = kiln_artifact_load_file(path, &artifact);
      if (st != KILN_OK) return failures.add(where + ": " + describe("artifact_load_file", device.id, st));
      kiln_session* session = nullptr;
      st = kiln_session_create(artifact, device.id.c_str(), &session);
      if (st != KILN_OK) {
        kiln_artifact_destroy(artifact);
        return failures.add(where + ": " + describe("session_create", device.id, st));
      }
      const size_t batch = size_t(t) % kBatchCount;
      std::vector<uint8_t> output;
      std::string error;
      for (int pass = 0; pass < 2; ++pass) {
        // The second pass runs after the artifact is destroyed: the session keeps what it needs.
        if (pass == 1) kiln_artifact_destroy(artifact);
        if (!run_session(session, sig, kBatchSizes[batch], pass == 1, &output, &error, device.id))
          failures.add(where + (pass ? ", after artifact_destroy: " : ": ") + error);
        else if (output != device.expected[batch])
          failures.add(where + ": " + device.id + " differs from the single-threaded run");
      }
      kiln_session_destroy(session);
    });
  }
  for (std::thread& w : workers) w.join();
}

void teardown_in_flight_phase(kiln_artifact* artifact, const Signature& sig, const std::vector<DeviceCase>& devices,
                              int threads, Failures& failures) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const std::string where = "teardown in flight, thread " + std::to_string(t);
      const DeviceCase& device = devices[size_t(t) % devices.size()];
      const std::vector<float> x = make_input(sig, 3);
      const int64_t dims[2] = {3, sig.features};
      for (int variant = 0; variant < 2; ++variant) {
        kiln_session* session = nullptr;
        kiln_status st = kiln_session_create(artifact, device.id.c_str(), &session);
        if (st != KILN_OK) return failures.add(where + ": " + describe("session_create", device.id, st));
        kiln_event* event = nullptr;
        st = kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, x.data(), x.size() * sizeof(float));
        if (st == KILN_OK) st = kiln_session_run_async(session, &event);
        if (st != KILN_OK) failures.add(where + ": " + describe("run_async", device.id, st));
        if (variant == 0) {
          // The session goes first: destroy waits for the run; the event stays valid.
          kiln_session_destroy(session);
          if (event && (st = kiln_event_wait(event)) != KILN_OK)
            failures.add(where + ": " + describe("event_wait after session_destroy", device.id, st));
          kiln_event_destroy(event);
        } else {
          // The event goes first, never waited on: destroy waits for it.
          kiln_event_destroy(event);
          kiln_session_destroy(session);
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
}

void error_message_phase(kiln_artifact* artifact, int threads, Failures& failures) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      kiln_session* session = nullptr;
      const std::string device = "no-such-driver:" + std::to_string(t);
      for (int r = 0; r < 20; ++r) {
        kiln_status st = kiln_session_create(artifact, device.c_str(), &session);
        const std::string message = kiln_last_error_message();
        if (st == KILN_OK) {
          kiln_session_destroy(session);
          return failures.add("error messages: a session on " + device + " was created");
        }
        if (message.find(device) == std::string::npos)
          return failures.add("error messages, thread " + std::to_string(t) + ": expected a message naming " +
                              device + ", got: " + message);
      }
    });
  }
  for (std::thread& w : workers) w.join();
}

int parse_count(const char* arg, const char* prefix, int* out) {
  const size_t n = std::strlen(prefix);
  if (std::strncmp(arg, prefix, n) != 0) return 0;
  char* end = nullptr;
  const long v = std::strtol(arg + n, &end, 10);
  if (*end != '\0' || v < 1 || v > 256) return -1;
  *out = int(v);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = nullptr;
  int threads = 8, rounds = 6;
  for (int i = 1; i < argc; ++i) {
    int parsed = parse_count(argv[i], "--threads=", &threads);
    if (parsed == 0) parsed = parse_count(argv[i], "--rounds=", &rounds);
    if (parsed < 0 || (parsed == 0 && (path || argv[i][0] == '-'))) {
      std::fprintf(stderr, "usage: %s ARTIFACT [--threads=1..256] [--rounds=1..256]\n", argv[0]);
      return 2;
    }
    if (parsed == 0) path = argv[i];
  }
  if (!path) {
    std::fprintf(stderr, "usage: %s ARTIFACT [--threads=1..256] [--rounds=1..256]\n", argv[0]);
    return 2;
  }
  kiln_artifact* artifact = nullptr;
  kiln_status st = kiln_artifact_load_file(path, &artifact);
  if (st != KILN_OK) {
    std::fprintf(stderr, "error: %s: %s\n", path, kiln_last_error_message());
    return 1;
  }
  Signature sig;
  std::string error;
  if (!read_signature(artifact, &sig, &error)) {
    std::fprintf(stderr, "error: %s: %s\n", path, error.c_str());
    kiln_artifact_destroy(artifact);
    return 1;
  }
  // The devices under test (a driver named in KILN_REQUIRE_DRIVERS without a device fails here)
  // and their expected bytes, from one thread.
  size_t count = 0;
  if ((st = kiln_device_count(&count)) != KILN_OK) {
    std::fprintf(stderr, "error: %s\n", kiln_last_error_message());
    kiln_artifact_destroy(artifact);
    return 1;
  }
  std::vector<DeviceCase> devices;
  for (size_t d = 0; d < count; ++d) {
    kiln_device_info info;
    int can_run = 0;
    if (kiln_device_get_info(d, &info) != KILN_OK ||
        kiln_artifact_supports_device(artifact, info.id, &can_run) != KILN_OK) {
      std::fprintf(stderr, "error: device %zu: %s\n", d, kiln_last_error_message());
      kiln_artifact_destroy(artifact);
      return 1;
    }
    if (!can_run) {
      std::printf("device %s: not tested: %s\n", info.id, kiln_last_error_message());
      continue;
    }
    DeviceCase device{info.id, {}};
    kiln_session* session = nullptr;
    if ((st = kiln_session_create(artifact, info.id, &session)) != KILN_OK) {
      std::fprintf(stderr, "error: %s\n", describe("session_create", device.id, st).c_str());
      kiln_artifact_destroy(artifact);
      return 1;
    }
    for (int64_t rows : kBatchSizes) {
      std::vector<uint8_t> output;
      if (!run_session(session, sig, rows, false, &output, &error, device.id)) {
        std::fprintf(stderr, "error: single-threaded run: %s\n", error.c_str());
        kiln_session_destroy(session);
        kiln_artifact_destroy(artifact);
        return 1;
      }
      device.expected.push_back(std::move(output));
    }
    kiln_session_destroy(session);
    std::printf("device %s: tested\n", device.id.c_str());
    devices.push_back(std::move(device));
  }

  Failures failures;
  shared_artifact_phase(artifact, sig, devices, threads, rounds, failures);
  concurrent_load_phase(path, sig, devices, threads, failures);
  teardown_in_flight_phase(artifact, sig, devices, threads, failures);
  error_message_phase(artifact, threads, failures);
  kiln_artifact_destroy(artifact);

  for (const std::string& f : failures.messages) std::fprintf(stderr, "FAIL: %s\n", f.c_str());
  if (!failures.messages.empty()) {
    std::fprintf(stderr, "concurrency stress: %zu failures\n", failures.messages.size());
    return 1;
  }
  std::printf("concurrency stress: PASS (%zu devices, %d threads, %d rounds)\n", devices.size(), threads, rounds);
  return 0;
}
