#include "serve/metrics.h"

#include <algorithm>
#include <sstream>

namespace kiln::serve {

namespace {

// Latency buckets in seconds: 100 us to 10 s, about 2.5x apart.
std::vector<double> seconds_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}
std::vector<double> rows_buckets() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}; }

// A label value escaped as the exposition format wants (backslash, quote, newline).
std::string escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string labels(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : pairs) {
    out += (first ? "" : ",") + std::string(key) + "=\"" + escape(value) + "\"";
    first = false;
  }
  return out + "}";
}

// Appends `label_set` (ending in "}") with one more label: le="bound".
std::string with_le(const std::string& label_set, const std::string& bound) {
  return label_set.substr(0, label_set.size() - 1) + (label_set.size() > 2 ? "," : "") + "le=\"" + bound + "\"}";
}

std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

}  // namespace

void Metrics::Histogram::observe(double value) {
  if (counts.empty()) counts.assign(bounds.size() + 1, 0);
  size_t bucket = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[bucket];
  sum += value;
  ++count;
}

Metrics::ModelSeries& Metrics::model_series(const std::string& model, const std::string& version) {
  auto [it, inserted] = models_.try_emplace({model, version});
  if (inserted) {
    it->second.request_seconds.bounds = seconds_buckets();
    it->second.queue_seconds.bounds = seconds_buckets();
  }
  return it->second;
}

void Metrics::requests_done(const std::string& model, const std::string& version,
                            std::span<const RequestOutcome> outcomes) {
  std::lock_guard lock(mutex_);
  ModelSeries& series = model_series(model, version);
  for (const RequestOutcome& outcome : outcomes) {
    if (outcome.success) {
      ++series.success;
    } else {
      ++series.failures[std::string(outcome.failure_reason)];
    }
    series.request_seconds.observe(outcome.request_seconds);
    series.queue_seconds.observe(outcome.queue_seconds);
  }
}

void Metrics::batch_executed(const std::string& model, const std::string& version, const std::string& device,
                             int64_t rows, double compute_seconds) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = devices_.try_emplace({model, version, device});
  if (inserted) {
    it->second.compute_seconds.bounds = seconds_buckets();
    it->second.batch_rows.bounds = rows_buckets();
  }
  ++it->second.executions;
  it->second.compute_seconds.observe(compute_seconds);
  it->second.batch_rows.observe(static_cast<double>(rows));
}

void Metrics::pending_changed(const std::string& model, const std::string& version, int64_t delta) {
  std::lock_guard lock(mutex_);
  model_series(model, version).pending += delta;
}

void Metrics::protocol_error(std::string_view protocol) {
  std::lock_guard lock(mutex_);
  auto it = protocol_errors_.find(protocol);
  if (it == protocol_errors_.end()) it = protocol_errors_.emplace(std::string(protocol), 0).first;
  ++it->second;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  auto header = [&](const char* name, const char* type, const char* help) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  auto histogram = [&](const char* name, const std::string& label_set, const Histogram& h) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts.empty() ? 0 : h.counts[i];
      out << name << "_bucket" << with_le(label_set, number(h.bounds[i])) << ' ' << cumulative << '\n';
    }
    out << name << "_bucket" << with_le(label_set, "+Inf") << ' ' << h.count << '\n';
    out << name << "_sum" << label_set << ' ' << number(h.sum) << '\n';
    out << name << "_count" << label_set << ' ' << h.count << '\n';
  };

  header("kiln_inference_request_success_total", "counter", "Inference requests answered successfully.");
  for (const auto& [key, s] : models_)
    out << "kiln_inference_request_success_total" << labels({{"model", key.first}, {"version", key.second}}) << ' '
        << s.success << '\n';
  header("kiln_inference_request_failure_total", "counter", "Inference requests that failed, by reason.");
  for (const auto& [key, s] : models_)
    for (const auto& [reason, count] : s.failures)
      out << "kiln_inference_request_failure_total"
          << labels({{"model", key.first}, {"version", key.second}, {"reason", reason}}) << ' ' << count << '\n';
  header("kiln_inference_request_duration_seconds", "histogram", "Time from a request's arrival to its response.");
  for (const auto& [key, s] : models_)
    histogram("kiln_inference_request_duration_seconds", labels({{"model", key.first}, {"version", key.second}}),
              s.request_seconds);
  header("kiln_inference_queue_duration_seconds", "histogram", "Time a request waited before its batch ran.");
  for (const auto& [key, s] : models_)
    histogram("kiln_inference_queue_duration_seconds", labels({{"model", key.first}, {"version", key.second}}),
              s.queue_seconds);
  header("kiln_inference_pending_requests", "gauge", "Requests queued and not yet executing.");
  for (const auto& [key, s] : models_)
    out << "kiln_inference_pending_requests" << labels({{"model", key.first}, {"version", key.second}}) << ' '
        << s.pending << '\n';
  header("kiln_inference_exec_total", "counter", "Batches executed.");
  for (const auto& [key, d] : devices_)
    out << "kiln_inference_exec_total"
        << labels({{"model", std::get<0>(key)}, {"version", std::get<1>(key)}, {"device", std::get<2>(key)}}) << ' '
        << d.executions << '\n';
  header("kiln_inference_compute_duration_seconds", "histogram", "Time one batch took to execute on its device.");
  for (const auto& [key, d] : devices_)
    histogram("kiln_inference_compute_duration_seconds",
              labels({{"model", std::get<0>(key)}, {"version", std::get<1>(key)}, {"device", std::get<2>(key)}}),
              d.compute_seconds);
  header("kiln_inference_batch_size", "histogram", "Rows (the batch dimension) of each executed batch.");
  for (const auto& [key, d] : devices_)
    histogram("kiln_inference_batch_size",
              labels({{"model", std::get<0>(key)}, {"version", std::get<1>(key)}, {"device", std::get<2>(key)}}),
              d.batch_rows);
  header("kiln_protocol_errors_total", "counter", "Requests refused before reaching a model (malformed, unknown).");
  for (const auto& [protocol, count] : protocol_errors_)
    out << "kiln_protocol_errors_total" << labels({{"protocol", protocol}}) << ' ' << count << '\n';
  return out.str();
}

}  // namespace kiln::serve
