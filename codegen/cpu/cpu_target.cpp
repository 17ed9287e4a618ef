// The cpu target. render gives each kernel as one C++ translation unit (Dialect::kCpu): the
// shared helpers, then `extern "C" void <entry>(void* const* buffers, const long long* symbols,
// long long begin, long long end)`, which runs work units [begin, end) of the kernel (elements,
// rows, output rows or query rows: cpu_dispatch below). compile turns every distinct kernel into
// an object file with clang on the CompileContext's threads (each one unit of the persistent
// cache), then links them in kernel order with lld into one shared object, the "so:<arch>"
// ModuleBinary with id 0 (x86_64, or aarch64 when cross-compiling). Each KernelBinary has format "module", an empty blob, that module,
// its entry point and a dispatch whose workgroup_size is 1 and whose items_per_group is the
// fewest units worth a thread of the runtime's pool. -S writes each kernel's <name>.cpp.
//
// The code is built for what TargetOptions::cpu selects (select_cpu: an architecture and an LLVM
// CPU name; "native" is resolved here to the compiling machine's CPU, so the artifact records
// what it was really built for).
#include "codegen/cpu/cpu_target.h"

#include <algorithm>

#include "artifact/targets.h"
#include "codegen/c_family.h"
#include "codegen/cpu/cpu_toolchain.h"
#include "codegen/conv_call.h"
#include "codegen/gemm_call.h"
#include "codegen/library_epilogue.h"
#include "vendor/onednn/onednn_conv.h"

namespace kiln::codegen {
namespace {

// Elements a pointwise task should at least cover; rows a row task should at least cover,
// counted in elements of its rows.
constexpr int64_t kPointwiseGrain = 4096;
constexpr int64_t kRowGrainElements = 4096;
constexpr uint32_t kMatMulGrainRows = 4;

// The layout in which oneDNN's primitive for `record`'s conv call reads its weights on this
// machine, when that is not w's own: the writer then stores w again in it, and the driver uses
// that copy in place instead of reordering w at every load. Only for calls the driver runs
// through oneDNN (f32, constant w) and code for this machine's architecture; a machine whose
// oneDNN chooses another layout (another instruction set) reorders w, as without it. The batch is
// the call's, or 1 when it is symbolic.
std::optional<artifact::PackedLayout> packed_weights_layout(const ir::Graph& graph, const artifact::KernelBinary& record,
                                                             const TargetOptions& options) {
  const artifact::ConvCall& call = *record.conv;
  if (call.dtype != ir::DType::kF32 || call.w_arg >= record.args.size()) return std::nullopt;
  const artifact::KernelArg& w = record.args[call.w_arg];
  if (w.kind != artifact::KernelArg::Kind::kBuffer || w.value >= graph.num_nodes() ||
      graph.node(w.value).op != ir::OpKind::kConstant)
    return std::nullopt;
  Result<CpuSelection> cpu = select_cpu(options.cpu), host = select_cpu("");
  if (!cpu.is_ok() || !host.is_ok() || cpu->arch != host->arch) return std::nullopt;
  Result<const onednn::OneDnnApi*> api = onednn::load_onednn();
  if (!api.is_ok()) return std::nullopt;
  Result<int64_t> batch = call.batch.evaluate({});
  auto described = onednn::describe_convolution(**api, call, batch.is_ok() ? *batch : 1);
  if (!described.is_ok()) return std::nullopt;
  return onednn::packed_layout_of(described->weights, described->plain_weights);
}

artifact::KernelDispatch cpu_dispatch(const KernelModel& m) {
  artifact::KernelDispatch d;
  d.workgroup_size = 1;
  d.items_per_group = 1;
  switch (m.kind) {
    case KernelTemplate::kPointwise:
      d.work_items = m.dispatch.work_items;
      d.items_per_group = kPointwiseGrain;
      break;
    case KernelTemplate::kRowReduce: {
      d.work_items = m.dispatch.work_items;
      int64_t row = 1;
      bool static_row = true;
      for (size_t i = 0; i < m.space.size(); ++i)
        if (m.reduced_axes[i]) {
          if (m.space[i].is_static()) row *= m.space[i].size();
          else static_row = false;
        }
      if (static_row && row > 0) d.items_per_group = uint32_t(std::max<int64_t>(1, kRowGrainElements / row));
      break;
    }
    case KernelTemplate::kMatMul: {
      // Output rows: every dimension of the output but the columns (a vector b has none).
      const ir::Node& anchor = m.node(m.anchor);
      const bool b_vector = m.node(anchor.inputs[1]).type.shape.size() == 1;
      ir::Shape rows = m.space;
      if (!b_vector && !rows.empty()) rows.pop_back();
      d.work_items = ir::SizeExpr::of_shape(rows, 1);
      d.items_per_group = kMatMulGrainRows;
      break;
    }
    case KernelTemplate::kAttention:
      d.work_items = m.dispatch.work_items;  // query rows
      break;
  }
  return d;
}

// The in-place epilogue after the kernel's library call, if it has one.
std::unique_ptr<LibraryEpilogueKernel> library_epilogue(const KernelModel& model) {
  std::unique_ptr<LibraryEpilogueKernel> epilogue = gemm_epilogue_kernel(model);
  return epilogue ? std::move(epilogue) : conv_epilogue_kernel(model, /*fuse_clamp=*/true);  // oneDNN's clip post-op
}

class CpuTarget final : public Target {
 public:
  std::string_view name() const override { return artifact::kCpuTarget; }
  std::string_view source_suffix() const override { return ".cpp"; }

