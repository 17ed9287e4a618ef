// The runtime's C API (runtime/include/kiln/runtime.h): every function, its error paths, NULL
// handles, messages, corrupted artifacts, device buffers used in place, async runs and events,
// profiling, and KILN_REQUIRE_DRIVERS. The artifact is the unit tests' sample model (x, y:
// f32[N, 4] -> r: f32[N, 4], s: f32[N]) written to memory; it runs on the reference device.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "test_artifact_util.h"

using namespace kiln::artifact::testing;

namespace {

std::vector<uint8_t> sample_bytes() {
  SampleModel model = sample_model();
  return write_or_fail(model.graph, model.plan);
}

kiln_artifact* load_sample_c() {
  std::vector<uint8_t> bytes = sample_bytes();
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  REQUIRE(artifact != nullptr);
  return artifact;  // the bytes were copied: `bytes` may go now
}

std::string last_error() { return kiln_last_error_message(); }

std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * float(i);
  return v;
}

// The sample model by hand: r = relu((x + w) * y), s = row sums of r.
void expected_outputs(const std::vector<float>& x, const std::vector<float>& y, std::vector<float>& r,
                      std::vector<float>& s) {
  const float w[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  const size_t rows = x.size() / 4;
  r.assign(x.size(), 0);
  s.assign(rows, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    float v = (x[i] + w[i % 4]) * y[i];
    r[i] = v > 0 ? v : 0;
    s[i / 4] += r[i];
  }
}

void set_xy(kiln_session* session, const std::vector<float>& x, const std::vector<float>& y) {
  const int64_t dims[2] = {int64_t(x.size() / 4), 4};
  REQUIRE(kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, x.data(), x.size() * 4) == KILN_OK);
  REQUIRE(kiln_session_set_input(session, "y", KILN_DTYPE_F32, dims, 2, y.data(), y.size() * 4) == KILN_OK);
}

std::vector<float> output_floats(kiln_session* session, const char* name) {
  const void* data = nullptr;
  size_t bytes = 0;
  REQUIRE(kiln_session_get_output(session, name, &data, &bytes) == KILN_OK);
  std::vector<float> out(bytes / 4);
  std::memcpy(out.data(), data, bytes);
  return out;
}

void check_floats(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]));
}

}  // namespace

