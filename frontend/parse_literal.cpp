// The .graph parser: types, numbers and `const` literals (nested and splat).
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "frontend/parser_internal.h"
#include "ir/names.h"
#include "support/half.h"

namespace kiln::frontend::detail {
namespace {

std::string shown(std::string_view text) {
  constexpr size_t kMax = 40;
  return text.size() <= kMax ? std::string(text) : std::string(text.substr(0, kMax)) + "...";
}


}  // namespace

std::optional<int64_t> Parser::parse_signed_int(const Token& number, bool negative) {
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(number.text.data(), number.text.data() + number.text.size(), magnitude);
  const uint64_t limit = negative ? uint64_t(std::numeric_limits<int64_t>::max()) + 1
                                  : uint64_t(std::numeric_limits<int64_t>::max());
  if (ec != std::errc() || end != number.text.data() + number.text.size() || magnitude > limit) {
    error(loc_of(number), "integer " + std::string(negative ? "-" : "") + shown(number.text) +
                              " does not fit in 64 bits");
    return std::nullopt;
  }
  if (negative) return magnitude == limit ? std::numeric_limits<int64_t>::min() : -int64_t(magnitude);
  return int64_t(magnitude);
}

std::optional<double> Parser::parse_float_token(const Token& number, bool negative) {
  // strtod needs a terminated string; numbers are short except in adversarial input.
  std::string text(number.text);
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || (errno == ERANGE && std::isinf(v))) {
    error(loc_of(number), "number " + std::string(negative ? "-" : "") + shown(number.text) +
                              " is out of range");
    return std::nullopt;
  }
  // Underflow (ERANGE with a tiny result) is accepted: the value rounds toward zero.
  return negative ? -v : v;
}

bool Parser::check_bound(const ir::Dim& dim, const SourceLoc& loc) {
  for (const std::string& symbol : dim.symbol_factors()) {
    if (!bound_symbols_.count(symbol)) {
      error(loc, "symbolic size '" + symbol + "' is not bound by any graph input");
      return false;
    }
  }
  return true;
}

bool Parser::accept_symbolic_dim(const ir::Dim& dim, bool binds_symbols, const SourceLoc& loc) {
  if (!binds_symbols) return check_bound(dim, loc);
  // Inputs bind plain symbols; a product cannot be solved for its factors. Its factors are bound
  // anyway, so that the one error does not cascade.
  for (const std::string& symbol : dim.symbol_factors()) bound_symbols_.insert(symbol);
  if (dim.symbol_factors().size() == 1 && dim.coefficient() == 1) return true;
  error(loc, "an input's size '" + dim.to_string() + "' must be a single symbol or an integer");
  return false;
}

bool Parser::parse_size_product(ir::Dim& acc) {
  while (at(TokenKind::kStar)) {
    take();
    const Token f = peek();
    ir::Dim factor;
    if (f.kind == TokenKind::kInt) {
      std::optional<int64_t> v = parse_signed_int(f, false);
      if (!v) return false;
      factor = ir::Dim::of(*v);
    } else if (f.kind == TokenKind::kIdent && !ir::is_graph_keyword(f.text)) {
      factor = ir::Dim::symbol(std::string(f.text));
    } else {
      error_expected("a size factor (an integer or a symbolic size) after '*'");
      return false;
    }
    take();
    std::optional<ir::Dim> product = ir::Dim::product(acc, factor);
    if (!product) {
      error(loc_of(f), "the size product overflows 64 bits");
      return false;
    }
    acc = *product;
  }
  return true;
}

std::optional<ir::TensorType> Parser::parse_type(bool binds_symbols) {
  const Token dtype_token = peek();
  std::optional<ir::DType> dtype;
  if (dtype_token.kind == TokenKind::kIdent) dtype = ir::parse_dtype(dtype_token.text);
  last_type_valid_ = false;
  if (!dtype) {
    error_expected("a type (f32, f16, bf16, i64, i32, i8, u8 or bool, then [dims])");
    return std::nullopt;
  }
  take();
  if (!expect(TokenKind::kLBracket, "'[' after the dtype")) return std::nullopt;
  ir::TensorType type;
  type.dtype = *dtype;
  bool ok = true;
  int64_t static_product = 1;
  bool overflow = false;
  while (!at(TokenKind::kRBracket)) {
    const Token t = peek();
    if (t.kind == TokenKind::kInt || (t.kind == TokenKind::kIdent && !ir::is_graph_keyword(t.text))) {
      take();
      std::optional<ir::Dim> dim;
      if (t.kind == TokenKind::kIdent) {
        dim = ir::Dim::symbol(std::string(t.text));
      } else if (std::optional<int64_t> size = parse_signed_int(t, false)) {
        dim = ir::Dim::of(*size);
      }
      if (!dim) {
        ok = false;  // parse_signed_int reported it
      } else {
        if (!parse_size_product(*dim)) return std::nullopt;  // 2*N, batch*seq
        if (dim->is_static()) {
          if (__builtin_mul_overflow(static_product, dim->size(), &static_product)) overflow = true;
        } else if (!accept_symbolic_dim(*dim, binds_symbols, loc_of(t))) {
          ok = false;
        }
        type.shape.push_back(*dim);
      }
    } else if (t.kind == TokenKind::kMinus) {
      error(loc_of(t), "dimension sizes cannot be negative");
      take();
      if (at(TokenKind::kInt)) take();
      ok = false;
    } else {
      error_expected("a dimension (an integer or a symbolic size)");
      return std::nullopt;
    }
    if (at(TokenKind::kComma)) {
      take();
      continue;
    }
    if (!at(TokenKind::kRBracket)) {
      error_expected("',' or ']'");
      return std::nullopt;
    }
  }
  take();  // ']'
  if (type.rank() > ir::kMaxRank) {
    error(loc_of(dtype_token), "a shape of rank " + std::to_string(type.rank()) + ": Kiln's tensors have at most " +
                                   std::to_string(ir::kMaxRank) + " dimensions");
    ok = false;
  } else if (overflow) {
    error(loc_of(dtype_token), "shape " + type.to_string() +
                                   " has too many elements (the product of its sizes overflows 64 bits)");
    ok = false;
  }
  last_type_valid_ = ok;
  return type;
}

