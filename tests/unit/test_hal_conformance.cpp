// The HAL conformance suite: one set of checks that every driver of the DeviceRegistry passes on
// every device it lists (reference, OpenCL, Vulkan, CUDA, and any driver added later):
//   devices    listing (ids, driver, description, priority), open by id, unknown ids and
//              device options, the reason a driver has no device;
//   buffers    byte round trips, range errors, empty buffers, out-of-memory;
//   copies     multi-megabyte copies (CUDA: several chunks through the staging pool), sub-ranges;
//   execution  an artifact compiled here for every codegen target, run through sessions for
//              several batch sizes (0 included: empty tensors) and compared with the reference
//              interpreter;
//   profiling  per-kernel times with the artifact's kernel names, kinds and source nodes, and
//              their starts where the device has timers;
//   timing     the device time of whole runs, on devices with timers;
//   threads    sessions in several threads, byte-identical to a single-threaded run;
//   errors     an artifact without the driver's kernels, device options the driver lacks.
// What a driver may differ in (its profile clock, what out-of-memory says, host-visible memory)
// is in kExpectations below; a driver without an entry gets the defaults.
//
// Skips and failures: a driver without a device is skipped with its reason printed
// ("[skip] hal conformance: driver D has no device: ..."), unless KILN_REQUIRE_DRIVERS names it,
// in which case the suite fails. A device whose target this build cannot compile for (CUDA
// without NVRTC) skips the execution checks with the reason printed.
//
// ctest runs the suite once per driver (tests/CMakeLists.txt: hal-conformance-<driver>, which
// sets KILN_CONFORMANCE_DRIVER); run without that variable, it covers every driver. The list
// of drivers ctest runs it for is checked against the registry, so a new driver that is not
// given a ctest entry fails here.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ir/graph.h"
#include "ir/interpreter.h"
#include "runtime/device_registry.h"
#include "runtime/session.h"
#include "test_compile_util.h"

using namespace kiln;
namespace hal = kiln::runtime::hal;

namespace {

// What one driver is expected to do where drivers legitimately differ.
struct DriverExpectations {
  bool host_visible = false;        // Buffer::host_data() non-null (64-byte aligned)
  bool device_only = false;         // Buffer::host_data() null (else: may be either)
  bool device_timers = false;       // has_device_timers() must be true (false: may be either)
  std::string device_clock;         // Profile::clock with device timers
  size_t oom_bytes = size_t(1) << 52;  // an allocation the device cannot make
  std::string oom_message;          // text the out-of-memory message contains ("" = any)
  std::string description_contains; // text every device description contains ("" = any)
  bool runs_any_artifact = false;   // needs no kernels of its own target (reference)
};

// One line per driver (fields left out keep their defaults).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const std::map<std::string, DriverExpectations, std::less<>> kExpectations = {
    {"reference", {.host_visible = true, .runs_any_artifact = true}},
    {"opencl", {.device_only = true, .device_timers = true, .device_clock = "device timer (OpenCL profiling events)",
                .oom_bytes = size_t(1) << 62, .oom_message = "CL_DEVICE_MAX_MEM_ALLOC_SIZE",
                .description_contains = " / "}},
    {"vulkan", {.device_clock = "device timer (Vulkan timestamps)"}},
    {"cuda", {.device_timers = true, .device_clock = "device timer (CUDA events)",
              .oom_bytes = size_t(1) << 50, .oom_message = "CUDA_ERROR_OUT_OF_MEMORY",
              .description_contains = "sm_"}},
    {"cpu", {.host_visible = true, .oom_message = "cannot allocate", .description_contains = "hardware threads"}},
};
#pragma GCC diagnostic pop

const DriverExpectations& expectations(std::string_view driver) {
  static const DriverExpectations defaults;
  auto it = kExpectations.find(driver);
  return it == kExpectations.end() ? defaults : it->second;
}

bool in_comma_list(const char* list, std::string_view name) {
  if (!list) return false;
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item == name) return true;
  }
  return false;
}

// The drivers this run covers: KILN_CONFORMANCE_DRIVER (one ctest entry per driver) or all.
std::vector<const hal::Driver*> drivers_under_test(const runtime::DeviceRegistry& registry) {
  const char* only = std::getenv("KILN_CONFORMANCE_DRIVER");
  std::vector<const hal::Driver*> out;
  for (const auto& driver : registry.drivers())
    if (!only || !*only || driver->name() == only) out.push_back(driver.get());
  if (only && *only && out.empty()) FAIL("KILN_CONFORMANCE_DRIVER names no registered driver: " << only);
  return out;
}

