// Runtime: device registry, sessions on the reference device (binding, validation messages,
// running, profiling, concurrency). The reference device's buffers and the checks every driver
// passes are in the HAL conformance suite (test_hal_conformance.cpp).
#include <doctest/doctest.h>

#include <cstring>
#include <thread>

#include "ir/interpreter.h"
#include "runtime/device_registry.h"
#include "runtime/session.h"
#include "test_artifact_util.h"

using namespace kiln;
using namespace kiln::artifact::testing;

namespace {

std::shared_ptr<const artifact::LoadedArtifact> load_sample() {
  SampleModel model = sample_model();
  Result<artifact::LoadedArtifact> loaded = read_bytes(write_or_fail(model.graph, model.plan));
  REQUIRE(loaded.is_ok());
  return std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value());
}

std::unique_ptr<runtime::hal::Device> open_reference(const runtime::DeviceRegistry& registry) {
  Result<std::unique_ptr<runtime::hal::Device>> device = registry.open_device("reference");
  REQUIRE(device.is_ok());
  return std::move(device).value();
}

ir::Tensor filled(ir::DType dtype, std::vector<int64_t> shape, double start, double step) {
  Result<ir::Tensor> t = ir::Tensor::zeros(dtype, std::move(shape));
  REQUIRE(t.is_ok());
  for (int64_t i = 0; i < t->num_elements(); ++i) t->set_element_from_double(i, start + step * double(i));
  return std::move(t).value();
}

std::string message_of(const Status& s) {
  REQUIRE_FALSE(s.is_ok());
  return s.message();
}

}  // namespace

TEST_CASE("runtime: the registry lists the reference device and opens it by id") {
  runtime::DeviceRegistry registry;
  std::vector<runtime::hal::DeviceInfo> devices = registry.list_devices();
  REQUIRE_FALSE(devices.empty());
  bool found = false;
  for (const auto& d : devices) {
    if (d.id != "reference") continue;
    found = true;
    CHECK(d.type == runtime::hal::DeviceType::kCpu);
    CHECK(d.description == "Kiln reference interpreter");
    CHECK(runtime::hal::device_type_name(d.type) == "cpu");
  }
  CHECK(found);
  CHECK(registry.default_device_id() == devices.front().id);

  Result<std::unique_ptr<runtime::hal::Device>> def = registry.open_device("");
  REQUIRE(def.is_ok());
  CHECK((*def)->info().id == registry.default_device_id());

  Result<std::unique_ptr<runtime::hal::Device>> unknown = registry.open_device("cuda:7");
  REQUIRE_FALSE(unknown.is_ok());
  CHECK(unknown.status().code() == ErrorCode::kNotFound);
  CHECK(unknown.status().message() ==
        "unknown device 'cuda:7'; available devices: " + [&] {
          std::string ids;
          for (const auto& d : devices) ids += (ids.empty() ? "" : ", ") + d.id;
          return ids;
        }());
}

