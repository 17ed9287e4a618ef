// kiln._kiln: the Python extension behind the `kiln` package (python/kiln/__init__.py).
//
// Compiling goes through kiln::compiler (compiler/compile.h), in-process; loading and running
// go through the runtime's public C API (kiln/runtime.h), as any application would. Every C API
// failure raises kiln.KilnError with the runtime's message; compile errors raise
// kiln.CompileError with every diagnostic, one per line.
//
// Ownership: an Artifact owns its C handle (shared with the Sessions made from it) and the
// artifact's bytes (for save()). A Session owns its C session; arrays passed to run() are used
// only during the call (host arrays are copied in; device arrays are used in place and must
// not be written by other work until run() returns). Thread-safety: the GIL is released while
// compiling and running, so sessions can run in parallel from Python threads; one Session must
// not be used by two threads at once (the C API's rule).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

struct KilnError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(kiln_status status) {
  if (status != KILN_OK) throw KilnError(std::string(kiln_status_name(status)) + ": " + kiln_last_error_message());
}

// ---- dtypes: Kiln's and DLPack's (nanobind's) ----------------------------------------------

nb::dlpack::dtype dlpack_dtype(kiln_dtype d) {
  using nb::dlpack::dtype_code;
  switch (d) {
    case KILN_DTYPE_F32: return {uint8_t(dtype_code::Float), 32, 1};
    case KILN_DTYPE_F16: return {uint8_t(dtype_code::Float), 16, 1};
    case KILN_DTYPE_BF16: return {uint8_t(dtype_code::Bfloat), 16, 1};
    case KILN_DTYPE_I64: return {uint8_t(dtype_code::Int), 64, 1};
    case KILN_DTYPE_I32: return {uint8_t(dtype_code::Int), 32, 1};
    case KILN_DTYPE_I8: return {uint8_t(dtype_code::Int), 8, 1};
    case KILN_DTYPE_U8: return {uint8_t(dtype_code::UInt), 8, 1};
    case KILN_DTYPE_BOOL: return {uint8_t(dtype_code::Bool), 8, 1};
    case KILN_DTYPE_I16: return {uint8_t(dtype_code::Int), 16, 1};
    case KILN_DTYPE_U16: return {uint8_t(dtype_code::UInt), 16, 1};
    case KILN_DTYPE_U32: return {uint8_t(dtype_code::UInt), 32, 1};
    case KILN_DTYPE_F64: return {uint8_t(dtype_code::Float), 64, 1};
    // NumPy has no 8-bit floats: their arrays are uint8 holding the bits (an ml_dtypes array's
    // .view(numpy.uint8), and back with .view(ml_dtypes.float8_e4m3fn) and so on).
    case KILN_DTYPE_F8E4M3FN: case KILN_DTYPE_F8E4M3FNUZ: case KILN_DTYPE_F8E5M2: case KILN_DTYPE_F8E5M2FNUZ:
      return {uint8_t(dtype_code::UInt), 8, 1};
  }
  throw KilnError("INTERNAL: unknown kiln dtype");
}