// Calls `check(driver, device)` for every device of every driver under test. A driver without a
// device is checked for its reason and skipped, or fails when KILN_REQUIRE_DRIVERS names it.
template <class Check>
void for_each_device(const char* aspect, Check&& check) {
  runtime::DeviceRegistry registry;
  for (const hal::Driver* driver : drivers_under_test(registry)) {
    const std::string name(driver->name());
    CAPTURE(name);
    const std::vector<hal::DeviceInfo> devices = driver->devices();
    if (devices.empty()) {
      const std::string reason = driver->unavailable_reason();
      CHECK_FALSE(reason.empty());
      // Opening the first id it would have fails with the reason.
      Result<std::unique_ptr<hal::Device>> opened = driver->open_device(name + ":0");
      CHECK(opened.status().code() == ErrorCode::kNotFound);
      CHECK(opened.status().message().find(reason) != std::string::npos);
      if (in_comma_list(std::getenv("KILN_REQUIRE_DRIVERS"), name)) {
        FAIL_CHECK("KILN_REQUIRE_DRIVERS requires " << name << ", which has no device: " << reason);
      } else {
        std::cout << "[skip] hal conformance: driver " << name << " has no device: " << reason << " ("
                  << aspect << ")\n";
      }
      continue;
    }
    for (const hal::DeviceInfo& info : devices) {
      CAPTURE(info.id);
      Result<std::unique_ptr<hal::Device>> device = registry.open_device(info.id);
      REQUIRE_MESSAGE(device.is_ok(), device.status().message());
      check(registry, *driver, **device);
    }
  }
}

// A graph with a matrix product (cuBLASLt on CUDA), a broadcast, a softmax, a row reduction and
// arena intermediates; the batch N is symbolic.
constexpr const char* kGraph = R"(
graph conformance(x: f32[N, 24], w: f32[24, 7], b: f32[7]) -> (p: f32[N, 7], t: f32[N]) {
  h = add(matmul(x, w), b)
  p = softmax(h, axis=-1)
  t = reduce_sum(mul(h, relu(h)), axes=[1])
}
)";

std::shared_ptr<const artifact::LoadedArtifact> conformance_artifact() {
  static std::shared_ptr<const artifact::LoadedArtifact> artifact = kiln::testing::load_for_every_target(kGraph);
  return artifact;
}

ir::Tensor pattern(std::vector<int64_t> shape, int salt) {
  Result<ir::Tensor> t = ir::Tensor::zeros(ir::DType::kF32, std::move(shape));
  REQUIRE(t.is_ok());
  for (int64_t i = 0; i < t->num_elements(); ++i)
    t->set_element_from_double(i, double(int((i * 13 + salt * 7) % 17) - 8) * 0.0625);
  return std::move(t).value();
}

std::vector<ir::Tensor> inputs_for(int64_t n, int salt) {
  return {pattern({n, 24}, salt), pattern({24, 7}, salt + 1), pattern({7}, salt + 2)};
}

// Whether `device` can run the conformance artifact; prints why not.
bool can_run(const hal::DeviceInfo& info, const artifact::LoadedArtifact& artifact) {
  if (expectations(info.driver).runs_any_artifact) return true;
  const std::vector<std::string> targets = artifact.targets();
  if (std::find(targets.begin(), targets.end(), info.driver) != targets.end()) return true;
  std::cout << "[skip] hal conformance: " << info.id << ": this build compiles no " << info.driver
            << " kernels (" << codegen::unavailable_targets_note() << ")\n";
  return false;
}

std::unique_ptr<runtime::Session> session_or_fail(std::shared_ptr<const artifact::LoadedArtifact> artifact,
                                                  hal::Device& device) {
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(std::move(artifact), device);
  REQUIRE_MESSAGE(session.is_ok(), session.status().message());
  return std::move(session).value();
}

}  // namespace

