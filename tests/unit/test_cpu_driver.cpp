// The cpu driver's own checks (the HAL conformance suite covers what every driver does): its
// device option, and loading and running kernels with its ABI from hand-written modules
// (tests/unit/cpu_test_module/), so that the driver is tested whether or not this build has the
// cpu code-generation target: the thread split, empty launches, profiles, two distinct modules
// loaded at once, and the refusal of damaged modules, missing functions and missing CPU features.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "artifact/artifact.h"
#include "runtime/device_registry.h"
#include "runtime/session.h"
#include "support/file_io.h"
#include "test_compile_util.h"

using namespace kiln;
namespace hal = kiln::runtime::hal;

namespace {

// One elementwise kernel: buffers x, b, y and the symbol N.
constexpr const char* kGraph = R"(
graph add_relu(x: f32[N, 4], b: f32[N, 4]) -> (y: f32[N, 4]) {
  y = relu(add(x, b))
}
)";
constexpr const char* kEntry = "kiln_test_add_relu";

std::vector<uint8_t> module_bytes(const char* path) {
  Result<std::vector<std::byte>> bytes = read_regular_file(path, "cpu test module");
  REQUIRE_MESSAGE(bytes.is_ok(), bytes.status().message());
  std::vector<uint8_t> out(bytes->size());
  std::memcpy(out.data(), bytes->data(), out.size());
  return out;
}

// kGraph's plan with one cpu kernel binary (`entry` in module 0, `features` required) and the
// module's bytes, built in memory as the cpu target would package them.
artifact::LoadedArtifact cpu_artifact(std::vector<uint8_t> module, std::string entry = kEntry,
                                      std::vector<std::string> features = {}) {
  testing::PlannedGraph planned = testing::parse_and_plan(kGraph);
  REQUIRE(planned.graph.kernels().size() == 1);
  artifact::LoadedArtifact art;
  art.graph = std::move(planned.graph);
  art.plan = std::move(planned.plan);
  artifact::KernelBinary kernel;
  kernel.target = std::string(artifact::kCpuTarget);
  kernel.kernel_name = art.graph.kernels()[0].name;
  kernel.kernel_index = 0;
  kernel.format = artifact::kModuleFormat;
  kernel.entry_point = std::move(entry);
  kernel.args = artifact::kernel_signature(art.graph, art.graph.kernels()[0]);
  REQUIRE(kernel.args.size() == 4);  // x, b, y, N
  kernel.dispatch.work_items = ir::SizeExpr::symbol("N") * 4;
  kernel.dispatch.items_per_group = 5;
  kernel.dispatch.workgroup_size = 1;
  kernel.required_features = std::move(features);
  art.kernels.push_back(std::move(kernel));
  artifact::ModuleBinary so;
  so.target = std::string(artifact::kCpuTarget);
  so.format = std::string(artifact::kHostCpuModuleFormat);
  so.blob = std::move(module);
  so.id = 0;
  art.modules.push_back(std::move(so));
  return art;
}

std::unique_ptr<hal::Device> open_cpu(const runtime::DeviceRegistry& registry, const char* threads = "3") {
  hal::DeviceOptions options;
  options.set("cpu.threads", threads);
  Result<std::unique_ptr<hal::Device>> device = registry.open_device("cpu:0", options);
  REQUIRE_MESSAGE(device.is_ok(), device.status().message());
  return std::move(device).value();
}

std::vector<ir::Tensor> inputs_for(int64_t n) {
  std::vector<ir::Tensor> inputs;
  for (int salt : {1, 2}) {
    Result<ir::Tensor> t = ir::Tensor::zeros(ir::DType::kF32, {n, 4});
    REQUIRE(t.is_ok());
    for (int64_t i = 0; i < t->num_elements(); ++i) t->set_element_from_double(i, double((i * 7 + salt * 5) % 11) - 5.5);
    inputs.push_back(std::move(t).value());
  }
  return inputs;
}

