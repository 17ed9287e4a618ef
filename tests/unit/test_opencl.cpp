// OpenCL driver (runtime/drivers/opencl/), what is specific to it: PoCL's listing, program
// builds (the build log of a bad kernel) and the binary cache, hand-written OpenCL C kernels
// through sessions (arena offsets as sub-buffers, a misaligned arena), and the load-time
// rejections (missing extensions, workgroups too wide, missing entry points). Listing, buffers,
// execution of compiled kernels, profiling, threads and load errors every driver shares are in
// the HAL conformance suite (test_hal_conformance.cpp).
//
// Without an OpenCL device these tests print why and pass; with KILN_REQUIRE_DRIVERS containing
// "opencl" (set by CI), a missing device fails them instead.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/interpreter.h"
#include "runtime/device_registry.h"
#include "runtime/drivers/opencl/opencl_driver.h"
#include "runtime/session.h"
#include "test_artifact_util.h"
#include "test_compile_util.h"

using namespace kiln;
using namespace kiln::artifact::testing;

namespace {

bool opencl_required() {
  const char* required = std::getenv("KILN_REQUIRE_DRIVERS");
  return required && std::string(required).find("opencl") != std::string::npos;
}

std::string opencl_unavailable_reason(const runtime::DeviceRegistry& registry) {
  for (const auto& driver : registry.drivers())
    if (driver->name() == "opencl") return driver->unavailable_reason();
  return "the registry has no OpenCL driver";
}

// The first OpenCL device, or nullptr (after failing the test when OpenCL is required, or
// printing why it is skipped otherwise).
std::unique_ptr<runtime::hal::Device> open_opencl(const runtime::DeviceRegistry& registry) {
  for (const runtime::hal::DeviceInfo& info : registry.list_devices()) {
    if (info.driver != "opencl") continue;
    Result<std::unique_ptr<runtime::hal::Device>> device = registry.open_device(info.id);
    INFO((device.is_ok() ? std::string() : device.status().message()));
    REQUIRE(device.is_ok());
    return std::move(device).value();
  }
  const std::string reason = "no OpenCL device: " + opencl_unavailable_reason(registry);
  if (opencl_required()) FAIL("KILN_REQUIRE_DRIVERS requires opencl, but " << reason);
  MESSAGE("skipping OpenCL test: " << reason);
  return nullptr;
}

// Every OpenCL device (PoCL and a GPU on the GPU machine), or none (as open_opencl).
std::vector<std::unique_ptr<runtime::hal::Device>> open_all_opencl(const runtime::DeviceRegistry& registry) {
  std::vector<std::unique_ptr<runtime::hal::Device>> devices;
  if (!open_opencl(registry)) return devices;
  for (const runtime::hal::DeviceInfo& info : registry.list_devices()) {
    if (info.driver != "opencl") continue;
    Result<std::unique_ptr<runtime::hal::Device>> device = registry.open_device(info.id);
    REQUIRE(device.is_ok());
    devices.push_back(std::move(device).value());
  }
  return devices;
}

ir::Tensor filled(std::vector<int64_t> shape, double start, double step) {
  Result<ir::Tensor> t = ir::Tensor::zeros(ir::DType::kF32, std::move(shape));
  REQUIRE(t.is_ok());
  for (int64_t i = 0; i < t->num_elements(); ++i) t->set_element_from_double(i, start + step * double(i));
  return std::move(t).value();
}

// The sample model's kernels written by hand against the artifact calling convention:
//   k0 (fused_add_mul_relu_0): r = relu((x + w) * y) over N*4 elements; args x, w, y, r, N
//   k1 (reduce_sum_1):          s[row] = sum of r[row, :];            args r, s, N
// Both loop grid-stride, as codegen's kernels do.
constexpr const char* kElementwiseSource = R"CL(
__kernel void add_mul_relu(__global const float* x, __global const float* w,
                           __global const float* y, __global float* r, long N) {
  const long total = N * 4;
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    const float m = (x[i] + w[i % 4]) * y[i];
    r[i] = m > 0.0f ? m : 0.0f;
  }
}
)CL";
constexpr const char* kReduceSource = R"CL(
__kernel void row_sum(__global const float* r, __global float* s, long N) {
  for (long row = get_global_id(0); row < N; row += get_global_size(0)) {
    float acc = 0.0f;
    for (int j = 0; j < 4; ++j) acc += r[row * 4 + j];
    s[row] = acc;
  }
}
)CL";

