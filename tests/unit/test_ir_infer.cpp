// Unit tests for ir/infer.h: the result type of every op family (with symbolic dims), attribute
// normalization, and the user-facing error messages.
#include <doctest/doctest.h>

#include <limits>

#include "ir/infer.h"
#include "ir_test_graphs.h"

using namespace kiln::ir;
using namespace kiln::ir::testing;
using kiln::Status;

namespace {
std::string T(OpKind kind, const std::vector<std::string>& operands) {
  return infer_op(kind, operands).type_string();
}
std::string T(OpKind kind, const std::vector<std::string>& operands, Attrs attrs) {
  return infer_op(kind, operands, std::move(attrs)).type_string();
}
const int64_t kMax = std::numeric_limits<int64_t>::max();
}  // namespace

TEST_CASE("ir.infer: unary ops keep the type and check dtypes") {
  CHECK(T(OpKind::kExp, {"f32[N, 10]"}) == "f32[N, 10]");
  CHECK(T(OpKind::kTanh, {"f16[3]"}) == "f16[3]");
  CHECK(T(OpKind::kGelu, {"bf16[]"}, GeluAttrs{true}) == "bf16[]");
  CHECK(T(OpKind::kNeg, {"i32[4]"}) == "i32[4]");
  CHECK(T(OpKind::kAbs, {"i64[4]"}) == "i64[4]");
  CHECK(T(OpKind::kSign, {"i8[2]"}) == "i8[2]");
  CHECK(T(OpKind::kRelu, {"i32[2]"}) == "i32[2]");
  CHECK(T(OpKind::kNot, {"bool[2, 2]"}) == "bool[2, 2]");
  CHECK(T(OpKind::kExp, {"i32[4]"}) == "error: exp needs a floating-point operand, got i32[4] (use cast)");
  CHECK(T(OpKind::kNeg, {"u8[4]"}) ==
        "error: neg needs a floating-point or signed integer operand, got u8[4]");
  CHECK(T(OpKind::kNot, {"f32[2]"}) == "error: not needs a bool operand, got f32[2]");
  CHECK(T(OpKind::kSqrt, {"bool[2]"}).rfind("error:", 0) == 0);
}

TEST_CASE("ir.infer: binary ops broadcast and require one dtype") {
  CHECK(T(OpKind::kAdd, {"f32[N, 256]", "f32[256]"}) == "f32[N, 256]");
  CHECK(T(OpKind::kMul, {"f32[3, 1]", "f32[1, 4]"}) == "f32[3, 4]");
  CHECK(T(OpKind::kSub, {"f32[]", "f32[2, 2]"}) == "f32[2, 2]");
  CHECK(T(OpKind::kDiv, {"i32[5]", "i32[5]"}) == "i32[5]");
  CHECK(T(OpKind::kPow, {"i64[5]", "i64[]"}) == "i64[5]");
  CHECK(T(OpKind::kMaximum, {"u8[B, 1]", "u8[1, T]"}) == "u8[B, T]");
  CHECK(T(OpKind::kAdd, {"f32[3, 4]", "f32[5]"}) == "error: cannot broadcast f32[3, 4] with f32[5]");
  CHECK(T(OpKind::kAdd, {"f32[N]", "f32[M]"}) == "error: cannot broadcast f32[N] with f32[M]");
  CHECK(T(OpKind::kAdd, {"f32[N]", "f32[4]"}) == "error: cannot broadcast f32[N] with f32[4]");
  CHECK(T(OpKind::kAdd, {"f32[3]", "f16[3]"}) ==
        "error: add operands must have the same dtype, got f32[3] and f16[3] (use cast)");
  CHECK(T(OpKind::kAdd, {"bool[3]", "bool[3]"}) == "error: add needs numeric operands, got bool[3] and bool[3]");
}

