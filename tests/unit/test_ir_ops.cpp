// The operator table (ir/ops.cpp) is complete and consistent: every row carries the facts its
// family needs, so that a stage reading the table never meets a missing function or template,
// and the artifact's op enum agrees with the table.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "artifact/op_enum.h"
#include "ir/ops.h"
#include "ir/tensor.h"

namespace {

using kiln::ir::DTypeClass;
using kiln::ir::FusionClass;
using kiln::ir::OpFamily;
using kiln::ir::OpInfo;
using kiln::ir::OpKind;

std::string name_of(const OpInfo& info) { return std::string(info.name); }

}  // namespace

TEST_CASE("ops: every row names its kind, a unique spelling and a consistent arity") {
  std::set<std::string_view> names, ids;
  for (int k = 0; k < kiln::ir::kNumOpKinds; ++k) {
    const OpInfo& info = kiln::ir::op_info(OpKind(k));
    INFO(name_of(info));
    CHECK(int(info.kind) == k);
    CHECK(names.insert(info.name).second);
    CHECK(ids.insert(kiln::ir::op_kind_id(info.kind)).second);
    CHECK(info.min_inputs >= 0);
    CHECK((info.max_inputs == -1 || info.max_inputs >= info.min_inputs));
    if (info.family != OpFamily::kSource) {
      CHECK(kiln::ir::parse_op_name(info.name) == info.kind);
      CHECK((info.infer != nullptr));
      CHECK((info.eval != nullptr));
    } else {
      CHECK(info.fusion == FusionClass::kSource);
      CHECK_FALSE(kiln::ir::parse_op_name(info.name).has_value());
    }
    // Required attribute names fill the array from the front.
    CHECK((!info.required_attrs[0].empty() || info.required_attrs[1].empty()));
  }
  CHECK(kiln::ir::op_kind_id(OpKind::kReduceSum) == "ReduceSum");
  CHECK_FALSE(kiln::ir::parse_op_name("no_such_op").has_value());
}

TEST_CASE("ops: elementwise rows carry their scalar functions and C expression templates") {
  for (int k = 0; k < kiln::ir::kNumOpKinds; ++k) {
    const OpInfo& info = kiln::ir::op_info(OpKind(k));
    INFO(name_of(info));
    const bool elementwise_family =
        info.family == OpFamily::kUnary || info.family == OpFamily::kBinary || info.family == OpFamily::kCompare ||
        info.family == OpFamily::kLogic || info.family == OpFamily::kSelect || info.family == OpFamily::kConvert;
    CHECK(info.elementwise() == elementwise_family);
    switch (info.family) {
      case OpFamily::kUnary:
        // A float form exists unless the op takes integers only (bitwise_not), in the
        // interpreter exactly when in the kernels; the same holds for the integer form.
        CHECK((info.scalar.unary_f != nullptr) == (info.operand_dtypes != DTypeClass::kInteger));
        CHECK(info.expr.float_form.empty() == (info.operand_dtypes == DTypeClass::kInteger));
        CHECK((info.scalar.unary_i != nullptr) == !info.expr.int_form.empty());
        break;
      case OpFamily::kBinary:
      case OpFamily::kCompare:
        CHECK((info.scalar.binary_f != nullptr) == (info.operand_dtypes != DTypeClass::kInteger));
        CHECK(info.expr.float_form.empty() == (info.operand_dtypes == DTypeClass::kInteger));
        // Exactly one integer function: plain, or given the dtype's width.
        CHECK(((info.scalar.binary_i != nullptr) != (info.scalar.binary_bits != nullptr)));
        CHECK_FALSE(info.expr.int_form.empty());
        CHECK(info.expr.bool_result == (info.family == OpFamily::kCompare));
        break;
      case OpFamily::kLogic:
        CHECK((info.scalar.binary_i != nullptr));
        CHECK_FALSE(info.expr.int_form.empty());
        CHECK(info.expr.bool_result);
        break;
      case OpFamily::kReduce:
        CHECK(info.fusion == FusionClass::kPrologueAnchor);
        if (info.kind != OpKind::kArgMax) {
          CHECK((info.reduce.combine_f != nullptr));
          CHECK((info.reduce.combine_i != nullptr));
          CHECK_FALSE(info.reduce.c_identity.empty());
          // Kernels combine partial results with a binary op's expression.
          CHECK(kiln::ir::op_info(info.reduce.combine).family == OpFamily::kBinary);
        }
        break;
      case OpFamily::kNormalize:
        CHECK(info.fusion == FusionClass::kPrologueAnchor);
        break;
      case OpFamily::kSource: case OpFamily::kSelect: case OpFamily::kConvert: case OpFamily::kLinalg: case OpFamily::kAttention:
      case OpFamily::kLayout: case OpFamily::kConv:
        break;
    }
  }
}

TEST_CASE("ops: the scalar functions give the documented integer corner cases") {
  const auto& div = kiln::ir::op_info(OpKind::kDiv).scalar;
  CHECK(div.binary_i(7, -2) == -3);                   // truncates toward zero
  CHECK(div.binary_i(5, 0) == 0);                     // x / 0 == 0
  CHECK(div.binary_i(INT64_MIN, -1) == INT64_MIN);    // wraps
  const auto& pow = kiln::ir::op_info(OpKind::kPow).scalar;
  CHECK(pow.binary_i(2, -1) == 0);
  CHECK(pow.binary_i(-1, -3) == -1);
  CHECK(pow.binary_i(0, 0) == 1);
  const auto& fmod = kiln::ir::op_info(OpKind::kFmod).scalar;
  CHECK(fmod.binary_i(7, -2) == 1);                   // the dividend's sign
  CHECK(fmod.binary_i(-7, 2) == -1);
  CHECK(fmod.binary_i(5, 0) == 0);                    // x fmod 0 == 0, like x / 0
  CHECK(fmod.binary_i(INT64_MIN, -1) == 0);           // no overflow trap
  CHECK(fmod.binary_f(-7.5, 2.0) == -1.5);
  // Shifts by amounts outside [0, bits): 0, or the sign fill for a negative value shifted right.
  const auto& shl = kiln::ir::op_info(OpKind::kShiftLeft).scalar;
  const auto& shr = kiln::ir::op_info(OpKind::kShiftRight).scalar;
  CHECK(shl.binary_bits(3, 2, 8) == 12);
  CHECK(shl.binary_bits(3, 8, 8) == 0);
  CHECK(shl.binary_bits(3, -1, 32) == 0);
  CHECK(shl.binary_bits(INT64_MIN, 1, 64) == 0);  // no overflow trap
  CHECK(shr.binary_bits(-16, 2, 32) == -4);       // arithmetic
  CHECK(shr.binary_bits(-16, 32, 32) == -1);
  CHECK(shr.binary_bits(16, -3, 8) == 0);
  CHECK(kiln::ir::op_info(OpKind::kReciprocal).scalar.unary_i(2) == 0);
  CHECK(kiln::ir::op_info(OpKind::kNeg).scalar.unary_i(INT64_MIN) == INT64_MIN);
  CHECK(kiln::ir::op_info(OpKind::kReduceMax).reduce.needs_elements);
  CHECK_FALSE(kiln::ir::op_info(OpKind::kReduceSum).reduce.needs_elements);
}

TEST_CASE("ops: the artifact's op enum (kiln.fbs) agrees with the operator table") {
  std::string mismatches;
  for (const std::string& m : kiln::artifact::op_enum_mismatches()) mismatches += m + "\n";
  CHECK_MESSAGE(mismatches.empty(), mismatches);
}