bool Parser::parse_literal(ir::Tensor& tensor, const ir::TensorType& type, bool& ok) {
  const bool writable = ok;  // tensor was allocated
  if (!at(TokenKind::kLBracket)) {
    // A single scalar fills the whole tensor (a splat).
    int64_t count = writable ? tensor.num_elements() : 0;
    return parse_scalar_literal(tensor, writable && count > 0 ? 0 : -1, ok, count);
  }
  if (type.rank() == 0) {
    error(loc_of(peek()), "a scalar const takes a single value, not a list");
    return false;
  }
  int64_t flat_index = 0;
  return parse_literal_list(tensor, type, 0, flat_index, ok);
}

bool Parser::parse_literal_list(ir::Tensor& tensor, const ir::TensorType& type, size_t dim,
                                int64_t& flat_index, bool& ok) {
  if (depth_ >= kMaxNesting) {
    error(loc_of(peek()), "nesting too deep (more than " + std::to_string(kMaxNesting) + " levels)");
    return false;
  }
  Token open = take();  // '['
  ++depth_;
  struct Restore {
    int& depth;
    ~Restore() { --depth; }
  } restore{depth_};
  const bool innermost = dim + 1 == type.shape.size();
  const int64_t expected = type.shape[dim].is_static() ? type.shape[dim].size() : -1;
  int64_t count = 0;
  while (!at(TokenKind::kRBracket)) {
    if (innermost) {
      if (at(TokenKind::kLBracket)) {
        error(loc_of(peek()), "literal is nested deeper than the rank of " + type.to_string());
        return false;
      }
      bool in_bounds = ok && (expected < 0 || count < expected);
      if (!parse_scalar_literal(tensor, in_bounds ? flat_index : -1, ok, 1)) return false;
      if (in_bounds) ++flat_index;
    } else {
      if (!at(TokenKind::kLBracket)) {
        error(loc_of(peek()), "expected '[' for dimension " + std::to_string(dim + 1) + " of " +
                                  type.to_string() + ", found " + describe_token(peek()));
        return false;
      }
      if (ok && expected >= 0 && count >= expected) {
        // Too many rows: stop writing, but keep parsing to report the count.
        ok = false;
        error(loc_of(open), "literal has more than " + std::to_string(expected) + " elements in dimension " +
                                std::to_string(dim) + " of " + type.to_string());
      }
      if (!parse_literal_list(tensor, type, dim + 1, flat_index, ok)) return false;
    }
    ++count;
    if (at(TokenKind::kComma)) {
      take();
      continue;
    }
    if (!at(TokenKind::kRBracket)) {
      error_expected("',' or ']'");
      return false;
    }
  }
  take();  // ']'
  if (ok && expected >= 0 && count != expected) {
    ok = false;
    error(loc_of(open), "literal has " + std::to_string(count) + " element" + (count == 1 ? "" : "s") +
                            " in dimension " + std::to_string(dim) + " but " + type.to_string() + " needs " +
                            std::to_string(expected));
  }
  return true;
}

