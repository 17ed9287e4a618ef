// Unit tests for ir/verifier.h: a well-formed graph passes, and each kind of breakage is caught
// with a message naming the node, its op and the problem.
#include <doctest/doctest.h>

#include "ir/names.h"
#include "ir/verifier.h"
#include "ir_test_graphs.h"

using namespace kiln::ir;
using namespace kiln::ir::testing;
using kiln::Status;

namespace {

struct Small {
  GraphBuilder b;
  NodeId x, w, h, e, t;
};

// x -> h = matmul(x, w) -> e = exp(h) -> t = tanh(e) -> output t
Small build_small() {
  Small s;
  s.b.graph.name = "small";
  s.x = s.b.input("x", "f32[N, 4]");
  s.w = s.b.constant("w", f32_tensor({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  s.h = s.b.op(OpKind::kMatMul, "h", {s.x, s.w});
  s.e = s.b.op(OpKind::kExp, "e", {s.h});
  s.t = s.b.op(OpKind::kTanh, "t", {s.e});
  s.b.output("t", s.t);
  return s;
}

std::string verify_message(const Graph& g, bool topological = true) {
  Status s = verify_graph(g, topological);
  return s.is_ok() ? "ok" : s.message();
}

}  // namespace

TEST_CASE("ir.names: identifiers and the reserved words of the .graph format") {
  for (const char* keyword : {"graph", "weights", "const", "param", "true", "false", "f32", "bf16", "u32", "f8e4m3fn"})
    CHECK_MESSAGE(is_graph_keyword(keyword), keyword);
  for (const char* name : {"x", "_x", "layer.0.weight", "f33", "graphs", "True"}) {
    CHECK_FALSE_MESSAGE(is_graph_keyword(name), name);
    CHECK_MESSAGE(is_valid_value_name(name), name);
  }
  for (const char* name : {"", "0x", ".x", "a-b", "a b", "param", "i64"})
    CHECK_FALSE_MESSAGE(is_valid_value_name(name), name);
}

TEST_CASE("ir.verifier: a well-formed graph passes") {
  Small s = build_small();
  CHECK(verify_message(s.b.graph) == "ok");
  s.b.graph.kernels() = {
      Kernel{"matmul_0", KernelKind::kMatMul, {s.h}, s.h, {s.x, s.w}, {s.h}},
      Kernel{"fused_exp_tanh_1", KernelKind::kElementwise, {s.e, s.t}, kNoNode, {s.h}, {s.t}},
  };
  CHECK(verify_message(s.b.graph) == "ok");
}

TEST_CASE("ir.verifier: operand and order errors") {
  Small s = build_small();
  s.b.graph.node(s.e).inputs = {99};
  CHECK(verify_message(s.b.graph) == "node 'e' (exp): operand 0 refers to node #99, which does not exist");

  s = build_small();
  s.b.graph.node(s.h).erased = true;
  CHECK(verify_message(s.b.graph) == "node 'e' (exp): operand 0 refers to node 'h', which is erased");

  s = build_small();
  std::swap(s.b.graph.node(s.e).inputs, s.b.graph.node(s.t).inputs);  // e = exp(e) is a self-use
  CHECK(verify_message(s.b.graph) == "node 'e' (exp): uses itself as operand 0");

  // Use before definition: only an error when topological order is required.
  s = build_small();
  s.b.graph.node(s.h).inputs = {s.x, s.w};
  s.b.graph.node(s.e).inputs = {s.t};
  s.b.graph.node(s.t).inputs = {s.h};
  CHECK(verify_message(s.b.graph) == "node 'e' (exp): operand 0 't' is defined after its use");
  CHECK(verify_message(s.b.graph, /*topological=*/false) == "ok");
}

TEST_CASE("ir.verifier: names, attributes and operand counts") {
  Small s = build_small();
  s.b.graph.node(s.e).name = "h";
  CHECK(verify_message(s.b.graph) == "node 'h' (exp): the name is already used by node #" + std::to_string(s.h));

  s = build_small();
  s.b.graph.node(s.e).name = "2bad";
  CHECK(verify_message(s.b.graph) == "node '2bad' (exp): the name '2bad' is not a valid identifier");
  s.b.graph.node(s.e).name = "f32";
  CHECK(verify_message(s.b.graph) == "node 'f32' (exp): the name 'f32' is not a valid identifier");

  s = build_small();
  s.b.graph.node(s.e).attrs = AxisAttrs{0};
  CHECK(verify_message(s.b.graph) == "node 'e' (exp): holds the attributes of another op kind");

  s = build_small();
  s.b.graph.node(s.e).inputs = {s.h, s.h};
  CHECK(verify_message(s.b.graph) == "node 'e' (exp): has 2 operands; it takes 1");
}

TEST_CASE("ir.verifier: types must match inference") {
  Small s = build_small();
  s.b.graph.node(s.e).type = type_of("f32[N, 3]");
  CHECK(verify_message(s.b.graph) == "node 'e' (exp): has type f32[N, 3] but its operands give f32[N, 2]");

  s = build_small();
  s.b.graph.node(s.h).inputs = {s.w, s.x};
  CHECK(verify_message(s.b.graph) ==
        "node 'h' (matmul): shape inference fails: matmul inner dimensions differ: f32[4, 2] x f32[N, 4]");

  s = build_small();
  std::get<ConstantAttrs>(s.b.graph.node(s.w).attrs).constant_index = 7;
  CHECK(verify_message(s.b.graph) == "node 'w' (const): refers to constant data #7, which does not exist");

  s = build_small();
  s.b.graph.node(s.w).type = type_of("f32[4, 3]");
  CHECK(verify_message(s.b.graph) == "node 'w' (const): has type f32[4, 3] but its operands give f32[4, 2]");
}

TEST_CASE("ir.verifier: inputs and outputs") {
  Small s = build_small();
  s.b.graph.outputs()[0].declared = type_of("f32[N, 10]");
  CHECK(verify_message(s.b.graph) == "output 't' is declared f32[N, 10] but defined as f32[N, 2]");

  s = build_small();
  s.b.graph.outputs()[0].node = 42;
  CHECK(verify_message(s.b.graph) == "output 't' refers to node #42, which does not exist");

  s = build_small();
  s.b.output("t", s.e);
  CHECK(verify_message(s.b.graph) == "output 't' is listed twice");

  s = build_small();
  s.b.graph.inputs().clear();
  CHECK(verify_message(s.b.graph) == "node 'x' (input): is an input node missing from the graph signature");

  s = build_small();
  s.b.graph.inputs().push_back(s.e);
  CHECK(verify_message(s.b.graph) == "node 'e' (exp): listed as graph input 1 but is not an input node");
}

TEST_CASE("ir.verifier: kernels") {
  auto with_kernels = [](std::vector<Kernel> kernels) {
    Small s = build_small();
    s.b.graph.kernels() = std::move(kernels);
    return verify_message(s.b.graph);
  };
  // Node ids from build_small(): x=0, w=1, h=2, e=3, t=4.
  CHECK(with_kernels({Kernel{"k", KernelKind::kElementwise, {3, 4}, kNoNode, {}, {4}}}) ==
        "kernel 'k' reads 'h' without listing it as an input");
  CHECK(with_kernels({Kernel{"k", KernelKind::kElementwise, {3, 4}, kNoNode, {2}, {}}}) ==
        "kernel 'k' does not write 't', which is used outside the kernel");
  CHECK(with_kernels({Kernel{"k", KernelKind::kElementwise, {4, 3}, kNoNode, {2}, {4}}}) ==
        "kernel 'k' computes 't' before its operand 'e'");
  CHECK(with_kernels({Kernel{"k", KernelKind::kElementwise, {3, 4}, kNoNode, {2, 0}, {4}}}) ==
        "kernel 'k' lists input 'x' that none of its ops reads");
  CHECK(with_kernels({Kernel{"k", KernelKind::kElementwise, {3, 4}, kNoNode, {2}, {4, 0}}}) ==
        "kernel 'k' writes 'x', which it does not compute");
  CHECK(with_kernels({Kernel{"a", KernelKind::kMatMul, {2}, 2, {0, 1}, {2}},
                      Kernel{"b", KernelKind::kElementwise, {2, 3, 4}, kNoNode, {0, 1}, {4}}}) ==
        "kernel 'b' computes node 'h', which kernel 'a' computes too");
  CHECK(with_kernels({Kernel{"k", KernelKind::kElementwise, {0}, kNoNode, {}, {0}}}) ==
        "kernel 'k' computes graph input 'x'");
  CHECK(with_kernels({Kernel{"k", KernelKind::kElementwise, {3, 9}, kNoNode, {2}, {3}}}) ==
        "kernel 'k' computes node #9, which does not exist");
  CHECK(with_kernels({Kernel{"k", KernelKind::kMatMul, {2}, 3, {0, 1}, {2}}}) ==
        "kernel 'k' has an anchor that is not one of its nodes");
  // An extra output is allowed (the kernel materializes a value nobody else reads).
  CHECK(with_kernels({Kernel{"k", KernelKind::kElementwise, {3, 4}, kNoNode, {2}, {3, 4}}}) == "ok");
}
