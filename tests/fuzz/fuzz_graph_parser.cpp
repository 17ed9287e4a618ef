// libFuzzer target for the .graph frontend: any byte string must parse to a graph or to clean
// diagnostics, without crashes, hangs, leaks or out-of-bounds reads (built with ASan). The input
// is parsed in place from the fuzzer's exactly-sized buffer, so reading one byte past the text
// is caught.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "frontend/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::Diagnostics diags(20);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // A base directory that does not exist: `weights` directives fail cleanly instead of reading
  // whatever files happen to be around.
  kiln::Result<kiln::ir::Graph> graph =
      kiln::frontend::parse_graph_text(text, "fuzz.graph", "/nonexistent-kiln-fuzz-dir", diags);
  if (graph.is_ok() && diags.has_errors()) __builtin_trap();   // success means no errors
  if (!graph.is_ok() && !diags.has_errors()) __builtin_trap(); // failure is always explained
  return 0;
}
