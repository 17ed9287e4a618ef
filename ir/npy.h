// NumPy .npy reading and writing for ir::Tensor (lives in ir/ because it builds Tensors; support/
// must not depend on ir/).
//
// Reads format versions 1.0, 2.0 and 3.0; little-endian, C order only. dtypes map as
//   <f4 f32 | <f2 f16 | <i8 i64 | <i4 i32 | |i1 i8 | |u1 u8 | |b1 bool
// (single-byte types are also accepted with '<' or '=' byte order). bfloat16 has no NumPy
// dtype: a bf16 tensor is written as an f32 (<f4) file, which is exact, and
// convert_npy_tensor() turns an f32 tensor read from a file into bf16 (round to nearest even)
// when an input expects bf16. Writes version 1.0 (2.0 when the header needs it), header padded
// so the data starts at a multiple of 64 bytes, as NumPy does.
//
// Every malformed, truncated, Fortran-order, big-endian or unsupported-dtype file is a clear
// kCorrupt / kUnsupported Status, never a crash or an out-of-bounds read.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::ir {

Result<Tensor> read_npy(const std::string& path);
Result<Tensor> read_npy_bytes(std::span<const uint8_t> bytes);

// A bf16 tensor is written as f32.
std::vector<uint8_t> to_npy_bytes(const Tensor& tensor);
Status write_npy(const std::string& path, const Tensor& tensor);

// Converts a tensor read from a .npy file to the dtype an input expects, where that is
// lossless by convention: identity when dtypes match, f32 -> bf16 (.npy has no bf16).
// Anything else is kInvalidArgument naming both dtypes.
Result<Tensor> convert_npy_tensor(const Tensor& tensor, DType wanted);

}  // namespace kiln::ir