TEST_SUITE("hal-conformance") {

TEST_CASE("hal conformance: ctest runs the suite for every registered driver") {
  runtime::DeviceRegistry registry;
  const std::string ctest_drivers = KILN_CONFORMANCE_CTEST_DRIVERS;  // tests/CMakeLists.txt
  for (const auto& driver : registry.drivers()) {
    INFO("tests/CMakeLists.txt KILN_HAL_DRIVERS: " << ctest_drivers);
    CHECK_MESSAGE(in_comma_list(ctest_drivers.c_str(), driver->name()),
                  "driver " << driver->name() << " has no hal-conformance ctest entry");
  }
}

TEST_CASE("hal conformance: devices are listed, opened by id, and unknown ids and options refused") {
  for_each_device("devices", [](const runtime::DeviceRegistry& registry, const hal::Driver& driver,
                                hal::Device& device) {
    const DriverExpectations& expect = expectations(driver.name());
    const hal::DeviceInfo& info = device.info();
    CHECK(driver.unavailable_reason().empty());
    CHECK(info.driver == driver.name());
    CHECK_FALSE(info.description.empty());
    if (!expect.description_contains.empty())
      CHECK(info.description.find(expect.description_contains) != std::string::npos);
    // Priorities: CUDA GPU 400, discrete GPU 300 (an OpenCL accelerator 250), integrated GPU
    // 200, the cpu driver's native kernels 150, the GPU APIs' CPU implementations 100, the
    // reference interpreter 0.
    const std::vector<hal::DeviceInfo> listed = driver.devices();
    const bool accelerator = info.description.find("(accelerator)") != std::string::npos;
    const int expected_priority = info.driver == "reference"                     ? 0
                                  : info.driver == "cuda"                        ? 400
                                  : info.driver == "cpu"                         ? 150
                                  : info.type == hal::DeviceType::kCpu           ? 100
                                  : info.type == hal::DeviceType::kIntegratedGpu ? 200
                                  : accelerator                                  ? 250
                                                                                 : 300;
    CHECK(info.priority == expected_priority);
    // Ids: "<driver>:<index>" in listing order (the reference driver's one device is "reference").
    const size_t index = size_t(std::find_if(listed.begin(), listed.end(),
                                             [&](const hal::DeviceInfo& d) { return d.id == info.id; }) -
                                listed.begin());
    REQUIRE(index < listed.size());
    if (info.driver == "reference")
      CHECK(info.id == "reference");
    else
      CHECK(info.id == info.driver + ":" + std::to_string(index));
    if (expect.device_timers) CHECK(device.has_device_timers());
    if (expect.host_visible) CHECK_FALSE(device.has_device_timers());  // host memory, host clock
    // The registry lists it, ordered by priority, and the default device is the first listed.
    const std::vector<hal::DeviceInfo> all = registry.list_devices();
    CHECK(std::any_of(all.begin(), all.end(), [&](const hal::DeviceInfo& d) { return d.id == info.id; }));
    for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1].priority >= all[i].priority);
    CHECK(registry.default_device_id() == all.front().id);

    // An id past the listing is kNotFound, from the driver (naming its ids) and the registry.
    const std::string missing = std::string(driver.name()) + ":" + std::to_string(listed.size());
    Result<std::unique_ptr<hal::Device>> none = driver.open_device(missing);
    REQUIRE_FALSE(none.is_ok());
    CHECK(none.status().code() == ErrorCode::kNotFound);
    CHECK(none.status().message().find("'" + missing + "'") != std::string::npos);
    CHECK(none.status().message().find(info.id) != std::string::npos);
    CHECK(registry.open_device(missing).status().code() == ErrorCode::kNotFound);

    // Device options: an option of this driver that it does not have is kInvalidArgument naming
    // it; another driver's option is ignored; an option naming no driver is refused.
    hal::DeviceOptions unknown;
    unknown.set(std::string(driver.name()) + ".no_such_option", "1");
    Result<std::unique_ptr<hal::Device>> bad = registry.open_device(info.id, unknown);
    REQUIRE_FALSE(bad.is_ok());
    CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
    CHECK(bad.status().message().find("no_such_option") != std::string::npos);
    hal::DeviceOptions other;
    other.set(driver.name() == "cuda" ? "opencl.some_option" : "cuda.graphs", "off");
    Result<std::unique_ptr<hal::Device>> ignored = registry.open_device(info.id, other);
    REQUIRE_MESSAGE(ignored.is_ok(), ignored.status().message());
    CHECK((*ignored)->info().id == info.id);
    hal::DeviceOptions nameless;
    nameless.set("graphs", "off");
    CHECK(registry.open_device(info.id, nameless).status().code() == ErrorCode::kInvalidArgument);
  });
}

