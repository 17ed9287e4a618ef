// kiln-bench: times any compiled Kiln artifact on one device through the public C API only.
//
//   kiln-bench ARTIFACT.kiln [--device=ID] [--dim SYM=N ...] [--input NAME=FILE.npy ...]
//              [--seed=S] [--warmup=N] [--warmup-ms=T] [--reps=R] [--runs-per-rep=K]
//              [--rep-ms=T] [--sync] [--profile=P] [--dump-dir=DIR] [--json=FILE]
//              [--env NAME=VALUE ...]
//
// What it measures. Inputs and outputs are bound as DEVICE buffers (kiln_buffer_create, written
// once before timing), so no host transfer is inside the timed region: a run is the artifact's
// launches plus the host's wait for their completion. After warm-up (at least --warmup runs and
// --warmup-ms of running, so module loading, CUDA-graph capture and allocator growth stay out),
// it times R repetitions of K back-to-back runs with the host's steady clock and reports the
// median, minimum and 90th percentile of the per-run time (rep time / K). Each run is
// kiln_session_run_async + kiln_event_wait (--sync: kiln_session_run); the API allows one run in
// flight per session, so every run includes one host wait, as an application's would. K defaults
// to what fills --rep-ms (20 ms) at the warm-up rate.
//
// Load time is reported too: reading the artifact, creating the session (modules, programs,
// constant upload), binding the buffers and the first run, and their sum, the time from
// kiln_artifact_load_file to the first result; once in the fresh process (the device's driver
// starting included) and once more, from the file again, while the first session keeps the
// device open, as a service loading a model sees it (the "reload_" keys of the JSON).
//
// --profile=P then runs P more times with kiln_session_set_profiling on and reports each
// kernel's median time and the median per-run sum (the device's busy time, from device timers
// where the driver has them; the JSON says which clock).
//
// Inputs not given with --input are seeded random values (floats uniform in [-1, 1), integers in
// [0, 4) so they are valid gather indices, bools 0/1), never zeros. Symbolic dims come from
// --input files' shapes or --dim. Before the first run every output buffer is poisoned with 0xFF
// bytes (NaN for floats), so an element a kernel fails to write shows up in a check. --dump-dir
// writes every input and every output of that first run as DIR/NAME.npy (bf16 as raw '<u2').
//
// --env NAME=VALUE sets an environment variable before the runtime is first used: a pass-through
// for runtime switches read from the environment (e.g. one that turns CUDA graphs off).
//
// Prints a human summary on stdout; --json writes the same numbers as one JSON object.
// Exit status 0 on success, 1 on any error (the message names the failing call).
#include <kiln/runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: kiln-bench ARTIFACT.kiln [options]\n"
    "  --device=ID          device id (cuda:0, vulkan:0, opencl:0, reference); default: the fastest\n"
    "  --dim SYM=N          size of a symbolic dimension (repeatable)\n"
    "  --input NAME=F.npy   take an input from a .npy file instead of random values (repeatable)\n"
    "  --seed=S             seed of the random inputs (default 0)\n"
    "  --warmup=N           at least N warm-up runs (default 10)\n"
    "  --warmup-ms=T        and at least T ms of warm-up (default 200)\n"
    "  --reps=R             timed repetitions (default 30)\n"
    "  --runs-per-rep=K     runs per repetition (default: enough to fill --rep-ms)\n"
    "  --rep-ms=T           target length of one repetition when K is automatic (default 20)\n"
    "  --sync               run with kiln_session_run instead of run_async + event wait\n"
    "  --profile=P          P extra runs with per-kernel profiling (default 0: none)\n"
    "  --dump-dir=DIR       write inputs and first-run outputs as DIR/NAME.npy\n"
    "  --json=FILE          write the results as JSON\n"
    "  --env NAME=VALUE     set an environment variable before the runtime starts (repeatable)\n";

struct Options {
  std::string artifact;
  std::string device;
  std::vector<std::pair<std::string, int64_t>> dims;
  std::vector<std::pair<std::string, std::string>> input_files;
  std::vector<std::pair<std::string, std::string>> env;
  uint64_t seed = 0;
  int64_t warmup_runs = 10;
  double warmup_ms = 200;
  int64_t reps = 30;
  int64_t runs_per_rep = 0;  // 0: automatic
  double rep_ms = 20;
  bool sync = false;
  int64_t profile_runs = 0;
  std::string dump_dir;
  std::string json_path;
};

