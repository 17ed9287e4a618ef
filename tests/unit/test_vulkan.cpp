// Vulkan driver, what is specific to it: lavapipe's listing, and hand-written SPIR-V artifacts
// (load errors: missing kernels, unknown features, damaged SPIR-V; kernels needing a device
// feature). Listing, buffers, execution of compiled kernels, profiling and threads every driver
// shares are in the HAL conformance suite (test_hal_conformance.cpp); feature fallbacks in
// test_vulkan_fallback.cpp.
//
// Without a Vulkan device these tests print why and skip, unless KILN_REQUIRE_DRIVERS names
// "vulkan", in which case they fail.
#include <doctest/doctest.h>

#ifdef KILN_HAVE_SPIRV_COMPILER

#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>

#include "codegen/spirv/spirv_compiler.h"
#include "ir_test_graphs.h"
#include "runtime/device_registry.h"
#include "runtime/drivers/vulkan/vulkan_driver.h"
#include "runtime/session.h"

using namespace kiln;
namespace hal = kiln::runtime::hal;

namespace {

bool vulkan_required() {
  const char* required = std::getenv("KILN_REQUIRE_DRIVERS");
  return required && std::string(required).find("vulkan") != std::string::npos;
}

// The first Vulkan device, or null after failing (required) or printing why it is skipped.
std::unique_ptr<hal::Device> open_vulkan_or_skip(const char* test) {
  std::unique_ptr<hal::Driver> driver = runtime::vulkan::create_vulkan_driver();
  std::vector<hal::DeviceInfo> devices = driver->devices();
  if (devices.empty()) {
    const std::string why = "no Vulkan device: " + driver->unavailable_reason();
    if (vulkan_required()) FAIL(why << " (KILN_REQUIRE_DRIVERS requires vulkan)");
    std::cout << "[skip] " << test << ": " << why << "\n";
    return nullptr;
  }
  Result<std::unique_ptr<hal::Device>> device = driver->open_device(devices.front().id);
  REQUIRE_MESSAGE(device.is_ok(), device.status().message());
  return std::move(device).value();
}

// Compiled once per shader: the tests build many artifacts from the same two shaders.
std::vector<uint8_t> spirv_blob(const std::string& glsl, const std::string& name) {
  static std::map<std::string, std::vector<uint8_t>> cache;  // only used from the main thread
  if (auto it = cache.find(glsl); it != cache.end()) return it->second;
  Result<codegen::spirv::SpirvModule> module = codegen::spirv::compile_glsl_compute(glsl, name, true, false);
  REQUIRE_MESSAGE(module.is_ok(), module.status().message());
  std::vector<uint8_t> blob(module->words.size() * 4);
  std::memcpy(blob.data(), module->words.data(), blob.size());
  cache[glsl] = blob;
  return blob;
}

// k0: a = x + y (into the arena); k1: r = a * w (w: constant f32[4], broadcast over rows).
// Both loop grid-stride over N*4 elements, N arriving as the one push constant.
constexpr const char* kAddShader = R"(#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer A { float a[]; };
layout(push_constant) uniform Sizes { uint N; } sizes;
void main() {
  uint total = sizes.N * 4u;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
    a[i] = x[i] + y[i];
}
)";
constexpr const char* kScaleShader = R"(#version 450
layout(local_size_x = 32) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer R { float r[]; };
layout(push_constant) uniform Sizes { uint N; } sizes;
void main() {
  uint total = sizes.N * 4u;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
    r[i] = a[i] * w[i % 4u];
}
)";

const float kWeights[4] = {0.5f, -1.0f, 2.0f, 3.0f};

