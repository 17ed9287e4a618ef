// The IR verifier: reports the first broken invariant. Graphs also come from users (the builder
// API), so a failure is kInvalidArgument; its message names the node, its op and what is wrong,
// and carries the node's SourceLoc when it has one.
#include "ir/verifier.h"

#include <set>
#include <unordered_map>

#include "ir/infer.h"
#include "ir/names.h"

namespace kiln::ir {
namespace {

class Verifier {
 public:
  Verifier(const Graph& graph, bool require_topological)
      : graph_(graph), require_topological_(require_topological) {}

  Status run() {
    KILN_RETURN_IF_ERROR(check_signature_inputs());
    KILN_RETURN_IF_ERROR(check_names());
    for (NodeId id = 0; id < graph_.num_nodes(); ++id) {
      if (!graph_.node(id).erased) KILN_RETURN_IF_ERROR(check_node(id));
    }
    KILN_RETURN_IF_ERROR(check_outputs());
    return check_kernels();
  }

 private:
  bool live(NodeId id) const { return id < graph_.num_nodes() && !graph_.node(id).erased; }

  static std::string op_of(const Node& n) {
    return n.op == OpKind::kInput ? "input" : std::string(op_name(n.op));
  }

  Status fail_node(NodeId id, const std::string& what) const {
    const Node& n = graph_.node(id);
    return Status(ErrorCode::kInvalidArgument, "node '" + n.name + "' (" + op_of(n) + "): " + what, n.loc);
  }

  std::string describe(NodeId id) const {
    if (id >= graph_.num_nodes()) return "#" + std::to_string(id) + ", which does not exist";
    const Node& n = graph_.node(id);
    return "'" + n.name + "'" + (n.erased ? ", which is erased" : "");
  }

  Status check_signature_inputs() const {
    std::set<NodeId> seen;
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const NodeId id = graph_.inputs()[i];
      if (!live(id)) {
        return invalid_argument("graph input " + std::to_string(i) + " refers to node " + describe(id));
      }
      const Node& n = graph_.node(id);
      if (n.op != OpKind::kInput) {
        return fail_node(id, "listed as graph input " + std::to_string(i) + " but is not an input node");
      }
      const auto* attrs = std::get_if<InputAttrs>(&n.attrs);
      if (attrs && attrs->index != int64_t(i)) {
        return fail_node(id, "has input index " + std::to_string(attrs->index) + " but is graph input " +
                                 std::to_string(i));
      }
      if (!seen.insert(id).second) return fail_node(id, "is listed twice as a graph input");
    }
    for (NodeId id = 0; id < graph_.num_nodes(); ++id) {
      if (live(id) && graph_.node(id).op == OpKind::kInput && !seen.count(id)) {
        return fail_node(id, "is an input node missing from the graph signature");
      }
    }
    return Status::ok();
  }

  Status check_names() const {
    std::unordered_map<std::string, NodeId> first;
    for (NodeId id = 0; id < graph_.num_nodes(); ++id) {
      if (!live(id)) continue;
      const std::string& name = graph_.node(id).name;
      if (name.size() > kMaxNameLength)
        return fail_node(id, "the name is " + std::to_string(name.size()) + " characters long; names have at most " +
                                 std::to_string(kMaxNameLength));
      if (!is_valid_value_name(name)) return fail_node(id, "the name '" + name + "' is not a valid identifier");
      auto [it, inserted] = first.emplace(name, id);
      if (!inserted) {
        return fail_node(id, "the name is already used by node #" + std::to_string(it->second));
      }
    }
    return Status::ok();
  }

  Status check_node(NodeId id) const {
    const Node& node = graph_.node(id);
    if (int(node.op) >= kNumOpKinds) {
      return Status(ErrorCode::kInvalidArgument,
                    "node '" + node.name + "' has an unknown op kind " + std::to_string(int(node.op)), node.loc);
    }
    if (node.attrs.index() != default_attrs(node.op).index()) {
      return fail_node(id, "holds the attributes of another op kind");
    }
    if (node.type.rank() > kMaxRank) {
      return fail_node(id, "has rank " + std::to_string(node.type.rank()) + "; tensors have at most " +
                               std::to_string(kMaxRank) + " dimensions");
    }
    if (is_static(node.type.shape) && !static_num_elements(node.type.shape))
      return fail_node(id, "has more elements than a 64-bit count holds");
    const OpInfo& info = op_info(node.op);
    const int count = int(node.inputs.size());
    if (count < info.min_inputs || (info.max_inputs >= 0 && count > info.max_inputs)) {
      return fail_node(id, "has " + std::to_string(count) + " operands; it takes " +
                               std::to_string(info.min_inputs) +
                               (info.max_inputs < 0 ? " or more"
                                : info.max_inputs == info.min_inputs
                                    ? ""
                                    : " to " + std::to_string(info.max_inputs)));
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const NodeId in = node.inputs[i];
      if (!live(in)) return fail_node(id, "operand " + std::to_string(i) + " refers to node " + describe(in));
      if (in == id) return fail_node(id, "uses itself as operand " + std::to_string(i));
      if (require_topological_ && in > id) {
        return fail_node(id, "operand " + std::to_string(i) + " '" + graph_.node(in).name +
                                 "' is defined after its use");
      }
    }
    if (node.op == OpKind::kConstant) {
      const auto& attrs = std::get<ConstantAttrs>(node.attrs);
      if (attrs.constant_index >= graph_.constants().size()) {
        return fail_node(id, "refers to constant data #" + std::to_string(attrs.constant_index) +
                                 ", which does not exist");
      }
    }
    Node copy = node;
    Status inferred = infer_node(graph_, copy);
    if (!inferred.is_ok()) return fail_node(id, "shape inference fails: " + inferred.message());
    if (copy.type != node.type) {
      return fail_node(id, "has type " + node.type.to_string() + " but its operands give " + copy.type.to_string());
    }
    return Status::ok();
  }

