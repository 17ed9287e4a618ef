// codegen::Target: one code-generation backend (OpenCL C, SPIR-V for Vulkan, CUDA), behind one
// interface with three separate steps:
//   render  — kernel model -> source text (OpenCL C, GLSL, CUDA C): pure, no external tools;
//   compile — source text -> the blob the runtime loads (OpenCL C stays source; GLSL goes
//             through shaderc + SPIRV-Tools; CUDA C through NVRTC);
//   package — the artifact::KernelBinary records (blob, entry point, args, dispatch, features).
// `kilnc -S` stops after render (and writes disassembly where the compile step has one).
//
// Thread-safety: a Target holds no mutable state between calls; concurrent use is safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/artifact.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::codegen {

struct TargetOptions {
  int opt_level = 2;
  std::vector<std::string> gpu_archs;  // CUDA only: cubin architectures ("sm_80"); PTX always
  bool allow_tf32 = false;             // CUDA only: f32 GEMMs may use TF32 tensor cores
  // Only the sources -S writes are needed: a target may skip binaries that -S does not show
  // (CUDA: the cubins; the PTX is still compiled).
  bool sources_only = false;
};

// A source file that `kilnc -S` writes: file name suffix (".cl", ".comp", ".spvasm", ".cu",
// ".ptx") and contents.
struct SourceFile {
  std::string suffix;
  std::string kernel_name;  // empty: the file holds every kernel of the graph (CUDA's program)
  std::string text;
};

struct CompiledKernels {
  // At least one per Graph kernel, in kernel order; a kernel's variants (Vulkan: a fallback
  // for devices lacking features, see vulkan/vulkan_target.cpp) follow each other, preferred first.
  std::vector<artifact::KernelBinary> kernels;
  std::vector<artifact::ModuleBinary> modules;  // shared modules (CUDA), see artifact.h
  std::vector<SourceFile> sources;              // what -S writes
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string_view name() const = 0;  // "opencl", "vulkan", "cuda"
  // Renders and compiles every kernel of the (fused, planned) graph.
  virtual Result<CompiledKernels> compile(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                          const TargetOptions& options) const = 0;
};

// The targets compiled into this build, in the order kilnc lists them.
std::vector<std::string> available_targets();
// The known targets missing from this build and why, e.g. "cuda (CUDA toolkit not found: no
// NVRTC)"; empty when none is.
std::string unavailable_targets_note();
// Creates a target by name; kUnsupported if this build lacks it.
Result<std::unique_ptr<Target>> create_target(std::string_view name);

}  // namespace kiln::codegen
