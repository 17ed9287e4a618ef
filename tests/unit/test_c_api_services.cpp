// The C API's entry points for services (API level 2): format-version queries, the growable
// kiln_session_options, the application's allocator and CUDA stream, and the log callback. On
// the reference device with the unit tests' sample model (x, y: f32[N, 4] -> r, s).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "test_artifact_util.h"

using namespace kiln::artifact::testing;

namespace {

kiln_artifact* load_sample() {
  SampleModel model = sample_model();
  std::vector<uint8_t> bytes = write_or_fail(model.graph, model.plan);
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  return artifact;
}

// Runs the sample on `session` with 3 rows; returns r.
std::vector<float> run_sample(kiln_session* session) {
  const std::vector<float> x(12, 1.0f), y(12, 2.0f);
  const int64_t dims[2] = {3, 4};
  REQUIRE(kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, x.data(), 48) == KILN_OK);
  REQUIRE(kiln_session_set_input(session, "y", KILN_DTYPE_F32, dims, 2, y.data(), 48) == KILN_OK);
  REQUIRE(kiln_session_run(session) == KILN_OK);
  std::vector<float> r(12);
  REQUIRE(kiln_session_read_output(session, "r", r.data(), 48) == KILN_OK);
  return r;
}

// relu((1 + w) * 2) per column, w = {0.5, -1, 2, 0.25} (test_artifact_util.h's sample).
const float kExpectedRow[4] = {3.0f, 0.0f, 6.0f, 2.5f};

// A host allocator that counts what it hands out (the reference device's memory is host memory).
struct CountingAllocator {
  std::mutex mutex;
  std::map<void*, size_t> live;
  size_t allocations = 0;
  bool fail = false;
  static int allocate(void* self, size_t bytes, void** native) {
    auto* a = static_cast<CountingAllocator*>(self);
    std::lock_guard<std::mutex> lock(a->mutex);
    if (a->fail) return 1;
    *native = std::malloc(bytes);
    a->live[*native] = bytes;
    ++a->allocations;
    return 0;
  }
  static void deallocate(void* self, void* native, size_t bytes) {
    auto* a = static_cast<CountingAllocator*>(self);
    std::lock_guard<std::mutex> lock(a->mutex);
    REQUIRE(a->live.count(native) == 1);
    CHECK(a->live[native] == bytes);
    a->live.erase(native);
    std::free(native);
  }
  kiln_allocator c() { return {this, &CountingAllocator::allocate, &CountingAllocator::deallocate}; }
};

}  // namespace