TEST_CASE("hal conformance: buffers round-trip bytes, check ranges and report out-of-memory") {
  for_each_device("buffers", [](const runtime::DeviceRegistry&, const hal::Driver& driver, hal::Device& device) {
    const DriverExpectations& expect = expectations(driver.name());
    Result<std::unique_ptr<hal::Buffer>> buffer = device.allocate(1000);
    REQUIRE(buffer.is_ok());
    CHECK((*buffer)->size() == 1000);
    if (expect.host_visible) {
      REQUIRE((*buffer)->host_data() != nullptr);
      CHECK(reinterpret_cast<uintptr_t>((*buffer)->host_data()) % 64 == 0);
    } else if (expect.device_only) {
      CHECK((*buffer)->host_data() == nullptr);
    }
    std::vector<std::byte> data(300);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7 + 1);
    REQUIRE((*buffer)->write(500, data).is_ok());
    std::vector<std::byte> back(300);
    REQUIRE((*buffer)->read(500, back).is_ok());
    CHECK(back == data);
    // The end of the buffer exactly, then one byte past it.
    REQUIRE((*buffer)->write(700, data).is_ok());
    Status outside = (*buffer)->write(701, data);
    CHECK(outside.code() == ErrorCode::kInvalidArgument);
    CHECK(outside.message().find("outside the 1000-byte buffer") != std::string::npos);
    CHECK((*buffer)->write(900, data).code() == ErrorCode::kInvalidArgument);
    CHECK((*buffer)->read(701, back).code() == ErrorCode::kInvalidArgument);
    CHECK((*buffer)->read(size_t(-1), back).code() == ErrorCode::kInvalidArgument);
    REQUIRE((*buffer)->read(700, back).is_ok());
    CHECK(back == data);

    Result<std::unique_ptr<hal::Buffer>> empty = device.allocate(0);
    REQUIRE(empty.is_ok());
    CHECK((*empty)->size() == 0);
    CHECK((*empty)->write(0, {}).is_ok());
    CHECK((*empty)->read(0, {}).is_ok());
    CHECK((*empty)->write(0, data).code() == ErrorCode::kInvalidArgument);

    if (driver.name() == "reference") return;  // host memory: a huge request may succeed lazily
    Result<std::unique_ptr<hal::Buffer>> huge = device.allocate(expect.oom_bytes);
    REQUIRE_FALSE(huge.is_ok());
    CHECK(huge.status().code() == ErrorCode::kOutOfMemory);
    if (!expect.oom_message.empty()) CHECK(huge.status().message().find(expect.oom_message) != std::string::npos);
  });
}

TEST_CASE("hal conformance: multi-megabyte copies and sub-ranges") {
  for_each_device("copies", [](const runtime::DeviceRegistry&, const hal::Driver&, hal::Device& device) {
    // 9 MiB + 3 bytes: on CUDA three chunks through both halves of a staging lane, and a tail.
    const size_t bytes = (size_t(9) << 20) + 3;
    std::vector<std::byte> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = std::byte((i * 2654435761u) >> 13);
    Result<std::unique_ptr<hal::Buffer>> buffer = device.allocate(bytes);
    REQUIRE(buffer.is_ok());
    REQUIRE((*buffer)->write(0, data).is_ok());
    std::vector<std::byte> back(bytes);
    REQUIRE((*buffer)->read(0, back).is_ok());
    CHECK(back == data);
    std::vector<std::byte> middle(1000);
    REQUIRE((*buffer)->read(5000000, middle).is_ok());
    CHECK(std::memcmp(middle.data(), data.data() + 5000000, middle.size()) == 0);
    CHECK((*buffer)->read(bytes - 10, middle).code() == ErrorCode::kInvalidArgument);
    // Overwrite a sub-range; the bytes around it stay.
    std::vector<std::byte> patch(4096, std::byte{0x5a});
    REQUIRE((*buffer)->write(3 << 20, patch).is_ok());
    std::vector<std::byte> around(4096 + 2);
    REQUIRE((*buffer)->read((3 << 20) - 1, around).is_ok());
    CHECK(around.front() == data[(3 << 20) - 1]);
    CHECK(around.back() == data[(3 << 20) + 4096]);
    CHECK(std::all_of(around.begin() + 1, around.end() - 1, [](std::byte b) { return b == std::byte{0x5a}; }));
  });
}

