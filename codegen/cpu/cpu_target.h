// The cpu target (codegen/cpu/cpu_target.cpp): native code for the host's CPU or, cross-compiled,
// for AArch64, through clang in process and lld (cpu_toolchain.h; --cpu chooses, select_cpu).
// Built only where Debian's clang, lld and LLVM 14 development packages were found.
#pragma once

#include <memory>

#include "codegen/target.h"

namespace kiln::codegen {

std::unique_ptr<Target> make_cpu_target();

}  // namespace kiln::codegen