TEST_CASE("ir.infer: compare and logic ops give bool") {
  CHECK(T(OpKind::kLess, {"f32[N, 3]", "f32[]"}) == "bool[N, 3]");
  CHECK(T(OpKind::kEqual, {"i64[2]", "i64[2]"}) == "bool[2]");
  CHECK(T(OpKind::kEqual, {"bool[2]", "bool[1]"}) == "bool[2]");
  CHECK(T(OpKind::kGreater, {"bool[2]", "bool[2]"}).rfind("error: greater needs numeric", 0) == 0);
  CHECK(T(OpKind::kAnd, {"bool[2, 1]", "bool[3]"}) == "bool[2, 3]");
  CHECK(T(OpKind::kXor, {"bool[2]", "i32[2]"}) == "error: xor needs bool operands, got bool[2] and i32[2]");
}

TEST_CASE("ir.infer: where, cast and clamp") {
  CHECK(T(OpKind::kWhere, {"bool[N, 1]", "f32[1, 4]", "f32[]"}) == "f32[N, 4]");
  CHECK(T(OpKind::kWhere, {"f32[2]", "f32[2]", "f32[2]"}) == "error: where needs a bool condition, got f32[2]");
  CHECK(T(OpKind::kWhere, {"bool[2]", "f32[2]", "i32[2]"}) ==
        "error: where branches must have the same dtype, got f32[2] and i32[2] (use cast)");
  CHECK(T(OpKind::kWhere, {"bool[3]", "f32[2]", "f32[2]"}) == "error: cannot broadcast bool[3] with f32[2]");
  CHECK(T(OpKind::kCast, {"f32[N, 3]"}, CastAttrs{DType::kF16}) == "f16[N, 3]");
  CHECK(T(OpKind::kCast, {"bool[2]"}, CastAttrs{DType::kI64}) == "i64[2]");
  CHECK(T(OpKind::kClamp, {"f32[4]"}, ClampAttrs{0.0, 6.0}) == "f32[4]");
  CHECK(T(OpKind::kClamp, {"i32[4]"}, ClampAttrs{std::nullopt, 6.0}) == "i32[4]");
  CHECK(T(OpKind::kClamp, {"bool[4]"}, ClampAttrs{0.0, 1.0}) == "error: clamp needs a numeric operand, got bool[4]");
}

TEST_CASE("ir.infer: reductions normalize axes") {
  ReduceAttrs attrs;
  attrs.axes = {-1, 0};
  attrs.all_axes = false;
  InferOutcome r = infer_op(OpKind::kReduceSum, {"f32[2, N, 4]"}, attrs);
  REQUIRE(r.status.is_ok());
  CHECK(r.type.to_string() == "f32[N]");
  CHECK(std::get<ReduceAttrs>(r.attrs).axes == std::vector<int64_t>{0, 2});
  CHECK_FALSE(std::get<ReduceAttrs>(r.attrs).all_axes);

  attrs.keepdims = true;
  CHECK(T(OpKind::kReduceMax, {"f32[2, N, 4]"}, attrs) == "f32[1, N, 1]");

  // Omitted axes: every axis, flagged all_axes.
  InferOutcome all = infer_op(OpKind::kReduceMean, {"f32[N, 3]"});
  REQUIRE(all.status.is_ok());
  CHECK(all.type.to_string() == "f32[]");
  CHECK(std::get<ReduceAttrs>(all.attrs).all_axes);
  CHECK(std::get<ReduceAttrs>(all.attrs).axes == std::vector<int64_t>{0, 1});
  // Normalized attributes infer to the same result again (idempotent).
  CHECK(T(OpKind::kReduceMean, {"f32[N, 3]"}, all.attrs) == "f32[]");

  ReduceAttrs bad;
  bad.all_axes = false;
  bad.axes = {2};
  CHECK(T(OpKind::kReduceSum, {"f32[2, 3]"}, bad) == "error: axis 2 is out of range for rank 2");
  bad.axes = {1, -1};
  CHECK(T(OpKind::kReduceSum, {"f32[2, 3]"}, bad) == "error: axis -1 appears more than once in axes=[1, -1]");
  CHECK(T(OpKind::kReduceMean, {"i32[4]"}) == "error: reduce_mean needs a floating-point operand, got i32[4] (use cast)");
  CHECK(T(OpKind::kReduceSum, {"i32[4]"}) == "i32[]");
  CHECK(T(OpKind::kReduceMax, {"f32[0, 3]"}).rfind("error: reduce_max over axis 0", 0) == 0);
}

