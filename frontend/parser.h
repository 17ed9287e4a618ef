// The .graph text frontend: lexer + recursive-descent parser producing a typed ir::Graph.
//
// Errors go to `diags` as "FILE:LINE:COL: error: ..." (column of the offending token's first
// character). The parser recovers at statement boundaries and keeps going until the
// Diagnostics limit, so one run reports several errors. On success the graph has passed shape
// inference and its outputs match their declared types.
//
// It never reads outside the text, and nesting depth is bounded (deep nesting is an error, not a
// stack overflow). `param` tensors are read from the `weights` safetensors file, resolved
// relative to the .graph file's directory.
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"
#include "support/diagnostics.h"
#include "support/status.h"

namespace kiln::frontend {

// `filename` is used in diagnostics; `base_dir` resolves the weights path.
Result<ir::Graph> parse_graph_text(std::string_view text, const std::string& filename,
                                   const std::string& base_dir, Diagnostics& diags);

// Reads and parses a .graph file ("-" reads stdin).
Result<ir::Graph> parse_graph_file(const std::string& path, Diagnostics& diags);

}  // namespace kiln::frontend
