#include "serve/model.h"

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "kiln/runtime.hpp"
#include "serve/log.h"
#include "serve/metrics.h"

namespace kiln::serve {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// A runtime status as a kiln::Status, with `context` in front of its message.
Status from_runtime(const rt::Status& status, const std::string& context) {
  ErrorCode code = ErrorCode::kInternal;
  switch (status.code()) {
    case KILN_OK: return Status::ok();
    case KILN_INVALID_ARGUMENT: code = ErrorCode::kInvalidArgument; break;
    case KILN_NOT_FOUND: code = ErrorCode::kNotFound; break;
    case KILN_UNSUPPORTED: code = ErrorCode::kUnsupported; break;
    case KILN_CORRUPT: code = ErrorCode::kCorrupt; break;
    case KILN_OUT_OF_MEMORY: code = ErrorCode::kOutOfMemory; break;
    case KILN_UNAVAILABLE: code = ErrorCode::kUnavailable; break;
    case KILN_UNTRUSTED: code = ErrorCode::kUntrusted; break;
    default: break;
  }
  return Status(code, context + ": " + status.message());
}

// A queued request with what the batcher needs to know about it.
struct Pending {
  InferRequest request;
  InferCallback done;
  Clock::time_point arrival;
  int64_t rows = 0;       // its batch size (the first dimension) when the model batches
  std::string group_key;  // requests merge only with equal keys: the inputs' other dimensions
};

// One instance: sessions on one device, used only by its worker thread. With dynamic batching
// it keeps one session per padded batch size (see batch_rows_bucket), created at the first batch
// of that size: a session whose shapes never change keeps its buffers and, on CUDA, replays its
// captured graph, where one session running every batch size would reallocate and re-plan at
// each change.
struct Instance {
  std::string device;
  rt::Session session;                             // requests run alone (and the first bucket)
  std::map<int64_t, rt::Session> bucket_sessions;  // by padded rows, beside `session`
  int64_t session_rows = 0;                        // the padded rows `session` runs, 0: none yet
  std::thread worker;
};

// The padded size of a merged batch of `rows`: the next power of two, at most max_batch_size,
// so that an instance sees at most log2(max_batch_size) + 2 batch sizes.
int64_t batch_rows_bucket(int64_t rows, int64_t max_batch_size) {
  int64_t bucket = 1;
  while (bucket < rows) bucket *= 2;
  return std::min(bucket, max_batch_size);
}

}  // namespace

struct Model::State {
  std::string name;
  int64_t version = 0;
  std::string version_string;
  inference::ModelConfig config;
  rt::Artifact artifact;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<rt::TensorInfo> input_infos, output_infos;  // with the symbols' names
  Metrics* metrics = nullptr;

  // Batching, from the configuration.
  int64_t max_batch_size = 0;  // 0: no batch dimension
  bool dynamic_batching = false;
  Clock::duration max_queue_delay{};
  std::vector<int64_t> preferred_batch_sizes;  // ascending
  uint32_t max_queue_size = 0;                 // 0: unlimited

  std::mutex mutex;  // guards everything below
  // Idle workers wait on `work_ready` for a batch to form; the one worker gathering a batch waits
  // on `batch_grew` for more rows. Two of them, and a threshold, so that an arriving request wakes
  // no one it need not: under load a wake-up per request was as many context switches as requests.
  std::condition_variable work_ready, batch_grew;
  std::deque<Pending> queue;
  int64_t queued_rows = 0;      // the rows of the requests in `queue` (with batching)
  int64_t wake_forming_at = 0;  // queued_rows at which the forming worker looks again; 0: any arrival
  uint32_t pending = 0;  // queued or being gathered into a batch, not yet executing
  bool forming = false;  // a worker is gathering a batch (one at a time, so batches fill up)
  bool draining = false;
  std::vector<std::unique_ptr<Instance>> instances;

