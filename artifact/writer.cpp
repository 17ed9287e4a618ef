// The artifact writer: ir::Graph + ir::ExecutionPlan (+ kernel binaries) -> .kiln bytes, laid
// out as kiln.fbs describes: the header, the constants' data segment, then the model.
//
// The writer checks every reference it serializes (node inputs, outputs, kernels, plan) so that
// a file it produces always passes the reader's semantic checks; a failure here is a bug in the
// caller's graph and is reported as kInvalidArgument naming what is wrong.
#include "artifact/writer.h"

#include <fcntl.h>
#include <flatbuffers/flatbuffers.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "artifact/enum_map.h"
#include "support/check.h"
#include "kiln_generated.h"

namespace kiln::artifact {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;
using flatbuffers::Vector;

// Serializes one graph + plan. Holds the builder and a cache of symbol strings (symbolic dims
// repeat on almost every node, so sharing them keeps files of large graphs small).
class Writer {
 public:
  explicit Writer(size_t size_hint) : fbb_(size_hint) {}

  // Builds the model part in the builder, its constants placed as `layout` says; the result
  // points into the builder (valid while the Writer lives).
  Result<std::span<const uint8_t>> write(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                         const WriteOptions& options, const DataLayout& layout);

 private:
  Status check_references(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                          const WriteOptions& options) const;

  Offset<flatbuffers::String> shared_string(const std::string& s) { return fbb_.CreateSharedString(s); }
  Offset<Vector<Offset<fb::Dim>>> dims(const ir::Shape& shape);
  Offset<fb::TensorType> tensor_type(const ir::TensorType& type);
  Offset<Vector<int64_t>> longs(const std::vector<int64_t>& v) { return fbb_.CreateVector(v); }
  template <size_t N>
  Offset<Vector<int64_t>> longs(const std::array<int64_t, N>& v) {
    return fbb_.CreateVector(v.data(), v.size());
  }
  Offset<Vector<uint32_t>> ids(const std::vector<ir::NodeId>& v) { return fbb_.CreateVector(v); }
  std::pair<fb::Attrs, Offset<void>> attrs(const ir::Attrs& attrs);
  Offset<fb::Node> node(const ir::Node& node);
  Offset<fb::Graph> graph(const ir::Graph& graph, const DataLayout& layout);
  Offset<fb::SizeExpr> size_expr(const ir::SizeExpr& expr);
  Offset<fb::Plan> plan(const ir::ExecutionPlan& plan);
  Offset<Vector<Offset<fb::Target>>> targets(const std::vector<KernelBinary>& kernels,
                                             const std::vector<ModuleBinary>& modules, const DataLayout& layout);
  Offset<fb::GemmCall> gemm_call(const GemmCall& call);
  // `packed`: where the call's packed weights went (null when it has none).
  Offset<fb::ConvCall> conv_call(const ConvCall& call, const DataLayout::Packed* packed);
  Offset<fb::KernelDispatch> dispatch(const KernelDispatch& d);
  // A library call's in-place epilogue: its args and dispatch (null offsets when there is none).
  std::pair<Offset<Vector<uint32_t>>, Offset<fb::KernelDispatch>> library_epilogue(const LibraryEpilogue& e);

