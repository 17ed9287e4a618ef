// SizeExpr arithmetic (polynomials in symbolic dims) and ExecutionPlan lookups.
//
// Invariant: terms_ never holds a zero coefficient, so two equal polynomials have equal maps and
// operator== is structural.
#include "ir/plan.h"

#include <algorithm>

namespace kiln::ir {

std::string_view storage_name(Storage storage) {
  switch (storage) {
    case Storage::kArena: return "arena";
    case Storage::kInput: return "input";
    case Storage::kOutput: return "output";
    case Storage::kConstant: return "constant";
    case Storage::kAlias: return "alias";
  }
  return "unknown";
}
namespace {

// Rounds k up to a multiple of alignment (toward +infinity, also for negative k).
int64_t round_up(int64_t k, int64_t alignment) {
  int64_t rem = k % alignment;
  if (rem == 0) return k;
  int64_t rounded = 0;
  __builtin_add_overflow(k, rem > 0 ? alignment - rem : -rem, &rounded);  // wraps, never UB
  return rounded;
}

void wrapping_mul(int64_t& value, int64_t k) { __builtin_mul_overflow(value, k, &value); }

}  // namespace

SizeExpr SizeExpr::constant(int64_t c) {
  SizeExpr e;
  if (c != 0) e.terms_[{}] = c;
  return e;
}

SizeExpr SizeExpr::symbol(const std::string& name) {
  SizeExpr e;
  e.terms_[{name}] = 1;
  return e;
}

SizeExpr SizeExpr::of_shape(const Shape& shape, int64_t scale) {
  int64_t coeff = scale;
  std::vector<std::string> monomial;
  for (const Dim& d : shape) {
    if (d.is_static()) {
      // Shapes reaching the planner passed inference, which rejects element counts overflowing
      // 64 bits; the wrapping multiply only keeps absurd byte sizes free of undefined behaviour.
      wrapping_mul(coeff, d.size());
    } else {
      wrapping_mul(coeff, d.coefficient());
      for (std::string& symbol : d.symbol_factors()) monomial.push_back(std::move(symbol));
    }
  }
  SizeExpr e;
  if (coeff == 0) return e;
  std::sort(monomial.begin(), monomial.end());
  e.terms_[std::move(monomial)] = coeff;
  return e;
}

SizeExpr SizeExpr::operator+(const SizeExpr& o) const {
  SizeExpr sum = *this;
  for (const auto& [monomial, coeff] : o.terms_) {
    int64_t& slot = sum.terms_[monomial];
    __builtin_add_overflow(slot, coeff, &slot);  // wraps instead of undefined behaviour
    if (slot == 0) sum.terms_.erase(monomial);
  }
  return sum;
}

SizeExpr SizeExpr::operator*(int64_t k) const {
  SizeExpr product;
  if (k == 0) return product;
  for (const auto& [monomial, coeff] : terms_) {
    int64_t scaled = coeff;
    wrapping_mul(scaled, k);
    if (scaled != 0) product.terms_[monomial] = scaled;
  }
  return product;
}

bool SizeExpr::is_constant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

int64_t SizeExpr::constant_value() const {
  auto it = terms_.find({});
  return it == terms_.end() ? 0 : it->second;
}

bool SizeExpr::dominates(const SizeExpr& o) const {
  auto coeff_of = [](const SizeExpr& e, const std::vector<std::string>& m) -> int64_t {
    auto it = e.terms_.find(m);
    return it == e.terms_.end() ? 0 : it->second;
  };
  for (const auto& [monomial, coeff] : terms_) {
    if (coeff < coeff_of(o, monomial)) return false;
  }
  for (const auto& [monomial, coeff] : o.terms_) {
    if (coeff_of(*this, monomial) < coeff) return false;
  }
  return true;
}

SizeExpr SizeExpr::align_up(int64_t alignment) const {
  if (alignment <= 1) return *this;
  SizeExpr aligned;
  for (const auto& [monomial, coeff] : terms_) {
    int64_t rounded = round_up(coeff, alignment);
    if (rounded != 0) aligned.terms_[monomial] = rounded;
  }
  return aligned;
}

Result<int64_t> SizeExpr::evaluate(const SymbolBindings& bindings) const {
  int64_t total = 0;
  for (const auto& [monomial, coeff] : terms_) {
    int64_t term = coeff;
    for (const std::string& sym : monomial) {
      auto it = bindings.find(sym);
      if (it == bindings.end()) {
        return invalid_argument("symbolic size '" + sym + "' is not bound");
      }
      if (__builtin_mul_overflow(term, it->second, &term)) {
        return invalid_argument("size " + to_string() + " overflows 64 bits");
      }
    }
    if (__builtin_add_overflow(total, term, &total)) {
      return invalid_argument("size " + to_string() + " overflows 64 bits");
    }
  }
  return total;
}

std::string SizeExpr::to_string() const {
  if (terms_.empty()) return "0";
  std::string out;
  // Highest-degree monomials first, the constant last: "3136*N + 1024".
  for (auto it = terms_.rbegin(); it != terms_.rend(); ++it) {
    const auto& [monomial, coeff] = *it;
    // Unsigned so that the magnitude of INT64_MIN is representable.
    uint64_t magnitude = coeff < 0 ? uint64_t(0) - uint64_t(coeff) : uint64_t(coeff);
    if (out.empty()) {
      if (coeff < 0) out += "-";
    } else {
      out += coeff < 0 ? " - " : " + ";
    }
    std::string product;
    if (magnitude != 1 || monomial.empty()) product = std::to_string(magnitude);
    for (const std::string& sym : monomial) {
      if (!product.empty()) product += "*";
      product += sym;
    }
    out += product;
  }
  return out;
}

const BufferAssignment* ExecutionPlan::find_buffer(NodeId value) const {
  for (const BufferAssignment& b : buffers) {
    if (b.value == value) return &b;
  }
  return nullptr;
}

namespace {

// Sum of align_up(slots[j]) for j < end, evaluated for `bindings`.
Result<int64_t> aligned_slot_sum(const ExecutionPlan& plan, size_t end, const SymbolBindings& bindings) {
  int64_t total = 0;
  for (size_t j = 0; j < end && j < plan.slots.size(); ++j) {
    KILN_ASSIGN_OR_RETURN(int64_t bytes, plan.slots[j].evaluate(bindings));
    if (bytes < 0) return invalid_argument("arena slot size " + plan.slots[j].to_string() + " is negative");
    int64_t aligned = round_up(bytes, plan.alignment);
    if (__builtin_add_overflow(total, aligned, &total)) {
      return invalid_argument("the arena size overflows 64 bits");
    }
  }
  return total;
}

// "1024*N + align64(4*S*S)": slots whose size is a multiple of the alignment for every binding
// are summed as one polynomial; the others are listed as align64(...).
std::string aligned_slot_sum_string(const ExecutionPlan& plan, size_t end) {
  SizeExpr exact;
  std::string rounded;
  for (size_t j = 0; j < end && j < plan.slots.size(); ++j) {
    const SizeExpr& slot = plan.slots[j];
    if (slot.align_up(plan.alignment) == slot) {
      exact = exact + slot;
    } else {
      rounded += " + align" + std::to_string(plan.alignment) + "(" + slot.to_string() + ")";
    }
  }
  if (rounded.empty()) return exact.to_string();
  if (exact.terms().empty()) return rounded.substr(3);
  return exact.to_string() + rounded;
}

}  // namespace

Result<int64_t> ExecutionPlan::arena_offset(const BufferAssignment& buffer,
                                            const SymbolBindings& bindings) const {
  if (slots.empty() || buffer.slot == kNoSlot) return buffer.offset.evaluate(bindings);
  if (buffer.slot >= slots.size()) return corrupt("arena slot " + std::to_string(buffer.slot) + " out of range");
  return aligned_slot_sum(*this, buffer.slot, bindings);
}

Result<int64_t> ExecutionPlan::arena_size(const SymbolBindings& bindings) const {
  if (slots.empty()) return arena_bytes.evaluate(bindings);
  return aligned_slot_sum(*this, slots.size(), bindings);
}

std::string ExecutionPlan::arena_offset_string(const BufferAssignment& buffer) const {
  if (slots.empty() || buffer.slot == kNoSlot || buffer.slot > slots.size()) return buffer.offset.to_string();
  return aligned_slot_sum_string(*this, buffer.slot);
}

std::string ExecutionPlan::arena_size_string() const {
  if (slots.empty()) return arena_bytes.to_string();
  return aligned_slot_sum_string(*this, slots.size());
}

}  // namespace kiln::ir
