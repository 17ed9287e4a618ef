// The cpu target's compilers: clang turns one kernel's C++ into an optimized object file for the
// selected CPU, and lld links the objects of a graph into one position-independent ELF shared
// object, which the runtime's cpu driver loads with dlopen (runtime/drivers/cpu/). Neither is
// linked into the runtime, nor into kilnc itself:
//   - clang runs in process, from libkiln_cpu_clang.so (cpu_clang_module.h), which links
//     libclang-cpp and LLVM 14 and is opened with dlopen(RTLD_LOCAL) at the first use;
//   - lld runs as a program (the ld.lld found at build time), one process per link.
//
// Why C++ through clang rather than IRBuilder calls: the kernels come from the same C-family
// emitter as the GPU targets (codegen/c_family.h), so an operator's semantics stay in its table
// row (ir/ops.cpp) for all four targets; clang's front end produces the LLVM IR, and LLVM's
// optimizer and x86 back end (vectorizer, register allocation) produce the code.
//
// Every function fails with kUnavailable when the clang module cannot be loaded.
// Thread-safety: every function may run on many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace kiln::codegen {

struct CpuCodeOptions {
  std::string triple = "x86_64-pc-linux-gnu";
  std::string cpu = "x86-64-v3";  // an LLVM CPU name; "native" is resolved by the caller
  int opt_level = 3;
};

// Whether the clang module loads (the cpu target is then available).
bool cpu_toolchain_present();
// The compilers' identity for cache keys: clang's version, its fixed flags, the linker.
Result<std::string> cpu_toolchain_identity();
// The LLVM name of this machine's CPU ("znver3", "sapphirerapids"), for --cpu=native.
Result<std::string> host_cpu_name();
// Whether LLVM's x86 back end knows `cpu` (x86-64-v2/v3/v4, skylake-avx512, znver3, ...).
Result<bool> is_known_cpu(std::string_view cpu);
// The instruction-set extensions code built for `cpu` may use, as Linux's /proc/cpuinfo flags
// name them ("avx2", "fma", "bmi2"): the kernels' required_features, so that the runtime refuses
// the module on a CPU without them instead of faulting on an illegal instruction.
Result<std::vector<std::string>> cpu_required_flags(const std::string& cpu);

// One translation unit (C++17, no system headers) -> an ELF relocatable object. A compile error
// in generated code is an internal error holding clang's diagnostics and the numbered source.
Result<std::vector<uint8_t>> compile_object(const std::string& source, const CpuCodeOptions& options);

// Links relocatable objects (in order) into one shared object exporting their external
// functions. Deterministic: the same objects give the same bytes (no build id, no timestamps).
Result<std::vector<uint8_t>> link_shared_object(const std::vector<std::vector<uint8_t>>& objects);

}  // namespace kiln::codegen
