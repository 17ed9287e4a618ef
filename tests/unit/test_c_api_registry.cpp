// The device registry's policies behind the C API: default-device order (priority, then driver
// order; skipping drivers the artifact has no kernels for, an error when no device has any) and
// KILN_REQUIRE_DRIVERS. Uses fake
// drivers that only list devices, so it runs the same on every machine.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/device_registry.h"

using namespace kiln;
namespace hal = kiln::runtime::hal;

namespace {

// A driver that lists fixed devices and opens none.
class ListingDriver final : public hal::Driver {
 public:
  ListingDriver(std::string name, std::vector<hal::DeviceInfo> devices, std::string reason = "")
      : name_(std::move(name)), devices_(std::move(devices)), reason_(std::move(reason)) {}
  std::string_view name() const override { return name_; }
  std::vector<hal::DeviceInfo> devices() const override { return devices_; }
  std::string unavailable_reason() const override { return reason_; }
  using hal::Driver::open_device;
  Result<std::unique_ptr<hal::Device>> open_device(std::string_view id, const hal::DeviceOptions&) const override {
    return Status(ErrorCode::kUnavailable, name_ + " cannot open '" + std::string(id) + "' in this test");
  }

 private:
  std::string name_;
  std::vector<hal::DeviceInfo> devices_;
  std::string reason_;
};

hal::DeviceInfo device(std::string id, std::string driver, hal::DeviceType type, int priority) {
  hal::DeviceInfo info;
  info.id = std::move(id);
  info.driver = std::move(driver);
  info.type = type;
  info.description = "fake " + info.id;
  info.priority = priority;
  return info;
}

artifact::LoadedArtifact artifact_with_targets(std::vector<std::string> targets) {
  artifact::LoadedArtifact a;
  for (std::string& t : targets) {
    artifact::KernelBinary k;
    k.target = std::move(t);
    a.kernels.push_back(std::move(k));
  }
  return a;
}

// A registry holding only fake drivers plus the built-in ones (reference, and whatever this
// build has). The fake ids ("fake-*") never collide with real ones.
void add_fakes(runtime::DeviceRegistry& registry) {
  registry.add_driver(std::make_unique<ListingDriver>(
      "fakecl", std::vector<hal::DeviceInfo>{device("fakecl:0", "fakecl", hal::DeviceType::kCpu, 100),
                                             device("fakecl:1", "fakecl", hal::DeviceType::kDiscreteGpu, 300)}));
  registry.add_driver(std::make_unique<ListingDriver>(
      "fakevk", std::vector<hal::DeviceInfo>{device("fakevk:0", "fakevk", hal::DeviceType::kCpu, 100),
                                             device("fakevk:1", "fakevk", hal::DeviceType::kIntegratedGpu, 200)}));
  registry.add_driver(std::make_unique<ListingDriver>(
      "fakecuda", std::vector<hal::DeviceInfo>{device("fakecuda:0", "fakecuda", hal::DeviceType::kDiscreteGpu, 400)}));
  registry.add_driver(std::make_unique<ListingDriver>("fakegone", std::vector<hal::DeviceInfo>{},
                                                      "libfake.so.1 not found"));
}

std::vector<std::string> fake_ids(const std::vector<hal::DeviceInfo>& devices) {
  std::vector<std::string> ids;
  for (const auto& d : devices)
    if (d.id.rfind("fake", 0) == 0 || d.id == "reference") ids.push_back(d.id);
  return ids;
}

}  // namespace

