// The C interface of libkiln_cpu_clang.so (cpu_clang_module.cpp), which cpu_toolchain.cpp loads
// with dlopen and calls through these names. Plain C: no C++ object crosses the module boundary.
// Thread-safety: every function may be called from several threads at once.
#pragma once

#include <stddef.h>

extern "C" {

// Receives bytes (a compiled object, a log, a name): called any number of times, in order.
typedef void (*kiln_cpu_sink)(void* context, const char* data, size_t size);

// What the compiles depend on besides their inputs: clang's version and the fixed flags.
const char* kiln_cpu_clang_identity(void);
// The LLVM name of this machine's CPU ("znver3").
void kiln_cpu_clang_host_cpu(kiln_cpu_sink sink, void* context);
// 1 when LLVM's back end for `triple` knows `cpu`, else 0.
int kiln_cpu_clang_is_known_cpu(const char* triple, const char* cpu);
// The /proc/cpuinfo flags ("avx2\n", "fma\n"; on AArch64 "asimd\n", "asimddp\n", ...) of the
// extensions code for `cpu` of `triple` may use.
void kiln_cpu_clang_required_flags(const char* triple, const char* cpu, kiln_cpu_sink sink, void* context);
// Compiles C++ `source` for `triple` and `cpu` at -O`opt_level` into an ELF object (to `object`);
// returns 0, or non-zero with clang's diagnostics written to `log`.
int kiln_cpu_clang_compile(const char* source, size_t size, const char* triple, const char* cpu, int opt_level,
                           kiln_cpu_sink object, void* object_context, kiln_cpu_sink log, void* log_context);

}  // extern "C"
