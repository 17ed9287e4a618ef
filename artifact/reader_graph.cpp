// Conversion of a verified .kiln buffer into ir::Graph / ir::ExecutionPlan / kernel binaries.
//
// The FlatBuffers Verifier guarantees that every table, vector and string lies inside the
// buffer; it does not know what the values mean. Everything here checks meaning: enum values
// this build knows, ids in range, attribute tables matching the op kind, fixed-length attribute
// arrays of the right length, constant byte counts matching their dtype and shape. Each failure
// is kCorrupt with a message naming the node / kernel / buffer at fault.
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_set>

#include "artifact/enum_map.h"
#include "artifact/reader_internal.h"

namespace kiln::artifact::detail {
namespace {

using flatbuffers::Offset;
using flatbuffers::Vector;

Status bad(const std::string& what) { return corrupt("corrupt Kiln artifact: " + what); }

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// Reads a shape. `min_static` is 0 for tensor types and -1 for reshape targets (one -1 is the
// inferred dim; the verifier checks there is at most one).
Result<ir::Shape> read_shape(const Vector<Offset<fb::Dim>>* dims, int64_t min_static,
                             const std::string& where) {
  ir::Shape shape;
  if (!dims) return shape;
  if (dims->size() > 64) return bad(where + ": rank " + std::to_string(dims->size()) + " is too large");
  shape.reserve(dims->size());
  for (const fb::Dim* d : *dims) {
    if (d->symbol() && d->symbol()->size() > 0) {
      if (!ir::is_canonical_size_name(d->symbol()->string_view())) {
        return bad(where + ": '" + d->symbol()->str().substr(0, 64) + "' is not a symbolic size name");
      }
      shape.push_back(ir::Dim::symbol(d->symbol()->str()));
    } else {
      if (d->size() < min_static)
        return bad(where + ": dimension size " + std::to_string(d->size()) + " is negative");
      shape.push_back(ir::Dim::of(d->size()));
    }
  }
  return shape;
}

Result<ir::TensorType> read_type(const fb::TensorType* type, const std::string& where) {
  if (!type) return bad(where + ": missing type");
  std::optional<ir::DType> dtype = from_fb(type->dtype());
  if (!dtype) return bad(where + ": unknown dtype code " + std::to_string(int(type->dtype())));
  KILN_ASSIGN_OR_RETURN(ir::Shape shape, read_shape(type->shape(), 0, where));
  return ir::TensorType{*dtype, std::move(shape)};
}

// The FlatBuffers verifier checks a vector's length field for 4-byte alignment but not its 8-byte
// elements, so a crafted file can place a [long] at an address that is not a multiple of 8:
// read the elements bytewise (a plain load would be undefined behaviour; fuzz_artifact found it).
std::vector<int64_t> longs(const Vector<int64_t>* v) {
  std::vector<int64_t> out(v ? v->size() : 0);
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(int64_t));
  return out;
}

template <size_t N>
Result<std::array<int64_t, N>> fixed_longs(const Vector<int64_t>* v, const std::string& where,
                                           const char* field) {
  if (!v || v->size() != N)
    return bad(where + ": attribute '" + field + "' must have " + std::to_string(N) + " values");
  std::array<int64_t, N> out{};
  std::memcpy(out.data(), v->Data(), N * sizeof(int64_t));  // unaligned-safe, as longs()
  return out;
}

// The attribute table of a node, as the ir:: struct. Which struct a kind needs is checked by
// the caller against ir::default_attrs(kind).
Result<ir::Attrs> read_attrs(const fb::Node& node, const std::string& where) {
  // The verifier accepts a union whose type is set and whose table is absent; every case below
  // reads the table, so one check here covers them all (fuzz_artifact found a GeluAttrs without
  // its table).
  if (node.attrs_type() != fb::Attrs::NONE && !node.attrs())
    return bad(where + ": attribute table " + std::to_string(int(node.attrs_type())) + " is missing");
  switch (node.attrs_type()) {
    case fb::Attrs::NONE: return bad(where + ": missing attributes");
    case fb::Attrs::NoAttrs: return ir::Attrs(ir::NoAttrs{});
    case fb::Attrs::InputAttrs: return ir::Attrs(ir::InputAttrs{node.attrs_as_InputAttrs()->index()});
    case fb::Attrs::ConstantAttrs: {
      const auto* a = node.attrs_as_ConstantAttrs();
      return ir::Attrs(ir::ConstantAttrs{a->constant_index(), str(a->weight_name())});
    }
    case fb::Attrs::GeluAttrs:
      return ir::Attrs(ir::GeluAttrs{node.attrs_as_GeluAttrs()->tanh_approximation()});
    case fb::Attrs::CastAttrs: {
      std::optional<ir::DType> to = from_fb(node.attrs_as_CastAttrs()->to());
      if (!to) return bad(where + ": cast to an unknown dtype");
      return ir::Attrs(ir::CastAttrs{*to});
    }
    case fb::Attrs::ClampAttrs: {
      const auto* a = node.attrs_as_ClampAttrs();
      ir::ClampAttrs c;
      if (a->min().has_value()) c.min = *a->min();
      if (a->max().has_value()) c.max = *a->max();
      return ir::Attrs(c);
    }
    case fb::Attrs::ReduceAttrs: {
      const auto* a = node.attrs_as_ReduceAttrs();
      return ir::Attrs(ir::ReduceAttrs{longs(a->axes()), a->all_axes(), a->keepdims()});
    }
    case fb::Attrs::ArgMaxAttrs: {
      const auto* a = node.attrs_as_ArgMaxAttrs();
      return ir::Attrs(ir::ArgMaxAttrs{a->axis(), a->keepdims()});
    }
    case fb::Attrs::AxisAttrs: return ir::Attrs(ir::AxisAttrs{node.attrs_as_AxisAttrs()->axis()});
    case fb::Attrs::LayerNormAttrs: {
      const auto* a = node.attrs_as_LayerNormAttrs();
      return ir::Attrs(ir::LayerNormAttrs{a->axis(), a->epsilon()});
    }
    case fb::Attrs::ReshapeAttrs: {
      KILN_ASSIGN_OR_RETURN(ir::Shape shape,
                            read_shape(node.attrs_as_ReshapeAttrs()->shape(), -1, where));
      return ir::Attrs(ir::ReshapeAttrs{std::move(shape)});
    }
    case fb::Attrs::TransposeAttrs:
      return ir::Attrs(ir::TransposeAttrs{longs(node.attrs_as_TransposeAttrs()->perm())});
    case fb::Attrs::BroadcastToAttrs: {
      KILN_ASSIGN_OR_RETURN(ir::Shape shape,
                            read_shape(node.attrs_as_BroadcastToAttrs()->shape(), 0, where));
      return ir::Attrs(ir::BroadcastToAttrs{std::move(shape)});
    }
    case fb::Attrs::SliceAttrs: {
      const auto* a = node.attrs_as_SliceAttrs();
      return ir::Attrs(
          ir::SliceAttrs{longs(a->starts()), longs(a->ends()), longs(a->axes()), longs(a->steps())});
    }
    case fb::Attrs::Conv2dAttrs: {
      const auto* a = node.attrs_as_Conv2dAttrs();
      ir::Conv2dAttrs c;
      KILN_ASSIGN_OR_RETURN(c.strides, fixed_longs<2>(a->strides(), where, "strides"));
      KILN_ASSIGN_OR_RETURN(c.pads, fixed_longs<4>(a->pads(), where, "pads"));
      KILN_ASSIGN_OR_RETURN(c.dilations, fixed_longs<2>(a->dilations(), where, "dilations"));
      c.groups = a->groups();
      c.channels_last = a->channels_last();
      return ir::Attrs(c);
    }
    case fb::Attrs::Pool2dAttrs: {
      const auto* a = node.attrs_as_Pool2dAttrs();
      ir::Pool2dAttrs p;
      KILN_ASSIGN_OR_RETURN(p.kernel, fixed_longs<2>(a->kernel(), where, "kernel"));
      KILN_ASSIGN_OR_RETURN(p.strides, fixed_longs<2>(a->strides(), where, "strides"));
      KILN_ASSIGN_OR_RETURN(p.pads, fixed_longs<4>(a->pads(), where, "pads"));
      p.count_include_pad = a->count_include_pad();
      p.channels_last = a->channels_last();
      return ir::Attrs(p);
    }
    case fb::Attrs::AttentionAttrs: {
      const auto* a = node.attrs_as_AttentionAttrs();
      ir::AttentionAttrs t;
      if (a->scale()) t.scale = *a->scale();
      t.causal = a->causal();
      t.seq_major = a->seq_major();
      return ir::Attrs(t);
    }
    case fb::Attrs::TopKAttrs: {
      const auto* a = node.attrs_as_TopKAttrs();
      return ir::Attrs(ir::TopKAttrs{a->k(), a->axis(), a->largest()});
    }
    case fb::Attrs::ScatterAttrs: {
      const auto* a = node.attrs_as_ScatterAttrs();
      // The enum's values are the ir:: ones in order; anything past Min is a damaged file.
      if (uint8_t(a->reduction()) > uint8_t(fb::ScatterReduction::MAX)) {
        return bad(where + ": scatter with an unknown reduction " + std::to_string(int(a->reduction())));
      }
      return ir::Attrs(ir::ScatterAttrs{a->axis(), ir::ScatterReduction(uint8_t(a->reduction()))});
    }
    case fb::Attrs::IotaAttrs: {
      const auto* a = node.attrs_as_IotaAttrs();
      KILN_ASSIGN_OR_RETURN(ir::Shape shape, read_shape(a->shape(), 0, where));
      std::optional<ir::DType> dtype = from_fb(a->dtype());
      if (!dtype) return bad(where + ": iota of an unknown dtype");
      return ir::Attrs(ir::IotaAttrs{std::move(shape), a->axis(), *dtype});
    }
  }
  return bad(where + ": unknown attribute table code " + std::to_string(int(node.attrs_type())));
}

Result<ir::NodeId> read_id(uint32_t id, size_t num_nodes, const std::string& where) {
  if (id >= num_nodes)
    return bad(where + " refers to node " + std::to_string(id) + ", but the graph has " +
               std::to_string(num_nodes) + " nodes");
  return ir::NodeId(id);
}

Result<std::vector<ir::NodeId>> read_ids(const Vector<uint32_t>* ids, size_t num_nodes,
                                         const std::string& where) {
  std::vector<ir::NodeId> out;
  if (!ids) return out;
  out.reserve(ids->size());
  for (uint32_t id : *ids) {
    KILN_ASSIGN_OR_RETURN(ir::NodeId checked, read_id(id, num_nodes, where));
    out.push_back(checked);
  }
  return out;
}

// A constant's tensor (a view of the file where aligned). Its bytes and checksum, when the format
// has them, are appended to `checks`.
Result<ir::Tensor> read_constant(const fb::ConstantData& c, size_t index, const DataSegment& segment,
                                 std::vector<ChecksumCheck::Item>& checks) {
  const std::string where = "constant " + std::to_string(index);
  std::optional<ir::DType> dtype = from_fb(c.dtype());
  if (!dtype) return bad(where + ": unknown dtype code " + std::to_string(int(c.dtype())));
  std::vector<int64_t> shape = longs(c.shape());
  if (shape.size() > 64) return bad(where + ": rank is too large");
  // Element count with overflow checks: a corrupt shape must not wrap around to match the data.
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) return bad(where + ": negative dimension " + std::to_string(d));
    if (d != 0 && numel > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(d))
      return bad(where + ": shape is too large");
    numel *= uint64_t(d);
  }
  // Formats 1-2 hold the bytes inline; format 3 places them in the data segment.
  const std::byte* data = nullptr;
  uint64_t data_size = 0;
  if (segment.inline_data) {
    if (c.data()) {
      data = reinterpret_cast<const std::byte*>(c.data()->data());
      data_size = c.data()->size();
    }
  } else {
    if (c.data()) return bad(where + ": holds inline data, which this format version keeps in the data segment");
    const uint64_t offset = c.offset();
    data_size = c.size();
    if (offset % kConstantAlignment != 0 || offset > segment.bytes.size() ||
        data_size > segment.bytes.size() - offset)
      return bad(where + ": its bytes [" + std::to_string(offset) + ", +" + std::to_string(data_size) +
                 ") are not 64-byte aligned inside the " + std::to_string(segment.bytes.size()) +
                 "-byte data segment");
    data = reinterpret_cast<const std::byte*>(segment.bytes.data() + offset);
  }
  const uint64_t elem = ir::dtype_size(*dtype);
  if (numel > uint64_t(std::numeric_limits<int64_t>::max()) / elem || numel * elem != data_size)
    return bad(where + " (" + std::string(ir::dtype_name(*dtype)) + ", " + std::to_string(numel) +
               " elements) holds " + std::to_string(data_size) + " bytes of data");
  if (segment.format_version >= 4)
    checks.push_back({{reinterpret_cast<const uint8_t*>(data), size_t(data_size)}, c.checksum()});
  // Use the file's bytes in place when they are aligned well enough for any element type;
  // otherwise (a buffer at an unusual address) copy.
  if (data && reinterpret_cast<uintptr_t>(data) % alignof(std::max_align_t) == 0)
    return ir::Tensor::view(*dtype, std::move(shape), data, segment.owner);
  std::span<const std::byte> span(data, size_t(data_size));
  return ir::Tensor::from_bytes(*dtype, std::move(shape), span);
}