TEST_CASE("ir.infer: argmax gives i64") {
  CHECK(T(OpKind::kArgMax, {"f32[N, 10]"}, ArgMaxAttrs{-1, false}) == "i64[N]");
  CHECK(T(OpKind::kArgMax, {"f32[N, 10]"}, ArgMaxAttrs{1, true}) == "i64[N, 1]");
  InferOutcome r = infer_op(OpKind::kArgMax, {"i32[3, 4]"}, ArgMaxAttrs{-2, false});
  REQUIRE(r.status.is_ok());
  CHECK(std::get<ArgMaxAttrs>(r.attrs).axis == 0);
  CHECK(T(OpKind::kArgMax, {"f32[3]"}, ArgMaxAttrs{1, false}) == "error: axis 1 is out of range for rank 1");
}

TEST_CASE("ir.infer: softmax and layer_norm") {
  InferOutcome r = infer_op(OpKind::kSoftmax, {"f32[N, 10]"});
  REQUIRE(r.status.is_ok());
  CHECK(r.type.to_string() == "f32[N, 10]");
  CHECK(std::get<AxisAttrs>(r.attrs).axis == 1);
  CHECK(T(OpKind::kLogSoftmax, {"i32[3]"}).rfind("error: log_softmax needs a floating-point", 0) == 0);
  CHECK(T(OpKind::kSoftmax, {"f32[]"}) == "error: axis -1 is out of range for rank 0");

  CHECK(T(OpKind::kLayerNorm, {"f32[N, T, 64]", "f32[64]", "f32[64]"}) == "f32[N, T, 64]");
  CHECK(T(OpKind::kLayerNorm, {"f32[N, T, 64]", "f32[T, 64]", "f32[T, 64]"}, LayerNormAttrs{1, 1e-5}) ==
        "f32[N, T, 64]");
  CHECK(T(OpKind::kLayerNorm, {"f32[N, 64]", "f32[32]", "f32[64]"}) ==
        "error: layer_norm scale must be f32[64] (the dims of f32[N, 64] from axis 1), got f32[32]");
  CHECK(T(OpKind::kLayerNorm, {"f32[N, 64]", "f32[64]", "f16[64]"}).rfind("error: layer_norm bias must be", 0) == 0);
}

TEST_CASE("ir.infer: matmul follows NumPy") {
  CHECK(T(OpKind::kMatMul, {"f32[N, 784]", "f32[784, 256]"}) == "f32[N, 256]");
  CHECK(T(OpKind::kMatMul, {"f32[2, 3]", "f32[3]"}) == "f32[2]");
  CHECK(T(OpKind::kMatMul, {"f32[3]", "f32[3, 5]"}) == "f32[5]");
  CHECK(T(OpKind::kMatMul, {"f32[3]", "f32[3]"}) == "f32[]");
  CHECK(T(OpKind::kMatMul, {"f32[B, 1, 4, 3]", "f32[7, 3, 5]"}) == "f32[B, 7, 4, 5]");
  CHECK(T(OpKind::kMatMul, {"f32[T, K]", "f32[K, M]"}) == "f32[T, M]");
  CHECK(T(OpKind::kMatMul, {"i32[2, 2]", "i32[2, 2]"}) == "i32[2, 2]");
  CHECK(T(OpKind::kMatMul, {"f32[2, 3]", "f32[4, 5]"}) == "error: matmul inner dimensions differ: f32[2, 3] x f32[4, 5]");
  CHECK(T(OpKind::kMatMul, {"f32[2, K]", "f32[J, 5]"}) == "error: matmul inner dimensions differ: f32[2, K] x f32[J, 5]");
  CHECK(T(OpKind::kMatMul, {"f32[2, 3, 4]", "f32[5, 4, 6]"}) ==
        "error: matmul batch dimensions do not broadcast: f32[2, 3, 4] x f32[5, 4, 6]");
  CHECK(T(OpKind::kMatMul, {"f32[]", "f32[3]"}) == "error: matmul needs operands of rank 1 or more, got f32[] x f32[3]");
  CHECK(T(OpKind::kMatMul, {"f32[2, 3]", "f16[3, 2]"}).rfind("error: matmul operands must have the same dtype", 0) == 0);
}