  Status validate(const InferRequest& request, Pending& pending) const;
  void worker_loop(Instance& instance);
  std::vector<Pending> take_batch(std::unique_lock<std::mutex>& lock);
  void execute(Instance& instance, std::vector<Pending>& batch);
  void fail_all(std::vector<Pending>& batch, const Status& status, Clock::time_point started);
  // The batch's requests into the metrics, as finishing now (one lock for the batch).
  void record_done(const std::vector<Pending>& batch, const Status& status, Clock::time_point started);
};

// Everything a request must satisfy, checked before it is queued: a request that would fail
// in a merged batch would fail the whole batch.
Status Model::State::validate(const InferRequest& request, Pending& pending) const {
  std::map<std::string, int64_t> symbol_values;
  std::set<std::string> seen;
  std::vector<const Tensor*> ordered(input_infos.size(), nullptr);
  for (const Tensor& tensor : request.inputs) {
    auto it = std::find_if(input_infos.begin(), input_infos.end(),
                           [&](const rt::TensorInfo& info) { return info.name == tensor.name; });
    if (it == input_infos.end()) {
      std::string names;
      for (const auto& info : input_infos) names += (names.empty() ? "" : ", ") + info.name;
      return invalid_argument("model '" + name + "' has no input '" + tensor.name + "' (its inputs: " + names + ")");
    }
    if (!seen.insert(tensor.name).second)
      return invalid_argument("input '" + tensor.name + "' is given twice");
    const rt::TensorInfo& info = *it;
    DataType expected = datatype_from_kiln(info.dtype);
    if (tensor.datatype != expected)
      return invalid_argument("input '" + tensor.name + "': datatype " + std::string(datatype_name(tensor.datatype)) +
                              ", but the model takes " + std::string(datatype_name(expected)));
    std::string expected_shape = shape_string(inputs[it - input_infos.begin()].shape);
    if (tensor.shape.size() != info.dims.size())
      return invalid_argument("input '" + tensor.name + "': shape " + shape_string(tensor.shape) + " has rank " +
                              std::to_string(tensor.shape.size()) + ", but the model takes " + expected_shape +
                              " (-1: any size)");
    for (size_t d = 0; d < info.dims.size(); ++d) {
      int64_t given = tensor.shape[d];
      if (given < 0)
        return invalid_argument("input '" + tensor.name + "': shape " + shape_string(tensor.shape) +
                                " has a negative dimension");
      if (info.dims[d] >= 0 && given != info.dims[d])
        return invalid_argument("input '" + tensor.name + "': shape " + shape_string(tensor.shape) +
                                ", but the model takes " + expected_shape + " (-1: any size)");
      if (info.dims[d] < 0) {
        auto [bound, inserted] = symbol_values.emplace(info.symbols[d], given);
        if (!inserted && bound->second != given)
          return invalid_argument("input '" + tensor.name + "': dimension " + std::to_string(d) + " is " +
                                  std::to_string(given) + ", but dimension '" + info.symbols[d] +
                                  "' is " + std::to_string(bound->second) + " in another input");
      }
    }
    std::optional<int64_t> count = element_count(tensor.shape);
    size_t element_bytes = datatype_size(tensor.datatype);
    if (!count || static_cast<uint64_t>(*count) > UINT64_MAX / element_bytes)
      return invalid_argument("input '" + tensor.name + "': shape " + shape_string(tensor.shape) + " is too large");
    uint64_t expected_bytes = static_cast<uint64_t>(*count) * element_bytes;
    if (tensor.data.size() != expected_bytes)
      return invalid_argument("input '" + tensor.name + "': " + std::to_string(tensor.data.size()) +
                              " bytes of data, but shape " + shape_string(tensor.shape) + " of " +
                              std::string(datatype_name(tensor.datatype)) + " needs " + std::to_string(expected_bytes));
    ordered[it - input_infos.begin()] = &tensor;
  }
  for (size_t i = 0; i < input_infos.size(); ++i)
    if (!ordered[i]) return invalid_argument("input '" + input_infos[i].name + "' is missing");
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const std::string& wanted = request.outputs[i];
    if (std::find(request.outputs.begin(), request.outputs.begin() + i, wanted) != request.outputs.begin() + i)
      return invalid_argument("output '" + wanted + "' is asked for twice");
    bool known = std::any_of(output_infos.begin(), output_infos.end(),
                             [&](const rt::TensorInfo& info) { return info.name == wanted; });
    if (!known) {
      std::string names;
      for (const auto& info : output_infos) names += (names.empty() ? "" : ", ") + info.name;
      return invalid_argument("model '" + name + "' has no output '" + wanted + "' (its outputs: " + names + ")");
    }
  }
  if (max_batch_size > 0) {
    pending.rows = ordered[0]->shape[0];
    if (pending.rows < 1 || pending.rows > max_batch_size)
      return invalid_argument("batch size " + std::to_string(pending.rows) + " (the first dimension of the inputs) is " +
                              "outside 1.." + std::to_string(max_batch_size) + ", the model's max_batch_size");
    for (const Tensor* tensor : ordered) {
      pending.group_key += std::string(datatype_name(tensor->datatype));
      for (size_t d = 1; d < tensor->shape.size(); ++d) pending.group_key += "," + std::to_string(tensor->shape[d]);
      pending.group_key += ";";
    }
  }
  return Status::ok();
}

