// PackedLayout: a constant stored a second time, in the blocked layout a vendor library's
// primitive reads it in (oneDNN's "OIhw16i16o" and kin), so that a driver can use it in place
// instead of reordering it at every load (artifact::ConvCall::packed_layout). The writer packs
// the source constant (pack_constant); the reader hands the packed bytes to the driver, which
// uses them only where its library asks for exactly this layout.
//
// The layout is oneDNN's "blocked" memory format, written out: element (i_0, ..., i_{n-1}) of
// the logical dims is at
//   sum_d (i_d / B_d) * outer_strides[d]  +  the offset of its inner-block indices
// where B_d is the product of dim d's inner block sizes, and the inner blocks (dim, size),
// outermost first, form a dense row-major block. Each dim is padded to padded_dims[d] (a multiple
// of B_d) with zeros. The source: element (i_0, ...) of the constant is at
// sum_d i_d * source_strides[d].
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "support/status.h"

namespace kiln::artifact {

struct PackedLayout {
  std::vector<int64_t> dims;           // logical dims, outermost first
  std::vector<int64_t> source_strides; // the source constant's strides, in elements, per dim
  std::vector<int64_t> padded_dims;    // each dims[d] rounded up to its blocks' product
  std::vector<int64_t> outer_strides;  // in elements, per dim
  std::vector<int32_t> inner_dims;     // the inner blocks, outermost first: which dim,
  std::vector<int64_t> inner_sizes;    //   and its size
  bool operator==(const PackedLayout&) const = default;
};

// kInvalidArgument unless `layout` is consistent (1-6 dims; positive sizes; padded dims multiples
// of their blocks; every packed offset inside packed_elements(); every source offset below
// `source_elements`). The reader checks a file's layouts with it.
Status check_packed_layout(const PackedLayout& layout, uint64_t source_elements);

// The packed tensor's element count: the extent its outer strides and inner block reach.
// Precondition: check_packed_layout passed.
uint64_t packed_elements(const PackedLayout& layout);

// Writes the packed form of `source` (elements of `element_bytes` each: 1, 2, 4 or 8) to `out`
// (packed_elements(layout) * element_bytes bytes), padding with zero bytes.
// Precondition: check_packed_layout(layout, source's element count) passed.
void pack_constant(const PackedLayout& layout, const std::byte* source, size_t element_bytes, std::byte* out);

}  // namespace kiln::artifact