  FlatBufferBuilder fbb_;
};

Offset<Vector<Offset<fb::Dim>>> Writer::dims(const ir::Shape& shape) {
  std::vector<Offset<fb::Dim>> out;
  out.reserve(shape.size());
  for (const ir::Dim& d : shape) {
    if (d.is_symbolic()) {
      auto name = shared_string(d.symbol_name());
      out.push_back(fb::CreateDim(fbb_, 0, name));
    } else {
      out.push_back(fb::CreateDim(fbb_, d.size()));
    }
  }
  return fbb_.CreateVector(out);
}

Offset<fb::TensorType> Writer::tensor_type(const ir::TensorType& type) {
  auto shape = dims(type.shape);
  return fb::CreateTensorType(fbb_, detail::to_fb(type.dtype), shape);
}

std::pair<fb::Attrs, Offset<void>> Writer::attrs(const ir::Attrs& attrs) {
  // One branch per attribute struct; the static_assert below keeps the list complete.
  return std::visit(
      [&](const auto& a) -> std::pair<fb::Attrs, Offset<void>> {
        using A = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<A, ir::NoAttrs>) {
          return {fb::Attrs::NoAttrs, fb::CreateNoAttrs(fbb_).Union()};
        } else if constexpr (std::is_same_v<A, ir::InputAttrs>) {
          return {fb::Attrs::InputAttrs, fb::CreateInputAttrs(fbb_, a.index).Union()};
        } else if constexpr (std::is_same_v<A, ir::ConstantAttrs>) {
          auto name = fbb_.CreateString(a.weight_name);
          return {fb::Attrs::ConstantAttrs,
                  fb::CreateConstantAttrs(fbb_, a.constant_index, name).Union()};
        } else if constexpr (std::is_same_v<A, ir::GeluAttrs>) {
          return {fb::Attrs::GeluAttrs, fb::CreateGeluAttrs(fbb_, a.tanh_approximation).Union()};
        } else if constexpr (std::is_same_v<A, ir::CastAttrs>) {
          return {fb::Attrs::CastAttrs, fb::CreateCastAttrs(fbb_, detail::to_fb(a.to)).Union()};
        } else if constexpr (std::is_same_v<A, ir::ClampAttrs>) {
          fb::ClampAttrsBuilder b(fbb_);
          if (a.min) b.add_min(*a.min);
          if (a.max) b.add_max(*a.max);
          return {fb::Attrs::ClampAttrs, b.Finish().Union()};
        } else if constexpr (std::is_same_v<A, ir::ReduceAttrs>) {
          auto axes = longs(a.axes);
          return {fb::Attrs::ReduceAttrs,
                  fb::CreateReduceAttrs(fbb_, axes, a.all_axes, a.keepdims).Union()};
        } else if constexpr (std::is_same_v<A, ir::ArgMaxAttrs>) {
          return {fb::Attrs::ArgMaxAttrs, fb::CreateArgMaxAttrs(fbb_, a.axis, a.keepdims).Union()};
        } else if constexpr (std::is_same_v<A, ir::AxisAttrs>) {
          return {fb::Attrs::AxisAttrs, fb::CreateAxisAttrs(fbb_, a.axis).Union()};
        } else if constexpr (std::is_same_v<A, ir::LayerNormAttrs>) {
          return {fb::Attrs::LayerNormAttrs,
                  fb::CreateLayerNormAttrs(fbb_, a.axis, a.epsilon).Union()};
        } else if constexpr (std::is_same_v<A, ir::ReshapeAttrs>) {
          auto shape = dims(a.shape);
          return {fb::Attrs::ReshapeAttrs, fb::CreateReshapeAttrs(fbb_, shape).Union()};
        } else if constexpr (std::is_same_v<A, ir::TransposeAttrs>) {
          auto perm = longs(a.perm);
          return {fb::Attrs::TransposeAttrs, fb::CreateTransposeAttrs(fbb_, perm).Union()};
        } else if constexpr (std::is_same_v<A, ir::BroadcastToAttrs>) {
          auto shape = dims(a.shape);
          return {fb::Attrs::BroadcastToAttrs, fb::CreateBroadcastToAttrs(fbb_, shape).Union()};
        } else if constexpr (std::is_same_v<A, ir::TopKAttrs>) {
          return {fb::Attrs::TopKAttrs, fb::CreateTopKAttrs(fbb_, a.k, a.axis, a.largest).Union()};
        } else if constexpr (std::is_same_v<A, ir::ScatterAttrs>) {
          return {fb::Attrs::ScatterAttrs,
                  fb::CreateScatterAttrs(fbb_, a.axis, fb::ScatterReduction(uint8_t(a.reduction))).Union()};
        } else if constexpr (std::is_same_v<A, ir::IotaAttrs>) {
          auto shape = dims(a.shape);
          return {fb::Attrs::IotaAttrs, fb::CreateIotaAttrs(fbb_, shape, a.axis, detail::to_fb(a.dtype)).Union()};
        } else if constexpr (std::is_same_v<A, ir::SliceAttrs>) {
          auto starts = longs(a.starts);
          auto ends = longs(a.ends);
          auto axes = longs(a.axes);
          auto steps = longs(a.steps);
          return {fb::Attrs::SliceAttrs,
                  fb::CreateSliceAttrs(fbb_, starts, ends, axes, steps).Union()};
        } else if constexpr (std::is_same_v<A, ir::Conv2dAttrs>) {
          auto strides = longs(a.strides);
          auto pads = longs(a.pads);
          auto dilations = longs(a.dilations);
          return {fb::Attrs::Conv2dAttrs,
                  fb::CreateConv2dAttrs(fbb_, strides, pads, dilations, a.groups, a.channels_last).Union()};
        } else if constexpr (std::is_same_v<A, ir::Pool2dAttrs>) {
          auto kernel = longs(a.kernel);
          auto strides = longs(a.strides);
          auto pads = longs(a.pads);
          return {fb::Attrs::Pool2dAttrs,
                  fb::CreatePool2dAttrs(fbb_, kernel, strides, pads, a.count_include_pad, a.channels_last).Union()};
        } else if constexpr (std::is_same_v<A, ir::AttentionAttrs>) {
          fb::AttentionAttrsBuilder b(fbb_);
          if (a.scale) b.add_scale(*a.scale);
          b.add_causal(a.causal);
          b.add_seq_major(a.seq_major);
          return {fb::Attrs::AttentionAttrs, b.Finish().Union()};
        } else {
          static_assert(sizeof(A) == 0, "attribute struct without a file encoding");
        }
      },
      attrs);
}

Offset<fb::Node> Writer::node(const ir::Node& n) {
  auto name = fbb_.CreateString(n.name);
  auto inputs = ids(n.inputs);
  auto [attrs_type, attrs_value] = attrs(n.attrs);
  auto type = tensor_type(n.type);
  return fb::CreateNode(fbb_, detail::to_fb(n.op), name, inputs, attrs_type, attrs_value, type);
}