  Status check_outputs() const {
    std::set<std::string> names;
    for (const GraphOutput& out : graph_.outputs()) {
      if (!names.insert(out.name).second) {
        return Status(ErrorCode::kInvalidArgument, "output '" + out.name + "' is listed twice", out.loc);
      }
      if (!live(out.node)) {
        return Status(ErrorCode::kInvalidArgument,
                      "output '" + out.name + "' refers to node " + describe(out.node), out.loc);
      }
      KILN_RETURN_IF_ERROR(check_output_type(graph_, out));
    }
    return Status::ok();
  }

  Status check_kernels() const {
    const size_t count = graph_.num_nodes();
    std::vector<int> owner(count, -1);  // kernel index computing each node
    const auto& kernels = graph_.kernels();
    for (size_t k = 0; k < kernels.size(); ++k) {
      const Kernel& kernel = kernels[k];
      const std::string where = "kernel '" + kernel.name + "'";
      if (kernel.name.empty()) return invalid_argument("kernel " + std::to_string(k) + " has no name");
      if (kernel.name.size() > kMaxNameLength)
        return invalid_argument("kernel " + std::to_string(k) + " has a name of " + std::to_string(kernel.name.size()) +
                                " characters; names have at most " + std::to_string(kMaxNameLength));
      if (kernel.nodes.empty()) return invalid_argument(where + " computes no nodes");
      for (NodeId id : kernel.nodes) {
        if (!live(id)) return invalid_argument(where + " computes node " + describe(id));
        if (graph_.node(id).op == OpKind::kInput) {
          return invalid_argument(where + " computes graph input '" + graph_.node(id).name + "'");
        }
        if (owner[id] >= 0) {
          return invalid_argument(where + " computes node '" + graph_.node(id).name +
                                  "', which kernel '" + kernels[size_t(owner[id])].name + "' computes too");
        }
        owner[id] = int(k);
      }
      if (kernel.anchor != kNoNode && (kernel.anchor >= count || owner[kernel.anchor] != int(k))) {
        return invalid_argument(where + " has an anchor that is not one of its nodes");
      }
    }
    if (kernels.empty()) return Status::ok();

    const auto users = graph_.users();
    std::vector<bool> is_output(count, false);
    for (const GraphOutput& out : graph_.outputs()) {
      if (out.node < count) is_output[out.node] = true;
    }
    for (size_t k = 0; k < kernels.size(); ++k) {
      const Kernel& kernel = kernels[k];
      const std::string where = "kernel '" + kernel.name + "'";
      const std::set<NodeId> inputs(kernel.inputs.begin(), kernel.inputs.end());
      const std::set<NodeId> outputs(kernel.outputs.begin(), kernel.outputs.end());
      if (inputs.size() != kernel.inputs.size()) return invalid_argument(where + " lists an input twice");
      if (outputs.size() != kernel.outputs.size()) return invalid_argument(where + " lists an output twice");
      std::set<NodeId> computed_so_far;
      std::set<NodeId> read_from_memory;
      for (NodeId id : kernel.nodes) {
        for (NodeId in : graph_.node(id).inputs) {
          if (owner[in] == int(k)) {
            if (!computed_so_far.count(in)) {
              return invalid_argument(where + " computes '" + graph_.node(id).name + "' before its operand '" +
                                      graph_.node(in).name + "'");
            }
          } else {
            if (!inputs.count(in)) {
              return invalid_argument(where + " reads '" + graph_.node(in).name +
                                      "' without listing it as an input");
            }
            read_from_memory.insert(in);
          }
        }
        computed_so_far.insert(id);
        bool used_outside = is_output[id];
        for (NodeId user : users[id]) used_outside |= owner[user] != int(k);
        if (used_outside && !outputs.count(id)) {
          return invalid_argument(where + " does not write '" + graph_.node(id).name +
                                  "', which is used outside the kernel");
        }
      }
      for (NodeId in : kernel.inputs) {
        if (!read_from_memory.count(in)) {
          return invalid_argument(where + " lists input " + describe(in) + " that none of its ops reads");
        }
      }
      for (NodeId out : kernel.outputs) {
        if (out >= count || owner[out] != int(k)) {
          return invalid_argument(where + " writes " + describe(out) + ", which it does not compute");
        }
      }
    }
    return Status::ok();
  }

  const Graph& graph_;
  bool require_topological_;
};

}  // namespace

Status verify_graph(const Graph& graph, bool require_topological) {
  return Verifier(graph, require_topological).run();
}

}  // namespace kiln::ir
