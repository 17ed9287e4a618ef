// Prometheus metrics of kiln-serve, rendered in the text exposition format (version 0.0.4) on
// the metrics port's /metrics. Per model and version (and device, for batches):
//   kiln_inference_request_success_total / _failure_total  (counters; failures also by reason)
//   kiln_inference_request_duration_seconds   (histogram: arrival to response)
//   kiln_inference_queue_duration_seconds     (histogram: arrival to start of execution)
//   kiln_inference_compute_duration_seconds   (histogram: one batch's execution, per device)
//   kiln_inference_batch_size                 (histogram: requests' rows per executed batch)
//   kiln_inference_exec_total                 (counter: batches executed, per device)
//   kiln_inference_pending_requests           (gauge: queued, not yet executing)
// and kiln_protocol_errors_total{protocol} for requests refused before they reach a model
// (malformed JSON or protobuf, unknown model).
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::serve {

// A finished request: `success` or not, with its durations in seconds (queue and compute are 0
// for a request refused before it was queued).
struct RequestOutcome {
  bool success = true;
  std::string_view failure_reason;
  double request_seconds = 0, queue_seconds = 0;
};

class Metrics {
 public:
  void request_done(const std::string& model, const std::string& version, const RequestOutcome& outcome) {
    requests_done(model, version, std::span(&outcome, 1));
  }
  // A batch's requests at once: one lock for all of them, as a model's worker finishes a batch.
  void requests_done(const std::string& model, const std::string& version, std::span<const RequestOutcome> outcomes);
  // One executed batch of `rows` rows (the sum of its requests' batch sizes) on `device`.
  void batch_executed(const std::string& model, const std::string& version, const std::string& device,
                      int64_t rows, double compute_seconds);
  void pending_changed(const std::string& model, const std::string& version, int64_t delta);
  void protocol_error(std::string_view protocol);
  // The whole registry in Prometheus' text format.
  std::string render() const;

 private:
  struct Histogram {
    std::vector<double> bounds;  // upper bounds, ascending; +Inf is implicit
    std::vector<uint64_t> counts;  // per bucket (not cumulative); one more than bounds
    double sum = 0;
    uint64_t count = 0;
    void observe(double value);
  };
  struct ModelSeries {
    uint64_t success = 0;
    std::map<std::string, uint64_t> failures;  // by reason
    Histogram request_seconds, queue_seconds;
    int64_t pending = 0;
  };
  struct DeviceSeries {
    uint64_t executions = 0;
    Histogram compute_seconds, batch_rows;
  };
  ModelSeries& model_series(const std::string& model, const std::string& version);

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, ModelSeries> models_;
  std::map<std::tuple<std::string, std::string, std::string>, DeviceSeries> devices_;
  std::map<std::string, uint64_t, std::less<>> protocol_errors_;
};

}  // namespace kiln::serve