Offset<fb::Graph> Writer::graph(const ir::Graph& g, const DataLayout& layout) {
  std::vector<Offset<fb::ConstantData>> constants;
  constants.reserve(g.constants().size());
  for (size_t i = 0; i < g.constants().size(); ++i) {
    const ir::Tensor& t = g.constants()[i];
    auto shape = longs(t.shape());
    constants.push_back(fb::CreateConstantData(fbb_, detail::to_fb(t.dtype()), shape, /*data=*/0,
                                               layout.offsets[i], t.size_bytes(), layout.checksums[i]));
  }
  auto constants_vec = fbb_.CreateVector(constants);

  std::vector<Offset<fb::Node>> nodes;
  nodes.reserve(g.num_nodes());
  for (const ir::Node& n : g.nodes()) nodes.push_back(node(n));
  auto nodes_vec = fbb_.CreateVector(nodes);

  std::vector<Offset<fb::IoValue>> inputs;
  for (ir::NodeId id : g.inputs()) {
    const ir::Node& n = g.node(id);
    auto name = fbb_.CreateString(n.name);
    auto type = tensor_type(n.type);
    inputs.push_back(fb::CreateIoValue(fbb_, name, id, type));
  }
  auto inputs_vec = fbb_.CreateVector(inputs);

  std::vector<Offset<fb::IoValue>> outputs;
  for (const ir::GraphOutput& o : g.outputs()) {
    auto name = fbb_.CreateString(o.name);
    auto type = tensor_type(o.declared);
    outputs.push_back(fb::CreateIoValue(fbb_, name, o.node, type));
  }
  auto outputs_vec = fbb_.CreateVector(outputs);

  std::vector<Offset<fb::Kernel>> kernels;
  for (const ir::Kernel& k : g.kernels()) {
    auto name = fbb_.CreateString(k.name);
    auto knodes = ids(k.nodes);
    auto kinputs = ids(k.inputs);
    auto koutputs = ids(k.outputs);
    kernels.push_back(fb::CreateKernel(fbb_, name, detail::to_fb(k.kind), knodes, k.anchor,
                                       kinputs, koutputs));
  }
  auto kernels_vec = fbb_.CreateVector(kernels);

  auto name = fbb_.CreateString(g.name);
  auto weights = fbb_.CreateString(g.weights_path);
  return fb::CreateGraph(fbb_, name, weights, nodes_vec, inputs_vec, outputs_vec, constants_vec,
                         kernels_vec);
}

Offset<fb::SizeExpr> Writer::size_expr(const ir::SizeExpr& expr) {
  std::vector<Offset<fb::Term>> terms;
  for (const auto& [symbols, coeff] : expr.terms()) {
    std::vector<Offset<flatbuffers::String>> names;
    for (const std::string& s : symbols) names.push_back(shared_string(s));
    auto names_vec = fbb_.CreateVector(names);
    terms.push_back(fb::CreateTerm(fbb_, coeff, names_vec));
  }
  auto terms_vec = fbb_.CreateVector(terms);
  return fb::CreateSizeExpr(fbb_, terms_vec);
}

Offset<fb::Plan> Writer::plan(const ir::ExecutionPlan& p) {
  std::vector<Offset<fb::Launch>> launches;
  for (const ir::Launch& l : p.launches) {
    auto shape = dims(l.launch_shape);
    launches.push_back(fb::CreateLaunch(fbb_, l.kernel, shape));
  }
  auto launches_vec = fbb_.CreateVector(launches);
  std::vector<Offset<fb::BufferAssignment>> buffers;
  for (const ir::BufferAssignment& b : p.buffers) {
    auto offset = size_expr(b.offset);
    auto size = size_expr(b.size);
    buffers.push_back(
        fb::CreateBufferAssignment(fbb_, b.value, detail::to_fb(b.storage), offset, size, b.alias_of,
                                   b.slot));
  }
  auto buffers_vec = fbb_.CreateVector(buffers);
  auto arena = size_expr(p.arena_bytes);
  std::vector<Offset<fb::SizeExpr>> slots;
  for (const ir::SizeExpr& slot : p.slots) slots.push_back(size_expr(slot));
  auto slots_vec = fbb_.CreateVector(slots);
  return fb::CreatePlan(fbb_, launches_vec, buffers_vec, arena, p.alignment, slots_vec);
}

Offset<fb::KernelDispatch> Writer::dispatch(const KernelDispatch& d) {
  auto work_items = size_expr(d.work_items);
  return fb::CreateKernelDispatch(fbb_, work_items, d.items_per_group, d.workgroup_size);
}

std::pair<Offset<Vector<uint32_t>>, Offset<fb::KernelDispatch>> Writer::library_epilogue(const LibraryEpilogue& e) {
  if (e.empty()) return {};
  return {fbb_.CreateVector(e.args), dispatch(e.dispatch)};
}

Offset<fb::GemmCall> Writer::gemm_call(const GemmCall& call) {
  auto batch = size_expr(call.batch);
  auto m = size_expr(call.m);
  auto n = size_expr(call.n);
  auto k = size_expr(call.k);
  auto [epilogue_args, epilogue_dispatch] = library_epilogue(call.in_place_epilogue);
  fb::GemmEpilogue epilogue = fb::GemmEpilogue::Identity;
  switch (call.epilogue) {
    case GemmCall::Epilogue::kNone: epilogue = fb::GemmEpilogue::Identity; break;
    case GemmCall::Epilogue::kRelu: epilogue = fb::GemmEpilogue::Relu; break;
    case GemmCall::Epilogue::kGeluTanh: epilogue = fb::GemmEpilogue::GeluTanh; break;
  }
  return fb::CreateGemmCall(fbb_, call.a_arg, call.b_arg, call.out_arg, call.bias_arg,
                            detail::to_fb(call.dtype), batch, m, n, k, call.a_batched, call.b_batched,
                            epilogue, call.allow_tf32, call.residual_arg, call.alpha, epilogue_args,
                            epilogue_dispatch);
}