// `edit` may damage the result for the error tests.
std::shared_ptr<const artifact::LoadedArtifact> add_scale_artifact(
    std::vector<std::string> features = {},
    const std::function<void(artifact::LoadedArtifact&)>& edit = nullptr) {
  ir::testing::GraphBuilder b;
  b.graph.name = "add_scale";
  ir::NodeId x = b.input("x", "f32[N, 4]");
  ir::NodeId y = b.input("y", "f32[N, 4]");
  ir::NodeId w = b.constant("w", ir::testing::f32_tensor({4}, {kWeights[0], kWeights[1], kWeights[2], kWeights[3]}));
  ir::NodeId a = b.op(ir::OpKind::kAdd, "a", {x, y});
  ir::NodeId r = b.op(ir::OpKind::kMul, "r", {a, w});
  b.output("r", r);
  ir::Kernel k0{"add_0", ir::KernelKind::kElementwise, {a}, ir::kNoNode, {x, y}, {a}};
  ir::Kernel k1{"mul_1", ir::KernelKind::kElementwise, {r}, ir::kNoNode, {a, w}, {r}};
  b.graph.kernels() = {k0, k1};

  artifact::LoadedArtifact art;
  art.graph = std::move(b.graph);
  const ir::SizeExpr row_bytes = ir::SizeExpr::symbol("N") * 16;
  auto place = [](ir::NodeId v, ir::Storage st, ir::SizeExpr size) {
    ir::BufferAssignment ba;
    ba.value = v;
    ba.storage = st;
    ba.offset = ir::SizeExpr::constant(0);
    ba.size = std::move(size);
    return ba;
  };
  art.plan.launches = {ir::Launch{0, {ir::Dim::symbol("N"), ir::Dim::of(4)}},
                       ir::Launch{1, {ir::Dim::symbol("N"), ir::Dim::of(4)}}};
  art.plan.buffers = {place(x, ir::Storage::kInput, row_bytes), place(y, ir::Storage::kInput, row_bytes),
                      place(w, ir::Storage::kConstant, ir::SizeExpr::constant(16)),
                      place(a, ir::Storage::kArena, row_bytes), place(r, ir::Storage::kOutput, row_bytes)};
  art.plan.arena_bytes = row_bytes;

  using Arg = artifact::KernelArg;
  artifact::KernelBinary add;
  add.target = "vulkan";
  add.kernel_name = "add_0";
  add.kernel_index = 0;
  add.format = "spirv";
  add.entry_point = "main";
  add.blob = spirv_blob(kAddShader, "add_0");
  add.required_features = features;
  add.args = {Arg{Arg::Kind::kBuffer, x, ""}, Arg{Arg::Kind::kBuffer, y, ""}, Arg{Arg::Kind::kBuffer, a, ""},
              Arg{Arg::Kind::kSymbol, 0, "N"}};
  add.dispatch = {ir::SizeExpr::symbol("N") * 4, 64, 64};
  artifact::KernelBinary scale = add;
  scale.kernel_name = "mul_1";
  scale.kernel_index = 1;
  scale.blob = spirv_blob(kScaleShader, "mul_1");
  scale.args = {Arg{Arg::Kind::kBuffer, a, ""}, Arg{Arg::Kind::kBuffer, w, ""}, Arg{Arg::Kind::kBuffer, r, ""},
                Arg{Arg::Kind::kSymbol, 0, "N"}};
  // Few groups covering many items each: the grid-stride loop does the rest.
  scale.dispatch = {ir::SizeExpr::symbol("N") * 4, 256, 32};
  art.kernels = {add, scale};
  if (edit) edit(art);
  return std::make_shared<const artifact::LoadedArtifact>(std::move(art));
}

ir::Tensor ramp(int64_t rows, double start, double step) {
  Result<ir::Tensor> t = ir::Tensor::zeros(ir::DType::kF32, {rows, 4});
  REQUIRE(t.is_ok());
  for (int64_t i = 0; i < t->num_elements(); ++i) t->set_element_from_double(i, start + step * double(i));
  return std::move(t).value();
}

// Runs the add_scale artifact for `rows` and checks every element against the formula.
void check_add_scale(runtime::Session& session, int64_t rows, double seed) {
  std::vector<ir::Tensor> inputs = {ramp(rows, seed, 0.25), ramp(rows, 1.0 - seed, -0.5)};
  Result<std::vector<ir::Tensor>> out = session.run(inputs);
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  REQUIRE(out->size() == 1);
  const ir::Tensor& r = (*out)[0];
  REQUIRE(r.shape() == std::vector<int64_t>{rows, 4});
  for (int64_t i = 0; i < rows * 4; ++i) {
    const double expected = (inputs[0].element_as_double(i) + inputs[1].element_as_double(i)) * kWeights[i % 4];
    REQUIRE(r.element_as_double(i) == doctest::Approx(expected));
  }
}

}  // namespace

