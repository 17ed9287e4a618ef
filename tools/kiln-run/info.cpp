#include "tools/kiln-run/info.h"

#include <cstdio>
#include <set>

namespace kiln::tools {
namespace {

using nlohmann::json;

json tensor_json(const std::string& name, const ir::TensorType& type) {
  json shape = json::array();
  for (const ir::Dim& d : type.shape) shape.push_back(d.is_static() ? json(d.size()) : json(d.symbol_name()));
  return {{"name", name}, {"dtype", ir::dtype_name(type.dtype)}, {"shape", std::move(shape)}};
}

// "f32[N, 3]" from a tensor_json entry.
std::string type_text(const json& tensor) {
  std::string s = tensor["dtype"].get<std::string>() + "[";
  for (size_t d = 0; d < tensor["shape"].size(); ++d) {
    const json& dim = tensor["shape"][d];
    s += (d ? ", " : "") + (dim.is_string() ? dim.get<std::string>() : std::to_string(dim.get<int64_t>()));
  }
  return s + "]";
}

std::string joined(const json& strings) {
  std::string s;
  for (const json& item : strings) s += (s.empty() ? "" : ", ") + item.get<std::string>();
  return s;
}

}  // namespace

json describe_artifact(const artifact::LoadedArtifact& artifact, const std::string& path) {
  const ir::Graph& graph = artifact.graph;
  json d = {{"artifact", path},
            {"format_version", artifact.format_version},
            {"producer", artifact.producer},
            {"signer", artifact.signer ? json(artifact::public_key_hex(*artifact.signer)) : json(nullptr)},
            {"signature_verified", artifact.signature_verified},
            {"targets", json::array()},
            {"inputs", json::array()},
            {"outputs", json::array()},
            {"kernels", json::array()}};
  for (const std::string& target : artifact.targets()) {
    size_t binaries = 0, modules = 0;
    std::set<const uint8_t*> packed;  // the distinct packed weights (kernels may share one)
    uint64_t packed_bytes = 0;
    for (const artifact::KernelBinary& k : artifact.kernels) {
      if (k.target != target) continue;
      ++binaries;
      if (k.conv && !k.conv->packed_weights.empty() && packed.insert(k.conv->packed_weights.data()).second)
        packed_bytes += k.conv->packed_weights.size();
    }
    for (const artifact::ModuleBinary& m : artifact.modules) modules += m.target == target;
    d["targets"].push_back({{"name", target}, {"kernel_binaries", binaries}, {"modules", modules},
                            {"packed_weights", packed.size()}, {"packed_weight_bytes", packed_bytes}});
  }
  std::set<std::string> symbols;
  for (ir::NodeId id : graph.inputs()) {
    d["inputs"].push_back(tensor_json(graph.node(id).name, graph.node(id).type));
    for (const ir::Dim& dim : graph.node(id).type.shape)
      if (dim.is_symbolic()) symbols.insert(dim.symbol_name());
  }
  for (const ir::GraphOutput& out : graph.outputs()) d["outputs"].push_back(tensor_json(out.name, out.declared));
  d["symbols"] = symbols;
  for (size_t i = 0; i < graph.kernels().size(); ++i) {
    const ir::Kernel& k = graph.kernels()[i];
    json sources = json::array();
    for (ir::NodeId id : k.nodes) sources.push_back(graph.node(id).name);
    d["kernels"].push_back({{"index", i}, {"name", k.name}, {"kind", ir::kernel_kind_name(k.kind)},
                            {"source_nodes", std::move(sources)}});
  }
  size_t named = 0;
  uint64_t bytes = 0;
  for (const ir::Tensor& c : graph.constants()) bytes += c.size_bytes();
  for (const ir::Node& node : graph.nodes())
    if (const auto* attrs = std::get_if<ir::ConstantAttrs>(&node.attrs); attrs && !attrs->weight_name.empty()) ++named;
  d["constants"] = {{"count", graph.constants().size()}, {"named_weights", named}, {"bytes", bytes}};
  d["arena_bytes"] = artifact.plan.arena_size_string();
  return d;
}

std::string format_description(const json& d) {
  std::string s = "artifact: " + d["artifact"].get<std::string>() + "\n";
  s += "format version: " + std::to_string(d["format_version"].get<uint32_t>()) + "\n";
  const std::string producer = d["producer"].get<std::string>();
  s += "producer: " + (producer.empty() ? std::string("(not recorded)") : producer) + "\n";
  if (d["signer"].is_null())
    s += "signed: no\n";
  else
    s += "signed by: " + d["signer"].get<std::string>() +
         (d["signature_verified"].get<bool>() ? " (signature verified: a trusted key)\n"
                                              : " (not verified: give --trusted-key to check it)\n");
  std::string targets;
  for (const json& t : d["targets"]) {
    targets += (targets.empty() ? "" : ", ") + t["name"].get<std::string>() + " (" +
               std::to_string(t["kernel_binaries"].get<size_t>()) + " kernel binaries";
    if (t["modules"].get<size_t>() > 0) targets += ", " + std::to_string(t["modules"].get<size_t>()) + " modules";
    if (t["packed_weights"].get<size_t>() > 0)
      targets += ", " + std::to_string(t["packed_weights"].get<size_t>()) + " packed weights of " +
                 std::to_string(t["packed_weight_bytes"].get<uint64_t>()) + " bytes";
    targets += ")";
  }
  s += "targets: " + (targets.empty() ? std::string("none (the reference interpreter only)") : targets) + "\n";
  for (const char* io : {"inputs", "outputs"}) {
    s += std::string(io) + ":\n";
    for (const json& t : d[io]) s += "  " + t["name"].get<std::string>() + ": " + type_text(t) + "\n";
  }
  s += "symbols: " + (d["symbols"].empty() ? std::string("none") : joined(d["symbols"])) + "\n";
  s += "kernels: " + std::to_string(d["kernels"].size()) + "\n";
  for (const json& k : d["kernels"]) {
    char line[160];
    std::snprintf(line, sizeof line, "  %4zu  %-36s %-14s ", k["index"].get<size_t>(),
                  k["name"].get<std::string>().c_str(), k["kind"].get<std::string>().c_str());
    s += line + joined(k["source_nodes"]) + "\n";
  }
  const json& c = d["constants"];
  s += "constants: " + std::to_string(c["count"].get<size_t>()) + " (" +
       std::to_string(c["named_weights"].get<size_t>()) + " named weights), " +
       std::to_string(c["bytes"].get<uint64_t>()) + " bytes\n";
  s += "arena: " + d["arena_bytes"].get<std::string>() + " bytes\n";
  return s;
}

}  // namespace kiln::tools
