// Unit tests of the reference interpreter (ir/interpreter.h): graphs built with Graph::add_node
// and typed by ir::infer_node, checking the defined edge cases of the numeric model.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/infer.h"
#include "ir/interpreter.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

// Builds a small graph node by node; every op node is typed by infer_node.
struct GraphMaker {
  Graph graph;
  int counter = 0;

  NodeId input(const std::string& name, DType dtype, Shape shape) {
    Node n;
    n.op = OpKind::kInput;
    n.name = name;
    n.attrs = InputAttrs{int64_t(graph.inputs().size())};
    n.type = TensorType{dtype, std::move(shape)};
    NodeId id = graph.add_node(std::move(n));
    graph.inputs().push_back(id);
    return id;
  }
  NodeId constant(const Tensor& t) {
    Node n;
    n.op = OpKind::kConstant;
    n.name = "c" + std::to_string(counter++);
    n.attrs = ConstantAttrs{graph.add_constant(t), ""};
    n.type = t.type();
    return graph.add_node(std::move(n));
  }
  NodeId op(OpKind kind, std::vector<NodeId> inputs, Attrs attrs) {
    Node n;
    n.op = kind;
    n.name = "v" + std::to_string(counter++);
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    Status s = infer_node(graph, n);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
    return graph.add_node(std::move(n));
  }
  NodeId op(OpKind kind, std::vector<NodeId> inputs) { return op(kind, std::move(inputs), default_attrs(kind)); }
  void output(NodeId id, const std::string& name = "") {
    GraphOutput out;
    out.name = name.empty() ? graph.node(id).name : name;
    out.node = id;
    out.declared = graph.node(id).type;
    graph.outputs().push_back(out);
  }
};

Tensor make(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  Result<Tensor> t = Tensor::zeros(dtype, std::move(shape));
  REQUIRE(t.is_ok());
  REQUIRE(size_t(t->num_elements()) == values.size());
  for (size_t i = 0; i < values.size(); ++i) t->set_element_from_double(int64_t(i), values[i]);
  return std::move(t).value();
}

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_int(i));
  return v;
}

// Runs a graph with one output and returns it.
Tensor run1(const GraphMaker& m, const std::vector<Tensor>& inputs,
            InterpreterPrecision precision = InterpreterPrecision::kExact) {
  Result<std::vector<Tensor>> out = interpret(m.graph, inputs, precision);
  INFO((out.is_ok() ? std::string() : out.status().to_string()));
  REQUIRE(out.is_ok());
  REQUIRE(out->size() == 1);
  return (*out)[0];
}

// y = op(a, b) over two inputs of the given types.
Tensor binary(OpKind kind, const Tensor& a, const Tensor& b) {
  GraphMaker m;
  NodeId x = m.input("a", a.dtype(), shape_of(a.shape()));
  NodeId y = m.input("b", b.dtype(), shape_of(b.shape()));
  m.output(m.op(kind, {x, y}));
  return run1(m, {a, b});
}

Tensor unary(OpKind kind, const Tensor& a, Attrs attrs) {
  GraphMaker m;
  NodeId x = m.input("a", a.dtype(), shape_of(a.shape()));
  m.output(m.op(kind, {x}, std::move(attrs)));
  return run1(m, {a});
}
Tensor unary(OpKind kind, const Tensor& a) { return unary(kind, a, default_attrs(kind)); }

}  // namespace

TEST_CASE("interpreter: integer division truncates toward zero; x / 0 is 0") {
  const double min32 = -2147483648.0;
  Tensor a = make(DType::kI32, {7}, {7, -7, 7, -7, 5, min32, 0});
  Tensor b = make(DType::kI32, {7}, {2, 2, -2, -2, 0, -1, 3});
  Tensor y = binary(OpKind::kDiv, a, b);
  CHECK(y.dtype() == DType::kI32);
  CHECK(ints(y) == std::vector<int64_t>{3, -3, -3, 3, 0, int64_t(min32), 0});
}

TEST_CASE("interpreter: integer arithmetic wraps like NumPy") {
  CHECK(ints(binary(OpKind::kAdd, make(DType::kI8, {2}, {100, -128}), make(DType::kI8, {2}, {100, -1}))) ==
        std::vector<int64_t>{-56, 127});
  CHECK(ints(binary(OpKind::kSub, make(DType::kU8, {2}, {3, 0}), make(DType::kU8, {2}, {5, 1}))) ==
        std::vector<int64_t>{254, 255});
  CHECK(ints(binary(OpKind::kMul, make(DType::kI32, {1}, {65536}), make(DType::kI32, {1}, {65536}))) ==
        std::vector<int64_t>{0});
}

