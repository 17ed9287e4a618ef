// The ONNX frontend: reads an ONNX ModelProto (opsets 11-17, Debian's onnx 1.12) and builds a
// typed, shape-inferred ir::Graph from it.
//
// Initializers and Constant nodes become kConstant nodes; operators Kiln has no direct op for are
// decomposed into Kiln ops; Shape-derived integer subgraphs (Shape -> Gather -> Concat -> Reshape)
// are evaluated at import, keeping dynamic dims symbolic (dim_param names become Kiln symbols,
// unnamed dynamic dims get generated names). Every unsupported operator or attribute in the model
// is reported, one diagnostic per node ("model.onnx: error: node 'n' (Foo, opset 13): ..."), in
// one run. Malformed or truncated files are errors, never crashes: sizes read from the file are
// checked before they are trusted.
//
// Thread-safety: the functions keep no state; concurrent calls on different inputs are safe.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/diagnostics.h"
#include "support/status.h"

namespace kiln::onnx_import {

struct ImportOptions {
  // Graph inputs whose values are fixed at import, keyed by position among the model's inputs
  // (initializers excluded): they become constants and leave the signature. Kiln needs shapes,
  // axes and slice bounds at compile time; this compiles a model that feeds them as data (as
  // the ONNX node tests do) for known values. The tensor must match the input's declared type.
  std::map<size_t, ir::Tensor> frozen_inputs;
};

// Reads and imports a .onnx file; external data files are resolved next to it.
Result<ir::Graph> import_onnx_file(const std::string& path, Diagnostics& diags,
                                   const ImportOptions& options = {});

// Imports a serialized ModelProto. `filename` names the model in diagnostics; `base_dir` (may be
// empty: external data is then refused) resolves external data files.
Result<ir::Graph> import_onnx_bytes(std::span<const std::byte> bytes, const std::string& filename,
                                    const std::string& base_dir, Diagnostics& diags,
                                    const ImportOptions& options = {});

// Reads a serialized TensorProto (.pb, as in the ONNX backend test data) into a Tensor.
Result<ir::Tensor> read_tensor_proto_file(const std::string& path);
Result<ir::Tensor> parse_tensor_proto(std::span<const std::byte> bytes, const std::string& what);

}  // namespace kiln::onnx_import
