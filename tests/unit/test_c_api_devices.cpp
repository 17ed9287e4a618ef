// The C API on every listed device with an artifact that carries real kernels: a small graph
// (matmul, broadcast add, softmax, row reduction; symbolic batch N) is compiled here for every
// codegen target this build has, then run through the C API on each device:
//  - N threads x M runs, each thread with its own session on the one shared artifact, give
//    results byte-identical to a single-threaded run on that device, and close to the
//    reference device's;
//  - device buffers bound in place (input and output) and an asynchronous run with its event;
//  - memory the application allocated itself (kiln_buffer_wrap_native): used in place and left
//    to the application on CUDA devices, refused with KILN_UNSUPPORTED elsewhere.
// Devices whose driver has no kernels in the artifact are skipped with the reason printed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "test_compile_util.h"

using namespace kiln;

namespace {

constexpr const char* kGraph = R"(
graph probe(x: f32[N, 24], w: f32[24, 7], b: f32[7]) -> (p: f32[N, 7], t: f32[N]) {
  h = add(matmul(x, w), b)
  p = softmax(h, axis=-1)
  t = reduce_sum(mul(h, h), axes=[1])
}
)";

std::vector<uint8_t> compile_for_every_target() { return kiln::testing::compile_for_every_target(kGraph); }

// The ids of every listed device that can run `artifact`; the others are reported as skipped.
std::vector<std::string> devices_that_run(kiln_artifact* artifact) {
  std::vector<std::string> ids;
  size_t devices = 0;
  REQUIRE(kiln_device_count(&devices) == KILN_OK);
  for (size_t d = 0; d < devices; ++d) {
    kiln_device_info info;
    REQUIRE(kiln_device_get_info(d, &info) == KILN_OK);
    int can_run = 0;
    REQUIRE(kiln_artifact_supports_device(artifact, info.id, &can_run) == KILN_OK);
    if (can_run) ids.push_back(info.id);
    else MESSAGE("c_api devices: skipping device " << info.id << ": " << std::string(kiln_last_error_message()));
  }
  return ids;
}

constexpr int64_t kRows = 19;  // odd on purpose

struct Outputs {
  kiln_status status = KILN_OK;
  std::string error;
  std::vector<float> p, t;
};

std::vector<float> pattern(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int((i * 13 + size_t(salt) * 7) % 17) - 8) * 0.0625f;
  return v;
}

Outputs run_probe(kiln_session* session) {
  Outputs out;
  auto fail = [&](kiln_status st) {
    out.status = st;
    out.error = kiln_last_error_message();
    return out;
  };
  const std::vector<float> x = pattern(size_t(kRows) * 24, 1), w = pattern(24 * 7, 2), b = pattern(7, 3);
  const int64_t xd[2] = {kRows, 24}, wd[2] = {24, 7}, bd[1] = {7};
  kiln_status st;
  if ((st = kiln_session_set_input(session, "x", KILN_DTYPE_F32, xd, 2, x.data(), x.size() * 4)) != KILN_OK) return fail(st);
  if ((st = kiln_session_set_input(session, "w", KILN_DTYPE_F32, wd, 2, w.data(), w.size() * 4)) != KILN_OK) return fail(st);
  if ((st = kiln_session_set_input(session, "b", KILN_DTYPE_F32, bd, 1, b.data(), b.size() * 4)) != KILN_OK) return fail(st);
  if ((st = kiln_session_run(session)) != KILN_OK) return fail(st);
  out.p.resize(size_t(kRows) * 7);
  out.t.resize(size_t(kRows));
  if ((st = kiln_session_read_output(session, "p", out.p.data(), out.p.size() * 4)) != KILN_OK) return fail(st);
  if ((st = kiln_session_read_output(session, "t", out.t.data(), out.t.size() * 4)) != KILN_OK) return fail(st);
  return out;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(std::fabs(got[i] - want[i]) <= 1e-4f + 1e-4f * std::fabs(want[i]));
}

}  // namespace