Result<ir::SizeExpr> read_size_expr(const fb::SizeExpr* expr, const std::string& where) {
  ir::SizeExpr out;
  if (!expr || !expr->terms()) return out;
  for (const fb::Term* term : *expr->terms()) {
    std::vector<std::string> symbols;
    if (term->symbols()) {
      for (const flatbuffers::String* s : *term->symbols()) {
        if (s->size() == 0) return bad(where + ": a size term has an empty symbol name");
        symbols.push_back(s->str());
      }
    }
    std::sort(symbols.begin(), symbols.end());
    if (!out.mutable_terms().emplace(std::move(symbols), term->coeff()).second)
      return bad(where + ": a size expression repeats a term");
  }
  return out;
}

}  // namespace

Result<ir::Graph> convert_graph(const fb::Graph& g, const DataSegment& segment,
                                std::vector<ChecksumCheck::Item> checks, std::unique_ptr<ChecksumCheck>& started) {
  ir::Graph graph;
  graph.name = str(g.name());
  graph.weights_path = str(g.weights_path());

  if (g.constants()) {
    size_t index = 0;
    for (const fb::ConstantData* c : *g.constants()) {
      KILN_ASSIGN_OR_RETURN(ir::Tensor t, read_constant(*c, index, segment, checks));
      graph.add_constant(std::move(t));
      ++index;
    }
  }
  if (!checks.empty()) started = std::make_unique<ChecksumCheck>(std::move(checks), segment.format_version);

  const size_t num_nodes = g.nodes() ? g.nodes()->size() : 0;
  if (num_nodes >= size_t(ir::kNoNode)) return bad("too many nodes");
  graph.nodes().reserve(num_nodes);
  if (g.nodes()) {
    size_t index = 0;
    for (const fb::Node* n : *g.nodes()) {
      std::string where = "node " + std::to_string(index);
      ir::Node node;
      std::optional<ir::OpKind> op = from_fb(n->op());
      if (!op) return bad(where + ": unknown op code " + std::to_string(int(n->op())));
      node.op = *op;
      node.name = str(n->name());
      where = "node '" + node.name + "' (" + std::string(ir::op_name(node.op)) + ")";
      KILN_ASSIGN_OR_RETURN(node.inputs, read_ids(n->inputs(), num_nodes, where + " input"));
      const ir::OpInfo& info = ir::op_info(node.op);
      const int count = int(node.inputs.size());
      if (count < info.min_inputs || (info.max_inputs >= 0 && count > info.max_inputs))
        return bad(where + ": has " + std::to_string(count) + " inputs");
      KILN_ASSIGN_OR_RETURN(node.attrs, read_attrs(*n, where));
      if (node.attrs.index() != ir::default_attrs(node.op).index())
        return bad(where + ": the attribute table does not belong to this op kind");
      if (const auto* c = std::get_if<ir::ConstantAttrs>(&node.attrs)) {
        if (c->constant_index >= graph.constants().size())
          return bad(where + ": refers to constant " + std::to_string(c->constant_index) +
                     ", but the file has " + std::to_string(graph.constants().size()));
      }
      KILN_ASSIGN_OR_RETURN(node.type, read_type(n->type(), where));
      graph.add_node(std::move(node));
      ++index;
    }
  }

  if (g.inputs()) {
    for (const fb::IoValue* io : *g.inputs()) {
      const std::string where = "graph input '" + str(io->name()) + "'";
      KILN_ASSIGN_OR_RETURN(ir::NodeId id, read_id(io->node(), num_nodes, where));
      if (graph.node(id).op != ir::OpKind::kInput)
        return bad(where + " is not an input node");
      if (graph.node(id).name != str(io->name()))
        return bad(where + " does not match its node's name '" + graph.node(id).name + "'");
      graph.inputs().push_back(id);
    }
  }
  if (g.outputs()) {
    for (const fb::IoValue* io : *g.outputs()) {
      ir::GraphOutput out;
      out.name = str(io->name());
      const std::string where = "graph output '" + out.name + "'";
      KILN_ASSIGN_OR_RETURN(out.node, read_id(io->node(), num_nodes, where));
      KILN_ASSIGN_OR_RETURN(out.declared, read_type(io->type(), where));
      graph.outputs().push_back(std::move(out));
    }
  }
  if (g.kernels()) {
    for (const fb::Kernel* k : *g.kernels()) {
      ir::Kernel kernel;
      kernel.name = str(k->name());
      const std::string where = "kernel '" + kernel.name + "'";
      std::optional<ir::KernelKind> kind = from_fb(k->kind());
      if (!kind) return bad(where + ": unknown kernel kind code " + std::to_string(int(k->kind())));
      kernel.kind = *kind;
      KILN_ASSIGN_OR_RETURN(kernel.nodes, read_ids(k->nodes(), num_nodes, where));
      KILN_ASSIGN_OR_RETURN(kernel.inputs, read_ids(k->inputs(), num_nodes, where + " input"));
      KILN_ASSIGN_OR_RETURN(kernel.outputs, read_ids(k->outputs(), num_nodes, where + " output"));
      if (k->anchor() != ir::kNoNode) {
        KILN_ASSIGN_OR_RETURN(kernel.anchor, read_id(k->anchor(), num_nodes, where + " anchor"));
      }
      graph.kernels().push_back(std::move(kernel));
    }
  }
  return graph;
}

