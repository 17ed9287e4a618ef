// The C API under concurrency, and the C++ wrapper (kiln/runtime.hpp).
//
// N threads x M runs: every thread creates its own session on one shared kiln_artifact and runs
// it M times; every result must be byte-identical to a single-threaded run on the same device.
// It iterates over every listed device; devices whose driver the artifact has no kernels for are
// skipped with the reason printed (the sample artifact carries no compiled kernels, so GPU-API
// devices are exercised by tests/embed, which compiles examples/mlp.graph for every target).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/runtime.hpp"
#include "test_artifact_util.h"

using namespace kiln::artifact::testing;

namespace {

std::vector<uint8_t> sample_bytes() {
  SampleModel model = sample_model();
  return write_or_fail(model.graph, model.plan);
}

struct RunResult {
  kiln_status status = KILN_OK;
  std::string error;
  std::vector<std::vector<uint8_t>> outputs;  // r, s bytes
};

// One run of the sample model with a batch of `rows` deterministic rows.
RunResult run_once(kiln_session* session, int64_t rows) {
  RunResult result;
  std::vector<float> x(size_t(rows) * 4), y(size_t(rows) * 4);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(int(i * 7 % 11) - 5) * 0.37f;
    y[i] = float(int(i * 3 % 5) - 1) * 1.13f;
  }
  const int64_t dims[2] = {rows, 4};
  auto fail = [&](kiln_status st) {
    result.status = st;
    result.error = kiln_last_error_message();
    return result;
  };
  kiln_status st = kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, x.data(), x.size() * 4);
  if (st != KILN_OK) return fail(st);
  if ((st = kiln_session_set_input(session, "y", KILN_DTYPE_F32, dims, 2, y.data(), y.size() * 4)) != KILN_OK)
    return fail(st);
  if ((st = kiln_session_run(session)) != KILN_OK) return fail(st);
  for (const char* name : {"r", "s"}) {
    const void* data = nullptr;
    size_t bytes = 0;
    if ((st = kiln_session_get_output(session, name, &data, &bytes)) != KILN_OK) return fail(st);
    const auto* p = static_cast<const uint8_t*>(data);
    result.outputs.emplace_back(p, p + bytes);
  }
  return result;
}

}  // namespace

