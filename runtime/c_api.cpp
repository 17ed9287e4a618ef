// The C API (runtime/include/kiln/runtime.h) over runtime::Session, DeviceRegistry and the
// artifact reader.
//
// Every entry point validates its arguments, runs its body inside `guarded` (which turns any
// C++ exception, e.g. std::bad_alloc, into a status so none crosses the C boundary), and
// records a failure's message in the calling thread's last-error slot.
//
// Ownership model (why the handles hold shared_ptrs): a C caller may destroy handles in any
// order, so every handle keeps alive what it depends on.
//   kiln_artifact -> shared_ptr<const LoadedArtifact> (also held by every session's Executable)
//   kiln_session  -> shared_ptr<SessionCore> (also held by its events)
//   SessionCore   -> shared_ptr<DeviceHolder> + the Session + the buffers it has bound
//   kiln_buffer   -> shared_ptr<BufferCore> -> shared_ptr<DeviceHolder>
//   DeviceHolder  -> shared_ptr<DeviceRegistry> (drivers must outlive their devices)
// Devices are opened once per id and shared by the sessions on it (weak cache), so buffers of
// one device can be bound by every session on that device.
#include "kiln/runtime.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "runtime/device_registry.h"
#include "runtime/log.h"
#include "runtime/session.h"
#include "support/version.h"

namespace {

using kiln::ErrorCode;
using kiln::Result;
using kiln::Status;
using kiln::runtime::DeviceRegistry;
using kiln::runtime::Session;
namespace hal = kiln::runtime::hal;
namespace ir = kiln::ir;

thread_local std::string t_last_error;

// The size of kiln_session_options as API level 2 defined it (its last field: allocator), and of
// kiln_artifact_options as level 3 did. A caller's struct_size may not be smaller; fields added
// later go after it.
constexpr size_t kSessionOptionsFirstSize =
    offsetof(kiln_session_options, allocator) + sizeof(kiln_session_options::allocator);
constexpr size_t kArtifactOptionsFirstSize =
    offsetof(kiln_artifact_options, trusted_key_count) + sizeof(kiln_artifact_options::trusted_key_count);

// The caller's growable options struct as this library knows it (`out`, initialized to the
// defaults by the caller): a smaller (older) struct leaves the newer fields at their defaults; a
// larger (newer) one may not set a field this library lacks.
template <typename Options>
Status read_sized_options(const Options* given, size_t first_size, const char* function, Options& out) {
  if (!given) return Status::ok();
  // Far larger than any future version: an uninitialized struct, whose tail must not be read.
  constexpr size_t kImplausibleSize = 4096;
  if (given->struct_size < first_size || given->struct_size > kImplausibleSize)
    return kiln::invalid_argument(std::string(function) + ": options->struct_size is " +
                                  std::to_string(given->struct_size) + " (use the options' _init function)");
  const size_t known = std::min(given->struct_size, sizeof out);
  std::memcpy(&out, given, known);
  const auto* tail = reinterpret_cast<const unsigned char*>(given) + known;
  if (!std::all_of(tail, tail + (given->struct_size - known), [](unsigned char c) { return c == 0; }))
    return kiln::invalid_argument(std::string(function) + ": the options set a field that this library (" +
                                  std::string(kiln::kVersion) + ") does not know");
  out.struct_size = sizeof out;
  return Status::ok();
}

kiln_status to_c(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return KILN_OK;
    case ErrorCode::kInvalidArgument: return KILN_INVALID_ARGUMENT;
    case ErrorCode::kNotFound: return KILN_NOT_FOUND;
    case ErrorCode::kUnsupported: return KILN_UNSUPPORTED;
    case ErrorCode::kCorrupt: return KILN_CORRUPT;
    case ErrorCode::kOutOfMemory: return KILN_OUT_OF_MEMORY;
    case ErrorCode::kUnavailable: return KILN_UNAVAILABLE;
    case ErrorCode::kInternal: return KILN_INTERNAL;
    case ErrorCode::kUntrusted: return KILN_UNTRUSTED;
  }
  return KILN_INTERNAL;
}

kiln_status report(const Status& status) {
  if (status.is_ok()) return KILN_OK;
  try {
    t_last_error = status.message();
  } catch (...) {
    t_last_error.clear();
  }
  return to_c(status.code());
}

kiln_status bad_argument(const std::string& message) {
  return report(kiln::invalid_argument(message));
}

