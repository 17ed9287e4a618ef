// The compiler's pass pipeline: a plain list of passes run in order by a small pass manager.
//
// Each pass is a function Status(ir::Graph&, const PassContext&). The manager can verify the
// graph after each pass, print the IR after all or some passes, and time each pass.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::passes {

struct PipelineOptions {
  int opt_level = 2;           // 0: no simplification or fusion (one kernel per op); 1, 2
  bool fuse = true;            // -fno-fuse turns fusion off, keeping other optimizations
  // Which float dtypes a pass with a policy applies to: none, f16/bf16 only, or all.
  enum class Floats : uint8_t { kNone, k16Bit, kAll };
  static bool covers(Floats policy, ir::DType dtype) {
    return policy == Floats::kAll ||
           (policy == Floats::k16Bit && (dtype == ir::DType::kF16 || dtype == ir::DType::kBF16));
  }
  // Which convolutions the channels-last pass runs in NHWC (-O1 and up). kilnc: k16Bit when the
  // cuda target is selected (tensor cores want NHWC), else kNone; -f[no-]channels-last.
  Floats channels_last = Floats::kNone;
  // Which attention patterns fuse-attention turns into one op (-O1 and up). kilnc: k16Bit when
  // the cuda target is selected (f32 attention gains little there and heads over 64 would take
  // the slow one-row-per-thread kernel; docs/performance.md), else kAll; -f[no-]fuse-attention.
  Floats fuse_attention = Floats::kAll;
  bool verify_each = true;     // run the verifier after every pass
  bool print_after_all = false;
  std::vector<std::string> print_after;  // pass names
  bool time_report = false;    // -ftime-report: per-pass times to `log`
  std::ostream* log = nullptr; // where IR dumps and the time report go (stderr if null)
};

struct PassInfo {
  std::string_view name;         // e.g. "fuse-elementwise"
  std::string_view description;  // one line
};

// Every pass the pipeline can run, in pipeline order (for --list-passes and to validate
// --print-ir-after names).
const std::vector<PassInfo>& list_passes();

// Runs the pipeline on `graph` (which must come from a frontend: inferred and verified), then
// plans memory. On return the graph is optimized, topologically sorted and grouped into
// kernels, and the plan says where every value lives and which kernels launch in which order.
Result<ir::ExecutionPlan> run_pipeline(ir::Graph& graph, const PipelineOptions& options);

// Text form of the plan (--emit=plan): one line per launch beginning with "launch", then the
// kernel name, its buffers and its launch shape; then buffers with offsets and sizes, and the
// peak arena bytes.
std::string print_plan(const ir::Graph& graph, const ir::ExecutionPlan& plan);

}  // namespace kiln::passes
