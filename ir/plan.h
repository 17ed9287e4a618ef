// ExecutionPlan: what the memory-planning pass decides and the runtime executes.
//
// Sizes and offsets may depend on symbolic dims, so they are SizeExprs: polynomials in the
// symbols with integer coefficients (e.g. 3136*N + 1024), evaluated once the runtime has bound
// every symbol from the input shapes.
//
// All intermediate values live in one arena; graph inputs, outputs and constants have their own
// buffers (Storage says which).
//
// The arena is a sequence of slots; liveness lets several values share one slot. A slot's
// capacity is an exact byte count (a SizeExpr); at run time each slot starts at the sum of the
// earlier slots' capacities, each rounded up to `alignment` once the symbols are known
// (arena_offset / arena_size). Rounding a symbolic size at compile time instead would have to
// round every coefficient (4*S*S -> 64*S*S), wasting up to 16x for small element types.
// BufferAssignment::offset and arena_bytes are that compile-time upper bound: exact when every
// size is a multiple of the alignment (all static plans, most symbolic ones), and what a plan
// without slots falls back to.
//
// Thread-safety: plain data.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/shape.h"
#include "support/status.h"

namespace kiln::ir {

// sum over terms of coeff * product(symbols); a term with no symbols is the constant.
class SizeExpr {
 public:
  SizeExpr() = default;
  static SizeExpr constant(int64_t c);
  static SizeExpr symbol(const std::string& name);
  // Product of a shape's dims times `scale` (e.g. the element size).
  static SizeExpr of_shape(const Shape& shape, int64_t scale);

  SizeExpr operator+(const SizeExpr& o) const;
  SizeExpr operator*(int64_t k) const;
  bool operator==(const SizeExpr& o) const { return terms_ == o.terms_; }

  bool is_constant() const;
  int64_t constant_value() const;  // the constant term
  // Upper bound comparison that holds for every binding of symbols >= 1: true if every
  // coefficient of *this is >= the matching coefficient of o.
  bool dominates(const SizeExpr& o) const;
  // Rounds up to a multiple of `alignment` (exact for constants; symbolic terms are rounded
  // coefficient-wise, which keeps the result an upper bound and aligned).
  SizeExpr align_up(int64_t alignment) const;

  Result<int64_t> evaluate(const SymbolBindings& bindings) const;
  std::string to_string() const;  // "3136*N + 1024"

  // monomial (sorted symbol names, repeated for powers) -> coefficient
  const std::map<std::vector<std::string>, int64_t>& terms() const { return terms_; }
  std::map<std::vector<std::string>, int64_t>& mutable_terms() { return terms_; }

 private:
  std::map<std::vector<std::string>, int64_t> terms_;
};

enum class Storage : uint8_t {
  kArena,     // an intermediate, at `offset` in the session arena
  kInput,     // bound by the caller
  kOutput,    // bound by the caller (or allocated by the session)
  kConstant,  // stored in the artifact
  kAlias,     // a view of another buffer (reshape of a contiguous value): alias_of + same offset
};

// "arena", "input", "output", "constant", "alias" (plan dumps, diagnostics).
std::string_view storage_name(Storage storage);

inline constexpr uint32_t kNoSlot = ~uint32_t(0);

struct BufferAssignment {
  NodeId value = kNoNode;
  Storage storage = Storage::kArena;
  SizeExpr offset;  // upper bound of the arena offset (see above) ; 0 outside the arena
  SizeExpr size;    // bytes
  NodeId alias_of = kNoNode;
  uint32_t slot = kNoSlot;  // arena slot (kArena, and kAlias of an arena value)
};

struct Launch {
  uint32_t kernel = 0;       // index into Graph::kernels()
  Shape launch_shape;        // the index space the kernel iterates (e.g. [N, 256] or [rows, 1])
};

struct ExecutionPlan {
  std::vector<Launch> launches;          // in execution order
  std::vector<BufferAssignment> buffers; // one per materialized value
  std::vector<SizeExpr> slots;           // arena slots in arena order: capacity in bytes
  SizeExpr arena_bytes;                  // upper bound of the peak arena size (see above)
  int64_t alignment = 64;                // every arena offset is a multiple of this

  const BufferAssignment* find_buffer(NodeId value) const;

  // Byte offset of an arena buffer, and the arena's size, for actual symbol sizes. Drivers use
  // these (never offset.evaluate directly): they guarantee alignment-multiple offsets.
  Result<int64_t> arena_offset(const BufferAssignment& buffer, const SymbolBindings& bindings) const;
  Result<int64_t> arena_size(const SymbolBindings& bindings) const;
  // The same, as text for --emit=plan: "1024*N + align64(4*S*S)" (align64 marks a size that is
  // rounded up once the symbols are bound).
  std::string arena_offset_string(const BufferAssignment& buffer) const;
  std::string arena_size_string() const;
};

}  // namespace kiln::ir