TEST_CASE("c_api services: format versions and producer") {
  uint32_t oldest = 0, newest = 0;
  kiln_artifact_format_versions(&oldest, &newest);
  CHECK(oldest >= 1);
  CHECK(oldest <= newest);
  kiln_artifact_format_versions(nullptr, nullptr);  // either may be NULL
  kiln_artifact* artifact = load_sample();
  uint32_t version = 0;
  REQUIRE(kiln_artifact_format_version(artifact, &version) == KILN_OK);
  CHECK(version == newest);
  const char* producer = nullptr;
  REQUIRE(kiln_artifact_producer(artifact, &producer) == KILN_OK);
  CHECK(producer != nullptr);
  CHECK(std::strlen(producer) > 0);
  CHECK(kiln_artifact_format_version(nullptr, &version) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_producer(artifact, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(KILN_RUNTIME_API_VERSION >= 2);
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api services: session options grow without breaking older or newer callers") {
  kiln_artifact* artifact = load_sample();
  kiln_session_options options;
  std::memset(&options, 0x5a, sizeof options);
  kiln_session_options_init(&options);
  CHECK(options.struct_size == sizeof options);
  CHECK(options.device_id == nullptr);
  CHECK(options.cuda_stream == nullptr);
  CHECK(options.allocator == nullptr);

  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create_ex(artifact, nullptr, &session) == KILN_OK);  // NULL: defaults
  kiln_session_destroy(session);
  options.device_id = "reference";
  REQUIRE(kiln_session_create_ex(artifact, &options, &session) == KILN_OK);
  const char* id = nullptr;
  REQUIRE(kiln_session_device_id(session, &id) == KILN_OK);
  CHECK(std::string(id) == "reference");
  CHECK(run_sample(session)[2] == doctest::Approx(kExpectedRow[2]));
  kiln_session_destroy(session);

  SUBCASE("a struct_size too small for the first version is refused") {
    kiln_session_options small = options;
    small.struct_size = sizeof(size_t);
    CHECK(kiln_session_create_ex(artifact, &small, &session) == KILN_INVALID_ARGUMENT);
    CHECK(std::string(kiln_last_error_message()).find("struct_size") != std::string::npos);
    small.struct_size = size_t(1) << 40;  // an uninitialized struct: refused, its "tail" not read
    CHECK(kiln_session_create_ex(artifact, &small, &session) == KILN_INVALID_ARGUMENT);
    CHECK(session == nullptr);
  }
  SUBCASE("a newer caller's larger struct: unknown fields zero is fine, set is refused") {
    struct Newer {
      kiln_session_options base;
      uint64_t future_field;
    } newer;
    std::memset(&newer, 0, sizeof newer);
    kiln_session_options_init(&newer.base);
    newer.base.struct_size = sizeof newer;
    newer.base.device_id = "reference";
    REQUIRE(kiln_session_create_ex(artifact, &newer.base, &session) == KILN_OK);
    kiln_session_destroy(session);
    session = nullptr;
    newer.future_field = 7;
    CHECK(kiln_session_create_ex(artifact, &newer.base, &session) == KILN_INVALID_ARGUMENT);
    CHECK(std::string(kiln_last_error_message()).find("does not know") != std::string::npos);
  }
  SUBCASE("a CUDA stream on a device without CUDA is unsupported") {
    int fake_stream = 0;
    options.cuda_stream = &fake_stream;
    CHECK(kiln_session_create_ex(artifact, &options, &session) == KILN_UNSUPPORTED);
    CHECK(std::string(kiln_last_error_message()).find("CUDA stream") != std::string::npos);
  }
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api services: the application's allocator provides every session buffer") {
  kiln_artifact* artifact = load_sample();
  CountingAllocator counting;
  kiln_allocator allocator = counting.c();
  kiln_session_options options;
  kiln_session_options_init(&options);
  options.device_id = "reference";
  options.allocator = &allocator;
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create_ex(artifact, &options, &session) == KILN_OK);
  const std::vector<float> r = run_sample(session);
  for (size_t i = 0; i < r.size(); ++i) CHECK(r[i] == doctest::Approx(kExpectedRow[i % 4]));
  CHECK(counting.allocations >= 3);  // the probe at creation, the two inputs, the outputs
  kiln_buffer* buffer = nullptr;
  const size_t before = counting.allocations;
  REQUIRE(kiln_buffer_create(session, 64, &buffer) == KILN_OK);
  CHECK(counting.allocations == before + 1);
  kiln_session_destroy(session);
  CHECK(counting.live.size() == 1);  // the buffer outlives its session
  kiln_buffer_destroy(buffer);
  CHECK(counting.live.empty());  // everything was given back

  SUBCASE("an allocator that fails is KILN_OUT_OF_MEMORY at creation") {
    counting.fail = true;
    session = nullptr;
    CHECK(kiln_session_create_ex(artifact, &options, &session) == KILN_OUT_OF_MEMORY);
    CHECK(std::string(kiln_last_error_message()).find("allocator") != std::string::npos);
    CHECK(session == nullptr);
  }
  SUBCASE("an allocator without its functions is refused") {
    kiln_allocator broken = {nullptr, nullptr, &CountingAllocator::deallocate};
    options.allocator = &broken;
    CHECK(kiln_session_create_ex(artifact, &options, &session) == KILN_INVALID_ARGUMENT);
  }
  kiln_artifact_destroy(artifact);
}

namespace {
struct LogRecord {
  std::mutex mutex;
  std::vector<std::pair<kiln_log_level, std::string>> messages;
  static void sink(void* self, kiln_log_level level, const char* message) {
    auto* r = static_cast<LogRecord*>(self);
    std::lock_guard<std::mutex> lock(r->mutex);
    r->messages.emplace_back(level, message);
  }
  bool has(const std::string& text) {
    for (const auto& [level, m] : messages)
      if (m.find(text) != std::string::npos) return true;
    return false;
  }
};
}  // namespace

TEST_CASE("c_api services: the log callback receives the runtime's messages") {
  kiln_artifact* artifact = load_sample();
  LogRecord record;
  kiln_set_log_callback(&LogRecord::sink, &record, KILN_LOG_INFO);
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  kiln_session_destroy(session);
  CHECK(record.has("session on reference"));
  record.messages.clear();
  kiln_set_log_callback(&LogRecord::sink, &record, KILN_LOG_WARNING);  // info is filtered out now
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  kiln_session_destroy(session);
  CHECK(record.messages.empty());
  kiln_set_log_callback(nullptr, nullptr, KILN_LOG_WARNING);  // back to the default sink
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  kiln_session_destroy(session);
  CHECK(record.messages.empty());
  kiln_artifact_destroy(artifact);
}

#include "test_compile_util.h"