// Runs `body` (returning Status); exceptions become statuses.
template <class Body>
kiln_status guarded(Body&& body) {
  try {
    return report(body());
  } catch (const std::bad_alloc&) {
    return report(Status(ErrorCode::kOutOfMemory, "out of host memory"));
  } catch (const std::exception& e) {
    return report(kiln::internal_error(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return report(kiln::internal_error("unexpected exception"));
  }
}

std::optional<ir::DType> to_dtype(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_DTYPE_F32: return ir::DType::kF32;
    case KILN_DTYPE_F16: return ir::DType::kF16;
    case KILN_DTYPE_BF16: return ir::DType::kBF16;
    case KILN_DTYPE_I64: return ir::DType::kI64;
    case KILN_DTYPE_I32: return ir::DType::kI32;
    case KILN_DTYPE_I8: return ir::DType::kI8;
    case KILN_DTYPE_U8: return ir::DType::kU8;
    case KILN_DTYPE_BOOL: return ir::DType::kBool;
    case KILN_DTYPE_I16: return ir::DType::kI16;
    case KILN_DTYPE_U16: return ir::DType::kU16;
    case KILN_DTYPE_U32: return ir::DType::kU32;
    case KILN_DTYPE_F64: return ir::DType::kF64;
    case KILN_DTYPE_F8E4M3FN: return ir::DType::kF8E4M3FN;
    case KILN_DTYPE_F8E4M3FNUZ: return ir::DType::kF8E4M3FNUZ;
    case KILN_DTYPE_F8E5M2: return ir::DType::kF8E5M2;
    case KILN_DTYPE_F8E5M2FNUZ: return ir::DType::kF8E5M2FNUZ;
  }
  return std::nullopt;
}

kiln_dtype from_dtype(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32: return KILN_DTYPE_F32;
    case ir::DType::kF16: return KILN_DTYPE_F16;
    case ir::DType::kBF16: return KILN_DTYPE_BF16;
    case ir::DType::kI64: return KILN_DTYPE_I64;
    case ir::DType::kI32: return KILN_DTYPE_I32;
    case ir::DType::kI8: return KILN_DTYPE_I8;
    case ir::DType::kU8: return KILN_DTYPE_U8;
    case ir::DType::kBool: return KILN_DTYPE_BOOL;
    case ir::DType::kI16: return KILN_DTYPE_I16;
    case ir::DType::kU16: return KILN_DTYPE_U16;
    case ir::DType::kU32: return KILN_DTYPE_U32;
    case ir::DType::kF64: return KILN_DTYPE_F64;
    case ir::DType::kF8E4M3FN: return KILN_DTYPE_F8E4M3FN;
    case ir::DType::kF8E4M3FNUZ: return KILN_DTYPE_F8E4M3FNUZ;
    case ir::DType::kF8E5M2: return KILN_DTYPE_F8E5M2;
    case ir::DType::kF8E5M2FNUZ: return KILN_DTYPE_F8E5M2FNUZ;
  }
  return KILN_DTYPE_F32;
}

kiln_device_type from_device_type(hal::DeviceType type) {
  switch (type) {
    case hal::DeviceType::kDiscreteGpu: return KILN_DEVICE_DISCRETE_GPU;
    case hal::DeviceType::kIntegratedGpu: return KILN_DEVICE_INTEGRATED_GPU;
    case hal::DeviceType::kCpu: return KILN_DEVICE_CPU;
  }
  return KILN_DEVICE_CPU;
}

// A device opened once and shared; see the ownership model above.
struct DeviceHolder {
  std::shared_ptr<DeviceRegistry> registry;  // declared first: destroyed after the device
  std::unique_ptr<hal::Device> device;
};

// The process-wide runtime: the registry, the device listing, and the open-device cache.
// Thread-safety: the listing is made once (call_once) and immutable after; the cache has its
// mutex.
struct Runtime {
  std::shared_ptr<DeviceRegistry> registry = std::make_shared<DeviceRegistry>();
  std::mutex cache_mutex;
  std::map<std::string, std::weak_ptr<DeviceHolder>> open_devices;

  // Every driver's devices, listed on first use: starting every GPU API takes a fresh process a
  // few hundred milliseconds, which a session on a named device (cuda:0) does not need.
  struct Listing {
    std::vector<hal::DeviceInfo> devices;
    std::vector<std::string> type_names;
    std::vector<std::pair<std::string, std::string>> drivers;  // name, unavailable reason
  };
  const Listing& listing() {
    std::call_once(listed_, [this] {
      listing_.devices = registry->list_devices();
      for (const hal::DeviceInfo& info : listing_.devices)
        listing_.type_names.emplace_back(hal::device_type_name(info.type));
      for (const auto& driver : registry->drivers())
        listing_.drivers.emplace_back(std::string(driver->name()), driver->unavailable_reason());
    });
    return listing_;
  }

  // One opened device per id and option set.
  Result<std::shared_ptr<DeviceHolder>> open(const std::string& id, const hal::DeviceOptions& options) {
    const std::string key = options.empty() ? id : id + "\n" + options.to_string();
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = open_devices.find(key);
    if (it != open_devices.end())
      if (std::shared_ptr<DeviceHolder> held = it->second.lock()) return held;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<hal::Device> device, registry->open_device(id, options));
    auto holder = std::make_shared<DeviceHolder>();
    holder->registry = registry;
    holder->device = std::move(device);
    open_devices[key] = holder;
    return holder;
  }

 private:
  std::once_flag listed_;
  Listing listing_;
};

// Never destroyed: handles may outlive static destruction (e.g. in a caller's static object).
Runtime& runtime() {
  static Runtime* instance = new Runtime();
  return *instance;
}

struct BufferCore {
  std::shared_ptr<DeviceHolder> device;  // declared first: destroyed after the buffer
  std::unique_ptr<hal::Buffer> buffer;
};

// One session with everything it uses. `mutex` serializes calls on the session and its events.
struct SessionCore {
  std::shared_ptr<DeviceHolder> device;  // declared first: destroyed last
  std::unique_ptr<Session> session;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<BufferCore>> bound_inputs;   // keep bound buffers alive
  std::map<std::string, std::shared_ptr<BufferCore>> bound_outputs;
  ~SessionCore() { session.reset(); }  // waits for work in flight, then frees its buffers
};

// Signature data in C form, built once per artifact.
struct TensorInfoC {
  std::string name;
  kiln_dtype dtype = KILN_DTYPE_F32;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;
  std::vector<const char*> symbol_ptrs;
};

}  // namespace

struct kiln_artifact {
  std::shared_ptr<const kiln::artifact::LoadedArtifact> loaded;
  std::vector<TensorInfoC> inputs, outputs;
  std::vector<std::string> targets;
  std::string signer_hex;  // empty when unsigned
};

struct kiln_session {
  std::shared_ptr<SessionCore> core;
};

struct kiln_buffer {
  std::shared_ptr<BufferCore> core;
};

struct kiln_event {
  std::shared_ptr<SessionCore> core;
  bool waited = false;
  Status result;
};