Offset<fb::ConvCall> Writer::conv_call(const ConvCall& call, const DataLayout::Packed* packed) {
  Offset<fb::PackedWeights> packed_weights;
  if (packed) {
    const PackedLayout& l = packed->layout;
    packed_weights = fb::CreatePackedWeights(fbb_, longs(l.dims), longs(l.source_strides), longs(l.padded_dims),
                                             longs(l.outer_strides), fbb_.CreateVector(l.inner_dims),
                                             longs(l.inner_sizes), packed->offset, packed->size, packed->checksum);
  }
  auto batch = size_expr(call.batch);
  auto [epilogue_args, epilogue_dispatch] = library_epilogue(call.in_place_epilogue);
  fb::ConvActivation activation = fb::ConvActivation::Identity;
  switch (call.activation) {
    case ConvCall::Activation::kNone: break;
    case ConvCall::Activation::kRelu: activation = fb::ConvActivation::Relu; break;
    case ConvCall::Activation::kClamp: activation = fb::ConvActivation::Clamp; break;
  }
  return fb::CreateConvCall(fbb_, call.x_arg, call.w_arg, call.out_arg, call.bias_arg, call.residual_arg,
                            detail::to_fb(call.dtype), batch, call.channels, call.height, call.width,
                            call.out_channels, call.kernel_h, call.kernel_w, call.groups, call.pad_h,
                            call.pad_w, call.stride_h, call.stride_w, call.dilation_h, call.dilation_w,
                            activation, call.allow_tf32, epilogue_args, epilogue_dispatch, call.channels_last,
                            call.clamp_min, call.clamp_max, packed_weights);
}

Offset<Vector<Offset<fb::Target>>> Writer::targets(const std::vector<KernelBinary>& kernels,
                                                   const std::vector<ModuleBinary>& modules,
                                                   const DataLayout& layout) {
  // Group by target, keeping the order in which targets first appear (kernels, then modules).
  std::vector<std::string> order;
  std::map<std::string, std::vector<Offset<fb::KernelBinary>>> by_target;
  std::map<std::string, std::vector<Offset<fb::ModuleBinary>>> modules_by_target;
  // Identical blobs (kernels that kilnc deduplicated: same code, different names) are stored
  // once; FlatBuffers tables may share a vector.
  // (Keyed by views of the blobs, which outlive this function.)
  std::map<std::string_view, Offset<Vector<uint8_t>>> blobs;
  auto blob_offset = [&](const Blob& bytes) {
    const std::string_view key(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    auto found = blobs.find(key);
    if (found != blobs.end()) return found->second;
    fbb_.ForceVectorAlignment(bytes.size(), 1, 16);
    auto offset = fbb_.CreateVector(bytes.data(), bytes.size());
    blobs.emplace(key, offset);
    return offset;
  };
  for (const ModuleBinary& m : modules) {
    auto blob = blob_offset(m.blob);
    auto format = fbb_.CreateString(m.format);
    modules_by_target[m.target].push_back(
        fb::CreateModuleBinary(fbb_, format, blob, blob_checksum(m.blob), m.id));
  }
  for (size_t index = 0; index < kernels.size(); ++index) {
    const KernelBinary& k = kernels[index];
    if (!by_target.count(k.target)) order.push_back(k.target);
    auto blob = blob_offset(k.blob);
    std::vector<Offset<flatbuffers::String>> features;
    for (const std::string& f : k.required_features) features.push_back(fbb_.CreateString(f));
    auto features_vec = fbb_.CreateVector(features);
    auto name = fbb_.CreateString(k.kernel_name);
    auto format = fbb_.CreateString(k.format);
    auto entry = fbb_.CreateString(k.entry_point);
    std::vector<Offset<fb::KernelArg>> args;
    for (const KernelArg& arg : k.args) {
      auto symbol = fbb_.CreateString(arg.symbol);
      args.push_back(fb::CreateKernelArg(fbb_,
                                         arg.kind == KernelArg::Kind::kSymbol ? fb::KernelArgKind::Symbol
                                                                              : fb::KernelArgKind::Buffer,
                                         arg.value, symbol));
    }
    auto args_vec = fbb_.CreateVector(args);
    auto kernel_dispatch = dispatch(k.dispatch);
    Offset<fb::GemmCall> gemm = k.gemm ? gemm_call(*k.gemm) : Offset<fb::GemmCall>();
    auto packed = layout.packed_of.find(index);
    Offset<fb::ConvCall> conv =
        k.conv ? conv_call(*k.conv, packed == layout.packed_of.end() ? nullptr : &layout.packed[packed->second])
               : Offset<fb::ConvCall>();
    by_target[k.target].push_back(fb::CreateKernelBinary(fbb_, name, k.kernel_index, format, entry,
                                                         blob, features_vec, args_vec, kernel_dispatch,
                                                         blob_checksum(k.blob), gemm, k.module_id, conv));
  }
  for (const ModuleBinary& m : modules)
    if (!by_target.count(m.target) && std::find(order.begin(), order.end(), m.target) == order.end())
      order.push_back(m.target);
  std::vector<Offset<fb::Target>> out;
  for (const std::string& t : order) {
    auto name = fbb_.CreateString(t);
    auto list = fbb_.CreateVector(by_target[t]);
    Offset<Vector<Offset<fb::ModuleBinary>>> module_list;
    if (modules_by_target.count(t)) module_list = fbb_.CreateVector(modules_by_target[t]);
    out.push_back(fb::CreateTarget(fbb_, name, list, module_list));
  }
  return fbb_.CreateVector(out);
}

Status Writer::check_references(const ir::Graph& g, const ir::ExecutionPlan& p,
                                const WriteOptions& options) const {
  const size_t n = g.num_nodes();
  auto bad = [](const std::string& what) { return invalid_argument("cannot write artifact: " + what); };
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = g.node(ir::NodeId(i));
    if (node.erased) return bad("node '" + node.name + "' is erased (compact the graph first)");
    for (ir::NodeId in : node.inputs)
      if (in >= n) return bad("node '" + node.name + "' has an input id out of range");
    if (const auto* c = std::get_if<ir::ConstantAttrs>(&node.attrs)) {
      if (c->constant_index >= g.constants().size())
        return bad("node '" + node.name + "' refers to a missing constant");
    }
  }
  for (ir::NodeId id : g.inputs())
    if (id >= n) return bad("a graph input id is out of range");
  for (const ir::GraphOutput& o : g.outputs())
    if (o.node >= n) return bad("output '" + o.name + "' refers to a node out of range");
  for (const ir::Kernel& k : g.kernels()) {
    for (const auto* list : {&k.nodes, &k.inputs, &k.outputs})
      for (ir::NodeId id : *list)
        if (id >= n) return bad("kernel '" + k.name + "' refers to a node out of range");
    if (k.anchor != ir::kNoNode && k.anchor >= n)
      return bad("kernel '" + k.name + "' has an anchor out of range");
  }
  for (const ir::Launch& l : p.launches)
    if (l.kernel >= g.kernels().size()) return bad("a launch refers to a kernel out of range");
  for (const ir::BufferAssignment& b : p.buffers) {
    if (b.value >= n) return bad("a plan buffer refers to a node out of range");
    if (b.alias_of != ir::kNoNode && b.alias_of >= n)
      return bad("a plan buffer aliases a node out of range");
  }
  for (const ModuleBinary& m : options.modules) {
    if (m.target.empty()) return bad("a module has no target");
    if (!is_module_format(m.format))
      return bad("module of target '" + m.target + "' has unknown format '" + m.format + "'");
    if (m.blob.empty()) return bad("module '" + m.format + "' of target '" + m.target + "' is empty");
    for (const ModuleBinary& other : options.modules)
      if (&other != &m && other.target == m.target && other.id == m.id && other.format == m.format)
        return bad("target '" + m.target + "' has two '" + m.format + "' modules with id " + std::to_string(m.id));
  }
  for (const KernelBinary& k : options.kernels) {
    if (k.kernel_index >= g.kernels().size())
      return bad("kernel binary '" + k.kernel_name + "' refers to a kernel out of range");
    for (const KernelArg& arg : k.args) {
      if (arg.kind == KernelArg::Kind::kBuffer && arg.value >= n)
        return bad("kernel binary '" + k.kernel_name + "' has a buffer argument out of range");
    }
    if (!is_kernel_format(k.format))
      return bad("kernel binary '" + k.kernel_name + "' has unknown format '" + k.format + "'");
    if (k.format == kModuleFormat) {
      bool has_module = false;
      for (const ModuleBinary& m : options.modules)
        has_module = has_module || (m.target == k.target && m.id == k.module_id);
      if (!has_module)
        return bad("kernel binary '" + k.kernel_name + "' lives in module " + std::to_string(k.module_id) +
                   ", but target '" + k.target + "' has no such module");
      if (!k.blob.empty() || k.entry_point.empty())
        return bad("kernel binary '" + k.kernel_name + "' of a module needs an entry point and no blob");
    }
    if (k.gemm) {
      Status gemm = check_gemm_call(*k.gemm, k.args);
      if (!gemm.is_ok()) return bad("kernel binary '" + k.kernel_name + "': " + gemm.message());
    }
    if (k.conv) {
      Status conv = check_conv_call(*k.conv, k.args);
      if (!conv.is_ok()) return bad("kernel binary '" + k.kernel_name + "': " + conv.message());
    }
  }
  return Status::ok();
}

