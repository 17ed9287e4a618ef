// Graphviz output: one dot node per live value (label "name\nop\ntype"), an edge per operand,
// graph inputs as inverted houses, outputs as extra house-shaped nodes, constants as notes, and
// each fused kernel as a `cluster_<i>` subgraph holding its ops.
#include <string>

#include "ir/printer.h"

namespace kiln::ir {
namespace {

// Escapes text for a double-quoted dot string; "\n" separators are added by the caller.
std::string dot_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string node_id(NodeId id) { return "n" + std::to_string(id); }

std::string node_statement(const Graph& graph, NodeId id) {
  const Node& n = graph.node(id);
  std::string op;
  std::string shape;
  if (n.op == OpKind::kInput) {
    op = "input";
    shape = ", shape=invhouse, style=filled, fillcolor=\"#dde8f8\"";
  } else if (const auto* constant = std::get_if<ConstantAttrs>(&n.attrs)) {
    op = constant->weight_name.empty() ? "const" : "param " + constant->weight_name;
    shape = ", shape=note";
  } else {
    op = std::string(op_name(n.op));
  }
  return node_id(id) + " [label=\"" + dot_escape(n.name) + "\\n" + dot_escape(op) + "\\n" +
         dot_escape(n.type.to_string()) + "\"" + shape + "];\n";
}

}  // namespace

std::string print_dot(const Graph& graph) {
  const size_t count = graph.num_nodes();
  auto live = [&](NodeId id) { return id < count && !graph.node(id).erased; };
  std::string out = "digraph \"" + dot_escape(graph.name) + "\" {\n";
  out += "  node [shape=box, fontname=\"monospace\"];\n";

  std::vector<bool> in_kernel(count, false);
  const auto& kernels = graph.kernels();
  for (size_t k = 0; k < kernels.size(); ++k) {
    out += "  subgraph cluster_" + std::to_string(k) + " {\n";
    out += "    label=\"" + dot_escape(kernels[k].name) + "\";\n";
    out += "    style=filled; fillcolor=\"#f4f4f4\"; color=\"#888888\";\n";
    for (NodeId id : kernels[k].nodes) {
      if (!live(id) || in_kernel[id]) continue;  // a node belongs to one cluster only
      in_kernel[id] = true;
      out += "    " + node_statement(graph, id);
    }
    out += "  }\n";
  }
  for (NodeId id = 0; id < count; ++id) {
    if (live(id) && !in_kernel[id]) out += "  " + node_statement(graph, id);
  }
  for (NodeId id = 0; id < count; ++id) {
    if (!live(id)) continue;
    for (NodeId in : graph.node(id).inputs) {
      if (live(in)) out += "  " + node_id(in) + " -> " + node_id(id) + ";\n";
    }
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const GraphOutput& o = graph.outputs()[i];
    const std::string id = "out" + std::to_string(i);
    out += "  " + id + " [label=\"" + dot_escape(o.name) + "\\noutput\\n" + dot_escape(o.declared.to_string()) +
           "\", shape=house, style=filled, fillcolor=\"#e2f3df\"];\n";
    if (live(o.node)) out += "  " + node_id(o.node) + " -> " + id + ";\n";
  }
  out += "}\n";
  return out;
}

}  // namespace kiln::ir