TEST_CASE("ir.infer: reshape with -1 and symbolic dims") {
  auto reshape = [](const std::string& from, Shape to) {
    return T(OpKind::kReshape, {from}, ReshapeAttrs{std::move(to)});
  };
  const Dim m1 = Dim::of(-1);
  const Dim N = Dim::symbol("N");
  CHECK(reshape("f32[6]", {Dim::of(2), Dim::of(3)}) == "f32[2, 3]");
  CHECK(reshape("f32[6]", {m1, Dim::of(3)}) == "f32[2, 3]");
  CHECK(reshape("f32[2, 3]", {}) == "error: reshape cannot turn f32[2, 3] into []");
  CHECK(reshape("f32[1, 1]", {}) == "f32[]");
  CHECK(reshape("f32[N, 784]", {m1, Dim::of(784)}) == "f32[N, 784]");
  CHECK(reshape("f32[N, 28, 28]", {N, m1}) == "f32[N, 784]");
  CHECK(reshape("f32[N, 4, 8]", {N, Dim::of(32)}) == "f32[N, 32]");
  CHECK(reshape("f32[N, 32]", {N, Dim::of(4), m1}) == "f32[N, 4, 8]");
  // A -1 over several symbols is their product (canonical: the constant first, symbols sorted).
  CHECK(reshape("f32[T, N, 64]", {m1, Dim::of(64)}) == "f32[N*T, 64]");
  CHECK(reshape("f32[N, 12, 64]", {m1, Dim::of(32)}) == "f32[24*N, 32]");
  CHECK(reshape("f32[N*T, 64]", {N, m1, Dim::of(16)}) == "f32[N, 4*T, 16]");
  CHECK(reshape("f32[2*N, 8]", {N, Dim::of(16)}) == "f32[N, 16]");
  CHECK(reshape("f32[N, 6]", {m1, Dim::of(4)}) == "error: reshape cannot turn f32[N, 6] into [-1, 4]");
  CHECK(reshape("f32[6]", {Dim::of(4), m1}) == "error: reshape cannot turn f32[6] into [4, -1]");
  CHECK(reshape("f32[6]", {Dim::of(4), Dim::of(2)}) == "error: reshape cannot turn f32[6] into [4, 2]");
  CHECK(reshape("f32[N, 3]", {N, Dim::of(4)}) == "error: reshape cannot turn f32[N, 3] into [N, 4]");
  CHECK(reshape("f32[N, 3]", {Dim::symbol("M"), Dim::of(3)}) == "error: reshape cannot turn f32[N, 3] into [M, 3]");
  CHECK(reshape("f32[6]", {m1, m1}) == "error: reshape allows at most one -1 in shape=[-1, -1]");
  CHECK(reshape("f32[0]", {Dim::of(0), m1}) == "error: reshape cannot turn f32[0] into [0, -1]");
  CHECK(reshape("f32[6]", {Dim::of(-2), Dim::of(-3)}) == "error: reshape shape=[-2, -3] has a negative size -2");
}

