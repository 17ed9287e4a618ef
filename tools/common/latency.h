// Latency statistics of repeated runs, as kiln-run --bench and kiln-bench report them.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <vector>

namespace kiln::tools {

struct LatencyStats {
  double p50 = 0, p90 = 0, p99 = 0, min = 0, mean = 0, max = 0;  // seconds per run
  std::optional<double> runs_per_second;
};

// Nearest-rank percentiles (the smallest sample with at least p% of the samples at or below it)
// of per-run `seconds`, all zero when there are none. With `total_seconds` (the wall time of
// all runs together, which may exceed their sum), runs_per_second is the number of samples over
// it (0 when it is 0).
LatencyStats latency_stats(std::vector<double> seconds, std::optional<double> total_seconds = std::nullopt);

// {"p50_ms", "p90_ms", "p99_ms", "min_ms", "mean_ms", "max_ms"} and, when known, "runs_per_second".
nlohmann::json to_json(const LatencyStats& stats);

}  // namespace kiln::tools
