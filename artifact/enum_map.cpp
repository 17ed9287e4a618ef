// Explicit ir:: <-> file enum mapping (see enum_map.h). Generated once by hand from the two enum
// lists; keep both directions in sync when adding a value (append to kiln.fbs, never renumber).
#include "artifact/enum_map.h"

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
  }
  return std::nullopt;  // a value this build does not know
}

fb::OpKind to_fb(ir::OpKind v) {
  switch (v) {
    case ir::OpKind::kInput: return fb::OpKind::Input;
    case ir::OpKind::kConstant: return fb::OpKind::Constant;
    case ir::OpKind::kNeg: return fb::OpKind::Neg;
    case ir::OpKind::kAbs: return fb::OpKind::Abs;
    case ir::OpKind::kExp: return fb::OpKind::Exp;
    case ir::OpKind::kLog: return fb::OpKind::Log;
    case ir::OpKind::kSqrt: return fb::OpKind::Sqrt;
    case ir::OpKind::kRsqrt: return fb::OpKind::Rsqrt;
    case ir::OpKind::kReciprocal: return fb::OpKind::Reciprocal;
    case ir::OpKind::kTanh: return fb::OpKind::Tanh;
    case ir::OpKind::kSigmoid: return fb::OpKind::Sigmoid;
    case ir::OpKind::kRelu: return fb::OpKind::Relu;
    case ir::OpKind::kSilu: return fb::OpKind::Silu;
    case ir::OpKind::kErf: return fb::OpKind::Erf;
    case ir::OpKind::kSin: return fb::OpKind::Sin;
    case ir::OpKind::kCos: return fb::OpKind::Cos;
    case ir::OpKind::kFloor: return fb::OpKind::Floor;
    case ir::OpKind::kCeil: return fb::OpKind::Ceil;
    case ir::OpKind::kRound: return fb::OpKind::Round;
    case ir::OpKind::kSign: return fb::OpKind::Sign;
    case ir::OpKind::kGelu: return fb::OpKind::Gelu;
    case ir::OpKind::kNot: return fb::OpKind::Not;
    case ir::OpKind::kAdd: return fb::OpKind::Add;
    case ir::OpKind::kSub: return fb::OpKind::Sub;
    case ir::OpKind::kMul: return fb::OpKind::Mul;
    case ir::OpKind::kDiv: return fb::OpKind::Div;
    case ir::OpKind::kPow: return fb::OpKind::Pow;
    case ir::OpKind::kMaximum: return fb::OpKind::Maximum;
    case ir::OpKind::kMinimum: return fb::OpKind::Minimum;
    case ir::OpKind::kEqual: return fb::OpKind::Equal;
    case ir::OpKind::kNotEqual: return fb::OpKind::NotEqual;
    case ir::OpKind::kLess: return fb::OpKind::Less;
    case ir::OpKind::kLessEqual: return fb::OpKind::LessEqual;
    case ir::OpKind::kGreater: return fb::OpKind::Greater;
    case ir::OpKind::kGreaterEqual: return fb::OpKind::GreaterEqual;
    case ir::OpKind::kAnd: return fb::OpKind::And;
    case ir::OpKind::kOr: return fb::OpKind::Or;
    case ir::OpKind::kXor: return fb::OpKind::Xor;
    case ir::OpKind::kWhere: return fb::OpKind::Where;
    case ir::OpKind::kCast: return fb::OpKind::Cast;
    case ir::OpKind::kClamp: return fb::OpKind::Clamp;
    case ir::OpKind::kReduceSum: return fb::OpKind::ReduceSum;
    case ir::OpKind::kReduceMean: return fb::OpKind::ReduceMean;
    case ir::OpKind::kReduceMax: return fb::OpKind::ReduceMax;
    case ir::OpKind::kReduceMin: return fb::OpKind::ReduceMin;
    case ir::OpKind::kReduceProd: return fb::OpKind::ReduceProd;
    case ir::OpKind::kArgMax: return fb::OpKind::ArgMax;
    case ir::OpKind::kSoftmax: return fb::OpKind::Softmax;
    case ir::OpKind::kLogSoftmax: return fb::OpKind::LogSoftmax;
    case ir::OpKind::kLayerNorm: return fb::OpKind::LayerNorm;
    case ir::OpKind::kMatMul: return fb::OpKind::MatMul;
    case ir::OpKind::kReshape: return fb::OpKind::Reshape;
    case ir::OpKind::kTranspose: return fb::OpKind::Transpose;
    case ir::OpKind::kBroadcastTo: return fb::OpKind::BroadcastTo;
    case ir::OpKind::kSlice: return fb::OpKind::Slice;
    case ir::OpKind::kConcat: return fb::OpKind::Concat;
    case ir::OpKind::kGather: return fb::OpKind::Gather;
    case ir::OpKind::kConv2d: return fb::OpKind::Conv2d;
    case ir::OpKind::kMaxPool2d: return fb::OpKind::MaxPool2d;
    case ir::OpKind::kAvgPool2d: return fb::OpKind::AvgPool2d;
    case ir::OpKind::kGlobalAvgPool2d: return fb::OpKind::GlobalAvgPool2d;
  }
  KILN_CHECK(false, "unknown ir::OpKind");
  return fb::OpKind::Input;
}