TEST_CASE("ir.infer: transpose and broadcast_to") {
  InferOutcome t = infer_op(OpKind::kTranspose, {"f32[N, 3, 4]"}, TransposeAttrs{{0, -1, 1}});
  REQUIRE(t.status.is_ok());
  CHECK(t.type.to_string() == "f32[N, 4, 3]");
  CHECK(std::get<TransposeAttrs>(t.attrs).perm == std::vector<int64_t>{0, 2, 1});
  CHECK(T(OpKind::kTranspose, {"f32[2, 3, 4]"}) == "f32[4, 3, 2]");  // default: reversed
  CHECK(T(OpKind::kTranspose, {"f32[2, 3]"}, TransposeAttrs{{0, 0}}) ==
        "error: transpose perm=[0, 0] is not a permutation of the axes of f32[2, 3]");
  CHECK(T(OpKind::kTranspose, {"f32[2, 3]"}, TransposeAttrs{{0}}).rfind("error: transpose perm=[0]", 0) == 0);

  CHECK(T(OpKind::kBroadcastTo, {"f32[3, 1]"}, BroadcastToAttrs{{Dim::symbol("N"), Dim::of(3), Dim::of(4)}}) ==
        "f32[N, 3, 4]");
  CHECK(T(OpKind::kBroadcastTo, {"f32[3]"}, BroadcastToAttrs{{Dim::of(4)}}) == "error: cannot broadcast f32[3] to [4]");
  CHECK(T(OpKind::kBroadcastTo, {"f32[2, 3]"}, BroadcastToAttrs{{Dim::of(3)}}) == "error: cannot broadcast f32[2, 3] to [3]");
}

TEST_CASE("ir.infer: slice clamps like Python") {
  auto slice = [](const std::string& from, SliceAttrs a) { return T(OpKind::kSlice, {from}, std::move(a)); };
  CHECK(slice("f32[10, 4]", {{2}, {5}, {}, {}}) == "f32[3, 4]");
  CHECK(slice("f32[10, 4]", {{-3}, {kMax}, {}, {}}) == "f32[3, 4]");
  CHECK(slice("f32[10, 4]", {{0}, {100}, {1}, {}}) == "f32[10, 4]");
  CHECK(slice("f32[10, 4]", {{1}, {-1}, {-1}, {2}}) == "f32[10, 1]");
  CHECK(slice("f32[10]", {{0}, {10}, {}, {3}}) == "f32[4]");
  CHECK(slice("f32[10]", {{-1}, {std::numeric_limits<int64_t>::min()}, {}, {-1}}) == "f32[10]");
  CHECK(slice("f32[10]", {{8}, {2}, {}, {-2}}) == "f32[3]");
  CHECK(slice("f32[10]", {{5}, {2}, {}, {}}) == "f32[0]");
  CHECK(slice("f32[10]", {{20}, {30}, {}, {}}) == "f32[0]");
  // Symbolic axes: only full-range slices keep the symbol.
  CHECK(slice("f32[N, 8]", {{0, 2}, {kMax, 6}, {}, {}}) == "f32[N, 4]");
  CHECK(slice("f32[N, 8]", {{-1}, {std::numeric_limits<int64_t>::min()}, {0}, {-1}}) == "f32[N, 8]");
  CHECK(slice("f32[N, 8]", {{0}, {4}, {}, {}}) ==
        "error: slice on axis 0 of f32[N, 8] needs the size of N; only a full-range slice (step 1 or -1) keeps a "
        "symbolic size");
  CHECK(slice("f32[10]", {{0}, {5}, {}, {0}}) == "error: slice step on axis 0 is 0");
  CHECK(slice("f32[10]", {{0}, {5, 6}, {}, {}}).rfind("error: slice needs as many ends as starts", 0) == 0);
  CHECK(slice("f32[4, 4]", {{0, 0}, {1, 1}, {1, -1}, {}}) ==
        "error: slice axis -1 appears more than once in axes=[1, -1]");

  InferOutcome r = infer_op(OpKind::kSlice, {"f32[4, 6]"}, SliceAttrs{{1}, {3}, {-1}, {}});
  REQUIRE(r.status.is_ok());
  CHECK(r.type.to_string() == "f32[4, 2]");
  CHECK(std::get<SliceAttrs>(r.attrs).axes == std::vector<int64_t>{1});
  CHECK(std::get<SliceAttrs>(r.attrs).steps == std::vector<int64_t>{1});
}

