#include "tools/common/latency.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::tools {

LatencyStats latency_stats(std::vector<double> seconds, std::optional<double> total_seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  std::sort(seconds.begin(), seconds.end());
  auto rank = [&](double p) {
    const size_t k = size_t(std::ceil(p / 100.0 * double(seconds.size())));
    return seconds[std::clamp<size_t>(k, 1, seconds.size()) - 1];
  };
  s.p50 = rank(50);
  s.p90 = rank(90);
  s.p99 = rank(99);
  s.min = seconds.front();
  s.max = seconds.back();
  s.mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / double(seconds.size());
  if (total_seconds) s.runs_per_second = *total_seconds > 0 ? double(seconds.size()) / *total_seconds : 0;
  return s;
}

nlohmann::json to_json(const LatencyStats& stats) {
  nlohmann::json j = {{"p50_ms", stats.p50 * 1e3}, {"p90_ms", stats.p90 * 1e3},   {"p99_ms", stats.p99 * 1e3},
                      {"min_ms", stats.min * 1e3}, {"mean_ms", stats.mean * 1e3}, {"max_ms", stats.max * 1e3}};
  if (stats.runs_per_second) j["runs_per_second"] = *stats.runs_per_second;
  return j;
}

}  // namespace kiln::tools