Result<std::span<const uint8_t>> Writer::write(const ir::Graph& g, const ir::ExecutionPlan& p,
                                               const WriteOptions& options, const DataLayout& layout) {
  KILN_RETURN_IF_ERROR(check_references(g, p, options));
  if (layout.offsets.size() != g.constants().size())
    return invalid_argument("cannot write artifact: the graph has " + std::to_string(g.constants().size()) +
                            " constants, but " + std::to_string(layout.offsets.size()) + " were written");
  for (size_t i = 0; i < g.constants().size(); ++i) {
    if (layout.sizes[i] != g.constants()[i].size_bytes())
      return invalid_argument("cannot write artifact: constant " + std::to_string(i) +
                              " changed size after its bytes were written");
  }
  // FlatBuffers offsets are 32-bit: refuse kernels beyond the 2 GiB limit of the model part
  // instead of letting the builder abort. (Constants live outside it.)
  size_t kernel_bytes = 0;
  for (const KernelBinary& k : options.kernels) kernel_bytes += k.blob.size() + 16;
  for (const ModuleBinary& m : options.modules) kernel_bytes += m.blob.size() + 16;
  if (kernel_bytes >= (size_t(1) << 31) - (size_t(1) << 24))
    return unsupported("cannot write artifact: the kernels total " + std::to_string(kernel_bytes) +
                       " bytes, over the 2 GiB limit of the .kiln format");

  auto graph_off = graph(g, layout);
  auto plan_off = plan(p);
  auto targets_off = targets(options.kernels, options.modules, layout);
  auto producer = fbb_.CreateString(options.producer);
  // file_size starts as a non-default placeholder so that the field is stored, then is
  // patched to the real size once the buffer is finished.
  auto model = fb::CreateModel(fbb_, kFormatVersion, producer, graph_off, plan_off, targets_off,
                               /*file_size=*/~uint64_t(0));
  fb::FinishModelBuffer(fbb_, model);
  if (fbb_.GetSize() >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return unsupported("cannot write artifact: its model part would exceed the 2 GiB limit");
  uint8_t* data = fbb_.GetBufferPointer();
  bool patched = fb::GetMutableModel(data)->mutate_file_size(layout.model_offset + fbb_.GetSize());
  KILN_CHECK(patched, "the artifact's file_size field was not stored");
  return std::span<const uint8_t>(data, fbb_.GetSize());
}

size_t size_hint(const ir::Graph& graph, const WriteOptions& options) {
  size_t hint = 1024 + graph.num_nodes() * 128 + graph.constants().size() * 64;
  for (const KernelBinary& k : options.kernels) hint += k.blob.size() + 256;
  for (const ModuleBinary& m : options.modules) hint += m.blob.size() + 64;
  return hint;
}

// The process's umask, read without changing it (umask(2) can only set it, racing other threads).
mode_t current_umask() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  unsigned mask = 022;
  if (status) {
    char line[256];
    while (std::fgets(line, sizeof line, status))
      if (std::sscanf(line, "Umask: %o", &mask) == 1) break;
    std::fclose(status);
  }
  return mode_t(mask);
}