namespace {

TensorInfoC make_tensor_info(const std::string& name, const ir::TensorType& type) {
  TensorInfoC info;
  info.name = name;
  info.dtype = from_dtype(type.dtype);
  for (const ir::Dim& dim : type.shape) {
    info.dims.push_back(dim.is_static() ? dim.size() : -1);
    info.symbols.push_back(dim.is_static() ? std::string() : dim.symbol_name());
  }
  for (size_t i = 0; i < type.shape.size(); ++i)
    info.symbol_ptrs.push_back(type.shape[i].is_static() ? nullptr : info.symbols[i].c_str());
  return info;
}

kiln_status make_artifact(Result<kiln::artifact::LoadedArtifact> loaded, kiln_artifact** out) {
  return guarded([&]() -> Status {
    if (!loaded.is_ok()) return loaded.status();
    auto artifact = std::make_unique<kiln_artifact>();
    artifact->loaded = std::make_shared<const kiln::artifact::LoadedArtifact>(std::move(loaded).value());
    const ir::Graph& graph = artifact->loaded->graph;
    for (ir::NodeId id : graph.inputs())
      artifact->inputs.push_back(make_tensor_info(graph.node(id).name, graph.node(id).type));
    for (const ir::GraphOutput& o : graph.outputs())
      artifact->outputs.push_back(make_tensor_info(o.name, o.declared));
    artifact->targets = artifact->loaded->targets();
    if (artifact->loaded->signer) artifact->signer_hex = kiln::artifact::public_key_hex(*artifact->loaded->signer);
    // Symbol pointers point into strings owned by the vector elements: rebuild them after the
    // vectors stopped moving.
    for (auto* list : {&artifact->inputs, &artifact->outputs})
      for (TensorInfoC& t : *list)
        for (size_t i = 0; i < t.symbols.size(); ++i)
          t.symbol_ptrs[i] = t.dims[i] < 0 ? t.symbols[i].c_str() : nullptr;
    *out = artifact.release();
    return Status::ok();
  });
}

kiln_status fill_tensor_info(const std::vector<TensorInfoC>& list, size_t index, const char* what,
                             kiln_tensor_info* info) {
  if (!info) return bad_argument(std::string("kiln_artifact_") + what + "_info: info is NULL");
  if (index >= list.size())
    return bad_argument(std::string(what) + " index " + std::to_string(index) +
                        " is out of range (the artifact has " + std::to_string(list.size()) + ")");
  const TensorInfoC& t = list[index];
  info->name = t.name.c_str();
  info->dtype = t.dtype;
  info->rank = t.dims.size();
  info->dims = t.dims.data();
  info->dim_symbols = t.symbol_ptrs.data();
  return KILN_OK;
}

// The shape given through the C API, validated.
Result<std::vector<int64_t>> read_dims(const int64_t* dims, size_t rank) {
  if (rank > 0 && !dims) return kiln::invalid_argument("dims is NULL but rank is " + std::to_string(rank));
  if (rank > size_t(ir::kMaxRank))
    return kiln::invalid_argument("rank " + std::to_string(rank) + " is too large (at most " +
                                  std::to_string(ir::kMaxRank) + ")");
  std::vector<int64_t> shape(dims, dims + rank);
  for (size_t i = 0; i < rank; ++i)
    if (shape[i] < 0)
      return kiln::invalid_argument("dimension " + std::to_string(i) + " is negative (" +
                                    std::to_string(shape[i]) + ")");
  return shape;
}

// Null-handle checks shared by the session functions.
#define KILN_REQUIRE_ARG(cond, message) \
  do {                                  \
    if (!(cond)) return bad_argument(message); \
  } while (0)

// A kiln_buffer on the session's device around the hal::Buffer that `make` creates there.
template <typename MakeBuffer>
kiln_status new_buffer(kiln_session* session, kiln_buffer** out, MakeBuffer make) {
  return guarded([&]() -> Status {
    auto core = std::make_shared<BufferCore>();
    core->device = session->core->device;
    KILN_ASSIGN_OR_RETURN(core->buffer, make(*core->device->device));
    auto buffer = std::make_unique<kiln_buffer>();
    buffer->core = std::move(core);
    *out = buffer.release();
    return Status::ok();
  });
}

}  // namespace