  Result<std::vector<KernelSource>> render(const KernelModel& model, const TargetOptions& options) const override {
    KILN_ASSIGN_OR_RETURN(RenderedKernel rendered, render_c_family(model, Dialect::kCpu));
    // A kernel that oneDNN runs only in part: its in-place epilogue lives beside it.
    if (std::unique_ptr<LibraryEpilogueKernel> epilogue = library_epilogue(model)) {
      KILN_ASSIGN_OR_RETURN(RenderedKernel rest, render_c_family(epilogue->model, Dialect::kCpu));
      rendered.source += "\n" + rest.source.substr(rest.source.find("extern \"C\""));  // one prelude per unit
    }
    std::vector<KernelSource> out;
    KILN_ASSIGN_OR_RETURN(const CpuSelection cpu, select_cpu(options.cpu));
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> flags, cpu_required_flags(cpu));
    out.push_back({"", std::move(rendered.source), std::move(flags)});
    return out;
  }

  Result<DeviceCode> compile(const ir::Graph&, const std::vector<KernelVariants>& kernels,
                             const TargetOptions& options, CompileContext& context) const override {
    DeviceCode out;
    out.kernels.resize(kernels.size(), std::vector<CompiledVariant>(1));  // the code is the module's
    if (options.sources_only) return out;                                 // -S: the .cpp files only
    KILN_ASSIGN_OR_RETURN(const std::string identity, cpu_toolchain_identity());
    KILN_ASSIGN_OR_RETURN(const CpuSelection cpu, select_cpu(options.cpu));
    const int opt_level = options.opt_level >= 3 ? 3 : options.opt_level;
    std::vector<std::vector<uint8_t>> objects(kernels.size());
    KILN_RETURN_IF_ERROR(context.parallel_for("cpu clang", kernels.size(), [&](size_t k) -> Status {
      const std::string& source = kernels[k].variants.front().text;
      CacheKey key = unit_key(identity);
      key.add("triple", cpu.triple).add("cpu", cpu.cpu).add("opt", std::to_string(opt_level)).add("source", source);
      KILN_ASSIGN_OR_RETURN(objects[k], context.cached(key, [&]() { return compile_object(source, cpu, opt_level); }));
      return Status::ok();
    }));
    CacheKey key = unit_key(identity);
    key.add("link", cpu.arch).add("objects", std::to_string(objects.size()));
    for (const std::vector<uint8_t>& object : objects)
      key.add("object", std::string_view(reinterpret_cast<const char*>(object.data()), object.size()));
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> module,
                          context.cached(key, [&]() { return link_shared_object(objects, cpu.arch); }));
    out.modules.push_back({std::string(artifact::kCpuTarget), "so:" + cpu.arch, std::move(module), 0});
    return out;
  }

  void package(const KernelModel& model, CompiledVariant, const TargetOptions& options,
               artifact::KernelBinary& record) const override {
    record.format = artifact::kModuleFormat;
    record.module_id = 0;
    record.entry_point = model.entry_point;
    record.dispatch = cpu_dispatch(model);
    // The driver runs f32 GEMMs and convolutions through oneDNN where it loads
    // (runtime/drivers/cpu/onednn.h), else this kernel's generated code.
    record.gemm = match_gemm_call(model, /*allow_tf32=*/false);
    record.conv = match_conv_call(model, /*allow_tf32=*/false, /*fuse_clamp=*/true);
    if (record.conv) record.conv->packed_layout = packed_weights_layout(*model.graph, record, options);
    artifact::LibraryEpilogue* rest = record.gemm ? &record.gemm->in_place_epilogue
                                      : record.conv ? &record.conv->in_place_epilogue : nullptr;
    if (rest && !rest->empty())
      if (std::unique_ptr<LibraryEpilogueKernel> epilogue = library_epilogue(model))
        rest->dispatch = cpu_dispatch(epilogue->model);
  }
};

}  // namespace

std::unique_ptr<Target> make_cpu_target() { return std::make_unique<CpuTarget>(); }

}  // namespace kiln::codegen