uint64_t align_up(uint64_t n) { return (n + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment; }

// The header part: the FileHeader FlatBuffer, zero-padded to kFileHeaderBytes. With a signing
// key it names the signer and holds 64 zero bytes where the signature goes (`signature_offset`,
// within the header, is set to their position; 0 when unsigned).
std::vector<uint8_t> file_header(const DataLayout& layout, const SigningKey* signing_key, size_t& signature_offset) {
  FlatBufferBuilder fbb(kFileHeaderBytes);
  Offset<Vector<uint8_t>> signer, signature;
  if (signing_key) {
    signer = fbb.CreateVector(signing_key->public_key().data(), signing_key->public_key().size());
    const Signature zeros{};
    signature = fbb.CreateVector(zeros.data(), zeros.size());
  }
  fbb.Finish(fb::CreateFileHeader(fbb, kFormatVersion, kFileHeaderBytes, layout.data_size, layout.model_offset,
                                  signer, signature),
             fb::ModelIdentifier());
  KILN_CHECK(fbb.GetSize() <= kFileHeaderBytes, "the artifact's file header outgrew its space");
  std::vector<uint8_t> out(kFileHeaderBytes, 0);
  std::memcpy(out.data(), fbb.GetBufferPointer(), fbb.GetSize());
  signature_offset = 0;
  if (signing_key) {
    const auto* header = flatbuffers::GetRoot<fb::FileHeader>(out.data());
    signature_offset = size_t(header->signature()->data() - out.data());
  }
  return out;
}

// Writes bytes somewhere: a FILE* or a vector. Returns false on an I/O error (errno set).
class Sink {
 public:
  virtual ~Sink() = default;
  virtual bool write(const void* data, size_t size) = 0;
  bool pad_to(uint64_t position, uint64_t& at) {
    static const uint8_t zeros[kConstantAlignment] = {};
    while (at < position) {
      const size_t n = size_t(std::min<uint64_t>(position - at, sizeof zeros));
      if (!write(zeros, n)) return false;
      at += n;
    }
    return true;
  }
};

class VectorSink final : public Sink {
 public:
  explicit VectorSink(std::vector<uint8_t>& out) : out_(out) {}
  bool write(const void* data, size_t size) override {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + size);
    return true;
  }

 private:
  std::vector<uint8_t>& out_;
};

class FileSink final : public Sink {
 public:
  explicit FileSink(std::FILE* file) : file_(file) {}
  bool write(const void* data, size_t size) override { return size == 0 || std::fwrite(data, 1, size, file_) == size; }

 private:
  std::FILE* file_;
};

// The header and the constants, in graph order; `at` becomes the sink's position in the file.
// Returns false on an I/O error.
bool write_header_and_constants(const ir::Graph& graph, const DataLayout& layout, const SigningKey* signing_key,
                                size_t& signature_offset, Sink& sink, uint64_t& at) {
  const std::vector<uint8_t> header = file_header(layout, signing_key, signature_offset);
  if (!sink.write(header.data(), header.size())) return false;
  at = kFileHeaderBytes;
  for (size_t i = 0; i < graph.constants().size(); ++i) {
    const ir::Tensor& t = graph.constants()[i];
    if (!sink.pad_to(kFileHeaderBytes + layout.offsets[i], at)) return false;
    if (!sink.write(t.data(), t.size_bytes())) return false;
    at += t.size_bytes();
  }
  return true;
}

// The kernels' packed weights (ConvCall::packed_layout) after the constants: layout.packed,
// packed_of, data_size and model_offset. One entry per distinct (source constant, layout).
Status plan_packed_weights(const ir::Graph& graph, const std::vector<KernelBinary>& kernels, DataLayout& layout) {
  uint64_t at = layout.data_size;
  for (size_t index = 0; index < kernels.size(); ++index) {
    const KernelBinary& k = kernels[index];
    if (!k.conv || !k.conv->packed_layout) continue;
    const ConvCall& call = *k.conv;
    auto bad = [&](const std::string& what) {
      return invalid_argument("kernel binary '" + k.kernel_name + "': its packed weights " + what);
    };
    if (call.w_arg >= k.args.size() || k.args[call.w_arg].kind != KernelArg::Kind::kBuffer ||
        k.args[call.w_arg].value >= graph.num_nodes() || graph.node(k.args[call.w_arg].value).op != ir::OpKind::kConstant)
      return bad("are of a w that is not a constant");
    const uint32_t constant = std::get<ir::ConstantAttrs>(graph.node(k.args[call.w_arg].value).attrs).constant_index;
    if (constant >= graph.constants().size()) return bad("are of a missing constant");
    const ir::Tensor& source = graph.constants()[constant];
    const size_t element_bytes = ir::dtype_size(source.dtype());
    Status checked = check_packed_layout(*call.packed_layout, source.size_bytes() / element_bytes);
    if (!checked.is_ok()) return bad("are laid out wrongly: " + checked.message());
    auto same = std::find_if(layout.packed.begin(), layout.packed.end(), [&](const DataLayout::Packed& p) {
      return p.constant == constant && p.layout == *call.packed_layout;
    });
    if (same == layout.packed.end()) {
      at = align_up(at);
      layout.packed.push_back({constant, *call.packed_layout, at, packed_elements(*call.packed_layout) * element_bytes, 0});
      at += layout.packed.back().size;
      same = layout.packed.end() - 1;
    }
    layout.packed_of[index] = size_t(same - layout.packed.begin());
  }
  layout.data_size = at;
  layout.model_offset = align_up(kFileHeaderBytes + at);
  return Status::ok();
}