// Runs `session` on N rows; "" when y = relu(x + b) * scale exactly, else what went wrong.
// Thread-safe (doctest's checks are not, so threads report through this).
std::string wrong_output(runtime::Session& session, int64_t n, float scale) {
  std::vector<ir::Tensor> inputs = inputs_for(n);
  Result<std::vector<ir::Tensor>> out = session.run(inputs);
  if (!out.is_ok()) return out.status().message();
  if (out->size() != 1 || (*out)[0].num_elements() != n * 4) return "wrong output count or shape";
  const ir::Tensor& y = (*out)[0];
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    const float sum = float(inputs[0].element_as_double(i)) + float(inputs[1].element_as_double(i));
    const double expected = double((sum > 0 ? sum : 0.0f) * scale);
    if (y.element_as_double(i) != expected)
      return "y[" + std::to_string(i) + "] = " + std::to_string(y.element_as_double(i)) + ", expected " +
             std::to_string(expected);
  }
  return "";
}

void check_run(runtime::Session& session, int64_t n, float scale) {
  const std::string wrong = wrong_output(session, n, scale);
  CHECK_MESSAGE(wrong.empty(), "N = " << n << ", scale " << scale << ": " << wrong);
}

bool has_cpu_device(const runtime::DeviceRegistry& registry) {
  for (const hal::DeviceInfo& info : registry.list_devices())
    if (info.id == "cpu:0") return true;
  for (const auto& driver : registry.drivers())
    if (driver->name() == "cpu") MESSAGE("[skip] cpu driver: " << driver->unavailable_reason());
  return false;
}

}  // namespace

TEST_CASE("cpu driver: cpu.threads takes a thread count from 0 to 1024") {
  runtime::DeviceRegistry registry;
  if (!has_cpu_device(registry)) return;
  for (const char* good : {"0", "1", "7", "1024"}) {
    hal::DeviceOptions options;
    options.set("cpu.threads", good);
    CHECK_MESSAGE(registry.open_device("cpu:0", options).is_ok(), good);
  }
  for (const char* bad : {"", "-1", "two", "3x", "1025", "99999999999999999999"}) {
    INFO("cpu.threads = '" << bad << "'");
    hal::DeviceOptions options;
    options.set("cpu.threads", bad);
    Result<std::unique_ptr<hal::Device>> device = registry.open_device("cpu:0", options);
    REQUIRE_FALSE(device.is_ok());
    CHECK(device.status().code() == ErrorCode::kInvalidArgument);
    CHECK(device.status().message().find("cpu.threads") != std::string::npos);
  }
}

TEST_CASE("cpu driver: kernels run over the thread pool with the driver's ABI") {
  runtime::DeviceRegistry registry;
  if (!has_cpu_device(registry)) return;
  auto artifact = std::make_shared<const artifact::LoadedArtifact>(cpu_artifact(module_bytes(KILN_TEST_CPU_MODULE_1)));
  for (const char* threads : {"1", "3", "0"}) {
    INFO("cpu.threads = " << threads);
    std::unique_ptr<hal::Device> device = open_cpu(registry, threads);
    Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(artifact, *device);
    REQUIRE_MESSAGE(session.is_ok(), session.status().message());
    // N = 0: an empty launch is skipped; 1: one chunk; 1000: 4000 units over many chunks.
    for (int64_t n : {int64_t(3), int64_t(0), int64_t(1), int64_t(1000), int64_t(37)}) check_run(**session, n, 1.0f);

    (*session)->set_profiling(true);
    check_run(**session, 500, 1.0f);
    const hal::Profile& profile = (*session)->last_profile();
    CHECK(profile.clock == "host wall time");
    REQUIRE(profile.kernels.size() == 1);
    CHECK(profile.kernels[0].kernel_index == 0);
    CHECK(profile.kernels[0].name == artifact->graph.kernels()[0].name);
    CHECK(profile.kernels[0].seconds >= 0);
    CHECK(profile.kernels[0].start_seconds.has_value());
    check_run(**session, 0, 1.0f);
    CHECK((*session)->last_profile().kernels.empty());  // nothing launched
  }
}

TEST_CASE("cpu driver: sessions on one device run concurrently") {
  runtime::DeviceRegistry registry;
  if (!has_cpu_device(registry)) return;
  auto artifact = std::make_shared<const artifact::LoadedArtifact>(cpu_artifact(module_bytes(KILN_TEST_CPU_MODULE_1)));
  std::unique_ptr<hal::Device> device = open_cpu(registry);
  constexpr int kThreads = 3;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto session = runtime::Session::create(artifact, *device);
      if (!session.is_ok()) {
        failures[t] = session.status().message();
        return;
      }
      for (int run = 0; run < 20 && failures[t].empty(); ++run)
        failures[t] = wrong_output(**session, 100 + t * 50 + run, 1.0f);
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK_MESSAGE(failures[t].empty(), "thread " << t << ": " << failures[t]);
}

