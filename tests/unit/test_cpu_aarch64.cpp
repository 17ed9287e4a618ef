// The cpu target cross-compiling for AArch64 (--cpu=aarch64 or an AArch64 CPU name): the module
// is an AArch64 ELF shared object stored as "so:aarch64", an x86-64 runtime refuses it by name,
// and its kernels, run under qemu-aarch64 by a small AArch64 harness (aarch64_harness/harness.c),
// match the reference interpreter. Without the harness (no cross C library, clang or qemu-user
// at build time) the run is reported skipped, unless KILN_REQUIRE_AARCH64=1 (CI) makes it fail.
#include <doctest/doctest.h>

#include <elf.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "artifact/targets.h"
#include "codegen/target.h"
#include "test_compile_util.h"

using namespace kiln;

namespace {

codegen::CompiledKernels compile_for_cpu(const testing::PlannedGraph& g, const std::string& cpu) {
  Result<std::unique_ptr<codegen::Target>> target = codegen::create_target(std::string(artifact::kCpuTarget));
  REQUIRE(target.is_ok());
  codegen::TargetOptions options;
  options.cpu = cpu;
  Result<codegen::CompiledKernels> compiled = codegen::compile_graph(**target, g.graph, g.plan, options);
  REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().to_string());
  REQUIRE(compiled->modules.size() == 1);
  return std::move(compiled).value();
}

uint16_t elf_machine(std::span<const uint8_t> so) {
  Elf64_Ehdr header;
  REQUIRE(so.size() >= sizeof(header));
  std::memcpy(&header, so.data(), sizeof(header));
  REQUIRE(std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0);
  CHECK(header.e_type == ET_DYN);
  return header.e_machine;
}

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

constexpr const char* kElementwise = R"(
graph ew(x: f32[N, 37], b: f32[37]) -> (y: f32[N, 37]) {
  y = tanh(add(mul(x, b), erf(x)))
}
)";

}  // namespace

TEST_CASE("cpu target: --cpu=aarch64 builds an AArch64 module, which an x86-64 runtime refuses by name") {
  if (!testing::cpu_target_available()) return;
  CHECK(codegen::check_cpu_name("aarch64").is_ok());
  CHECK(codegen::check_cpu_name("neoverse-n1").is_ok());
  CHECK(codegen::check_cpu_name("x86-64-v3").is_ok());
  const Status bad = codegen::check_cpu_name("pentium-9000");
  CHECK(bad.code() == ErrorCode::kInvalidArgument);
  CHECK(bad.message().find("'pentium-9000'") != std::string::npos);
  CHECK(bad.message().find("AArch64") != std::string::npos);

  testing::PlannedGraph g = testing::parse_and_plan(kElementwise);
  codegen::CompiledKernels generic = compile_for_cpu(g, "aarch64");
  CHECK(generic.modules[0].format == artifact::kCpuModuleFormatAarch64);
  CHECK(elf_machine(generic.modules[0].blob) == EM_AARCH64);
  REQUIRE(generic.kernels.size() == 1);
  CHECK(has(generic.kernels[0].required_features, "asimd"));
  CHECK_FALSE(has(generic.kernels[0].required_features, "asimddp"));
  // A named CPU: its extensions become requirements.
  codegen::CompiledKernels n1 = compile_for_cpu(g, "neoverse-n1");
  CHECK(n1.modules[0].format == artifact::kCpuModuleFormatAarch64);
  CHECK(has(n1.kernels[0].required_features, "asimddp"));
  // The host's default is the host's architecture.
  codegen::CompiledKernels host = compile_for_cpu(g, "");
  CHECK(host.modules[0].format == artifact::kHostCpuModuleFormat);

#if defined(__x86_64__)
  artifact::WriteOptions write;
  write.kernels = generic.kernels;
  write.modules = generic.modules;
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(g.graph, g.plan, write);
  REQUIRE(bytes.is_ok());
  Result<artifact::LoadedArtifact> loaded =
      artifact::read_artifact(std::make_shared<const std::vector<uint8_t>>(std::move(bytes).value()));
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().to_string());
  runtime::DeviceRegistry registry;
  Result<std::unique_ptr<runtime::hal::Device>> device = registry.open_device("cpu:0", {});
  if (!device.is_ok()) {
    MESSAGE("[skip] no cpu device: " << device.status().message());
    return;
  }
  auto executable = (*device)->load_executable(std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value()));
  REQUIRE_FALSE(executable.is_ok());
  INFO(executable.status().message());
  CHECK(executable.status().code() == ErrorCode::kUnsupported);
  CHECK(executable.status().message().find("'so:aarch64'") != std::string::npos);
  CHECK(executable.status().message().find("'so:x86_64'") != std::string::npos);
#endif
}

