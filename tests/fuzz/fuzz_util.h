// Helpers shared by the libFuzzer targets of tests/fuzz. Header-only; no state.
#pragma once

#include <cstring>

#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::fuzz {

// A broken invariant of the code under test: stops the fuzzer with a crash report that libFuzzer
// saves with the input (assert() would vanish in a release build).
inline void require(bool invariant) {
  if (!invariant) __builtin_trap();
}

// Errors are values that explain themselves: a failed Result carries a message.
template <class T>
void require_explained(const Result<T>& result) {
  require(result.is_ok() || !result.status().message().empty());
}

// Same dtype, shape and bytes.
inline bool same_tensor(const ir::Tensor& a, const ir::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.size_bytes() == b.size_bytes() &&
         (a.size_bytes() == 0 || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace kiln::fuzz
