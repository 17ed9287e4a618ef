#include "tools/kiln-run/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kiln::tools {
namespace {

std::string format_double(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string value_string(const ir::Tensor& t, int64_t i) {
  if (ir::is_float(t.dtype())) return format_double("%.6g", t.element_as_double(i));
  if (t.dtype() == ir::DType::kBool) return t.element_as_int(i) ? "true" : "false";
  return std::to_string(t.element_as_int(i));
}

struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF64:  // kernels compute it in f32
    case ir::DType::kF32: return {1e-4, 1e-5};
    case ir::DType::kF16: return {1e-2, 1e-3};
    case ir::DType::kBF16: return {2e-2, 1e-2};
    case ir::DType::kI64:
    case ir::DType::kI32:
    case ir::DType::kI16:
    case ir::DType::kI8:
    case ir::DType::kU32:
    case ir::DType::kU16:
    case ir::DType::kU8:
    case ir::DType::kBool: return {0, 0};
    case ir::DType::kF8E4M3FN: case ir::DType::kF8E4M3FNUZ: case ir::DType::kF8E5M2: case ir::DType::kF8E5M2FNUZ: {
      // One unit in the last place (relative, and the smallest subnormal near zero): a device's
      // f32 result a few f32 ulps from the reference's can round to the neighbouring 8-bit value.
      const Float8Format f = *ir::float8_format(dtype);
      return {std::ldexp(1.0, -int(f.mantissa_bits)), std::ldexp(1.0, 1 - int(f.bias) - int(f.mantissa_bits))};
    }
  }
  return {0, 0};
}

// Root mean square of the finite elements (0 when there are none).
double rms_of_finite(const ir::Tensor& t) {
  double sum_sq = 0;
  int64_t count = 0;
  for (int64_t i = 0, n = t.num_elements(); i < n; ++i) {
    const double v = t.element_as_double(i);
    if (!std::isfinite(v)) continue;
    sum_sq += v * v;
    ++count;
  }
  return count ? std::sqrt(sum_sq / double(count)) : 0.0;
}

}  // namespace

std::string tensor_type_string(const ir::Tensor& t) {
  std::string s = std::string(ir::dtype_name(t.dtype())) + "[";
  for (size_t d = 0; d < t.shape().size(); ++d) s += (d ? ", " : "") + std::to_string(t.shape()[d]);
  return s + "]";
}

std::string summarize(const std::string& name, const ir::Tensor& t, int first_values) {
  std::string s = name + ": " + tensor_type_string(t);
  const int64_t n = t.num_elements();
  if (n == 0) return s + "  (empty)";
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.element_as_double(i);
    if (std::isnan(v)) { ++nans; continue; }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  if (nans < n) {
    s += "  min " + format_double("%.6g", lo) + "  max " + format_double("%.6g", hi) + "  mean " +
         format_double("%.6g", sum / double(n - nans));
  }
  if (nans) s += "  nan " + std::to_string(nans);
  s += "  [";
  const int64_t shown = std::min<int64_t>(n, first_values);
  for (int64_t i = 0; i < shown; ++i) s += (i ? ", " : "") + value_string(t, i);
  if (shown < n) s += ", ...";
  return s + "]";
}

Comparison compare(const ir::Tensor& got, const ir::Tensor& expected) {
  Comparison c;
  if (got.dtype() != expected.dtype() || got.shape() != expected.shape()) {
    c.note = "got " + tensor_type_string(got) + ", reference " + tensor_type_string(expected);
    c.max_abs_error = c.max_rel_error = std::numeric_limits<double>::infinity();
    return c;
  }
  const Tolerance tol = tolerance(got.dtype());
  // Rounding errors of float arithmetic scale with the magnitude of the values that meet in a
  // sum (a layer_norm's x - mean, a residual add, a long dot product), not with the element that
  // results: an output near zero computed from values near 100 carries errors near 100 * eps. So
  // the relative term is taken of max(|reference|, the reference's RMS): elements much smaller
  // than their tensor get an absolute floor at the tensor's scale, while a wrong value (off by
  // the tensor's scale) still fails.
  const double scale = ir::is_float(expected.dtype()) ? rms_of_finite(expected) : 0.0;
  c.pass = true;
  for (int64_t i = 0, n = got.num_elements(); i < n; ++i) {
    const double a = got.element_as_double(i), b = expected.element_as_double(i);
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) {
        c.pass = false;
        c.max_abs_error = c.max_rel_error = std::numeric_limits<double>::infinity();
      }
      continue;
    }
    if (a == b) continue;  // also equal infinities
    if (std::isinf(a) || std::isinf(b)) {
      // An infinity matches only itself: with an infinite reference the tolerance below would
      // be infinite too and pass any finite value.
      c.pass = false;
      c.max_abs_error = c.max_rel_error = std::numeric_limits<double>::infinity();
      continue;
    }
    const double abs_err = std::fabs(a - b);
    const double rel_err = b != 0 ? abs_err / std::fabs(b) : std::numeric_limits<double>::infinity();
    c.max_abs_error = std::max(c.max_abs_error, abs_err);
    c.max_rel_error = std::max(c.max_rel_error, rel_err);
    if (!(abs_err <= tol.atol + tol.rtol * std::max(std::fabs(b), scale))) c.pass = false;
  }
  return c;
}

std::string format_profile(const runtime::hal::Profile& profile) {
  std::vector<runtime::hal::KernelTiming> kernels = profile.kernels;
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  double total = 0;
  for (const auto& k : kernels) total += k.seconds;
  std::string s = "profile: " + std::to_string(kernels.size()) + " kernels, " + profile.clock + "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%12s %7s  %-32s %-14s %s\n", "time (ms)", "share", "kernel",
                "kind", "source nodes");
  s += line;
  for (const auto& k : kernels) {
    std::string sources;
    for (const std::string& n : k.source_nodes) sources += (sources.empty() ? "" : ", ") + n;
    std::snprintf(line, sizeof line, "%12.4f %6.1f%%  %-32s %-14s ", k.seconds * 1e3,
                  total > 0 ? 100.0 * k.seconds / total : 0.0, k.name.c_str(), k.kind.c_str());
    s += line + sources + "\n";
  }
  std::snprintf(line, sizeof line, "%12.4f %6.1f%%  total\n", total * 1e3, 100.0);
  s += line;
  return s;
}

nlohmann::json profile_trace(const runtime::hal::Profile& profile, const std::string& device_id) {
  constexpr int kPid = 1, kTid = 1;
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", kTid},
                    {"args", {{"name", "kiln-run on " + device_id}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", kTid},
                    {"args", {{"name", "kernels (" + profile.clock + ")"}}}});
  double next_start = 0;  // seconds: where a kernel without its own start begins
  for (const runtime::hal::KernelTiming& k : profile.kernels) {
    const double start = k.start_seconds.value_or(next_start);
    next_start = start + k.seconds;
    nlohmann::json args = {{"kind", k.kind}, {"source_nodes", k.source_nodes}};
    args["kernel_index"] = k.kernel_index == runtime::hal::kNoKernel ? nlohmann::json(nullptr)
                                                                     : nlohmann::json(k.kernel_index);
    events.push_back({{"name", k.name},
                      {"cat", k.kind},
                      {"ph", "X"},
                      {"pid", kPid},
                      {"tid", kTid},
                      {"ts", start * 1e6},
                      {"dur", k.seconds * 1e6},
                      {"args", std::move(args)}});
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"device", device_id}, {"clock", profile.clock}}}};
}

}  // namespace kiln::tools