artifact::KernelBinary opencl_kernel(const ir::Graph& graph, uint32_t kernel_index, const std::string& source,
                                     const std::string& entry, std::vector<artifact::KernelArg> args,
                                     ir::SizeExpr work_items) {
  artifact::KernelBinary k;
  k.target = "opencl";
  k.kernel_name = graph.kernels()[kernel_index].name;
  k.kernel_index = kernel_index;
  k.format = "opencl-c";
  k.entry_point = entry;
  k.blob = std::vector<uint8_t>(source.begin(), source.end());
  k.args = std::move(args);
  k.dispatch.work_items = std::move(work_items);
  k.dispatch.items_per_group = 64;
  k.dispatch.workgroup_size = 64;
  return k;
}

artifact::KernelArg buffer_arg(const ir::Graph& graph, const char* name) {
  artifact::KernelArg a;
  a.kind = artifact::KernelArg::Kind::kBuffer;
  a.value = graph.find(name);
  REQUIRE(a.value != ir::kNoNode);
  return a;
}

artifact::KernelArg symbol_arg(const char* symbol) {
  artifact::KernelArg a;
  a.kind = artifact::KernelArg::Kind::kSymbol;
  a.symbol = symbol;
  return a;
}

struct SampleOptions {
  int64_t arena_offset = 64;   // where r lives in the arena
  int64_t alignment = 64;      // the plan's alignment
  std::string source_suffix;   // appended to both sources (makes them unique for cache tests)
  std::vector<std::string> features;
};

// The sample model (test_artifact_util.h) written and read back, with hand-written OpenCL
// kernels attached. r is an arena intermediate that is also an output, w a constant.
std::shared_ptr<const artifact::LoadedArtifact> sample_with_opencl(const SampleOptions& options = {}) {
  SampleModel model = sample_model();
  const ir::SizeExpr row = ir::SizeExpr::symbol("N") * 16;
  for (ir::BufferAssignment& b : model.plan.buffers)
    if (b.storage == ir::Storage::kArena) b.offset = ir::SizeExpr::constant(options.arena_offset);
  model.plan.arena_bytes = row + ir::SizeExpr::constant(options.arena_offset);
  model.plan.alignment = options.alignment;
  Result<artifact::LoadedArtifact> loaded = read_bytes(write_or_fail(model.graph, model.plan));
  INFO((loaded.is_ok() ? std::string() : loaded.status().message()));
  REQUIRE(loaded.is_ok());
  const ir::Graph& g = loaded->graph;
  artifact::KernelBinary k0 = opencl_kernel(
      g, 0, kElementwiseSource + options.source_suffix, "add_mul_relu",
      {buffer_arg(g, "x"), buffer_arg(g, "w"), buffer_arg(g, "y"), buffer_arg(g, "r"), symbol_arg("N")},
      ir::SizeExpr::symbol("N") * 4);
  k0.required_features = options.features;
  artifact::KernelBinary k1 = opencl_kernel(g, 1, kReduceSource + options.source_suffix, "row_sum",
                                            {buffer_arg(g, "r"), buffer_arg(g, "s"), symbol_arg("N")},
                                            ir::SizeExpr::symbol("N"));
  loaded->kernels = {k0, k1};
  return std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value());
}

std::vector<ir::Tensor> sample_inputs(int64_t n, double shift) {
  return {filled({n, 4}, -2.0 + shift, 0.37), filled({n, 4}, 0.5, -0.11)};
}

std::unique_ptr<runtime::Session> session_or_fail(std::shared_ptr<const artifact::LoadedArtifact> artifact,
                                                  runtime::hal::Device& device) {
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(std::move(artifact), device);
  INFO((session.is_ok() ? std::string() : session.status().message()));
  REQUIRE(session.is_ok());
  return std::move(session).value();
}

}  // namespace

TEST_CASE("opencl: the driver lists PoCL as a CPU device") {
  // Ids, priorities, opening by id and unknown ids: the HAL conformance suite.
  runtime::DeviceRegistry registry;
  auto device = open_opencl(registry);
  if (!device) return;
  bool saw_pocl = false;
  int index = 0;
  for (const runtime::hal::DeviceInfo& info : registry.list_devices()) {
    if (info.driver != "opencl") continue;
    INFO(info.id << ": " << info.description);
    if (info.description.rfind("Portable Computing Language / ", 0) == 0) {
      saw_pocl = true;
      CHECK(info.type == runtime::hal::DeviceType::kCpu);
      CHECK(info.priority == 100);
    }
    ++index;
  }
  // The development and CI machines have PoCL; on others it is optional.
  if (opencl_required() && index == 1) CHECK(saw_pocl);
}

