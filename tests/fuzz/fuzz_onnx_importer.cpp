// libFuzzer target for the ONNX importer: any byte string must import to a graph or to clean
// diagnostics, without crashes, hangs, leaks or out-of-bounds reads (built with ASan/UBSan).
// Mirrors tests/fuzz/fuzz_graph_parser.cpp. Every other input is also tried as a TensorProto
// (the .pb reader the conformance runner uses).
#include <cstddef>
#include <cstdint>
#include <span>

#include "frontend/onnx/onnx_importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  kiln::Diagnostics diags(20);
  // A base directory that does not exist: external data fails cleanly instead of reading
  // whatever files happen to be around.
  kiln::Result<kiln::ir::Graph> graph =
      kiln::onnx_import::import_onnx_bytes(bytes, "fuzz.onnx", "/nonexistent-kiln-fuzz-dir", diags);
  if (graph.is_ok() && diags.has_errors()) __builtin_trap();   // success means no errors
  if (!graph.is_ok() && !diags.has_errors()) __builtin_trap(); // failure is always explained
  if (size % 2 == 1) {
    kiln::Result<kiln::ir::Tensor> t = kiln::onnx_import::parse_tensor_proto(bytes, "fuzz.pb");
    (void)t.is_ok();
  }
  return 0;
}