TEST_CASE("ir.infer: concat and gather") {
  CHECK(T(OpKind::kConcat, {"f32[N, 3]", "f32[N, 5]", "f32[N, 1]"}, AxisAttrs{-1}) == "f32[N, 9]");
  CHECK(T(OpKind::kConcat, {"f32[2, 3]"}, AxisAttrs{0}) == "f32[2, 3]");
  CHECK(T(OpKind::kConcat, {"f32[N, 3]"}, AxisAttrs{0}) == "f32[N, 3]");
  CHECK(T(OpKind::kConcat, {"f32[2, 3]", "f32[2, 4]"}, AxisAttrs{0}) ==
        "error: concat operands differ in dim 1 (not the concat axis 0): f32[2, 3] and f32[2, 4]");
  CHECK(T(OpKind::kConcat, {"f32[2, 3]", "f32[2]"}, AxisAttrs{0}) ==
        "error: concat operands must have the same rank, got f32[2, 3] and f32[2]");
  CHECK(T(OpKind::kConcat, {"f32[2]", "i32[2]"}, AxisAttrs{0}).rfind("error: concat operands must have the same dtype", 0) == 0);
  CHECK(T(OpKind::kConcat, {"f32[N, 3]", "f32[N, 3]"}, AxisAttrs{0}) ==
        "error: concat along axis 0 needs static sizes on that axis, got f32[N, 3], f32[N, 3]");

  CHECK(T(OpKind::kGather, {"f32[1000, 64]", "i64[N, T]"}) == "f32[N, T, 64]");
  CHECK(T(OpKind::kGather, {"f32[4, 5, 6]", "i32[2]"}, AxisAttrs{-2}) == "f32[4, 2, 6]");
  CHECK(T(OpKind::kGather, {"f32[4, 5]", "i32[]"}, AxisAttrs{1}) == "f32[4]");
  CHECK(T(OpKind::kGather, {"f32[4, 5]", "f32[2]"}) == "error: gather needs i32 or i64 indices, got f32[2]");

  const ScatterAttrs add{-1, ScatterReduction::kAdd};
  CHECK(T(OpKind::kScatter, {"f32[N, 5]", "i64[N, 7]", "f32[N, 7]"}, add) == "f32[N, 5]");
  CHECK(T(OpKind::kScatter, {"bool[4, 5]", "i32[2, 2]", "bool[2, 2]"}) == "bool[4, 5]");
  CHECK(T(OpKind::kScatter, {"bool[4]", "i32[2]", "bool[2]"}, add) ==
        "error: scatter reduction=\"add\" needs numeric data, got bool[4]");
  CHECK(T(OpKind::kScatter, {"f32[4]", "f32[2]", "f32[2]"}) == "error: scatter needs i32 or i64 indices, got f32[2]");
  CHECK(T(OpKind::kScatter, {"f32[4]", "i64[2]", "f16[2]"}).rfind("error: scatter data and updates operands must have the same dtype", 0) == 0);
  CHECK(T(OpKind::kScatter, {"f32[4, 2]", "i64[2, 2]", "f32[2, 1]"}) ==
        "error: scatter needs indices and updates of one shape and of the data's rank, got f32[4, 2], i64[2, 2] and f32[2, 1]");
  CHECK(T(OpKind::kScatter, {"f32[4, 2]", "i64[2]", "f32[2]"}).rfind("error: scatter needs indices and updates of one shape", 0) == 0);
  CHECK(T(OpKind::kScatter, {"f32[4, 2]", "i64[9, 3]", "f32[9, 3]"}) ==
        "error: scatter updates f32[9, 3] are larger than the data f32[4, 2] along axis 1");
  CHECK(T(OpKind::kScatter, {"f32[4, 2]", "i64[1, 2]", "f32[1, 2]"}, ScatterAttrs{2, ScatterReduction::kNone})
            .rfind("error: axis 2 is out of range", 0) == 0);
}