TEST_CASE("c_api devices: threads, device buffers and async runs on every listed device") {
  std::vector<uint8_t> bytes = compile_for_every_target();
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);

  kiln_session* ref = nullptr;
  REQUIRE(kiln_session_create(artifact, "reference", &ref) == KILN_OK);
  const Outputs reference = run_probe(ref);
  REQUIRE_MESSAGE(reference.status == KILN_OK, reference.error);
  kiln_session_destroy(ref);

  for (const std::string& id : devices_that_run(artifact)) {
    CAPTURE(id);

    // One thread first, then 3 threads x 4 runs: byte-identical.
    kiln_session* session = nullptr;
    REQUIRE_MESSAGE(kiln_session_create(artifact, id.c_str(), &session) == KILN_OK,
                    std::string(kiln_last_error_message()));
    const Outputs single = run_probe(session);
    REQUIRE_MESSAGE(single.status == KILN_OK, single.error);
    check_close(single.p, reference.p);
    check_close(single.t, reference.t);
    std::vector<std::vector<Outputs>> results(3);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        kiln_session* own = nullptr;
        if (kiln_session_create(artifact, id.c_str(), &own) != KILN_OK) {
          results[t].push_back(Outputs{KILN_INTERNAL, kiln_last_error_message(), {}, {}});
          return;
        }
        for (int r = 0; r < 4; ++r) results[t].push_back(run_probe(own));
        kiln_session_destroy(own);
      });
    }
    for (std::thread& th : threads) th.join();
    for (const auto& per_thread : results) {
      REQUIRE(per_thread.size() == 4);
      for (const Outputs& o : per_thread) {
        REQUIRE_MESSAGE(o.status == KILN_OK, o.error);
        CHECK(std::memcmp(o.p.data(), single.p.data(), o.p.size() * 4) == 0);
        CHECK(std::memcmp(o.t.data(), single.t.data(), o.t.size() * 4) == 0);
      }
    }

    // Device buffers in place: x as an input buffer, p into an output buffer; async + event.
    const std::vector<float> x = pattern(size_t(kRows) * 24, 1);
    kiln_buffer* xb = nullptr;
    kiln_buffer* pb = nullptr;
    REQUIRE(kiln_buffer_create(session, x.size() * 4, &xb) == KILN_OK);
    REQUIRE(kiln_buffer_create(session, size_t(kRows) * 7 * 4, &pb) == KILN_OK);
    REQUIRE(kiln_buffer_write(xb, 0, x.data(), x.size() * 4) == KILN_OK);
    std::vector<float> back(x.size());
    REQUIRE(kiln_buffer_read(xb, 0, back.data(), back.size() * 4) == KILN_OK);
    CHECK(back == x);
    const int64_t xd[2] = {kRows, 24};
    REQUIRE(kiln_session_set_input_buffer(session, "x", KILN_DTYPE_F32, xd, 2, xb) == KILN_OK);
    REQUIRE(kiln_session_set_output_buffer(session, "p", pb) == KILN_OK);
    kiln_event* event = nullptr;
    REQUIRE_MESSAGE(kiln_session_run_async(session, &event) == KILN_OK, std::string(kiln_last_error_message()));
    REQUIRE(kiln_event_wait(event) == KILN_OK);
    kiln_event_destroy(event);
    std::vector<float> p(static_cast<size_t>(kRows) * 7);
    REQUIRE(kiln_buffer_read(pb, 0, p.data(), p.size() * 4) == KILN_OK);
    CHECK(std::memcmp(p.data(), single.p.data(), p.size() * 4) == 0);
    std::vector<float> t(static_cast<size_t>(kRows));
    REQUIRE(kiln_session_read_output(session, "t", t.data(), t.size() * 4) == KILN_OK);
    CHECK(std::memcmp(t.data(), single.t.data(), t.size() * 4) == 0);

    // Profiling names the artifact's kernels.
    REQUIRE(kiln_session_set_profiling(session, 1) == KILN_OK);
    REQUIRE(kiln_session_run(session) == KILN_OK);
    size_t kernels = 0;
    REQUIRE(kiln_session_profile_count(session, &kernels) == KILN_OK);
    CHECK(kernels >= 1);
    for (size_t k = 0; k < kernels; ++k) {
      kiln_kernel_time time;
      REQUIRE(kiln_session_profile_entry(session, k, &time) == KILN_OK);
      CHECK(std::strlen(time.name) > 0);
      CHECK(time.seconds >= 0);
    }
    kiln_buffer_destroy(xb);
    kiln_buffer_destroy(pb);
    kiln_session_destroy(session);
  }
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api devices: application-owned memory is used in place where the driver can wrap it") {
  std::vector<uint8_t> bytes = compile_for_every_target();
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  const size_t x_bytes = size_t(kRows) * 24 * 4, p_bytes = size_t(kRows) * 7 * 4;
  const std::vector<float> x = pattern(size_t(kRows) * 24, 1);
  const int64_t xd[2] = {kRows, 24};

  for (const std::string& id : devices_that_run(artifact)) {
    CAPTURE(id);
    kiln_session* session = nullptr;
    REQUIRE(kiln_session_create(artifact, id.c_str(), &session) == KILN_OK);
    kiln_buffer* wrapped = nullptr;
    CHECK(kiln_buffer_wrap_native(session, nullptr, 16, &wrapped) == KILN_INVALID_ARGUMENT);
    if (id == "reference" || id.rfind("cpu:", 0) == 0) {
      // The reference and cpu devices' memory is host memory: a host pointer is their native
      // handle, used in place as an input.
      std::vector<float> host = x;
      REQUIRE(kiln_buffer_wrap_native(session, host.data(), x_bytes, &wrapped) == KILN_OK);
      const Outputs copied = run_probe(session);
      REQUIRE(kiln_session_set_input_buffer(session, "x", KILN_DTYPE_F32, xd, 2, wrapped) == KILN_OK);
      REQUIRE(kiln_session_run(session) == KILN_OK);
      std::vector<float> p(size_t(kRows) * 7);
      REQUIRE(kiln_session_read_output(session, "p", p.data(), p_bytes) == KILN_OK);
      CHECK(p == copied.p);
      kiln_buffer_destroy(wrapped);
      kiln_session_destroy(session);
      continue;
    }
    if (id.rfind("cuda:", 0) != 0) {
      // Host memory is no native device handle of OpenCL or Vulkan, whose drivers wrap nothing.
      std::vector<float> host(4);
      CHECK(kiln_buffer_wrap_native(session, host.data(), 16, &wrapped) == KILN_UNSUPPORTED);
      CHECK(wrapped == nullptr);
      CHECK(std::string(kiln_last_error_message()).find("in place") != std::string::npos);
      kiln_session_destroy(session);
      continue;
    }
    const Outputs single = run_probe(session);
    REQUIRE_MESSAGE(single.status == KILN_OK, single.error);

    // The application's own allocations, in the device's primary context (as a framework's).
    Result<const runtime::cuda::CudaApi*> loaded = runtime::cuda::cuda_api();
    REQUIRE(loaded.is_ok());
    const runtime::cuda::CudaApi& api = **loaded;
    runtime::cuda::CUdevice device = 0;
    runtime::cuda::CUcontext context = nullptr;
    REQUIRE(api.cuDeviceGet(&device, std::stoi(id.substr(5))) == runtime::cuda::CUDA_SUCCESS);
    REQUIRE(api.cuDevicePrimaryCtxRetain(&context, device) == runtime::cuda::CUDA_SUCCESS);
    REQUIRE(api.cuCtxSetCurrent(context) == runtime::cuda::CUDA_SUCCESS);
    runtime::cuda::CUdeviceptr x_mem = 0, p_mem = 0;
    REQUIRE(api.cuMemAlloc_v2(&x_mem, x_bytes) == runtime::cuda::CUDA_SUCCESS);
    REQUIRE(api.cuMemAlloc_v2(&p_mem, p_bytes) == runtime::cuda::CUDA_SUCCESS);
    auto as_handle = [](runtime::cuda::CUdeviceptr p) { return reinterpret_cast<void*>(uintptr_t(p)); };

    // Refused: more bytes than the allocation holds, and memory that is not the device's.
    CHECK(kiln_buffer_wrap_native(session, as_handle(x_mem), x_bytes + 4096, &wrapped) == KILN_INVALID_ARGUMENT);
    CHECK(std::string(kiln_last_error_message()).find("remain in its allocation") != std::string::npos);
    std::vector<float> host(4);
    CHECK(kiln_buffer_wrap_native(session, host.data(), 16, &wrapped) == KILN_INVALID_ARGUMENT);

    kiln_buffer* xb = nullptr;
    kiln_buffer* pb = nullptr;
    REQUIRE_MESSAGE(kiln_buffer_wrap_native(session, as_handle(x_mem), x_bytes, &xb) == KILN_OK,
                    std::string(kiln_last_error_message()));
    REQUIRE(kiln_buffer_wrap_native(session, as_handle(p_mem), p_bytes, &pb) == KILN_OK);
    REQUIRE(kiln_buffer_write(xb, 0, x.data(), x_bytes) == KILN_OK);
    REQUIRE(kiln_session_set_input_buffer(session, "x", KILN_DTYPE_F32, xd, 2, xb) == KILN_OK);
    REQUIRE(kiln_session_set_output_buffer(session, "p", pb) == KILN_OK);
    for (int run = 0; run < 3; ++run) {  // the third run replays a CUDA graph over the same memory
      REQUIRE_MESSAGE(kiln_session_run(session) == KILN_OK, std::string(kiln_last_error_message()));
      // Read back with the application's own copy: the result is in its memory, in place.
      std::vector<float> p(size_t(kRows) * 7);
      REQUIRE(api.cuCtxSetCurrent(context) == runtime::cuda::CUDA_SUCCESS);
      REQUIRE(api.cuMemcpyDtoHAsync_v2(p.data(), p_mem, p_bytes, nullptr) == runtime::cuda::CUDA_SUCCESS);
      REQUIRE(api.cuStreamSynchronize(nullptr) == runtime::cuda::CUDA_SUCCESS);
      CHECK(std::memcmp(p.data(), single.p.data(), p_bytes) == 0);
    }
    kiln_session_destroy(session);
    kiln_buffer_destroy(xb);
    kiln_buffer_destroy(pb);
    // Kiln left the memory to the application: freeing it once is fine (a double free fails).
    REQUIRE(api.cuCtxSetCurrent(context) == runtime::cuda::CUDA_SUCCESS);
    CHECK(api.cuMemFree_v2(x_mem) == runtime::cuda::CUDA_SUCCESS);
    CHECK(api.cuMemFree_v2(p_mem) == runtime::cuda::CUDA_SUCCESS);
    api.cuDevicePrimaryCtxRelease_v2(device);
  }
  kiln_artifact_destroy(artifact);
}

