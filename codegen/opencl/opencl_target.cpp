// The OpenCL target: OpenCL C source is the artifact blob (format "opencl-c"); the driver builds
// it at load time for the device it runs on, so compile is the default one (the text is the blob).
// -S writes the same text as <name>.cl.
#include "codegen/opencl/opencl_target.h"

#include "artifact/targets.h"
#include "codegen/c_family.h"
#include "codegen/kernel_model.h"

namespace kiln::codegen {
namespace {

class OpenClTarget final : public Target {
 public:
  std::string_view name() const override { return artifact::kOpenClTarget; }
  std::string_view source_suffix() const override { return ".cl"; }

  Result<std::vector<KernelSource>> render(const KernelModel& model, const TargetOptions&) const override {
    KILN_ASSIGN_OR_RETURN(RenderedKernel rendered, render_c_family(model, Dialect::kOpenCL));
    std::vector<KernelSource> out;
    out.push_back({"", std::move(rendered.source), std::move(rendered.required_features)});
    return out;
  }

  void package(const KernelModel& model, CompiledVariant code, const TargetOptions&,
               artifact::KernelBinary& record) const override {
    record.format = "opencl-c";
    record.entry_point = model.entry_point;
    record.blob = std::move(code.blob);
    record.dispatch = model.dispatch;
  }
};

}  // namespace

std::unique_ptr<Target> make_opencl_target() { return std::make_unique<OpenClTarget>(); }

}  // namespace kiln::codegen
