// Helpers shared by the IR unit tests (test_ir_*.cpp): build graphs directly through
// Graph::add_node and write types compactly ("f32[N, 10]").
#pragma once

#include <doctest/doctest.h>

#include <cctype>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/infer.h"
#include "ir/ops.h"

namespace kiln::ir::testing {

// Parses "f32[N, 10]" / "bool[]" (test input only; aborts the test on a typo).
inline TensorType type_of(const std::string& text) {
  const size_t open = text.find('[');
  REQUIRE(open != std::string::npos);
  auto dtype = parse_dtype(text.substr(0, open));
  REQUIRE(dtype.has_value());
  TensorType t{*dtype, {}};
  std::string inner = text.substr(open + 1, text.size() - open - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = inner.find(',', pos);
    if (comma == std::string::npos) comma = inner.size();
    std::string dim = inner.substr(pos, comma - pos);
    while (!dim.empty() && dim.front() == ' ') dim.erase(dim.begin());
    const bool product = dim.find('*') != std::string::npos;  // "2*N": a symbolic product
    if (!dim.empty() && !product && (std::isdigit(static_cast<unsigned char>(dim[0])) || dim[0] == '-')) {
      t.shape.push_back(Dim::of(std::stoll(dim)));
    } else {
      t.shape.push_back(Dim::symbol(dim));
    }
    pos = comma + 1;
  }
  return t;
}

// Builds a graph node by node, inferring each node's type as it goes.
class GraphBuilder {
 public:
  Graph graph;

  NodeId input(const std::string& name, const std::string& type) {
    Node n;
    n.op = OpKind::kInput;
    n.name = name;
    n.attrs = InputAttrs{int64_t(graph.inputs().size())};
    n.type = type_of(type);
    NodeId id = graph.add_node(std::move(n));
    graph.inputs().push_back(id);
    return id;
  }

  NodeId constant(const std::string& name, Tensor data, const std::string& weight_name = "") {
    Node n;
    n.op = OpKind::kConstant;
    n.name = name;
    n.type = data.type();
    n.attrs = ConstantAttrs{graph.add_constant(std::move(data)), weight_name};
    return graph.add_node(std::move(n));
  }

  // Adds a node and requires inference to succeed.
  NodeId op(OpKind kind, const std::string& name, std::vector<NodeId> inputs) {
    return op(kind, name, std::move(inputs), default_attrs(kind));
  }
  NodeId op(OpKind kind, const std::string& name, std::vector<NodeId> inputs, Attrs attrs) {
    Node n;
    n.op = kind;
    n.name = name;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    Status s = infer_node(graph, n);
    INFO("inferring " << name << ": " << s.message());
    REQUIRE(s.is_ok());
    return graph.add_node(std::move(n));
  }

  void output(const std::string& name, NodeId node) {
    graph.outputs().push_back(GraphOutput{name, node, graph.node(node).type, {}});
  }
};

inline Tensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  auto t = Tensor::zeros(DType::kF32, std::move(shape));
  REQUIRE(t.is_ok());
  REQUIRE(size_t(t->num_elements()) == values.size());
  for (size_t i = 0; i < values.size(); ++i) t->set_element_from_double(int64_t(i), values[i]);
  return std::move(t).value();
}

// Infers one node of `kind` over fresh inputs of the given types.
struct InferOutcome {
  Status status;
  TensorType type;
  Attrs attrs;
  std::string type_string() const { return status.is_ok() ? type.to_string() : "error: " + status.message(); }
};

inline InferOutcome infer_op(OpKind kind, const std::vector<std::string>& operand_types, Attrs attrs) {
  GraphBuilder b;
  Node n;
  n.op = kind;
  n.name = "out";
  for (size_t i = 0; i < operand_types.size(); ++i) {
    n.inputs.push_back(b.input("in" + std::to_string(i), operand_types[i]));
  }
  n.attrs = std::move(attrs);
  InferOutcome outcome;
  outcome.status = infer_node(b.graph, n);
  outcome.type = n.type;
  outcome.attrs = n.attrs;
  return outcome;
}

inline InferOutcome infer_op(OpKind kind, const std::vector<std::string>& operand_types) {
  return infer_op(kind, operand_types, default_attrs(kind));
}

}  // namespace kiln::ir::testing
