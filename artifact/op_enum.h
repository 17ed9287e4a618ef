// The artifact file numbers ops with its own enum (kiln.fbs OpKind), matched to ir's operator
// table by name (ir::op_kind_id). This check lists where the two disagree, for the unit test
// that keeps them in step: an ir op without a file value, or a file value without an ir op.
#pragma once

#include <string>
#include <vector>

namespace kiln::artifact {

// One line per mismatch ("ir op 'Erf' has no value in kiln.fbs"); empty when the lists agree.
std::vector<std::string> op_enum_mismatches();

}  // namespace kiln::artifact
