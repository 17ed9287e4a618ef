// Shared helpers of the reference interpreter: element conversion, strides, broadcasting.
// See ir/interp_internal.h for the numeric model.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <thread>

#include "ir/interp_internal.h"
#include "ir/interpreter.h"
#include "support/check.h"
#include "support/half.h"

namespace kiln::ir::interp {
namespace {

template <class T>
T read_raw(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Loads every element through `convert` after reading it as its storage type.
template <class Out, class Convert>
std::vector<Out> load_as(const Tensor& t, Convert convert) {
  const int64_t n = t.num_elements();
  std::vector<Out> out(size_t(n > 0 ? n : 0));
  const std::byte* p = t.data();
  switch (t.dtype()) {
    case DType::kF64:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(read_raw<double>(p + 8 * i));
      break;
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(double(read_raw<float>(p + 4 * i)));
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(double(f16_to_f32(read_raw<uint16_t>(p + 2 * i))));
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(double(bf16_to_f32(read_raw<uint16_t>(p + 2 * i))));
      break;
    case DType::kI64:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(read_raw<int64_t>(p + 8 * i));
      break;
    case DType::kI32:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(int64_t(read_raw<int32_t>(p + 4 * i)));
      break;
    case DType::kI8:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(int64_t(read_raw<int8_t>(p + i)));
      break;
    case DType::kU8:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(int64_t(read_raw<uint8_t>(p + i)));
      break;
    case DType::kI16:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(int64_t(read_raw<int16_t>(p + 2 * i)));
      break;
    case DType::kU16:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(int64_t(read_raw<uint16_t>(p + 2 * i)));
      break;
    case DType::kU32:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(int64_t(read_raw<uint32_t>(p + 4 * i)));
      break;
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) out[i] = convert(int64_t(read_raw<uint8_t>(p + i) != 0));
      break;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ: {
      const Float8Format f = *float8_format(t.dtype());
      for (int64_t i = 0; i < n; ++i) out[i] = convert(double(float8_to_f32(read_raw<uint8_t>(p + i), f)));
      break;
    }
  }
  return out;
}

template <class T>
void write_raw(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// `v` as an integer of `bytes` bytes (1, 2, 4 or 8) at `p`: its low bits, so it wraps to the width.
void write_wrapped(std::byte* p, int64_t v, size_t bytes) {
  const uint64_t u = uint64_t(v);
  switch (bytes) {
    case 1: write_raw(p, uint8_t(u)); return;
    case 2: write_raw(p, uint16_t(u)); return;
    case 4: write_raw(p, uint32_t(u)); return;
    default: write_raw(p, u); return;
  }
}

}  // namespace

int64_t wrap_to_dtype(int64_t v, DType dtype) {
  switch (dtype) {
    case DType::kI32: return int64_t(int32_t(uint32_t(uint64_t(v))));
    case DType::kI8: return int64_t(int8_t(uint8_t(uint64_t(v))));
    case DType::kU8: return int64_t(uint8_t(uint64_t(v)));
    case DType::kI16: return int64_t(int16_t(uint16_t(uint64_t(v))));
    case DType::kU16: return int64_t(uint16_t(uint64_t(v)));
    case DType::kU32: return int64_t(uint32_t(uint64_t(v)));
    case DType::kBool: return v != 0 ? 1 : 0;
    case DType::kI64:
    case DType::kF64:
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ: return v;
  }
  return v;
}

int64_t double_to_int_saturating(double v, DType dtype) {
  if (std::isnan(v)) return 0;
  if (dtype == DType::kBool) return v != 0 ? 1 : 0;
  if (is_float(dtype)) return int64_t(v);
  if (dtype == DType::kI64) {
    // 2^63 is exactly representable; anything >= it saturates.
    if (v >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
    if (v < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
    return int64_t(v);
  }
  const auto [lo, hi] = integer_range(dtype);  // exact as doubles below 64 bits
  return int64_t(std::clamp(std::trunc(v), double(lo), double(hi)));
}

template <class T>
std::vector<T> load_values(const Tensor& t) {
  return load_as<T>(t, [](auto v) { return T(v); });
}
template std::vector<double> load_values<double>(const Tensor& t);
template std::vector<float> load_values<float>(const Tensor& t);

std::vector<double> load_doubles(const Tensor& t) { return load_values<double>(t); }

std::vector<int64_t> load_ints(const Tensor& t) {
  return load_as<int64_t>(t, [](auto v) -> int64_t {
    if constexpr (std::is_same_v<decltype(v), double>) {
      return double_to_int_saturating(v, DType::kI64);
    } else {
      return v;
    }
  });
}

std::vector<uint8_t> load_bools(const Tensor& t) {
  return load_as<uint8_t>(t, [](auto v) -> uint8_t { return v != 0 ? 1 : 0; });
}

template <class T>
Result<Tensor> tensor_from_values(DType dtype, const std::vector<int64_t>& shape, std::span<const T> values) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dtype, shape));
  const int64_t n = t.num_elements();
  KILN_CHECK(size_t(n) == values.size(), "tensor_from_values: value count matches the shape");
  if (n == 0) return t;
  std::byte* p = t.mutable_data();
  switch (dtype) {
    case DType::kF64:
      for (int64_t i = 0; i < n; ++i) write_raw(p + 8 * i, double(values[i]));
      break;
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) write_raw(p + 4 * i, float(values[i]));
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) write_raw(p + 2 * i, f32_to_f16(float(values[i])));
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) write_raw(p + 2 * i, f32_to_bf16(float(values[i])));
      break;
    case DType::kI64: case DType::kI32: case DType::kI16: case DType::kI8:
    case DType::kU32: case DType::kU16: case DType::kU8: {
      const size_t size = dtype_size(dtype);
      for (int64_t i = 0; i < n; ++i) write_wrapped(p + size * i, double_to_int_saturating(values[i], dtype), size);
      break;
    }
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) write_raw(p + i, uint8_t(values[i] != T(0) ? 1 : 0));
      break;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ: {
      const Float8Format f = *float8_format(dtype);
      for (int64_t i = 0; i < n; ++i) write_raw(p + i, f32_to_float8(float(values[i]), f));
      break;
    }
  }
  return t;
}
template Result<Tensor> tensor_from_values<double>(DType, const std::vector<int64_t>&, std::span<const double>);
template Result<Tensor> tensor_from_values<float>(DType, const std::vector<int64_t>&, std::span<const float>);

