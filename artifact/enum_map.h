// Mapping between the ir:: enums and the artifact file's enums (kiln.fbs). Internal to the
// artifact library. Ops map by name (ir::op_kind_id == the kiln.fbs value's name; a unit test
// checks both lists agree); the smaller enums by switches without default, so -Wswitch flags a
// new ir:: value that has no file encoding yet. The file -> ir direction returns nullopt for
// values this build does not know (a corrupt or newer file).
#pragma once

#include <optional>

#include "ir/dtype.h"
#include "ir/graph.h"
#include "ir/ops.h"
#include "ir/plan.h"
#include "kiln_generated.h"

namespace kiln::artifact::detail {

fb::DType to_fb(ir::DType dtype);
std::optional<ir::DType> from_fb(fb::DType dtype);

fb::OpKind to_fb(ir::OpKind kind);
std::optional<ir::OpKind> from_fb(fb::OpKind kind);

fb::KernelKind to_fb(ir::KernelKind kind);
std::optional<ir::KernelKind> from_fb(fb::KernelKind kind);

fb::Storage to_fb(ir::Storage storage);
std::optional<ir::Storage> from_fb(fb::Storage storage);

}  // namespace kiln::artifact::detail
