// ir:: <-> file enum mapping (see enum_map.h). Ops are mapped by name (below); the smaller enums
// by hand. Append new values to kiln.fbs, never renumber.
#include "artifact/enum_map.h"

#include "artifact/op_enum.h"

#include <array>
#include <vector>

#include "support/check.h"

namespace kiln::artifact::detail {

fb::DType to_fb(ir::DType v) {
  switch (v) {
    case ir::DType::kF32: return fb::DType::F32;
    case ir::DType::kF16: return fb::DType::F16;
    case ir::DType::kBF16: return fb::DType::BF16;
    case ir::DType::kI64: return fb::DType::I64;
    case ir::DType::kI32: return fb::DType::I32;
    case ir::DType::kI8: return fb::DType::I8;
    case ir::DType::kU8: return fb::DType::U8;
    case ir::DType::kBool: return fb::DType::Bool;
    case ir::DType::kI16: return fb::DType::I16;
    case ir::DType::kU16: return fb::DType::U16;
    case ir::DType::kU32: return fb::DType::U32;
    case ir::DType::kF64: return fb::DType::F64;
    case ir::DType::kF8E4M3FN: return fb::DType::F8E4M3FN;
    case ir::DType::kF8E4M3FNUZ: return fb::DType::F8E4M3FNUZ;
    case ir::DType::kF8E5M2: return fb::DType::F8E5M2;
    case ir::DType::kF8E5M2FNUZ: return fb::DType::F8E5M2FNUZ;
  }
  KILN_CHECK(false, "unknown ir::DType");
  return fb::DType::F32;
}

std::optional<ir::DType> from_fb(fb::DType v) {
  switch (v) {
    case fb::DType::F32: return ir::DType::kF32;
    case fb::DType::F16: return ir::DType::kF16;
    case fb::DType::BF16: return ir::DType::kBF16;
    case fb::DType::I64: return ir::DType::kI64;
    case fb::DType::I32: return ir::DType::kI32;
    case fb::DType::I8: return ir::DType::kI8;
    case fb::DType::U8: return ir::DType::kU8;
    case fb::DType::Bool: return ir::DType::kBool;
    case fb::DType::I16: return ir::DType::kI16;
    case fb::DType::U16: return ir::DType::kU16;
    case fb::DType::U32: return ir::DType::kU32;
    case fb::DType::F64: return ir::DType::kF64;
    case fb::DType::F8E4M3FN: return ir::DType::kF8E4M3FN;
    case fb::DType::F8E4M3FNUZ: return ir::DType::kF8E4M3FNUZ;
    case fb::DType::F8E5M2: return ir::DType::kF8E5M2;
    case fb::DType::F8E5M2FNUZ: return ir::DType::kF8E5M2FNUZ;
  }
  return std::nullopt;  // a value this build does not know
}

namespace {

// The file's op enum and ir's operator table meet by name: each OpKind's identifier
// (ir::op_kind_id, "ReduceSum") is the name of its kiln.fbs value. The mapping is built once from
// the two lists; test_artifact checks that every ir op has a file value and every file value an
// ir op, so a new op without a kiln.fbs value fails there.
struct OpKindMap {
  std::array<std::optional<fb::OpKind>, ir::kNumOpKinds> to_file;
  std::vector<std::optional<ir::OpKind>> from_file;  // indexed by the file value

