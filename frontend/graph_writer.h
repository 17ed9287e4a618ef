// Writing a graph as .graph text that compiles back to the same graph: the text, plus its weights
// in a .safetensors file beside it.
#pragma once

#include <string>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::frontend {

// Writes `graph` to `path` as .graph text. Constants the text cannot hold as literals (weights,
// and constants the printer would elide) go to `<path without .graph>.safetensors`, which the
// text names in its `weights` line, each under its weight name (or, for one without, its node's
// name, made unique); `graph` gets those names and that weights path. A graph without such
// constants is written alone.
Status write_graph_file(ir::Graph& graph, const std::string& path);

}  // namespace kiln::frontend