// Every failure becomes this exception, caught once in main: the message names what failed.
struct BenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(kiln_status status, const std::string& what) {
  if (status != KILN_OK)
    throw BenchError(what + ": " + kiln_status_name(status) + ": " + kiln_last_error_message());
}

// ---- Command line ------------------------------------------------------------------------------

std::pair<std::string, std::string> split_pair(const std::string& text, const std::string& option) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw BenchError(option + " expects NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

int64_t parse_int(const std::string& text, const std::string& option) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0)
    throw BenchError(option + " expects a non-negative integer, got '" + text + "'");
  return value;
}

double parse_double(const std::string& text, const std::string& option) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value >= 0))
    throw BenchError(option + " expects a non-negative number, got '" + text + "'");
  return value;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) {
      if (!o.artifact.empty()) throw BenchError("more than one artifact given: '" + arg + "'");
      o.artifact = arg;
      continue;
    }
    // --opt=V or --opt V
    std::string name = arg, value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    auto take_value = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) throw BenchError(name + " needs a value");
      return argv[++i];
    };
    if (name == "--sync") {
      o.sync = true;
    } else if (name == "--device") {
      o.device = take_value();
    } else if (name == "--dim") {
      auto [symbol, size] = split_pair(take_value(), name);
      o.dims.emplace_back(symbol, parse_int(size, name));
    } else if (name == "--input") {
      o.input_files.push_back(split_pair(take_value(), name));
    } else if (name == "--env") {
      o.env.push_back(split_pair(take_value(), name));
    } else if (name == "--seed") {
      o.seed = uint64_t(parse_int(take_value(), name));
    } else if (name == "--warmup") {
      o.warmup_runs = parse_int(take_value(), name);
    } else if (name == "--warmup-ms") {
      o.warmup_ms = parse_double(take_value(), name);
    } else if (name == "--reps") {
      o.reps = std::max<int64_t>(1, parse_int(take_value(), name));
    } else if (name == "--runs-per-rep") {
      o.runs_per_rep = parse_int(take_value(), name);
    } else if (name == "--rep-ms") {
      o.rep_ms = parse_double(take_value(), name);
    } else if (name == "--profile") {
      o.profile_runs = parse_int(take_value(), name);
    } else if (name == "--dump-dir") {
      o.dump_dir = take_value();
    } else if (name == "--json") {
      o.json_path = take_value();
    } else {
      throw BenchError("unknown option '" + arg + "'\n" + kUsage);
    }
  }
  if (o.artifact.empty()) throw BenchError(std::string("no artifact given\n") + kUsage);
  return o;
}

// ---- Numbers -----------------------------------------------------------------------------------

// IEEE binary16 bits of `value`, rounded to nearest even (overflow to inf, subnormals kept).
uint16_t float_to_half_bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {                                   // below 2^-14: subnormal or zero
    if (abs < 0x33000000u) return uint16_t(sign);            // below half the smallest subnormal
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(abs >> 23);  // 14 - unbiased exponent, plus 13
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = ((abs >> 13) - (112u << 10));  // rebias the exponent 127 -> 15
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return uint16_t(sign | half);
}

uint16_t float_to_bf16_bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);                                          // nearest even
  return uint16_t(x >> 16);
}

// splitmix64: small, seedable, and good enough for benchmark inputs.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform_pm1() { return float(double(next() >> 11) * 0x1.0p-53 * 2.0 - 1.0); }
};