TEST_CASE("ir.infer: conv2d and pooling") {
  Conv2dAttrs conv;
  CHECK(T(OpKind::kConv2d, {"f32[N, 3, 32, 32]", "f32[16, 3, 3, 3]"}, conv) == "f32[N, 16, 30, 30]");
  conv.pads = {1, 1, 1, 1};
  conv.strides = {2, 2};
  CHECK(T(OpKind::kConv2d, {"f32[N, 3, 32, 32]", "f32[16, 3, 3, 3]", "f32[16]"}, conv) == "f32[N, 16, 16, 16]");
  conv = Conv2dAttrs{};
  conv.dilations = {2, 2};
  CHECK(T(OpKind::kConv2d, {"f32[1, 3, 10, 10]", "f32[4, 3, 3, 3]"}, conv) == "f32[1, 4, 6, 6]");
  conv = Conv2dAttrs{};
  conv.groups = 4;
  CHECK(T(OpKind::kConv2d, {"f32[1, 8, 5, 5]", "f32[8, 2, 1, 1]"}, conv) == "f32[1, 8, 5, 5]");
  CHECK(T(OpKind::kConv2d, {"f32[1, 8, 5, 5]", "f32[8, 3, 1, 1]"}, conv) ==
        "error: conv2d weight f32[8, 3, 1, 1] with groups=4 expects 12 input channels, but the input is f32[1, 8, 5, 5]");
  CHECK(T(OpKind::kConv2d, {"f32[1, 3, 2, 2]", "f32[4, 3, 3, 3]"}).rfind("error: conv2d window (size 3) is larger", 0) == 0);
  CHECK(T(OpKind::kConv2d, {"f32[1, 3, 8, 8]", "f32[4, 3, 3, 3]", "f32[5]"}) ==
        "error: conv2d bias must be f32[4], got f32[5]");
  CHECK(T(OpKind::kConv2d, {"f32[3, 8, 8]", "f32[4, 3, 3, 3]"}) ==
        "error: conv2d needs an NCHW input of rank 4, got f32[3, 8, 8]");
  CHECK(T(OpKind::kConv2d, {"f32[1, 3, H, 8]", "f32[4, 3, 3, 3]"}) ==
        "error: conv2d needs a static height, got f32[1, 3, H, 8]");
  CHECK(T(OpKind::kConv2d, {"f32[1, 3, H, W]", "f32[4, 3, 1, 1]"}) == "f32[1, 4, H, W]");
  conv = Conv2dAttrs{};
  conv.strides = {0, 1};
  CHECK(T(OpKind::kConv2d, {"f32[1, 3, 8, 8]", "f32[4, 3, 3, 3]"}, conv) ==
        "error: conv2d strides=[0, 1] must hold values in [1, 4294967296]");

  Pool2dAttrs pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  CHECK(T(OpKind::kMaxPool2d, {"f32[N, 16, 32, 32]"}, pool) == "f32[N, 16, 16, 16]");
  CHECK(T(OpKind::kMaxPool2d, {"f32[N, 16, 33, 33]"}, pool) == "f32[N, 16, 16, 16]");
  pool.kernel = {3, 3};
  pool.strides = {1, 1};
  pool.pads = {1, 1, 1, 1};
  CHECK(T(OpKind::kAvgPool2d, {"f32[1, 2, 5, 7]"}, pool) == "f32[1, 2, 5, 7]");
  CHECK(T(OpKind::kAvgPool2d, {"i32[1, 2, 5, 7]"}, pool) ==
        "error: avg_pool2d needs a floating-point input, got i32[1, 2, 5, 7]");
  pool.pads = {3, 0, 0, 0};
  CHECK(T(OpKind::kMaxPool2d, {"f32[1, 2, 5, 7]"}, pool) ==
        "error: max_pool2d pads=[3, 0, 0, 0] must be smaller than the kernel=[3, 3]");

  CHECK(T(OpKind::kGlobalAvgPool2d, {"f32[N, 512, 7, 7]"}) == "f32[N, 512, 1, 1]");
  CHECK(T(OpKind::kGlobalAvgPool2d, {"f32[N, 512]"}) ==
        "error: global_avg_pool2d needs an NCHW input of rank 4, got f32[N, 512]");
}

