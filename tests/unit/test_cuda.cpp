// The CUDA driver, what is specific to it: it is always registered and its GPUs come first; the
// C API reports its reason when it has no device; CUDA error statuses carry the error name and
// map out-of-memory to kOutOfMemory; the cuda.graphs device option. Listing, buffers (through
// the pinned staging pool), execution, profiling and threads on every CUDA device are in the
// HAL conformance suite (test_hal_conformance.cpp); CUDA graphs and end-to-end runs of CUDA
// artifacts in tests/cuda/ and the cross-backend suite.
#include <doctest/doctest.h>

#include <cstring>
#include <optional>
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

TEST_CASE("cuda: the driver is registered, and its GPUs are the default devices") {
  // Ids, priorities, descriptions, the reason when it has no device: the HAL conformance suite.
  runtime::DeviceRegistry registry;
  const hal::Driver* cuda = find_driver(registry, "cuda");
  REQUIRE(cuda != nullptr);
  if (cuda->devices().empty()) {
    MESSAGE("no CUDA device here: " << cuda->unavailable_reason());
    return;
  }
  // CUDA GPUs come first in the listing (and so are the default device).
  CHECK(registry.list_devices().front().driver == "cuda");
  CHECK(registry.default_device_id() == "cuda:0");
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

TEST_CASE("cuda: the cuda.graphs device option is checked, and ignored by other drivers") {
  runtime::DeviceRegistry registry;
  hal::DeviceOptions off;
  off.set("cuda.graphs", "off");
  Result<std::unique_ptr<hal::Device>> reference = registry.open_device("reference", off);
  REQUIRE(reference.is_ok());
  hal::DeviceOptions unknown;
  unknown.set("cuda.graph", "off");
  CHECK(registry.open_device("reference", unknown).is_ok());  // not the reference driver's option
  const hal::Driver* cuda = find_driver(registry, "cuda");
  REQUIRE(cuda != nullptr);
  // The driver checks its own options before it looks for the device.
  Result<std::unique_ptr<hal::Device>> misspelt = cuda->open_device("cuda:0", unknown);
  CHECK(misspelt.status().code() == ErrorCode::kInvalidArgument);
  CHECK(misspelt.status().message() ==
        "the cuda driver has no device option 'cuda.graph' (its options: cuda.graphs)");
  hal::DeviceOptions maybe;
  maybe.set("cuda.graphs", "maybe");
  CHECK(maybe.get_switch("cuda.graphs").status().code() == ErrorCode::kInvalidArgument);
  CHECK(*off.get_switch("cuda.graphs") == std::optional<bool>(false));
  if (cuda->devices().empty()) {
    MESSAGE("not run on a device: no CUDA device (" << cuda->unavailable_reason() << ")");
    return;
  }
  Result<std::unique_ptr<hal::Device>> bad_value = registry.open_device("cuda:0", maybe);
  CHECK(bad_value.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad_value.status().message().find("'maybe'") != std::string::npos);
  for (const char* value : {"on", "off"}) {
    hal::DeviceOptions graphs;
    graphs.set("cuda.graphs", value);
    Result<std::unique_ptr<hal::Device>> device = registry.open_device("cuda:0", graphs);
    REQUIRE_MESSAGE(device.is_ok(), device.status().message());
    Result<std::unique_ptr<hal::Stream>> stream = (*device)->create_stream();
    CHECK(stream.is_ok());
  }
}
