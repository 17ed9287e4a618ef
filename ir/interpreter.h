// The reference interpreter: runs any graph (fused or not) on the CPU, one node at a time.
// It is the oracle every backend is tested against, so it favours obvious correctness over
// speed. Integer math is exact in int64 with the dtype's wrap-around in every mode. Float math
// follows an InterpreterPrecision, chosen per call:
//  - kExact (the default): float math is done in double and rounded to the node's dtype on
//    store; reductions, matmul, conv, pooling, softmax, layer_norm and attention accumulate in
//    double. The result is the op's value as closely as the node's dtype can hold it, which is
//    what constant folding, the reference device and the interpreter's own tests want.
//  - kDeviceFaithful: every float op computes with f32 intermediates and accumulators, as
//    Kiln's kernels do for f32, f16 and bf16 alike (codegen/c_family*.cpp: values in f32
//    registers, accumulations in f32), then rounds to the node's dtype. An f32 overflow inside
//    an op (a sum of squares, a partial dot product) is then inf or NaN exactly where a device
//    produces it, so comparing a device with this mode compares like with like. What stays
//    different from a device: the order of a sum (kernels reduce in trees, so a case where only
//    some orders overflow or cancel stays order-dependent), the ulps of the device's math
//    library (exp, tanh, ...), attention's online softmax (the kernels rescale a running sum),
//    and fusion: a fused f16/bf16 kernel keeps its intermediate values in f32 where this
//    interpreter rounds every node's value to the node's dtype (an f8 value is rounded in the
//    kernel too: its 3 or 2 mantissa bits make the difference too large to ignore).
//    Elementwise ops are the same in both modes: the scalar function in double, rounded to f32,
//    then to the dtype. For one IEEE operation (add, mul, div, sqrt) that is exactly the f32
//    result (double has more than twice f32's bits, so rounding twice is rounding once); the
//    composite ones (sigmoid, silu, gelu) differ from a kernel only by its steps' f32 rounding.
//
// Thread-safety: interpret() only reads the graph; concurrent calls on one graph are safe. The
// precision is an argument, not thread state, because it changes results (unlike the thread
// count, which does not): no caller inherits another's choice.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::ir {

// How the interpreter computes float math (see the top of this file).
enum class InterpreterPrecision {
  kExact,           // double intermediates and accumulators, rounded once on store
  kDeviceFaithful,  // f32 intermediates and accumulators, as the device kernels compute
};

// "exact" / "faithful": the spelling of tools' options (kiln-run --check-reference) and reports.
std::string_view interpreter_precision_name(InterpreterPrecision precision);
std::optional<InterpreterPrecision> parse_interpreter_precision(std::string_view name);

// Binds each symbol from the actual input shapes; an input whose shape or dtype disagrees with
// the signature, or two inputs that bind one symbol to different sizes, is kInvalidArgument
// naming the input, what was expected and what was given.
Result<SymbolBindings> bind_inputs(const Graph& graph, std::span<const Tensor> inputs);

// Host threads the interpreter may use for its heavy loops (matmul rows, convolution output
// channels) on the calling thread, from now on: 1 (the default) keeps all work on the calling
// thread; 0 means one per hardware thread. Per calling thread (a session's runs set it for their
// thread), so interpreters on different threads do not share the setting. Results do not depend
// on it: each output element is computed by one thread in the same order.
void set_interpreter_threads(unsigned threads);
unsigned interpreter_threads();

// Runs the graph; returns the outputs in signature order.
Result<std::vector<Tensor>> interpret(const Graph& graph, std::span<const Tensor> inputs,
                                      InterpreterPrecision precision = InterpreterPrecision::kExact);

// Evaluates one node given its input tensors (used by constant folding and by interpret()).
Result<Tensor> evaluate_node(const Graph& graph, const Node& node,
                             std::span<const Tensor* const> inputs,
                             const SymbolBindings& bindings,
                             InterpreterPrecision precision = InterpreterPrecision::kExact);

}  // namespace kiln::ir