void fill_random(std::vector<uint8_t>& bytes, kiln_dtype dtype, uint64_t seed) {
  Random rng{seed};
  const size_t n = bytes.size() / kiln_dtype_size(dtype);
  uint8_t* p = bytes.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case KILN_DTYPE_F32: {
        const float v = rng.uniform_pm1();
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case KILN_DTYPE_F16: {
        const uint16_t v = float_to_half_bits(rng.uniform_pm1());
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
      case KILN_DTYPE_BF16: {
        const uint16_t v = float_to_bf16_bits(rng.uniform_pm1());
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
      case KILN_DTYPE_I64: {
        const int64_t v = int64_t(rng.next() % 4);
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
      case KILN_DTYPE_I32: {
        const int32_t v = int32_t(rng.next() % 4);
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case KILN_DTYPE_I8:
      case KILN_DTYPE_U8:
        p[i] = uint8_t(rng.next() % 4);
        break;
      case KILN_DTYPE_BOOL:
        p[i] = uint8_t(rng.next() & 1u);
        break;
    }
  }
}

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double percentile_of(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - double(lo)) * (v[hi] - v[lo]);
}

// ---- .npy files --------------------------------------------------------------------------------

const char* npy_descr(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_DTYPE_F32: return "<f4";
    case KILN_DTYPE_F16: return "<f2";
    case KILN_DTYPE_BF16: return "<u2";  // NumPy has no bfloat16: the raw bits
    case KILN_DTYPE_I64: return "<i8";
    case KILN_DTYPE_I32: return "<i4";
    case KILN_DTYPE_I8: return "|i1";
    case KILN_DTYPE_U8: return "|u1";
    case KILN_DTYPE_BOOL: return "|b1";
  }
  return "?";
}

void write_npy(const std::string& path, kiln_dtype dtype, const std::vector<int64_t>& dims,
               const std::vector<uint8_t>& bytes) {
  std::string shape = "(";
  for (size_t i = 0; i < dims.size(); ++i) shape += (i ? ", " : "") + std::to_string(dims[i]);
  shape += dims.size() == 1 ? ",)" : ")";  // a 1-tuple is "(5,)" in Python
  std::string header =
      std::string("{'descr': '") + npy_descr(dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Version 1.0: magic (6) + version (2) + length (2) + header, padded with spaces to 64 bytes,
  // ending in a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw BenchError("cannot write '" + path + "'");
  const uint16_t header_len = uint16_t(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&header_len), 2);  // little-endian hosts only
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) throw BenchError("error writing '" + path + "'");
}

struct NpyArray {
  std::string descr;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

// Reads a C-order, little-endian .npy file (format versions 1, 2 and 3).
NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BenchError("cannot open '" + path + "'");
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw BenchError("'" + path + "' is not a .npy file");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t len16 = 0;
    in.read(reinterpret_cast<char*>(&len16), 2);
    header_len = len16;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) throw BenchError("'" + path + "': truncated header");
  auto field = [&](const std::string& key) -> std::string {
    const size_t at = header.find("'" + key + "'");
    if (at == std::string::npos) throw BenchError("'" + path + "': header has no '" + key + "'");
    size_t colon = header.find(':', at);
    size_t start = header.find_first_not_of(' ', colon + 1);
    return header.substr(start);
  };
  NpyArray array;
  std::string descr = field("descr");
  array.descr = descr.substr(1, descr.find('\'', 1) - 1);
  if (field("fortran_order").rfind("True", 0) == 0)
    throw BenchError("'" + path + "': Fortran-order arrays are not supported");
  std::string shape = field("shape");
  shape = shape.substr(1, shape.find(')') - 1);
  std::stringstream parts(shape);
  for (std::string part; std::getline(parts, part, ',');) {
    part.erase(0, part.find_first_not_of(' '));
    if (!part.empty()) array.dims.push_back(std::stoll(part));
  }
  const std::streampos data_start = in.tellg();
  in.seekg(0, std::ios::end);
  array.bytes.resize(size_t(in.tellg() - data_start));
  in.seekg(data_start);
  in.read(reinterpret_cast<char*>(array.bytes.data()), std::streamsize(array.bytes.size()));
  return array;
}

