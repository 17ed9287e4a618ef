// Tensor: a dense, row-major, static-shaped block of host memory with a dtype.
//
// Storage is either owned (allocated 64-byte aligned) or a borrowed view that keeps its owner
// alive through `keepalive` (used to point into a loaded artifact without copying).
// Copying a Tensor shares the storage (cheap); use clone() for a deep copy.
// Thread-safety: concurrent reads are safe; writes through mutable_data() need exclusive access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"
#include "support/status.h"

namespace kiln::ir {

class Tensor {
 public:
  Tensor() = default;

  // Zero-filled tensor. Fails (kOutOfMemory / kInvalidArgument) on absurd sizes.
  static Result<Tensor> zeros(DType dtype, std::vector<int64_t> shape);
  // Copies `bytes`, which must hold exactly numel * dtype_size bytes.
  static Result<Tensor> from_bytes(DType dtype, std::vector<int64_t> shape,
                                   std::span<const std::byte> bytes);
  // Borrows `data` (must stay valid while `keepalive` lives, and be suitably aligned).
  static Tensor view(DType dtype, std::vector<int64_t> shape, const std::byte* data,
                     std::shared_ptr<const void> keepalive);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return int64_t(shape_.size()); }
  int64_t num_elements() const;
  size_t size_bytes() const { return size_t(num_elements()) * dtype_size(dtype_); }
  TensorType type() const;

  const std::byte* data() const { return data_; }
  // Precondition: the tensor owns its storage (not a view).
  std::byte* mutable_data();
  template <class T> const T* data_as() const { return reinterpret_cast<const T*>(data_); }
  template <class T> T* mutable_data_as() { return reinterpret_cast<T*>(mutable_data()); }

  Tensor clone() const;
  bool is_view() const { return !owned_; }

  // Element i converted to double / int64 (any dtype; bool is 0 or 1). For tests and printing.
  double element_as_double(int64_t i) const;
  int64_t element_as_int(int64_t i) const;
  // Stores a double into element i, converting (rounding f16/bf16, truncating ints).
  void set_element_from_double(int64_t i, double v);

 private:
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  std::shared_ptr<const void> storage_;  // owner of the bytes (ours or the view's keepalive)
  const std::byte* data_ = nullptr;
  bool owned_ = false;
};

}  // namespace kiln::ir