bool same_dtype(nb::dlpack::dtype a, nb::dlpack::dtype b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

std::string dtype_text(nb::dlpack::dtype d) {
  using nb::dlpack::dtype_code;
  const char* kind = d.code == uint8_t(dtype_code::Float) ? "float" : d.code == uint8_t(dtype_code::Int) ? "int"
                     : d.code == uint8_t(dtype_code::UInt) ? "uint" : d.code == uint8_t(dtype_code::Bfloat) ? "bfloat"
                     : d.code == uint8_t(dtype_code::Bool) ? "bool" : "other";
  return std::string(kind) + std::to_string(d.bits);
}

// ---- Artifacts --------------------------------------------------------------------------------

struct TensorInfo {
  std::string name;
  std::string dtype;  // kiln_dtype_name(code), as Python sees it
  kiln_dtype code;
  nb::tuple shape;  // ints, and str for symbolic dims
  std::string repr() const {
    std::string s = "TensorInfo(name='" + name + "', dtype='" + dtype + "', shape=(";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::string(nb::repr(shape[i]).c_str());
    return s + (shape.size() == 1 ? ",))" : "))");
  }
};

TensorInfo tensor_info(const kiln_tensor_info& info) {
  nb::list dims;
  for (size_t d = 0; d < info.rank; ++d) {
    if (info.dims[d] < 0) dims.append(nb::str(info.dim_symbols[d]));
    else dims.append(nb::int_(info.dims[d]));
  }
  return {info.name, kiln_dtype_name(info.dtype), info.dtype, nb::tuple(dims)};
}

class Artifact {
 public:
  // `trusted_keys`: public key texts; when any, only an artifact one of them signed loads.
  explicit Artifact(std::vector<uint8_t> bytes, const std::vector<std::string>& trusted_keys = {})
      : bytes_(std::move(bytes)) {
    std::vector<const char*> keys;
    for (const std::string& k : trusted_keys) keys.push_back(k.c_str());
    kiln_artifact_options options;
    kiln_artifact_options_init(&options);
    options.trusted_keys = keys.data();
    options.trusted_key_count = keys.size();
    kiln_artifact* handle = nullptr;
    check(kiln_artifact_load_memory_ex(bytes_.data(), bytes_.size(), &options, &handle));
    handle_.reset(handle, kiln_artifact_destroy);
  }
  kiln_artifact* handle() const { return handle_.get(); }
  std::shared_ptr<kiln_artifact> shared() const { return handle_; }

  std::vector<TensorInfo> inputs() const { return signature(kiln_artifact_input_count, kiln_artifact_input_info); }
  std::vector<TensorInfo> outputs() const { return signature(kiln_artifact_output_count, kiln_artifact_output_info); }
  std::vector<std::string> targets() const {
    size_t n = 0;
    check(kiln_artifact_target_count(handle(), &n));
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
      const char* t = nullptr;
      check(kiln_artifact_target(handle(), i, &t));
      out.emplace_back(t);
    }
    return out;
  }
  void save(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes_.data()), std::streamsize(bytes_.size()));
    out.close();
    if (!out) throw KilnError("NOT_FOUND: cannot write '" + path + "'");
  }
  // The signer's public key (hex), or None for an unsigned artifact.
  std::optional<std::string> signer() const {
    const char* hex = nullptr;
    check(kiln_artifact_signer(handle(), &hex, nullptr));
    return hex ? std::optional<std::string>(hex) : std::nullopt;
  }
  bool signature_verified() const {
    const char* hex = nullptr;
    int verified = 0;
    check(kiln_artifact_signer(handle(), &hex, &verified));
    return verified != 0;
  }
  nb::bytes to_bytes() const { return nb::bytes(reinterpret_cast<const char*>(bytes_.data()), bytes_.size()); }

 private:
  template <class Count, class Info>
  std::vector<TensorInfo> signature(Count count, Info info) const {
    size_t n = 0;
    check(count(handle(), &n));
    std::vector<TensorInfo> out;
    for (size_t i = 0; i < n; ++i) {
      kiln_tensor_info t;
      check(info(handle(), i, &t));
      out.push_back(tensor_info(t));
    }
    return out;
  }
  std::vector<uint8_t> bytes_;
  std::shared_ptr<kiln_artifact> handle_;
};

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw KilnError("NOT_FOUND: cannot open '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  return std::vector<uint8_t>(text.begin(), text.end());
}

Artifact load_file(const std::string& path, const std::vector<std::string>& trusted_keys) {
  return Artifact(read_file(path), trusted_keys);
}
Artifact load_bytes(nb::bytes data, const std::vector<std::string>& trusted_keys) {
  const auto* p = static_cast<const uint8_t*>(data.data());
  return Artifact(std::vector<uint8_t>(p, p + data.size()), trusted_keys);
}

// ---- Compiling --------------------------------------------------------------------------------

kiln::compiler::CompileOptions compile_options(std::optional<std::vector<std::string>> targets, int opt_level,
                                               std::vector<std::string> gpu_archs, std::string cpu, int jobs,
                                               bool cache) {
  if (opt_level < 0 || opt_level > 2) throw nb::value_error("opt_level must be 0, 1 or 2");
  if (jobs < 0) throw nb::value_error("jobs must be 0 (every core) or more");
  kiln::compiler::CompileOptions options;
  options.targets = std::move(targets);
  options.opt_level = opt_level;
  options.gpu_archs = std::move(gpu_archs);
  options.cpu = std::move(cpu);
  options.jobs = jobs;
  options.use_cache = cache;
  return options;
}