Result<ir::ExecutionPlan> convert_plan(const fb::Plan* p, const ir::Graph& graph) {
  ir::ExecutionPlan plan;
  if (!p) return plan;  // a graph without a plan is run node by node
  const size_t num_nodes = graph.num_nodes();
  if (p->launches()) {
    size_t index = 0;
    for (const fb::Launch* l : *p->launches()) {
      const std::string where = "launch " + std::to_string(index++);
      if (l->kernel() >= graph.kernels().size())
        return bad(where + " refers to kernel " + std::to_string(l->kernel()) + ", but there are " +
                   std::to_string(graph.kernels().size()));
      ir::Launch launch;
      launch.kernel = l->kernel();
      KILN_ASSIGN_OR_RETURN(launch.launch_shape, read_shape(l->launch_shape(), 0, where));
      plan.launches.push_back(std::move(launch));
    }
  }
  if (p->buffers()) {
    size_t index = 0;
    for (const fb::BufferAssignment* b : *p->buffers()) {
      const std::string where = "plan buffer " + std::to_string(index++);
      ir::BufferAssignment buffer;
      KILN_ASSIGN_OR_RETURN(buffer.value, read_id(b->value(), num_nodes, where));
      std::optional<ir::Storage> storage = from_fb(b->storage());
      if (!storage) return bad(where + ": unknown storage code " + std::to_string(int(b->storage())));
      buffer.storage = *storage;
      // Drivers upload a constant buffer from its node's tensor: checked once, here.
      if (buffer.storage == ir::Storage::kConstant && graph.node(buffer.value).op != ir::OpKind::kConstant)
        return bad(where + ": stored as a constant, but value " + std::to_string(buffer.value) + " is not one");
      KILN_ASSIGN_OR_RETURN(buffer.offset, read_size_expr(b->offset(), where));
      KILN_ASSIGN_OR_RETURN(buffer.size, read_size_expr(b->size(), where));
      if (b->alias_of() != ir::kNoNode) {
        KILN_ASSIGN_OR_RETURN(buffer.alias_of, read_id(b->alias_of(), num_nodes, where + " alias"));
      } else if (buffer.storage == ir::Storage::kAlias) {
        return bad(where + ": an alias buffer names no value it aliases");
      }
      buffer.slot = b->slot();
      if (buffer.slot != ir::kNoSlot && (!p->slots() || buffer.slot >= p->slots()->size())) {
        return bad(where + ": arena slot " + std::to_string(buffer.slot) + " does not exist");
      }
      plan.buffers.push_back(std::move(buffer));
    }
  }
  KILN_ASSIGN_OR_RETURN(plan.arena_bytes, read_size_expr(p->arena_bytes(), "plan arena size"));
  if (p->slots()) {
    for (const fb::SizeExpr* slot : *p->slots()) {
      KILN_ASSIGN_OR_RETURN(ir::SizeExpr capacity, read_size_expr(slot, "plan arena slot"));
      plan.slots.push_back(std::move(capacity));
    }
  }
  plan.alignment = p->alignment();
  if (plan.alignment <= 0 || (plan.alignment & (plan.alignment - 1)) != 0 || plan.alignment > 4096)
    return bad("plan alignment " + std::to_string(plan.alignment) + " is not a power of two <= 4096");
  return plan;
}

