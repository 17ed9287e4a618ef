// Kiln runtime: a thin C++ wrapper over the C API (kiln/runtime.h).
//
// RAII owners for the C handles (Artifact, Session, Buffer, Event) that throw nothing: every
// fallible call returns a kiln::rt::Status (the C status + the thread's error message) or a
// Result<T>. It is header-only and uses only kiln/runtime.h, so a program embedding Kiln needs
// nothing but this header pair and the kiln_runtime library. Thread-safety: as the C API (an
// Artifact may be shared across threads; one Session per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/runtime.h"

namespace kiln::rt {

// A C status with the message of the failing call (captured at once, so it survives later calls).
class Status {
 public:
  Status() = default;
  explicit Status(kiln_status code)
      : code_(code), message_(code == KILN_OK ? "" : kiln_last_error_message()) {}
  bool ok() const { return code_ == KILN_OK; }
  explicit operator bool() const { return ok(); }
  kiln_status code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: input 'x': expected ..."
  std::string to_string() const {
    return ok() ? "OK" : std::string(kiln_status_name(code_)) + ": " + message_;
  }

 private:
  kiln_status code_ = KILN_OK;
  std::string message_;
};

// A value or a failed Status. Precondition of value(): ok().
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return status_.ok(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }

 private:
  T value_{};
  Status status_;
};

// Owns a C handle; move-only.
template <class Handle, void (*Destroy)(Handle*)>
class Owner {
 public:
  Owner() = default;
  explicit Owner(Handle* handle) : handle_(handle) {}
  Owner(Owner&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Owner& operator=(Owner&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  ~Owner() { reset(); }
  void reset() {
    if (handle_) Destroy(handle_);
    handle_ = nullptr;
  }
  Handle* get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }

 protected:
  Handle* handle_ = nullptr;
};

struct DeviceInfo {
  std::string id, driver, type, description;
  int priority = 0;
};

// Every device, fastest first (fails when KILN_REQUIRE_DRIVERS names a missing driver).
inline Result<std::vector<DeviceInfo>> list_devices() {
  size_t count = 0;
  Status s(kiln_device_count(&count));
  if (!s) return s;
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < count; ++i) {
    kiln_device_info info;
    Status got(kiln_device_get_info(i, &info));
    if (!got) return got;
    out.push_back({info.id, info.driver, info.type_name, info.description, info.priority});
  }
  return out;
}

struct TensorInfo {
  std::string name;
  kiln_dtype dtype = KILN_DTYPE_F32;
  std::vector<int64_t> dims;         // -1 for a symbolic dim
  std::vector<std::string> symbols;  // "" for a static dim
};

class Artifact : public Owner<kiln_artifact, kiln_artifact_destroy> {
 public:
  using Owner::Owner;
  // trusted_keys: public key texts (kilnc .pub files' contents); when any, only an artifact
  // signed by one of them loads (see kiln_artifact_options).
  static Result<Artifact> load_file(const std::string& path, const std::vector<std::string>& trusted_keys = {}) {
    kiln_artifact* a = nullptr;
    std::vector<const char*> keys = key_pointers(trusted_keys);
    kiln_artifact_options options = load_options(keys);
    Status s(kiln_artifact_load_file_ex(path.c_str(), &options, &a));
    if (!s) return s;
    return Artifact(a);
  }
  // The bytes are copied.
  static Result<Artifact> load_memory(const void* data, size_t size, const std::vector<std::string>& trusted_keys = {}) {
    kiln_artifact* a = nullptr;
    std::vector<const char*> keys = key_pointers(trusted_keys);
    kiln_artifact_options options = load_options(keys);
    Status s(kiln_artifact_load_memory_ex(data, size, &options, &a));
    if (!s) return s;
    return Artifact(a);
  }
  std::vector<TensorInfo> inputs() const { return signature(true); }
  std::vector<TensorInfo> outputs() const { return signature(false); }
  std::vector<std::string> targets() const {
    std::vector<std::string> out;
    size_t n = 0;
    if (kiln_artifact_target_count(handle_, &n) != KILN_OK) return out;
    for (size_t i = 0; i < n; ++i) {
      const char* t = nullptr;
      if (kiln_artifact_target(handle_, i, &t) == KILN_OK) out.emplace_back(t);
    }
    return out;
  }

 private:
  static std::vector<const char*> key_pointers(const std::vector<std::string>& keys) {
    std::vector<const char*> out;
    for (const std::string& k : keys) out.push_back(k.c_str());
    return out;
  }
  static kiln_artifact_options load_options(const std::vector<const char*>& keys) {
    kiln_artifact_options options;
    kiln_artifact_options_init(&options);
    options.trusted_keys = keys.data();
    options.trusted_key_count = keys.size();
    return options;
  }
  std::vector<TensorInfo> signature(bool inputs) const {
    std::vector<TensorInfo> out;
    size_t n = 0;
    if ((inputs ? kiln_artifact_input_count : kiln_artifact_output_count)(handle_, &n) != KILN_OK)
      return out;
    for (size_t i = 0; i < n; ++i) {
      kiln_tensor_info info;
      if ((inputs ? kiln_artifact_input_info : kiln_artifact_output_info)(handle_, i, &info) != KILN_OK)
        continue;
      TensorInfo t{info.name, info.dtype, {}, {}};
      for (size_t d = 0; d < info.rank; ++d) {
        t.dims.push_back(info.dims[d]);
        t.symbols.emplace_back(info.dim_symbols[d] ? info.dim_symbols[d] : "");
      }
      out.push_back(std::move(t));
    }
    return out;
  }
};