TEST_CASE("ir.infer: operand counts, attribute kinds and absurd sizes") {
  CHECK(T(OpKind::kAdd, {"f32[2]"}) == "error: add takes 2 operands, got 1");
  CHECK(T(OpKind::kConv2d, {"f32[1, 1, 1, 1]"}) == "error: conv2d takes 2 to 3 operands, got 1");
  CHECK(T(OpKind::kConcat, {}, AxisAttrs{0}) == "error: concat takes at least 1 operand, got 0");
  CHECK(T(OpKind::kSoftmax, {"f32[2]"}, NoAttrs{}) == "error: softmax has attributes of the wrong kind");
  const std::string big = std::to_string(int64_t(1) << 40);
  CHECK(T(OpKind::kAdd, {"f32[" + big + ", 1]", "f32[" + big + "]"}) ==
        "error: result f32[" + big + ", " + big + "] has too many elements (overflows 64 bits)");
  CHECK(T(OpKind::kBroadcastTo, {"f32[1]"}, BroadcastToAttrs{{Dim::of(int64_t(1) << 40), Dim::of(int64_t(1) << 40)}})
            .rfind("error: result f32[", 0) == 0);
  Conv2dAttrs wide;
  wide.dilations = {int64_t(1) << 32, 1};
  CHECK(T(OpKind::kConv2d, {"f32[1, 3, 8, 8]", "f32[4, 3, 3, 3]"}, wide) ==
        "error: conv2d window (size 8589934593) is larger than the padded input height 8 of f32[1, 3, 8, 8]");
  wide = Conv2dAttrs{};
  wide.groups = int64_t(1) << 32;
  CHECK(T(OpKind::kConv2d, {"f32[1, 3, 8, 8]", "f32[4, 4611686018427387904, 3, 3]"}, wide) ==
        "error: conv2d weight f32[4, 4611686018427387904, 3, 3] with groups=4294967296 needs more input channels "
        "than 64 bits can count");
  CHECK(T(OpKind::kSlice, {"f32[10]"}, SliceAttrs{{std::numeric_limits<int64_t>::min()}, {kMax}, {},
                                                  {std::numeric_limits<int64_t>::min()}}) == "f32[0]");
}

TEST_CASE("ir.infer: infer_graph names the node and checks declared outputs") {
  GraphBuilder b;
  NodeId x = b.input("x", "f32[N, 784]");
  auto w = Tensor::zeros(DType::kF32, {784, 10});
  REQUIRE(w.is_ok());
  NodeId wn = b.constant("w", std::move(w).value(), "fc.weight");
  NodeId h = b.op(OpKind::kMatMul, "h", {x, wn});
  NodeId p = b.op(OpKind::kSoftmax, "probs", {h});
  b.output("probs", p);
  CHECK(infer_graph(b.graph).is_ok());
  CHECK(b.graph.node(wn).type.to_string() == "f32[784, 10]");

  // A declared type that disagrees.
  b.graph.outputs()[0].declared = type_of("f32[N, 12]");
  b.graph.outputs()[0].loc = kiln::SourceLoc{"m.graph", 20, 3};
  Status s = infer_graph(b.graph);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "output 'probs' is declared f32[N, 12] but defined as f32[N, 10]");
  CHECK(s.to_string() == "m.graph:20:3: error: output 'probs' is declared f32[N, 12] but defined as f32[N, 10]");

  // A node that fails: the error names it and carries its location.
  b.graph.outputs()[0].declared = type_of("f32[N, 10]");
  b.graph.node(h).inputs = {wn, x};
  b.graph.node(h).loc = kiln::SourceLoc{"m.graph", 5, 7};
  s = infer_graph(b.graph);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.to_string() ==
        "m.graph:5:7: error: 'h' (matmul): matmul inner dimensions differ: f32[784, 10] x f32[N, 784]");

  // Absurd declared input shapes.
  GraphBuilder c;
  c.graph.add_node(Node{OpKind::kInput, "x", {}, InputAttrs{0}, type_of("f32[4294967296, 4294967296]"), {}, false});
  c.graph.inputs().push_back(0);
  s = infer_graph(c.graph);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "'x' (input): shape f32[4294967296, 4294967296] has too many elements (overflows 64 bits)");
}