extern "C" {

const char* kiln_status_name(kiln_status status) {
  switch (status) {
    case KILN_OK: return "OK";
    case KILN_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case KILN_NOT_FOUND: return "NOT_FOUND";
    case KILN_UNSUPPORTED: return "UNSUPPORTED";
    case KILN_CORRUPT: return "CORRUPT";
    case KILN_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case KILN_UNAVAILABLE: return "UNAVAILABLE";
    case KILN_INTERNAL: return "INTERNAL";
    case KILN_UNTRUSTED: return "UNTRUSTED";
  }
  return "UNKNOWN";
}

const char* kiln_last_error_message(void) { return t_last_error.c_str(); }

const char* kiln_runtime_version(void) { return kiln::kVersion; }

void kiln_artifact_format_versions(uint32_t* oldest, uint32_t* newest) {
  if (oldest) *oldest = kiln::artifact::kOldestFormatVersion;
  if (newest) *newest = kiln::artifact::kFormatVersion;
}

void kiln_set_log_callback(kiln_log_fn fn, void* user_data, kiln_log_level max_level) {
  const int level = std::clamp(int(max_level), int(KILN_LOG_ERROR), int(KILN_LOG_DEBUG));
  kiln::runtime::set_log_sink(reinterpret_cast<kiln::runtime::LogSink>(fn), user_data,
                              kiln::runtime::LogLevel(level));
}

const char* kiln_dtype_name(kiln_dtype dtype) {
  std::optional<ir::DType> d = to_dtype(dtype);
  return d ? ir::dtype_name(*d).data() : nullptr;  // dtype names are NUL-terminated literals
}

size_t kiln_dtype_size(kiln_dtype dtype) {
  std::optional<ir::DType> d = to_dtype(dtype);
  return d ? ir::dtype_size(*d) : 0;
}

// ---- Devices --------------------------------------------------------------------------------

kiln_status kiln_device_count(size_t* count) {
  KILN_REQUIRE_ARG(count, "kiln_device_count: count is NULL");
  return guarded([&]() -> Status {
    Runtime& rt = runtime();
    KILN_RETURN_IF_ERROR(rt.registry->check_required_drivers_from_env());
    *count = rt.listing().devices.size();
    return Status::ok();
  });
}

kiln_status kiln_device_get_info(size_t index, kiln_device_info* info) {
  KILN_REQUIRE_ARG(info, "kiln_device_get_info: info is NULL");
  return guarded([&]() -> Status {
    Runtime& rt = runtime();
    if (index >= rt.listing().devices.size())
      return kiln::invalid_argument("device index " + std::to_string(index) + " is out of range (" +
                                    std::to_string(rt.listing().devices.size()) + " devices)");
    const hal::DeviceInfo& d = rt.listing().devices[index];
    info->id = d.id.c_str();
    info->driver = d.driver.c_str();
    info->type = from_device_type(d.type);
    info->type_name = rt.listing().type_names[index].c_str();
    info->description = d.description.c_str();
    info->priority = d.priority;
    return Status::ok();
  });
}

kiln_status kiln_driver_count(size_t* count) {
  KILN_REQUIRE_ARG(count, "kiln_driver_count: count is NULL");
  return guarded([&]() -> Status {
    *count = runtime().listing().drivers.size();
    return Status::ok();
  });
}

kiln_status kiln_driver_get_info(size_t index, const char** name, const char** unavailable_reason) {
  KILN_REQUIRE_ARG(name && unavailable_reason, "kiln_driver_get_info: an out-pointer is NULL");
  return guarded([&]() -> Status {
    Runtime& rt = runtime();
    if (index >= rt.listing().drivers.size())
      return kiln::invalid_argument("driver index " + std::to_string(index) + " is out of range (" +
                                    std::to_string(rt.listing().drivers.size()) + " drivers)");
    *name = rt.listing().drivers[index].first.c_str();
    *unavailable_reason = rt.listing().drivers[index].second.c_str();
    return Status::ok();
  });
}

// ---- Artifacts ------------------------------------------------------------------------------

void kiln_artifact_options_init(kiln_artifact_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
}

namespace {

// The reader's options from the C struct (NULL: the defaults).
Result<kiln::artifact::ReadOptions> read_options(const kiln_artifact_options* given, const char* function) {
  kiln_artifact_options options;
  kiln_artifact_options_init(&options);
  KILN_RETURN_IF_ERROR(read_sized_options(given, kArtifactOptionsFirstSize, function, options));
  if (!options.trusted_keys && options.trusted_key_count > 0)
    return kiln::invalid_argument(std::string(function) + ": options->trusted_keys is NULL");
  kiln::artifact::ReadOptions read;
  for (size_t i = 0; i < options.trusted_key_count; ++i) {
    if (!options.trusted_keys[i])
      return kiln::invalid_argument(std::string(function) + ": trusted key " + std::to_string(i) + " is NULL");
    KILN_ASSIGN_OR_RETURN(kiln::artifact::PublicKey key, kiln::artifact::parse_public_key(options.trusted_keys[i]));
    read.trusted_keys.push_back(key);
  }
  return read;
}

}  // namespace

kiln_status kiln_artifact_load_file(const char* path, kiln_artifact** out) {
  return kiln_artifact_load_file_ex(path, nullptr, out);
}

kiln_status kiln_artifact_load_file_ex(const char* path, const kiln_artifact_options* options, kiln_artifact** out) {
  KILN_REQUIRE_ARG(out, "kiln_artifact_load_file: out is NULL");
  *out = nullptr;
  KILN_REQUIRE_ARG(path, "kiln_artifact_load_file: path is NULL");
  try {
    Result<kiln::artifact::ReadOptions> read = read_options(options, "kiln_artifact_load_file_ex");
    if (!read.is_ok()) return report(read.status());
    return make_artifact(kiln::artifact::read_artifact_file(path, *read), out);
  } catch (...) {
    return report(Status(ErrorCode::kOutOfMemory, "out of host memory loading '" + std::string(path) + "'"));
  }
}

kiln_status kiln_artifact_load_memory(const void* data, size_t size, kiln_artifact** out) {
  return kiln_artifact_load_memory_ex(data, size, nullptr, out);
}

kiln_status kiln_artifact_load_memory_ex(const void* data, size_t size, const kiln_artifact_options* options,
                                         kiln_artifact** out) {
  KILN_REQUIRE_ARG(out, "kiln_artifact_load_memory: out is NULL");
  *out = nullptr;
  KILN_REQUIRE_ARG(data || size == 0, "kiln_artifact_load_memory: data is NULL");
  try {
    Result<kiln::artifact::ReadOptions> read = read_options(options, "kiln_artifact_load_memory_ex");
    if (!read.is_ok()) return report(read.status());
    const auto* bytes = static_cast<const uint8_t*>(data);
    auto copy = std::make_shared<const std::vector<uint8_t>>(bytes, bytes + size);
    return make_artifact(kiln::artifact::read_artifact(std::move(copy), *read), out);
  } catch (...) {
    return report(Status(ErrorCode::kOutOfMemory, "out of host memory copying a " +
                                                      std::to_string(size) + "-byte artifact"));
  }
}

void kiln_artifact_destroy(kiln_artifact* artifact) { delete artifact; }

kiln_status kiln_artifact_signer(const kiln_artifact* artifact, const char** public_key_hex, int* verified) {
  KILN_REQUIRE_ARG(artifact && public_key_hex, "kiln_artifact_signer: artifact or public_key_hex is NULL");
  *public_key_hex = artifact->signer_hex.empty() ? nullptr : artifact->signer_hex.c_str();
  if (verified) *verified = artifact->loaded->signature_verified ? 1 : 0;
  return KILN_OK;
}

kiln_status kiln_artifact_input_count(const kiln_artifact* artifact, size_t* count) {
  KILN_REQUIRE_ARG(artifact && count, "kiln_artifact_input_count: artifact or count is NULL");
  *count = artifact->inputs.size();
  return KILN_OK;
}

kiln_status kiln_artifact_output_count(const kiln_artifact* artifact, size_t* count) {
  KILN_REQUIRE_ARG(artifact && count, "kiln_artifact_output_count: artifact or count is NULL");
  *count = artifact->outputs.size();
  return KILN_OK;
}

kiln_status kiln_artifact_input_info(const kiln_artifact* artifact, size_t index, kiln_tensor_info* info) {
  KILN_REQUIRE_ARG(artifact, "kiln_artifact_input_info: artifact is NULL");
  return fill_tensor_info(artifact->inputs, index, "input", info);
}

kiln_status kiln_artifact_output_info(const kiln_artifact* artifact, size_t index, kiln_tensor_info* info) {
  KILN_REQUIRE_ARG(artifact, "kiln_artifact_output_info: artifact is NULL");
  return fill_tensor_info(artifact->outputs, index, "output", info);
}

kiln_status kiln_artifact_target_count(const kiln_artifact* artifact, size_t* count) {
  KILN_REQUIRE_ARG(artifact && count, "kiln_artifact_target_count: artifact or count is NULL");
  *count = artifact->targets.size();
  return KILN_OK;
}

kiln_status kiln_artifact_target(const kiln_artifact* artifact, size_t index, const char** target) {
  KILN_REQUIRE_ARG(artifact && target, "kiln_artifact_target: artifact or target is NULL");
  if (index >= artifact->targets.size())
    return bad_argument("target index " + std::to_string(index) + " is out of range (the artifact has " +
                        std::to_string(artifact->targets.size()) + ")");
  *target = artifact->targets[index].c_str();
  return KILN_OK;
}

kiln_status kiln_artifact_format_version(const kiln_artifact* artifact, uint32_t* version) {
  KILN_REQUIRE_ARG(artifact && version, "kiln_artifact_format_version: artifact or version is NULL");
  *version = artifact->loaded->format_version;
  return KILN_OK;
}

kiln_status kiln_artifact_producer(const kiln_artifact* artifact, const char** producer) {
  KILN_REQUIRE_ARG(artifact && producer, "kiln_artifact_producer: artifact or producer is NULL");
  *producer = artifact->loaded->producer.c_str();
  return KILN_OK;
}

kiln_status kiln_artifact_supports_device(const kiln_artifact* artifact, const char* device_id,
                                          int* can_run) {
  KILN_REQUIRE_ARG(artifact && can_run, "kiln_artifact_supports_device: artifact or can_run is NULL");
  return guarded([&]() -> Status {
    Runtime& rt = runtime();
    std::string id = device_id ? device_id : "";
    if (id.empty()) {
      Result<std::string> chosen = rt.registry->default_device(*artifact->loaded);
      if (!chosen.is_ok()) {  // no present device has kernels in the artifact: it cannot run
        *can_run = 0;
        t_last_error = chosen.status().message();
        return Status::ok();
      }
      id = std::move(chosen).value();
    }
    for (const hal::DeviceInfo& d : rt.listing().devices) {
      if (d.id != id) continue;
      bool ok = d.driver == "reference";
      for (const std::string& t : artifact->targets) ok = ok || t == d.driver;
      *can_run = ok ? 1 : 0;
      if (!ok) {
        std::string targets;
        for (const std::string& t : artifact->targets) targets += (targets.empty() ? "" : ", ") + t;
        t_last_error = "the artifact has no " + d.driver + " kernels for device '" + id +
                       "' (it has kernels for: " + (targets.empty() ? std::string("none") : targets) + ")";
      }
      return Status::ok();
    }
    return kiln::not_found("unknown device '" + id + "'");
  });
}

// ---- Sessions -------------------------------------------------------------------------------

kiln_status kiln_session_create(kiln_artifact* artifact, const char* device_id, kiln_session** out) {
  return kiln_session_create_with_options(artifact, device_id, nullptr, 0, out);
}

kiln_status kiln_session_create_with_options(kiln_artifact* artifact, const char* device_id,
                                             const kiln_device_option* options, size_t count,
                                             kiln_session** out) {
  kiln_session_options all;
  kiln_session_options_init(&all);
  all.device_id = device_id;
  all.device_options = options;
  all.device_option_count = count;
  return kiln_session_create_ex(artifact, &all, out);
}

void kiln_session_options_init(kiln_session_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
}

kiln_status kiln_session_create_ex(kiln_artifact* artifact, const kiln_session_options* given,
                                   kiln_session** out) {
  KILN_REQUIRE_ARG(out, "kiln_session_create: out is NULL");
  *out = nullptr;
  KILN_REQUIRE_ARG(artifact, "kiln_session_create: artifact is NULL");
  // The caller's struct as this library knows it: a smaller (older) struct leaves the newer
  // fields at their defaults; a larger (newer) one may not set a field this library lacks.
  kiln_session_options options;
  kiln_session_options_init(&options);
  if (Status read = read_sized_options(given, kSessionOptionsFirstSize, "kiln_session_create_ex", options);
      !read.is_ok())
    return report(read);
  KILN_REQUIRE_ARG(options.device_options || options.device_option_count == 0,
                   "kiln_session_create_with_options: options is NULL");
  hal::DeviceOptions device_options;
  for (size_t i = 0; i < options.device_option_count; ++i) {
    KILN_REQUIRE_ARG(options.device_options[i].key && options.device_options[i].value,
                     "kiln_session_create_with_options: an option's key or value is NULL");
    device_options.set(options.device_options[i].key, options.device_options[i].value);
  }
  kiln::runtime::SessionOptions session_options;
  session_options.native_stream = options.cuda_stream;
  session_options.host_threads = options.threads == KILN_THREADS_ALL ? 0 : std::max<uint32_t>(options.threads, 1);
  if (options.allocator) {
    KILN_REQUIRE_ARG(options.allocator->allocate && options.allocator->deallocate,
                     "kiln_session_create_ex: the allocator's allocate or deallocate function is NULL");
    session_options.memory = hal::MemoryHook{options.allocator->user_data, options.allocator->allocate,
                                             options.allocator->deallocate};
  }
  return guarded([&]() -> Status {
    Runtime& rt = runtime();
    std::string id = options.device_id ? options.device_id : "";
    if (id.empty()) {
      KILN_RETURN_IF_ERROR(rt.registry->check_required_drivers_from_env());
      KILN_ASSIGN_OR_RETURN(id, rt.registry->default_device(*artifact->loaded));
      kiln::runtime::log(kiln::runtime::LogLevel::kInfo, "default device: " + id);
    }
    if (session_options.native_stream && id.rfind("cuda", 0) != 0)
      return kiln::unsupported("device '" + id + "' cannot run on an application's CUDA stream");
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceHolder> device, rt.open(id, device_options));
    auto core = std::make_shared<SessionCore>();
    core->device = device;
    KILN_ASSIGN_OR_RETURN(core->session, Session::create(artifact->loaded, *device->device, session_options));
    kiln::runtime::log(kiln::runtime::LogLevel::kInfo,
                       "session on " + id + " (" + device->device->info().description + ")");
    auto session = std::make_unique<kiln_session>();
    session->core = std::move(core);
    *out = session.release();
    return Status::ok();
  });
}