TEST_CASE("hal conformance: compiled kernels run through sessions and match the interpreter") {
  auto artifact = conformance_artifact();
  for_each_device("execution", [&](const runtime::DeviceRegistry&, const hal::Driver&, hal::Device& device) {
    if (!can_run(device.info(), *artifact)) return;
    auto session = session_or_fail(artifact, device);
    // A new N re-binds symbols and resizes buffers and the arena; repeating N reuses them
    // (resubmitted command buffers, replayed CUDA graphs). N = 0: empty inputs, outputs and
    // arena values, launches with no work.
    for (int64_t n : {int64_t(3), int64_t(37), int64_t(37), int64_t(0), int64_t(1), int64_t(300), int64_t(0),
                      int64_t(37)}) {
      INFO("N = " << n);
      std::vector<ir::Tensor> inputs = inputs_for(n, int(n));
      Result<std::vector<ir::Tensor>> out = session->run(inputs);
      REQUIRE_MESSAGE(out.is_ok(), out.status().message());
      testing::check_close_to_interpreter(*artifact, device.info(), inputs, *out, 1e-4);
    }
  });
}

TEST_CASE("hal conformance: profiling reports per-kernel times with the artifact's provenance") {
  auto artifact = conformance_artifact();
  for_each_device("profiling", [&](const runtime::DeviceRegistry&, const hal::Driver& driver, hal::Device& device) {
    if (!can_run(device.info(), *artifact)) return;
    const DriverExpectations& expect = expectations(driver.name());
    auto session = session_or_fail(artifact, device);
    session->set_profiling(true);
    std::vector<ir::Tensor> inputs = inputs_for(512, 5);
    const ir::Graph& graph = artifact->graph;
    for (int run = 0; run < 2; ++run) {  // the second run: resubmitted work reports fresh times
      Result<std::vector<ir::Tensor>> out = session->run(inputs);
      REQUIRE_MESSAGE(out.is_ok(), out.status().message());
      testing::check_close_to_interpreter(*artifact, device.info(), inputs, *out, 1e-4);
      const hal::Profile& profile = session->last_profile();
      if (device.has_device_timers() && !expect.device_clock.empty())
        CHECK(profile.clock == expect.device_clock);
      else
        CHECK(profile.clock.find("host wall time") != std::string::npos);
      // One entry per launch, in launch order, naming the launched kernel.
      REQUIRE(profile.kernels.size() == artifact->plan.launches.size());
      double total = 0;
      for (size_t i = 0; i < profile.kernels.size(); ++i) {
        const hal::KernelTiming& timing = profile.kernels[i];
        const uint32_t k = artifact->plan.launches[i].kernel;
        const ir::Kernel& kernel = graph.kernels()[k];
        CHECK(timing.kernel_index == k);
        CHECK(timing.name == kernel.name);
        // The kernel's kind, optionally followed by the implementation that ran it, in
        // parentheses (CUDA: "matmul (cuBLASLt)" when a vendor GEMM replaced the kernel).
        const std::string kind(ir::kernel_kind_name(kernel.kind));
        CHECK(timing.kind.rfind(kind, 0) == 0);
        const std::string implementation = timing.kind.substr(std::min(kind.size(), timing.kind.size()));
        CHECK((implementation.empty() || (implementation.rfind(" (", 0) == 0 && implementation.back() == ')')));
        std::vector<std::string> nodes;
        for (ir::NodeId n : kernel.nodes) nodes.push_back(graph.node(n).name);
        CHECK(timing.source_nodes == nodes);
        CHECK(timing.seconds >= 0);
        CHECK(timing.seconds < 10);
        total += timing.seconds;
        // Starts, from the device's timers, within the run and in launch order (one queue).
        if (device.has_device_timers() && driver.name() != "reference") {
          REQUIRE(timing.start_seconds.has_value());
          CHECK(*timing.start_seconds >= 0);
          if (i > 0) CHECK(*timing.start_seconds >= *profile.kernels[i - 1].start_seconds);
          REQUIRE(session->last_device_seconds().has_value());
          CHECK(*timing.start_seconds + timing.seconds <= *session->last_device_seconds() * 1.001 + 1e-6);
        }
      }
      if (device.has_device_timers()) CHECK(total > 0);
    }
    // Profiling off again: results stay right, no times are recorded.
    session->set_profiling(false);
    Result<std::vector<ir::Tensor>> out = session->run(inputs);
    REQUIRE(out.is_ok());
    testing::check_close_to_interpreter(*artifact, device.info(), inputs, *out, 1e-4);
    CHECK(session->last_profile().kernels.empty());
  });
}

