#include "serve/repository.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "serve/log.h"
#include "serve/metrics.h"

namespace kiln::serve {

namespace fs = std::filesystem;

namespace {

// Collects protobuf text-format errors as "config.pbtxt:LINE:COL: message" lines.
class ConfigErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit ConfigErrors(std::string file) : file_(std::move(file)) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    text_ += (text_.empty() ? "" : "; ") + file_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) +
             ": " + message;
  }
  const std::string& text() const { return text_; }

 private:
  std::string file_;
  std::string text_;
};

// A model name from a request names a folder directly under the root: never a path.
Status check_model_name(const fs::path& root, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    return invalid_argument("'" + name + "' is not a model name");
  std::error_code ec;
  if (!fs::is_directory(root / name, ec)) return not_found("no model '" + name + "' in the repository " + root.string());
  return Status::ok();
}

Result<inference::ModelConfig> read_config(const fs::path& folder) {
  inference::ModelConfig config;
  fs::path file = folder / "config.pbtxt";
  std::error_code ec;
  if (!fs::exists(file, ec)) return config;
  if (!fs::is_regular_file(file, ec)) return invalid_argument(file.string() + " is not a regular file");
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return invalid_argument("cannot read " + file.string());
  google::protobuf::TextFormat::Parser parser;
  ConfigErrors errors(file.string());
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text.str(), &config))
    return invalid_argument(errors.text().empty() ? file.string() + ": not a model configuration" : errors.text());
  return config;
}

