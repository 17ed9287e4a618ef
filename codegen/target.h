// codegen::Target: one code-generation backend (OpenCL C, SPIR-V for Vulkan, CUDA), behind one
// interface in steps. compile_graph() drives them and owns the loop over a graph's kernels:
//   supports — whether the target can run a node of the graph. Every node it cannot run is
//              reported, with the node's source location, before anything is rendered;
//   render   — one kernel's KernelModel -> its source text (OpenCL C, GLSL, CUDA C), one or more
//              variants: pure, no external tools;
//   compile  — every rendered kernel of the graph at once -> device code: OpenCL C stays source,
//              GLSL goes through shaderc + SPIRV-Tools kernel by kernel (the default loop below),
//              CUDA C is one NVRTC program for the whole graph;
//   package  — one compiled variant -> its artifact::KernelBinary record.
// `kilnc -S` and --emit=kernels write what render made; they run compile only in sources_only
// mode, for the assembly listings they also write (Vulkan's .spvasm, CUDA's .ptx; no cubins), and
// never package.
//
// Compile time (docs/architecture.md): compile_graph renders kernels in parallel, then compiles
// each distinct kernel once — kernels whose variants differ only in the kernel's name (ResNet's
// repeated blocks) share the first one's code, and their records name its entry point. compile
// gets a CompileContext: worker threads (kilnc -j) and the persistent cache; a target runs its
// units through CompileContext::cached so that a recompile reads them back instead.
//
// Thread-safety: a Target holds no mutable state between calls; concurrent use is safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/artifact.h"
#include "codegen/compile_context.h"
#include "codegen/kernel_model.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "support/diagnostics.h"
#include "support/status.h"

namespace kiln::codegen {

struct TargetOptions {
  int opt_level = 2;
  std::vector<std::string> gpu_archs;  // CUDA only: cubin architectures ("sm_80"); PTX always
  bool allow_tf32 = false;             // CUDA only: f32 GEMMs may use TF32 tensor cores
  std::string cpu;                     // cpu only: --cpu (cpu/cpu_toolchain.h, select_cpu); empty: the host's default
  // Only the files -S writes are needed: compile may skip binaries that -S does not show (CUDA:
  // the cubins; the PTX is still compiled), and compile_graph packages no KernelBinary.
  bool sources_only = false;
};

// A file that `kilnc -S` writes: file name suffix (".cl", ".comp", ".spvasm", ".cu", ".ptx") and
// contents.
struct SourceFile {
  std::string suffix;
  std::string kernel_name;  // empty: the file holds every kernel of the graph (CUDA's program)
  std::string text;
};

// render: one variant of a kernel's source.
struct KernelSource {
  // "" for the primary variant; otherwise part of its -S file names (Vulkan's 32-bit-word
  // fallback, "words": <name>.words.comp).
  std::string tag;
  std::string text;
  std::vector<std::string> required_features;  // device features the text needs (c_family.h)
};

// render's result for one kernel of the graph.
struct KernelVariants {
  KernelModel model;
  std::vector<KernelSource> variants;  // at least one; preferred first
};

// compile: one variant's device code.
struct CompiledVariant {
  std::vector<uint8_t> blob;  // what the KernelBinary carries (CUDA: empty, the code is a module's)
  std::string listing;        // assembly -S writes beside the source (Vulkan: SPIR-V text)
  uint32_t module_id = 0;     // CUDA: the ModuleBinary::id holding the kernel's function
};

// compile's result for the whole graph.
struct DeviceCode {
  std::vector<std::vector<CompiledVariant>> kernels;  // [kernel][variant], as rendered
  std::vector<artifact::ModuleBinary> modules;        // shared modules (CUDA), see artifact.h
};

// compile_graph's result.
struct CompiledKernels {
  // At least one per Graph kernel, in kernel order; a kernel's variants (Vulkan: a fallback
  // for devices lacking features, see vulkan/vulkan_target.cpp) follow each other, preferred
  // first. Empty with TargetOptions::sources_only.
  std::vector<artifact::KernelBinary> kernels;
  std::vector<artifact::ModuleBinary> modules;  // shared modules (CUDA), see artifact.h
  std::vector<SourceFile> sources;              // what -S writes
  // For kilnc's time report: graph kernels, how many of them were compiled (the rest share a
  // compiled kernel's code), and the seconds spent rendering and compiling.
  size_t kernel_count = 0;
  size_t compiled_kernel_count = 0;
  double render_seconds = 0;
  double compile_seconds = 0;
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string_view name() const = 0;  // one of artifact/targets.h
  // The -S file suffix of rendered sources (".cl", ".comp", ".cu") and of compile's listings
  // (".spvasm"; empty when the target has none).
  virtual std::string_view source_suffix() const = 0;
  virtual std::string_view listing_suffix() const { return {}; }

