// Pass cse: common-subexpression elimination. Two nodes compute the same value when they have
// the same op, the same operands (after earlier merges) and equal attributes (Attrs ==); every
// op is pure, so the later one is replaced by the earlier. Constants merge when their data is
// equal (dtype, shape and bytes), whatever their names or weight names. Graph inputs never merge.
//
// One pass in topological order: operands are rewritten before a node is looked up, so chains
// of duplicates collapse in a single sweep. O(nodes) expected (hash buckets). A constant's
// bucket is keyed by its dtype, shape and at most 4 KiB of its bytes (its head and tail):
// hashing every weight's bytes cost a compile of a 100 MB model about 20 ms; constants that
// share a bucket are compared in full (same_value).
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::OpKind;

void hash_combine(uint64_t& seed, uint64_t value) {
  seed ^= value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
}

std::string_view bytes_of(const ir::Tensor& t) {
  return std::string_view(reinterpret_cast<const char*>(t.data()), t.size_bytes());
}

uint64_t hash_node(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  uint64_t h = uint64_t(node.op);
  if (node.op == OpKind::kConstant) {
    const ir::Tensor& data = graph.constant_of(id);
    hash_combine(h, uint64_t(data.dtype()));
    for (int64_t d : data.shape()) hash_combine(h, uint64_t(d));
    constexpr size_t kSample = 2048;
    const std::string_view bytes = bytes_of(data);
    hash_combine(h, std::hash<std::string_view>{}(bytes.substr(0, kSample)));
    if (bytes.size() > kSample) hash_combine(h, std::hash<std::string_view>{}(bytes.substr(bytes.size() - kSample)));
    return h;
  }
  for (NodeId in : node.inputs) hash_combine(h, in);
  return h;
}

bool same_value(const Graph& graph, NodeId a, NodeId b) {
  const Node& x = graph.node(a);
  const Node& y = graph.node(b);
  if (x.op != y.op || x.type != y.type) return false;
  if (x.op == OpKind::kConstant) {
    const ir::Tensor& tx = graph.constant_of(a);
    const ir::Tensor& ty = graph.constant_of(b);
    return tx.dtype() == ty.dtype() && tx.shape() == ty.shape() && bytes_of(tx) == bytes_of(ty);
  }
  return x.inputs == y.inputs && x.attrs == y.attrs;
}

}  // namespace

Status cse_pass(Graph& graph, const PassContext&) {
  ValueRemap remap(graph.num_nodes());
  std::unordered_map<uint64_t, std::vector<NodeId>> seen;
  seen.reserve(graph.num_nodes());
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    Node& node = graph.node(id);
    if (node.erased || node.op == OpKind::kInput) continue;
    remap.rewrite_operands(node);
    std::vector<NodeId>& bucket = seen[hash_node(graph, id)];
    bool merged = false;
    for (NodeId earlier : bucket) {
      if (same_value(graph, earlier, id)) {
        remap.replace(id, earlier);
        node.erased = true;
        merged = true;
        break;
      }
    }
    if (!merged) bucket.push_back(id);
  }
  remap.finish(graph);
  return Status::ok();
}

}  // namespace kiln::passes