namespace {

// Whether `text` occurs in `blob`. glibc's memmem: a kernel's name is looked up in a module's
// blob (MBs of cubin for a large model) at every load; memmem scans PTX about 3.5x faster than
// std::boyer_moore_horspool_searcher, which was itself 4x faster than std::search.
bool contains_bytes(std::span<const uint8_t> blob, std::string_view text) {
  return !text.empty() && memmem(blob.data(), blob.size(), text.data(), text.size()) != nullptr;
}

// The kernel names a PTX module defines (`.entry NAME`), collected in one pass so that each
// kernel's name is a set lookup rather than a search of the module. Views into `ptx`.
std::unordered_set<std::string_view> ptx_entry_names(std::span<const uint8_t> ptx) {
  const std::string_view text(reinterpret_cast<const char*>(ptx.data()), ptx.size());
  constexpr std::string_view kEntry = ".entry";
  std::unordered_set<std::string_view> names;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  // PTX identifiers: letters, digits, '_', '$', '%' (the PTX ISA's "followsym").
  auto is_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%'; };
  for (size_t at = 0;;) {
    const void* found = memmem(text.data() + at, text.size() - at, kEntry.data(), kEntry.size());
    if (!found) break;
    const size_t after = size_t(static_cast<const char*>(found) - text.data()) + kEntry.size();
    size_t name = after;
    while (name < text.size() && is_space(text[name])) ++name;
    size_t stop = name;
    while (stop < text.size() && is_name(text[stop])) ++stop;
    if (name != after && stop != name) names.insert(text.substr(name, stop - name));
    at = stop;
  }
  return names;
}

// A blob of the file: a view of it, which `owner` keeps alive, when it is aligned as the drivers
// need (SPIR-V's 32-bit words, ELF images; the writer aligns blobs to 16 bytes), else a copy.
Blob file_blob(const Vector<uint8_t>* bytes, const std::shared_ptr<const void>& owner) {
  if (!bytes || bytes->size() == 0) return {};
  const std::span<const uint8_t> span(bytes->data(), bytes->size());
  if (owner && reinterpret_cast<uintptr_t>(span.data()) % 16 == 0) return Blob::view(span, owner);
  return Blob(std::vector<uint8_t>(span.begin(), span.end()));
}

Result<KernelDispatch> read_dispatch(const fb::KernelDispatch& d, const std::string& where) {
  KernelDispatch dispatch;
  KILN_ASSIGN_OR_RETURN(dispatch.work_items, read_size_expr(d.work_items(), where + " dispatch"));
  dispatch.items_per_group = d.items_per_group();
  dispatch.workgroup_size = d.workgroup_size();
  if (dispatch.items_per_group == 0 || dispatch.workgroup_size == 0) return bad(where + " has a zero dispatch size");
  return dispatch;
}

Result<LibraryEpilogue> read_library_epilogue(const Vector<uint32_t>* args, const fb::KernelDispatch* dispatch,
                                              const std::string& where) {
  LibraryEpilogue epilogue;
  if (!args) return epilogue;
  epilogue.args.assign(args->begin(), args->end());
  if (!dispatch) return bad(where + ": its epilogue has no dispatch");
  KILN_ASSIGN_OR_RETURN(epilogue.dispatch, read_dispatch(*dispatch, where + " epilogue"));
  return epilogue;
}

Result<GemmCall> convert_gemm(const fb::GemmCall& g, const std::vector<KernelArg>& args, const std::string& where) {
  GemmCall call;
  call.a_arg = g.a_arg();
  call.b_arg = g.b_arg();
  call.out_arg = g.out_arg();
  call.bias_arg = g.bias_arg();
  call.residual_arg = g.residual_arg();
  call.alpha = g.alpha();
  KILN_ASSIGN_OR_RETURN(call.in_place_epilogue,
                        read_library_epilogue(g.epilogue_args(), g.epilogue_dispatch(), where + " GEMM call"));
  std::optional<ir::DType> dtype = from_fb(g.dtype());
  if (!dtype) return bad(where + ": its GEMM call has an unknown dtype code " + std::to_string(int(g.dtype())));
  call.dtype = *dtype;
  KILN_ASSIGN_OR_RETURN(call.batch, read_size_expr(g.batch(), where + " GEMM batch"));
  KILN_ASSIGN_OR_RETURN(call.m, read_size_expr(g.m(), where + " GEMM m"));
  KILN_ASSIGN_OR_RETURN(call.n, read_size_expr(g.n(), where + " GEMM n"));
  KILN_ASSIGN_OR_RETURN(call.k, read_size_expr(g.k(), where + " GEMM k"));
  call.a_batched = g.a_batched();
  call.b_batched = g.b_batched();
  switch (g.epilogue()) {
    case fb::GemmEpilogue::Identity: call.epilogue = GemmCall::Epilogue::kNone; break;
    case fb::GemmEpilogue::Relu: call.epilogue = GemmCall::Epilogue::kRelu; break;
    case fb::GemmEpilogue::GeluTanh: call.epilogue = GemmCall::Epilogue::kGeluTanh; break;
    default: return bad(where + ": its GEMM call has an unknown epilogue code " + std::to_string(int(g.epilogue())));
  }
  call.allow_tf32 = g.allow_tf32();
  Status ok = check_gemm_call(call, args);
  if (!ok.is_ok()) return bad(where + ": " + ok.message());
  return call;
}

// The packed bytes of `p` in the data segment, or an empty span when they lie outside it (or are
// not aligned like a constant), which convert_packed_weights reports.
std::span<const uint8_t> packed_bytes(const fb::PackedWeights& p, const DataSegment& segment) {
  if (segment.inline_data || p.offset() % kConstantAlignment != 0 || p.offset() > segment.bytes.size() ||
      p.size() > segment.bytes.size() - p.offset())
    return {};
  return segment.bytes.subspan(size_t(p.offset()), size_t(p.size()));
}

// A conv call's packed weights: the layout, checked against its source constant w, and a view of
// the bytes (their checksum is checked with the targets' blobs).
Status convert_packed_weights(const fb::PackedWeights& p, const std::vector<KernelArg>& args, const ir::Graph& graph,
                              const DataSegment& segment, ConvCall& call, const std::string& where) {
  PackedLayout layout;
  layout.dims = longs(p.dims());
  layout.source_strides = longs(p.source_strides());
  layout.padded_dims = longs(p.padded_dims());
  layout.outer_strides = longs(p.outer_strides());
  layout.inner_sizes = longs(p.inner_sizes());
  if (p.inner_dims()) layout.inner_dims.assign(p.inner_dims()->begin(), p.inner_dims()->end());
  const ir::NodeId w = args[call.w_arg].value;  // a buffer arg in range: check_conv_call
  if (graph.node(w).op != ir::OpKind::kConstant) return bad(where + ": its conv call packs a w that is not a constant");
  const ir::Tensor& source = graph.constant_of(w);
  const uint64_t element_bytes = ir::dtype_size(source.dtype());
  Status checked = check_packed_layout(layout, source.size_bytes() / element_bytes);
  if (!checked.is_ok()) return bad(where + ": its conv call's " + checked.message());
  const std::span<const uint8_t> bytes = packed_bytes(p, segment);
  if (p.size() != packed_elements(layout) * element_bytes || bytes.size() != p.size())
    return bad(where + ": its conv call's packed weights [" + std::to_string(p.offset()) + ", +" +
               std::to_string(p.size()) + ") do not fit their layout or the " + std::to_string(segment.bytes.size()) +
               "-byte data segment");
  call.packed_layout = std::move(layout);
  call.packed_weights = Blob::view(bytes, segment.owner);
  return Status::ok();
}

Result<ConvCall> convert_conv(const fb::ConvCall& c, const std::vector<KernelArg>& args, const ir::Graph& graph,
                              const DataSegment& segment, const std::string& where) {
  ConvCall call;
  call.x_arg = c.x_arg();
  call.w_arg = c.w_arg();
  call.out_arg = c.out_arg();
  call.bias_arg = c.bias_arg();
  call.residual_arg = c.residual_arg();
  std::optional<ir::DType> dtype = from_fb(c.dtype());
  if (!dtype) return bad(where + ": its conv call has an unknown dtype code " + std::to_string(int(c.dtype())));
  call.dtype = *dtype;
  KILN_ASSIGN_OR_RETURN(call.batch, read_size_expr(c.batch(), where + " conv batch"));
  call.channels = c.channels();
  call.height = c.height();
  call.width = c.width();
  call.out_channels = c.out_channels();
  call.kernel_h = c.kernel_h();
  call.kernel_w = c.kernel_w();
  call.groups = c.groups();
  call.pad_h = c.pad_h();
  call.pad_w = c.pad_w();
  call.stride_h = c.stride_h();
  call.stride_w = c.stride_w();
  call.dilation_h = c.dilation_h();
  call.dilation_w = c.dilation_w();
  switch (c.activation()) {
    case fb::ConvActivation::Identity: call.activation = ConvCall::Activation::kNone; break;
    case fb::ConvActivation::Relu: call.activation = ConvCall::Activation::kRelu; break;
    case fb::ConvActivation::Clamp: call.activation = ConvCall::Activation::kClamp; break;
    default: return bad(where + ": its conv call has an unknown activation code " + std::to_string(int(c.activation())));
  }
  call.allow_tf32 = c.allow_tf32();
  call.channels_last = c.channels_last();
  call.clamp_min = c.clamp_min();
  call.clamp_max = c.clamp_max();
  KILN_ASSIGN_OR_RETURN(call.in_place_epilogue,
                        read_library_epilogue(c.epilogue_args(), c.epilogue_dispatch(), where + " conv call"));
  Status ok = check_conv_call(call, args);
  if (!ok.is_ok()) return bad(where + ": " + ok.message());
  if (c.packed_weights()) KILN_RETURN_IF_ERROR(convert_packed_weights(*c.packed_weights(), args, graph, segment, call, where));
  return call;
}

// Calls visit(target, module, kernel, packed), with one of module and kernel set, for every blob
// of `targets` in one fixed order: a kernel's own blob (packed null), then its conv call's packed
// weights (packed set). target_blob_checks' items and damaged_target_blob's index both follow it.
// Stops early when visit returns true.
template <typename Visit>
void walk_target_blobs(const Vector<Offset<fb::Target>>* targets, Visit&& visit) {
  if (!targets) return;
  for (const fb::Target* t : *targets) {
    if (t->modules())
      for (const fb::ModuleBinary* m : *t->modules())
        if (visit(t, m, nullptr, nullptr)) return;
    if (t->kernels())
      for (const fb::KernelBinary* k : *t->kernels()) {
        if (visit(t, nullptr, k, nullptr)) return;
        if (k->conv() && k->conv()->packed_weights() && visit(t, nullptr, k, k->conv()->packed_weights())) return;
      }
  }
}

}  // namespace

