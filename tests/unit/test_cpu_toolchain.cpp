// The cpu target's toolchain (codegen/cpu/cpu_toolchain.h) under concurrency: lld links while
// another thread of the process changes the environment, as the cpu driver does when it first
// loads oneDNN (GOMP_SPINCOUNT) while a compile runs beside it (the ONNX conformance harness
// compiles and opens sessions on several threads). setenv frees the environment array that a
// spawn given `environ` may still be reading; the spawn then failed with EFAULT ("Bad address").
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "artifact/targets.h"
#include "codegen/cpu/cpu_toolchain.h"
#include "codegen/target.h"

using namespace kiln;

TEST_CASE("cpu target: lld links while another thread changes the environment") {
  const std::vector<std::string> targets = codegen::available_targets();
  if (std::find(targets.begin(), targets.end(), std::string(artifact::kCpuTarget)) == targets.end()) {
    MESSAGE("[skip] cpu target not in this build: " << codegen::unavailable_targets_note());
    return;
  }
  Result<codegen::CpuSelection> cpu = codegen::select_cpu("");
  REQUIRE(cpu.is_ok());
  Result<std::vector<uint8_t>> object =
      codegen::compile_object("extern \"C\" float kiln_test_twice(float x) { return 2 * x; }\n", *cpu, 1);
  REQUIRE_MESSAGE(object.is_ok(), object.status().to_string());

  // Each new variable grows the environment: glibc's setenv reallocates the array it made
  // before and frees the old one.
  std::atomic<bool> linking{true};
  int variables = 0;
  std::thread churn([&] {
    for (; linking.load() && variables < 20000; ++variables)
      setenv(("KILN_TEST_ENV_CHURN_" + std::to_string(variables)).c_str(), "1", 1);
  });
  int failures = 0;
  std::string first_failure;
  for (int link = 0; link < 150; ++link) {
    Result<std::vector<uint8_t>> so = codegen::link_shared_object({*object}, cpu->arch);
    if (so.is_ok()) continue;
    if (failures++ == 0) first_failure = so.status().to_string();
  }
  linking = false;
  churn.join();
  for (int i = 0; i < variables; ++i) unsetenv(("KILN_TEST_ENV_CHURN_" + std::to_string(i)).c_str());
  INFO("first failure: " << first_failure);
  CHECK(failures == 0);
}