void kiln_session_destroy(kiln_session* session) {
  // A run in flight is waited for by whoever releases the core last: this handle, or the
  // run's event (which then still reports the run's status).
  delete session;
}

kiln_status kiln_session_device_id(const kiln_session* session, const char** id) {
  KILN_REQUIRE_ARG(session && id, "kiln_session_device_id: session or id is NULL");
  *id = session->core->device->device->info().id.c_str();
  return KILN_OK;
}

kiln_status kiln_session_set_input(kiln_session* session, const char* name, kiln_dtype dtype,
                                   const int64_t* dims, size_t rank, const void* data, size_t bytes) {
  KILN_REQUIRE_ARG(session, "kiln_session_set_input: session is NULL");
  KILN_REQUIRE_ARG(name, "kiln_session_set_input: name is NULL");
  return guarded([&]() -> Status {
    std::optional<ir::DType> d = to_dtype(dtype);
    if (!d) return kiln::invalid_argument("input '" + std::string(name) + "': unknown dtype value " +
                                          std::to_string(int(dtype)));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, read_dims(dims, rank));
    std::lock_guard<std::mutex> lock(session->core->mutex);
    Session& s = *session->core->session;
    // Name, dtype and shape first (clear messages), then the byte count.
    KILN_ASSIGN_OR_RETURN(size_t index, s.input_index(name));
    KILN_RETURN_IF_ERROR(s.check_input(index, *d, shape));
    Result<ir::Tensor> tensor = ir::Tensor::zeros(*d, shape);
    if (!tensor.is_ok()) return tensor.status();
    if (bytes != tensor->size_bytes())
      return kiln::invalid_argument("input '" + std::string(name) + "': " + std::to_string(bytes) +
                                    " bytes given but " + tensor->type().to_string() + " needs " +
                                    std::to_string(tensor->size_bytes()));
    if (bytes > 0 && !data)
      return kiln::invalid_argument("input '" + std::string(name) + "': data is NULL");
    if (bytes > 0) std::memcpy(tensor->mutable_data(), data, bytes);
    KILN_RETURN_IF_ERROR(s.set_input(name, std::move(tensor).value()));
    session->core->bound_inputs.erase(name);
    return Status::ok();
  });
}

