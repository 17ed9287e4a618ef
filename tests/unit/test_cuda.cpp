// The CUDA driver without an artifact: it is always registered, and either lists CUDA devices
// (cuda:N, discrete GPUs of priority 400, listed first) or none with a reason; the C API
// reports the same. CUDA error statuses carry the error name and map out-of-memory to
// kOutOfMemory. On a machine with a CUDA device, buffers round-trip through the pinned staging
// pool (several chunks), range errors are statuses, and an impossible allocation is
// kOutOfMemory naming CUDA_ERROR_OUT_OF_MEMORY. End-to-end runs of CUDA artifacts are in
// tests/cuda/ and the cross-backend suite (they need the CUDA codegen target).
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/device_registry.h"
#include "runtime/drivers/cuda/cublaslt_api.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "runtime/drivers/cuda/cuda_driver.h"

using namespace kiln;
namespace hal = kiln::runtime::hal;

namespace {

const hal::Driver* find_driver(const runtime::DeviceRegistry& registry, std::string_view name) {
  for (const auto& driver : registry.drivers())
    if (driver->name() == name) return driver.get();
  return nullptr;
}

}  // namespace

TEST_CASE("cuda: the driver is registered and lists devices or says why it has none") {
  runtime::DeviceRegistry registry;
  const hal::Driver* cuda = find_driver(registry, "cuda");
  REQUIRE(cuda != nullptr);
  const std::vector<hal::DeviceInfo> devices = cuda->devices();
  if (devices.empty()) {
    MESSAGE("no CUDA device here: " << cuda->unavailable_reason());
    CHECK_FALSE(cuda->unavailable_reason().empty());
    Result<std::unique_ptr<hal::Device>> opened = cuda->open_device("cuda:0");
    CHECK(opened.status().code() == ErrorCode::kNotFound);
    CHECK(opened.status().message().find(cuda->unavailable_reason()) != std::string::npos);
  } else {
    CHECK(cuda->unavailable_reason().empty());
    for (size_t i = 0; i < devices.size(); ++i) {
      CHECK(devices[i].id == "cuda:" + std::to_string(i));
      CHECK(devices[i].driver == "cuda");
      CHECK(devices[i].priority == 400);
      CHECK(devices[i].description.find("sm_") != std::string::npos);
    }
    // CUDA GPUs come first in the listing (and so are the default device).
    CHECK(registry.list_devices().front().driver == "cuda");
    CHECK(registry.default_device_id() == "cuda:0");
  }
}

TEST_CASE("cuda: the C API lists the cuda driver with its reason when it has no device") {
  size_t drivers = 0;
  REQUIRE(kiln_driver_count(&drivers) == KILN_OK);
  bool found = false;
  for (size_t i = 0; i < drivers; ++i) {
    const char* name = nullptr;
    const char* reason = nullptr;
    REQUIRE(kiln_driver_get_info(i, &name, &reason) == KILN_OK);
    if (std::strcmp(name, "cuda") != 0) continue;
    found = true;
    size_t count = 0;
    REQUIRE(kiln_device_count(&count) == KILN_OK);
    bool has_cuda_device = false;
    for (size_t d = 0; d < count; ++d) {
      kiln_device_info info{};
      REQUIRE(kiln_device_get_info(d, &info) == KILN_OK);
      if (std::strcmp(info.driver, "cuda") == 0) has_cuda_device = true;
    }
    CHECK(has_cuda_device == (reason[0] == '\0'));
  }
  CHECK(found);
}

TEST_CASE("cuda: error statuses name the CUDA error and map out-of-memory") {
  const Status oom = runtime::cuda::cu_status(2, "allocating");
  CHECK(oom.code() == ErrorCode::kOutOfMemory);
  CHECK(oom.message().rfind("allocating: ", 0) == 0);
  CHECK(oom.message().find("(2)") != std::string::npos);
  const Status launch = runtime::cuda::cu_status(719, "launch");
  CHECK(launch.code() == ErrorCode::kInternal);
  if (runtime::cuda::cuda_api().is_ok()) {
    CHECK(oom.message().find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos);
    CHECK(launch.message().find("CUDA_ERROR_LAUNCH_FAILED") != std::string::npos);
  }
  CHECK(runtime::cuda::cublas_status_name(15) == "CUBLAS_STATUS_NOT_SUPPORTED (15)");
}

TEST_CASE("cuda: set_cuda_graphs_enabled refuses a device of another driver") {
  runtime::DeviceRegistry registry;
  Result<std::unique_ptr<hal::Device>> reference = registry.open_device("reference");
  REQUIRE(reference.is_ok());
  CHECK(runtime::cuda::set_cuda_graphs_enabled(**reference, false).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("cuda: buffers on a CUDA device (when present)") {
  runtime::DeviceRegistry registry;
  const hal::Driver* cuda = find_driver(registry, "cuda");
  REQUIRE(cuda != nullptr);
  if (cuda->devices().empty()) {
    MESSAGE("not run: no CUDA device (" << cuda->unavailable_reason() << ")");
    return;
  }
  Result<std::unique_ptr<hal::Device>> device = cuda->open_device("cuda:0");
  REQUIRE(device.is_ok());
  CHECK((*device)->has_device_timers());

  // 9 MiB + 3 bytes: three chunks through both halves of a staging lane, and a ragged tail.
  const size_t bytes = (size_t(9) << 20) + 3;
  std::vector<std::byte> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = std::byte((i * 2654435761u) >> 13);
  Result<std::unique_ptr<hal::Buffer>> buffer = (*device)->allocate(bytes);
  REQUIRE(buffer.is_ok());
  REQUIRE((*buffer)->write(0, data).is_ok());
  std::vector<std::byte> back(bytes);
  REQUIRE((*buffer)->read(0, back).is_ok());
  CHECK(back == data);
  std::vector<std::byte> middle(1000);
  REQUIRE((*buffer)->read(5000000, middle).is_ok());
  CHECK(std::memcmp(middle.data(), data.data() + 5000000, middle.size()) == 0);
  CHECK((*buffer)->read(bytes - 10, middle).code() == ErrorCode::kInvalidArgument);

  Result<std::unique_ptr<hal::Buffer>> empty = (*device)->allocate(0);
  REQUIRE(empty.is_ok());
  CHECK((*empty)->size() == 0);

  Result<std::unique_ptr<hal::Buffer>> huge = (*device)->allocate(size_t(1) << 50);  // 1 PiB
  REQUIRE_FALSE(huge.is_ok());
  CHECK(huge.status().code() == ErrorCode::kOutOfMemory);
  CHECK(huge.status().message().find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos);
}
