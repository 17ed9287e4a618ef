// The cpu target's toolchain (codegen/cpu/cpu_toolchain.h): lld runs with an environment of its
// own, not the process's. Passing `environ` to posix_spawn raced with setenv on other threads
// (PoCL sets HWLOC_PLUGINS_PATH when it enumerates devices; the cpu driver set GOMP_SPINCOUNT
// with setenv when it first loaded oneDNN): setenv frees the array it replaces, and the spawn
// then failed with EFAULT ("cannot run the linker /usr/bin/ld.lld-14: Bad address") in the ONNX
// conformance harness, which compiles and opens sessions on several threads. The property is
// tested directly, which is deterministic: lld writes a reproducer archive where LLD_REPRODUCE
// names one, and must not see that variable.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_toolchain.h"
#include "test_compile_util.h"

using namespace kiln;

TEST_CASE("cpu target: lld runs with an environment of its own, not the process's") {
  if (!testing::cpu_target_available()) return;
  Result<codegen::CpuSelection> cpu = codegen::select_cpu("");
  REQUIRE(cpu.is_ok());
  Result<std::vector<uint8_t>> object =
      codegen::compile_object("extern \"C\" float kiln_test_twice(float x) { return 2 * x; }\n", *cpu, 1);
  REQUIRE_MESSAGE(object.is_ok(), object.status().to_string());

  const std::filesystem::path reproducer =
      std::filesystem::temp_directory_path() / ("kiln-test-lld-reproduce-" + std::to_string(::getpid()) + ".tar");
  std::filesystem::remove(reproducer);
  REQUIRE(::setenv("LLD_REPRODUCE", reproducer.c_str(), 1) == 0);
  Result<std::vector<uint8_t>> so = codegen::link_shared_object({*object}, cpu->arch);
  ::unsetenv("LLD_REPRODUCE");
  REQUIRE_MESSAGE(so.is_ok(), so.status().to_string());
  CHECK_FALSE(so->empty());
  const bool inherited = std::filesystem::exists(reproducer);
  std::filesystem::remove(reproducer);
  CHECK_MESSAGE(!inherited, "lld saw the process's LLD_REPRODUCE: it was given the process's environment");
}