kiln_status kiln_session_set_input_buffer(kiln_session* session, const char* name, kiln_dtype dtype,
                                          const int64_t* dims, size_t rank, kiln_buffer* buffer) {
  KILN_REQUIRE_ARG(session, "kiln_session_set_input_buffer: session is NULL");
  KILN_REQUIRE_ARG(name, "kiln_session_set_input_buffer: name is NULL");
  KILN_REQUIRE_ARG(buffer, "kiln_session_set_input_buffer: buffer is NULL");
  return guarded([&]() -> Status {
    std::optional<ir::DType> d = to_dtype(dtype);
    if (!d) return kiln::invalid_argument("input '" + std::string(name) + "': unknown dtype value " +
                                          std::to_string(int(dtype)));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, read_dims(dims, rank));
    SessionCore& core = *session->core;
    if (buffer->core->device != core.device)
      return kiln::invalid_argument("input '" + std::string(name) + "': the buffer belongs to device '" +
                                    buffer->core->device->device->info().id +
                                    "', not to this session's device '" +
                                    core.device->device->info().id + "'");
    std::lock_guard<std::mutex> lock(core.mutex);
    KILN_RETURN_IF_ERROR(core.session->set_input_buffer(name, *d, std::move(shape), *buffer->core->buffer));
    core.bound_inputs[name] = buffer->core;
    return Status::ok();
  });
}