// ---- JSON --------------------------------------------------------------------------------------

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (uint8_t(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// "[2, 3]": a shape in messages, the summary and the JSON alike.
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

// ---- The benchmark -----------------------------------------------------------------------------

struct BoundTensor {
  std::string name;
  kiln_dtype dtype;
  std::vector<int64_t> dims;
  size_t bytes = 0;
  kiln_buffer* buffer = nullptr;
  std::string source;  // inputs: "random (seed S)" or the .npy path
};

size_t element_count(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (const int64_t d : dims) n *= size_t(d);
  return n;
}

// Concrete dims of a signature tensor, with its symbols looked up in `symbols`.
std::vector<int64_t> resolve_dims(const kiln_tensor_info& info,
                                  const std::map<std::string, int64_t>& symbols) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < info.rank; ++d) {
    if (info.dims[d] >= 0) {
      dims.push_back(info.dims[d]);
      continue;
    }
    const auto it = symbols.find(info.dim_symbols[d]);
    if (it == symbols.end())
      throw BenchError(std::string("'") + info.name + "' has symbolic dim '" + info.dim_symbols[d] +
                       "': give its size with --dim " + info.dim_symbols[d] + "=SIZE");
    dims.push_back(it->second);
  }
  return dims;
}

struct ProfileResult {
  bool available = false;
  std::string error;
  std::string clock;
  int64_t runs = 0;
  double sum_median_s = NAN;
  struct Kernel {
    std::string name, kind;
    uint32_t index;
    double median_s;
  };
  std::vector<Kernel> kernels;  // in launch order of the first profiled run
};

class Bench {
 public:
  explicit Bench(const Options& options) : opt_(options) {}
  ~Bench() {
    for (auto& t : inputs_) kiln_buffer_destroy(t.buffer);
    for (auto& t : outputs_) kiln_buffer_destroy(t.buffer);
    kiln_session_destroy(session_);
    kiln_artifact_destroy(artifact_);
  }

  int run() {
    // Load time, twice: first in a fresh process (the device's driver starts too: CUDA's
    // context, cuBLASLt's library), then again for the same file while the first session still
    // holds the device open, as a service loading a model would see it. The runs below use the
    // second session.
    first_load_ = load_and_run_once();
    Loaded first = take_loaded();
    load_ = load_and_run_once();
    destroy(first);
    describe_device();
    if (!opt_.dump_dir.empty()) dump();

    warm_up();
    time_runs();
    if (opt_.profile_runs > 0) profile();
    print_summary();
    if (!opt_.json_path.empty()) write_json();
    return 0;
  }

 private:
  static double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

  // Each step of a load, timed: reading the artifact, creating the session (modules, programs,
  // constant upload), binding the buffers and the first run; first_result is their sum, the
  // time from kiln_artifact_load_file to the first result.
  struct LoadTimes {
    double artifact = 0, session = 0, bind = 0, first_run = 0, first_result = 0;
  };

  LoadTimes load_and_run_once() {
    LoadTimes t;
    const Clock::time_point load_start = Clock::now();
    check(kiln_artifact_load_file(opt_.artifact.c_str(), &artifact_), "loading " + opt_.artifact);
    t.artifact = ms(Clock::now() - load_start);
    const Clock::time_point session_start = Clock::now();
    check(kiln_session_create(artifact_, opt_.device.empty() ? nullptr : opt_.device.c_str(), &session_),
          "creating a session on " + (opt_.device.empty() ? std::string("the default device") : opt_.device));
    t.session = ms(Clock::now() - session_start);
    const char* id = nullptr;
    check(kiln_session_device_id(session_, &id), "kiln_session_device_id");
    device_id_ = id;
    if (!opt_.dump_dir.empty()) std::filesystem::create_directories(opt_.dump_dir);
    const Clock::time_point bind_start = Clock::now();
    bind_inputs();
    bind_outputs();
    t.bind = ms(Clock::now() - bind_start);
    // First run: poisoned outputs, then (optionally) dumped for a correctness check elsewhere.
    const Clock::time_point first_start = Clock::now();
    run_once();
    t.first_run = ms(Clock::now() - first_start);
    t.first_result = ms(Clock::now() - load_start);
    return t;
  }

  // One load's handles, taken out of the Bench so that another load can run beside them.
  struct Loaded {
    kiln_artifact* artifact = nullptr;
    kiln_session* session = nullptr;
    std::vector<BoundTensor> inputs, outputs;
  };

  Loaded take_loaded() {
    Loaded out{std::exchange(artifact_, nullptr), std::exchange(session_, nullptr), std::move(inputs_),
               std::move(outputs_)};
    inputs_.clear();
    outputs_.clear();
    return out;
  }

