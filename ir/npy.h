// NumPy .npy reading and writing for ir::Tensor (lives in ir/ because it builds Tensors; support/
// must not depend on ir/).
//
// Reads format versions 1.0, 2.0 and 3.0; little-endian, C order only. dtypes map as
//   <f8 f64 | <f4 f32 | <f2 f16 | <i8 i64 | <i4 i32 | <i2 i16 | |i1 i8 | <u4 u32 | <u2 u16 | |u1 u8 | |b1 bool
// (single-byte types are also accepted with '<' or '=' byte order). Writes version 1.0 (2.0
// when the header needs it), header padded so the data starts at a multiple of 64 bytes, as
// NumPy does.
//
// bfloat16, which NumPy lacks. Kiln's convention, the same for every tool:
// - written as f32 ('<f4'): exact (every bf16 value is an f32 value; read back, a signaling NaN
//   comes back quiet, as f32_to_bf16 makes every NaN) and readable by any NumPy without extra
//   packages;
// - read as bf16 from '<f4' through convert_npy_tensor() (rounded to nearest even when an input
//   expects bf16), as raw bf16 bits from '<u2' (`x.view(numpy.uint16)`: read_npy returns a u16
//   tensor, which convert_npy_tensor() reinterprets when the input expects bf16) and from '<V2' /
//   '|V2' (what numpy.save writes for an ml_dtypes.bfloat16 array; read_npy returns kBF16).
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

// A bf16 tensor is written as f32 (see above).
std::vector<uint8_t> to_npy_bytes(const Tensor& tensor);
Status write_npy(const std::string& path, const Tensor& tensor);

// Converts a tensor read from a .npy file to the dtype an input expects: identity when dtypes
// match, f32 -> bf16 (rounded to nearest even) and u16 -> bf16 (raw bits; the convention above).
// Anything else is kInvalidArgument naming both dtypes.
Result<Tensor> convert_npy_tensor(const Tensor& tensor, DType wanted);

}  // namespace kiln::ir