// Packs and writes layout.packed (one tensor in memory at a time), taking their checksums; `at`
// is the sink's position in the file. `packed_from(bytes)` is told each source constant's bytes
// once they are packed. Returns false on an I/O error.
template <class PackedFrom>
bool write_packed_weights(const ir::Graph& graph, DataLayout& layout, Sink& sink, uint64_t& at, PackedFrom packed_from) {
  std::vector<std::byte> packed;
  for (DataLayout::Packed& p : layout.packed) {
    const ir::Tensor& source = graph.constants()[p.constant];
    packed.resize(size_t(p.size));
    pack_constant(p.layout, source.data(), ir::dtype_size(source.dtype()), packed.data());
    packed_from(std::span<const std::byte>(source.data(), source.size_bytes()));
    p.checksum = blob_checksum({reinterpret_cast<const uint8_t*>(packed.data()), packed.size()});
    if (!sink.pad_to(kFileHeaderBytes + p.offset, at) || !sink.write(packed.data(), packed.size())) return false;
    at += p.size;
  }
  return sink.pad_to(layout.model_offset, at);
}

// Constants in graph order, each at a multiple of kConstantAlignment.
DataLayout plan_data_layout(const ir::Graph& graph) {
  DataLayout layout;
  uint64_t at = 0;
  for (const ir::Tensor& t : graph.constants()) {
    at = align_up(at);
    layout.offsets.push_back(at);
    layout.sizes.push_back(t.size_bytes());
    layout.checksums.push_back(blob_checksum({reinterpret_cast<const uint8_t*>(t.data()), t.size_bytes()}));
    at += t.size_bytes();
  }
  layout.data_size = at;
  layout.model_offset = align_up(kFileHeaderBytes + at);
  return layout;
}

}  // namespace

Result<std::vector<uint8_t>> write_artifact(const ir::Graph& graph, const ir::ExecutionPlan& plan) {
  return write_artifact(graph, plan, WriteOptions{});
}

Result<std::vector<uint8_t>> write_artifact(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                            const WriteOptions& options) {
  DataLayout layout = plan_data_layout(graph);
  KILN_RETURN_IF_ERROR(plan_packed_weights(graph, options.kernels, layout));
  std::vector<uint8_t> out;
  out.reserve(layout.model_offset);
  VectorSink sink(out);
  size_t signature_offset = 0;
  uint64_t at = 0;
  write_header_and_constants(graph, layout, options.signing_key, signature_offset, sink, at);
  write_packed_weights(graph, layout, sink, at, [](std::span<const std::byte>) {});  // checksums for the model
  Writer writer(size_hint(graph, options));
  KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> model, writer.write(graph, plan, options, layout));
  sink.write(model.data(), model.size());
  if (options.signing_key) {
    const std::span<const uint8_t> whole(out);
    KILN_ASSIGN_OR_RETURN(Signature signature, options.signing_key->sign({&whole, 1}));
    std::memcpy(out.data() + signature_offset, signature.data(), signature.size());
  }
  return out;
}

// ---- ArtifactFileWriter ----------------------------------------------------------------------

ArtifactFileWriter::~ArtifactFileWriter() {
  if (file_ && file_ != stdout) std::fclose(file_);
  if (!temp_path_.empty()) std::remove(temp_path_.c_str());
}

Result<std::unique_ptr<ArtifactFileWriter>> ArtifactFileWriter::begin(const std::string& path,
                                                                      const ir::Graph& graph,
                                                                      const SigningKey* signing_key) {
  std::unique_ptr<ArtifactFileWriter> writer(new ArtifactFileWriter());
  writer->path_ = path;
  writer->layout_ = plan_data_layout(graph);
  if (signing_key) writer->signing_key_ = *signing_key;
  if (path == "-") {
    if (signing_key) return invalid_argument("cannot sign an artifact written to stdout: give an output file");
    writer->file_ = stdout;
  } else {
    // A temporary file beside the output, renamed into place by finish(): a failed compile
    // leaves neither a partial artifact nor a damaged previous one.
    std::string temp = path + ".tmp-XXXXXX";
    const int fd = mkstemp(temp.data());
    if (fd < 0) return invalid_argument("cannot write '" + path + "': " + std::strerror(errno));
    writer->temp_path_ = temp;
    (void)fchmod(fd, 0666 & ~current_umask());  // what fopen would have created
    writer->file_ = fdopen(fd, "w+b");
    if (!writer->file_) {
      close(fd);
      return invalid_argument("cannot write '" + path + "': " + std::strerror(errno));
    }
  }
  if (writer->file_ == stdout) return writer;  // stdout gets everything in finish()
  FileSink sink(writer->file_);
  if (!write_header_and_constants(graph, writer->layout_, signing_key, writer->signature_offset_, sink,
                                  writer->position_) ||
      std::fflush(writer->file_) != 0)
    return invalid_argument("cannot write '" + path + "': " + std::strerror(errno));
  writer->data_written_ = true;
  return writer;
}