#ifdef KILN_AARCH64_HARNESS
namespace {

// Runs argv; its exit status, or -1 when it could not start.
int run_program(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void write_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  REQUIRE(out.good());
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Compiles the one-kernel graph `text` for aarch64, runs its kernel under qemu on random inputs
// (symbols bound by `bindings`) and compares the outputs with the reference interpreter's.
void check_under_qemu(const char* text, const ir::SymbolBindings& bindings, double rtol) {
  INFO(text);
  testing::PlannedGraph g = testing::parse_and_plan(text);
  REQUIRE(g.graph.kernels().size() == 1);
  codegen::CompiledKernels compiled = compile_for_cpu(g, "aarch64");
  REQUIRE(compiled.kernels.size() == 1);
  const artifact::KernelBinary& kernel = compiled.kernels[0];

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln-aarch64-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string module = (dir / "kernels.so").string();
  write_bytes(module, compiled.modules[0].blob.data(), compiled.modules[0].blob.size());

  // Random inputs at the bound sizes.
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<ir::Tensor> inputs;
  for (ir::NodeId id : g.graph.inputs()) {
    Result<std::vector<int64_t>> shape = ir::resolve_shape(g.graph.node(id).type.shape, bindings);
    REQUIRE(shape.is_ok());
    Result<ir::Tensor> t = ir::Tensor::zeros(g.graph.node(id).type.dtype, *shape);
    REQUIRE(t.is_ok());
    for (int64_t i = 0; i < t->num_elements(); ++i) t->set_element_from_double(i, normal(rng));
    inputs.push_back(std::move(t).value());
  }
  Result<std::vector<ir::Tensor>> expected = ir::interpret(g.graph, inputs, ir::InterpreterPrecision::kDeviceFaithful);
  REQUIRE_MESSAGE(expected.is_ok(), expected.status().to_string());

  // The kernel's buffers: graph inputs as they are, outputs zeroed, in arg order.
  std::vector<std::string> args = {KILN_QEMU_AARCH64, "-L", KILN_AARCH64_SYSROOT, KILN_AARCH64_HARNESS, module,
                                   kernel.entry_point};
  Result<int64_t> units = kernel.dispatch.work_items.evaluate(bindings);
  REQUIRE(units.is_ok());
  args.push_back(std::to_string(*units));
  std::vector<std::string> symbols, files;
  std::vector<std::pair<size_t, std::string>> output_files;  // graph output index, file
  for (const artifact::KernelArg& arg : kernel.args) {
    if (arg.kind == artifact::KernelArg::Kind::kSymbol) {
      symbols.push_back(std::to_string(bindings.at(arg.symbol)));
      continue;
    }
    const std::string file = (dir / ("b" + std::to_string(files.size()))).string();
    files.push_back(file);
    bool placed = false;
    for (size_t i = 0; i < g.graph.inputs().size() && !placed; ++i)
      if (g.graph.inputs()[i] == arg.value) {
        write_bytes(file, inputs[i].data(), inputs[i].size_bytes());
        placed = true;
      }
    for (size_t o = 0; o < g.graph.outputs().size() && !placed; ++o)
      if (g.graph.outputs()[o].node == arg.value) {
        const std::vector<uint8_t> zeros((*expected)[o].size_bytes(), 0);
        write_bytes(file, zeros.data(), zeros.size());
        output_files.push_back({o, file});
        placed = true;
      }
    REQUIRE_MESSAGE(placed, "kernel arg " << arg.value << " is neither a graph input nor an output");
  }
  args.push_back(std::to_string(symbols.size()));
  args.insert(args.end(), symbols.begin(), symbols.end());
  args.insert(args.end(), files.begin(), files.end());
  REQUIRE(run_program(args) == 0);

  REQUIRE(output_files.size() == g.graph.outputs().size());
  for (const auto& [o, file] : output_files) {
    const ir::Tensor& want = (*expected)[o];
    const std::vector<uint8_t> bytes = read_bytes(file);
    REQUIRE(bytes.size() == want.size_bytes());
    Result<ir::Tensor> got = ir::Tensor::from_bytes(want.dtype(), want.shape(), std::as_bytes(std::span(bytes)));
    REQUIRE(got.is_ok());
    int wrong = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      const double w = want.element_as_double(i), a = got->element_as_double(i);
      if (std::fabs(a - w) <= rtol * (1.0 + std::fabs(w))) continue;
      if (++wrong <= 3) FAIL_CHECK("output " << o << " element " << i << ": " << a << ", expected " << w);
    }
    CHECK(wrong == 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
#endif

TEST_CASE("cpu target: kernels cross-compiled for AArch64 run under qemu-aarch64 and match the interpreter") {
  if (!testing::cpu_target_available()) return;
#ifndef KILN_AARCH64_HARNESS
  const char* require = std::getenv("KILN_REQUIRE_AARCH64");
  if (require && std::string(require) == "1")
    FAIL("KILN_REQUIRE_AARCH64=1 but this build has no AArch64 harness (needs clang, qemu-user, "
         "libc6-arm64-cross and libc6-dev-arm64-cross at configure time)");
  MESSAGE("[skip] no AArch64 harness in this build (clang, qemu-user and Debian's arm64 cross C library)");
#else
  // Each graph is one kernel: a fused elementwise chain with transcendental functions over rows
  // with a symbolic count, a row reduction (softmax), the matmul template, pooling, and f16's
  // software conversions.
  check_under_qemu(kElementwise, {{"N", 5}}, 1e-5);
  check_under_qemu("graph s(x: f32[6, 50]) -> (y: f32[6, 50]) {\n  y = softmax(x, axis=-1)\n}\n", {}, 1e-5);
  check_under_qemu("graph m(a: f32[7, 33], b: f32[33, 20]) -> (y: f32[7, 20]) {\n  y = matmul(a, b)\n}\n", {}, 1e-5);
  check_under_qemu(
      "graph p(x: f32[2, 3, 9, 9]) -> (y: f32[2, 3, 5, 5]) {\n"
      "  y = max_pool2d(x, kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])\n}\n",
      {}, 0.0);
  check_under_qemu("graph h(x: f16[64], y: f16[64]) -> (z: f16[64]) {\n  z = mul(exp(x), y)\n}\n", {}, 2e-3);
#endif
}