void Model::State::record_done(const std::vector<Pending>& batch, const Status& status, Clock::time_point started) {
  const Clock::time_point now = Clock::now();
  const std::string reason = status.is_ok() ? "" : std::string(error_code_name(status.code()));
  std::vector<RequestOutcome> outcomes;
  outcomes.reserve(batch.size());
  for (const Pending& p : batch)
    outcomes.push_back({status.is_ok(), reason, seconds_between(p.arrival, now), seconds_between(p.arrival, started)});
  metrics->requests_done(name, version_string, outcomes);
}

void Model::State::fail_all(std::vector<Pending>& batch, const Status& status, Clock::time_point started) {
  record_done(batch, status, started);
  for (Pending& p : batch) p.done(status);
}

// Takes the next batch off the queue. Called with the lock held by the one worker forming a
// batch; waits (releasing the lock) for more requests while the batch is short of
// max_batch_size and the oldest request has waited less than max_queue_delay.
std::vector<Pending> Model::State::take_batch(std::unique_lock<std::mutex>& lock) {
  std::vector<Pending> batch;
  batch.push_back(std::move(queue.front()));
  queue.pop_front();
  queued_rows -= batch[0].rows;
  if (!dynamic_batching) return batch;
  int64_t rows = batch[0].rows;
  const std::string key = batch[0].group_key;
  const Clock::time_point deadline = batch[0].arrival + max_queue_delay;
  const int64_t enough = preferred_batch_sizes.empty() ? max_batch_size : preferred_batch_sizes.back();
  while (true) {
    for (auto it = queue.begin(); it != queue.end() && rows < max_batch_size;) {
      if (it->group_key == key && rows + it->rows <= max_batch_size) {
        rows += it->rows;
        queued_rows -= it->rows;
        batch.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
    if (rows >= enough || draining || Clock::now() >= deadline) break;
    // A preferred size reached with nothing more to take: run it now rather than wait.
    bool preferred = std::binary_search(preferred_batch_sizes.begin(), preferred_batch_sizes.end(), rows);
    bool more = std::any_of(queue.begin(), queue.end(), [&](const Pending& p) { return p.group_key == key; });
    if (preferred && !more) break;
    // Woken when enough rows to fill the batch may have come (with preferred sizes: at any arrival).
    wake_forming_at = preferred_batch_sizes.empty() ? queued_rows + (enough - rows) : 0;
    batch_grew.wait_until(lock, deadline);
  }
  return batch;
}

void Model::State::worker_loop(Instance& instance) {
  std::unique_lock lock(mutex);
  while (true) {
    work_ready.wait(lock, [&] { return (!forming && !queue.empty()) || (draining && queue.empty()); });
    if (queue.empty()) {  // draining, and nothing is left
      work_ready.notify_all();  // so do the other workers
      return;
    }
    forming = true;
    std::vector<Pending> batch = take_batch(lock);
    forming = false;
    pending -= static_cast<uint32_t>(batch.size());
    metrics->pending_changed(name, version_string, -static_cast<int64_t>(batch.size()));
    if (!queue.empty() || draining) work_ready.notify_one();  // another worker may form the next batch meanwhile
    lock.unlock();
    execute(instance, batch);
    lock.lock();
  }
}

namespace {

// The bytes of one row (one index of the first dimension) of a tensor of `shape`.
size_t row_bytes_of(const std::vector<int64_t>& shape, DataType type) {
  size_t bytes = datatype_size(type);
  for (size_t d = 1; d < shape.size(); ++d) bytes *= static_cast<size_t>(shape[d]);
  return bytes;
}

}  // namespace

// Runs a batch: one request alone as it is; with dynamic batching, the requests concatenated
// along the batch dimension and padded up to batch_rows_bucket's size with copies of the last
// row (rows are independent: that is what merging assumes), on that size's session. Then splits
// the outputs back by rows.
void Model::State::execute(Instance& instance, std::vector<Pending>& batch) {
  const Clock::time_point started = Clock::now();
  auto fail = [&](const Status& status) { fail_all(batch, status, started); };
  int64_t total_rows = 0;
  for (const Pending& p : batch) total_rows += p.rows;
  const int64_t padded_rows = dynamic_batching ? batch_rows_bucket(total_rows, max_batch_size) : total_rows;
  rt::Session* session = &instance.session;
  if (dynamic_batching && instance.session_rows != padded_rows) {
    if (instance.session_rows == 0) {
      instance.session_rows = padded_rows;
    } else {
      auto it = instance.bucket_sessions.find(padded_rows);
      if (it == instance.bucket_sessions.end()) {
        auto created = rt::Session::create(artifact, instance.device);
        if (!created.ok()) return fail(from_runtime(created.status(), "a session for " +
                                                                      std::to_string(padded_rows) + " rows"));
        it = instance.bucket_sessions.emplace(padded_rows, std::move(created.value())).first;
      }
      session = &it->second;
    }
  }
  std::string merged;  // reused per input
  for (size_t i = 0; i < input_infos.size(); ++i) {
    const rt::TensorInfo& info = input_infos[i];
    auto find_input = [&](const Pending& p) -> const Tensor& {
      return *std::find_if(p.request.inputs.begin(), p.request.inputs.end(),
                           [&](const Tensor& t) { return t.name == info.name; });
    };
    const Tensor& first = find_input(batch[0]);
    rt::Status set;
    if (batch.size() == 1 && padded_rows == total_rows) {
      set = session->set_input(info.name, info.dtype, first.shape, first.data.data(), first.data.size());
    } else {
      std::vector<int64_t> shape = first.shape;
      shape[0] = padded_rows;
      const size_t row_bytes = row_bytes_of(first.shape, datatype_from_kiln(info.dtype));
      merged.clear();
      merged.reserve(static_cast<size_t>(padded_rows) * row_bytes);
      for (const Pending& p : batch) merged += find_input(p).data;
      const std::string last_row = merged.substr(merged.size() - row_bytes);
      for (int64_t r = total_rows; r < padded_rows; ++r) merged += last_row;
      set = session->set_input(info.name, info.dtype, shape, merged.data(), merged.size());
    }
    if (!set.ok()) return fail(from_runtime(set, "input '" + info.name + "'"));
  }
  rt::Status ran = session->run();
  const double compute_seconds = seconds_between(started, Clock::now());
  metrics->batch_executed(name, version_string, instance.device, max_batch_size > 0 ? total_rows : 1, compute_seconds);
  if (!ran.ok()) {
    log_error("inference failed", {{"model", name}, {"version", version_string}, {"device", instance.device},
                                   {"error", ran.to_string()}});
    return fail(from_runtime(ran, "model '" + name + "' on " + instance.device));
  }

  struct OutputView {
    const rt::TensorInfo* info;
    std::vector<int64_t> shape;
    const char* data;
    size_t bytes;
  };
  std::vector<OutputView> views;
  for (const rt::TensorInfo& info : output_infos) {
    auto shape = session->output_shape(info.name);
    const void* data = nullptr;
    size_t bytes = 0;
    rt::Status got(kiln_session_get_output(session->get(), info.name.c_str(), &data, &bytes));
    if (!shape.ok() || !got.ok())
      return fail(from_runtime(shape.ok() ? got : shape.status(), "output '" + info.name + "'"));
    if (max_batch_size > 0 && (shape.value().empty() || shape.value()[0] != padded_rows))
      return fail(internal_error("output '" + info.name + "' has shape " + shape_string(shape.value()) +
                                     ", not the batch's " + std::to_string(padded_rows) + " rows"));
    views.push_back({&info, shape.value(), static_cast<const char*>(data), bytes});
  }
  record_done(batch, Status::ok(), started);
  int64_t row = 0;
  for (Pending& p : batch) {
    InferResponse response;
    response.model_name = name;
    response.model_version = version_string;
    response.id = p.request.id;
    auto add_output = [&](const OutputView& view) {
      Tensor out;
      out.name = view.info->name;
      out.datatype = datatype_from_kiln(view.info->dtype);
      out.shape = view.shape;
      if (max_batch_size > 0) {
        size_t row_bytes = row_bytes_of(view.shape, out.datatype);
        out.shape[0] = p.rows;
        out.data.assign(view.data + row * row_bytes, static_cast<size_t>(p.rows) * row_bytes);
      } else {
        out.data.assign(view.data, view.bytes);
      }
      response.outputs.push_back(std::move(out));
    };
    if (p.request.outputs.empty()) {
      for (const OutputView& view : views) add_output(view);
    } else {
      for (const std::string& wanted : p.request.outputs)
        for (const OutputView& view : views)
          if (view.info->name == wanted) add_output(view);
    }
    row += p.rows;
    p.done(std::move(response));
  }
}

// ---- Loading ------------------------------------------------------------------------------

namespace {

std::vector<TensorSpec> specs_of(const std::vector<rt::TensorInfo>& infos) {
  std::vector<TensorSpec> out;
  for (const rt::TensorInfo& info : infos) out.push_back({info.name, datatype_from_kiln(info.dtype), info.dims});
  return out;
}

// inference::DataType for a Kiln dtype (the config's data_type field).
inference::DataType config_datatype(DataType type) {
  inference::DataType out = inference::TYPE_INVALID;
  inference::DataType_Parse(std::string(datatype_config_name(type)), &out);
  return out;
}

// The config's inputs or outputs, checked against the artifact's and completed with the ones
// it leaves out. With a batch dimension, the config's dims leave it out (as in Triton).
template <class ConfigTensors>
Status reconcile_tensors(ConfigTensors* config_tensors, const std::vector<TensorSpec>& specs, bool batched,
                         const char* kind) {
  std::set<std::string> named;
  for (const auto& entry : *config_tensors) {
    auto it = std::find_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == entry.name(); });
    if (it == specs.end()) return invalid_argument(std::string(kind) + " '" + entry.name() + "' is not in the artifact");
    if (!named.insert(entry.name()).second)
      return invalid_argument(std::string(kind) + " '" + entry.name() + "' is listed twice");
    if (entry.data_type() != inference::TYPE_INVALID && entry.data_type() != config_datatype(it->datatype))
      return invalid_argument(std::string(kind) + " '" + entry.name() + "': data_type " +
                              inference::DataType_Name(entry.data_type()) + ", but the artifact's is " +
                              std::string(datatype_config_name(it->datatype)));
    std::vector<int64_t> expected(it->shape.begin() + (batched ? 1 : 0), it->shape.end());
    std::vector<int64_t> given(entry.dims().begin(), entry.dims().end());
    if (entry.dims_size() > 0 && given != expected)
      return invalid_argument(std::string(kind) + " '" + entry.name() + "': dims " + shape_string(given) +
                              ", but the artifact's are " + shape_string(expected) +
                              (batched ? " (without the batch dimension)" : ""));
    if (entry.has_reshape()) return invalid_argument(std::string(kind) + " '" + entry.name() + "': reshape is not supported");
  }
  for (const TensorSpec& spec : specs) {
    auto existing = std::find_if(config_tensors->begin(), config_tensors->end(),
                                 [&](const auto& entry) { return entry.name() == spec.name; });
    auto* entry = existing != config_tensors->end() ? &*existing : config_tensors->Add();
    entry->set_name(spec.name);
    entry->set_data_type(config_datatype(spec.datatype));
    entry->clear_dims();
    for (size_t d = batched ? 1 : 0; d < spec.shape.size(); ++d) entry->add_dims(spec.shape[d]);
  }
  return Status::ok();
}

// Refuses configuration fields kiln-serve does not implement, so that a Triton config written
// for another backend is not half-applied silently.
Status check_supported_fields(const inference::ModelConfig& config) {
  static const std::set<std::string> kSupported = {"name", "platform", "backend", "version_policy",
                                                   "max_batch_size", "input", "output", "instance_group",
                                                   "dynamic_batching", "parameters", "default_model_filename"};
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  config.GetReflection()->ListFields(config, &fields);
  for (const auto* field : fields)
    if (!kSupported.count(field->name()))
      return invalid_argument("config field '" + field->name() + "' is not supported by kiln-serve");
  if (!config.platform().empty() && config.platform() != "kiln")
    return invalid_argument("platform '" + config.platform() + "' is not \"kiln\"");
  if (!config.backend().empty() && config.backend() != "kiln")
    return invalid_argument("backend '" + config.backend() + "' is not \"kiln\"");
  const auto& batching = config.dynamic_batching();
  if (batching.priority_levels() > 0 || batching.priority_queue_policy_size() > 0)
    return invalid_argument("dynamic_batching: priority levels are not supported");
  if (batching.default_queue_policy().default_timeout_microseconds() > 0)
    return invalid_argument("dynamic_batching: queue timeouts are not supported");
  for (const auto& [key, value] : config.parameters())
    if (key != "device")
      return invalid_argument("parameter '" + key + "' is not known (kiln-serve reads \"device\")");
  return Status::ok();
}

// Whether the artifact has a batch dimension: every input and output starts with the same
// symbol, which appears nowhere else (so that concatenating along it changes nothing else).
Status check_batchable(const std::vector<rt::TensorInfo>& inputs, const std::vector<rt::TensorInfo>& outputs) {
  if (inputs.empty()) return invalid_argument("max_batch_size > 0 needs inputs with a batch dimension");
  const std::string symbol = inputs[0].symbols.empty() ? "" : inputs[0].symbols[0];
  if (symbol.empty())
    return invalid_argument("max_batch_size > 0, but input '" + inputs[0].name +
                            "' does not start with a symbolic (batch) dimension");
  for (const auto* list : {&inputs, &outputs})
    for (const rt::TensorInfo& info : *list) {
      if (info.symbols.empty() || info.symbols[0] != symbol)
        return invalid_argument("max_batch_size > 0, but '" + info.name + "' does not start with the batch dimension '" +
                                symbol + "'");
      for (size_t d = 1; d < info.symbols.size(); ++d)
        if (info.symbols[d] == symbol)
          return invalid_argument("max_batch_size > 0, but '" + info.name + "' uses the batch dimension '" + symbol +
                                  "' again at position " + std::to_string(d));
    }
  return Status::ok();
}

// The devices of one instance group: the "device" parameter, else by kind (KIND_CPU: the
// fastest CPU device that can run the artifact, else the reference interpreter; KIND_GPU or
// KIND_AUTO: the default device, or the default driver's devices numbered in `gpus`).
Result<std::vector<std::string>> group_devices(const inference::ModelConfig& config,
                                               const inference::ModelInstanceGroup& group,
                                               const rt::Artifact& artifact) {
  auto parameter = config.parameters().find("device");
  if (parameter != config.parameters().end()) return std::vector<std::string>{parameter->second.string_value()};
  switch (group.kind()) {
    case inference::ModelInstanceGroup::KIND_CPU: {
      auto devices = rt::list_devices();
      if (devices.ok())
        for (const rt::DeviceInfo& device : devices.value()) {
          int can_run = 0;
          if (device.type == "cpu" && kiln_artifact_supports_device(artifact.get(), device.id.c_str(), &can_run) == KILN_OK &&
              can_run)
            return std::vector<std::string>{device.id};
        }
      return std::vector<std::string>{"reference"};
    }
    case inference::ModelInstanceGroup::KIND_GPU:
    case inference::ModelInstanceGroup::KIND_AUTO: {
      if (group.gpus_size() == 0) return std::vector<std::string>{""};
      auto probe = rt::Session::create(artifact, "");
      if (!probe.ok()) return from_runtime(probe.status(), "the default device");
      std::string id = probe.value().device_id();
      std::string driver = id.substr(0, id.find(':'));
      std::vector<std::string> out;
      for (int gpu : group.gpus()) out.push_back(driver + ":" + std::to_string(gpu));
      return out;
    }
    default:
      return invalid_argument("instance_group kind " + inference::ModelInstanceGroup::Kind_Name(group.kind()) +
                              " is not supported");
  }
}

}  // namespace