Status ArtifactFileWriter::map_constants(ir::Graph& graph) {
  if (temp_path_.empty() || layout_.data_size == 0) return Status::ok();  // stdout: nothing to map
  if (graph.constants().size() != layout_.offsets.size())
    return invalid_argument("map_constants: the graph's constants are not the ones written");
  const size_t length = size_t(kFileHeaderBytes + layout_.data_size);
  void* base = mmap(nullptr, length, PROT_READ, MAP_SHARED, fileno(file_), 0);
  if (base == MAP_FAILED) return Status::ok();  // keeping them in memory is correct, only larger
  std::shared_ptr<const void> mapping(base, [length](const void* p) { munmap(const_cast<void*>(p), length); });
  mapping_ = mapping;
  mapped_length_ = length;
  const auto* data = static_cast<const std::byte*>(base) + kFileHeaderBytes;
  for (size_t i = 0; i < graph.constants().size(); ++i) {
    ir::Tensor& t = graph.constants()[i];
    if (t.size_bytes() != layout_.sizes[i])
      return invalid_argument("map_constants: constant " + std::to_string(i) + " is not the one written");
    std::vector<int64_t> shape = t.shape();
    t = ir::Tensor::view(t.dtype(), std::move(shape), data + layout_.offsets[i], mapping);
  }
  return Status::ok();
}

Status ArtifactFileWriter::finish(const ir::Graph& graph, const ir::ExecutionPlan& plan, const WriteOptions& options) {
  if (!file_) return invalid_argument("cannot write '" + path_ + "': the writer was already finished");
  if (options.signing_key && (!signing_key_ || options.signing_key->public_key() != signing_key_->public_key()))
    return invalid_argument("cannot write '" + path_ + "': sign with the key given to ArtifactFileWriter::begin");
  auto failed = [&] { return invalid_argument("cannot write '" + path_ + "': " + std::strerror(errno)); };
  // The packed weights follow the constants (stdout: the header and the constants come first).
  KILN_RETURN_IF_ERROR(plan_packed_weights(graph, options.kernels, layout_));
  FileSink sink(file_);
  const SigningKey* key = signing_key_ ? &*signing_key_ : nullptr;
  if (!data_written_ && !write_header_and_constants(graph, layout_, key, signature_offset_, sink, position_))
    return failed();
  // A packed constant's pages of the file's mapping (map_constants) leave this process's memory
  // once it is packed: they stay in the file, and peak memory stays about the weights' size.
  auto release = [&](std::span<const std::byte> bytes) {
    const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
    const auto* mapped = static_cast<const uint8_t*>(mapping_.get());
    if (!mapped || begin < mapped || begin + bytes.size() > mapped + mapped_length_) return;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t first = (uintptr_t(begin) + page - 1) / page * page, end = (uintptr_t(begin) + bytes.size()) / page * page;
    if (end > first) madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
  };
  if (!write_packed_weights(graph, layout_, sink, position_, release)) return failed();
  Writer writer(size_hint(graph, options));
  KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> model, writer.write(graph, plan, options, layout_));
  if (std::fwrite(model.data(), 1, model.size(), file_) != model.size()) return failed();
  if (data_written_ && !layout_.packed.empty()) {
    // begin()'s header covered the constants only: the data segment has grown.
    const std::vector<uint8_t> header = file_header(layout_, key, signature_offset_);
    if (std::fflush(file_) != 0 || pwrite(fileno(file_), header.data(), header.size(), 0) != ssize_t(header.size()))
      return failed();
  }
  std::FILE* file = std::exchange(file_, nullptr);
  if (file == stdout) return std::fflush(file) == 0 ? Status::ok() : failed();
  if (signing_key_) {
    if (std::fflush(file) != 0) {
      std::fclose(file);
      return failed();
    }
    Status sign = sign_file(fileno(file));
    if (!sign.is_ok()) {
      std::fclose(file);
      return sign;
    }
  }
  if (std::fclose(file) != 0) return failed();
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) return failed();
  temp_path_.clear();
  return Status::ok();
}

// The file is complete on disk: sign it as written (mapped, not read into memory: artifacts may
// be gigabytes) and write the signature into the header's placeholder.
Status ArtifactFileWriter::sign_file(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return invalid_argument("cannot sign '" + path_ + "': " + std::strerror(errno));
  const size_t size = size_t(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return invalid_argument("cannot sign '" + path_ + "': " + std::strerror(errno));
  const std::span<const uint8_t> whole(static_cast<const uint8_t*>(base), size);
  Result<Signature> signature = signing_key_->sign({&whole, 1});
  munmap(base, size);
  if (!signature.is_ok()) return signature.status();
  if (pwrite(fd, signature->data(), signature->size(), off_t(signature_offset_)) != ssize_t(signature->size()))
    return invalid_argument("cannot sign '" + path_ + "': " + std::strerror(errno));
  return Status::ok();
}

Status write_artifact_file(const std::string& path, const ir::Graph& graph, const ir::ExecutionPlan& plan,
                           const WriteOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFileWriter> writer,
                        ArtifactFileWriter::begin(path, graph, options.signing_key));
  return writer->finish(graph, plan, options);
}

}  // namespace kiln::artifact