TEST_CASE("c_api devices: device options reach the driver they name and are checked") {
  std::vector<uint8_t> bytes = compile_for_every_target();
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  kiln_session* session = nullptr;
  CHECK(kiln_session_create_with_options(artifact, "reference", nullptr, 1, &session) == KILN_INVALID_ARGUMENT);
  const kiln_device_option null_key[] = {{nullptr, "off"}};
  CHECK(kiln_session_create_with_options(artifact, "reference", null_key, 1, &session) == KILN_INVALID_ARGUMENT);
  const kiln_device_option no_driver[] = {{"nodriver.graphs", "off"}};
  CHECK(kiln_session_create_with_options(artifact, "reference", no_driver, 1, &session) == KILN_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error_message()).find("'nodriver.graphs'") != std::string::npos);
  CHECK(session == nullptr);

  // cuda.graphs=off on every device that can run the artifact: ignored by other drivers, and on
  // CUDA devices the runs launch kernel by kernel; the results are those of the reference.
  const kiln_device_option graphs_off[] = {{"cuda.graphs", "off"}};
  kiln_session* ref = nullptr;
  REQUIRE(kiln_session_create_with_options(artifact, "reference", graphs_off, 1, &ref) == KILN_OK);
  const Outputs reference = run_probe(ref);
  REQUIRE_MESSAGE(reference.status == KILN_OK, reference.error);
  kiln_session_destroy(ref);
  for (const std::string& id : devices_that_run(artifact)) {
    CAPTURE(id);
    REQUIRE_MESSAGE(kiln_session_create_with_options(artifact, id.c_str(), graphs_off, 1, &session) == KILN_OK,
                    std::string(kiln_last_error_message()));
    for (int run = 0; run < 3; ++run) {
      const Outputs out = run_probe(session);
      REQUIRE_MESSAGE(out.status == KILN_OK, out.error);
      check_close(out.p, reference.p);
      check_close(out.t, reference.t);
    }
    kiln_session_destroy(session);
    session = nullptr;
  }
  kiln_artifact_destroy(artifact);
}