  static void destroy(Loaded& loaded) {
    for (auto& t : loaded.inputs) kiln_buffer_destroy(t.buffer);
    for (auto& t : loaded.outputs) kiln_buffer_destroy(t.buffer);
    kiln_session_destroy(loaded.session);
    kiln_artifact_destroy(loaded.artifact);
  }

  void describe_device() {
    size_t count = 0;
    check(kiln_device_count(&count), "kiln_device_count");
    for (size_t i = 0; i < count; ++i) {
      kiln_device_info info;
      check(kiln_device_get_info(i, &info), "kiln_device_get_info");
      if (device_id_ == info.id) device_description_ = info.description;
    }
  }

  void bind_inputs() {
    std::map<std::string, NpyArray> files;
    for (const auto& [name, path] : opt_.input_files) files[name] = read_npy(path);
    size_t count = 0;
    check(kiln_artifact_input_count(artifact_, &count), "kiln_artifact_input_count");
    std::vector<kiln_tensor_info> infos(count);
    for (size_t i = 0; i < count; ++i) check(kiln_artifact_input_info(artifact_, i, &infos[i]), "input info");

    // Symbols: from --dim first, then from the shapes of given files (which must agree).
    for (const auto& [symbol, size] : opt_.dims) symbols_[symbol] = size;
    for (const auto& info : infos) {
      const auto file = files.find(info.name);
      if (file == files.end()) continue;
      if (file->second.dims.size() != info.rank)
        throw BenchError(std::string("input '") + info.name + "' has rank " + std::to_string(info.rank) +
                         " but its file has shape " + dims_text(file->second.dims));
      for (size_t d = 0; d < info.rank; ++d) {
        if (info.dims[d] >= 0) continue;
        const auto [it, inserted] = symbols_.emplace(info.dim_symbols[d], file->second.dims[d]);
        if (!inserted && it->second != file->second.dims[d])
          throw BenchError(std::string("symbol '") + info.dim_symbols[d] + "' is " + std::to_string(it->second) +
                           " but input '" + info.name + "' gives " + std::to_string(file->second.dims[d]));
      }
    }
    for (const auto& [name, path] : opt_.input_files) {
      bool known = false;
      for (const auto& info : infos) known = known || name == info.name;
      if (!known) throw BenchError("--input names '" + name + "', which is not an input of the artifact");
    }

    for (size_t i = 0; i < count; ++i) {
      BoundTensor t;
      t.name = infos[i].name;
      t.dtype = infos[i].dtype;
      t.dims = resolve_dims(infos[i], symbols_);
      t.bytes = element_count(t.dims) * kiln_dtype_size(t.dtype);
      std::vector<uint8_t> host;
      if (const auto file = files.find(t.name); file != files.end()) {
        if (file->second.descr != npy_descr(t.dtype))
          throw BenchError("input '" + t.name + "' is " + kiln_dtype_name(t.dtype) + " ('" + npy_descr(t.dtype) +
                           "') but its file holds '" + file->second.descr + "'");
        if (file->second.dims != t.dims || file->second.bytes.size() != t.bytes)
          throw BenchError("input '" + t.name + "' expects shape " + dims_text(t.dims) + ", its file has " +
                           dims_text(file->second.dims));
        host = std::move(file->second.bytes);
        for (const auto& [name, path] : opt_.input_files)
          if (name == t.name) t.source = path;
      } else {
        host.resize(t.bytes);
        // A different stream per input, so two same-shaped inputs are not equal.
        fill_random(host, t.dtype, opt_.seed * 1000003u + i);
        t.source = "random (seed " + std::to_string(opt_.seed) + ")";
      }
      check(kiln_buffer_create(session_, std::max<size_t>(t.bytes, 1), &t.buffer), "allocating input " + t.name);
      if (t.bytes) check(kiln_buffer_write(t.buffer, 0, host.data(), t.bytes), "writing input " + t.name);
      check(kiln_session_set_input_buffer(session_, t.name.c_str(), t.dtype, t.dims.data(), t.dims.size(), t.buffer),
            "binding input " + t.name);
      if (!opt_.dump_dir.empty()) write_npy(opt_.dump_dir + "/" + t.name + ".npy", t.dtype, t.dims, host);
      inputs_.push_back(std::move(t));
    }
  }