TEST_CASE("opencl: a kernel that does not compile fails the load with the build log") {
  runtime::DeviceRegistry registry;
  auto device = open_opencl(registry);
  if (!device) return;
  SampleModel model = sample_model();
  model.plan.arena_bytes = ir::SizeExpr::symbol("N") * 16 + ir::SizeExpr::constant(64);
  Result<artifact::LoadedArtifact> loaded = read_bytes(write_or_fail(model.graph, model.plan));
  REQUIRE(loaded.is_ok());
  const std::string broken = "__kernel void broken(__global float* r) { r[0] = kiln_undeclared_name; }\n";
  loaded->kernels = {opencl_kernel(loaded->graph, 0, broken, "broken", {buffer_arg(loaded->graph, "r")},
                                   ir::SizeExpr::constant(1)),
                     opencl_kernel(loaded->graph, 1, kReduceSource, "row_sum", {}, ir::SizeExpr::constant(1))};
  auto artifact = std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value());
  Result<std::unique_ptr<runtime::hal::Executable>> exe = device->load_executable(artifact);
  REQUIRE_FALSE(exe.is_ok());
  const std::string message = exe.status().message();
  INFO(message);
  CHECK(exe.status().code() == ErrorCode::kInternal);
  CHECK(message.find("fused_add_mul_relu_0") != std::string::npos);
  CHECK(message.find("CL_BUILD_PROGRAM_FAILURE") != std::string::npos);
  CHECK(message.find("build log:") != std::string::npos);
  CHECK(message.find("kiln_undeclared_name") != std::string::npos);  // from the compiler's log
}

TEST_CASE("opencl: hand-written kernels run through a session and match the interpreter") {
  runtime::DeviceRegistry registry;
  for (const auto& device : open_all_opencl(registry)) {
    INFO("device " << device->info().id << ": " << device->info().description);
    // 64-byte offsets (the stream lays out its own arena when the device wants more alignment)
    // and 128-byte offsets in a 128-aligned plan (the session's arena, sliced by sub-buffers).
    for (int64_t offset : {int64_t(64), int64_t(128)}) {
      SampleOptions options;
      options.arena_offset = offset;
      options.alignment = offset;
      auto artifact = sample_with_opencl(options);
      auto session = session_or_fail(artifact, *device);
      // Changing N re-binds the symbol argument and resizes buffers and arena; repeating it
      // reuses the preset arguments.
      for (int64_t n : {int64_t(3), int64_t(37), int64_t(37), int64_t(1), int64_t(300)}) {
        INFO("arena offset " << offset << ", N = " << n);
        std::vector<ir::Tensor> inputs = sample_inputs(n, double(n) * 0.01);
        Result<std::vector<ir::Tensor>> out = session->run(inputs);
        INFO((out.is_ok() ? std::string() : out.status().message()));
        REQUIRE(out.is_ok());
        kiln::testing::check_close_to_interpreter(*artifact, session->device().info(), inputs, *out, 1e-5);
      }
    }
  }
}

TEST_CASE("opencl: a misaligned arena offset in an aligned plan is a clear error") {
  runtime::DeviceRegistry registry;
  auto device = open_opencl(registry);
  if (!device) return;
  // A plan claiming 4096-byte alignment is used as planned on any device; r at offset 64
  // breaks that claim and cannot be a sub-buffer origin on devices aligning to more than 64.
  SampleOptions options;
  options.arena_offset = 64;
  options.alignment = 4096;
  auto artifact = sample_with_opencl(options);
  auto session = session_or_fail(artifact, *device);
  std::vector<ir::Tensor> inputs = sample_inputs(5, 0.0);
  Result<std::vector<ir::Tensor>> out = session->run(inputs);
  if (out.is_ok()) {
    // The device aligns to 64 or less.
    kiln::testing::check_close_to_interpreter(*artifact, session->device().info(), inputs, *out, 1e-5);
  } else {
    INFO(out.status().message());
    CHECK(out.status().message().find("CL_DEVICE_MEM_BASE_ADDR_ALIGN") != std::string::npos);
    CHECK(out.status().message().find("'r'") != std::string::npos);
  }
}