TEST_CASE("c_api: status, dtype and version helpers") {
  CHECK(std::string(kiln_status_name(KILN_OK)) == "OK");
  CHECK(std::string(kiln_status_name(KILN_INVALID_ARGUMENT)) == "INVALID_ARGUMENT");
  CHECK(std::string(kiln_status_name(KILN_NOT_FOUND)) == "NOT_FOUND");
  CHECK(std::string(kiln_status_name(KILN_UNSUPPORTED)) == "UNSUPPORTED");
  CHECK(std::string(kiln_status_name(KILN_CORRUPT)) == "CORRUPT");
  CHECK(std::string(kiln_status_name(KILN_OUT_OF_MEMORY)) == "OUT_OF_MEMORY");
  CHECK(std::string(kiln_status_name(KILN_UNAVAILABLE)) == "UNAVAILABLE");
  CHECK(std::string(kiln_status_name(KILN_INTERNAL)) == "INTERNAL");
  CHECK(std::string(kiln_status_name(kiln_status(99))) == "UNKNOWN");
  CHECK(std::string(kiln_dtype_name(KILN_DTYPE_BF16)) == "bf16");
  CHECK(std::string(kiln_dtype_name(KILN_DTYPE_BOOL)) == "bool");
  CHECK(kiln_dtype_name(kiln_dtype(42)) == nullptr);
  CHECK(kiln_dtype_size(KILN_DTYPE_I64) == 8);
  CHECK(kiln_dtype_size(KILN_DTYPE_F16) == 2);
  CHECK(kiln_dtype_size(KILN_DTYPE_U8) == 1);
  CHECK(kiln_dtype_size(kiln_dtype(42)) == 0);
  CHECK(std::string(kiln_runtime_version()) == "0.1.0");

  // The last-error slot is per call that fails and survives successful calls (like errno).
  size_t count = 0;
  CHECK(kiln_device_count(nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "kiln_device_count: count is NULL");
  REQUIRE(kiln_device_count(&count) == KILN_OK);
  CHECK(last_error() == "kiln_device_count: count is NULL");
}

TEST_CASE("c_api: devices and drivers") {
  size_t count = 0;
  REQUIRE(kiln_device_count(&count) == KILN_OK);
  REQUIRE(count >= 1);
  bool found_reference = false;
  int previous_priority = 1 << 30;
  for (size_t i = 0; i < count; ++i) {
    kiln_device_info info;
    REQUIRE(kiln_device_get_info(i, &info) == KILN_OK);
    CHECK(info.priority <= previous_priority);  // fastest first
    previous_priority = info.priority;
    CHECK(std::strlen(info.id) > 0);
    CHECK(std::strlen(info.description) > 0);
    if (std::string(info.id) == "reference") {
      found_reference = true;
      CHECK(std::string(info.driver) == "reference");
      CHECK(info.type == KILN_DEVICE_CPU);
      CHECK(std::string(info.type_name) == "cpu");
      CHECK(std::string(info.description) == "Kiln reference interpreter");
      CHECK(info.priority == 0);
      CHECK(i == count - 1);  // the reference device comes last
    }
  }
  CHECK(found_reference);
  kiln_device_info info;
  CHECK(kiln_device_get_info(count, &info) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "device index " + std::to_string(count) + " is out of range (" +
                            std::to_string(count) + " devices)");
  CHECK(kiln_device_get_info(0, nullptr) == KILN_INVALID_ARGUMENT);

  size_t drivers = 0;
  REQUIRE(kiln_driver_count(&drivers) == KILN_OK);
  REQUIRE(drivers >= 1);
  bool reference_driver = false;
  for (size_t i = 0; i < drivers; ++i) {
    const char* name = nullptr;
    const char* reason = nullptr;
    REQUIRE(kiln_driver_get_info(i, &name, &reason) == KILN_OK);
    if (std::string(name) == "reference") {
      reference_driver = true;
      CHECK(std::string(reason).empty());
    }
  }
  CHECK(reference_driver);
  const char* name = nullptr;
  const char* reason = nullptr;
  CHECK(kiln_driver_get_info(drivers, &name, &reason) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_driver_get_info(0, nullptr, &reason) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_driver_count(nullptr) == KILN_INVALID_ARGUMENT);
}

TEST_CASE("c_api: KILN_REQUIRE_DRIVERS turns a missing driver into UNAVAILABLE") {
  const char* saved = std::getenv("KILN_REQUIRE_DRIVERS");
  std::string saved_value = saved ? saved : "";
  kiln_artifact* artifact = load_sample_c();
  size_t count = 0;

  setenv("KILN_REQUIRE_DRIVERS", "reference", 1);
  CHECK(kiln_device_count(&count) == KILN_OK);

  setenv("KILN_REQUIRE_DRIVERS", " reference , nosuchapi", 1);
  CHECK(kiln_device_count(&count) == KILN_UNAVAILABLE);
  CHECK(last_error().find("KILN_REQUIRE_DRIVERS requires the nosuchapi driver, which this build "
                          "does not have (drivers: reference") == 0);
  kiln_session* session = nullptr;
  CHECK(kiln_session_create(artifact, nullptr, &session) == KILN_UNAVAILABLE);
  CHECK(session == nullptr);
  CHECK(kiln_session_create(artifact, "reference", &session) == KILN_UNAVAILABLE);
  CHECK(last_error().find("nosuchapi") != std::string::npos);

  // A built-in driver without devices names its reason (here: any driver whose API is missing).
  size_t drivers = 0;
  REQUIRE(kiln_driver_count(&drivers) == KILN_OK);
  for (size_t i = 0; i < drivers; ++i) {
    const char* name = nullptr;
    const char* reason = nullptr;
    REQUIRE(kiln_driver_get_info(i, &name, &reason) == KILN_OK);
    if (std::string(reason).empty()) continue;
    setenv("KILN_REQUIRE_DRIVERS", name, 1);
    CHECK(kiln_device_count(&count) == KILN_UNAVAILABLE);
    CHECK(last_error() == std::string("KILN_REQUIRE_DRIVERS requires the ") + name +
                              " driver, which has no usable device: " + reason);
  }

  if (saved) setenv("KILN_REQUIRE_DRIVERS", saved_value.c_str(), 1);
  else unsetenv("KILN_REQUIRE_DRIVERS");
  CHECK(kiln_device_count(&count) == KILN_OK);
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: artifact loading and signature queries") {
  kiln_artifact* artifact = load_sample_c();
  size_t n = 0;
  REQUIRE(kiln_artifact_input_count(artifact, &n) == KILN_OK);
  CHECK(n == 2);
  REQUIRE(kiln_artifact_output_count(artifact, &n) == KILN_OK);
  CHECK(n == 2);
  kiln_tensor_info info;
  REQUIRE(kiln_artifact_input_info(artifact, 1, &info) == KILN_OK);
  CHECK(std::string(info.name) == "y");
  CHECK(info.dtype == KILN_DTYPE_F32);
  REQUIRE(info.rank == 2);
  CHECK(info.dims[0] == -1);
  CHECK(std::string(info.dim_symbols[0]) == "N");
  CHECK(info.dims[1] == 4);
  CHECK(info.dim_symbols[1] == nullptr);
  REQUIRE(kiln_artifact_output_info(artifact, 1, &info) == KILN_OK);
  CHECK(std::string(info.name) == "s");
  REQUIRE(info.rank == 1);
  CHECK(std::string(info.dim_symbols[0]) == "N");
  CHECK(kiln_artifact_input_info(artifact, 2, &info) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input index 2 is out of range (the artifact has 2)");
  CHECK(kiln_artifact_output_info(artifact, 7, &info) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_output_info(artifact, 0, nullptr) == KILN_INVALID_ARGUMENT);
  REQUIRE(kiln_artifact_target_count(artifact, &n) == KILN_OK);
  CHECK(n == 0);  // written without compiled kernels
  const char* target = nullptr;
  CHECK(kiln_artifact_target(artifact, 0, &target) == KILN_INVALID_ARGUMENT);

  int can_run = -1;
  REQUIRE(kiln_artifact_supports_device(artifact, "reference", &can_run) == KILN_OK);
  CHECK(can_run == 1);
  REQUIRE(kiln_artifact_supports_device(artifact, nullptr, &can_run) == KILN_OK);
  CHECK(can_run == 1);  // the default for an artifact without kernels is the reference device
  CHECK(kiln_artifact_supports_device(artifact, "cuda:9", &can_run) == KILN_NOT_FOUND);
  size_t devices = 0;
  REQUIRE(kiln_device_count(&devices) == KILN_OK);
  for (size_t i = 0; i < devices; ++i) {
    kiln_device_info d;
    REQUIRE(kiln_device_get_info(i, &d) == KILN_OK);
    if (std::string(d.driver) == "reference") continue;
    REQUIRE(kiln_artifact_supports_device(artifact, d.id, &can_run) == KILN_OK);
    CHECK(can_run == 0);
    CHECK(last_error() == "the artifact has no " + std::string(d.driver) + " kernels for device '" +
                              d.id + "' (it has kernels for: none)");
  }

  // NULL handles and out-pointers.
  CHECK(kiln_artifact_input_count(nullptr, &n) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_input_count(artifact, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_output_count(nullptr, &n) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_input_info(nullptr, 0, &info) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_output_info(nullptr, 0, &info) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_target_count(nullptr, &n) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_target(nullptr, 0, &target) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_supports_device(nullptr, "reference", &can_run) == KILN_INVALID_ARGUMENT);
  kiln_artifact_destroy(artifact);
  kiln_artifact_destroy(nullptr);  // no-op
}

TEST_CASE("c_api: corrupted, truncated, empty and missing artifacts are errors") {
  std::vector<uint8_t> bytes = sample_bytes();
  kiln_artifact* artifact = reinterpret_cast<kiln_artifact*>(0x1);  // must be reset to NULL

  CHECK(kiln_artifact_load_memory(bytes.data(), bytes.size() / 2, &artifact) == KILN_CORRUPT);
  CHECK(artifact == nullptr);
  CHECK_FALSE(last_error().empty());

  std::vector<uint8_t> damaged = bytes;
  for (size_t i = 0; i < 8 && i < damaged.size(); ++i) damaged[i] ^= 0x5a;
  CHECK(kiln_artifact_load_memory(damaged.data(), damaged.size(), &artifact) == KILN_CORRUPT);

  std::vector<uint8_t> newer = bytes;
  set_format_version(newer, 999);
  CHECK(kiln_artifact_load_memory(newer.data(), newer.size(), &artifact) == KILN_INVALID_ARGUMENT);
  CHECK(last_error().find("999") != std::string::npos);

  CHECK(kiln_artifact_load_memory(bytes.data(), 0, &artifact) != KILN_OK);
  CHECK(kiln_artifact_load_memory(nullptr, 0, &artifact) != KILN_OK);
  CHECK(kiln_artifact_load_memory(nullptr, 10, &artifact) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_load_memory(bytes.data(), bytes.size(), nullptr) == KILN_INVALID_ARGUMENT);

  CHECK(kiln_artifact_load_file("/nonexistent/dir/model.kiln", &artifact) == KILN_NOT_FOUND);
  CHECK(last_error().find("/nonexistent/dir/model.kiln") != std::string::npos);
  CHECK(kiln_artifact_load_file(nullptr, &artifact) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_artifact_load_file("x.kiln", nullptr) == KILN_INVALID_ARGUMENT);

  // Every truncation of a valid file fails cleanly (never a crash).
  for (size_t cut = 0; cut < bytes.size(); cut += 1 + bytes.size() / 40) {
    CHECK(kiln_artifact_load_memory(bytes.data(), cut, &artifact) != KILN_OK);
    CHECK(artifact == nullptr);
  }
}

TEST_CASE("c_api: a session runs on the default and the reference device") {
  kiln_artifact* artifact = load_sample_c();
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create(artifact, "", &session) == KILN_OK);
  const char* id = nullptr;
  REQUIRE(kiln_session_device_id(session, &id) == KILN_OK);
  CHECK(std::string(id) == "reference");  // the only device the sample artifact has kernels for
  kiln_artifact_destroy(artifact);  // the session keeps what it needs

  std::vector<float> x = ramp(12, -2.0f, 0.5f), y = ramp(12, 1.0f, 0.25f), r, s;
  expected_outputs(x, y, r, s);
  set_xy(session, x, y);
  CHECK(kiln_session_get_output(session, "r", reinterpret_cast<const void**>(&id), nullptr) ==
        KILN_INVALID_ARGUMENT);
  const void* data = nullptr;
  size_t bytes = 0;
  CHECK(kiln_session_get_output(session, "r", &data, &bytes) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "output 'r' is not computed yet (run the session, and wait for it)");
  REQUIRE(kiln_session_run(session) == KILN_OK);
  check_floats(output_floats(session, "r"), r);
  check_floats(output_floats(session, "s"), s);

  int64_t dims[4] = {0, 0, 0, 0};
  size_t rank = 0;
  REQUIRE(kiln_session_output_shape(session, "r", dims, 4, &rank) == KILN_OK);
  CHECK(rank == 2);
  CHECK(dims[0] == 3);
  CHECK(dims[1] == 4);
  CHECK(kiln_session_output_shape(session, "r", dims, 1, &rank) == KILN_INVALID_ARGUMENT);
  CHECK(rank == 2);  // still reports the rank needed
  CHECK(last_error() == "output 'r' has rank 2 but room for 1 dims was given");
  CHECK(kiln_session_output_shape(session, "q", dims, 4, &rank) == KILN_NOT_FOUND);
  CHECK(last_error() == "the artifact has no output named 'q' (its outputs: 'r', 's')");

  std::vector<float> s_copy(3);
  REQUIRE(kiln_session_read_output(session, "s", s_copy.data(), 12) == KILN_OK);
  check_floats(s_copy, s);
  CHECK(kiln_session_read_output(session, "s", s_copy.data(), 11) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "output 's' needs 12 bytes but the destination holds 11");
  CHECK(kiln_session_read_output(session, "s", nullptr, 12) == KILN_INVALID_ARGUMENT);

  // Another batch size rebinds N.
  x = ramp(20, 0.1f, 0.1f);
  y = ramp(20, 1.0f, 0.0f);
  expected_outputs(x, y, r, s);
  set_xy(session, x, y);
  REQUIRE(kiln_session_run(session) == KILN_OK);
  check_floats(output_floats(session, "s"), s);
  kiln_session_destroy(session);
  kiln_session_destroy(nullptr);  // no-op
}

TEST_CASE("c_api: session creation errors") {
  kiln_artifact* artifact = load_sample_c();
  kiln_session* session = reinterpret_cast<kiln_session*>(0x1);
  CHECK(kiln_session_create(nullptr, "reference", &session) == KILN_INVALID_ARGUMENT);
  CHECK(session == nullptr);
  CHECK(kiln_session_create(artifact, "reference", nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_create(artifact, "cuda:7", &session) == KILN_NOT_FOUND);
  CHECK(last_error().find("unknown device 'cuda:7'; available devices: ") == 0);
  CHECK(last_error().find("reference") != std::string::npos);

  // A device whose driver has no kernels in the artifact: UNSUPPORTED (or the driver's error).
  size_t devices = 0;
  REQUIRE(kiln_device_count(&devices) == KILN_OK);
  for (size_t i = 0; i < devices; ++i) {
    kiln_device_info d;
    REQUIRE(kiln_device_get_info(i, &d) == KILN_OK);
    if (std::string(d.driver) == "reference") continue;
    CAPTURE(d.id);
    CHECK(kiln_session_create(artifact, d.id, &session) == KILN_UNSUPPORTED);
    CHECK(session == nullptr);
    CHECK_FALSE(last_error().empty());
  }
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: input errors name the input, what was expected and what was given") {
  kiln_artifact* artifact = load_sample_c();
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  std::vector<float> x = ramp(12, 0, 1);
  const int64_t dims[2] = {3, 4};

  CHECK(kiln_session_set_input(session, "z", KILN_DTYPE_F32, dims, 2, x.data(), 48) == KILN_NOT_FOUND);
  CHECK(last_error() == "the artifact has no input named 'z' (its inputs: 'x', 'y')");
  CHECK(kiln_session_set_input(session, "x", KILN_DTYPE_I32, dims, 2, x.data(), 48) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'x': expected f32[N, 4], given i32[3, 4] (dtype i32 instead of f32)");
  CHECK(kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 1, x.data(), 12) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'x': expected f32[N, 4], given f32[3] (rank 1 instead of 2)");
  const int64_t wrong[2] = {3, 5};
  CHECK(kiln_session_set_input(session, "x", KILN_DTYPE_F32, wrong, 2, x.data(), 60) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'x': expected f32[N, 4], given f32[3, 5] (dimension 1 is 5 instead of 4)");
  CHECK(kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, x.data(), 44) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'x': 44 bytes given but f32[3, 4] needs 48");
  CHECK(kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, nullptr, 48) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'x': data is NULL");
  CHECK(kiln_session_set_input(session, "x", KILN_DTYPE_F32, nullptr, 2, x.data(), 48) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "dims is NULL but rank is 2");
  const int64_t negative[2] = {-3, 4};
  CHECK(kiln_session_set_input(session, "x", KILN_DTYPE_F32, negative, 2, x.data(), 48) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "dimension 0 is negative (-3)");
  CHECK(kiln_session_set_input(session, "x", kiln_dtype(77), dims, 2, x.data(), 48) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'x': unknown dtype value 77");
  CHECK(kiln_session_set_input(session, nullptr, KILN_DTYPE_F32, dims, 2, x.data(), 48) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_set_input(nullptr, "x", KILN_DTYPE_F32, dims, 2, x.data(), 48) == KILN_INVALID_ARGUMENT);

  REQUIRE(kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, x.data(), 48) == KILN_OK);
  CHECK(kiln_session_run(session) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'y' (f32[N, 4]) was not set");
  const int64_t dims2[2] = {2, 4};
  REQUIRE(kiln_session_set_input(session, "y", KILN_DTYPE_F32, dims2, 2, x.data(), 32) == KILN_OK);
  CHECK(kiln_session_run(session) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'y': expected f32[N, 4], given f32[2, 4]: symbol N is 2 here but 3 in input 'x'");
  kiln_session_destroy(session);
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: outputs bound to caller host memory") {
  kiln_artifact* artifact = load_sample_c();
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  std::vector<float> x = ramp(8, -1.0f, 0.3f), y = ramp(8, 0.5f, 0.1f), r, s;
  expected_outputs(x, y, r, s);
  set_xy(session, x, y);
  std::vector<float> r_out(8, -7.0f), s_small(1);
  REQUIRE(kiln_session_set_output_host(session, "r", r_out.data(), r_out.size() * 4) == KILN_OK);
  REQUIRE(kiln_session_run(session) == KILN_OK);
  check_floats(r_out, r);
  check_floats(output_floats(session, "s"), s);  // unbound output: kept by the session
  const void* data = nullptr;
  size_t bytes = 0;
  CHECK(kiln_session_get_output(session, "r", &data, &bytes) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "output 'r' is bound to caller memory; read it there");

  REQUIRE(kiln_session_set_output_host(session, "s", s_small.data(), 4) == KILN_OK);
  CHECK(kiln_session_run(session) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "output 's' is f32[2] (8 bytes) but its host memory holds only 4 bytes");
  REQUIRE(kiln_session_reset_output(session, "s") == KILN_OK);
  REQUIRE(kiln_session_run(session) == KILN_OK);
  check_floats(output_floats(session, "s"), s);

  CHECK(kiln_session_set_output_host(session, "nope", r_out.data(), 4) == KILN_NOT_FOUND);
  CHECK(kiln_session_set_output_host(session, "r", nullptr, 4) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_set_output_host(nullptr, "r", r_out.data(), 4) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_reset_output(session, "nope") == KILN_NOT_FOUND);
  CHECK(kiln_session_reset_output(nullptr, "r") == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_reset_output(session, nullptr) == KILN_INVALID_ARGUMENT);
  kiln_session_destroy(session);
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: device buffers are bound in place as inputs and outputs") {
  kiln_artifact* artifact = load_sample_c();
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  std::vector<float> x = ramp(8, -1.0f, 0.5f), y = ramp(8, 2.0f, -0.25f), r, s;
  expected_outputs(x, y, r, s);

  kiln_buffer* xb = nullptr;
  kiln_buffer* rb = nullptr;
  REQUIRE(kiln_buffer_create(session, 32, &xb) == KILN_OK);
  REQUIRE(kiln_buffer_create(session, 32, &rb) == KILN_OK);
  size_t size = 0;
  REQUIRE(kiln_buffer_size(xb, &size) == KILN_OK);
  CHECK(size == 32);
  REQUIRE(kiln_buffer_write(xb, 0, x.data(), 32) == KILN_OK);
  CHECK(kiln_buffer_write(xb, 16, x.data(), 32) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "buffer access of 32 bytes at offset 16 is outside the 32-byte buffer");
  CHECK(kiln_buffer_read(xb, 33, x.data(), 0) == KILN_INVALID_ARGUMENT);

  const int64_t dims[2] = {2, 4};
  REQUIRE(kiln_session_set_input_buffer(session, "x", KILN_DTYPE_F32, dims, 2, xb) == KILN_OK);
  REQUIRE(kiln_session_set_input(session, "y", KILN_DTYPE_F32, dims, 2, y.data(), 32) == KILN_OK);
  REQUIRE(kiln_session_set_output_buffer(session, "r", rb) == KILN_OK);
  kiln_buffer_destroy(xb);  // still bound: the session keeps the memory alive
  REQUIRE(kiln_session_run(session) == KILN_OK);
  std::vector<float> r_out(8);
  REQUIRE(kiln_buffer_read(rb, 0, r_out.data(), 32) == KILN_OK);
  check_floats(r_out, r);
  check_floats(output_floats(session, "s"), s);
  int64_t shape[2];
  size_t rank = 0;
  REQUIRE(kiln_session_output_shape(session, "r", shape, 2, &rank) == KILN_OK);
  CHECK(shape[0] == 2);

  // A buffer of one session's device is usable by another session on that device.
  kiln_session* other = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &other) == KILN_OK);
  REQUIRE(kiln_session_set_input_buffer(other, "y", KILN_DTYPE_F32, dims, 2, rb) == KILN_OK);
  kiln_session_destroy(other);

  // Size and shape errors.
  kiln_buffer* small = nullptr;
  REQUIRE(kiln_buffer_create(session, 16, &small) == KILN_OK);
  CHECK(kiln_session_set_input_buffer(session, "x", KILN_DTYPE_F32, dims, 2, small) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'x': the device buffer holds 16 bytes but f32[2, 4] needs 32");
  const int64_t bad[2] = {2, 3};
  CHECK(kiln_session_set_input_buffer(session, "x", KILN_DTYPE_F32, bad, 2, rb) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "input 'x': expected f32[N, 4], given f32[2, 3] (dimension 1 is 3 instead of 4)");
  REQUIRE(kiln_session_set_output_buffer(session, "s", small) == KILN_OK);
  CHECK(kiln_session_run(session) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "output 's' is f32[2] (8 bytes) but its device buffer holds 16 bytes");
  CHECK(kiln_session_set_input_buffer(session, "x", KILN_DTYPE_F32, dims, 2, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_set_input_buffer(nullptr, "x", KILN_DTYPE_F32, dims, 2, rb) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_set_input_buffer(session, nullptr, KILN_DTYPE_F32, dims, 2, rb) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_set_input_buffer(session, "zz", KILN_DTYPE_F32, dims, 2, rb) == KILN_NOT_FOUND);
  CHECK(kiln_session_set_output_buffer(session, "r", nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_set_output_buffer(nullptr, "r", rb) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_set_output_buffer(session, "zz", rb) == KILN_NOT_FOUND);

  // NULL handles of the buffer functions.
  kiln_buffer* none = reinterpret_cast<kiln_buffer*>(0x1);
  CHECK(kiln_buffer_create(nullptr, 4, &none) == KILN_INVALID_ARGUMENT);
  CHECK(none == nullptr);
  CHECK(kiln_buffer_create(session, 4, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_buffer_size(nullptr, &size) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_buffer_size(rb, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_buffer_write(nullptr, 0, x.data(), 4) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_buffer_write(rb, 0, nullptr, 4) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_buffer_read(nullptr, 0, x.data(), 4) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_buffer_read(rb, 0, nullptr, 4) == KILN_INVALID_ARGUMENT);
  kiln_buffer_destroy(nullptr);

  kiln_buffer_destroy(small);
  kiln_session_destroy(session);
  kiln_buffer_destroy(rb);  // after its session: the device stays alive through the buffer
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: asynchronous runs and events") {
  kiln_artifact* artifact = load_sample_c();
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  std::vector<float> x = ramp(12, -2.0f, 0.4f), y = ramp(12, 1.0f, 0.1f), r, s;
  expected_outputs(x, y, r, s);
  set_xy(session, x, y);

  kiln_event* event = nullptr;
  REQUIRE(kiln_session_run_async(session, &event) == KILN_OK);
  REQUIRE(event != nullptr);
  // The session is in flight: it refuses to be touched until the event is waited.
  kiln_event* second = nullptr;
  CHECK(kiln_session_run_async(session, &second) == KILN_INVALID_ARGUMENT);
  CHECK(second == nullptr);
  CHECK(last_error() == "cannot start a run while a run is in flight: wait for it first");
  CHECK(kiln_session_run(session) == KILN_INVALID_ARGUMENT);
  const int64_t dims[2] = {3, 4};
  CHECK(kiln_session_set_input(session, "x", KILN_DTYPE_F32, dims, 2, x.data(), 48) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "cannot set an input while a run is in flight: wait for it first");
  const void* data = nullptr;
  size_t bytes = 0;
  CHECK(kiln_session_get_output(session, "r", &data, &bytes) == KILN_INVALID_ARGUMENT);

  REQUIRE(kiln_event_wait(event) == KILN_OK);
  CHECK(kiln_event_wait(event) == KILN_OK);  // waiting again reports the same status
  check_floats(output_floats(session, "r"), r);
  check_floats(output_floats(session, "s"), s);
  kiln_event_destroy(event);

  // An event outlives its session's handle, and destroying an unwaited event waits for it.
  REQUIRE(kiln_session_run_async(session, &event) == KILN_OK);
  kiln_session_destroy(session);
  CHECK(kiln_event_wait(event) == KILN_OK);
  kiln_event_destroy(event);

  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  set_xy(session, x, y);
  REQUIRE(kiln_session_run_async(session, &event) == KILN_OK);
  kiln_event_destroy(event);
  REQUIRE(kiln_session_run(session) == KILN_OK);  // no longer in flight

  // A run that fails at submission returns its error and no event.
  const int64_t other[2] = {2, 4};
  REQUIRE(kiln_session_set_input(session, "y", KILN_DTYPE_F32, other, 2, x.data(), 32) == KILN_OK);
  event = reinterpret_cast<kiln_event*>(0x1);
  CHECK(kiln_session_run_async(session, &event) == KILN_INVALID_ARGUMENT);
  CHECK(event == nullptr);

  CHECK(kiln_session_run_async(nullptr, &event) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_run_async(session, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_event_wait(nullptr) == KILN_INVALID_ARGUMENT);
  kiln_event_destroy(nullptr);
  kiln_session_destroy(session);
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: profiling reports per-kernel times with provenance names") {
  kiln_artifact* artifact = load_sample_c();
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  std::vector<float> x = ramp(12, -2.0f, 0.4f), y = ramp(12, 1.0f, 0.1f);
  set_xy(session, x, y);
  size_t count = 99;
  REQUIRE(kiln_session_run(session) == KILN_OK);
  REQUIRE(kiln_session_profile_count(session, &count) == KILN_OK);
  CHECK(count == 0);  // profiling is off by default

  REQUIRE(kiln_session_set_profiling(session, 1) == KILN_OK);
  REQUIRE(kiln_session_run(session) == KILN_OK);
  REQUIRE(kiln_session_profile_count(session, &count) == KILN_OK);
  REQUIRE(count == 2);
  kiln_kernel_time k;
  REQUIRE(kiln_session_profile_entry(session, 0, &k) == KILN_OK);
  CHECK(std::string(k.name) == "fused_add_mul_relu_0");
  CHECK(std::string(k.kind) == "elementwise");
  CHECK(k.kernel_index == 0);
  CHECK(k.seconds >= 0);
  REQUIRE(kiln_session_profile_entry(session, 1, &k) == KILN_OK);
  CHECK(std::string(k.name) == "reduce_sum_1");
  CHECK(std::string(k.kind) == "reduction");
  CHECK(kiln_session_profile_entry(session, 2, &k) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "profile entry 2 is out of range (the last run has 2)");
  const char* clock = nullptr;
  REQUIRE(kiln_session_profile_clock(session, &clock) == KILN_OK);
  CHECK(std::strlen(clock) > 0);

  REQUIRE(kiln_session_set_profiling(session, 0) == KILN_OK);
  REQUIRE(kiln_session_run(session) == KILN_OK);
  REQUIRE(kiln_session_profile_count(session, &count) == KILN_OK);
  CHECK(count == 0);

  CHECK(kiln_session_set_profiling(nullptr, 1) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_profile_count(nullptr, &count) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_profile_count(session, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_profile_entry(nullptr, 0, &k) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_profile_entry(session, 0, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_profile_clock(nullptr, &clock) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_profile_clock(session, nullptr) == KILN_INVALID_ARGUMENT);
  kiln_session_destroy(session);
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api: NULL session handles and out-pointers never crash") {
  const char* id = nullptr;
  int64_t dims[2];
  size_t rank = 0, bytes = 0;
  const void* data = nullptr;
  float dst[4];
  CHECK(kiln_session_device_id(nullptr, &id) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_run(nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(last_error() == "kiln_session_run: session is NULL");
  CHECK(kiln_session_output_shape(nullptr, "r", dims, 2, &rank) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_get_output(nullptr, "r", &data, &bytes) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_read_output(nullptr, "r", dst, 16) == KILN_INVALID_ARGUMENT);

  kiln_artifact* artifact = load_sample_c();
  kiln_session* session = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &session) == KILN_OK);
  CHECK(kiln_session_device_id(session, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_output_shape(session, nullptr, dims, 2, &rank) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_output_shape(session, "r", dims, 2, nullptr) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_get_output(session, nullptr, &data, &bytes) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_get_output(session, "r", nullptr, &bytes) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_session_read_output(session, nullptr, dst, 16) == KILN_INVALID_ARGUMENT);
  kiln_session_destroy(session);
  kiln_artifact_destroy(artifact);
}
