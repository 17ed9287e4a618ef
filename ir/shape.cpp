// Shapes with static and symbolic dims: printing, broadcasting, resolution and axis helpers.
#include "ir/shape.h"

#include <algorithm>

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

Result<std::vector<int64_t>> resolve_shape(const Shape& shape, const SymbolBindings& bindings) {
  std::vector<int64_t> sizes;
  sizes.reserve(shape.size());
  for (const Dim& d : shape) {
    if (d.is_static()) {
      sizes.push_back(d.size());
      continue;
    }
    auto it = bindings.find(d.symbol_name());
    if (it == bindings.end()) {
      return invalid_argument("symbolic size '" + d.symbol_name() + "' is not bound");
    }
    sizes.push_back(it->second);
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