Result<std::shared_ptr<Model>> Model::load(const std::string& name, int64_t version,
                                           const std::filesystem::path& artifact_path,
                                           const inference::ModelConfig& file_config,
                                           const ModelLoadOptions& options, Metrics& metrics) {
  auto state = std::make_unique<State>();
  state->name = name;
  state->version = version;
  state->version_string = std::to_string(version);
  state->metrics = &metrics;
  inference::ModelConfig& config = state->config;
  config = file_config;
  KILN_RETURN_IF_ERROR(check_supported_fields(config));
  if (!config.name().empty() && config.name() != name)
    return invalid_argument("config name '" + config.name() + "' is not the model folder's name '" + name + "'");
  config.set_name(name);
  config.set_platform("kiln");
  config.set_backend("kiln");

  auto artifact = rt::Artifact::load_file(artifact_path.string(), options.trusted_keys);
  if (!artifact.ok()) return from_runtime(artifact.status(), "version " + state->version_string);
  state->artifact = std::move(artifact.value());
  state->input_infos = state->artifact.inputs();
  state->output_infos = state->artifact.outputs();
  for (const auto* infos : {&state->input_infos, &state->output_infos}) {
    for (const rt::TensorInfo& info : *infos) {
      if (!has_datatype(info.dtype)) {
        return unsupported("tensor '" + info.name + "' is " + kiln_dtype_name(info.dtype) +
                           ", which the inference protocol has no datatype for");
      }
    }
  }
  state->inputs = specs_of(state->input_infos);
  state->outputs = specs_of(state->output_infos);

  if (config.max_batch_size() < 0) return invalid_argument("max_batch_size is negative");
  state->max_batch_size = config.max_batch_size();
  bool batched = state->max_batch_size > 0;
  if (batched) KILN_RETURN_IF_ERROR(check_batchable(state->input_infos, state->output_infos));
  KILN_RETURN_IF_ERROR(reconcile_tensors(config.mutable_input(), state->inputs, batched, "input"));
  KILN_RETURN_IF_ERROR(reconcile_tensors(config.mutable_output(), state->outputs, batched, "output"));

  if (config.has_dynamic_batching()) {
    if (!batched) return invalid_argument("dynamic_batching needs max_batch_size > 0");
    const auto& batching = config.dynamic_batching();
    state->dynamic_batching = true;
    state->max_queue_delay = std::chrono::microseconds(batching.max_queue_delay_microseconds());
    for (int64_t size : batching.preferred_batch_size()) {
      if (size < 1 || size > state->max_batch_size)
        return invalid_argument("preferred_batch_size " + std::to_string(size) + " is outside 1..max_batch_size");
      state->preferred_batch_sizes.push_back(size);
    }
    std::sort(state->preferred_batch_sizes.begin(), state->preferred_batch_sizes.end());
    state->max_queue_size = batching.default_queue_policy().max_queue_size();
  }
  if (state->max_queue_size == 0) state->max_queue_size = options.default_max_queue_size;

  if (config.instance_group_size() == 0) config.add_instance_group()->set_count(1);
  for (int g = 0; g < config.instance_group_size(); ++g) {
    inference::ModelInstanceGroup& group = *config.mutable_instance_group(g);
    if (group.name().empty()) group.set_name(name + "_" + std::to_string(g));
    if (group.count() < 1) group.set_count(1);
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> devices, group_devices(config, group, state->artifact));
    for (const std::string& device : devices)
      for (int i = 0; i < group.count(); ++i) {
        auto session = rt::Session::create(state->artifact, device);
        if (!session.ok())
          return from_runtime(session.status(), "instance group '" + group.name() + "' on " +
                                                    (device.empty() ? std::string("the default device") : device));
        auto instance = std::make_unique<Instance>();
        instance->device = session.value().device_id();
        instance->session = std::move(session.value());
        state->instances.push_back(std::move(instance));
      }
  }
  for (auto& instance : state->instances) {
    Instance& ref = *instance;
    instance->worker = std::thread([s = state.get(), &ref] { s->worker_loop(ref); });
  }
  std::vector<std::string> devices;
  for (const auto& instance : state->instances) devices.push_back(instance->device);
  log_info("model loaded", {{"model", name}, {"version", state->version_string}, {"devices", devices},
                            {"max_batch_size", state->max_batch_size},
                            {"dynamic_batching", state->dynamic_batching}});
  return std::shared_ptr<Model>(new Model(std::move(state)));
}

