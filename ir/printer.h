// The IR printer: writes a Graph as .graph text.
//
// Unfused graphs print as valid .graph text that parses back to the same graph, and printing
// that again gives identical text (a fixpoint). Fused graphs print the same statements grouped
// by kernel, each group introduced by a comment line naming the kernel, its kind and the source
// nodes, so the output stays valid .graph text.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ir {

struct PrintOptions {
  // Constants with more elements than this (and no weight name) print as a literal anyway but
  // elided with a comment; they cannot be parsed back. 0 means never elide.
  int64_t max_literal_elements = 4096;
};

std::string print_graph(const Graph& graph, const PrintOptions& options = {});

// Whether print_graph elides `data` (a constant without a weight name): too many elements, and
// not one value repeated.
bool constant_is_elided(const Tensor& data, const PrintOptions& options = {});
// How many constants print_graph elides in `graph` (weights print as `param`, never elided).
size_t count_elided_constants(const Graph& graph, const PrintOptions& options = {});

// Graphviz (dot) of the graph; with kernels, each kernel is a cluster holding its ops.
std::string print_dot(const Graph& graph);

}  // namespace kiln::ir