// The version folders (positive integers), ascending. A folder without the model file fails when
// that version loads, with the runtime's error naming the path.
std::vector<int64_t> version_folders(const fs::path& folder) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 18 || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    int64_t version = std::stoll(name);
    if (version > 0 && entry.is_directory(ec)) out.push_back(version);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The versions the policy selects among those present (Triton's default: the newest one).
Result<std::vector<int64_t>> selected_versions(const inference::ModelConfig& config, std::vector<int64_t> present) {
  const auto& policy = config.version_policy();
  if (policy.has_all()) return present;
  if (policy.has_specific()) {
    std::vector<int64_t> out;
    for (int64_t v : policy.specific().versions()) {
      if (!std::binary_search(present.begin(), present.end(), v))
        return not_found("version_policy names version " + std::to_string(v) + ", which has no folder");
      out.push_back(v);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  size_t keep = policy.has_latest() && policy.latest().num_versions() > 0 ? policy.latest().num_versions() : 1;
  if (present.size() > keep) present.erase(present.begin(), present.end() - static_cast<std::ptrdiff_t>(keep));
  return present;
}

// The model folders under the root (not hidden), sorted: the one listing that startup and the
// index share.
Result<std::vector<std::string>> model_folders(const fs::path& root) {
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) return not_found("cannot read the model repository " + root.string() + ": " + ec.message());
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : it)
    if (entry.is_directory(ec) && entry.path().filename().string()[0] != '.')
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

ModelRepository::ModelRepository(RepositoryOptions options, Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

ModelRepository::~ModelRepository() { shutdown(); }

Status ModelRepository::load_startup_models() {
  std::vector<std::string> names;
  bool all = options_.control_mode == ModelControlMode::kNone ||
             std::count(options_.startup_models.begin(), options_.startup_models.end(), "*") > 0;
  if (all) {
    KILN_ASSIGN_OR_RETURN(names, model_folders(options_.root));
  } else {
    names = options_.startup_models;
  }
  Status first_failure;
  for (const std::string& name : names) {
    std::lock_guard loading(load_mutex_);
    Status loaded = load_locked_model(name);
    if (loaded.is_ok()) continue;
    if (first_failure.is_ok()) first_failure = loaded;
    // Asked for at start and not ready: the server is not ready (tritonserver's strict readiness).
    std::lock_guard lock(mutex_);
    models_[name].requested = true;
  }
  return first_failure;
}

Status ModelRepository::load(const std::string& name) {
  if (options_.control_mode != ModelControlMode::kExplicit)
    return unsupported("loading and unloading models needs --model-control-mode=explicit");
  std::lock_guard loading(load_mutex_);
  return load_locked_model(name);
}

// Loads the selected versions of `name`, then swaps them in for the old ones. Called with
// load_mutex_ held. A failure keeps what was serving; the failed version shows UNAVAILABLE.
Status ModelRepository::load_locked_model(const std::string& name) {
  KILN_RETURN_IF_ERROR(check_model_name(options_.root, name));
  const fs::path folder = options_.root / name;
  auto fail = [&](int64_t version, const Status& status) {
    log_error("model failed to load", {{"model", name}, {"version", version}, {"error", status.message()}});
    std::lock_guard lock(mutex_);
    ModelEntry& entry = models_[name];
    VersionSlot& slot = entry.versions[version];
    if (!slot.model) {
      slot.state = "UNAVAILABLE";
      slot.reason = status.message();
    }
    return Status(status.code(), "model '" + name + "': " + status.message());
  };
  auto config = read_config(folder);
  if (!config.is_ok()) return fail(0, config.status());
  const std::string file_name =
      config->default_model_filename().empty() ? "model.kiln" : config->default_model_filename();
  if (file_name.find('/') != std::string::npos || file_name == "..")
    return fail(0, invalid_argument("default_model_filename '" + file_name + "' is not a file name"));
  std::vector<int64_t> present = version_folders(folder);
  if (present.empty()) return fail(0, not_found("no version folder (a positive integer) in " + folder.string()));
  auto versions = selected_versions(config.value(), present);
  if (!versions.is_ok()) return fail(0, versions.status());
  {
    std::lock_guard lock(mutex_);
    if (shut_down_) return Status(ErrorCode::kUnavailable, "the server is shutting down");
    for (int64_t v : versions.value()) {
      VersionSlot& slot = models_[name].versions[v];
      if (!slot.model) slot.state = "LOADING";
    }
  }
  std::map<int64_t, std::shared_ptr<Model>> loaded;
  for (int64_t v : versions.value()) {
    auto model = Model::load(name, v, folder / std::to_string(v) / file_name, config.value(), options_.load, metrics_);
    if (!model.is_ok()) {
      for (auto& [version, m] : loaded) m->drain();
      return fail(v, model.status());
    }
    loaded[v] = std::move(model.value());
  }
  std::vector<std::shared_ptr<Model>> retired;
  {
    std::lock_guard lock(mutex_);
    ModelEntry& entry = models_[name];
    for (auto& [version, slot] : entry.versions)
      if (slot.model) retired.push_back(std::move(slot.model));
    entry.versions.clear();
    for (auto& [version, model] : loaded) entry.versions[version] = {std::move(model), "READY", ""};
    entry.requested = true;
  }
  // Outside the lock: finishing the old versions' queued requests may take a while.
  for (auto& model : retired) model->drain();
  return Status::ok();
}

Status ModelRepository::unload(const std::string& name) {
  if (options_.control_mode != ModelControlMode::kExplicit)
    return unsupported("loading and unloading models needs --model-control-mode=explicit");
  std::lock_guard loading(load_mutex_);
  KILN_RETURN_IF_ERROR(check_model_name(options_.root, name));
  std::vector<std::shared_ptr<Model>> retired;
  {
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) return Status::ok();  // not loaded: nothing to do, as Triton
    for (auto& [version, slot] : it->second.versions)
      if (slot.model) retired.push_back(std::move(slot.model));
    models_.erase(it);
  }
  for (auto& model : retired) model->drain();
  log_info("model unloaded", {{"model", name}});
  return Status::ok();
}

std::vector<RepositoryIndexEntry> ModelRepository::index(bool ready_only) const {
  // An unreadable root lists no folders (startup already reported it).
  Result<std::vector<std::string>> listed = model_folders(options_.root);
  const std::vector<std::string> folders = listed.is_ok() ? std::move(listed).value() : std::vector<std::string>{};
  std::vector<RepositoryIndexEntry> out;
  std::lock_guard lock(mutex_);
  for (const std::string& name : folders) {
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty()) {
      if (!ready_only) out.push_back({name, "", "", ""});
      continue;
    }
    for (const auto& [version, slot] : it->second.versions) {
      if (ready_only && slot.state != "READY") continue;
      out.push_back({name, version > 0 ? std::to_string(version) : "", slot.state, slot.reason});
    }
  }
  return out;
}

Result<std::shared_ptr<Model>> ModelRepository::find(const std::string& name, const std::string& version) const {
  std::lock_guard lock(mutex_);
  if (shut_down_) return Status(ErrorCode::kUnavailable, "the server is shutting down");
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::string loaded;
    for (const auto& [n, entry] : models_) loaded += (loaded.empty() ? "" : ", ") + n;
    return not_found("unknown model '" + name + "' (loaded: " + (loaded.empty() ? "none" : loaded) + ")");
  }
  const auto& versions = it->second.versions;
  if (version.empty()) {
    for (auto v = versions.rbegin(); v != versions.rend(); ++v)
      if (v->second.model) return v->second.model;
    return Status(ErrorCode::kUnavailable, "model '" + name + "' has no ready version");
  }
  bool numeric = version.size() <= 18 && std::all_of(version.begin(), version.end(), ::isdigit);
  auto v = numeric ? versions.find(std::stoll(version)) : versions.end();
  if (v == versions.end()) return not_found("model '" + name + "' has no version '" + version + "'");
  if (!v->second.model)
    return Status(ErrorCode::kUnavailable, "model '" + name + "' version " + version + " is not ready (" +
                                               v->second.state + (v->second.reason.empty() ? "" : ": ") +
                                               v->second.reason + ")");
  return v->second.model;
}

std::vector<std::string> ModelRepository::ready_versions(const std::string& name) const {
  std::vector<std::string> out;
  std::lock_guard lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& [version, slot] : it->second.versions)
    if (slot.model) out.push_back(std::to_string(version));
  return out;
}

bool ModelRepository::all_ready() const {
  std::lock_guard lock(mutex_);
  for (const auto& [name, entry] : models_) {
    if (!entry.requested) continue;
    bool any_ready = std::any_of(entry.versions.begin(), entry.versions.end(),
                                 [](const auto& v) { return v.second.model != nullptr; });
    if (!any_ready) return false;
  }
  return true;
}

void ModelRepository::shutdown() {
  std::vector<std::shared_ptr<Model>> models;
  {
    std::lock_guard lock(mutex_);
    shut_down_ = true;
    for (auto& [name, entry] : models_)
      for (auto& [version, slot] : entry.versions)
        if (slot.model) models.push_back(slot.model);
  }
  for (auto& model : models) model->drain();
}

}  // namespace kiln::serve