// Runs `read` then the compile with the GIL released; raises CompileError with the diagnostics.
template <class Read>
Artifact compile_with(Read read, const kiln::compiler::CompileOptions& options) {
  kiln::Diagnostics diags(/*limit=*/100);
  std::optional<kiln::Result<std::vector<uint8_t>>> bytes;
  {
    nb::gil_scoped_release unlocked;
    kiln::Result<kiln::ir::Graph> graph = read(diags);
    if (graph.is_ok() && !diags.has_errors()) bytes.emplace(kiln::compiler::compile_to_artifact(std::move(graph).value(), options, diags));
    else if (!graph.is_ok()) bytes.emplace(graph.status());
  }
  if (diags.has_errors()) throw CompileError(diags.to_string());
  if (!bytes || !bytes->is_ok()) throw CompileError(bytes ? bytes->status().to_string() : "the source has errors");
  return Artifact(std::move(**bytes));
}

Artifact compile_file(const std::string& path, std::optional<std::vector<std::string>> targets, int opt_level,
                      std::vector<std::string> gpu_archs, std::string cpu, int jobs, bool cache) {
  return compile_with([&](kiln::Diagnostics& d) { return kiln::compiler::read_source_file(path, d); },
                      compile_options(std::move(targets), opt_level, std::move(gpu_archs), std::move(cpu), jobs, cache));
}

Artifact compile_graph_text(const std::string& text, const std::string& base_dir,
                            std::optional<std::vector<std::string>> targets, int opt_level,
                            std::vector<std::string> gpu_archs, std::string cpu, int jobs, bool cache) {
  return compile_with([&](kiln::Diagnostics& d) { return kiln::compiler::read_graph_text(text, "<string>", base_dir, d); },
                      compile_options(std::move(targets), opt_level, std::move(gpu_archs), std::move(cpu), jobs, cache));
}

Artifact compile_onnx_bytes(nb::bytes model, const std::string& base_dir,
                            std::optional<std::vector<std::string>> targets, int opt_level,
                            std::vector<std::string> gpu_archs, std::string cpu, int jobs, bool cache) {
  const std::string copy(model.c_str(), model.size());
  return compile_with([&](kiln::Diagnostics& d) {
                        return kiln::compiler::read_onnx_bytes(std::as_bytes(std::span(copy.data(), copy.size())),
                                                               "<bytes>", base_dir, d);
                      },
                      compile_options(std::move(targets), opt_level, std::move(gpu_archs), std::move(cpu), jobs, cache));
}

// ---- Devices ------------------------------------------------------------------------------------

std::vector<std::string> devices() {
  size_t n = 0;
  check(kiln_device_count(&n));
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) {
    kiln_device_info info;
    check(kiln_device_get_info(i, &info));
    ids.emplace_back(info.id);
  }
  return ids;
}

nb::list device_info() {
  size_t n = 0;
  check(kiln_device_count(&n));
  nb::list out;
  for (size_t i = 0; i < n; ++i) {
    kiln_device_info info;
    check(kiln_device_get_info(i, &info));
    nb::dict d;
    d["id"] = info.id;
    d["driver"] = info.driver;
    d["type"] = info.type_name;
    d["description"] = info.description;
    out.append(d);
  }
  return out;
}

// ---- Sessions -----------------------------------------------------------------------------------

struct KernelTime {
  std::string name, kind;
  uint32_t kernel_index;
  double seconds;
};

using AnyArray = nb::ndarray<nb::c_contig>;