namespace {
// An allocator over the CUDA driver API (what a framework's caching allocator would be), or over
// host memory for the reference device; counts what is live.
struct AppAllocator {
  const runtime::cuda::CudaApi* api = nullptr;  // null: host memory
  int live = 0, total = 0;
  static int allocate(void* self, size_t bytes, void** native) {
    auto* a = static_cast<AppAllocator*>(self);
    if (a->api) {
      runtime::cuda::CUdeviceptr p = 0;
      if (a->api->cuMemAlloc_v2(&p, bytes) != runtime::cuda::CUDA_SUCCESS) return 1;
      *native = reinterpret_cast<void*>(uintptr_t(p));
    } else {
      *native = std::malloc(bytes);
    }
    ++a->live;
    ++a->total;
    return 0;
  }
  static void deallocate(void* self, void* native, size_t) {
    auto* a = static_cast<AppAllocator*>(self);
    if (a->api) a->api->cuMemFree_v2(runtime::cuda::CUdeviceptr(uintptr_t(native)));
    else std::free(native);
    --a->live;
  }
};
}  // namespace

TEST_CASE("c_api devices: the application's stream and allocator, where the device takes them") {
  std::vector<uint8_t> bytes = compile_for_every_target();
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  for (const std::string& id : devices_that_run(artifact)) {
    CAPTURE(id);
    kiln_session* plain = nullptr;
    REQUIRE(kiln_session_create(artifact, id.c_str(), &plain) == KILN_OK);
    const Outputs expected = run_probe(plain);
    REQUIRE_MESSAGE(expected.status == KILN_OK, expected.error);
    kiln_session_destroy(plain);

    const bool cuda = id.rfind("cuda:", 0) == 0;
    AppAllocator app;
    runtime::cuda::CUstream stream = nullptr;
    runtime::cuda::CUdevice device = 0;
    runtime::cuda::CUcontext context = nullptr;
    if (cuda) {
      Result<const runtime::cuda::CudaApi*> loaded = runtime::cuda::cuda_api();
      REQUIRE(loaded.is_ok());
      app.api = *loaded;
      REQUIRE(app.api->cuDeviceGet(&device, std::stoi(id.substr(5))) == runtime::cuda::CUDA_SUCCESS);
      REQUIRE(app.api->cuDevicePrimaryCtxRetain(&context, device) == runtime::cuda::CUDA_SUCCESS);
      REQUIRE(app.api->cuCtxSetCurrent(context) == runtime::cuda::CUDA_SUCCESS);
      REQUIRE(app.api->cuStreamCreate(&stream, 0) == runtime::cuda::CUDA_SUCCESS);
    }
    kiln_allocator allocator = {&app, &AppAllocator::allocate, &AppAllocator::deallocate};
    kiln_session_options options;
    kiln_session_options_init(&options);
    options.device_id = id.c_str();
    options.allocator = &allocator;
    options.cuda_stream = cuda ? static_cast<void*>(stream) : nullptr;
    kiln_session* session = nullptr;
    const kiln_status created = kiln_session_create_ex(artifact, &options, &session);
    const bool host_memory = id == "reference" || id.rfind("cpu:", 0) == 0;  // host pointers are native
    if (!cuda && !host_memory) {
      // OpenCL and Vulkan cannot use memory they did not allocate.
      CHECK(created == KILN_UNSUPPORTED);
      CHECK(app.live == 0);
      continue;
    }
    REQUIRE_MESSAGE(created == KILN_OK, std::string(kiln_last_error_message()));
    for (int run = 0; run < 3; ++run) {  // on CUDA the third run replays a graph on the stream
      const Outputs out = run_probe(session);
      REQUIRE_MESSAGE(out.status == KILN_OK, out.error);
      CHECK(std::memcmp(out.p.data(), expected.p.data(), out.p.size() * 4) == 0);
      CHECK(std::memcmp(out.t.data(), expected.t.data(), out.t.size() * 4) == 0);
    }
    CHECK(app.total >= 3);  // inputs, outputs and arena came from the application
    kiln_session_destroy(session);
    CHECK(app.live == 0);
    if (cuda) {
      // The stream is still the application's: Kiln did not destroy it.
      REQUIRE(app.api->cuCtxSetCurrent(context) == runtime::cuda::CUDA_SUCCESS);
      CHECK(app.api->cuStreamSynchronize(stream) == runtime::cuda::CUDA_SUCCESS);
      CHECK(app.api->cuStreamDestroy_v2(stream) == runtime::cuda::CUDA_SUCCESS);
      app.api->cuDevicePrimaryCtxRelease_v2(device);
    }
  }
  kiln_artifact_destroy(artifact);
}
