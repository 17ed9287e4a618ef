// Shapes with static and symbolic dims: printing, broadcasting, resolution and axis helpers.
#include "ir/shape.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace kiln::ir {

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += shape[i].to_string();
  }
  out += "]";
  return out;
}

bool is_static(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_static(); });
}

std::vector<int64_t> static_sizes(const Shape& shape) {
  std::vector<int64_t> sizes;
  sizes.reserve(shape.size());
  for (const Dim& d : shape) sizes.push_back(d.is_static() ? d.size() : 0);
  return sizes;
}

Shape shape_of(const std::vector<int64_t>& sizes) {
  Shape shape;
  shape.reserve(sizes.size());
  for (int64_t s : sizes) shape.push_back(Dim::of(s));
  return shape;
}

bool is_static_from(const Shape& shape, size_t first) {
  for (size_t d = first; d < shape.size(); ++d)
    if (!shape[d].is_static()) return false;
  return true;
}

std::optional<int64_t> static_num_elements(const Shape& shape) {
  int64_t product = 1;
  for (const Dim& d : shape) {
    if (d.is_symbolic() || d.size() < 0) return std::nullopt;
    if (__builtin_mul_overflow(product, d.size(), &product)) return std::nullopt;
  }
  return product;
}

namespace {

// A dim from its constant and symbols (sorted here): static when there are no symbols.
std::optional<Dim> make_product(int64_t coefficient, std::vector<std::string> symbols) {
  if (symbols.empty() || coefficient == 0) return Dim::of(coefficient);
  if (coefficient < 0) return std::nullopt;  // not a size
  std::sort(symbols.begin(), symbols.end());
  std::string name = coefficient == 1 ? "" : std::to_string(coefficient) + "*";
  for (size_t i = 0; i < symbols.size(); ++i) name += (i ? "*" : "") + symbols[i];
  return Dim::symbol(std::move(name));
}

}  // namespace

std::vector<std::string> Dim::symbol_factors() const {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= symbol_.size()) {
    size_t end = symbol_.find('*', start);
    if (end == std::string::npos) end = symbol_.size();
    std::string factor = symbol_.substr(start, end - start);
    if (!factor.empty() && !std::isdigit(static_cast<unsigned char>(factor[0]))) out.push_back(std::move(factor));
    start = end + 1;
  }
  return out;
}

int64_t Dim::coefficient() const {
  if (symbol_.empty() || !std::isdigit(static_cast<unsigned char>(symbol_[0]))) return 1;
  int64_t c = 1;
  // Names come from files too (artifacts): an unparsable constant counts as 1, never throws.
  std::from_chars(symbol_.data(), symbol_.data() + symbol_.find('*'), c);
  return c;
}

bool is_canonical_size_name(std::string_view name) {
  std::optional<Dim> rebuilt = Dim::of(1);
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = std::min(name.find('*', start), name.size());
    std::string_view factor = name.substr(start, end - start);
    if (factor.empty()) return false;
    if (std::isdigit(static_cast<unsigned char>(factor[0]))) {
      int64_t c = 0;
      auto [ptr, ec] = std::from_chars(factor.data(), factor.data() + factor.size(), c);
      if (ec != std::errc() || ptr != factor.data() + factor.size() || c < 2 || start != 0) return false;
      rebuilt = Dim::product(*rebuilt, Dim::of(c));
    } else {
      for (char ch : factor) {
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.')) return false;
      }
      rebuilt = Dim::product(*rebuilt, Dim::symbol(std::string(factor)));
    }
    if (!rebuilt) return false;
    start = end + 1;
  }
  return rebuilt->is_symbolic() && rebuilt->symbol_name() == name;
}

std::optional<Dim> Dim::product(const Dim& a, const Dim& b) {
  int64_t coefficient = 1;
  std::vector<std::string> symbols;
  for (const Dim* d : {&a, &b}) {
    const int64_t c = d->is_static() ? d->size() : d->coefficient();
    if (c < 0 || __builtin_mul_overflow(coefficient, c, &coefficient)) return std::nullopt;
    if (d->is_symbolic()) {
      for (std::string& s : d->symbol_factors()) symbols.push_back(std::move(s));
    }
  }
  return make_product(coefficient, std::move(symbols));
}

std::optional<Dim> Dim::quotient(const Dim& a, const Dim& b) {
  const int64_t ca = a.is_static() ? a.size() : a.coefficient();
  const int64_t cb = b.is_static() ? b.size() : b.coefficient();
  if (cb <= 0 || ca % cb != 0) return std::nullopt;
  std::vector<std::string> symbols = a.is_symbolic() ? a.symbol_factors() : std::vector<std::string>{};
  if (b.is_symbolic()) {
    for (const std::string& s : b.symbol_factors()) {
      auto it = std::find(symbols.begin(), symbols.end(), s);
      if (it == symbols.end()) return std::nullopt;
      symbols.erase(it);
    }
  }
  return make_product(ca / cb, std::move(symbols));
}

Result<int64_t> resolve_dim(const Dim& d, const SymbolBindings& bindings) {
  if (d.is_static()) return d.size();
  int64_t size = d.coefficient();
  for (const std::string& s : d.symbol_factors()) {
    auto it = bindings.find(s);
    if (it == bindings.end()) return invalid_argument("symbolic size '" + s + "' is not bound");
    if (__builtin_mul_overflow(size, it->second, &size)) {
      return invalid_argument("symbolic size '" + d.symbol_name() + "' overflows 64 bits");
    }
  }
  return size;
}

Result<std::vector<int64_t>> resolve_shape(const Shape& shape, const SymbolBindings& bindings) {
  std::vector<int64_t> sizes;
  sizes.reserve(shape.size());
  for (const Dim& d : shape) {
    KILN_ASSIGN_OR_RETURN(int64_t size, resolve_dim(d, bindings));
    sizes.push_back(size);
  }
  return sizes;
}

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align on the right: position i counts from the left of the result.
    const size_t from_end = rank - 1 - i;
    const Dim one = Dim::of(1);
    const Dim& da = from_end < a.size() ? a[a.size() - 1 - from_end] : one;
    const Dim& db = from_end < b.size() ? b[b.size() - 1 - from_end] : one;
    if (da == db || db.is_one()) {
      out[i] = da;
    } else if (da.is_one()) {
      out[i] = db;
    } else {
      return invalid_argument("cannot broadcast " + shape_to_string(a) + " with " +
                              shape_to_string(b) + ": size " + da.to_string() + " vs " +
                              db.to_string());
    }
  }
  return out;
}

Result<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return invalid_argument("axis " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

std::string TensorType::to_string() const {
  return std::string(dtype_name(dtype)) + shape_to_string(shape);
}

}  // namespace kiln::ir