bool Parser::parse_scalar_literal(ir::Tensor& tensor, int64_t index, bool& ok, int64_t fill_count) {
  const ir::DType dtype = tensor.data() ? tensor.dtype() : ir::DType::kF32;
  const Token first = peek();
  bool negative = false;
  if (first.kind == TokenKind::kMinus) {
    take();
    negative = true;
  }
  const Token t = peek();
  SourceLoc loc = loc_of(first);
  auto fill = [&](auto value, auto* data) {
    using T = std::remove_pointer_t<decltype(data)>;
    for (int64_t i = 0; i < fill_count; ++i) data[index + i] = T(value);
  };

  if (t.kind == TokenKind::kIdent && (t.text == "true" || t.text == "false") && !negative) {
    take();
    if (index < 0) return true;
    if (dtype != ir::DType::kBool) {
      error(loc, "expected a number for " + std::string(ir::dtype_name(dtype)) + ", found '" +
                     std::string(t.text) + "'");
      ok = false;
      return true;
    }
    fill(uint8_t(t.text == "true"), tensor.mutable_data_as<uint8_t>());
    return true;
  }

  double float_value = 0;
  int64_t int_value = 0;
  bool is_int_token = false;
  if (t.kind == TokenKind::kIdent && (t.text == "inf" || t.text == "nan")) {
    take();
    float_value = t.text == "inf" ? std::numeric_limits<double>::infinity()
                                  : std::numeric_limits<double>::quiet_NaN();
    if (negative) float_value = -float_value;
  } else if (t.kind == TokenKind::kInt) {
    take();
    std::optional<int64_t> v = parse_signed_int(t, negative);
    if (!v) {
      ok = false;
      return true;
    }
    is_int_token = true;
    int_value = *v;
    float_value = double(*v);
  } else if (t.kind == TokenKind::kFloat) {
    take();
    std::optional<double> v = parse_float_token(t, negative);
    if (!v) {
      ok = false;
      return true;
    }
    float_value = *v;
  } else {
    error_expected(negative ? "a number after '-'" : "a literal value (a number, true or false)");
    return false;
  }
  if (index < 0) return true;

  std::string type_name(ir::dtype_name(dtype));
  std::string written = std::string(negative ? "-" : "") + shown(t.text);
  if (dtype == ir::DType::kBool) {
    error(loc, "expected true or false for bool, found " + written);
    ok = false;
    return true;
  }
  if (ir::is_integer(dtype)) {
    if (!is_int_token) {
      error(loc, "expected an integer for " + type_name + ", found " + written);
      ok = false;
      return true;
    }
    auto [lo, hi] = ir::integer_range(dtype);
    if (int_value < lo || int_value > hi) {
      error(loc, "integer " + written + " is out of range for " + type_name);
      ok = false;
      return true;
    }
    switch (dtype) {
      case ir::DType::kI64: fill(int_value, tensor.mutable_data_as<int64_t>()); break;
      case ir::DType::kI32: fill(int_value, tensor.mutable_data_as<int32_t>()); break;
      case ir::DType::kI16: fill(int_value, tensor.mutable_data_as<int16_t>()); break;
      case ir::DType::kI8: fill(int_value, tensor.mutable_data_as<int8_t>()); break;
      case ir::DType::kU32: fill(int_value, tensor.mutable_data_as<uint32_t>()); break;
      case ir::DType::kU16: fill(int_value, tensor.mutable_data_as<uint16_t>()); break;
      default: fill(int_value, tensor.mutable_data_as<uint8_t>()); break;
    }
    return true;
  }
  // Floating-point dtypes: a finite number that becomes infinite in the dtype is an error.
  float as_f32 = float(float_value);
  auto out_of_range = [&] {
    error(loc, "number " + written + " is out of range for " + type_name);
    ok = false;
    return true;
  };
  if (dtype == ir::DType::kF64) {
    fill(float_value, tensor.mutable_data_as<double>());
    return true;
  }
  if (std::isfinite(float_value) && std::isinf(as_f32)) return out_of_range();
  switch (dtype) {
    case ir::DType::kF32: fill(as_f32, tensor.mutable_data_as<float>()); break;
    case ir::DType::kF16: {
      uint16_t h = f32_to_f16(as_f32);
      if (std::isfinite(float_value) && std::isinf(f16_to_f32(h))) return out_of_range();
      fill(h, tensor.mutable_data_as<uint16_t>());
      break;
    }
    case ir::DType::kBF16: {
      uint16_t h = f32_to_bf16(as_f32);
      if (std::isfinite(float_value) && std::isinf(bf16_to_f32(h))) return out_of_range();
      fill(h, tensor.mutable_data_as<uint16_t>());
      break;
    }
    case ir::DType::kF8E4M3FN: case ir::DType::kF8E4M3FNUZ: case ir::DType::kF8E5M2: case ir::DType::kF8E5M2FNUZ: {
      const Float8Format format = *ir::float8_format(dtype);
      const uint8_t b = f32_to_float8(as_f32, format);
      // Without infinities, an infinity or an overflow would become NaN (support/float8.h).
      if (std::isinf(float_value) && format.kind != Float8Kind::kIeee) {
        error(loc, type_name + " has no infinity");
        ok = false;
        return true;
      }
      if (std::isfinite(float_value) && !std::isfinite(float8_to_f32(b, format))) return out_of_range();
      fill(b, tensor.mutable_data_as<uint8_t>());
      break;
    }
    default: break;
  }
  return true;
}

}  // namespace kiln::frontend::detail
