#include "ir/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "support/check.h"
#include "support/half.h"

namespace kiln::ir {
namespace {

constexpr size_t kTensorAlignment = 64;

// Element count and byte size, or an error for negative dims or sizes that overflow.
Result<size_t> checked_byte_size(DType dtype, const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument("negative dimension " + std::to_string(d));
    if (d != 0 && count > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(d)) {
      return invalid_argument("tensor size overflows 64 bits");
    }
    count *= uint64_t(d);
  }
  uint64_t elem = dtype_size(dtype);
  if (count > uint64_t(std::numeric_limits<int64_t>::max()) / elem) {
    return invalid_argument("tensor size overflows 64 bits");
  }
  return size_t(count * elem);
}

std::shared_ptr<std::byte> allocate_aligned(size_t bytes) {
  size_t rounded = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  if (rounded == 0) rounded = kTensorAlignment;
  void* p = std::aligned_alloc(kTensorAlignment, rounded);
  if (p == nullptr) return nullptr;
  std::memset(p, 0, rounded);
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}

}  // namespace

Result<Tensor> Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  KILN_ASSIGN_OR_RETURN(size_t bytes, checked_byte_size(dtype, shape));
  std::shared_ptr<std::byte> storage = allocate_aligned(bytes);
  if (!storage) {
    return Status(ErrorCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(bytes) + " bytes for a tensor");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = storage.get();
  t.storage_ = std::move(storage);
  t.owned_ = true;
  return t;
}

Result<Tensor> Tensor::from_bytes(DType dtype, std::vector<int64_t> shape,
                                  std::span<const std::byte> bytes) {
  KILN_ASSIGN_OR_RETURN(Tensor t, zeros(dtype, std::move(shape)));
  if (bytes.size() != t.size_bytes()) {
    return invalid_argument("expected " + std::to_string(t.size_bytes()) + " bytes of tensor data, got " +
                            std::to_string(bytes.size()));
  }
  if (!bytes.empty()) std::memcpy(t.mutable_data(), bytes.data(), bytes.size());
  return t;
}

Tensor Tensor::view(DType dtype, std::vector<int64_t> shape, const std::byte* data,
                    std::shared_ptr<const void> keepalive) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.storage_ = std::move(keepalive);
  t.owned_ = false;
  return t;
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

TensorType Tensor::type() const { return TensorType{dtype_, shape_of(shape_)}; }

std::byte* Tensor::mutable_data() {
  KILN_CHECK(owned_, "mutable_data() on a borrowed tensor view");
  return const_cast<std::byte*>(data_);
}

Tensor Tensor::clone() const {
  Result<Tensor> copy = from_bytes(dtype_, shape_, std::span<const std::byte>(data_, size_bytes()));
  KILN_CHECK(copy.is_ok(), "cloning a valid tensor cannot fail except out of memory");
  return std::move(copy).value();
}

double Tensor::element_as_double(int64_t i) const {
  const std::byte* p = data_ + size_t(i) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::kF64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::kF32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::kF16: { uint16_t v; std::memcpy(&v, p, 2); return f16_to_f32(v); }
    case DType::kBF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_f32(v); }
    case DType::kI64: case DType::kI32: case DType::kI16: case DType::kI8:
    case DType::kU32: case DType::kU16: case DType::kU8: case DType::kBool:
      return double(element_as_int(i));
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      return float8_to_f32(uint8_t(*p), *float8_format(dtype_));
  }
  return 0.0;
}

int64_t Tensor::element_as_int(int64_t i) const {
  const std::byte* p = data_ + size_t(i) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::kI64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case DType::kI32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kI16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::kI8: return static_cast<int8_t>(*p);
    case DType::kU32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kU16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::kU8: return static_cast<uint8_t>(*p);
    case DType::kBool: return *p != std::byte{0} ? 1 : 0;
    case DType::kF64:
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ: {
      double v = element_as_double(i);
      if (std::isnan(v)) return 0;
      if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
      if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
      return int64_t(v);
    }
  }
  return 0;
}

void Tensor::set_element_from_double(int64_t i, double v) {
  std::byte* p = mutable_data() + size_t(i) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::kF64: std::memcpy(p, &v, 8); return;
    case DType::kF32: { float f = float(v); std::memcpy(p, &f, 4); return; }
    case DType::kF16: { uint16_t h = f32_to_f16(float(v)); std::memcpy(p, &h, 2); return; }
    case DType::kBF16: { uint16_t h = f32_to_bf16(float(v)); std::memcpy(p, &h, 2); return; }
    case DType::kBool: *p = std::byte(v != 0.0 ? 1 : 0); return;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      *p = std::byte(f32_to_float8(float(v), *float8_format(dtype_)));
      return;
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU32:
    case DType::kU16:
    case DType::kU8: {
      int64_t x = 0;
      if (!std::isnan(v)) {
        if (v >= 9.2233720368547758e18) x = std::numeric_limits<int64_t>::max();
        else if (v <= -9.2233720368547758e18) x = std::numeric_limits<int64_t>::min();
        else x = int64_t(v);
      }
      if (dtype_ == DType::kI64) { std::memcpy(p, &x, 8); return; }
      // Narrower integers wrap like NumPy's astype.
      if (dtype_size(dtype_) == 4) { uint32_t y = uint32_t(uint64_t(x)); std::memcpy(p, &y, 4); return; }
      if (dtype_size(dtype_) == 2) { uint16_t y = uint16_t(uint64_t(x)); std::memcpy(p, &y, 2); return; }
      *p = std::byte(uint8_t(x));
      return;
    }
  }
}

}  // namespace kiln::ir
