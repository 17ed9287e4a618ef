// Internal helpers shared by the reference interpreter's op-family files (ir/interp_*.cpp).
// Not a public header: only ir/interpreter.cpp and ir/interp_*.cpp include it.
//
// Numeric model (the contract documented in ir/interpreter.h and docs):
//  - Float math runs in the context's compute type: double (InterpreterPrecision::kExact) or
//    float (kDeviceFaithful). Evaluators with float intermediates or accumulators are templates
//    on it, instantiated through with_compute_type(); a value is rounded to the node's dtype
//    when stored (f32 directly, f16/bf16/f8 through f32 with round-to-nearest-even;
//    f8 per support/float8.h).
//  - Integer math runs in int64 with two's-complement wrap-around, then wraps to the dtype
//    (i32/i8/u8 wrap like NumPy).
//  - Storing a double into an integer dtype (cast, or a float-valued op whose node is integer)
//    truncates toward zero, maps NaN to 0 and saturates out-of-range values to the dtype's range
//    (as GPU conversion instructions do; NumPy leaves this undefined).
//  - Storing into bool stores (value != 0); NaN is true, like NumPy.
//
// Ownership: every function here is pure (reads its arguments, returns fresh values).
// Thread-safety: no shared state.
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/interpreter.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::ir::interp {

// Everything an op evaluator needs: the node (attributes, name for messages), its input tensors
// and the dtype it must produce (the node's inferred dtype).
struct EvalContext {
  const Graph& graph;
  const Node& node;
  std::span<const Tensor* const> inputs;
  const SymbolBindings& bindings;
  DType out_dtype;
  InterpreterPrecision precision;
};

// Calls fn(double{}) for kExact and fn(float{}) for kDeviceFaithful: the argument's type is the
// compute type of the op's float math (a generic lambda names it with decltype or a template
// parameter). Both calls must return the same type.
template <class Fn>
decltype(auto) with_compute_type(const EvalContext& ctx, Fn&& fn) {
  if (ctx.precision == InterpreterPrecision::kDeviceFaithful) return fn(float{});
  return fn(double{});
}

// ---- element conversion ----------------------------------------------------------------

// All elements of `t`, row-major, converted to double (bool -> 0/1) or int64 (floats truncate,
// NaN -> 0, saturating).
std::vector<double> load_doubles(const Tensor& t);
std::vector<int64_t> load_ints(const Tensor& t);
// Truthiness of every element (nonzero; NaN is true).
std::vector<uint8_t> load_bools(const Tensor& t);

// Wraps an int64 to the range of an integer dtype (two's complement); bool -> 0/1; i64 as is.
int64_t wrap_to_dtype(int64_t v, DType dtype);
// double -> integer dtype: truncate toward zero, NaN -> 0, saturate to the dtype's range.
int64_t double_to_int_saturating(double v, DType dtype);

// All elements of `t` converted to the compute type T (double or float); an f32, f16, bf16 or f8
// element converts exactly to either. load_values<double> is load_doubles.
template <class T>
std::vector<T> load_values(const Tensor& t);

// Fresh tensors holding `values` converted to `dtype` by the rules above.
Result<Tensor> tensor_from_doubles(DType dtype, const std::vector<int64_t>& shape,
                                   std::span<const double> values);
// The same for values in the compute type T (double or float).
template <class T>
Result<Tensor> tensor_from_values(DType dtype, const std::vector<int64_t>& shape, std::span<const T> values);
Result<Tensor> tensor_from_ints(DType dtype, const std::vector<int64_t>& shape,
                                std::span<const int64_t> values);

// ---- shapes and strides --------------------------------------------------------------------

int64_t num_elements_of(const std::vector<int64_t>& shape);

// Runs body(begin, end) over [0, n) split into contiguous ranges on up to interpreter_threads()
// threads (the calling thread takes the first range). `work_per_item` (multiply-adds, say)
// keeps small loops on one thread, where starting threads would cost more than they save.
void parallel_ranges(int64_t n, int64_t work_per_item, const std::function<void(int64_t, int64_t)>& body);
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape);
// Strides (in elements) to read a tensor of `in_shape` as if broadcast to `out_shape`:
// right-aligned, 0 for stretched (size-1) and missing leading dims.
// Precondition: in_shape broadcasts to out_shape.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in_shape,
                                       const std::vector<int64_t>& out_shape);
