// DeviceRegistry: every driver this build can use, and the devices they see.
//
// Built in: the reference, OpenCL, Vulkan and CUDA drivers (in that order). The GPU APIs are
// loaded with dlopen, so a machine without them still lists the reference device (and the
// registry reports why a driver is unavailable). A new driver is one add_driver line in the
// constructor (device_registry.cpp); the HAL conformance suite then covers its devices.
//
// Default device: the highest DeviceInfo::priority wins (CUDA GPU 400, discrete Vulkan/OpenCL GPU
// 300, integrated GPU 200, CPU implementations such as lavapipe and PoCL 100, reference 0); ties
// go to the driver registered first. For an artifact, default_device(artifact) takes the
// fastest device whose driver the artifact has kernels for. It never falls back to the
// reference interpreter silently: an artifact with kernels for no present device (a CUDA-only
// artifact on a machine without CUDA) is an error naming its targets and the devices present;
// only an artifact without any kernels (compiled for no target) defaults to the reference
// device. The reference interpreter runs every artifact when asked for by id ("reference").
//
// Required drivers: the environment variable KILN_REQUIRE_DRIVERS (a comma list of driver
// names, e.g. "vulkan,opencl") makes a listed driver that sees no usable device an error
// (kUnavailable naming the driver and its unavailable_reason) for open_device and for
// check_required_drivers_from_env(), so CI fails instead of silently skipping a backend.
//
// Ownership: the registry owns its drivers; keep it alive while any Device it opened is in use.
// Thread-safety: add_driver needs exclusive access; the const methods are safe to call
// concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/reader.h"
#include "ir/interpreter.h"
#include "runtime/hal/device.h"
#include "runtime/hal/driver.h"
#include "support/status.h"

namespace kiln::runtime {

class DeviceRegistry {
 public:
  // A registry holding every built-in driver.
  DeviceRegistry();
  DeviceRegistry(const DeviceRegistry&) = delete;
  DeviceRegistry& operator=(const DeviceRegistry&) = delete;

  void add_driver(std::unique_ptr<hal::Driver> driver);
  const std::vector<std::unique_ptr<hal::Driver>>& drivers() const { return drivers_; }

  // Every device of every driver, fastest first (by DeviceInfo::priority, then driver order).
  std::vector<hal::DeviceInfo> list_devices() const;
  // The id of the fastest available device ("reference" when no GPU driver sees a device).
  std::string default_device_id() const;
  // The fastest device with kernels in `artifact`: the first in list_devices() order whose
  // driver is one of artifact.targets(); "reference" for an artifact without targets. kUnavailable
  // when no present device has its target, saying which targets it has, which devices are
  // present, and that --device=reference (device id "reference") runs it on the interpreter.
  Result<std::string> default_device(const artifact::LoadedArtifact& artifact) const;
  // Opens a device by id; "" opens the default device. An unknown id is kNotFound with a
  // message listing the available ids. Fails first with kUnavailable when a driver named in
  // KILN_REQUIRE_DRIVERS has no usable device. `options` (runtime/hal/device_options.h) go to
  // the device's driver; one whose "<driver>." prefix names no registered driver is
  // kInvalidArgument, as is one the named driver does not have.
  Result<std::unique_ptr<hal::Device>> open_device(std::string_view id,
                                                   const hal::DeviceOptions& options = {}) const;

  // kUnavailable when a driver named in `comma_list` is not built in or sees no device (the
  // message names the driver and why); ok for an empty list. Blank entries are ignored.
  Status check_required_drivers(std::string_view comma_list) const;
  // check_required_drivers(getenv("KILN_REQUIRE_DRIVERS")), ok when the variable is unset.
  Status check_required_drivers_from_env() const;

 private:
  std::vector<std::unique_ptr<hal::Driver>> drivers_;
};

// The reference interpreter's mode that computes as `device` does, for checking the device's
// outputs against the interpreter (kiln-run --check, the HAL conformance suite): kExact for the
// reference device, which runs the exact interpreter; kDeviceFaithful for every other device,
// which runs Kiln's kernels (float math in f32 registers, f32 accumulators), so an f32 overflow
// inside an op is inf/nan in both. Pure; safe to call from any thread.
ir::InterpreterPrecision matching_interpreter_precision(const hal::DeviceInfo& device);

}  // namespace kiln::runtime