kiln_status kiln_session_set_output_host(kiln_session* session, const char* name, void* data,
                                         size_t capacity) {
  KILN_REQUIRE_ARG(session, "kiln_session_set_output_host: session is NULL");
  KILN_REQUIRE_ARG(name, "kiln_session_set_output_host: name is NULL");
  KILN_REQUIRE_ARG(data, "kiln_session_set_output_host: data is NULL (use kiln_session_reset_output)");
  return guarded([&]() -> Status {
    std::lock_guard<std::mutex> lock(session->core->mutex);
    KILN_RETURN_IF_ERROR(session->core->session->set_output_host(name, data, capacity));
    session->core->bound_outputs.erase(name);
    return Status::ok();
  });
}

kiln_status kiln_session_set_output_buffer(kiln_session* session, const char* name, kiln_buffer* buffer) {
  KILN_REQUIRE_ARG(session, "kiln_session_set_output_buffer: session is NULL");
  KILN_REQUIRE_ARG(name, "kiln_session_set_output_buffer: name is NULL");
  KILN_REQUIRE_ARG(buffer, "kiln_session_set_output_buffer: buffer is NULL");
  return guarded([&]() -> Status {
    SessionCore& core = *session->core;
    if (buffer->core->device != core.device)
      return kiln::invalid_argument("output '" + std::string(name) + "': the buffer belongs to device '" +
                                    buffer->core->device->device->info().id +
                                    "', not to this session's device '" +
                                    core.device->device->info().id + "'");
    std::lock_guard<std::mutex> lock(core.mutex);
    KILN_RETURN_IF_ERROR(core.session->set_output_buffer(name, *buffer->core->buffer));
    core.bound_outputs[name] = buffer->core;
    return Status::ok();
  });
}

kiln_status kiln_session_reset_output(kiln_session* session, const char* name) {
  KILN_REQUIRE_ARG(session, "kiln_session_reset_output: session is NULL");
  KILN_REQUIRE_ARG(name, "kiln_session_reset_output: name is NULL");
  return guarded([&]() -> Status {
    std::lock_guard<std::mutex> lock(session->core->mutex);
    KILN_RETURN_IF_ERROR(session->core->session->reset_output(name));
    session->core->bound_outputs.erase(name);
    return Status::ok();
  });
}

kiln_status kiln_session_run(kiln_session* session) {
  KILN_REQUIRE_ARG(session, "kiln_session_run: session is NULL");
  return guarded([&]() -> Status {
    std::lock_guard<std::mutex> lock(session->core->mutex);
    return session->core->session->run();
  });
}

kiln_status kiln_session_run_async(kiln_session* session, kiln_event** event) {
  KILN_REQUIRE_ARG(event, "kiln_session_run_async: event is NULL");
  *event = nullptr;
  KILN_REQUIRE_ARG(session, "kiln_session_run_async: session is NULL");
  return guarded([&]() -> Status {
    auto ev = std::make_unique<kiln_event>();
    ev->core = session->core;
    std::lock_guard<std::mutex> lock(session->core->mutex);
    KILN_RETURN_IF_ERROR(session->core->session->submit());
    *event = ev.release();
    return Status::ok();
  });
}

kiln_status kiln_event_wait(kiln_event* event) {
  KILN_REQUIRE_ARG(event, "kiln_event_wait: event is NULL");
  return guarded([&]() -> Status {
    if (!event->waited) {
      std::lock_guard<std::mutex> lock(event->core->mutex);
      // At most one run of a session is in flight, and it cannot be followed by another before
      // it is waited, so an in-flight session is running this event's run.
      if (event->core->session && event->core->session->in_flight())
        event->result = event->core->session->wait();
      event->waited = true;
    }
    return event->result;
  });
}

void kiln_event_destroy(kiln_event* event) {
  if (!event) return;
  (void)kiln_event_wait(event);
  delete event;
}

namespace {

// The session's output `name` after a successful run, or an error naming what is missing.
Result<size_t> computed_output(const Session& s, const char* name) {
  KILN_ASSIGN_OR_RETURN(size_t index, s.output_index(name));
  if (index >= s.output_shapes().size() || s.in_flight())
    return kiln::invalid_argument("output '" + std::string(name) +
                                  "' is not computed yet (run the session, and wait for it)");
  return index;
}

Status check_computed(const Session& s, const char* name) {
  Result<size_t> index = computed_output(s, name);
  return index.is_ok() ? Status::ok() : index.status();
}

}  // namespace

kiln_status kiln_session_output_shape(const kiln_session* session, const char* name, int64_t* dims,
                                      size_t max_rank, size_t* rank) {
  KILN_REQUIRE_ARG(session && name && rank, "kiln_session_output_shape: session, name or rank is NULL");
  return guarded([&]() -> Status {
    std::lock_guard<std::mutex> lock(session->core->mutex);
    const Session& s = *session->core->session;
    KILN_ASSIGN_OR_RETURN(size_t index, computed_output(s, name));
    const std::vector<int64_t>& shape = s.output_shapes()[index];
    *rank = shape.size();
    if (max_rank < shape.size() || (!dims && !shape.empty()))
      return kiln::invalid_argument("output '" + std::string(name) + "' has rank " +
                                    std::to_string(shape.size()) + " but room for " +
                                    std::to_string(dims ? max_rank : 0) + " dims was given");
    for (size_t i = 0; i < shape.size(); ++i) dims[i] = shape[i];
    return Status::ok();
  });
}

