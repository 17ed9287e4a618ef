// kiln-run's reports: output summaries, --check comparison, the --profile table and trace.
#pragma once

#include <nlohmann/json.hpp>

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
// and bool; NaN matches NaN, an infinity only the same infinity): a float element passes when
//   |got - ref| <= atol + rtol * max(|ref|, RMS of the reference tensor),
// NumPy's allclose with the relative term floored at the tensor's scale (see report.cpp).
Comparison compare(const ir::Tensor& got, const ir::Tensor& expected);

// The --profile table: one line per kernel, slowest first, with share and source nodes.
std::string format_profile(const runtime::hal::Profile& profile);

// --profile-trace: the profile in the Trace Event Format that chrome://tracing and
// ui.perfetto.dev load: one complete event ("ph": "X") per kernel on one track, in launch
// order, with its name, kind ("cat"), kernel index and source nodes ("args"), start ("ts") and
// duration ("dur") in microseconds. Starts are the device's own where the driver reports them
// (KernelTiming::start_seconds), otherwise each kernel starts where the one before it ended.
// Metadata events name the process after `device_id` and the track after the profile's clock.
nlohmann::json profile_trace(const runtime::hal::Profile& profile, const std::string& device_id);

}  // namespace kiln::tools
