// The OpenCL target: OpenCL C source is the artifact blob (format "opencl-c"); the driver builds
// it at load time for the device it runs on. -S writes the same text as <name>.cl.
#include "codegen/opencl/opencl_target.h"

#include "codegen/c_family.h"
#include "codegen/kernel_model.h"

namespace kiln::codegen {
namespace {

class OpenClTarget final : public Target {
 public:
  std::string_view name() const override { return "opencl"; }

  Result<CompiledKernels> compile(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                  const TargetOptions& options) const override {
    CompiledKernels out;
    for (uint32_t k = 0; k < graph.kernels().size(); ++k) {
      KILN_ASSIGN_OR_RETURN(KernelModel model, build_kernel_model(graph, plan, k));
      KILN_ASSIGN_OR_RETURN(RenderedKernel rendered, render_c_family(model, Dialect::kOpenCL));
      artifact::KernelBinary bin;
      bin.target = "opencl";
      bin.kernel_name = graph.kernels()[k].name;
      bin.kernel_index = k;
      bin.format = "opencl-c";
      bin.entry_point = model.entry_point;
      bin.blob.assign(rendered.source.begin(), rendered.source.end());
      bin.required_features = rendered.required_features;
      bin.args = model.args;
      bin.dispatch = model.dispatch;
      out.kernels.push_back(std::move(bin));
      out.sources.push_back({".cl", graph.kernels()[k].name, std::move(rendered.source)});
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Target> make_opencl_target() { return std::make_unique<OpenClTarget>(); }

}  // namespace kiln::codegen