TEST_CASE("interpreter: integer pow, including negative exponents") {
  Tensor base = make(DType::kI64, {6}, {2, 3, 1, -1, -1, 0});
  Tensor exp = make(DType::kI64, {6}, {10, -1, -5, -3, -2, 0});
  CHECK(ints(binary(OpKind::kPow, base, exp)) == std::vector<int64_t>{1024, 0, 1, -1, 1, 1});
}

TEST_CASE("interpreter: round is half to even") {
  Tensor x = make(DType::kF32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 3.5});
  CHECK(doubles(unary(OpKind::kRound, x)) == std::vector<double>{0, 2, 2, -0.0, -2, 2, -3, 4});
}

TEST_CASE("interpreter: sign, relu and clamp keep NaN") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> s = doubles(unary(OpKind::kSign, make(DType::kF32, {4}, {-3, 0, 2, nan})));
  CHECK(s[0] == -1);
  CHECK(s[1] == 0);
  CHECK(s[2] == 1);
  CHECK(std::isnan(s[3]));
  std::vector<double> c =
      doubles(unary(OpKind::kClamp, make(DType::kF32, {4}, {-3, 0.5, 2, nan}), ClampAttrs{0.0, std::nullopt}));
  CHECK(c[0] == 0);
  CHECK(c[1] == 0.5);
  CHECK(c[2] == 2);
  CHECK(std::isnan(c[3]));
  CHECK(ints(unary(OpKind::kClamp, make(DType::kI32, {4}, {-3, 0, 2, 9}), ClampAttrs{-1.5, 2.5})) ==
        std::vector<int64_t>{-1, 0, 2, 2});
}

TEST_CASE("interpreter: gelu exact and tanh forms") {
  Tensor x = make(DType::kF32, {3}, {-1.0, 0.0, 2.0});
  std::vector<double> exact = doubles(unary(OpKind::kGelu, x, GeluAttrs{false}));
  std::vector<double> approx = doubles(unary(OpKind::kGelu, x, GeluAttrs{true}));
  for (int i = 0; i < 3; ++i) {
    const double v = x.element_as_double(i);
    CHECK(exact[i] == doctest::Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))).epsilon(1e-6));
    CHECK(approx[i] == doctest::Approx(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))))
                           .epsilon(1e-6));
  }
  CHECK(exact[0] != approx[0]);
}

TEST_CASE("interpreter: cast truncates, saturates, maps NaN to 0 and bool to 0/1") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = make(DType::kF32, {5}, {2.7, -2.7, nan, 1e10, -1e10});
  CHECK(ints(unary(OpKind::kCast, x, CastAttrs{DType::kI32})) ==
        std::vector<int64_t>{2, -2, 0, 2147483647, -2147483648LL});
  CHECK(ints(unary(OpKind::kCast, x, CastAttrs{DType::kU8})) == std::vector<int64_t>{2, 0, 0, 255, 0});
  CHECK(ints(unary(OpKind::kCast, x, CastAttrs{DType::kBool})) == std::vector<int64_t>{1, 1, 1, 1, 1});
  CHECK(ints(unary(OpKind::kCast, make(DType::kI32, {3}, {300, -1, 0}), CastAttrs{DType::kU8})) ==
        std::vector<int64_t>{44, 255, 0});
  CHECK(doubles(unary(OpKind::kCast, make(DType::kBool, {2}, {1, 0}), CastAttrs{DType::kF16})) ==
        std::vector<double>{1.0, 0.0});
}

TEST_CASE("interpreter: f16 results are rounded to f16 on store") {
  Tensor a = make(DType::kF16, {1}, {1.0});
  Tensor b = make(DType::kF16, {1}, {0.0001});  // below half an f16 ulp at 1.0
  Tensor y = binary(OpKind::kAdd, a, b);
  CHECK(y.dtype() == DType::kF16);
  CHECK(y.element_as_double(0) == 1.0);
}

TEST_CASE("interpreter: broadcasting over rows and columns") {
  Tensor a = make(DType::kF32, {3, 1}, {1, 2, 3});
  Tensor b = make(DType::kF32, {4}, {10, 20, 30, 40});
  Tensor y = binary(OpKind::kAdd, a, b);
  CHECK(y.shape() == std::vector<int64_t>{3, 4});
  CHECK(doubles(y) == std::vector<double>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});
}

