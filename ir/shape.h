// Shapes with static and symbolic dimensions.
//
// A Dim is either a static size (>= 0) or a symbolic size: a symbol (a name such as "N", bound
// at run time) or a product of symbols and a constant, such as "batch*seq" or "2*batch" (what
// flattening or merging dims over symbolic sizes gives). A product's name is canonical (the
// constant first when it is not 1, then the symbols sorted), so two symbolic dims are equal
// exactly when their names are; a symbolic dim never equals a static size at compile time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "support/status.h"

namespace kiln::ir {

class Dim {
 public:
  Dim() = default;
  static Dim of(int64_t size) { Dim d; d.size_ = size; return d; }
  static Dim symbol(std::string name) { Dim d; d.symbol_ = std::move(name); return d; }

  bool is_static() const { return symbol_.empty(); }
  bool is_symbolic() const { return !symbol_.empty(); }
  // Precondition: is_static().
  int64_t size() const { return size_; }
  // Precondition: is_symbolic().
  const std::string& symbol_name() const { return symbol_; }

  bool operator==(const Dim& other) const { return size_ == other.size_ && symbol_ == other.symbol_; }
  bool operator!=(const Dim& other) const { return !(*this == other); }
  bool is_one() const { return is_static() && size_ == 1; }

  std::string to_string() const { return is_static() ? std::to_string(size_) : symbol_; }

  // The product a * b (static when both are), canonical; nullopt when the constant overflows.
  static std::optional<Dim> product(const Dim& a, const Dim& b);
  // a / b when it is exact (b's symbols are among a's and the constants divide), else nullopt.
  static std::optional<Dim> quotient(const Dim& a, const Dim& b);
  // The symbols of a symbolic dim, one entry per factor ("batch*seq" -> batch, seq), and its
  // constant (1 for a plain symbol). Precondition: is_symbolic().
  std::vector<std::string> symbol_factors() const;
  int64_t coefficient() const;

 private:
  int64_t size_ = 0;
  std::string symbol_;
};

using Shape = std::vector<Dim>;

// Sizes bound to symbols at run time ("N" -> 32).
using SymbolBindings = std::map<std::string, int64_t>;

// "[N, 10]" ; "[]" for a scalar.
std::string shape_to_string(const Shape& shape);
bool is_static(const Shape& shape);
// Whether every dim from index `first` on is static (e.g. all but a symbolic batch).
bool is_static_from(const Shape& shape, size_t first);
// Static shape -> sizes. Precondition: is_static(shape).
std::vector<int64_t> static_sizes(const Shape& shape);
Shape shape_of(const std::vector<int64_t>& sizes);
// Product of the static dims, or nullopt if any dim is symbolic or the product overflows int64.
std::optional<int64_t> static_num_elements(const Shape& shape);
// Whether `name` is a symbolic size as Kiln writes it: an identifier, or a product of
// identifiers and one leading integer >= 2, in canonical order (checked on names read from files).
bool is_canonical_size_name(std::string_view name);

// Replaces each symbol by its binding (a product by the product of its factors' bindings).
// Fails naming the first unbound symbol, or when a product overflows int64.
Result<int64_t> resolve_dim(const Dim& dim, const SymbolBindings& bindings);
Result<std::vector<int64_t>> resolve_shape(const Shape& shape, const SymbolBindings& bindings);
// NumPy broadcasting of two shapes; error message says which dims disagree.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Normalizes a possibly negative axis against a rank; error if out of range.
Result<int64_t> normalize_axis(int64_t axis, int64_t rank);

// The most dimensions a Kiln tensor has. Generated kernels unroll loops and keep an index per
// dimension, so a rank of thousands would make device compilers run for minutes; models use
// far fewer. Checked where shapes enter: the parser, the ONNX importer, inference, the verifier
// (artifacts) and the C API.
inline constexpr int64_t kMaxRank = 64;

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;

  int64_t rank() const { return int64_t(shape.size()); }
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  // "f32[N, 10]"
  std::string to_string() const;
};

}  // namespace kiln::ir