std::optional<ir::OpKind> from_fb(fb::OpKind v) {
  switch (v) {
    case fb::OpKind::Input: return ir::OpKind::kInput;
    case fb::OpKind::Constant: return ir::OpKind::kConstant;
    case fb::OpKind::Neg: return ir::OpKind::kNeg;
    case fb::OpKind::Abs: return ir::OpKind::kAbs;
    case fb::OpKind::Exp: return ir::OpKind::kExp;
    case fb::OpKind::Log: return ir::OpKind::kLog;
    case fb::OpKind::Sqrt: return ir::OpKind::kSqrt;
    case fb::OpKind::Rsqrt: return ir::OpKind::kRsqrt;
    case fb::OpKind::Reciprocal: return ir::OpKind::kReciprocal;
    case fb::OpKind::Tanh: return ir::OpKind::kTanh;
    case fb::OpKind::Sigmoid: return ir::OpKind::kSigmoid;
    case fb::OpKind::Relu: return ir::OpKind::kRelu;
    case fb::OpKind::Silu: return ir::OpKind::kSilu;
    case fb::OpKind::Erf: return ir::OpKind::kErf;
    case fb::OpKind::Sin: return ir::OpKind::kSin;
    case fb::OpKind::Cos: return ir::OpKind::kCos;
    case fb::OpKind::Floor: return ir::OpKind::kFloor;
    case fb::OpKind::Ceil: return ir::OpKind::kCeil;
    case fb::OpKind::Round: return ir::OpKind::kRound;
    case fb::OpKind::Sign: return ir::OpKind::kSign;
    case fb::OpKind::Gelu: return ir::OpKind::kGelu;
    case fb::OpKind::Not: return ir::OpKind::kNot;
    case fb::OpKind::Add: return ir::OpKind::kAdd;
    case fb::OpKind::Sub: return ir::OpKind::kSub;
    case fb::OpKind::Mul: return ir::OpKind::kMul;
    case fb::OpKind::Div: return ir::OpKind::kDiv;
    case fb::OpKind::Pow: return ir::OpKind::kPow;
    case fb::OpKind::Maximum: return ir::OpKind::kMaximum;
    case fb::OpKind::Minimum: return ir::OpKind::kMinimum;
    case fb::OpKind::Equal: return ir::OpKind::kEqual;
    case fb::OpKind::NotEqual: return ir::OpKind::kNotEqual;
    case fb::OpKind::Less: return ir::OpKind::kLess;
    case fb::OpKind::LessEqual: return ir::OpKind::kLessEqual;
    case fb::OpKind::Greater: return ir::OpKind::kGreater;
    case fb::OpKind::GreaterEqual: return ir::OpKind::kGreaterEqual;
    case fb::OpKind::And: return ir::OpKind::kAnd;
    case fb::OpKind::Or: return ir::OpKind::kOr;
    case fb::OpKind::Xor: return ir::OpKind::kXor;
    case fb::OpKind::Where: return ir::OpKind::kWhere;
    case fb::OpKind::Cast: return ir::OpKind::kCast;
    case fb::OpKind::Clamp: return ir::OpKind::kClamp;
    case fb::OpKind::ReduceSum: return ir::OpKind::kReduceSum;
    case fb::OpKind::ReduceMean: return ir::OpKind::kReduceMean;
    case fb::OpKind::ReduceMax: return ir::OpKind::kReduceMax;
    case fb::OpKind::ReduceMin: return ir::OpKind::kReduceMin;
    case fb::OpKind::ReduceProd: return ir::OpKind::kReduceProd;
    case fb::OpKind::ArgMax: return ir::OpKind::kArgMax;
    case fb::OpKind::Softmax: return ir::OpKind::kSoftmax;
    case fb::OpKind::LogSoftmax: return ir::OpKind::kLogSoftmax;
    case fb::OpKind::LayerNorm: return ir::OpKind::kLayerNorm;
    case fb::OpKind::MatMul: return ir::OpKind::kMatMul;
    case fb::OpKind::Reshape: return ir::OpKind::kReshape;
    case fb::OpKind::Transpose: return ir::OpKind::kTranspose;
    case fb::OpKind::BroadcastTo: return ir::OpKind::kBroadcastTo;
    case fb::OpKind::Slice: return ir::OpKind::kSlice;
    case fb::OpKind::Concat: return ir::OpKind::kConcat;
    case fb::OpKind::Gather: return ir::OpKind::kGather;
    case fb::OpKind::Conv2d: return ir::OpKind::kConv2d;
    case fb::OpKind::MaxPool2d: return ir::OpKind::kMaxPool2d;
    case fb::OpKind::AvgPool2d: return ir::OpKind::kAvgPool2d;
    case fb::OpKind::GlobalAvgPool2d: return ir::OpKind::kGlobalAvgPool2d;
  }
  return std::nullopt;  // a value this build does not know
}

fb::KernelKind to_fb(ir::KernelKind v) {
  switch (v) {
    case ir::KernelKind::kElementwise: return fb::KernelKind::Elementwise;
    case ir::KernelKind::kReduction: return fb::KernelKind::Reduction;
    case ir::KernelKind::kNormalization: return fb::KernelKind::Normalization;
    case ir::KernelKind::kMatMul: return fb::KernelKind::MatMul;
    case ir::KernelKind::kLayout: return fb::KernelKind::Layout;
    case ir::KernelKind::kConv: return fb::KernelKind::Conv;
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
