// Reading and writing .safetensors files (the format of Hugging Face's safetensors library):
//
//   [8 bytes: header length N, little-endian u64][N bytes: JSON header][data section]
//
// The header maps each tensor name to {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}
// with offsets relative to the start of the data section; an optional "__metadata__" entry
// maps strings to strings. Supported dtypes: F32 F16 BF16 I64 I32 I8 U8 BOOL.
//
// Every length and offset is checked against the file before use, so a truncated, corrupted
// or foreign file gives a clear error (kCorrupt / kNotFound), never a crash or an out-of-bounds
// read. Loaded tensors are copies, owned by the returned ir::Tensor.
//
// Thread-safety: a SafetensorsFile is immutable after open(); concurrent load() calls are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::frontend {

struct SafetensorsEntry {
  std::string dtype_name;          // as written in the header ("F32", "F64", ...)
  std::optional<ir::DType> dtype;  // nullopt for dtypes Kiln does not support
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets into the data section, checked: begin <= end <= data size
  uint64_t end = 0;

  // "f32[784, 256]" (or the raw dtype name for unsupported dtypes).
  std::string type_string() const;
};

class SafetensorsFile {
 public:
  // Reads and validates the whole file. Messages name the file `display_name` (default: path).
  static Result<SafetensorsFile> open(const std::string& path, const std::string& display_name = "");
  // Validates an in-memory image of a file; `name` is used in messages.
  static Result<SafetensorsFile> from_bytes(std::vector<std::byte> bytes, const std::string& name);

  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  // nullptr if there is no tensor of that name.
  const SafetensorsEntry* find(const std::string& name) const;
  // A copy of one tensor. kNotFound if absent, kUnsupported for an unsupported dtype.
  Result<ir::Tensor> load(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string name_;
  std::shared_ptr<const std::vector<std::byte>> bytes_;
  size_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Loads every tensor of a file.
Result<std::map<std::string, ir::Tensor>> read_safetensors(const std::string& path);

// Writes tensors (sorted by name, data 8-byte aligned) in the safetensors format; a dtype
// safetensors cannot name (f8e4m3fnuz, f8e5m2fnuz) is kUnsupported.
Status write_safetensors(const std::string& path, const std::map<std::string, ir::Tensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});
// The same, into memory, without that check (every dtype must have a name).
std::vector<std::byte> encode_safetensors(const std::map<std::string, ir::Tensor>& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

// "F32" <-> DType.
std::string_view safetensors_dtype_name(ir::DType dtype);
std::optional<ir::DType> parse_safetensors_dtype(std::string_view name);

}  // namespace kiln::frontend