Model::Model(std::unique_ptr<State> state) : state_(std::move(state)) {}

Model::~Model() { drain(); }

const std::string& Model::name() const { return state_->name; }
int64_t Model::version() const { return state_->version; }
const inference::ModelConfig& Model::config() const { return state_->config; }
const std::vector<TensorSpec>& Model::inputs() const { return state_->inputs; }
const std::vector<TensorSpec>& Model::outputs() const { return state_->outputs; }

std::vector<std::string> Model::instance_devices() const {
  std::vector<std::string> out;
  for (const auto& instance : state_->instances) out.push_back(instance->device);
  return out;
}

void Model::infer(InferRequest request, InferCallback done) {
  State& s = *state_;
  Pending p;
  p.arrival = Clock::now();
  if (Status valid = s.validate(request, p); !valid.is_ok()) {
    s.metrics->request_done(s.name, s.version_string, {false, error_code_name(valid.code())});
    done(Status(valid.code(), "model '" + s.name + "' version " + s.version_string + ": " + valid.message()));
    return;
  }
  p.request = std::move(request);
  p.done = std::move(done);
  std::unique_lock lock(s.mutex);
  Status refused;
  if (s.draining)
    refused = Status(ErrorCode::kUnavailable, "model '" + s.name + "' is unloading or the server is shutting down");
  else if (s.max_queue_size > 0 && s.pending >= s.max_queue_size)
    refused = Status(ErrorCode::kUnavailable, "model '" + s.name + "': the queue is full (" +
                                                  std::to_string(s.max_queue_size) + " requests)");
  if (!refused.is_ok()) {
    lock.unlock();
    s.metrics->request_done(s.name, s.version_string, {false, error_code_name(refused.code())});
    p.done(std::move(refused));
    return;
  }
  ++s.pending;
  s.queued_rows += p.rows;
  s.queue.push_back(std::move(p));
  const bool wake_idle = !s.forming;
  const bool wake_forming = s.forming && (s.wake_forming_at == 0 || s.queued_rows >= s.wake_forming_at);
  lock.unlock();
  s.metrics->pending_changed(s.name, s.version_string, 1);
  if (wake_idle) s.work_ready.notify_one();
  if (wake_forming) s.batch_grew.notify_one();
}

void Model::drain() {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.draining = true;
  }
  s.work_ready.notify_all();
  s.batch_grew.notify_all();
  for (auto& instance : s.instances)
    if (instance->worker.joinable()) instance->worker.join();
}

}  // namespace kiln::serve