// NumPy broadcast of concrete shapes; error names both shapes.
Result<std::vector<int64_t>> broadcast_sizes(const std::vector<int64_t>& a,
                                             const std::vector<int64_t>& b);
// Whether `in_shape` broadcasts to exactly `out_shape`.
bool broadcasts_to(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape);
std::string sizes_to_string(const std::vector<int64_t>& shape);
// Normalizes a possibly negative axis; error message names the op's node.
Result<int64_t> checked_axis(const EvalContext& ctx, int64_t axis, int64_t rank);

// Visits every index of `shape` in row-major order, calling fn(linear_index, offsets) where
// offsets[k] = sum(index[d] * strides[k][d]). Each strides[k] has shape.size() entries.
// The innermost dimension is a tight loop; outer dims advance an odometer.
template <size_t N, class Fn>
void for_each_strided(const std::vector<int64_t>& shape,
                      const std::array<const std::vector<int64_t>*, N>& strides, Fn&& fn) {
  const size_t rank = shape.size();
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  std::array<int64_t, N> base{};
  if (rank == 0) {
    fn(int64_t(0), base);
    return;
  }
  std::vector<int64_t> index(rank, 0);
  const int64_t inner = shape[rank - 1];
  std::array<int64_t, N> inner_stride{};
  for (size_t k = 0; k < N; ++k) inner_stride[k] = (*strides[k])[rank - 1];
  int64_t linear = 0;
  while (true) {
    std::array<int64_t, N> offsets = base;
    for (int64_t j = 0; j < inner; ++j) {
      fn(linear++, offsets);
      for (size_t k = 0; k < N; ++k) offsets[k] += inner_stride[k];
    }
    int64_t d = int64_t(rank) - 2;
    for (; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) base[k] += (*strides[k])[d];
      if (index[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= (*strides[k])[d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) break;
  }
}

// Copies elements (raw bytes of `elem_size`) from `src` read through `src_strides` starting at
// `src_offset` into a fresh row-major buffer of `out_shape` at `dst`.
void strided_copy(const std::byte* src, int64_t src_offset, const std::vector<int64_t>& src_strides,
                  const std::vector<int64_t>& out_shape, std::byte* dst, size_t elem_size);

// "node 'h' (matmul): <message>" with the node's location.
Status node_error(const EvalContext& ctx, const std::string& message);

// ---- evaluators named by the operator table (one file per family) -----------------------------------------------------------

// interp_elementwise.cpp: unary, binary, compare, logic, where, cast, clamp.
Result<Tensor> eval_elementwise(const EvalContext& ctx);
// interp_reduce.cpp: reduce_* (the row's ReduceFns), argmax, softmax and log_softmax, layer_norm.
Result<Tensor> eval_reduce(const EvalContext& ctx);
Result<Tensor> eval_argmax(const EvalContext& ctx);
Result<Tensor> eval_softmax(const EvalContext& ctx);
Result<Tensor> eval_layer_norm(const EvalContext& ctx);
// interp_linalg.cpp: matmul.
Result<Tensor> eval_matmul(const EvalContext& ctx);
Result<Tensor> eval_attention(const EvalContext& ctx);
// interp_layout.cpp:
Result<Tensor> eval_reshape(const EvalContext& ctx);
Result<Tensor> eval_transpose(const EvalContext& ctx);
Result<Tensor> eval_broadcast_to(const EvalContext& ctx);
Result<Tensor> eval_slice(const EvalContext& ctx);
Result<Tensor> eval_concat(const EvalContext& ctx);
Result<Tensor> eval_gather(const EvalContext& ctx);
Result<Tensor> eval_iota(const EvalContext& ctx);
Result<Tensor> eval_topk(const EvalContext& ctx);
Result<Tensor> eval_scatter(const EvalContext& ctx);
// interp_conv.cpp: conv2d; max_pool2d and avg_pool2d; global_avg_pool2d.
Result<Tensor> eval_conv2d(const EvalContext& ctx);
Result<Tensor> eval_pool2d(const EvalContext& ctx);
Result<Tensor> eval_global_avg_pool2d(const EvalContext& ctx);

}  // namespace kiln::ir::interp