TEST_CASE("c_api registry: devices are ordered CUDA GPU, discrete GPU, integrated, CPU, reference") {
  runtime::DeviceRegistry registry;
  add_fakes(registry);
  CHECK(fake_ids(registry.list_devices()) ==
        std::vector<std::string>{"fakecuda:0", "fakecl:1", "fakevk:1", "fakecl:0", "fakevk:0", "reference"});
  CHECK(registry.default_device_id() == registry.list_devices().front().id);
  // The cpu driver's device (on x86-64 Linux) comes after every GPU and before the GPU APIs' CPU
  // implementations.
  std::vector<std::string> ids;
  for (const hal::DeviceInfo& d : registry.list_devices()) ids.push_back(d.id);
  const auto position = [&](const std::string& id) { return std::find(ids.begin(), ids.end(), id) - ids.begin(); };
  if (position("cpu:0") < std::ptrdiff_t(ids.size())) {
    CHECK(position("fakevk:1") < position("cpu:0"));
    CHECK(position("cpu:0") < position("fakecl:0"));
    CHECK(*registry.default_device(artifact_with_targets({"cpu", "fakecl"})) == "fakecl:1");
    CHECK(*registry.default_device(artifact_with_targets({"cpu", "fakevk"})) == "fakevk:1");
    CHECK(*registry.default_device(artifact_with_targets({"fakecl", "cpu"})) == "fakecl:1");
    CHECK(*registry.default_device(artifact_with_targets({"cpu"})) == "cpu:0");
  }

  // The default for an artifact is the fastest device whose driver it has kernels for.
  CHECK(*registry.default_device(artifact_with_targets({"fakevk"})) == "fakevk:1");
  CHECK(*registry.default_device(artifact_with_targets({"fakevk", "fakecl"})) == "fakecl:1");
  CHECK(*registry.default_device(artifact_with_targets({"fakecuda", "fakecl"})) == "fakecuda:0");

  // Kernels for no present device: an error naming the targets and the devices, never a silent
  // fall back to the reference interpreter (only an artifact without kernels defaults to it).
  Result<std::string> gone = registry.default_device(artifact_with_targets({"fakegone", "fakeother"}));
  REQUIRE_FALSE(gone.is_ok());
  CHECK(gone.status().code() == ErrorCode::kUnavailable);
  const std::string& message = gone.status().message();
  CHECK(message.find("kernels for fakegone, fakeother only") != std::string::npos);
  for (const hal::DeviceInfo& present : registry.list_devices())  // the fakes and this machine's
    CHECK(message.find(present.id) != std::string::npos);
  CHECK(message.find("--device=reference") != std::string::npos);
  CHECK(*registry.default_device(artifact_with_targets({})) == "reference");
}

TEST_CASE("c_api registry: KILN_REQUIRE_DRIVERS names the missing driver and why") {
  runtime::DeviceRegistry registry;
  add_fakes(registry);
  CHECK(registry.check_required_drivers("").is_ok());
  CHECK(registry.check_required_drivers(" , ,").is_ok());
  CHECK(registry.check_required_drivers("fakecl,fakevk").is_ok());
  CHECK(registry.check_required_drivers(" fakecuda , reference ").is_ok());

  Status gone = registry.check_required_drivers("fakecl,fakegone");
  CHECK(gone.code() == ErrorCode::kUnavailable);
  CHECK(gone.message() ==
        "KILN_REQUIRE_DRIVERS requires the fakegone driver, which has no usable device: "
        "libfake.so.1 not found");

  Status unknown = registry.check_required_drivers("fakecl,metal");
  CHECK(unknown.code() == ErrorCode::kUnavailable);
  CHECK(unknown.message().rfind("KILN_REQUIRE_DRIVERS requires the metal driver, which this build "
                                "does not have (drivers: reference", 0) == 0);
  CHECK(unknown.message().find("fakegone)") != std::string::npos);

  // Through the environment: open_device fails before opening anything.
  const char* saved = std::getenv("KILN_REQUIRE_DRIVERS");
  std::string saved_value = saved ? saved : "";
  setenv("KILN_REQUIRE_DRIVERS", "fakegone", 1);
  CHECK(registry.check_required_drivers_from_env().code() == ErrorCode::kUnavailable);
  Result<std::unique_ptr<hal::Device>> opened = registry.open_device("reference");
  REQUIRE_FALSE(opened.is_ok());
  CHECK(opened.status().code() == ErrorCode::kUnavailable);
  CHECK(opened.status().message().find("fakegone") != std::string::npos);
  setenv("KILN_REQUIRE_DRIVERS", "fakecl", 1);
  CHECK(registry.check_required_drivers_from_env().is_ok());
  CHECK(registry.open_device("reference").is_ok());
  unsetenv("KILN_REQUIRE_DRIVERS");
  CHECK(registry.check_required_drivers_from_env().is_ok());
  if (saved) setenv("KILN_REQUIRE_DRIVERS", saved_value.c_str(), 1);

  // An unknown id lists the devices fastest first.
  Result<std::unique_ptr<hal::Device>> missing = registry.open_device("fakecl:9");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  // (Real devices of this machine, e.g. a CUDA GPU, may come between the fake ones.)
  const std::string& listed = missing.status().message();
  CHECK(listed.find("available devices: ") != std::string::npos);
  const size_t cuda_at = listed.find("fakecuda:0"), cl_at = listed.find("fakecl:1"), vk_at = listed.find("fakevk:1");
  CHECK(cuda_at != std::string::npos);
  CHECK(cl_at != std::string::npos);
  CHECK(vk_at != std::string::npos);
  CHECK(cuda_at < cl_at);
  CHECK(cl_at < vk_at);
}