  OpKindMap() {
    from_file.assign(size_t(fb::OpKind::MAX) + 1, std::nullopt);
    for (fb::OpKind file : fb::EnumValuesOpKind()) {
      for (int k = 0; k < ir::kNumOpKinds; ++k) {
        if (ir::op_kind_id(ir::OpKind(k)) != fb::EnumNameOpKind(file)) continue;
        to_file[size_t(k)] = file;
        from_file[size_t(file)] = ir::OpKind(k);
      }
    }
  }
};

const OpKindMap& op_kind_map() {
  static const OpKindMap map;
  return map;
}

}  // namespace

fb::OpKind to_fb(ir::OpKind v) {
  const std::optional<fb::OpKind>& file = op_kind_map().to_file.at(size_t(v));
  KILN_CHECK(file.has_value(), "ir::OpKind without a value in artifact/kiln.fbs");
  return *file;
}

std::optional<ir::OpKind> from_fb(fb::OpKind v) {
  const auto& from_file = op_kind_map().from_file;
  if (size_t(v) >= from_file.size()) return std::nullopt;  // a value this build does not know
  return from_file[size_t(v)];
}

fb::KernelKind to_fb(ir::KernelKind v) {
  switch (v) {
    case ir::KernelKind::kElementwise: return fb::KernelKind::Elementwise;
    case ir::KernelKind::kReduction: return fb::KernelKind::Reduction;
    case ir::KernelKind::kNormalization: return fb::KernelKind::Normalization;
    case ir::KernelKind::kMatMul: return fb::KernelKind::MatMul;
    case ir::KernelKind::kLayout: return fb::KernelKind::Layout;
    case ir::KernelKind::kConv: return fb::KernelKind::Conv;
    case ir::KernelKind::kAttention: return fb::KernelKind::Attention;
  }
  KILN_CHECK(false, "unknown ir::KernelKind");
  return fb::KernelKind::Elementwise;
}

std::optional<ir::KernelKind> from_fb(fb::KernelKind v) {
  switch (v) {
    case fb::KernelKind::Elementwise: return ir::KernelKind::kElementwise;
    case fb::KernelKind::Reduction: return ir::KernelKind::kReduction;
    case fb::KernelKind::Normalization: return ir::KernelKind::kNormalization;
    case fb::KernelKind::MatMul: return ir::KernelKind::kMatMul;
    case fb::KernelKind::Layout: return ir::KernelKind::kLayout;
    case fb::KernelKind::Conv: return ir::KernelKind::kConv;
    case fb::KernelKind::Attention: return ir::KernelKind::kAttention;
  }
  return std::nullopt;  // a value this build does not know
}

fb::Storage to_fb(ir::Storage v) {
  switch (v) {
    case ir::Storage::kArena: return fb::Storage::Arena;
    case ir::Storage::kInput: return fb::Storage::Input;
    case ir::Storage::kOutput: return fb::Storage::Output;
    case ir::Storage::kConstant: return fb::Storage::Constant;
    case ir::Storage::kAlias: return fb::Storage::Alias;
  }
  KILN_CHECK(false, "unknown ir::Storage");
  return fb::Storage::Arena;
}

std::optional<ir::Storage> from_fb(fb::Storage v) {
  switch (v) {
    case fb::Storage::Arena: return ir::Storage::kArena;
    case fb::Storage::Input: return ir::Storage::kInput;
    case fb::Storage::Output: return ir::Storage::kOutput;
    case fb::Storage::Constant: return ir::Storage::kConstant;
    case fb::Storage::Alias: return ir::Storage::kAlias;
  }
  return std::nullopt;  // a value this build does not know
}

}  // namespace kiln::artifact::detail

namespace kiln::artifact {

std::vector<std::string> op_enum_mismatches() {
  std::vector<std::string> out;
  const auto& map = detail::op_kind_map();
  for (int k = 0; k < ir::kNumOpKinds; ++k) {
    if (!map.to_file[size_t(k)]) {
      out.push_back("ir op '" + std::string(ir::op_kind_id(ir::OpKind(k))) + "' has no value in kiln.fbs");
    }
  }
  for (fb::OpKind file : fb::EnumValuesOpKind()) {
    if (!map.from_file[size_t(file)]) {
      out.push_back("kiln.fbs op '" + std::string(fb::EnumNameOpKind(file)) + "' is no ir op");
    }
  }
  return out;
}

}  // namespace kiln::artifact