class Event : public Owner<kiln_event, kiln_event_destroy> {
 public:
  using Owner::Owner;
  Status wait() { return Status(kiln_event_wait(handle_)); }
};

class Session;

class Buffer : public Owner<kiln_buffer, kiln_buffer_destroy> {
 public:
  using Owner::Owner;
  inline static Result<Buffer> create(Session& session, size_t bytes);
  // Application-owned device memory used in place (kiln_buffer_wrap_native).
  inline static Result<Buffer> wrap_native(Session& session, void* native, size_t bytes);
  size_t size() const {
    size_t n = 0;
    return kiln_buffer_size(handle_, &n) == KILN_OK ? n : 0;
  }
  Status write(size_t offset, const void* data, size_t bytes) {
    return Status(kiln_buffer_write(handle_, offset, data, bytes));
  }
  Status read(size_t offset, void* data, size_t bytes) const {
    return Status(kiln_buffer_read(handle_, offset, data, bytes));
  }
};

struct KernelTime {
  std::string name, kind;
  uint32_t kernel_index = 0;
  double seconds = 0;
};

class Session : public Owner<kiln_session, kiln_session_destroy> {
 public:
  using Owner::Owner;
  // device_id "" = the default device.
  static Result<Session> create(const Artifact& artifact, const std::string& device_id = "") {
    kiln_session* s = nullptr;
    Status st(kiln_session_create(artifact.get(), device_id.c_str(), &s));
    if (!st) return st;
    return Session(s);
  }
  // With device options ("<driver>.<option>", value), e.g. {{"cuda.graphs", "off"}}.
  static Result<Session> create(const Artifact& artifact, const std::string& device_id,
                                const std::vector<std::pair<std::string, std::string>>& options) {
    std::vector<kiln_device_option> list;
    for (const auto& [key, value] : options) list.push_back(kiln_device_option{key.c_str(), value.c_str()});
    kiln_session* s = nullptr;
    Status st(kiln_session_create_with_options(artifact.get(), device_id.c_str(), list.data(), list.size(), &s));
    if (!st) return st;
    return Session(s);
  }
  std::string device_id() const {
    const char* id = nullptr;
    return kiln_session_device_id(handle_, &id) == KILN_OK ? id : "";
  }
  Status set_input(const std::string& name, kiln_dtype dtype, const std::vector<int64_t>& dims,
                   const void* data, size_t bytes) {
    return Status(kiln_session_set_input(handle_, name.c_str(), dtype, dims.data(), dims.size(), data, bytes));
  }
  Status set_input(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    return set_input(name, KILN_DTYPE_F32, dims, values.data(), values.size() * sizeof(float));
  }
  Status set_input_buffer(const std::string& name, kiln_dtype dtype, const std::vector<int64_t>& dims,
                          Buffer& buffer) {
    return Status(kiln_session_set_input_buffer(handle_, name.c_str(), dtype, dims.data(), dims.size(),
                                                buffer.get()));
  }
  Status set_output_host(const std::string& name, void* data, size_t capacity) {
    return Status(kiln_session_set_output_host(handle_, name.c_str(), data, capacity));
  }
  Status set_output_buffer(const std::string& name, Buffer& buffer) {
    return Status(kiln_session_set_output_buffer(handle_, name.c_str(), buffer.get()));
  }
  Status reset_output(const std::string& name) {
    return Status(kiln_session_reset_output(handle_, name.c_str()));
  }
  Status run() { return Status(kiln_session_run(handle_)); }
  Result<Event> run_async() {
    kiln_event* e = nullptr;
    Status s(kiln_session_run_async(handle_, &e));
    if (!s) return s;
    return Event(e);
  }
  Result<std::vector<int64_t>> output_shape(const std::string& name) const {
    std::vector<int64_t> dims(16);
    size_t rank = 0;
    Status s(kiln_session_output_shape(handle_, name.c_str(), dims.data(), dims.size(), &rank));
    if (!s) return s;
    dims.resize(rank);
    return dims;
  }
  // The output's bytes (a copy), for outputs with the default binding.
  Result<std::vector<uint8_t>> output_bytes(const std::string& name) const {
    const void* data = nullptr;
    size_t bytes = 0;
    Status s(kiln_session_get_output(handle_, name.c_str(), &data, &bytes));
    if (!s) return s;
    const auto* p = static_cast<const uint8_t*>(data);
    return std::vector<uint8_t>(p, p + bytes);
  }
  Status set_profiling(bool enabled) { return Status(kiln_session_set_profiling(handle_, enabled ? 1 : 0)); }
  std::vector<KernelTime> profile() const {
    std::vector<KernelTime> out;
    size_t n = 0;
    if (kiln_session_profile_count(handle_, &n) != KILN_OK) return out;
    for (size_t i = 0; i < n; ++i) {
      kiln_kernel_time k;
      if (kiln_session_profile_entry(handle_, i, &k) == KILN_OK)
        out.push_back({k.name, k.kind, k.kernel_index, k.seconds});
    }
    return out;
  }
};

inline Result<Buffer> Buffer::create(Session& session, size_t bytes) {
  kiln_buffer* b = nullptr;
  Status s(kiln_buffer_create(session.get(), bytes, &b));
  if (!s) return s;
  return Buffer(b);
}

inline Result<Buffer> Buffer::wrap_native(Session& session, void* native, size_t bytes) {
  kiln_buffer* b = nullptr;
  Status s(kiln_buffer_wrap_native(session.get(), native, bytes, &b));
  if (!s) return s;
  return Buffer(b);
}

}  // namespace kiln::rt
