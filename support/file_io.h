// Reading input files safely. Every file Kiln reads (graphs, weights, ONNX models and their
// external data, tensors, .npy inputs, artifacts) must be a regular file: a directory, FIFO,
// device or socket in its place is an error naming the path before anything is read (reading
// one would throw, block forever on a FIFO, or never end on /dev/zero).
//
// Thread-safety: plain functions, safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln {

// A read-only descriptor of the regular file `path` (the caller closes it), opened without
// blocking; its size goes to *size. kNotFound for a missing file, kInvalidArgument for anything
// that is not a regular file or cannot be opened, each naming the path and why.
// `what` names the file in the messages ("safetensors file 'w.safetensors'"; default: the quoted
// path).
Result<int> open_regular_file(const std::string& path, size_t* size, const std::string& what = "");

// The whole regular file `path`; the same errors, and kInvalidArgument for a read error.
Result<std::vector<std::byte>> read_regular_file(const std::string& path, const std::string& what = "");

// Only the check, for readers that open the file themselves.
Status check_regular_file(const std::string& path, const std::string& what = "");

}  // namespace kiln
