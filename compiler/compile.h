// kiln::compiler: a whole compile, source to artifact, as a library. kilnc is a command line
// over it; the Python package (python/) compiles in-process through it.
//
// Stages: read a source (a .graph file or text, an ONNX file or bytes) into a graph; choose and
// check the targets; run the pass pipeline; generate code for every target; write the artifact.
// User errors (syntax, shapes, unsupported operators, a target the build lacks) are collected in
// a Diagnostics, one line each with its location where it has one; a failed Status says that
// the stage stopped and why.
//
// Thread-safety: the functions keep no state; separate compiles may run concurrently (the
// compile cache is safe to share across threads and processes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/writer.h"
#include "codegen/compile_context.h"
#include "codegen/target.h"
#include "ir/graph.h"
#include "passes/pipeline.h"
#include "support/diagnostics.h"
#include "support/status.h"

namespace kiln::compiler {

// What kilnc's options decide about a compile.
struct CompileOptions {
  std::optional<std::vector<std::string>> targets;  // unset: every target this build has
  int opt_level = 2;                                // 0, 1 or 2, as -O
  bool fuse = true;                                 // -fno-fuse: false
  std::optional<bool> channels_last;   // unset: 16-bit convolutions, and only when targeting cuda
  std::optional<bool> fuse_attention;  // unset: every float pattern; 16-bit only when targeting cuda
  std::vector<std::string> gpu_archs;  // cuda cubin architectures; empty: the target's default
  bool allow_tf32 = false;
  std::string cpu;        // the cpu target's CPU (--cpu); empty: x86-64-v3
  int jobs = 0;           // compile threads; 0: every core
  bool use_cache = true;  // the persistent compile cache (codegen/compile_cache.h)
};

// The targets this build can generate code for ("cuda", "vulkan", "opencl").
const std::vector<std::string>& build_targets();

// The selected targets, checked before any work: each one known and in this build, and the
// cuda-only options only with cuda. kInvalidArgument naming the problem otherwise.
Result<std::vector<std::string>> select_targets(const CompileOptions& options);

// The pipeline options `options` mean for `targets` (the layout and attention defaults depend
// on whether cuda is among them). The caller may add its logging and printing choices.
passes::PipelineOptions pipeline_options(const CompileOptions& options, const std::vector<std::string>& targets);

// The code-generation options `options` mean (optimization level, cuda architectures, TF32).
codegen::TargetOptions target_options(const CompileOptions& options);

// Reads a source file: `.onnx` through the ONNX importer (when the build has it), anything else
// as `.graph` text.
Result<ir::Graph> read_source_file(const std::string& path, Diagnostics& diags);
// `.graph` text. `filename` names it in diagnostics; `base_dir` resolves its weights path.
Result<ir::Graph> read_graph_text(std::string_view text, const std::string& filename,
                                  const std::string& base_dir, Diagnostics& diags);
// An ONNX model's bytes. `base_dir` resolves external data files (empty: they are refused).
Result<ir::Graph> read_onnx_bytes(std::span<const std::byte> bytes, const std::string& filename,
                                  const std::string& base_dir, Diagnostics& diags);

// Code generation for every target: every target first checks every node (all unsupported
// nodes of all targets go to `diags`, and nothing is rendered), then each renders and compiles.
Result<std::vector<codegen::CompiledKernels>> generate_code(const std::vector<std::string>& targets,
                                                            const ir::Graph& graph,
                                                            const ir::ExecutionPlan& plan,
                                                            const codegen::TargetOptions& target_options,
                                                            codegen::CompileContext& context,
                                                            Diagnostics& diags);

// The artifact's contents besides the graph: the kernels and modules of `results` (moved out)
// and the producer string.
artifact::WriteOptions artifact_contents(std::vector<codegen::CompiledKernels>& results);

// The compile cache `options` ask for, or null (use_cache off, or a cache that cannot be opened:
// then `warning` says why, since the cache only saves time).
std::unique_ptr<codegen::CompileCache> open_cache(const CompileOptions& options, std::string* warning);

// The whole compile of `graph` into the bytes of a .kiln artifact, in memory.
Result<std::vector<uint8_t>> compile_to_artifact(ir::Graph graph, const CompileOptions& options,
                                                 Diagnostics& diags);

}  // namespace kiln::compiler
