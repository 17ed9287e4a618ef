// The cpu target's compilers, in process: clang (as a library, libclang-cpp) turns one kernel's C++
// into an optimized object file for the selected CPU, and lld (liblldELF) links the objects of a
// graph into one position-independent ELF shared object, which the runtime's cpu driver loads
// with dlopen (runtime/drivers/cpu/). Neither is linked into the runtime.
//
// Why C++ through clang rather than IRBuilder calls: the kernels come from the same C-family
// emitter as the GPU targets (codegen/c_family.h), so an operator's semantics stay in its table
// row (ir/ops.cpp) for all four targets; clang's front end produces the LLVM IR, and LLVM's
// optimizer and x86 back end (vectorizer, register allocation) produce the code.
//
// Thread-safety: compile_object may run on many threads at once (each call owns its
// CompilerInstance and LLVMContext). link_shared_object serializes itself: lld 14 keeps global
// state (lld::CommonLinkerContext) for the duration of a link.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace kiln::codegen {

struct CpuCodeOptions {
  std::string triple = "x86_64-pc-linux-gnu";
  // An LLVM CPU name ("x86-64-v3", "skylake-avx512", "native" resolved by the caller).
  std::string cpu = "x86-64-v3";
  int opt_level = 3;
};

// The compilers' identity for cache keys: LLVM's version and the fixed flags.
std::string cpu_toolchain_identity();

// The LLVM name of the host's CPU ("znver3", "sapphirerapids"), for --cpu=native.
std::string host_cpu_name();
// Whether LLVM's x86 back end knows `cpu` (a name from `llc -mcpu=help`, or x86-64-v2/v3/v4).
bool is_known_cpu(std::string_view cpu);

// The instruction-set extensions code built for `cpu` may use, as Linux's /proc/cpuinfo flags
// name them ("avx2", "fma", "bmi2"): the kernels' required_features, so that the runtime refuses
// the module on a CPU without them instead of faulting on an illegal instruction.
std::vector<std::string> cpu_required_flags(const std::string& cpu);

// One translation unit (C++17, no system headers) -> an ELF relocatable object. A compile error
// in generated code is an internal error holding clang's diagnostics and the numbered source.
Result<std::vector<uint8_t>> compile_object(const std::string& source, const CpuCodeOptions& options);

// Links relocatable objects (in order) into one shared object exporting their external
// functions. Deterministic: the same objects give the same bytes (no build id, no timestamps).
Result<std::vector<uint8_t>> link_shared_object(const std::vector<std::vector<uint8_t>>& objects);

}  // namespace kiln::codegen
