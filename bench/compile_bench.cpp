// Compile-time benchmark: generates a large .graph text (default 100 000 nodes) of repeated
// transformer-like blocks with a symbolic batch, then times each compiler stage on it:
// parse (+ shape inference), the -O2 pass pipeline with memory planning, and artifact writing.
//
// usage: kiln-bench-compile [NODES] [REPEATS]     prints a table of median stage times.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "artifact/writer.h"
#include "frontend/parser.h"
#include "passes/pipeline.h"

namespace {

// One block is 11 ops (statements and nested calls): a small dense layer with bias and gelu,
// a residual add, a layer norm, a reduction and an elementwise tail.
constexpr int kNodesPerBlock = 11;

std::string generate_graph(int blocks) {
  std::string text;
  text.reserve(size_t(blocks) * 400);
  text += "graph big(x: f32[N, 16], w: f32[16, 16], s: f32[16], b: f32[16]) -> (y: f32[N, 16]) {\n";
  std::string prev = "x";
  char line[512];
  for (int i = 0; i < blocks; ++i) {
    std::snprintf(line, sizeof line,
                  "  h%d = gelu(add(matmul(%s, w), b))\n"
                  "  r%d = add(%s, h%d)\n"
                  "  n%d = layer_norm(r%d, s, b)\n"
                  "  m%d = reduce_mean(n%d, axes=[1], keepdims=true)\n"
                  "  t%d = mul(sub(n%d, m%d), const f32[] 0.5)\n"
                  "  o%d = tanh(add(t%d, s))\n",
                  i, prev.c_str(), i, prev.c_str(), i, i, i, i, i, i, i, i, i, i);
    text += line;
    prev = "o" + std::to_string(i);
  }
  text += "  y = add(" + prev + ", const f32[] 0.0)\n}\n";
  return text;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int target_nodes = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const int blocks = std::max(1, (target_nodes + kNodesPerBlock - 1) / kNodesPerBlock);
  const std::string text = generate_graph(blocks);

  std::vector<double> parse_ms, passes_ms, write_ms, total_ms;
  size_t nodes = 0, kernels = 0, launches = 0, artifact_bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t_start = std::chrono::steady_clock::now();
    kiln::Diagnostics diags;
    auto t0 = std::chrono::steady_clock::now();
    kiln::Result<kiln::ir::Graph> graph = kiln::frontend::parse_graph_text(text, "big.graph", ".", diags);
    parse_ms.push_back(ms_since(t0));
    if (!graph.is_ok() || diags.has_errors()) {
      std::fprintf(stderr, "parse failed:\n%s", diags.to_string().c_str());
      return 1;
    }
    nodes = graph->num_nodes();
    t0 = std::chrono::steady_clock::now();
    kiln::passes::PipelineOptions options;
    options.verify_each = false;  // as in a release compile; verification is timed separately by tests
    kiln::Result<kiln::ir::ExecutionPlan> plan = kiln::passes::run_pipeline(*graph, options);
    passes_ms.push_back(ms_since(t0));
    if (!plan.is_ok()) {
      std::fprintf(stderr, "pipeline failed: %s\n", plan.status().to_string().c_str());
      return 1;
    }
    kernels = graph->kernels().size();
    launches = plan->launches.size();
    t0 = std::chrono::steady_clock::now();
    kiln::Result<std::vector<uint8_t>> artifact = kiln::artifact::write_artifact(*graph, *plan);
    write_ms.push_back(ms_since(t0));
    if (!artifact.is_ok()) {
      std::fprintf(stderr, "artifact failed: %s\n", artifact.status().to_string().c_str());
      return 1;
    }
    artifact_bytes = artifact->size();
    total_ms.push_back(ms_since(t_start));
  }
  std::printf("graph: %zu nodes parsed (%zu bytes of text), %zu kernels, %zu launches, artifact %zu bytes\n",
              nodes, text.size(), kernels, launches, artifact_bytes);
  std::printf("median of %d runs:\n", repeats);
  std::printf("  parse + infer    %9.1f ms\n", median(parse_ms));
  std::printf("  passes + plan    %9.1f ms\n", median(passes_ms));
  std::printf("  artifact write   %9.1f ms\n", median(write_ms));
  std::printf("  total            %9.1f ms\n", median(total_ms));
  return 0;
}