class Session {
 public:
  Session(const Artifact& artifact, std::optional<std::string> device,
          std::vector<std::pair<std::string, std::string>> device_options, int64_t threads, uintptr_t cuda_stream)
      : artifact_(artifact.shared()), inputs_(artifact.inputs()), outputs_(artifact.outputs()) {
    if (threads < 0) throw nb::value_error("threads must be 0 (one per core) or more");
    std::vector<kiln_device_option> pairs;
    for (const auto& [k, v] : device_options) pairs.push_back({k.c_str(), v.c_str()});
    kiln_session_options options;
    kiln_session_options_init(&options);
    options.device_id = device ? device->c_str() : nullptr;
    options.device_options = pairs.data();
    options.device_option_count = pairs.size();
    options.threads = threads == 0 ? KILN_THREADS_ALL : uint32_t(std::min<int64_t>(threads, 1 << 16));
    options.cuda_stream = reinterpret_cast<void*>(cuda_stream);
    kiln_session* s = nullptr;
    check(kiln_session_create_ex(artifact_.get(), &options, &s));
    session_.reset(s, kiln_session_destroy);
    const char* id = nullptr;
    check(kiln_session_device_id(s, &id));
    device_ = id;
  }

  const std::string& device() const { return device_; }

  // Binds `inputs`, runs, returns every output (host outputs as new NumPy arrays; outputs the
  // caller passed in `out` are written in place and returned as given).
  nb::dict run(nb::dict inputs, std::optional<nb::dict> out, bool profile) {
    check(kiln_session_set_profiling(session_.get(), profile ? 1 : 0));
    std::vector<std::unique_ptr<kiln_buffer, void (*)(kiln_buffer*)>> wrapped;
    auto wrap = [&](const AnyArray& a, const std::string& what) -> kiln_buffer* {
      if (device_.rfind("cuda:", 0) != 0 || device_ != "cuda:" + std::to_string(a.device_id()))
        throw nb::value_error((what + " is on a CUDA device but the session runs on " + device_).c_str());
      kiln_buffer* b = nullptr;
      check(kiln_buffer_wrap_native(session_.get(), a.data(), a.nbytes(), &b));
      wrapped.emplace_back(b, kiln_buffer_destroy);
      return b;
    };
    for (auto [key, value] : inputs) {
      const std::string name = nb::cast<std::string>(key);
      const TensorInfo& spec = input_spec(name);
      AnyArray a;
      if (!nb::try_cast(value, a))
        throw nb::type_error(("input '" + name + "' must be an array (NumPy, DLPack), not " +
                              std::string(nb::type_name(value.type()).c_str())).c_str());
      const std::vector<int64_t> dims = shape_of(a);
      const kiln_dtype dtype = dtype_for(a.dtype(), spec, "input '" + name + "'");
      if (a.device_type() == nb::device::cuda::value) {
        check(kiln_session_set_input_buffer(session_.get(), name.c_str(), dtype, dims.data(), dims.size(),
                                            wrap(a, "input '" + name + "'")));
      } else if (a.device_type() == nb::device::cpu::value) {
        check(kiln_session_set_input(session_.get(), name.c_str(), dtype, dims.data(), dims.size(), a.data(),
                                     a.nbytes()));
      } else {
        throw nb::value_error(("input '" + name + "' is on a device Kiln cannot read (DLPack device type " +
                               std::to_string(a.device_type()) + ")").c_str());
      }
    }
    std::vector<std::string> bound_out;
    if (out) {
      for (auto [key, value] : *out) {
        const std::string name = nb::cast<std::string>(key);
        const TensorInfo& spec = output_spec(name);
        AnyArray a;
        if (!nb::try_cast(value, a) || a.is_valid() == false)
          throw nb::type_error(("out['" + name + "'] must be a contiguous writable array").c_str());
        (void)dtype_for(a.dtype(), spec, "out['" + name + "']");
        if (a.device_type() == nb::device::cuda::value) {
          check(kiln_session_set_output_buffer(session_.get(), name.c_str(), wrap(a, "out['" + name + "']")));
        } else {
          check(kiln_session_set_output_host(session_.get(), name.c_str(), a.data(), a.nbytes()));
        }
        bound_out.push_back(name);
      }
    }
    kiln_status status;
    {
      nb::gil_scoped_release unlocked;
      status = kiln_session_run(session_.get());
    }
    // Caller arrays are bound only for this call.
    for (const std::string& name : bound_out) (void)kiln_session_reset_output(session_.get(), name.c_str());
    check(status);
    nb::dict results;
    for (const TensorInfo& spec : outputs_) {
      if (out && out->contains(spec.name.c_str())) {
        results[spec.name.c_str()] = (*out)[spec.name.c_str()];
        continue;
      }
      results[spec.name.c_str()] = host_output(spec);
    }
    return results;
  }