std::vector<ChecksumCheck::Item> target_blob_checks(const Vector<Offset<fb::Target>>* targets,
                                                    const DataSegment& segment) {
  std::vector<ChecksumCheck::Item> checks;
  auto bytes = [](const Vector<uint8_t>* blob) {
    return blob ? std::span<const uint8_t>(blob->data(), blob->size()) : std::span<const uint8_t>();
  };
  walk_target_blobs(targets, [&](const fb::Target*, const fb::ModuleBinary* m, const fb::KernelBinary* k,
                                 const fb::PackedWeights* packed) {
    if (packed) {
      // Bytes outside the data segment are convert_conv's error: their check is of nothing.
      const std::span<const uint8_t> data = packed_bytes(*packed, segment);
      checks.push_back({data, data.size() == packed->size() ? packed->checksum() : blob_checksum({}, segment.format_version)});
    } else {
      checks.push_back(m ? ChecksumCheck::Item{bytes(m->blob()), m->blob_checksum()}
                         : ChecksumCheck::Item{bytes(k->blob()), k->blob_checksum()});
    }
    return false;
  });
  return checks;
}

Status damaged_target_blob(const Vector<Offset<fb::Target>>* targets, size_t index) {
  Status damaged = internal_error("artifact reader: no target blob " + std::to_string(index));
  size_t at = 0;
  walk_target_blobs(targets, [&](const fb::Target* t, const fb::ModuleBinary* m, const fb::KernelBinary* k,
                                 const fb::PackedWeights* packed) {
    if (at++ != index) return false;
    const std::string what = m ? "module " + std::to_string(m->id()) + " '" + str(m->format()) + "'"
                               : "kernel '" + str(k->kernel_name()) + "'";
    damaged = bad("target '" + str(t->name()) + "' " + what + ": its " +
                  (packed ? "packed weights are" : "binary is") + " damaged (checksum mismatch)");
    return true;
  });
  return damaged;
}