TEST_CASE("runtime: a session runs the artifact and matches the interpreter") {
  auto artifact = load_sample();
  runtime::DeviceRegistry registry;
  auto device = open_reference(registry);
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(artifact, *device);
  REQUIRE(session.is_ok());
  runtime::Session& s = **session;
  REQUIRE(s.input_specs().size() == 2);
  CHECK(s.input_specs()[0].name == "x");
  CHECK(s.input_specs()[0].type.to_string() == "f32[N, 4]");
  REQUIRE(s.output_specs().size() == 2);
  CHECK(s.output_specs()[1].type.to_string() == "f32[N]");

  ir::Tensor x = filled(ir::DType::kF32, {3, 4}, -2.0, 0.5);
  ir::Tensor y = filled(ir::DType::kF32, {3, 4}, 1.0, 0.25);
  REQUIRE(s.set_input("y", y).is_ok());  // by name, in any order
  REQUIRE(s.set_input("x", x).is_ok());
  REQUIRE(s.run().is_ok());
  CHECK(s.bindings().at("N") == 3);
  REQUIRE(s.outputs().size() == 2);
  CHECK(s.outputs()[0].shape() == std::vector<int64_t>{3, 4});
  CHECK(s.outputs()[1].shape() == std::vector<int64_t>{3});

  // r = relu((x + w) * y), s = sum over axis 1, computed here by hand.
  const float w[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  for (int row = 0; row < 3; ++row) {
    double sum = 0;
    for (int col = 0; col < 4; ++col) {
      const int i = row * 4 + col;
      double v = (x.element_as_double(i) + w[col]) * y.element_as_double(i);
      v = v > 0 ? v : 0;
      CHECK(s.outputs()[0].element_as_double(i) == doctest::Approx(v));
      sum += v;
    }
    CHECK(s.outputs()[1].element_as_double(row) == doctest::Approx(sum));
  }
  Result<ir::Tensor> by_name = s.output("s");
  REQUIRE(by_name.is_ok());
  CHECK(by_name->element_as_double(2) == s.outputs()[1].element_as_double(2));
  CHECK(s.output("nope").status().code() == ErrorCode::kNotFound);

  // A second run with another batch size rebinds N and resizes the buffers.
  std::vector<ir::Tensor> batch5 = {filled(ir::DType::kF32, {5, 4}, 0.1, 0.1),
                                    filled(ir::DType::kF32, {5, 4}, 1.0, 0.0)};
  Result<std::vector<ir::Tensor>> out5 = s.run(batch5);
  REQUIRE(out5.is_ok());
  CHECK(s.bindings().at("N") == 5);
  Result<std::vector<ir::Tensor>> expected = ir::interpret(artifact->graph, batch5);
  REQUIRE(expected.is_ok());
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE((*out5)[i].size_bytes() == (*expected)[i].size_bytes());
    CHECK(std::memcmp((*out5)[i].data(), (*expected)[i].data(), (*out5)[i].size_bytes()) == 0);
  }
}

TEST_CASE("runtime: input errors name the input, what was expected and what was given") {
  auto artifact = load_sample();
  runtime::DeviceRegistry registry;
  auto device = open_reference(registry);
  auto session = runtime::Session::create(artifact, *device);
  REQUIRE(session.is_ok());
  runtime::Session& s = **session;

  Status unknown = s.set_input("z", filled(ir::DType::kF32, {3, 4}, 0, 1));
  CHECK(unknown.code() == ErrorCode::kNotFound);
  CHECK(message_of(unknown) == "the artifact has no input named 'z' (its inputs: 'x', 'y')");

  CHECK(message_of(s.set_input("x", filled(ir::DType::kI32, {3, 4}, 0, 1))) ==
        "input 'x': expected f32[N, 4], given i32[3, 4] (dtype i32 instead of f32)");
  CHECK(message_of(s.set_input("x", filled(ir::DType::kF32, {3, 4, 1}, 0, 1))) ==
        "input 'x': expected f32[N, 4], given f32[3, 4, 1] (rank 3 instead of 2)");
  CHECK(message_of(s.set_input("x", filled(ir::DType::kF32, {3, 5}, 0, 1))) ==
        "input 'x': expected f32[N, 4], given f32[3, 5] (dimension 1 is 5 instead of 4)");

  REQUIRE(s.set_input("x", filled(ir::DType::kF32, {3, 4}, 0, 1)).is_ok());
  Status missing = s.run();
  CHECK(message_of(missing) == "input 'y' (f32[N, 4]) was not set");

  REQUIRE(s.set_input("y", filled(ir::DType::kF32, {2, 4}, 0, 1)).is_ok());
  Status disagree = s.run();
  CHECK(disagree.code() == ErrorCode::kInvalidArgument);
  CHECK(message_of(disagree) ==
        "input 'y': expected f32[N, 4], given f32[2, 4]: symbol N is 2 here but 3 in input 'x'");

  Result<std::vector<ir::Tensor>> wrong_count = s.run(std::vector<ir::Tensor>{});
  CHECK_FALSE(wrong_count.is_ok());
}