TEST_CASE("cpu driver: two different modules loaded at once each run their own code") {
  runtime::DeviceRegistry registry;
  if (!has_cpu_device(registry)) return;
  std::unique_ptr<hal::Device> device = open_cpu(registry);
  // Regression: dlopen finds loaded libraries by path, and /proc/self/fd/N names a different
  // module once descriptor N is reused; each module keeps its descriptor while loaded.
  auto once = std::make_shared<const artifact::LoadedArtifact>(cpu_artifact(module_bytes(KILN_TEST_CPU_MODULE_1)));
  auto twice = std::make_shared<const artifact::LoadedArtifact>(cpu_artifact(module_bytes(KILN_TEST_CPU_MODULE_2)));
  auto first = runtime::Session::create(once, *device);
  REQUIRE(first.is_ok());
  auto second = runtime::Session::create(twice, *device);
  REQUIRE(second.is_ok());
  check_run(**first, 50, 1.0f);
  check_run(**second, 50, 2.0f);
  first->reset();
  auto third = runtime::Session::create(twice, *device);
  REQUIRE(third.is_ok());
  check_run(**third, 50, 2.0f);
}

TEST_CASE("cpu driver: damaged modules, missing functions and missing CPU features are refused") {
  runtime::DeviceRegistry registry;
  if (!has_cpu_device(registry)) return;
  std::unique_ptr<hal::Device> device = open_cpu(registry);
  auto load = [&](artifact::LoadedArtifact art) {
    return device->load_executable(std::make_shared<const artifact::LoadedArtifact>(std::move(art)));
  };
  const std::vector<uint8_t> good = module_bytes(KILN_TEST_CPU_MODULE_1);

  SUBCASE("not a shared object") {
    Result<std::unique_ptr<hal::Executable>> exe = load(cpu_artifact({'n', 'o', 't', ' ', 'E', 'L', 'F'}));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().code() == ErrorCode::kCorrupt);
    CHECK(exe.status().message().find("cpu module 0 (7 bytes) is not a loadable x86-64 shared object: ") == 0);
  }
  SUBCASE("truncated") {
    Result<std::unique_ptr<hal::Executable>> exe =
        load(cpu_artifact(std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2)));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().code() == ErrorCode::kCorrupt);
  }
  SUBCASE("no such function") {
    Result<std::unique_ptr<hal::Executable>> exe = load(cpu_artifact(good, "kiln_no_such_kernel"));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().code() == ErrorCode::kCorrupt);
    CHECK(exe.status().message().find("exports no function 'kiln_no_such_kernel'") != std::string::npos);
  }
  SUBCASE("no such module") {
    artifact::LoadedArtifact art = cpu_artifact(good);
    art.modules[0].id = 7;
    Result<std::unique_ptr<hal::Executable>> exe = load(std::move(art));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().code() == ErrorCode::kCorrupt);
    CHECK(exe.status().message().find("cpu module 0, which it does not hold") != std::string::npos);
  }
  SUBCASE("a module format this runtime does not load") {
    artifact::LoadedArtifact art = cpu_artifact(good);
    art.modules[0].format = "so:aarch64";
    Result<std::unique_ptr<hal::Executable>> exe = load(std::move(art));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().code() == ErrorCode::kUnsupported);
    CHECK(exe.status().message().find("'so:aarch64'") != std::string::npos);
  }
  SUBCASE("a CPU feature this CPU lacks; a later variant without it runs") {
    artifact::LoadedArtifact art = cpu_artifact(good, kEntry, {"kiln-no-such-cpu-flag"});
    artifact::LoadedArtifact fallback = cpu_artifact(good, kEntry, {"kiln-no-such-cpu-flag"});
    Result<std::unique_ptr<hal::Executable>> exe = load(std::move(art));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().code() == ErrorCode::kUnsupported);
    CHECK(exe.status().message().find("needs the CPU feature 'kiln-no-such-cpu-flag'") != std::string::npos);
    artifact::KernelBinary plain = fallback.kernels[0];
    plain.required_features.clear();
    fallback.kernels.push_back(std::move(plain));
    auto shared = std::make_shared<const artifact::LoadedArtifact>(std::move(fallback));
    auto session = runtime::Session::create(shared, *device);
    REQUIRE_MESSAGE(session.is_ok(), session.status().message());
    check_run(**session, 9, 1.0f);
  }
}
