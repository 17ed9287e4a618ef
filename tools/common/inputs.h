// The inputs of kiln-run and kiln-bench: loaded from .npy files or filled with seeded random
// values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"
#include "runtime/session.h"
#include "support/status.h"

namespace kiln::tools {

struct PreparedInput {
  ir::Tensor tensor;
  std::string source;  // "FILE.npy" or "random (seed N)"
};

// One tensor per session input, in signature order. Given inputs come from their .npy files
// (bf16 inputs per ir/npy.h's convention). The rest are random: floats uniform in [-1, 1),
// integers in [0, 4) (safe as gather indices), bools 0/1, each input from its own stream seeded
// by `seed` and its position (giving one input from a file leaves the others' values alone),
// with symbolic dims taken from the given inputs or from `dims` (--dim). Errors (unknown input
// name, unreadable file, a --dim that disagrees with a given input, a symbol with no size) are
// user errors naming the input or symbol; a --dim naming no symbol of the artifact adds a
// message to `warnings`.
Result<std::vector<PreparedInput>> prepare_inputs(
    const std::vector<runtime::TensorSpec>& specs,
    const std::vector<std::pair<std::string, std::string>>& files,
    const std::vector<std::pair<std::string, int64_t>>& dims, uint64_t seed,
    std::vector<std::string>& warnings);

// The size of every symbol in `specs`' shapes, as `inputs` (one per spec, as prepare_inputs
// returns them) give it.
ir::SymbolBindings bound_symbols(const std::vector<runtime::TensorSpec>& specs,
                                 const std::vector<PreparedInput>& inputs);

}  // namespace kiln::tools
