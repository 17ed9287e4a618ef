// One loaded version of a model: its artifact, its complete configuration, and its instances —
// each a Kiln session on a device with its own worker thread — fed by one request queue, the
// dynamic batcher.
//
// Batching: a model whose inputs and outputs all have the same symbolic first dimension (the
// batch) and whose configuration has max_batch_size > 0 takes requests with any batch size up to
// max_batch_size. With `dynamic_batching` configured, a worker merges queued requests whose other
// dimensions and dtypes agree, along that first dimension, up to max_batch_size rows or until the
// oldest has waited max_queue_delay_microseconds (a preferred_batch_size, once reached, runs at
// once), runs them as one, and splits the outputs back per request. Without it each request runs
// alone.
//
// Ownership and thread-safety: Models are shared (std::shared_ptr) by the repository and by the
// requests in flight; infer() may be called from any thread. drain() (also run by the destructor)
// refuses new requests, finishes the queued ones and joins the workers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "serve/inference.h"
#include "serve/proto/model_config.pb.h"
#include "support/status.h"

namespace kiln::serve {

class Metrics;

struct ModelLoadOptions {
  // Public keys (kilnc .pub text or 64 hex digits) that must have signed the artifact; empty: any.
  std::vector<std::string> trusted_keys;
  // The queue limit when the configuration sets none (dynamic_batching.default_queue_policy.
  // max_queue_size); 0: unlimited.
  uint32_t default_max_queue_size = 0;
};

class Model {
 public:
  // Loads REPO/<name>/<version>/model.kiln with `config` (the model's config.pbtxt, or a default
  // ModelConfig when it has none), completes the configuration from the artifact (inputs,
  // outputs, max_batch_size) and checks what the file states against the artifact, then opens
  // the sessions of every instance group. Errors name the model and version.
  static Result<std::shared_ptr<Model>> load(const std::string& name, int64_t version,
                                             const std::filesystem::path& artifact_path,
                                             const inference::ModelConfig& config,
                                             const ModelLoadOptions& options, Metrics& metrics);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const;
  int64_t version() const;
  // The configuration in effect, complete (as `GET /v2/models/<name>/config` shows it).
  const inference::ModelConfig& config() const;
  // Metadata: shapes with -1 for symbolic dimensions (the batch dimension included).
  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;
  // The devices of the instances, e.g. {"cuda:0", "cuda:0"}.
  std::vector<std::string> instance_devices() const;

  // Checks `request` against the model (names, dtypes, shapes, byte sizes, batch size) and
  // queues it; `done` gets the response or the error. Never blocks on execution.
  void infer(InferRequest request, InferCallback done);
  // Refuses new requests (kUnavailable), finishes the queued ones, joins the workers. Idempotent.
  void drain();

  struct State;

 private:
  explicit Model(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::serve