Result<ConvertedTargets> convert_targets(const Vector<Offset<fb::Target>>* targets, const ir::Graph& graph,
                                         const std::shared_ptr<const void>& owner, const DataSegment& segment) {
  ConvertedTargets converted;
  std::vector<KernelBinary>& out = converted.kernels;
  if (!targets) return converted;
  // A kernel may have several binaries per target (variants for devices with different
  // features); a driver picks by required_features, so two with the same set are ambiguous.
  std::set<std::tuple<std::string, uint32_t, std::vector<std::string>>> variants;
  for (const fb::Target* t : *targets) {
    const std::string target = str(t->name());
    if (target.empty()) return bad("a target has no name");
    std::set<uint32_t> module_ids;
    if (t->modules()) {
      for (const fb::ModuleBinary* m : *t->modules()) {
        ModuleBinary module;
        module.target = target;
        module.format = str(m->format());
        module.id = m->id();
        const std::string where =
            "target '" + target + "' module " + std::to_string(module.id) + " '" + module.format + "'";
        if (!is_module_format(module.format)) return bad(where + ": unknown module format");
        for (const ModuleBinary& seen : converted.modules)
          if (seen.target == target && seen.id == module.id && seen.format == module.format)
            return bad(where + " appears twice");
        module.blob = file_blob(m->blob(), owner);
        if (module.blob.empty()) return bad(where + " is empty");
        module_ids.insert(module.id);
        converted.modules.push_back(std::move(module));
      }
    }
    std::map<uint32_t, std::unordered_set<std::string_view>> ptx_names;  // by module id
    for (const ModuleBinary& m : converted.modules)
      if (m.target == target && m.format == "ptx") ptx_names[m.id] = ptx_entry_names(m.blob);
    if (!t->kernels()) continue;
    for (const fb::KernelBinary* k : *t->kernels()) {
      KernelBinary binary;
      binary.target = target;
      binary.kernel_name = str(k->kernel_name());
      binary.kernel_index = k->kernel_index();
      if (binary.kernel_index >= graph.kernels().size())
        return bad("target '" + target + "' kernel '" + binary.kernel_name + "' refers to kernel " +
                   std::to_string(binary.kernel_index) + ", but the graph has " +
                   std::to_string(graph.kernels().size()));
      binary.format = str(k->format());
      binary.entry_point = str(k->entry_point());
      binary.module_id = k->module_id();
      if (!is_kernel_format(binary.format))
        return bad("target '" + target + "' kernel '" + binary.kernel_name + "' has unknown format '" +
                   binary.format + "'");
      binary.blob = file_blob(k->blob(), owner);
      if (k->required_features())
        for (const flatbuffers::String* f : *k->required_features()) binary.required_features.push_back(f->str());
      const std::string where = "target '" + target + "' kernel '" + binary.kernel_name + "'";
      if (k->args()) {
        for (const fb::KernelArg* a : *k->args()) {
          KernelArg arg;
          switch (a->kind()) {
            case fb::KernelArgKind::Buffer:
              arg.kind = KernelArg::Kind::kBuffer;
              arg.value = a->value();
              if (arg.value >= graph.num_nodes()) return bad(where + " has a buffer argument out of range");
              break;
            case fb::KernelArgKind::Symbol:
              arg.kind = KernelArg::Kind::kSymbol;
              arg.symbol = str(a->symbol());
              if (arg.symbol.empty()) return bad(where + " has a symbol argument without a name");
              break;
            default:
              return bad(where + " has an argument of unknown kind");
          }
          binary.args.push_back(std::move(arg));
        }
      }
      if (const fb::KernelDispatch* d = k->dispatch()) {
        KILN_ASSIGN_OR_RETURN(binary.dispatch, read_dispatch(*d, where));
      }
      if (const fb::GemmCall* g = k->gemm()) {
        KILN_ASSIGN_OR_RETURN(GemmCall call, convert_gemm(*g, binary.args, where));
        binary.gemm = call;
      }
      if (const fb::ConvCall* c = k->conv()) {
        KILN_ASSIGN_OR_RETURN(ConvCall call, convert_conv(*c, binary.args, graph, segment, where));
        binary.conv = call;
      }
      std::vector<std::string> features = binary.required_features;
      std::sort(features.begin(), features.end());
      features.erase(std::unique(features.begin(), features.end()), features.end());
      if (!variants.emplace(target, binary.kernel_index, std::move(features)).second)
        return bad(where + " has two binaries for kernel " + std::to_string(binary.kernel_index) +
                   " with the same required features");
      if (binary.format == kModuleFormat) {
        if (!module_ids.count(binary.module_id))
          return bad(where + " is a function of shared module " + std::to_string(binary.module_id) +
                     ", but the target has no such module");
        if (!binary.blob.empty()) return bad(where + " is a function of a shared module but has a blob of its own");
        if (binary.entry_point.empty()) return bad(where + " is a function of a shared module but names no entry point");
        // The name must be in its module: a damaged name would otherwise reach the driver's
        // loader as a missing function. One format of the module is enough (its formats are
        // checksummed and compiled from one source): the PTX's entry names when it has PTX, else
        // a search of each format.
        for (const std::string& name : {binary.entry_point, library_epilogue(binary)
                                                                ? binary.entry_point + kLibraryEpilogueSuffix
                                                                : std::string()}) {
          if (name.empty()) continue;
          const std::string what = name == binary.entry_point ? "its entry point '" + name + "'"
                                                              : "its library epilogue function '" + name + "'";
          if (auto names = ptx_names.find(binary.module_id); names != ptx_names.end()) {
            if (!names->second.count(name)) return bad(where + ": " + what + " is not in the 'ptx' module");
            continue;
          }
          for (const ModuleBinary& m : converted.modules)
            if (m.target == target && m.id == binary.module_id && !contains_bytes(m.blob, name))
              return bad(where + ": " + what + " is not in the '" + m.format + "' module");
        }
      }
      if (binary.format == "opencl-c" && !contains_bytes(binary.blob, binary.entry_point))
        return bad(where + ": its entry point '" + binary.entry_point + "' is not in its OpenCL C source");
      out.push_back(std::move(binary));
    }
  }
  return converted;
}

}  // namespace kiln::artifact::detail