TEST_CASE("vulkan: the driver lists lavapipe as a cpu device") {
  // Ids, priorities, opening by id and unknown ids: the HAL conformance suite.
  std::unique_ptr<hal::Driver> driver = runtime::vulkan::create_vulkan_driver();
  CHECK(driver->name() == "vulkan");
  std::vector<hal::DeviceInfo> devices = driver->devices();
  if (devices.empty()) {
    CHECK_FALSE(driver->unavailable_reason().empty());
    if (vulkan_required()) FAIL("no Vulkan device: " << driver->unavailable_reason());
    std::cout << "[skip] vulkan device listing: " << driver->unavailable_reason() << "\n";
    return;
  }
  for (const hal::DeviceInfo& device : devices) {
    if (device.description.find("llvmpipe") == std::string::npos) continue;
    CHECK(device.type == hal::DeviceType::kCpu);
    CHECK(device.priority == 100);
  }
}

TEST_CASE("vulkan: loading rejects artifacts without vulkan kernels or with unknown features") {
  std::unique_ptr<hal::Device> device = open_vulkan_or_skip("vulkan load errors");
  if (!device) return;
  Result<std::unique_ptr<hal::Executable>> none =
      device->load_executable(add_scale_artifact({}, [](artifact::LoadedArtifact& a) {
        for (artifact::KernelBinary& k : a.kernels) {
          k.target = "opencl";
          k.format = "opencl-c";
        }
      }));
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().code() == ErrorCode::kUnsupported);
  CHECK(none.status().message() == "the artifact has no kernels for target 'vulkan' (it has: opencl)");

  Result<std::unique_ptr<hal::Executable>> unknown = device->load_executable(add_scale_artifact({"rayQuery"}));
  REQUIRE_FALSE(unknown.is_ok());
  CHECK(unknown.status().code() == ErrorCode::kUnsupported);
  CHECK(unknown.status().message().find("'rayQuery'") != std::string::npos);

  Result<std::unique_ptr<hal::Executable>> partial = device->load_executable(
      add_scale_artifact({}, [](artifact::LoadedArtifact& a) { a.kernels.pop_back(); }));
  REQUIRE_FALSE(partial.is_ok());
  CHECK(partial.status().code() == ErrorCode::kCorrupt);
  CHECK(partial.status().message() == "the artifact has no Vulkan kernel for launched kernel 1");

  Result<std::unique_ptr<hal::Executable>> bad_blob = device->load_executable(
      add_scale_artifact({}, [](artifact::LoadedArtifact& a) { a.kernels[0].blob = std::vector<uint8_t>(a.kernels[0].blob.begin(), a.kernels[0].blob.begin() + 7); }));
  REQUIRE_FALSE(bad_blob.is_ok());
  CHECK(bad_blob.status().code() == ErrorCode::kCorrupt);
}

TEST_CASE("vulkan: kernels needing a device feature load only where the device has it") {
  std::unique_ptr<hal::Device> device = open_vulkan_or_skip("vulkan features");
  if (!device) return;
  // Whatever the device reports, a kernel needing shaderInt64 either loads and runs or is
  // rejected with kUnsupported naming the feature.
  Result<std::unique_ptr<hal::Executable>> exe = device->load_executable(add_scale_artifact({"shaderInt64"}));
  if (exe.is_ok()) {
    Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(add_scale_artifact({"shader_int64"}), *device);
    REQUIRE_MESSAGE(session.is_ok(), session.status().message());
    check_add_scale(**session, 9, 0.25);
  } else {
    CHECK(exe.status().code() == ErrorCode::kUnsupported);
    CHECK(exe.status().message().find("'shaderInt64'") != std::string::npos);
  }
}

#endif  // KILN_HAVE_SPIRV_COMPILER