  std::vector<KernelTime> profile() const {
    size_t n = 0;
    check(kiln_session_profile_count(session_.get(), &n));
    std::vector<KernelTime> out;
    for (size_t i = 0; i < n; ++i) {
      kiln_kernel_time t;
      check(kiln_session_profile_entry(session_.get(), i, &t));
      out.push_back({t.name, t.kind, t.kernel_index, t.seconds});
    }
    return out;
  }
  std::string profile_clock() const {
    const char* clock = nullptr;
    check(kiln_session_profile_clock(session_.get(), &clock));
    return clock;
  }

 private:
  const TensorInfo& input_spec(const std::string& name) const { return spec_in(inputs_, name, "input"); }
  const TensorInfo& output_spec(const std::string& name) const { return spec_in(outputs_, name, "output"); }
  static const TensorInfo& spec_in(const std::vector<TensorInfo>& specs, const std::string& name, const char* what) {
    std::string names;
    for (const TensorInfo& s : specs) {
      if (s.name == name) return s;
      names += (names.empty() ? "'" : ", '") + s.name + "'";
    }
    throw nb::key_error(("the artifact has no " + std::string(what) + " named '" + name + "' (its " + what +
                         "s: " + (names.empty() ? "none" : names) + ")").c_str());
  }
  static std::vector<int64_t> shape_of(const AnyArray& a) {
    std::vector<int64_t> dims(a.ndim());
    for (size_t d = 0; d < a.ndim(); ++d) dims[d] = a.shape(d);
    return dims;
  }
  static kiln_dtype dtype_for(nb::dlpack::dtype given, const TensorInfo& spec, const std::string& what) {
    if (!same_dtype(given, dlpack_dtype(spec.code)))
      throw nb::type_error((what + " must have dtype " + spec.dtype + ", not " + dtype_text(given)).c_str());
    return spec.code;
  }
  nb::object host_output(const TensorInfo& spec) const {
    std::vector<int64_t> dims(spec.shape.size());  // the artifact's rank for this output
    size_t rank = 0;
    check(kiln_session_output_shape(session_.get(), spec.name.c_str(), dims.data(), dims.size(), &rank));
    const void* data = nullptr;
    size_t bytes = 0;
    check(kiln_session_get_output(session_.get(), spec.name.c_str(), &data, &bytes));
    auto* copy = new uint8_t[bytes ? bytes : 1];
    std::memcpy(copy, data, bytes);
    nb::capsule owner(copy, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
    std::vector<size_t> shape(dims.begin(), dims.begin() + rank);
    return nb::cast(nb::ndarray<nb::numpy>(copy, rank, shape.data(), owner, nullptr, dlpack_dtype(spec.code)));
  }

  std::shared_ptr<kiln_artifact> artifact_;  // kept alive for the session (the C API allows either order)
  std::shared_ptr<kiln_session> session_;
  std::vector<TensorInfo> inputs_, outputs_;
  std::string device_;
};

}  // namespace