Result<Tensor> tensor_from_doubles(DType dtype, const std::vector<int64_t>& shape,
                                   std::span<const double> values) {
  return tensor_from_values<double>(dtype, shape, values);
}

Result<Tensor> tensor_from_ints(DType dtype, const std::vector<int64_t>& shape,
                                std::span<const int64_t> values) {
  if (is_float(dtype)) {
    std::vector<double> d(values.begin(), values.end());
    return tensor_from_doubles(dtype, shape, d);
  }
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dtype, shape));
  const int64_t n = t.num_elements();
  KILN_CHECK(size_t(n) == values.size(), "tensor_from_ints: value count matches the shape");
  if (n == 0) return t;
  std::byte* p = t.mutable_data();
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < n; ++i) write_raw(p + i, uint8_t(values[i] != 0 ? 1 : 0));
  } else {  // an integer dtype (floats went above): each value wraps to its width
    const size_t size = dtype_size(dtype);
    for (int64_t i = 0; i < n; ++i) write_wrapped(p + size * i, values[i], size);
  }
  return t;
}

int64_t num_elements_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in_shape,
                                       const std::vector<int64_t>& out_shape) {
  std::vector<int64_t> in_strides = row_major_strides(in_shape);
  std::vector<int64_t> strides(out_shape.size(), 0);
  const size_t offset = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) {
    strides[offset + i] = (in_shape[i] == 1 && out_shape[offset + i] != 1) ? 0 : in_strides[i];
  }
  return strides;
}

std::string sizes_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<std::vector<int64_t>> broadcast_sizes(const std::vector<int64_t>& a,
                                             const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return invalid_argument("cannot broadcast " + sizes_to_string(a) + " with " + sizes_to_string(b));
    }
  }
  return out;
}

bool broadcasts_to(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape) {
  if (in_shape.size() > out_shape.size()) return false;
  const size_t offset = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) {
    if (in_shape[i] != 1 && in_shape[i] != out_shape[offset + i]) return false;
  }
  return true;
}

Result<int64_t> checked_axis(const EvalContext& ctx, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return node_error(ctx, "axis " + std::to_string(axis) + " is out of range for rank " +
                               std::to_string(rank));
  }
  return a;
}

void strided_copy(const std::byte* src, int64_t src_offset, const std::vector<int64_t>& src_strides,
                  const std::vector<int64_t>& out_shape, std::byte* dst, size_t elem_size) {
  std::array<const std::vector<int64_t>*, 1> strides = {&src_strides};
  const std::byte* base = src + src_offset * int64_t(elem_size);
  switch (elem_size) {
    case 1:
      for_each_strided<1>(out_shape, strides, [&](int64_t i, const std::array<int64_t, 1>& o) {
        dst[i] = base[o[0]];
      });
      break;
    case 2:
      for_each_strided<1>(out_shape, strides, [&](int64_t i, const std::array<int64_t, 1>& o) {
        std::memcpy(dst + 2 * i, base + 2 * o[0], 2);
      });
      break;
    case 4:
      for_each_strided<1>(out_shape, strides, [&](int64_t i, const std::array<int64_t, 1>& o) {
        std::memcpy(dst + 4 * i, base + 4 * o[0], 4);
      });
      break;
    default:
      for_each_strided<1>(out_shape, strides, [&](int64_t i, const std::array<int64_t, 1>& o) {
        std::memcpy(dst + int64_t(elem_size) * i, base + int64_t(elem_size) * o[0], elem_size);
      });
      break;
  }
}

Status node_error(const EvalContext& ctx, const std::string& message) {
  return invalid_argument("node '" + ctx.node.name + "' (" + std::string(op_name(ctx.node.op)) +
                              "): " + message,
                          ctx.node.loc);
}

void parallel_ranges(int64_t n, int64_t work_per_item, const std::function<void(int64_t, int64_t)>& body) {
  constexpr int64_t kMinWorkPerThread = int64_t(1) << 16;
  const int64_t total_work = n * std::max<int64_t>(work_per_item, 1);
  const int64_t threads = std::min<int64_t>({int64_t(interpreter_threads()), n, std::max<int64_t>(total_work / kMinWorkPerThread, 1)});
  if (threads <= 1) {
    if (n > 0) body(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end) pool.emplace_back(body, begin, end);
  }
  body(0, std::min(n, chunk));
  for (std::thread& th : pool) th.join();
}

}  // namespace kiln::ir::interp

namespace kiln::ir {

namespace {

thread_local unsigned t_interpreter_threads = 1;
}  // namespace

void set_interpreter_threads(unsigned threads) { t_interpreter_threads = threads; }

unsigned interpreter_threads() {
  if (t_interpreter_threads != 0) return t_interpreter_threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace kiln::ir
