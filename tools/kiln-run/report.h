// kiln-run's reports: output summaries, --check comparison, --bench statistics, --profile table.
#pragma once

#include <string>
#include <vector>

#include "ir/tensor.h"
#include "runtime/hal/types.h"

namespace kiln::tools {

// "f32[3, 10]"
std::string tensor_type_string(const ir::Tensor& t);

// "probs: f32[3, 10]  min ... max ... mean ...  [v0, v1, ...]"
std::string summarize(const std::string& name, const ir::Tensor& t, int first_values = 6);

struct Comparison {
  double max_abs_error = 0;
  double max_rel_error = 0;
  bool pass = false;
  std::string note;  // why it failed when not a value difference (dtype/shape)
};
// Compares `got` against the reference `expected` with tolerances per dtype (exact for integers
// and bool; NaN matches NaN): a float element passes when
//   |got - ref| <= atol + rtol * max(|ref|, RMS of the reference tensor),
// NumPy's allclose with the relative term floored at the tensor's scale (see report.cpp).
Comparison compare(const ir::Tensor& got, const ir::Tensor& expected);

struct BenchStats {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, min = 0;  // seconds
  double runs_per_second = 0;
};
// Nearest-rank percentiles of per-run seconds; `total_seconds` is the wall time of all runs.
BenchStats bench_stats(std::vector<double> seconds, double total_seconds);

// The --profile table: one line per kernel, slowest first, with share and source nodes.
std::string format_profile(const runtime::hal::Profile& profile);

}  // namespace kiln::tools
