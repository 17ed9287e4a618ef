// library_epilogue_kernel: see library_epilogue.h.
#include "codegen/library_epilogue.h"

#include <set>

#include "codegen/c_family.h"

namespace kiln::codegen {
namespace {

using ir::NodeId;

// The written buffer of `model`, when there is exactly one and it holds `value`; else -1.
int only_output(const KernelModel& model, NodeId value) {
  int out_index = -1;
  for (size_t buf = 0; buf < model.buffers.size(); ++buf) {
    if (!model.buffers[buf].written) continue;
    if (out_index >= 0 || model.buffers[buf].value != value) return -1;
    out_index = int(buf);
  }
  return out_index;
}

}  // namespace

std::unique_ptr<LibraryEpilogueKernel> library_epilogue_kernel(const KernelModel& model, NodeId last,
                                                               const std::vector<NodeId>& rest) {
  if (rest.empty()) return nullptr;
  const ir::TensorType& library_type = model.node(last).type;
  const ir::Shape& os = library_type.shape;
  const NodeId final_value = rest.back();
  const int out_index = only_output(model, final_value);
  // The library writes `last` where the output goes: it must have the output's dtype and shape.
  if (out_index < 0 || model.buffers[size_t(out_index)].dtype != library_type.dtype ||
      !(model.node(final_value).type.shape == os))
    return nullptr;
  auto e = std::make_unique<LibraryEpilogueKernel>();
  e->kernel.name = model.kernel->name + artifact::kLibraryEpilogueSuffix;
  e->kernel.kind = ir::KernelKind::kElementwise;
  e->kernel.nodes = rest;
  KernelModel& m = e->model;
  m.graph = model.graph;
  m.kernel = &e->kernel;
  m.plan = model.plan;
  m.kernel_index = model.kernel_index;
  m.entry_point = model.entry_point + artifact::kLibraryEpilogueSuffix;
  m.kind = KernelTemplate::kPointwise;
  m.in_place = true;
  m.space = os;
  m.prologue = rest;
  // Buffers: the library's result (in the output's memory), what the rest reads from memory, the
  // output. A rest node reading a value the library computed but did not write (the bare
  // product before its bias) cannot run here.
  auto add = [&](NodeId value, bool written, int source) {
    const ir::TensorType& type = model.node(value).type;
    m.buffers.push_back({value, type.dtype, type.shape, written});
    artifact::KernelArg arg = model.args[size_t(source)];
    m.args.push_back(arg);
    e->call.args.push_back(uint32_t(source));
  };
  add(last, false, out_index);
  e->kernel.inputs.push_back(last);
  std::set<NodeId> available(rest.begin(), rest.end());
  available.insert(last);
  for (NodeId n : rest) {
    for (NodeId in : model.node(n).inputs) {
      if (available.count(in)) continue;
      const int index = model.buffer_index(in);
      if (index < 0 || model.buffers[size_t(index)].written) return nullptr;
      add(in, false, index);
      e->kernel.inputs.push_back(in);
      available.insert(in);
    }
  }
  add(final_value, true, out_index);
  e->kernel.outputs.push_back(final_value);
  m.symbols = model.symbols;
  for (size_t s = 0; s < model.symbols.size(); ++s) {
    const size_t source = model.buffers.size() + s;
    m.args.push_back(model.args[source]);
    e->call.args.push_back(uint32_t(source));
  }
  m.dispatch.work_items = ir::SizeExpr::of_shape(os, 1);
  m.dispatch.items_per_group = kPointwiseGroupSize;
  m.dispatch.workgroup_size = kPointwiseGroupSize;
  e->call.dispatch = cuda_dispatch(m);
  return e;
}

std::optional<uint32_t> library_output(const KernelModel& model, NodeId last, const std::vector<NodeId>& rest,
                                       artifact::LibraryEpilogue& epilogue) {
  if (rest.empty()) {
    const int out_index = only_output(model, last);
    if (out_index < 0 || model.buffers[size_t(out_index)].dtype != model.node(last).type.dtype) return std::nullopt;
    return uint32_t(out_index);
  }
  std::unique_ptr<LibraryEpilogueKernel> e = library_epilogue_kernel(model, last, rest);
  if (!e) return std::nullopt;
  epilogue = e->call;
  return epilogue.args.front();
}

}  // namespace kiln::codegen