TEST_CASE("runtime: profiling attributes time to each kernel with its source nodes") {
  auto artifact = load_sample();
  runtime::DeviceRegistry registry;
  auto device = open_reference(registry);
  auto session = runtime::Session::create(artifact, *device);
  REQUIRE(session.is_ok());
  runtime::Session& s = **session;
  s.set_profiling(true);
  std::vector<ir::Tensor> inputs = {filled(ir::DType::kF32, {64, 4}, 0, 0.01),
                                    filled(ir::DType::kF32, {64, 4}, 1, 0.0)};
  Result<std::vector<ir::Tensor>> profiled = s.run(inputs);
  REQUIRE(profiled.is_ok());
  const runtime::hal::Profile& profile = s.last_profile();
  CHECK(profile.clock.find("host wall time") != std::string::npos);
  REQUIRE(profile.kernels.size() == 2);
  CHECK(profile.kernels[0].name == "fused_add_mul_relu_0");
  CHECK(profile.kernels[0].kind == "elementwise");
  CHECK(profile.kernels[0].source_nodes == std::vector<std::string>{"a", "m", "r"});
  CHECK(profile.kernels[1].name == "reduce_sum_1");
  CHECK(profile.kernels[1].kernel_index == 1);
  for (const auto& k : profile.kernels) CHECK(k.seconds >= 0);

  // Profiled and plain runs give identical results.
  s.set_profiling(false);
  Result<std::vector<ir::Tensor>> plain = s.run(inputs);
  REQUIRE(plain.is_ok());
  for (size_t i = 0; i < plain->size(); ++i)
    CHECK(std::memcmp((*plain)[i].data(), (*profiled)[i].data(), (*plain)[i].size_bytes()) == 0);
  CHECK(s.last_profile().kernels.empty());
}

TEST_CASE("runtime: an unfused graph profiles one entry per op") {
  SampleModel model = sample_model();
  model.graph.kernels().clear();
  model.plan = ir::ExecutionPlan{};
  Result<artifact::LoadedArtifact> loaded = read_bytes(write_or_fail(model.graph, model.plan));
  REQUIRE(loaded.is_ok());
  auto artifact = std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value());
  runtime::DeviceRegistry registry;
  auto device = open_reference(registry);
  auto session = runtime::Session::create(artifact, *device);
  REQUIRE(session.is_ok());
  (*session)->set_profiling(true);
  std::vector<ir::Tensor> inputs = {filled(ir::DType::kF32, {2, 4}, 0, 1),
                                    filled(ir::DType::kF32, {2, 4}, 0, 1)};
  REQUIRE((*session)->run(inputs).is_ok());
  std::vector<std::string> names;
  for (const auto& k : (*session)->last_profile().kernels) {
    names.push_back(k.name);
    CHECK(k.kernel_index == runtime::hal::kNoKernel);
  }
  CHECK(names == std::vector<std::string>{"a", "m", "r", "s"});
}

TEST_CASE("runtime: sessions on one shared artifact run concurrently") {
  auto artifact = load_sample();
  runtime::DeviceRegistry registry;
  auto device = open_reference(registry);
  constexpr int kThreads = 4;
  std::vector<std::vector<ir::Tensor>> results(kThreads);
  std::vector<Status> statuses(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto session = runtime::Session::create(artifact, *device);
      if (!session.is_ok()) { statuses[t] = session.status(); return; }
      std::vector<ir::Tensor> inputs = {filled(ir::DType::kF32, {8, 4}, -1.0 + t, 0.125),
                                        filled(ir::DType::kF32, {8, 4}, 0.5, 0.25)};
      for (int rep = 0; rep < 20; ++rep) {
        Result<std::vector<ir::Tensor>> out = (*session)->run(inputs);
        if (!out.is_ok()) { statuses[t] = out.status(); return; }
        results[t] = std::move(out).value();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << statuses[t].message());
    REQUIRE(statuses[t].is_ok());
    std::vector<ir::Tensor> inputs = {filled(ir::DType::kF32, {8, 4}, -1.0 + t, 0.125),
                                      filled(ir::DType::kF32, {8, 4}, 0.5, 0.25)};
    Result<std::vector<ir::Tensor>> expected = ir::interpret(artifact->graph, inputs);
    REQUIRE(expected.is_ok());
    for (size_t i = 0; i < expected->size(); ++i)
      CHECK(std::memcmp(results[t][i].data(), (*expected)[i].data(), (*expected)[i].size_bytes()) == 0);
  }
}
