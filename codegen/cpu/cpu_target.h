// The cpu target (codegen/cpu/cpu_target.cpp): native code for the host's CPU, through clang and
// lld in process (cpu_toolchain.h). Built only where Debian's clang, lld and LLVM 14 development
// packages were found.
#pragma once

#include <memory>
#include <string_view>

#include "codegen/target.h"

namespace kiln::codegen {

std::unique_ptr<Target> make_cpu_target();

// The default --cpu: a portable x86-64 level (AVX2 + FMA machines, 2015 on).
inline constexpr std::string_view kDefaultCpu = "x86-64-v3";

}  // namespace kiln::codegen
