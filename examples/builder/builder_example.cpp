// Builds a small two-layer perceptron with the C++ builder API (frontend/builder.h), runs it on
// the reference interpreter, and prints the outputs. The same graph written as .graph text is
// examples/mlp.graph; the builder is for programs that generate graphs.
//
// usage: builder_example [BATCH]   (default batch 3)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "frontend/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"

namespace {

using kiln::frontend::GraphBuilder;
using kiln::frontend::Value;
using kiln::ir::DType;
using kiln::ir::Dim;
using kiln::ir::Tensor;

// Deterministic small weights: a smooth function of the index, so the output is reproducible.
Tensor make_weights(std::vector<int64_t> shape, double scale) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape)).value();
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_element_from_double(i, scale * std::sin(0.37 * double(i)));
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 3;
  if (batch <= 0 || batch > 1024) {
    std::fprintf(stderr, "usage: builder_example [BATCH in 1..1024]\n");
    return 1;
  }

  // probs = softmax(gelu(x @ w1 + b1) @ w2 + b2), with a symbolic batch size N.
  GraphBuilder b("mlp");
  Value x = b.input("x", DType::kF32, {Dim::symbol("N"), Dim::of(8)});
  Value w1 = b.constant(make_weights({8, 16}, 0.5), "w1");
  Value b1 = b.constant(make_weights({16}, 0.1), "b1");
  Value w2 = b.constant(make_weights({16, 4}, 0.5), "w2");
  Value b2 = b.full(0.0, DType::kF32, {4});
  Value h = b.named(b.gelu(b.add(b.matmul(x, w1), b1), /*tanh_approximation=*/true), "h");
  Value logits = b.named(b.add(b.matmul(h, w2), b2), "logits");
  b.output("probs", b.softmax(logits, -1));

  kiln::Result<kiln::ir::Graph> graph = std::move(b).finish();
  if (!graph) {
    std::fprintf(stderr, "%s\n", graph.status().to_string().c_str());
    return 1;
  }
  std::printf("# the graph, as .graph text\n%s\n", kiln::ir::print_graph(*graph).c_str());

  Tensor input = Tensor::zeros(DType::kF32, {batch, 8}).value();
  for (int64_t i = 0; i < input.num_elements(); ++i) input.set_element_from_double(i, double(i % 11) / 5.0 - 1.0);
  std::vector<Tensor> inputs = {input};
  kiln::Result<std::vector<Tensor>> outputs = kiln::ir::interpret(*graph, inputs);
  if (!outputs) {
    std::fprintf(stderr, "%s\n", outputs.status().to_string().c_str());
    return 1;
  }
  const Tensor& probs = outputs->at(0);
  std::printf("probs: %s\n", probs.type().to_string().c_str());
  for (int64_t row = 0; row < probs.shape()[0]; ++row) {
    double sum = 0;
    std::printf("  [");
    for (int64_t col = 0; col < probs.shape()[1]; ++col) {
      double p = probs.element_as_double(row * probs.shape()[1] + col);
      sum += p;
      std::printf("%s%.6f", col ? ", " : "", p);
    }
    std::printf("]  sum %.6f\n", sum);
  }
  return 0;
}
