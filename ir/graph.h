// Graph: Kiln's IR. A graph owns its nodes, constants and fusion groups by value; nodes refer
// to each other by NodeId (an index into the graph's node vector), never by pointer.
//
// Every op produces exactly one value, so a node *is* a value. Node order in `nodes()` is the
// program order; after the topological-sort pass it is a valid execution order. Passes that
// delete nodes mark them erased and call compact(), which renumbers ids (so do not keep NodeIds
// across a compact()).
//
// Fusion does not restructure the graph: it records Kernels, groups of nodes that run as one
// launch. A graph without kernels is the unfused graph, and the interpreter runs either form.
//
// Thread-safety: a const Graph may be read from many threads; mutation needs exclusive access.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/ops.h"
#include "ir/shape.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::ir {

using NodeId = uint32_t;
inline constexpr NodeId kNoNode = ~NodeId(0);

struct Node {
  OpKind op = OpKind::kInput;
  std::string name;            // unique within the graph; the .graph value name
  std::vector<NodeId> inputs;  // operands in order
  Attrs attrs;                 // the struct for `op` (see ir/ops.h)
  TensorType type;             // set by shape inference
  SourceLoc loc;               // where the user wrote it (file:line:col of its first token)
  bool erased = false;         // marked for removal by compact()
};

// How a kernel is executed; backends pick a kernel template per kind.
enum class KernelKind : uint8_t {
  kElementwise,   // a chain of elementwise ops over the output's index space
  kReduction,     // elementwise prologue -> reduce / argmax -> optional elementwise epilogue
  kNormalization, // softmax, log_softmax, layer_norm (+ prologue/epilogue)
  kMatMul,        // matmul (+ elementwise epilogue such as bias and activation)
  kLayout,        // transpose, broadcast_to, slice, concat, gather, reshape copies
  kConv,          // conv2d (+ epilogue), pooling
  kAttention,     // attention: scores, softmax and the weighted sum in one kernel
};
std::string_view kernel_kind_name(KernelKind kind);

struct Kernel {
  std::string name;             // provenance name, e.g. "fused_mul_add_tanh_3"
  KernelKind kind = KernelKind::kElementwise;
  std::vector<NodeId> nodes;    // the ops computed inside, in execution order
  NodeId anchor = kNoNode;      // the non-elementwise op the kernel is built around, if any
  std::vector<NodeId> inputs;   // values read from memory (graph inputs, constants, other kernels)
  std::vector<NodeId> outputs;  // values written to memory (used outside the kernel or outputs)
};

struct GraphOutput {
  std::string name;
  NodeId node = kNoNode;
  TensorType declared;  // the type written in the signature
  SourceLoc loc;
};

class Graph {
 public:
  Graph() = default;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  // Explicit copies only (graphs can be large).
  Graph clone() const { return Graph(*this); }

  std::string name;
  // The `weights` directive as written (empty if none) and the directory it is relative to.
  std::string weights_path;
  std::string weights_base_dir;

  // ---- nodes ----
  NodeId add_node(Node node);
  Node& node(NodeId id) { return nodes_[id]; }
  const Node& node(NodeId id) const { return nodes_[id]; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  size_t num_nodes() const { return nodes_.size(); }
  // First live node with this name, or kNoNode.
  NodeId find(std::string_view name) const;

  // Graph inputs (kInput nodes) in signature order.
  std::vector<NodeId>& inputs() { return inputs_; }
  const std::vector<NodeId>& inputs() const { return inputs_; }
  std::vector<GraphOutput>& outputs() { return outputs_; }
  const std::vector<GraphOutput>& outputs() const { return outputs_; }

  // ---- constants ----
  uint32_t add_constant(Tensor data);
  const Tensor& constant(uint32_t index) const { return constants_[index]; }
  std::vector<Tensor>& constants() { return constants_; }
  const std::vector<Tensor>& constants() const { return constants_; }
  // The data of a kConstant node. Precondition: node(id).op == kConstant.
  const Tensor& constant_of(NodeId id) const;

  // ---- fusion groups (empty until the fusion pass runs) ----
  std::vector<Kernel>& kernels() { return kernels_; }
  const std::vector<Kernel>& kernels() const { return kernels_; }

  // ---- editing helpers for passes ----
  // Points every use of `from` (node inputs and graph outputs) at `to`.
  void replace_all_uses(NodeId from, NodeId to);
  // users()[id] = ids of live nodes that read node id (computed on demand, O(nodes)).
  std::vector<std::vector<NodeId>> users() const;
  // Removes erased nodes and constants no longer referenced; renumbers ids everywhere
  // (inputs, outputs, kernels). Kernels that referenced an erased node are dropped.
  void compact();
  // A fresh name not used by any node, of the form "<base>.<n>". Costs O(nodes) per call:
  // code that creates many names (parsers, passes) should use a NameTable instead.
  std::string unique_name(std::string_view base) const;

 private:
  Graph(const Graph&) = default;

  std::vector<Node> nodes_;
  std::vector<NodeId> inputs_;
  std::vector<GraphOutput> outputs_;
  std::vector<Tensor> constants_;
  std::vector<Kernel> kernels_;
};

// Hands out fresh value names of the form "<base>.<n>". Built once (O(nodes)); then each
// fresh() is O(1) amortized. Not thread-safe.
class NameTable {
 public:
  NameTable() = default;
  explicit NameTable(const Graph& graph);
  bool contains(const std::string& name) const { return used_.count(name) != 0; }
  // Records a name as taken (returns false if it already was).
  bool insert(const std::string& name) { return used_.insert(name).second; }
  std::string fresh(std::string_view base);

 private:
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, uint64_t> next_suffix_;
};

}  // namespace kiln::ir