  // Whether this target can run `node` (of the fused, planned `graph`): ok, or kUnsupported
  // naming the node, at node.loc. The default checks the node's dtype against has_dtype().
  virtual Status supports(const ir::Graph& graph, const ir::Node& node) const;
  // Whether the renderer handles values of `dtype` (loads, stores, arithmetic). Default: all of
  // them, which the C-family dialects do today.
  virtual bool has_dtype(ir::DType dtype) const;

  // One kernel's source variants, preferred first.
  virtual Result<std::vector<KernelSource>> render(const KernelModel& model,
                                                   const TargetOptions& options) const = 0;
  // The device code of every rendered kernel, [kernel][variant] as `kernels` (the graph's
  // distinct kernels, see above). Default: each variant through compile_variant(), on the
  // context's threads; a target that compiles kernels together (CUDA: NVRTC programs of several
  // kernels) overrides it.
  virtual Result<DeviceCode> compile(const ir::Graph& graph, const std::vector<KernelVariants>& kernels,
                                     const TargetOptions& options, CompileContext& context) const;
  // Fills the target's fields of one variant's record: format, entry point, blob, dispatch (and
  // CUDA's gemm). `record` arrives with target, kernel name and index, required features and
  // args set.
  virtual void package(const KernelModel& model, CompiledVariant code, const TargetOptions& options,
                       artifact::KernelBinary& record) const = 0;
  // The files -S writes. Default: per kernel and variant, <kernel>[.tag]<source_suffix>, then
  // <kernel>[.tag]<listing_suffix> when the target has listings. CUDA: its program and PTX.
  virtual std::vector<SourceFile> source_files(const ir::Graph& graph, const std::vector<KernelVariants>& kernels,
                                               const DeviceCode& code) const;

 protected:
  // The default compile()'s step: one variant of `kernel`, called concurrently for different
  // variants. Default: the source text itself is the blob (OpenCL C, built by the driver at load
  // time).
  virtual Result<CompiledVariant> compile_variant(const KernelVariants& kernel, const KernelSource& source,
                                                  const TargetOptions& options, CompileContext& context) const;
  // A cache key holding what every unit of this target depends on: Kiln's version and the
  // target's name, then `compiler` (the external compiler's identity and version). Targets add
  // their flags, architecture and the unit's source.
  CacheKey unit_key(std::string_view compiler) const;
};

// Adds to `diags` one error per node of `graph` that `target` cannot run (Target::supports),
// each at the node's location. Returns ok, or kUnsupported summarizing them.
Status check_supported(const Target& target, const ir::Graph& graph, Diagnostics& diags);

// Compiles every kernel of the (fused, planned) graph for `target`: check_supported (nothing is
// rendered when a node is unsupported; the Status names the first, and counts the rest), then
// render every kernel, compile the distinct ones, and package every variant (not with
// options.sources_only). Without a context: a private one, all cores and no cache.
Result<CompiledKernels> compile_graph(const Target& target, const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                      const TargetOptions& options, CompileContext* context = nullptr);

// The targets compiled into this build, in the order kilnc lists them (artifact::kTargetNames').
std::vector<std::string> available_targets();
// Whether one target is: asking about one does not start the others' toolchains (the cpu
// target's clang module maps LLVM, about 50 MB, for good).
bool target_available(std::string_view name);
// The known targets missing from this build and why, e.g. "cuda (CUDA toolkit not found: no
// NVRTC)"; empty when none is.
std::string unavailable_targets_note();
// Checks a --cpu value for the cpu target (cpu/cpu_toolchain.h, select_cpu: an LLVM CPU name of
// x86-64 or AArch64, "aarch64" or "native"). kInvalidArgument naming the value otherwise (any
// value passes in a build without the cpu target, which then refuses the target itself).
Status check_cpu_name(std::string_view cpu);
// Creates a target by name; kUnsupported if this build lacks it.
Result<std::unique_ptr<Target>> create_target(std::string_view name);

}  // namespace kiln::codegen