TEST_CASE("c_api services: threads split the reference interpreter's work, with the same results") {
  // Large enough that the matrix product and the convolution are split (64K multiply-adds a thread).
  const char* text = R"(
graph heavy(x: f32[N, 256], img: f32[2, 8, 24, 24]) -> (y: f32[N, 256], z: f32[2, 16, 24, 24]) {
  w = const f32[256, 256] 0.01
  y = tanh(matmul(x, w))
  k = const f32[16, 8, 3, 3] 0.05
  z = conv2d(img, k, pads=[1, 1, 1, 1])
}
)";
  const std::vector<uint8_t> bytes = kiln::testing::compile_for_every_target(text);
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  std::vector<float> x(64 * 256), img(2 * 8 * 24 * 24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 101) - 50) / 50.0f;
  for (size_t i = 0; i < img.size(); ++i) img[i] = float(int(i * 13 % 29) - 14) / 14.0f;
  auto run_with = [&](uint32_t threads) {
    kiln_session_options options;
    kiln_session_options_init(&options);
    options.device_id = "reference";
    options.threads = threads;
    kiln_session* session = nullptr;
    REQUIRE(kiln_session_create_ex(artifact, &options, &session) == KILN_OK);
    const int64_t xd[2] = {64, 256}, id[4] = {2, 8, 24, 24};
    REQUIRE(kiln_session_set_input(session, "x", KILN_DTYPE_F32, xd, 2, x.data(), x.size() * 4) == KILN_OK);
    REQUIRE(kiln_session_set_input(session, "img", KILN_DTYPE_F32, id, 4, img.data(), img.size() * 4) == KILN_OK);
    REQUIRE(kiln_session_run(session) == KILN_OK);
    std::vector<float> out(64 * 256 + 2 * 16 * 24 * 24);
    REQUIRE(kiln_session_read_output(session, "y", out.data(), 64 * 256 * 4) == KILN_OK);
    REQUIRE(kiln_session_read_output(session, "z", out.data() + 64 * 256, 2 * 16 * 24 * 24 * 4) == KILN_OK);
    kiln_session_destroy(session);
    return out;
  };
  const std::vector<float> one = run_with(0);
  CHECK(one[0] != 0.0f);
  for (uint32_t threads : {1u, 2u, 3u, 7u, uint32_t(KILN_THREADS_ALL)}) {
    CAPTURE(threads);
    const std::vector<float> many = run_with(threads);
    CHECK(std::memcmp(many.data(), one.data(), one.size() * 4) == 0);
  }
  kiln_artifact_destroy(artifact);
}

#include "compiler/compile.h"

TEST_CASE("c_api services: an artifact for no present device is an error, not a silent reference run") {
  // A cuda-only artifact where no CUDA device is present (CI, the development machine).
  const std::vector<std::string>& targets = kiln::compiler::build_targets();
  if (std::find(targets.begin(), targets.end(), "cuda") == targets.end()) {
    MESSAGE("skipped: this build has no cuda target");
    return;
  }
  size_t count = 0;
  REQUIRE(kiln_device_count(&count) == KILN_OK);
  for (size_t i = 0; i < count; ++i) {
    kiln_device_info info;
    REQUIRE(kiln_device_get_info(i, &info) == KILN_OK);
    if (std::string(info.driver) == "cuda") {
      MESSAGE("skipped: a CUDA device is present");
      return;
    }
  }
  kiln::Diagnostics diags;
  kiln::Result<kiln::ir::Graph> graph = kiln::compiler::read_graph_text(
      "graph g(x: f32[4]) -> (y: f32[4]) {\n  y = exp(x)\n}\n", "g.graph", ".", diags);
  REQUIRE(graph.is_ok());
  kiln::compiler::CompileOptions options;
  options.targets = std::vector<std::string>{"cuda"};
  options.use_cache = false;
  kiln::Result<std::vector<uint8_t>> bytes = kiln::compiler::compile_to_artifact(std::move(graph).value(), options, diags);
  REQUIRE(bytes.is_ok());
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes->data(), bytes->size(), &artifact) == KILN_OK);
  int can_run = 1;
  REQUIRE(kiln_artifact_supports_device(artifact, nullptr, &can_run) == KILN_OK);
  CHECK(can_run == 0);
  CHECK(std::string(kiln_last_error_message()).find("kernels for cuda only") != std::string::npos);
  kiln_session* session = nullptr;
  CHECK(kiln_session_create(artifact, nullptr, &session) == KILN_UNAVAILABLE);
  CHECK(std::string(kiln_last_error_message()).find("kernels for cuda only") != std::string::npos);
  CHECK(session == nullptr);
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);  // asked for: it runs
  kiln_session_destroy(session);
  kiln_artifact_destroy(artifact);
}
