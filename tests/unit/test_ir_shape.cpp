// Unit tests for ir/shape.h: printing, NumPy broadcasting with symbolic dims, symbol
// resolution, element counts and axis normalization.
#include <doctest/doctest.h>

#include <limits>

#include "ir/shape.h"

using namespace kiln::ir;

namespace {
Shape S(std::initializer_list<Dim> dims) { return Shape(dims); }
Dim d(int64_t n) { return Dim::of(n); }
Dim sym(const char* name) { return Dim::symbol(name); }
}  // namespace

TEST_CASE("ir.shape: printing shapes and types") {
  CHECK(shape_to_string({}) == "[]");
  CHECK(shape_to_string(S({sym("N"), d(10)})) == "[N, 10]");
  CHECK(TensorType{DType::kF32, S({sym("N"), d(10)})}.to_string() == "f32[N, 10]");
  CHECK(TensorType{DType::kF32, {}}.to_string() == "f32[]");
  CHECK(TensorType{DType::kBF16, S({d(2), d(3)})}.to_string() == "bf16[2, 3]");
  CHECK(TensorType{DType::kBool, S({d(0)})}.to_string() == "bool[0]");
}

TEST_CASE("ir.shape: Dim equality distinguishes symbols from sizes") {
  CHECK(sym("N") == sym("N"));
  CHECK(sym("N") != sym("M"));
  CHECK(sym("N") != d(0));
  CHECK(d(1).is_one());
  CHECK_FALSE(sym("N").is_one());
}

TEST_CASE("ir.shape: broadcasting follows NumPy") {
  auto ok = [](const Shape& a, const Shape& b) {
    auto r = broadcast_shapes(a, b);
    REQUIRE(r.is_ok());
    return shape_to_string(*r);
  };
  CHECK(ok(S({d(3), d(4)}), S({d(4)})) == "[3, 4]");
  CHECK(ok(S({d(3), d(1)}), S({d(1), d(4)})) == "[3, 4]");
  CHECK(ok(S({}), S({d(2), d(5)})) == "[2, 5]");
  CHECK(ok(S({d(2), d(1), d(5)}), S({d(7), d(1)})) == "[2, 7, 5]");
  CHECK(ok(S({d(0)}), S({d(1)})) == "[0]");
  // Symbols: the same symbol, or a 1 on either side.
  CHECK(ok(S({sym("N"), d(10)}), S({d(10)})) == "[N, 10]");
  CHECK(ok(S({sym("N"), d(1)}), S({sym("N"), d(10)})) == "[N, 10]");
  CHECK(ok(S({d(1), d(10)}), S({sym("B"), d(1)})) == "[B, 10]");

  auto r = broadcast_shapes(S({d(3), d(4)}), S({d(5)}));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message() == "cannot broadcast [3, 4] with [5]: size 4 vs 5");
  CHECK_FALSE(broadcast_shapes(S({sym("N")}), S({sym("M")})).is_ok());
  CHECK_FALSE(broadcast_shapes(S({sym("N")}), S({d(3)})).is_ok());
  CHECK_FALSE(broadcast_shapes(S({d(2)}), S({d(0)})).is_ok());
}

TEST_CASE("ir.shape: static_num_elements detects symbols and overflow") {
  CHECK(static_num_elements({}) == 1);
  CHECK(static_num_elements(S({d(2), d(3), d(4)})) == 24);
  CHECK(static_num_elements(S({d(5), d(0)})) == 0);
  CHECK_FALSE(static_num_elements(S({sym("N"), d(3)})).has_value());
  const int64_t big = int64_t(1) << 32;
  CHECK_FALSE(static_num_elements(S({d(big), d(big)})).has_value());
  CHECK(static_num_elements(S({d(big), d(big / 2 - 1)})).has_value());
  CHECK(is_static(S({d(1), d(2)})));
  CHECK_FALSE(is_static(S({d(1), sym("N")})));
  CHECK(static_sizes(shape_of({4, 5})) == std::vector<int64_t>{4, 5});
}

TEST_CASE("ir.shape: resolve_shape binds symbols") {
  SymbolBindings bindings{{"N", 32}, {"T", 7}};
  auto r = resolve_shape(S({sym("N"), d(10), sym("T")}), bindings);
  REQUIRE(r.is_ok());
  CHECK(*r == std::vector<int64_t>{32, 10, 7});
  auto missing = resolve_shape(S({sym("B"), d(2)}), bindings);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("'B'") != std::string::npos);
}

TEST_CASE("ir.shape: normalize_axis") {
  CHECK(*normalize_axis(-1, 3) == 2);
  CHECK(*normalize_axis(0, 3) == 0);
  CHECK(*normalize_axis(-3, 3) == 0);
  auto bad = normalize_axis(3, 2);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message() == "axis 3 is out of range for rank 2");
  CHECK_FALSE(normalize_axis(-3, 2).is_ok());
  CHECK_FALSE(normalize_axis(0, 0).is_ok());
  CHECK_FALSE(normalize_axis(std::numeric_limits<int64_t>::min(), 4).is_ok());
}

TEST_CASE("ir.shape: products of symbolic sizes are canonical, divide exactly and resolve") {
  const Dim N = Dim::symbol("N"), T = Dim::symbol("T");
  CHECK(Dim::product(T, N)->to_string() == "N*T");
  CHECK(Dim::product(N, T) == Dim::product(T, N));
  CHECK(Dim::product(Dim::of(2), N)->to_string() == "2*N");
  CHECK(Dim::product(*Dim::product(Dim::of(3), N), *Dim::product(Dim::of(4), T))->to_string() == "12*N*T");
  CHECK(Dim::product(Dim::of(0), N) == Dim::of(0));
  CHECK_FALSE(Dim::product(Dim::of(-1), N).has_value());  // not a size
  CHECK(Dim::quotient(*Dim::product(Dim::of(6), N), Dim::of(3))->to_string() == "2*N");
  CHECK(Dim::quotient(*Dim::product(N, T), N) == T);
  CHECK(Dim::quotient(*Dim::product(Dim::of(2), N), Dim::of(2)) == N);
  CHECK_FALSE(Dim::quotient(N, T).has_value());
  CHECK_FALSE(Dim::quotient(*Dim::product(Dim::of(2), N), Dim::of(4)).has_value());
  const Dim nt2 = *Dim::product(*Dim::product(N, T), Dim::of(2));
  CHECK(nt2.coefficient() == 2);
  CHECK(nt2.symbol_factors() == std::vector<std::string>{"N", "T"});
  CHECK(*resolve_dim(nt2, {{"N", 3}, {"T", 5}}) == 30);
  CHECK(resolve_dim(nt2, {{"N", 3}}).status().message() == "symbolic size 'T' is not bound");
  CHECK(resolve_dim(nt2, {{"N", int64_t(1) << 40}, {"T", int64_t(1) << 40}}).status().message().find("overflows") !=
        std::string::npos);
  // Names read from files must be what Kiln writes.
  CHECK(is_canonical_size_name("N"));
  CHECK(is_canonical_size_name("2*N*T"));
  CHECK_FALSE(is_canonical_size_name("T*N"));
  CHECK_FALSE(is_canonical_size_name("N*2"));
  CHECK_FALSE(is_canonical_size_name("1*N"));
  CHECK_FALSE(is_canonical_size_name("99999999999999999999*N"));
  CHECK_FALSE(is_canonical_size_name("N**T"));
  CHECK_FALSE(is_canonical_size_name("a b"));
  CHECK_FALSE(is_canonical_size_name("4"));
}