TEST_CASE("hal conformance: devices with timers time whole runs on the device") {
  auto artifact = conformance_artifact();
  for_each_device("timing", [&](const runtime::DeviceRegistry&, const hal::Driver& driver, hal::Device& device) {
    if (!can_run(device.info(), *artifact)) return;
    const DriverExpectations& expect = expectations(driver.name());
    if (expect.device_timers) CHECK(device.has_device_timers());
    auto session = session_or_fail(artifact, device);
    for (int64_t n : {int64_t(512), int64_t(512), int64_t(0)}) {
      INFO("N = " << n);
      std::vector<ir::Tensor> inputs = inputs_for(n, 7);
      const auto start = std::chrono::steady_clock::now();
      Result<std::vector<ir::Tensor>> out = session->run(inputs);
      const double host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      REQUIRE_MESSAGE(out.is_ok(), out.status().message());
      const std::optional<double> on_device = session->last_device_seconds();
      if (!device.has_device_timers()) {
        CHECK_FALSE(on_device.has_value());
        continue;
      }
      // Every run has its device time, within the host's wait for it; an empty run takes
      // (almost) none.
      REQUIRE(on_device.has_value());
      CHECK(*on_device >= 0);
      CHECK(*on_device <= host_seconds);
      if (n > 0) CHECK(*on_device > 0);
    }
  });
}

TEST_CASE("hal conformance: sessions in several threads give the single-threaded results") {
  auto artifact = conformance_artifact();
  for_each_device("threads", [&](const runtime::DeviceRegistry&, const hal::Driver&, hal::Device& device) {
    if (!can_run(device.info(), *artifact)) return;
    const std::vector<int64_t> sizes = {7, 130, 64};
    std::vector<std::vector<ir::Tensor>> expected;
    {
      auto session = session_or_fail(artifact, device);
      for (int64_t n : sizes) {
        std::vector<ir::Tensor> inputs = inputs_for(n, 3);
        Result<std::vector<ir::Tensor>> out = session->run(inputs);
        REQUIRE(out.is_ok());
        testing::check_close_to_interpreter(*artifact, device.info(), inputs, *out, 1e-4);
        expected.push_back(std::move(out).value());
      }
    }
    constexpr int kThreads = 3;
    constexpr int kRuns = 4;
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto session = runtime::Session::create(artifact, device);
        if (!session.is_ok()) {
          failures[t] = session.status().message();
          return;
        }
        for (int run = 0; run < kRuns; ++run) {
          for (size_t s = 0; s < sizes.size(); ++s) {
            const size_t pick = (s + size_t(t) + size_t(run)) % sizes.size();  // sizes alternate
            Result<std::vector<ir::Tensor>> out = (*session)->run(inputs_for(sizes[pick], 3));
            if (!out.is_ok()) {
              failures[t] = out.status().message();
              return;
            }
            for (size_t o = 0; o < out->size(); ++o)
              if ((*out)[o].size_bytes() != expected[pick][o].size_bytes() ||
                  std::memcmp((*out)[o].data(), expected[pick][o].data(), expected[pick][o].size_bytes()) != 0) {
                failures[t] = "run " + std::to_string(run) + ", N = " + std::to_string(sizes[pick]) + ": output " +
                              std::to_string(o) + " differs from the single-threaded run";
                return;
              }
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) CHECK_MESSAGE(failures[t].empty(), "thread " << t << ": " << failures[t]);
  });
}

TEST_CASE("hal conformance: an artifact without the device's kernels is refused naming its targets") {
  auto artifact = conformance_artifact();
  for_each_device("errors", [&](const runtime::DeviceRegistry&, const hal::Driver& driver, hal::Device& device) {
    if (expectations(driver.name()).runs_any_artifact) return;
    artifact::LoadedArtifact elsewhere;
    elsewhere.graph = artifact->graph.clone();
    elsewhere.plan = artifact->plan;
    for (const artifact::KernelBinary& k : artifact->kernels) {
      if (k.target == driver.name()) continue;
      elsewhere.kernels.push_back(k);
    }
    if (elsewhere.kernels.empty()) {  // this build compiles for this driver only
      elsewhere.kernels = artifact->kernels;
      for (artifact::KernelBinary& k : elsewhere.kernels) k.target = "elsewhere";
    }
    const std::vector<std::string> others = elsewhere.targets();
    Result<std::unique_ptr<hal::Executable>> exe =
        device.load_executable(std::make_shared<const artifact::LoadedArtifact>(std::move(elsewhere)));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().code() == ErrorCode::kUnsupported);
    const std::string message = exe.status().message();
    INFO(message);
    CHECK(message.rfind("the artifact has no kernels for target '" + std::string(driver.name()) + "' (it has", 0) == 0);
    for (const std::string& t : others) CHECK(message.find(t) != std::string::npos);
  });
}

}  // TEST_SUITE