TEST_CASE("interpreter: argmax takes the first of tied maxima") {
  Tensor x = make(DType::kF32, {2, 3}, {1, 3, 3, 5, 5, 1});
  Tensor y = unary(OpKind::kArgMax, x, ArgMaxAttrs{1, true});
  CHECK(y.dtype() == DType::kI64);
  CHECK(y.shape() == std::vector<int64_t>{2, 1});
  CHECK(ints(y) == std::vector<int64_t>{1, 0});
  CHECK(ints(unary(OpKind::kArgMax, x, ArgMaxAttrs{0, false})) == std::vector<int64_t>{1, 1, 0});
}

TEST_CASE("interpreter: reductions with negative axes and keepdims") {
  Tensor x = make(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ReduceAttrs sum;
  sum.axes = {-1};
  sum.keepdims = true;
  Tensor y = unary(OpKind::kReduceSum, x, sum);
  CHECK(y.shape() == std::vector<int64_t>{2, 1});
  CHECK(doubles(y) == std::vector<double>{6, 15});
  CHECK(doubles(unary(OpKind::kReduceMean, x, ReduceAttrs{})) == std::vector<double>{3.5});
  ReduceAttrs max0;
  max0.axes = {0};
  CHECK(ints(unary(OpKind::kReduceMax, make(DType::kI32, {2, 2}, {-5, 7, 3, -9}), max0)) ==
        std::vector<int64_t>{3, 7});
  CHECK(ints(unary(OpKind::kReduceProd, make(DType::kI32, {3}, {-2, 3, 4}), ReduceAttrs{})) ==
        std::vector<int64_t>{-24});
}

TEST_CASE("interpreter: softmax is stable for large inputs") {
  Tensor x = make(DType::kF32, {1, 3}, {1000, 1000, 1000});
  std::vector<double> y = doubles(unary(OpKind::kSoftmax, x, AxisAttrs{-1}));
  for (double v : y) CHECK(v == doctest::Approx(1.0 / 3));
  std::vector<double> ly = doubles(unary(OpKind::kLogSoftmax, x, AxisAttrs{-1}));
  for (double v : ly) CHECK(v == doctest::Approx(-std::log(3.0)));
}

TEST_CASE("interpreter: layer_norm over trailing axes with population variance") {
  GraphMaker m;
  NodeId x = m.input("x", DType::kF32, shape_of({2, 2}));
  NodeId scale = m.constant(make(DType::kF32, {2}, {1, 2}));
  NodeId bias = m.constant(make(DType::kF32, {2}, {0, 1}));
  m.output(m.op(OpKind::kLayerNorm, {x, scale, bias}, LayerNormAttrs{-1, 0.0}));
  std::vector<double> y = doubles(run1(m, {make(DType::kF32, {2, 2}, {1, 3, 10, 10})}));
  CHECK(y[0] == doctest::Approx(-1.0));
  CHECK(y[1] == doctest::Approx(3.0));
  // A constant row has zero variance; with epsilon 0 that is 0/0.
  CHECK(std::isnan(y[2]));
}

TEST_CASE("interpreter: gather wraps negative indices once and clamps out-of-range ones") {
  Tensor x = make(DType::kF32, {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Tensor idx = make(DType::kI32, {2}, {-1, 0});
  Tensor y = binary(OpKind::kGather, x, idx);
  CHECK(y.shape() == std::vector<int64_t>{2, 2});
  CHECK(doubles(y) == std::vector<double>{30, 31, 0, 1});

  GraphMaker m;
  NodeId xi = m.input("x", DType::kF32, shape_of({4, 2}));
  NodeId ii = m.input("i", DType::kI64, shape_of({1}));
  m.output(m.op(OpKind::kGather, {xi, ii}, AxisAttrs{0}));
  // As on every device (docs/graph-format.md): past the end clamps to the last row, before the
  // start (after one wrap) to the first, in 64 bits.
  for (auto [index, row] : std::vector<std::pair<double, double>>{{4, 30}, {1e12, 30}, {-5, 0}, {-1e12, 0}}) {
    Result<std::vector<Tensor>> out = interpret(m.graph, std::vector<Tensor>{x, make(DType::kI64, {1}, {index})});
    REQUIRE(out.is_ok());
    CHECK(doubles((*out)[0]) == std::vector<double>{row, row + 1});
  }
  // An empty axis has nothing to clamp to: zeros.
  GraphMaker e;
  NodeId ei = e.input("x", DType::kF32, shape_of({0, 2}));
  NodeId eii = e.input("i", DType::kI64, shape_of({2}));
  e.output(e.op(OpKind::kGather, {ei, eii}, AxisAttrs{0}));
  Result<std::vector<Tensor>> empty =
      interpret(e.graph, std::vector<Tensor>{make(DType::kF32, {0, 2}, {}), make(DType::kI64, {2}, {0, 3})});
  REQUIRE(empty.is_ok());
  CHECK(doubles((*empty)[0]) == std::vector<double>{0, 0, 0, 0});
}

TEST_CASE("interpreter: scatter applies updates in order, wraps negative indices once and drops the rest") {
  // data [3, 2]; four updates along axis 0 in column 0 and one in column 1 ([2, 2] updates; the
  // second row of column 1 is the update at (1, 1)).
  auto scatter = [](ScatterReduction reduction, std::vector<double> index_values, DType dtype = DType::kF32) {
    GraphMaker m;
    NodeId d = m.input("d", dtype, shape_of({3, 2}));
    NodeId i = m.input("i", DType::kI64, shape_of({2, 2}));
    NodeId u = m.input("u", dtype, shape_of({2, 2}));
    m.output(m.op(OpKind::kScatter, {d, i, u}, ScatterAttrs{0, reduction}));
    return ints(run1(m, {make(dtype, {3, 2}, {1, 2, 3, 4, 5, 6}), make(DType::kI64, {2, 2}, index_values),
                         make(dtype, {2, 2}, {10, 20, 30, 40})}));
  };
  // Rows: update (0, 0) -> row -1 = 2, (0, 1) -> row 0, (1, 0) -> row 2 again, (1, 1) -> row 0.
  CHECK(scatter(ScatterReduction::kNone, {-1, 0, 2, 0}) == std::vector<int64_t>{1, 40, 3, 4, 30, 6});
  CHECK(scatter(ScatterReduction::kAdd, {-1, 0, 2, 0}) == std::vector<int64_t>{1, 62, 3, 4, 45, 6});
  CHECK(scatter(ScatterReduction::kMul, {-1, 0, 2, 0}, DType::kI32) ==
        std::vector<int64_t>{1, 1600, 3, 4, 1500, 6});
  CHECK(scatter(ScatterReduction::kMax, {-1, 0, 2, 0}) == std::vector<int64_t>{1, 40, 3, 4, 30, 6});
  CHECK(scatter(ScatterReduction::kMin, {-1, 0, 2, 0}, DType::kI64) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  // Out of range after one wrap (3, -4) or far out (1e12): dropped, as on every device.
  CHECK(scatter(ScatterReduction::kNone, {3, -4, 1e12, -1e12}) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(scatter(ScatterReduction::kAdd, {3, 1, -3, -4}, DType::kU8) == std::vector<int64_t>{31, 2, 3, 24, 5, 6});

  // Updates smaller than the data off the axis leave the rest alone; along the axis they may be
  // longer than the data (more updates than elements of a line).
  GraphMaker m;
  NodeId d = m.input("d", DType::kF32, shape_of({2, 3}));
  NodeId i = m.input("i", DType::kI32, shape_of({1, 5}));
  NodeId u = m.input("u", DType::kF32, shape_of({1, 5}));
  m.output(m.op(OpKind::kScatter, {d, i, u}, ScatterAttrs{-1, ScatterReduction::kAdd}));
  CHECK(doubles(run1(m, {make(DType::kF32, {2, 3}, {0, 0, 0, 0, 0, 0}), make(DType::kI32, {1, 5}, {0, 2, 0, -1, 7}),
                         make(DType::kF32, {1, 5}, {1, 2, 4, 8, 16})})) == std::vector<double>{5, 0, 10, 0, 0, 0});
  // max and min propagate NaN, as maximum and minimum do.
  GraphMaker n;
  NodeId nd = n.input("d", DType::kF32, shape_of({2}));
  NodeId ni = n.input("i", DType::kI64, shape_of({2}));
  NodeId nu = n.input("u", DType::kF32, shape_of({2}));
  n.output(n.op(OpKind::kScatter, {nd, ni, nu}, ScatterAttrs{0, ScatterReduction::kMax}));
  std::vector<double> y = doubles(run1(n, {make(DType::kF32, {2}, {std::nan(""), 1}), make(DType::kI64, {2}, {0, 1}),
                                           make(DType::kF32, {2}, {5, std::nan("")})}));
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(y[1]));
}

TEST_CASE("interpreter: slice with negative steps clamps like Python") {
  Tensor x = make(DType::kI32, {6}, {0, 1, 2, 3, 4, 5});
  SliceAttrs reverse;
  reverse.starts = {-1};
  reverse.ends = {std::numeric_limits<int64_t>::min()};
  reverse.axes = {0};
  reverse.steps = {-2};
  CHECK(ints(unary(OpKind::kSlice, x, reverse)) == std::vector<int64_t>{5, 3, 1});
  SliceAttrs clamp;
  clamp.starts = {-100};
  clamp.ends = {100};
  CHECK(ints(unary(OpKind::kSlice, x, clamp)) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("interpreter: matmul promotes 1-D operands and broadcasts batches") {
  Tensor v = make(DType::kF32, {2}, {1, 2});
  Tensor m = make(DType::kF32, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 1});
  Tensor y = binary(OpKind::kMatMul, v, m);
  CHECK(y.shape() == std::vector<int64_t>{2, 3});
  CHECK(doubles(y) == std::vector<double>{9, 12, 15, 2, 1, 2});
  Tensor w = make(DType::kF32, {3}, {1, 0, -1});
  Tensor z = binary(OpKind::kMatMul, m, w);
  CHECK(z.shape() == std::vector<int64_t>{2, 2});
  CHECK(doubles(z) == std::vector<double>{-2, -2, 0, 0});
}

TEST_CASE("interpreter: a 512x512 matmul matches a naive sum") {
  const int64_t n = 512;
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> av(n * n), bv(n * n);
  for (auto& e : av) e = float(dist(rng));
  for (auto& e : bv) e = float(dist(rng));
  Tensor a = make(DType::kF32, {n, n}, av), b = make(DType::kF32, {n, n}, bv);
  Tensor c = binary(OpKind::kMatMul, a, b);
  for (int64_t i : {int64_t(0), int64_t(17), n - 1}) {
    for (int64_t j : {int64_t(0), int64_t(300), n - 1}) {
      double expect = 0;
      for (int64_t k = 0; k < n; ++k) expect += av[i * n + k] * bv[k * n + j];
      CHECK(c.element_as_double(i * n + j) == doctest::Approx(float(expect)).epsilon(1e-6));
    }
  }
}

TEST_CASE("interpreter: conv2d with padding and bias") {
  GraphMaker m;
  NodeId x = m.input("x", DType::kF32, shape_of({1, 1, 3, 3}));
  NodeId w = m.constant(make(DType::kF32, {1, 1, 2, 2}, {1, 1, 1, 1}));
  NodeId b = m.constant(make(DType::kF32, {1}, {0.5}));
  Conv2dAttrs attrs;
  attrs.pads = {1, 1, 0, 0};
  m.output(m.op(OpKind::kConv2d, {x, w, b}, attrs));
  Tensor y = run1(m, {make(DType::kF32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})});
  CHECK(y.shape() == std::vector<int64_t>{1, 1, 3, 3});
  CHECK(doubles(y) == std::vector<double>{1.5, 3.5, 5.5, 5.5, 12.5, 16.5, 11.5, 24.5, 28.5});
}

TEST_CASE("interpreter: max and average pooling treat padding as documented") {
  Tensor x = make(DType::kF32, {1, 1, 2, 2}, {-1, -2, -3, -4});
  Pool2dAttrs attrs;
  attrs.kernel = {2, 2};
  attrs.strides = {2, 2};
  attrs.pads = {1, 1, 1, 1};
  CHECK(doubles(unary(OpKind::kMaxPool2d, x, attrs)) == std::vector<double>{-1, -2, -3, -4});
  CHECK(doubles(unary(OpKind::kAvgPool2d, x, attrs)) == std::vector<double>{-1, -2, -3, -4});
  attrs.count_include_pad = true;
  CHECK(doubles(unary(OpKind::kAvgPool2d, x, attrs)) == std::vector<double>{-0.25, -0.5, -0.75, -1});
}

TEST_CASE("interpreter: bind_inputs binds symbols and reports mismatches") {
  GraphMaker m;
  NodeId x = m.input("x", DType::kF32, {Dim::symbol("N"), Dim::of(784)});
  NodeId y = m.input("y", DType::kF32, {Dim::symbol("N"), Dim::of(784)});
  m.output(m.op(OpKind::kAdd, {x, y}));

  Tensor good2 = make(DType::kF32, {2, 784}, std::vector<double>(2 * 784, 1.0));
  Result<SymbolBindings> ok = bind_inputs(m.graph, std::vector<Tensor>{good2, good2});
  REQUIRE(ok.is_ok());
  CHECK(ok->at("N") == 2);

  Tensor bad = make(DType::kF32, {2, 785}, std::vector<double>(2 * 785, 0.0));
  Result<SymbolBindings> shape_err = bind_inputs(m.graph, std::vector<Tensor>{bad, good2});
  REQUIRE_FALSE(shape_err.is_ok());
  CHECK(shape_err.status().code() == ErrorCode::kInvalidArgument);
  CHECK(shape_err.status().message() == "input 'x': expected f32[N, 784], got f32[2, 785]");

  Tensor good3 = make(DType::kF32, {3, 784}, std::vector<double>(3 * 784, 0.0));
  Result<SymbolBindings> sym_err = bind_inputs(m.graph, std::vector<Tensor>{good2, good3});
  REQUIRE_FALSE(sym_err.is_ok());
  CHECK(sym_err.status().message() == "symbol N is 2 from input 'x' but 3 from input 'y'");

  Tensor wrong_dtype = make(DType::kF16, {2, 784}, std::vector<double>(2 * 784, 0.0));
  Result<SymbolBindings> dtype_err = bind_inputs(m.graph, std::vector<Tensor>{good2, wrong_dtype});
  REQUIRE_FALSE(dtype_err.is_ok());
  CHECK(dtype_err.status().message() == "input 'y': expected f32[N, 784], got f16[2, 784]");

  CHECK_FALSE(bind_inputs(m.graph, std::vector<Tensor>{good2}).is_ok());

  Result<std::vector<Tensor>> run = interpret(m.graph, std::vector<Tensor>{good2, good2});
  REQUIRE(run.is_ok());
  CHECK((*run)[0].shape() == std::vector<int64_t>{2, 784});
  CHECK((*run)[0].element_as_double(1000) == 2.0);
}

TEST_CASE("interpreter: outputs come back in signature order and skip erased nodes") {
  GraphMaker m;
  NodeId x = m.input("x", DType::kI64, shape_of({3}));
  NodeId doubled = m.op(OpKind::kAdd, {x, x});
  NodeId dead = m.op(OpKind::kMul, {x, x});
  NodeId neg = m.op(OpKind::kNeg, {doubled});
  m.graph.node(dead).erased = true;
  m.output(neg, "second");
  m.output(doubled, "first");
  Result<std::vector<Tensor>> out = interpret(m.graph, std::vector<Tensor>{make(DType::kI64, {3}, {1, 2, 3})});
  REQUIRE(out.is_ok());
  REQUIRE(out->size() == 2);
  CHECK(ints((*out)[0]) == std::vector<int64_t>{-2, -4, -6});
  CHECK(ints((*out)[1]) == std::vector<int64_t>{2, 4, 6});
}

TEST_CASE("interpreter: where selects bit-exactly with broadcasting") {
  GraphMaker m;
  NodeId c = m.input("c", DType::kBool, shape_of({2, 1}));
  NodeId a = m.input("a", DType::kI64, shape_of({2, 2}));
  NodeId b = m.input("b", DType::kI64, shape_of({}));
  m.output(m.op(OpKind::kWhere, {c, a, b}));
  Tensor av = make(DType::kI64, {2, 2}, {1, 2, 3, 4});
  av.mutable_data_as<int64_t>()[0] = 9007199254740993LL;  // 2^53 + 1: not exact in double
  Tensor y = run1(m, {make(DType::kBool, {2, 1}, {1, 0}), av, make(DType::kI64, {}, {-7})});
  CHECK(ints(y) == std::vector<int64_t>{9007199254740993LL, 2, -7, -7});
}

TEST_CASE("interpreter: evaluate_node folds a constant expression") {
  GraphMaker m;
  NodeId a = m.constant(make(DType::kF32, {2}, {1, 4}));
  NodeId s = m.op(OpKind::kSqrt, {a});
  const Tensor& input = m.graph.constant(0);
  const Tensor* operands[] = {&input};
  Result<Tensor> y = evaluate_node(m.graph, m.graph.node(s), operands, SymbolBindings{});
  REQUIRE(y.is_ok());
  CHECK(doubles(*y) == std::vector<double>{1, 2});
}

// ---- InterpreterPrecision: exact (double) vs device-faithful (f32 intermediates) ------------

namespace {

// The one output of `m` in each mode.
struct BothModes {
  std::vector<double> exact, faithful;
};
BothModes run_both(const GraphMaker& m, const std::vector<Tensor>& inputs) {
  return {doubles(run1(m, inputs, InterpreterPrecision::kExact)),
          doubles(run1(m, inputs, InterpreterPrecision::kDeviceFaithful))};
}

// y = op(x) with attributes, in both modes.
BothModes unary_both(OpKind kind, const Tensor& x, Attrs attrs) {
  GraphMaker m;
  m.output(m.op(kind, {m.input("x", x.dtype(), shape_of(x.shape()))}, std::move(attrs)));
  return run_both(m, {x});
}

BothModes binary_both(OpKind kind, const Tensor& a, const Tensor& b) {
  GraphMaker m;
  NodeId x = m.input("a", a.dtype(), shape_of(a.shape()));
  NodeId y = m.input("b", b.dtype(), shape_of(b.shape()));
  m.output(m.op(kind, {x, y}));
  return run_both(m, {a, b});
}

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("interpreter precision: names round-trip; anything else is not a mode") {
  for (InterpreterPrecision p : {InterpreterPrecision::kExact, InterpreterPrecision::kDeviceFaithful})
    CHECK(parse_interpreter_precision(interpreter_precision_name(p)) == p);
  CHECK(interpreter_precision_name(InterpreterPrecision::kDeviceFaithful) == "faithful");
  CHECK_FALSE(parse_interpreter_precision("double").has_value());
}

TEST_CASE("interpreter precision: layer_norm's sum of squares overflows f32 only in the faithful mode") {
  // |x| ~ 1e20: (x - mean)^2 ~ 1e40 > FLT_MAX. In double the row normalizes to about +-1.35 and
  // +-0.41; in f32 the variance is inf, 1 / sqrt(inf) is 0 and every element is its bias, as a
  // device computes it.
  GraphMaker m;
  NodeId x = m.input("x", DType::kF32, shape_of({1, 4}));
  NodeId scale = m.constant(make(DType::kF32, {4}, {1, 1, 1, 1}));
  NodeId bias = m.constant(make(DType::kF32, {4}, {0.5, 0.5, 0.5, 0.5}));
  m.output(m.op(OpKind::kLayerNorm, {x, scale, bias}, LayerNormAttrs{-1, 1e-5}));
  BothModes y = run_both(m, {make(DType::kF32, {1, 4}, {1e20, -1e20, 3e19, -3e19})});
  const double std_dev = std::sqrt((2 * 1e40 + 2 * 9e38) / 4);
  CHECK(y.exact[0] == doctest::Approx(1e20 / std_dev + 0.5));
  CHECK(y.exact[3] == doctest::Approx(-3e19 / std_dev + 0.5));
  CHECK(y.faithful == std::vector<double>{0.5, 0.5, 0.5, 0.5});
}

TEST_CASE("interpreter precision: sums and dot products overflow f32 mid-way only in the faithful mode") {
  SUBCASE("reduce_mean: the sum exceeds FLT_MAX, the mean does not") {
    ReduceAttrs all{.axes = {}, .all_axes = true, .keepdims = false};
    BothModes y = unary_both(OpKind::kReduceMean, make(DType::kF32, {2}, {3e38, 3e38}), all);
    CHECK(y.exact[0] == doctest::Approx(3e38));
    CHECK(y.faithful[0] == kInf);
  }
  SUBCASE("matmul: the partial sums exceed FLT_MAX, the result is 0") {
    Tensor a = make(DType::kF32, {1, 4}, {2e38, 2e38, -2e38, -2e38});
    Tensor b = make(DType::kF32, {4, 1}, {1, 1, 1, 1});
    BothModes y = binary_both(OpKind::kMatMul, a, b);
    CHECK(y.exact[0] == 0.0);
    CHECK(y.faithful[0] == kInf);  // inf + -2e38 stays inf
  }
  SUBCASE("conv2d: the same dot product over the window") {
    GraphMaker m;
    NodeId x = m.input("x", DType::kF32, shape_of({1, 1, 2, 2}));
    NodeId w = m.constant(make(DType::kF32, {1, 1, 2, 2}, {1, 1, 1, 1}));
    m.output(m.op(OpKind::kConv2d, {x, w}, Conv2dAttrs{}));
    BothModes y = run_both(m, {make(DType::kF32, {1, 1, 2, 2}, {2e38, 2e38, -2e38, -2e38})});
    CHECK(y.exact[0] == 0.0);
    CHECK(y.faithful[0] == kInf);
  }
  SUBCASE("avg_pool2d and global_avg_pool2d: the window sum exceeds FLT_MAX") {
    Tensor x = make(DType::kF32, {1, 1, 1, 2}, {3e38, 3e38});
    Pool2dAttrs window;
    window.kernel = {1, 2};
    window.strides = {1, 2};
    BothModes avg = unary_both(OpKind::kAvgPool2d, x, window);
    CHECK(avg.exact[0] == doctest::Approx(3e38));
    CHECK(avg.faithful[0] == kInf);
    BothModes global = unary_both(OpKind::kGlobalAvgPool2d, x, NoAttrs{});
    CHECK(global.exact[0] == doctest::Approx(3e38));
    CHECK(global.faithful[0] == kInf);
  }
}

TEST_CASE("interpreter precision: an attention score past FLT_MAX makes the faithful row NaN") {
  // q . k0 * scale ~ 1.4e40: in double key 0 takes all the weight (the output is v's row 0); in
  // f32 the score is inf, exp(inf - inf) is NaN, and so is the row, as the kernel's.
  GraphMaker m;
  NodeId q = m.input("q", DType::kF32, shape_of({1, 1, 2}));
  NodeId k = m.input("k", DType::kF32, shape_of({1, 2, 2}));
  NodeId v = m.input("v", DType::kF32, shape_of({1, 2, 2}));
  m.output(m.op(OpKind::kAttention, {q, k, v}, AttentionAttrs{}));
  BothModes y = run_both(m, {make(DType::kF32, {1, 1, 2}, {1e20, 1e20}),
                             make(DType::kF32, {1, 2, 2}, {1e20, 1e20, 1, 1}),
                             make(DType::kF32, {1, 2, 2}, {3, 4, 5, 6})});
  CHECK(y.exact == std::vector<double>{3, 4});
  CHECK(std::isnan(y.faithful[0]));
  CHECK(std::isnan(y.faithful[1]));
}

TEST_CASE("interpreter precision: f16 and bf16 ops accumulate in f32 in the faithful mode") {
  ReduceAttrs all{.axes = {}, .all_axes = true, .keepdims = false};
  SUBCASE("f16: 2^-10 is lost next to 65504 in an f32 sum, kept in double") {
    // The f32 ulp at 65504 is 2^-8, so 65504 + 2^-10 rounds back to 65504.
    const double tiny = std::ldexp(1.0, -10);
    Tensor x = make(DType::kF16, {3}, {65504, tiny, -65504});
    BothModes sum = unary_both(OpKind::kReduceSum, x, all);
    CHECK(sum.exact[0] == tiny);
    CHECK(sum.faithful[0] == 0.0);
    BothModes dot = binary_both(OpKind::kMatMul, x, make(DType::kF16, {3}, {1, 1, 1}));
    CHECK(dot.exact[0] == tiny);
    CHECK(dot.faithful[0] == 0.0);
  }
  SUBCASE("bf16: f32's range is bf16's, so a bf16 mean's sum overflows like an f32 one") {
    const double big = std::ldexp(1.0, 127);
    BothModes mean = unary_both(OpKind::kReduceMean, make(DType::kBF16, {2}, {big, big}), all);
    CHECK(mean.exact[0] == big);
    CHECK(mean.faithful[0] == kInf);
  }
}

TEST_CASE("interpreter precision: integer ops and ordinary floats agree across modes") {
  ReduceAttrs all{.axes = {}, .all_axes = true, .keepdims = false};
  // Integer sums wrap in int64 in both modes (no float accumulation).
  Tensor big = make(DType::kI32, {3}, {2147483647, 1, 5});
  BothModes sum = unary_both(OpKind::kReduceSum, big, all);
  CHECK(sum.exact == sum.faithful);
  CHECK(sum.exact[0] == double(int32_t(uint32_t(2147483647u) + 6u)));
  // Values far from f32's limits: f32 rounding only.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-2, 2);
  std::vector<double> av(8 * 16), bv(16 * 8);
  for (auto& e : av) e = dist(rng);
  for (auto& e : bv) e = dist(rng);
  BothModes mm = binary_both(OpKind::kMatMul, make(DType::kF32, {8, 16}, av), make(DType::kF32, {16, 8}, bv));
  for (size_t i = 0; i < mm.exact.size(); ++i) CHECK(mm.faithful[i] == doctest::Approx(mm.exact[i]).epsilon(1e-5));
  BothModes sm = unary_both(OpKind::kSoftmax, make(DType::kF32, {8, 16}, av), AxisAttrs{-1});
  for (size_t i = 0; i < sm.exact.size(); ++i) CHECK(sm.faithful[i] == doctest::Approx(sm.exact[i]).epsilon(1e-5));
}