  void bind_outputs() {
    size_t count = 0;
    check(kiln_artifact_output_count(artifact_, &count), "kiln_artifact_output_count");
    for (size_t i = 0; i < count; ++i) {
      kiln_tensor_info info;
      check(kiln_artifact_output_info(artifact_, i, &info), "output info");
      BoundTensor t;
      t.name = info.name;
      t.dtype = info.dtype;
      t.dims = resolve_dims(info, symbols_);  // every symbol appears in some input's type
      t.bytes = element_count(t.dims) * kiln_dtype_size(t.dtype);
      check(kiln_buffer_create(session_, std::max<size_t>(t.bytes, 1), &t.buffer), "allocating output " + t.name);
      const std::vector<uint8_t> poison(t.bytes, 0xff);
      if (t.bytes) check(kiln_buffer_write(t.buffer, 0, poison.data(), t.bytes), "poisoning output " + t.name);
      check(kiln_session_set_output_buffer(session_, t.name.c_str(), t.buffer), "binding output " + t.name);
      outputs_.push_back(std::move(t));
    }
  }

  void run_once() {
    if (opt_.sync) {
      check(kiln_session_run(session_), "kiln_session_run");
      return;
    }
    kiln_event* event = nullptr;
    check(kiln_session_run_async(session_, &event), "kiln_session_run_async");
    const kiln_status waited = kiln_event_wait(event);
    kiln_event_destroy(event);
    check(waited, "kiln_event_wait");
  }

  void dump() {
    for (const auto& t : outputs_) {
      std::vector<int64_t> dims(16);
      size_t rank = 0;
      check(kiln_session_output_shape(session_, t.name.c_str(), dims.data(), dims.size(), &rank),
            "output shape of " + t.name);
      dims.resize(rank);
      if (dims != t.dims)
        throw BenchError("output '" + t.name + "' has shape " + dims_text(dims) + ", expected " + dims_text(t.dims));
      std::vector<uint8_t> host(t.bytes);
      if (t.bytes) check(kiln_buffer_read(t.buffer, 0, host.data(), t.bytes), "reading output " + t.name);
      write_npy(opt_.dump_dir + "/" + t.name + ".npy", t.dtype, t.dims, host);
    }
  }

  void warm_up() {
    const Clock::time_point start = Clock::now();
    int64_t runs = 0;
    while (runs < opt_.warmup_runs || ms(Clock::now() - start) < opt_.warmup_ms) {
      run_once();
      ++runs;
    }
    warmup_runs_done_ = runs;
    // The rate of the second half of warm-up sets K: the first runs may still be capturing.
    const int64_t tail = std::max<int64_t>(1, runs / 2);
    const Clock::time_point tail_start = Clock::now();
    for (int64_t i = 0; i < tail; ++i) run_once();
    warmup_runs_done_ += tail;
    const double per_run_ms = ms(Clock::now() - tail_start) / double(tail);
    runs_per_rep_ = opt_.runs_per_rep > 0
                        ? opt_.runs_per_rep
                        : std::clamp<int64_t>(int64_t(std::ceil(opt_.rep_ms / std::max(per_run_ms, 1e-6))), 1, 100000);
  }

  void time_runs() {
    per_run_ms_.clear();
    for (int64_t r = 0; r < opt_.reps; ++r) {
      const Clock::time_point start = Clock::now();
      for (int64_t k = 0; k < runs_per_rep_; ++k) run_once();
      per_run_ms_.push_back(ms(Clock::now() - start) / double(runs_per_rep_));
    }
  }