TEST_CASE("c_api: N threads x M runs give results identical to one thread, on every device") {
  std::vector<uint8_t> bytes = sample_bytes();
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  size_t devices = 0;
  REQUIRE(kiln_device_count(&devices) == KILN_OK);
  constexpr int kThreads = 4;
  constexpr int kRuns = 6;
  int devices_run = 0;
  for (size_t d = 0; d < devices; ++d) {
    kiln_device_info info;
    REQUIRE(kiln_device_get_info(d, &info) == KILN_OK);
    const std::string id = info.id;
    CAPTURE(id);
    int can_run = 0;
    REQUIRE(kiln_artifact_supports_device(artifact, id.c_str(), &can_run) == KILN_OK);
    if (!can_run) {
      MESSAGE("c_api threads: skipping device " << id << ": " << std::string(kiln_last_error_message()));
      continue;
    }
    kiln_session* single = nullptr;
    REQUIRE(kiln_session_create(artifact, id.c_str(), &single) == KILN_OK);
    RunResult expected = run_once(single, 37);
    kiln_session_destroy(single);
    REQUIRE_MESSAGE(expected.status == KILN_OK, expected.error);

    std::vector<std::vector<RunResult>> results(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        kiln_session* session = nullptr;
        kiln_status st = kiln_session_create(artifact, id.c_str(), &session);
        if (st != KILN_OK) {
          results[t].push_back(RunResult{st, kiln_last_error_message(), {}});
          return;
        }
        for (int r = 0; r < kRuns; ++r) results[t].push_back(run_once(session, 37));
        kiln_session_destroy(session);
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      REQUIRE(results[t].size() == size_t(kRuns));
      for (const RunResult& r : results[t]) {
        REQUIRE_MESSAGE(r.status == KILN_OK, r.error);
        CHECK(r.outputs == expected.outputs);
      }
    }
    ++devices_run;
  }
  CHECK(devices_run >= 1);  // the reference device always runs
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: async runs of many sessions overlap and each event delivers its own results") {
  std::vector<uint8_t> bytes = sample_bytes();
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  constexpr int kSessions = 5;
  std::vector<kiln_session*> sessions(kSessions, nullptr);
  std::vector<kiln_event*> events(kSessions, nullptr);
  std::vector<std::vector<float>> x(kSessions);
  for (int i = 0; i < kSessions; ++i) {
    REQUIRE(kiln_session_create(artifact, nullptr, &sessions[i]) == KILN_OK);
    x[i].assign(size_t(i + 1) * 4, float(i + 1));  // batch i+1, every element i+1
    const int64_t dims[2] = {i + 1, 4};
    std::vector<float> ones(x[i].size(), 1.0f);
    REQUIRE(kiln_session_set_input(sessions[i], "x", KILN_DTYPE_F32, dims, 2, x[i].data(), x[i].size() * 4) == KILN_OK);
    REQUIRE(kiln_session_set_input(sessions[i], "y", KILN_DTYPE_F32, dims, 2, ones.data(), ones.size() * 4) == KILN_OK);
    REQUIRE(kiln_session_run_async(sessions[i], &events[i]) == KILN_OK);
  }
  // Wait in reverse order, from other threads.
  std::vector<kiln_status> waited(kSessions, KILN_INTERNAL);
  std::vector<std::thread> waiters;
  for (int i = kSessions - 1; i >= 0; --i)
    waiters.emplace_back([&, i] { waited[i] = kiln_event_wait(events[i]); });
  for (std::thread& t : waiters) t.join();
  for (int i = 0; i < kSessions; ++i) {
    CHECK(waited[i] == KILN_OK);
    int64_t dims[2];
    size_t rank = 0;
    REQUIRE(kiln_session_output_shape(sessions[i], "s", dims, 2, &rank) == KILN_OK);
    CHECK(dims[0] == i + 1);
    std::vector<float> s(size_t(i + 1));
    REQUIRE(kiln_session_read_output(sessions[i], "s", s.data(), s.size() * 4) == KILN_OK);
    // w = {0.5, -1, 2, 0.25}: s = sum relu(v + w) with v = i + 1.
    const float v = float(i + 1);
    const float want = (v + 0.5f) + std::max(0.0f, v - 1.0f) + (v + 2.0f) + (v + 0.25f);
    for (float got : s) CHECK(got == doctest::Approx(want));
    kiln_event_destroy(events[i]);
    kiln_session_destroy(sessions[i]);
  }
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: the C++ wrapper owns handles and reports statuses without throwing") {
  std::vector<uint8_t> bytes = sample_bytes();
  kiln::rt::Result<kiln::rt::Artifact> artifact = kiln::rt::Artifact::load_memory(bytes.data(), bytes.size());
  REQUIRE(artifact.ok());
  std::vector<kiln::rt::TensorInfo> inputs = artifact.value().inputs();
  REQUIRE(inputs.size() == 2);
  CHECK(inputs[0].name == "x");
  CHECK(inputs[0].dims == std::vector<int64_t>{-1, 4});
  CHECK(inputs[0].symbols == std::vector<std::string>{"N", ""});
  CHECK(artifact.value().outputs().size() == 2);
  CHECK(artifact.value().targets().empty());

  kiln::rt::Result<kiln::rt::Artifact> broken = kiln::rt::Artifact::load_memory(bytes.data(), 10);
  CHECK_FALSE(broken.ok());
  CHECK(broken.status().code() == KILN_CORRUPT);
  CHECK(broken.status().to_string().rfind("CORRUPT: ", 0) == 0);

  kiln::rt::Result<std::vector<kiln::rt::DeviceInfo>> devices = kiln::rt::list_devices();
  REQUIRE(devices.ok());
  CHECK(devices.value().back().id == "reference");

  kiln::rt::Result<kiln::rt::Session> session = kiln::rt::Session::create(artifact.value(), "reference");
  REQUIRE(session.ok());
  kiln::rt::Session s = std::move(session.value());
  CHECK(s.device_id() == "reference");
  CHECK(s.set_input("x", {2, 4}, std::vector<float>(8, 1.0f)).ok());
  kiln::rt::Status wrong = s.set_input("y", {2, 5}, std::vector<float>(10, 1.0f));
  CHECK(wrong.code() == KILN_INVALID_ARGUMENT);
  CHECK(wrong.message() == "input 'y': expected f32[N, 4], given f32[2, 5] (dimension 1 is 5 instead of 4)");

  kiln::rt::Result<kiln::rt::Buffer> y = kiln::rt::Buffer::create(s, 32);
  REQUIRE(y.ok());
  CHECK(y.value().size() == 32);
  std::vector<float> twos(8, 2.0f);
  REQUIRE(y.value().write(0, twos.data(), 32).ok());
  REQUIRE(s.set_input_buffer("y", KILN_DTYPE_F32, {2, 4}, y.value()).ok());
  REQUIRE(s.set_profiling(true).ok());
  kiln::rt::Result<kiln::rt::Event> event = s.run_async();
  REQUIRE(event.ok());
  REQUIRE(event.value().wait().ok());
  kiln::rt::Result<std::vector<int64_t>> shape = s.output_shape("s");
  REQUIRE(shape.ok());
  CHECK(shape.value() == std::vector<int64_t>{2});
  kiln::rt::Result<std::vector<uint8_t>> out = s.output_bytes("s");
  REQUIRE(out.ok());
  REQUIRE(out.value().size() == 8);
  float s0;
  std::memcpy(&s0, out.value().data(), 4);
  // relu((1 + w) * 2) summed: (1.5 + 0 + 3 + 1.25) * 2
  CHECK(s0 == doctest::Approx(11.5f));
  CHECK(s.profile().size() == 2);
  CHECK_FALSE(s.output_bytes("nope").ok());

  kiln::rt::Session moved = std::move(s);
  CHECK_FALSE(s);  // NOLINT: moved-from is empty
  CHECK(moved);
  CHECK(moved.run().ok());
}
