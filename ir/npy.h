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
// The 8-bit floats (f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz) follow the same convention: written
// as f32 (exact), read through convert_npy_tensor() from '<f4' (rounded to nearest even, without
// saturation: support/float8.h) and from '|u1' as raw bits (`x.view(numpy.uint8)`; read_npy
// returns those as u8, since the file cannot say which 8-bit float it holds).
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

// A bf16 or 8-bit float tensor is written as f32 (see above).
std::vector<uint8_t> to_npy_bytes(const Tensor& tensor);
Status write_npy(const std::string& path, const Tensor& tensor);

// Converts a tensor read from a .npy file to the dtype an input expects: identity when dtypes
// match, f32 -> bf16 or an 8-bit float (rounded to nearest even), u16 -> bf16 and u8 -> an 8-bit
// float (raw bits; the convention above).
// Anything else is kInvalidArgument naming both dtypes.
Result<Tensor> convert_npy_tensor(const Tensor& tensor, DType wanted);

}  // namespace kiln::ir