kiln_status kiln_session_get_output(const kiln_session* session, const char* name, const void** data,
                                    size_t* bytes) {
  KILN_REQUIRE_ARG(session && name && data && bytes,
                   "kiln_session_get_output: session, name, data or bytes is NULL");
  return guarded([&]() -> Status {
    std::lock_guard<std::mutex> lock(session->core->mutex);
    const Session& s = *session->core->session;
    KILN_RETURN_IF_ERROR(check_computed(s, name));
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, s.output(name));
    *data = t.data();  // the session's own tensor shares these bytes
    *bytes = t.size_bytes();
    return Status::ok();
  });
}

kiln_status kiln_session_read_output(const kiln_session* session, const char* name, void* dst,
                                     size_t capacity) {
  KILN_REQUIRE_ARG(session && name, "kiln_session_read_output: session or name is NULL");
  return guarded([&]() -> Status {
    std::lock_guard<std::mutex> lock(session->core->mutex);
    const Session& s = *session->core->session;
    KILN_RETURN_IF_ERROR(check_computed(s, name));
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, s.output(name));
    if (capacity < t.size_bytes())
      return kiln::invalid_argument("output '" + std::string(name) + "' needs " +
                                    std::to_string(t.size_bytes()) + " bytes but the destination holds " +
                                    std::to_string(capacity));
    if (t.size_bytes() > 0 && !dst)
      return kiln::invalid_argument("kiln_session_read_output: dst is NULL");
    if (t.size_bytes() > 0) std::memcpy(dst, t.data(), t.size_bytes());
    return Status::ok();
  });
}

// ---- Profiling ------------------------------------------------------------------------------

kiln_status kiln_session_set_profiling(kiln_session* session, int enabled) {
  KILN_REQUIRE_ARG(session, "kiln_session_set_profiling: session is NULL");
  std::lock_guard<std::mutex> lock(session->core->mutex);
  session->core->session->set_profiling(enabled != 0);
  return KILN_OK;
}

kiln_status kiln_session_profile_count(const kiln_session* session, size_t* count) {
  KILN_REQUIRE_ARG(session && count, "kiln_session_profile_count: session or count is NULL");
  std::lock_guard<std::mutex> lock(session->core->mutex);
  *count = session->core->session->in_flight() ? 0 : session->core->session->last_profile().kernels.size();
  return KILN_OK;
}

kiln_status kiln_session_profile_entry(const kiln_session* session, size_t index, kiln_kernel_time* out) {
  KILN_REQUIRE_ARG(session && out, "kiln_session_profile_entry: session or out is NULL");
  std::lock_guard<std::mutex> lock(session->core->mutex);
  const Session& s = *session->core->session;
  const std::vector<hal::KernelTiming>& kernels = s.last_profile().kernels;
  if (s.in_flight() || index >= kernels.size())
    return bad_argument("profile entry " + std::to_string(index) + " is out of range (the last run has " +
                        std::to_string(s.in_flight() ? 0 : kernels.size()) + ")");
  const hal::KernelTiming& k = kernels[index];
  out->name = k.name.c_str();
  out->kind = k.kind.c_str();
  out->kernel_index = k.kernel_index;
  out->seconds = k.seconds;
  return KILN_OK;
}

kiln_status kiln_session_profile_clock(const kiln_session* session, const char** clock) {
  KILN_REQUIRE_ARG(session && clock, "kiln_session_profile_clock: session or clock is NULL");
  std::lock_guard<std::mutex> lock(session->core->mutex);
  *clock = session->core->session->last_profile().clock.c_str();
  return KILN_OK;
}

// ---- Device buffers -------------------------------------------------------------------------

kiln_status kiln_buffer_create(kiln_session* session, size_t bytes, kiln_buffer** out) {
  KILN_REQUIRE_ARG(out, "kiln_buffer_create: out is NULL");
  *out = nullptr;
  KILN_REQUIRE_ARG(session, "kiln_buffer_create: session is NULL");
  // From the session's allocator when it has one.
  Session& owner = *session->core->session;
  return new_buffer(session, out, [&](hal::Device&) { return owner.allocate(bytes); });
}

kiln_status kiln_buffer_wrap_native(kiln_session* session, void* native, size_t bytes, kiln_buffer** out) {
  KILN_REQUIRE_ARG(out, "kiln_buffer_wrap_native: out is NULL");
  *out = nullptr;
  KILN_REQUIRE_ARG(session, "kiln_buffer_wrap_native: session is NULL");
  KILN_REQUIRE_ARG(native, "kiln_buffer_wrap_native: native is NULL");
  return new_buffer(session, out, [&](hal::Device& device) { return device.wrap_native(native, bytes); });
}

void kiln_buffer_destroy(kiln_buffer* buffer) { delete buffer; }

kiln_status kiln_buffer_size(const kiln_buffer* buffer, size_t* bytes) {
  KILN_REQUIRE_ARG(buffer && bytes, "kiln_buffer_size: buffer or bytes is NULL");
  *bytes = buffer->core->buffer->size();
  return KILN_OK;
}

kiln_status kiln_buffer_write(kiln_buffer* buffer, size_t offset, const void* data, size_t bytes) {
  KILN_REQUIRE_ARG(buffer, "kiln_buffer_write: buffer is NULL");
  KILN_REQUIRE_ARG(data || bytes == 0, "kiln_buffer_write: data is NULL");
  return guarded([&]() -> Status {
    return buffer->core->buffer->write(offset, std::span<const std::byte>(static_cast<const std::byte*>(data), bytes));
  });
}

kiln_status kiln_buffer_read(const kiln_buffer* buffer, size_t offset, void* data, size_t bytes) {
  KILN_REQUIRE_ARG(buffer, "kiln_buffer_read: buffer is NULL");
  KILN_REQUIRE_ARG(data || bytes == 0, "kiln_buffer_read: data is NULL");
  return guarded([&]() -> Status {
    return buffer->core->buffer->read(offset, std::span<std::byte>(static_cast<std::byte*>(data), bytes));
  });
}

}  // extern "C"
