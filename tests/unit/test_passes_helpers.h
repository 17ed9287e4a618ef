// Helpers for the passes' unit tests: build small graphs in code (ir::Graph::add_node +
// ir::infer_node), run pipelines, and compare the interpreter's results before and after.
#pragma once

#include <doctest/doctest.h>

#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/infer.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"

namespace kiln::passes::testing {

// "N, 256" -> [N, 256]; "" -> a scalar.
inline ir::Shape dims(std::string_view text) {
  ir::Shape shape;
  std::string item;
  std::stringstream in{std::string(text)};
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) continue;
    if (item[0] >= '0' && item[0] <= '9') {
      shape.push_back(ir::Dim::of(std::stoll(item)));
    } else {
      shape.push_back(ir::Dim::symbol(item));
    }
  }
  return shape;
}

struct GraphBuilder {
  ir::Graph graph;

  ir::NodeId input(const std::string& name, std::string_view shape,
                   ir::DType dtype = ir::DType::kF32) {
    ir::Node node;
    node.op = ir::OpKind::kInput;
    node.name = name;
    node.attrs = ir::InputAttrs{int64_t(graph.inputs().size())};
    node.type = {dtype, dims(shape)};
    ir::NodeId id = graph.add_node(std::move(node));
    graph.inputs().push_back(id);
    return id;
  }

  // A constant filled with `values` (one value fills the whole tensor).
  ir::NodeId constant(const std::string& name, std::vector<int64_t> shape,
                      std::vector<double> values, ir::DType dtype = ir::DType::kF32,
                      const std::string& weight_name = "") {
    Result<ir::Tensor> data = ir::Tensor::zeros(dtype, shape);
    REQUIRE(data.is_ok());
    for (int64_t i = 0; i < data->num_elements(); ++i) {
      data->set_element_from_double(i, values.size() == 1 ? values[0] : values[size_t(i)]);
    }
    ir::Node node;
    node.op = ir::OpKind::kConstant;
    node.name = name;
    node.type = data->type();
    node.attrs = ir::ConstantAttrs{graph.add_constant(std::move(data).value()), weight_name};
    return graph.add_node(std::move(node));
  }

  ir::NodeId op(ir::OpKind kind, const std::string& name, std::vector<ir::NodeId> inputs) {
    return op(kind, name, std::move(inputs), ir::default_attrs(kind));
  }

  ir::NodeId op(ir::OpKind kind, const std::string& name, std::vector<ir::NodeId> inputs,
                ir::Attrs attrs) {
    ir::Node node;
    node.op = kind;
    node.name = name;
    node.inputs = std::move(inputs);
    node.attrs = std::move(attrs);
    Status inferred = ir::infer_node(graph, node);
    INFO(inferred.to_string());
    REQUIRE(inferred.is_ok());
    return graph.add_node(std::move(node));
  }

  void output(ir::NodeId id) {
    const ir::Node& node = graph.node(id);
    graph.outputs().push_back({node.name, id, node.type, {}});
  }
};

inline PipelineOptions options_at(int level, bool fuse = true) {
  PipelineOptions options;
  options.opt_level = level;
  options.fuse = fuse;
  return options;
}

// Runs the pipeline and requires success.
inline ir::ExecutionPlan compile(ir::Graph& graph, const PipelineOptions& options) {
  Result<ir::ExecutionPlan> plan = run_pipeline(graph, options);
  INFO((plan.is_ok() ? std::string() : plan.status().to_string()));
  REQUIRE(plan.is_ok());
  Status verified = ir::verify_graph(graph);
  INFO(verified.to_string());
  REQUIRE(verified.is_ok());
  return std::move(plan).value();
}

// Deterministic inputs for every graph input, binding each symbol to `symbol_size`.
inline std::vector<ir::Tensor> sample_inputs(const ir::Graph& graph, int64_t symbol_size = 3) {
  std::vector<ir::Tensor> inputs;
  uint32_t state = 12345;
  for (ir::NodeId id : graph.inputs()) {
    std::vector<int64_t> shape;
    for (const ir::Dim& d : graph.node(id).type.shape) {
      shape.push_back(d.is_static() ? d.size() : symbol_size);
    }
    Result<ir::Tensor> t = ir::Tensor::zeros(graph.node(id).type.dtype, shape);
    REQUIRE(t.is_ok());
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      state = state * 1664525u + 1013904223u;
      t->set_element_from_double(i, double(state >> 8) / double(1u << 24) * 2.0 - 1.0);
    }
    inputs.push_back(std::move(t).value());
  }
  return inputs;
}

// The optimized graph computes what the original computed (checked with the interpreter), to
// `tolerance`, or to a few roundings of a 16-bit output: passes may keep an intermediate in f32
// that the original rounded (fuse-attention's scores and probabilities).
inline void check_same_results(const ir::Graph& original, const ir::Graph& optimized,
                               double tolerance = 1e-5) {
  std::vector<ir::Tensor> inputs = sample_inputs(original);
  Result<std::vector<ir::Tensor>> expected = ir::interpret(original, inputs);
  Result<std::vector<ir::Tensor>> actual = ir::interpret(optimized, inputs);
  REQUIRE(expected.is_ok());
  INFO((actual.is_ok() ? std::string() : actual.status().to_string()));
  REQUIRE(actual.is_ok());
  REQUIRE(expected->size() == actual->size());
  for (size_t i = 0; i < expected->size(); ++i) {
    const ir::Tensor& e = (*expected)[i];
    const ir::Tensor& a = (*actual)[i];
    REQUIRE(e.shape() == a.shape());
    REQUIRE(e.dtype() == a.dtype());
    const double dtype_tolerance = e.dtype() == ir::DType::kF16 ? 4e-3 : e.dtype() == ir::DType::kBF16 ? 3.2e-2 : 0.0;
    for (int64_t j = 0; j < e.num_elements(); ++j) {
      CHECK(a.element_as_double(j) == doctest::Approx(e.element_as_double(j)).epsilon(std::max(tolerance, dtype_tolerance)));
    }
  }
}

inline int count_op(const ir::Graph& graph, ir::OpKind op) {
  int count = 0;
  for (const ir::Node& n : graph.nodes()) count += (!n.erased && n.op == op);
  return count;
}

inline const ir::Node& output_node(const ir::Graph& graph, size_t i) {
  return graph.node(graph.outputs()[i].node);
}

}  // namespace kiln::passes::testing