  void profile() {
    kiln_status on = kiln_session_set_profiling(session_, 1);
    if (on != KILN_OK) {
      profile_.error = std::string(kiln_status_name(on)) + ": " + kiln_last_error_message();
      return;
    }
    std::vector<std::vector<double>> per_kernel;
    std::vector<double> sums;
    for (int64_t r = 0; r < opt_.profile_runs; ++r) {
      run_once();
      size_t count = 0;
      check(kiln_session_profile_count(session_, &count), "kiln_session_profile_count");
      double sum = 0;
      for (size_t i = 0; i < count; ++i) {
        kiln_kernel_time entry;
        check(kiln_session_profile_entry(session_, i, &entry), "kiln_session_profile_entry");
        if (r == 0) {
          profile_.kernels.push_back({entry.name ? entry.name : "?", entry.kind ? entry.kind : "?",
                                      entry.kernel_index, NAN});
          per_kernel.emplace_back();
        }
        if (i < per_kernel.size()) per_kernel[i].push_back(entry.seconds);
        sum += entry.seconds;
      }
      sums.push_back(sum);
    }
    const char* clock = nullptr;
    if (kiln_session_profile_clock(session_, &clock) == KILN_OK && clock) profile_.clock = clock;
    check(kiln_session_set_profiling(session_, 0), "kiln_session_set_profiling(0)");
    for (size_t i = 0; i < profile_.kernels.size(); ++i) profile_.kernels[i].median_s = median_of(per_kernel[i]);
    profile_.sum_median_s = median_of(sums);
    profile_.runs = opt_.profile_runs;
    profile_.available = true;
  }

  void print_summary() const {
    std::printf("artifact: %s\n", opt_.artifact.c_str());
    std::printf("device:   %s (%s)\n", device_id_.c_str(), device_description_.c_str());
    for (const auto& [name, value] : opt_.env) std::printf("env:      %s=%s\n", name.c_str(), value.c_str());
    for (const auto& t : inputs_)
      std::printf("input  %-16s %s%s  %s\n", t.name.c_str(), kiln_dtype_name(t.dtype), dims_text(t.dims).c_str(),
                  t.source.c_str());
    for (const auto& t : outputs_)
      std::printf("output %-16s %s%s  (device buffer)\n", t.name.c_str(), kiln_dtype_name(t.dtype),
                  dims_text(t.dims).c_str());
    for (const auto& [label, t] : {std::pair{"load (fresh process)", first_load_}, std::pair{"load (device open)", load_}})
      std::printf("%-21s artifact %.3f ms, session %.3f ms, buffers %.3f ms, first run %.3f ms: first result "
                  "after %.3f ms\n",
                  label, t.artifact, t.session, t.bind, t.first_run, t.first_result);
    std::printf("%lld warm-up runs; %lld reps x %lld runs (%s)\n",
                (long long)warmup_runs_done_, (long long)opt_.reps, (long long)runs_per_rep_,
                opt_.sync ? "kiln_session_run" : "run_async + event wait");
    std::printf("per run: median %.4f ms  min %.4f ms  p90 %.4f ms\n", median_of(per_run_ms_),
                percentile_of(per_run_ms_, 0), percentile_of(per_run_ms_, 90));
    if (opt_.profile_runs > 0) {
      if (!profile_.available) {
        std::printf("profile: unavailable (%s)\n", profile_.error.c_str());
      } else {
        std::printf("profile (%s clock, median of %lld runs): %zu entries, sum %.4f ms\n", profile_.clock.c_str(),
                    (long long)profile_.runs, profile_.kernels.size(), profile_.sum_median_s * 1e3);
        for (const auto& k : profile_.kernels)
          std::printf("  %10.4f ms  %-14s %s\n", k.median_s * 1e3, k.kind.c_str(), k.name.c_str());
      }
    }
  }

