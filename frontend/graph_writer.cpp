#include "frontend/graph_writer.h"

#include <fstream>
#include <map>
#include <set>

#include "frontend/safetensors.h"
#include "ir/printer.h"

namespace kiln::frontend {

Status write_graph_file(ir::Graph& graph, const std::string& path) {
  std::map<std::string, ir::Tensor> weights;
  std::set<std::string> taken;
  for (const ir::Node& node : graph.nodes())
    if (const auto* c = std::get_if<ir::ConstantAttrs>(&node.attrs); c && !c->weight_name.empty())
      taken.insert(c->weight_name);
  for (ir::Node& node : graph.nodes()) {
    auto* c = std::get_if<ir::ConstantAttrs>(&node.attrs);
    if (!c || c->constant_index >= graph.constants().size()) continue;
    const ir::Tensor& data = graph.constant(c->constant_index);
    if (c->weight_name.empty()) {
      if (!ir::constant_is_elided(data)) continue;  // a literal in the text
      std::string name = node.name.empty() ? "const" : node.name;
      for (int k = 1; taken.count(name); ++k) name = (node.name.empty() ? "const" : node.name) + "_" + std::to_string(k);
      taken.insert(name);
      c->weight_name = name;
    }
    weights[c->weight_name] = data;
  }
  if (!weights.empty()) {
    std::string base = path;
    if (base.size() > 6 && base.substr(base.size() - 6) == ".graph") base.resize(base.size() - 6);
    const std::string weights_path = base + ".safetensors";
    KILN_RETURN_IF_ERROR(write_safetensors(weights_path, weights));
    const size_t slash = weights_path.find_last_of('/');
    graph.weights_path = slash == std::string::npos ? weights_path : weights_path.substr(slash + 1);
  }
  std::ofstream out(path, std::ios::binary);
  const std::string text = ir::print_graph(graph);
  out.write(text.data(), std::streamsize(text.size()));
  out.close();
  if (!out) return Status(ErrorCode::kNotFound, "cannot write '" + path + "'");
  return Status::ok();
}

}  // namespace kiln::frontend
