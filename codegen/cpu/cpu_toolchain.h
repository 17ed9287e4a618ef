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

// The machine the code is built for, as --cpu selects it.
struct CpuSelection {
  std::string arch;    // "x86_64" or "aarch64": the module format is "so:<arch>"
  std::string triple;  // LLVM's: "x86_64-pc-linux-gnu", "aarch64-unknown-linux-gnu"
  std::string cpu;     // an LLVM CPU name of that architecture ("x86-64-v3", "neoverse-n1")
};

// Whether the clang module loads (the cpu target is then available): from the files where they
// tell, so that asking does not load it (cpu_toolchain.cpp).
bool cpu_toolchain_present();
// The compilers' identity for cache keys: clang's version, its fixed flags, the linker.
Result<std::string> cpu_toolchain_identity();
// What a --cpu value selects:
//   ""        the portable default of this machine's architecture: x86-64-v3 (AVX2, FMA) on
//             x86-64, generic (ARMv8-A with NEON) on AArch64;
//   "native"  this machine's CPU;
//   "aarch64" a generic AArch64 CPU (cross-compiling from x86-64);
//   NAME      an LLVM CPU name: x86-64's (x86-64-v2, skylake-avx512, znver3, ...) first, then
//             AArch64's (neoverse-n1, neoverse-v1, cortex-a76, apple-m1, ...).
// kInvalidArgument for a name neither back end knows.
Result<CpuSelection> select_cpu(std::string_view option);
// The instruction-set extensions code built for `cpu` may use, as Linux's /proc/cpuinfo flags
// name them ("avx2", "fma", "bmi2"; "asimd", "asimddp"): the kernels' required_features, so
// that the runtime refuses the module on a CPU without them instead of faulting on an illegal
// instruction.
Result<std::vector<std::string>> cpu_required_flags(const CpuSelection& cpu);

// One translation unit (C++17, no system headers) -> an ELF relocatable object at -O`opt_level`.
// A compile error in generated code is an internal error holding clang's diagnostics and the
// numbered source.
Result<std::vector<uint8_t>> compile_object(const std::string& source, const CpuSelection& cpu, int opt_level);

// Links relocatable objects (in order) into one shared object for `arch` exporting their
// external functions, naming libm (and on x86-64 libmvec) as dependencies; cross-compiling
// needs the target's C library for the link (Debian: libc6-arm64-cross for aarch64).
// Deterministic: the same objects give the same bytes (no build id, no timestamps).
Result<std::vector<uint8_t>> link_shared_object(const std::vector<std::vector<uint8_t>>& objects, const std::string& arch);

}  // namespace kiln::codegen