  void write_json() const {
    std::ostringstream j;
    j << "{\n  \"artifact\": " << json_string(opt_.artifact) << ",\n  \"device\": " << json_string(device_id_)
      << ",\n  \"device_description\": " << json_string(device_description_) << ",\n  \"env\": {";
    for (size_t i = 0; i < opt_.env.size(); ++i)
      j << (i ? ", " : "") << json_string(opt_.env[i].first) << ": " << json_string(opt_.env[i].second);
    j << "},\n  \"symbols\": {";
    size_t n = 0;
    for (const auto& [symbol, size] : symbols_) j << (n++ ? ", " : "") << json_string(symbol) << ": " << size;
    j << "},\n  \"inputs\": [";
    for (size_t i = 0; i < inputs_.size(); ++i)
      j << (i ? ", " : "") << "{\"name\": " << json_string(inputs_[i].name) << ", \"dtype\": \""
        << kiln_dtype_name(inputs_[i].dtype) << "\", \"shape\": " << dims_text(inputs_[i].dims)
        << ", \"bytes\": " << inputs_[i].bytes << ", \"source\": " << json_string(inputs_[i].source) << "}";
    j << "],\n  \"outputs\": [";
    for (size_t i = 0; i < outputs_.size(); ++i)
      j << (i ? ", " : "") << "{\"name\": " << json_string(outputs_[i].name) << ", \"dtype\": \""
        << kiln_dtype_name(outputs_[i].dtype) << "\", \"shape\": " << dims_text(outputs_[i].dims)
        << ", \"bytes\": " << outputs_[i].bytes << "}";
    j << "],\n  \"run_call\": \"" << (opt_.sync ? "kiln_session_run" : "kiln_session_run_async+kiln_event_wait")
      << "\"";
    for (const auto& [prefix, t] : {std::pair{"", first_load_}, std::pair{"reload_", load_}}) {
      j << ",\n  \"" << prefix << "artifact_load_ms\": " << json_number(t.artifact) << ",\n  \"" << prefix
        << "session_create_ms\": " << json_number(t.session) << ",\n  \"" << prefix
        << "bind_ms\": " << json_number(t.bind) << ",\n  \"" << prefix << "first_run_ms\": " << json_number(t.first_run)
        << ",\n  \"" << prefix << "first_result_ms\": " << json_number(t.first_result);
    }
    j << ",\n  \"warmup_runs\": " << warmup_runs_done_
      << ",\n  \"reps\": " << opt_.reps << ",\n  \"runs_per_rep\": " << runs_per_rep_
      << ",\n  \"median_ms\": " << json_number(median_of(per_run_ms_))
      << ",\n  \"min_ms\": " << json_number(percentile_of(per_run_ms_, 0))
      << ",\n  \"p90_ms\": " << json_number(percentile_of(per_run_ms_, 90)) << ",\n  \"per_rep_ms\": [";
    for (size_t i = 0; i < per_run_ms_.size(); ++i) j << (i ? ", " : "") << json_number(per_run_ms_[i]);
    j << "]";
    if (opt_.profile_runs > 0) {
      j << ",\n  \"profile\": {\"available\": " << (profile_.available ? "true" : "false");
      if (!profile_.available) {
        j << ", \"error\": " << json_string(profile_.error) << "}";
      } else {
        j << ", \"clock\": " << json_string(profile_.clock) << ", \"runs\": " << profile_.runs
          << ", \"sum_median_ms\": " << json_number(profile_.sum_median_s * 1e3) << ", \"kernels\": [";
        for (size_t i = 0; i < profile_.kernels.size(); ++i) {
          const auto& k = profile_.kernels[i];
          j << (i ? ", " : "") << "{\"name\": " << json_string(k.name) << ", \"kind\": " << json_string(k.kind)
            << ", \"kernel_index\": " << (k.index == UINT32_MAX ? std::string("null") : std::to_string(k.index))
            << ", \"median_ms\": " << json_number(k.median_s * 1e3) << "}";
        }
        j << "]}";
      }
    }
    j << "\n}\n";
    std::ofstream out(opt_.json_path);
    out << j.str();
    if (!out) throw BenchError("cannot write '" + opt_.json_path + "'");
  }

  const Options& opt_;
  kiln_artifact* artifact_ = nullptr;
  kiln_session* session_ = nullptr;
  std::string device_id_, device_description_;
  std::map<std::string, int64_t> symbols_;
  std::vector<BoundTensor> inputs_, outputs_;
  LoadTimes first_load_, load_;  // in the fresh process, then again
  int64_t warmup_runs_done_ = 0;
  int64_t runs_per_rep_ = 1;
  std::vector<double> per_run_ms_;
  ProfileResult profile_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    // Before the first runtime call: drivers read their switches when they start.
    for (const auto& [name, value] : options.env) setenv(name.c_str(), value.c_str(), 1);
    Bench bench(options);
    return bench.run();
  } catch (const BenchError& e) {
    std::fprintf(stderr, "kiln-bench: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-bench: error: %s\n", e.what());
    return 1;
  }
}