TEST_CASE("opencl: a second load of the same kernels on the device uses the cached binary") {
  runtime::DeviceRegistry registry;
  auto device = open_opencl(registry);
  if (!device) return;
  SampleOptions options;
  options.source_suffix = "// binary cache test\n";  // sources no other test builds
  auto artifact = sample_with_opencl(options);
  Result<runtime::opencl::ProgramCacheStats> before = runtime::opencl::program_cache_stats(*device);
  REQUIRE(before.is_ok());
  auto first = session_or_fail(artifact, *device);
  Result<runtime::opencl::ProgramCacheStats> after_first = runtime::opencl::program_cache_stats(*device);
  REQUIRE(after_first.is_ok());
  CHECK(after_first->source_builds == before->source_builds + 2);  // two distinct sources
  CHECK(after_first->binary_loads == before->binary_loads);

  // A second session, and a device opened again, load both programs from binaries.
  auto second = session_or_fail(artifact, *device);
  Result<std::unique_ptr<runtime::hal::Device>> reopened = registry.open_device(device->info().id);
  REQUIRE(reopened.is_ok());
  auto third = session_or_fail(artifact, **reopened);
  Result<runtime::opencl::ProgramCacheStats> after = runtime::opencl::program_cache_stats(*device);
  REQUIRE(after.is_ok());
  CHECK(after->source_builds == after_first->source_builds);
  CHECK(after->binary_loads == after_first->binary_loads + 4);

  std::vector<ir::Tensor> inputs = sample_inputs(19, 0.5);
  for (runtime::Session* session : {first.get(), second.get(), third.get()}) {
    Result<std::vector<ir::Tensor>> out = session->run(inputs);
    REQUIRE(out.is_ok());
    kiln::testing::check_close_to_interpreter(*artifact, session->device().info(), inputs, *out, 1e-5);
  }
  runtime::DeviceRegistry other;
  auto reference = other.open_device("reference");
  REQUIRE(reference.is_ok());
  CHECK(runtime::opencl::program_cache_stats(**reference).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("opencl: loading rejects missing device features and artifacts without OpenCL kernels") {
  runtime::DeviceRegistry registry;
  auto device = open_opencl(registry);
  if (!device) return;
  SampleOptions options;
  options.features = {"cl_khr_global_int32_base_atomics", "cl_kiln_no_such_extension"};
  Result<std::unique_ptr<runtime::hal::Executable>> exe = device->load_executable(sample_with_opencl(options));
  REQUIRE_FALSE(exe.is_ok());
  CHECK(exe.status().code() == ErrorCode::kUnsupported);
  CHECK(exe.status().message().find("'cl_kiln_no_such_extension'") != std::string::npos);
  CHECK(exe.status().message().find("fused_add_mul_relu_0") != std::string::npos);

  // cl_khr_int64 is core on full-profile devices; a supported feature list loads.
  options.features = {"cl_khr_int64"};
  CHECK(device->load_executable(sample_with_opencl(options)).is_ok());

  // A workgroup size beyond the device's limit, and an entry point the source lacks, fail the
  // load rather than the first run.
  {
    SampleModel model = sample_model();
    model.plan.arena_bytes = ir::SizeExpr::symbol("N") * 16 + ir::SizeExpr::constant(64);
    Result<artifact::LoadedArtifact> loaded = read_bytes(write_or_fail(model.graph, model.plan));
    REQUIRE(loaded.is_ok());
    const ir::Graph& g = loaded->graph;
    artifact::KernelBinary k0 = opencl_kernel(
        g, 0, kElementwiseSource, "add_mul_relu",
        {buffer_arg(g, "x"), buffer_arg(g, "w"), buffer_arg(g, "y"), buffer_arg(g, "r"), symbol_arg("N")},
        ir::SizeExpr::symbol("N") * 4);
    artifact::KernelBinary k1 = opencl_kernel(g, 1, kReduceSource, "row_sum",
                                              {buffer_arg(g, "r"), buffer_arg(g, "s"), symbol_arg("N")},
                                              ir::SizeExpr::symbol("N"));
    artifact::LoadedArtifact too_wide;
    too_wide.graph = g.clone();
    too_wide.plan = loaded->plan;
    too_wide.kernels = {k0, k1};
    too_wide.kernels[1].dispatch.workgroup_size = 1u << 24;
    exe = device->load_executable(std::make_shared<const artifact::LoadedArtifact>(std::move(too_wide)));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().code() == ErrorCode::kUnsupported);
    CHECK(exe.status().message().find("workgroups of 16777216 work-items") != std::string::npos);

    loaded->kernels = {k0, k1};
    loaded->kernels[0].entry_point = "not_in_the_source";
    exe = device->load_executable(std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value()));
    REQUIRE_FALSE(exe.is_ok());
    CHECK(exe.status().message().find("not_in_the_source") != std::string::npos);
    CHECK(exe.status().message().find("CL_INVALID_KERNEL_NAME") != std::string::npos);
  }

  // An artifact with no OpenCL kernels at all: the HAL conformance suite.
}
