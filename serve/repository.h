// The model repository: a folder laid out as Triton's,
//   ROOT/<model>/config.pbtxt          (optional; Triton's ModelConfig in protobuf text format)
//   ROOT/<model>/<version>/model.kiln  (versions are positive integers)
// Which versions load follows the config's version_policy (default: the newest one).
//
// Control modes, as tritonserver's --model-control-mode: kNone loads every model at start and
// refuses load/unload requests; kExplicit loads the models named at start ("*": all) and then
// whatever load/unload requests ask for. Loading a model that is loaded already reloads it: the
// new versions replace the old ones once they are ready, while requests in flight finish on the
// old ones.
//
// Thread-safety: every member may be called from any thread; loads of one model are serialized.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serve/model.h"
#include "support/status.h"

namespace kiln::serve {

class Metrics;

enum class ModelControlMode { kNone, kExplicit };

struct RepositoryOptions {
  std::filesystem::path root;
  ModelControlMode control_mode = ModelControlMode::kNone;
  std::vector<std::string> startup_models;  // kExplicit: models to load at start; "*" = all
  ModelLoadOptions load;
};

// One row of the repository index (POST /v2/repository/index).
struct RepositoryIndexEntry {
  std::string name;
  std::string version;  // "" for a model with no loaded or failed version
  std::string state;    // "READY", "UNAVAILABLE", "LOADING", "UNLOADING"; "" when never loaded
  std::string reason;   // why UNAVAILABLE
};

class ModelRepository {
 public:
  ModelRepository(RepositoryOptions options, Metrics& metrics);
  ~ModelRepository();

  // Loads the startup models. A model that fails is logged and left UNAVAILABLE with the reason;
  // the returned status is the first such failure (ok when all loaded).
  Status load_startup_models();
  // (kExplicit only; kUnsupported otherwise.) Loads or reloads / unloads a model by name.
  Status load(const std::string& name);
  Status unload(const std::string& name);

  // Every model folder under the root, with its versions' states; `ready_only` keeps READY rows.
  std::vector<RepositoryIndexEntry> index(bool ready_only) const;
  // A ready version ("" = the newest ready one): kNotFound for an unknown model or version,
  // kUnavailable for a known model with no ready version.
  Result<std::shared_ptr<Model>> find(const std::string& name, const std::string& version) const;
  // The ready versions of a model, ascending, as strings.
  std::vector<std::string> ready_versions(const std::string& name) const;
  // True when every model that was asked to load is ready.
  bool all_ready() const;
  const ModelControlMode& control_mode() const { return options_.control_mode; }

  // Drains every model (finishes queued requests); later finds fail with kUnavailable.
  void shutdown();

 private:
  struct VersionSlot {
    std::shared_ptr<Model> model;  // null unless READY
    std::string state;
    std::string reason;
  };
  struct ModelEntry {
    std::map<int64_t, VersionSlot> versions;
    bool requested = false;  // asked to load (at start or by a load request), not unloaded since
  };
  Status load_locked_model(const std::string& name);

  RepositoryOptions options_;
  Metrics& metrics_;
  std::mutex load_mutex_;  // serializes loads and unloads (they are slow; finds do not wait on them)
  mutable std::mutex mutex_;  // guards models_ and shut_down_
  std::map<std::string, ModelEntry> models_;
  bool shut_down_ = false;
};

}  // namespace kiln::serve