NB_MODULE(_kiln, m) {
  m.doc() = "Kiln's compiler and runtime (the extension behind the kiln package)";
  nb::exception<KilnError>(m, "KilnError", PyExc_RuntimeError);
  nb::exception<CompileError>(m, "CompileError", PyExc_ValueError);

  m.def("runtime_version", [] { return std::string(kiln_runtime_version()); });
  m.def("build_targets", [] { return kiln::compiler::build_targets(); },
        "The code-generation targets this build has (cuda, vulkan, opencl).");
  m.def("devices", &devices, "Device ids, fastest first (the default device is the first that an artifact has code for).");
  m.def("device_info", &device_info, "One dict per device: id, driver, type, description.");

  nb::class_<TensorInfo>(m, "TensorInfo", "An input or output of an artifact.")
      .def_ro("name", &TensorInfo::name)
      .def_ro("dtype", &TensorInfo::dtype, "Kiln's dtype name: f32, f16, bf16, i64, i32, i8, u8, bool, f8e4m3fn, f8e4m3fnuz, f8e5m2 or "
              "f8e5m2fnuz (8-bit floats are passed as uint8 arrays of their bits).")
      .def_ro("shape", &TensorInfo::shape, "Sizes: int for static dims, str (the symbol) for symbolic ones.")
      .def("__repr__", &TensorInfo::repr);

  nb::class_<Artifact>(m, "Artifact", "A compiled model (.kiln).")
      .def_prop_ro("inputs", &Artifact::inputs)
      .def_prop_ro("outputs", &Artifact::outputs)
      .def_prop_ro("targets", &Artifact::targets, "The targets it has kernels for.")
      .def_prop_ro("signer", &Artifact::signer,
                   "The public key (hex) that signed it (kilnc --sign), or None when unsigned.")
      .def_prop_ro("signature_verified", &Artifact::signature_verified,
                   "True when it was loaded with trusted_keys (its signature was then checked).")
      .def("save", &Artifact::save, "path"_a, "Writes the artifact to a .kiln file.")
      .def("to_bytes", &Artifact::to_bytes, "The artifact's bytes.");

  m.def("_load_file", &load_file, "path"_a, "trusted_keys"_a);
  m.def("_load_bytes", &load_bytes, "data"_a, "trusted_keys"_a);
  m.def("_compile_file", &compile_file, "path"_a, "targets"_a.none(), "opt_level"_a, "gpu_archs"_a, "cpu"_a,
        "jobs"_a, "cache"_a);
  m.def("_compile_graph_text", &compile_graph_text, "text"_a, "base_dir"_a, "targets"_a.none(), "opt_level"_a,
        "gpu_archs"_a, "cpu"_a, "jobs"_a, "cache"_a);
  m.def("_compile_onnx_bytes", &compile_onnx_bytes, "model"_a, "base_dir"_a, "targets"_a.none(), "opt_level"_a,
        "gpu_archs"_a, "cpu"_a, "jobs"_a, "cache"_a);

  nb::class_<KernelTime>(m, "KernelTime", "One kernel's time in a profiled run.")
      .def_ro("name", &KernelTime::name)
      .def_ro("kind", &KernelTime::kind)
      .def_ro("kernel_index", &KernelTime::kernel_index)
      .def_ro("seconds", &KernelTime::seconds)
      .def("__repr__", [](const KernelTime& t) {
        return "KernelTime(name='" + t.name + "', kind='" + t.kind + "', seconds=" + std::to_string(t.seconds) + ")";
      });

  nb::class_<Session>(m, "Session", "Runs an artifact on one device.")
      .def(nb::init<const Artifact&, std::optional<std::string>, std::vector<std::pair<std::string, std::string>>,
                    int64_t, uintptr_t>(),
           "artifact"_a, "device"_a.none() = nb::none(),
           "device_options"_a = std::vector<std::pair<std::string, std::string>>(), "threads"_a = 1,
           "cuda_stream"_a = 0,
           "Creates a session. device: an id from kiln.devices() (None: the default device). "
           "device_options: (key, value) pairs such as ('cuda.graphs', 'off'). threads: host threads "
           "for work run on the host (the reference interpreter); 0: one per core. cuda_stream: a CUDA "
           "stream handle (e.g. torch.cuda.current_stream().cuda_stream) to run on, ordered with the "
           "application's work on it; 0: the session's own stream.")
      .def_prop_ro("device", &Session::device, "The id of the device it runs on.")
      .def("run", &Session::run, "inputs"_a, "out"_a.none() = nb::none(), "profile"_a = false,
           "Runs once. inputs: name -> array (NumPy or any DLPack array, host or, on a CUDA session, "
           "the same CUDA device); out: optional name -> preallocated array written in place. Returns "
           "name -> array for every output.")
      .def_prop_ro("profile", &Session::profile, "Per-kernel times of the last run(profile=True).")
      .def_prop_ro("profile_clock", &Session::profile_clock, "'device' or 'host': what the times measure.");
}
