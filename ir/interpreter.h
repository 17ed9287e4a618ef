// The reference interpreter: runs any graph (fused or not) on the CPU, one node at a time.
// It is the oracle every backend is tested against, so it favours obvious correctness over
// speed: floating-point math is done in double and rounded to the node's dtype on store;
// integer math is exact in int64 with the dtype's wrap-around; reductions accumulate in double.
//
// Thread-safety: interpret() only reads the graph; concurrent calls on one graph are safe.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::ir {

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
Result<std::vector<Tensor>> interpret(const Graph& graph, std::span<const Tensor> inputs);

// Evaluates one node given its input tensors (used by constant folding and by interpret()).
Result<Tensor> evaluate_node(const Graph& graph, const Node& node,
                             std::span<const Tensor* const> inputs,
                             const SymbolBindings& bindings);

}  // namespace kiln::ir
