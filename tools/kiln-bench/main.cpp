// kiln-bench: times any compiled Kiln artifact on one device through the public C API, as an
// embedding application runs it (docs/tools.md: "kiln-bench"; bench/ drives it).
//
// What it measures. Inputs and outputs are bound as DEVICE buffers (kiln_buffer_create, written
// once before timing), so no host transfer is inside the timed region: a run is the artifact's
// launches plus the host's wait for their completion. After warm-up (at least --warmup runs and
// --warmup-ms of running, so module loading, CUDA-graph capture and allocator growth stay out),
// it times R repetitions of K back-to-back runs with the host's steady clock and reports the
// median, minimum and 90th percentile (nearest rank) of the per-run time (rep time / K). Each
// run is kiln_session_run_async + kiln_event_wait (--sync: kiln_session_run); the API allows one
// run in flight per session, so every run includes one host wait, as an application's would. K
// defaults to what fills --rep-ms (20 ms) at the warm-up rate.
//
// Load time is reported too: reading the artifact, creating the session (modules, programs,
// constant upload), binding the buffers (creating them and uploading the inputs) and the first
// run, and their sum, the time from kiln_artifact_load_file to the first result; the inputs' values
// are made (or read) beforehand, outside the clock, as an application has its data at hand. Once
// in the fresh process (the device's driver
// starting included) and once more, from the file again, while the first session keeps the
// device open, as a service loading a model sees it (the "reload_" keys of the JSON).
//
// --profile=P then runs P more times with kiln_session_set_profiling on and reports each
// kernel's median time and the median per-run sum (the device's busy time, from device timers
// where the driver has them; the JSON says which clock).
//
// Inputs not given with --input are seeded random values, the same as kiln-run's for the same
// --seed (tools/common/inputs.h); symbolic dims come from --input files' shapes or --dim. Before
// the first run every output buffer is poisoned with 0xFF bytes (NaN for floats), so an element
// a kernel fails to write shows up in a check. --dump-dir writes every input and every output of
// that first run as DIR/NAME.npy (ir/npy.h: bf16 as f32).
//
// The runtime is used through <kiln/runtime.h> only; Kiln's own code serves the command line,
// the .npy files, the random inputs, the statistics and the JSON (tools/common/).
//
// Exit status 0 on success, 1 on any error (one line on stderr naming what failed).
#include <kiln/runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/npy.h"
#include "tools/common/cli.h"
#include "tools/common/inputs.h"
#include "tools/common/json_file.h"
#include "tools/common/latency.h"
#include "tools/common/main_guard.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::Result;
using kiln::Status;
using nlohmann::json;

struct Options {
  std::string artifact;
  std::string device;
  std::vector<std::pair<std::string, int64_t>> dims;
  std::vector<std::pair<std::string, std::string>> input_files;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::pair<std::string, std::string>> device_options;
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

std::optional<int> parse_options(int argc, char** argv, Options& o) {
  std::unique_ptr<CLI::App> app = kiln::tools::make_app(
      "kiln-bench", "ARTIFACT.kiln [options]",
      "Times a compiled Kiln artifact on one device through the C API, as an embedding application\n"
      "runs it: inputs and outputs in device buffers (no host transfer timed), warm-up, then R\n"
      "repetitions of K runs (median, min, p90 per run), plus load times and optional per-kernel\n"
      "profiles. Value options take --opt=V or --opt V.",
      "exit status: 0 success, 1 any error");
  CLI::App& a = *app;
  a.add_option("artifact", o.artifact, "the .kiln file to time")->required()->type_name("ARTIFACT.kiln");
  a.add_option("--device", o.device,
               "device id (cuda:0, vulkan:0, opencl:0, reference); default: the fastest device\n"
               "with kernels in the artifact, as kiln-run chooses it")
      ->type_name("ID");
  kiln::tools::add_dim_option(a, o.dims, "size of a symbolic dimension (repeatable)");
  kiln::tools::add_assignment_option(a, "--input", o.input_files, "NAME=FILE.npy",
                                     "an input from a .npy file instead of random values (repeatable)");
  a.add_option("--seed", o.seed, "seed of the random inputs (default 0; the same values as kiln-run's)")
      ->type_name("S")
      ->check(kiln::tools::non_negative_integer());
  a.add_option("--warmup", o.warmup_runs, "at least N warm-up runs (default 10)")
      ->type_name("N")
      ->check(kiln::tools::non_negative_integer());
  a.add_option("--warmup-ms", o.warmup_ms, "and at least T ms of warm-up (default 200)")
      ->type_name("T")
      ->check(kiln::tools::non_negative_number());
  a.add_option("--reps", o.reps, "timed repetitions (default 30)")
      ->type_name("R")
      ->check(CLI::Range(int64_t(1), int64_t(1000000)).description(""));
  a.add_option("--runs-per-rep", o.runs_per_rep, "runs per repetition (default 0: enough to fill --rep-ms)")
      ->type_name("K")
      ->check(CLI::Range(int64_t(0), int64_t(100000)).description(""));
  a.add_option("--rep-ms", o.rep_ms, "target length of one repetition when K is automatic (default 20)")
      ->type_name("T")
      ->check(kiln::tools::non_negative_number());
  a.add_flag("--sync", o.sync, "run with kiln_session_run instead of run_async + event wait");
  a.add_option("--profile", o.profile_runs, "P extra runs with per-kernel profiling (default 0: none)")
      ->type_name("P")
      ->check(kiln::tools::non_negative_integer());
  a.add_option("--dump-dir", o.dump_dir, "write the inputs and the first run's outputs as DIR/NAME.npy")
      ->type_name("DIR")
      ->check(kiln::tools::output_file_validator());
  a.add_option("--json", o.json_path, "also write the results as JSON to FILE (- for stdout, the summary\n"
                                      "then goes to stderr)")
      ->type_name("FILE")
      ->check(kiln::tools::output_file_validator());
  kiln::tools::add_assignment_option(a, "--device-option", o.device_options, "KEY=VALUE",
                                     "a device option for the session (repeatable), e.g.\n"
                                     "cpu.threads=2 or cuda.graphs=off");
  kiln::tools::add_assignment_option(a, "--env", o.env, "NAME=VALUE",
                                     "set an environment variable before the runtime starts\n"
                                     "(repeatable): runtime switches such as KILN_CUDA_GRAPHS=0");
  return kiln::tools::parse_command_line(a, "kiln-bench", argc, argv);
}

// A Status for a failed C API call: "<what>: <status name>: <the runtime's message>".
Status api(kiln_status status, const std::string& what) {
  if (status == KILN_OK) return Status::ok();
  return kiln::invalid_argument(what + ": " + kiln_status_name(status) + ": " + kiln_last_error_message());
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The artifact's signature through the C API, as the tools' shared input code takes it.
Result<std::vector<kiln::runtime::TensorSpec>> signature(
    const kiln_artifact* artifact, kiln_status (*count_of)(const kiln_artifact*, size_t*),
    kiln_status (*info_of)(const kiln_artifact*, size_t, kiln_tensor_info*)) {
  size_t count = 0;
  KILN_RETURN_IF_ERROR(api(count_of(artifact, &count), "reading the artifact's signature"));
  std::vector<kiln::runtime::TensorSpec> specs;
  for (size_t i = 0; i < count; ++i) {
    kiln_tensor_info info;
    KILN_RETURN_IF_ERROR(api(info_of(artifact, i, &info), "reading the artifact's signature"));
    std::optional<kiln::ir::DType> dtype = kiln::ir::parse_dtype(kiln_dtype_name(info.dtype));
    if (!dtype) return kiln::internal_error(std::string("unknown dtype ") + kiln_dtype_name(info.dtype));
    kiln::runtime::TensorSpec spec{info.name, {*dtype, {}}};
    for (size_t d = 0; d < info.rank; ++d)
      spec.type.shape.push_back(info.dims[d] >= 0 ? kiln::ir::Dim::of(info.dims[d])
                                                  : kiln::ir::Dim::symbol(info.dim_symbols[d]));
    specs.push_back(std::move(spec));
  }
  return specs;
}

kiln_dtype c_dtype(kiln::ir::DType dtype) {
  for (kiln_dtype d : {KILN_DTYPE_F32, KILN_DTYPE_F16, KILN_DTYPE_BF16, KILN_DTYPE_I64, KILN_DTYPE_I32,
                       KILN_DTYPE_I8, KILN_DTYPE_U8, KILN_DTYPE_BOOL, KILN_DTYPE_I16, KILN_DTYPE_U16, KILN_DTYPE_U32,
                       KILN_DTYPE_F64, KILN_DTYPE_F8E4M3FN, KILN_DTYPE_F8E4M3FNUZ, KILN_DTYPE_F8E5M2,
                       KILN_DTYPE_F8E5M2FNUZ})
    if (kiln::ir::dtype_name(dtype) == kiln_dtype_name(d)) return d;
  return KILN_DTYPE_F32;  // unreachable: the two enums name the same dtypes
}

// One bound input or output: its device buffer and, for the summary and JSON, what it holds.
struct BoundTensor {
  std::string name;
  kiln::ir::DType dtype;
  std::vector<int64_t> shape;  // as bound for this run
  size_t bytes = 0;
  kiln_buffer* buffer = nullptr;
  std::string source;  // inputs: "random (seed S)" or the .npy path
};

std::string type_text(const BoundTensor& t) {
  std::string s = std::string(kiln::ir::dtype_name(t.dtype)) + "[";
  for (size_t d = 0; d < t.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + "]";
}

json tensor_json(const BoundTensor& t) {
  return {{"name", t.name}, {"dtype", kiln::ir::dtype_name(t.dtype)}, {"shape", t.shape}, {"bytes", t.bytes}};
}

struct ProfileResult {
  bool available = false;
  std::string error;
  std::string clock;
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
  ~Bench() { destroy(current_); }

  Status run() {
    // Load time, twice: first in a fresh process (the device's driver starts too: CUDA's
    // context, cuBLASLt's library), then again for the same file while the first session still
    // holds the device open, as a service loading a model would see it. The runs below use the
    // second session.
    KILN_ASSIGN_OR_RETURN(first_load_, load_and_run_once());
    Loaded first = std::exchange(current_, Loaded{});
    Result<LoadTimes> reload = load_and_run_once();
    destroy(first);
    if (!reload.is_ok()) return reload.status();
    load_ = *reload;
    describe_device();
    if (!opt_.dump_dir.empty()) KILN_RETURN_IF_ERROR(dump_outputs());

    KILN_RETURN_IF_ERROR(warm_up());
    KILN_RETURN_IF_ERROR(time_runs());
    if (opt_.profile_runs > 0) KILN_RETURN_IF_ERROR(profile());
    print_summary(opt_.json_path == "-" ? stderr : stdout);
    if (!opt_.json_path.empty()) KILN_RETURN_IF_ERROR(kiln::tools::write_json_file(opt_.json_path, report()));
    return Status::ok();
  }

 private:
  // One load's handles, so that a second load can run beside the first.
  struct Loaded {
    kiln_artifact* artifact = nullptr;
    kiln_session* session = nullptr;
    std::vector<BoundTensor> inputs, outputs;
  };
  // Each step of a load, timed: reading the artifact, creating the session (modules, programs,
  // constant upload), binding the buffers and the first run; first_result is their sum, the
  // time from kiln_artifact_load_file to the first result.
  struct LoadTimes {
    double artifact = 0, session = 0, bind = 0, first_run = 0, first_result = 0;
  };

  static void destroy(Loaded& loaded) {
    for (auto* list : {&loaded.inputs, &loaded.outputs})
      for (BoundTensor& t : *list) kiln_buffer_destroy(t.buffer);
    kiln_session_destroy(loaded.session);
    kiln_artifact_destroy(loaded.artifact);
    loaded = Loaded{};
  }

  Result<LoadTimes> load_and_run_once() {
    LoadTimes t;
    const Clock::time_point load_start = Clock::now();
    KILN_RETURN_IF_ERROR(api(kiln_artifact_load_file(opt_.artifact.c_str(), &current_.artifact), "loading " + opt_.artifact));
    t.artifact = ms(Clock::now() - load_start);
    const Clock::time_point session_start = Clock::now();
    std::vector<kiln_device_option> options;
    for (const auto& [key, value] : opt_.device_options) options.push_back({key.c_str(), value.c_str()});
    KILN_RETURN_IF_ERROR(api(kiln_session_create_with_options(current_.artifact,
                                                             opt_.device.empty() ? nullptr : opt_.device.c_str(),
                                                             options.data(), options.size(), &current_.session),
                             "creating a session on " +
                                 (opt_.device.empty() ? std::string("the default device") : opt_.device)));
    t.session = ms(Clock::now() - session_start);
    const Clock::time_point paused = Clock::now();  // not the runtime's time: the application's data
    const char* id = nullptr;
    KILN_RETURN_IF_ERROR(api(kiln_session_device_id(current_.session, &id), "kiln_session_device_id"));
    device_id_ = id;
    KILN_RETURN_IF_ERROR(prepare_inputs());
    const Clock::duration untimed = Clock::now() - paused;
    const Clock::time_point bind_start = Clock::now();
    KILN_RETURN_IF_ERROR(bind_inputs());
    KILN_RETURN_IF_ERROR(bind_outputs());
    t.bind = ms(Clock::now() - bind_start);
    // First run: into poisoned outputs, then (optionally) dumped for a correctness check elsewhere.
    const Clock::time_point first_start = Clock::now();
    KILN_RETURN_IF_ERROR(run_once());
    t.first_run = ms(Clock::now() - first_start);
    t.first_result = ms(Clock::now() - load_start - untimed);
    return t;
  }

  void describe_device() {
    size_t count = 0;
    if (kiln_device_count(&count) != KILN_OK) return;
    for (size_t i = 0; i < count; ++i) {
      kiln_device_info info;
      if (kiln_device_get_info(i, &info) == KILN_OK && device_id_ == info.id) device_description_ = info.description;
    }
  }

  // Binds a device buffer holding `bytes` of `host` (or poisoned, when `host` is null) as input
  // or output `t`.
  Status create_buffer(BoundTensor& t, const void* host, const char* role) {
    KILN_RETURN_IF_ERROR(api(kiln_buffer_create(current_.session, std::max<size_t>(t.bytes, 1), &t.buffer),
                             std::string("allocating ") + role + " " + t.name));
    if (t.bytes == 0) return Status::ok();
    const std::vector<uint8_t> poison(host ? 0 : t.bytes, 0xff);
    return api(kiln_buffer_write(t.buffer, 0, host ? host : poison.data(), t.bytes),
               std::string("writing ") + role + " " + t.name);
  }

  // The inputs' values, made or read once (the second load binds the same ones).
  Status prepare_inputs() {
    if (inputs_prepared_) return Status::ok();
    inputs_prepared_ = true;
    KILN_ASSIGN_OR_RETURN(input_specs_,
                          signature(current_.artifact, kiln_artifact_input_count, kiln_artifact_input_info));
    std::vector<std::string> warnings;
    KILN_ASSIGN_OR_RETURN(prepared_,
                          kiln::tools::prepare_inputs(input_specs_, opt_.input_files, opt_.dims, opt_.seed, warnings));
    for (const std::string& w : warnings) std::fprintf(stderr, "kiln-bench: warning: %s\n", w.c_str());
    symbols_ = kiln::tools::bound_symbols(input_specs_, prepared_);
    return Status::ok();
  }

  Status bind_inputs() {
    const std::vector<kiln::runtime::TensorSpec>& specs = input_specs_;
    for (size_t i = 0; i < specs.size(); ++i) {
      const kiln::ir::Tensor& tensor = prepared_[i].tensor;
      BoundTensor t{specs[i].name, tensor.dtype(), tensor.shape(), tensor.size_bytes(), nullptr, prepared_[i].source};
      KILN_RETURN_IF_ERROR(create_buffer(t, tensor.data(), "input"));
      current_.inputs.push_back(t);
      KILN_RETURN_IF_ERROR(api(kiln_session_set_input_buffer(current_.session, t.name.c_str(), c_dtype(t.dtype),
                                                             t.shape.data(), t.shape.size(), t.buffer),
                               "binding input " + t.name));
      if (!opt_.dump_dir.empty()) KILN_RETURN_IF_ERROR(dump(t.name, tensor));
    }
    return Status::ok();
  }

  Status bind_outputs() {
    KILN_ASSIGN_OR_RETURN(std::vector<kiln::runtime::TensorSpec> specs,
                          signature(current_.artifact, kiln_artifact_output_count, kiln_artifact_output_info));
    for (const kiln::runtime::TensorSpec& spec : specs) {
      BoundTensor t{spec.name, spec.type.dtype, {}, 0, nullptr, ""};
      // Every symbol of an output appears in some input's type (the compiler checks it).
      KILN_ASSIGN_OR_RETURN(t.shape, kiln::ir::resolve_shape(spec.type.shape, symbols_));
      t.bytes = kiln::ir::dtype_size(spec.type.dtype);
      for (int64_t d : t.shape) t.bytes *= size_t(d);
      KILN_RETURN_IF_ERROR(create_buffer(t, nullptr, "output"));
      current_.outputs.push_back(t);
      KILN_RETURN_IF_ERROR(
          api(kiln_session_set_output_buffer(current_.session, t.name.c_str(), t.buffer), "binding output " + t.name));
    }
    return Status::ok();
  }

  Status run_once() {
    if (opt_.sync) return api(kiln_session_run(current_.session), "kiln_session_run");
    kiln_event* event = nullptr;
    KILN_RETURN_IF_ERROR(api(kiln_session_run_async(current_.session, &event), "kiln_session_run_async"));
    const kiln_status waited = kiln_event_wait(event);
    kiln_event_destroy(event);
    return api(waited, "kiln_event_wait");
  }

  Status dump(const std::string& name, const kiln::ir::Tensor& tensor) const {
    std::error_code ec;
    std::filesystem::create_directories(opt_.dump_dir, ec);
    if (ec) return kiln::invalid_argument("cannot create --dump-dir '" + opt_.dump_dir + "': " + ec.message());
    return kiln::ir::write_npy((std::filesystem::path(opt_.dump_dir) / (name + ".npy")).string(), tensor);
  }

  Status dump_outputs() const {
    for (const BoundTensor& t : current_.outputs) {
      KILN_ASSIGN_OR_RETURN(kiln::ir::Tensor host, kiln::ir::Tensor::zeros(t.dtype, t.shape));
      if (t.bytes)
        KILN_RETURN_IF_ERROR(api(kiln_buffer_read(t.buffer, 0, host.mutable_data(), t.bytes), "reading output " + t.name));
      KILN_RETURN_IF_ERROR(dump(t.name, host));
    }
    return Status::ok();
  }

  Status warm_up() {
    const Clock::time_point start = Clock::now();
    int64_t runs = 0;
    while (runs < opt_.warmup_runs || ms(Clock::now() - start) < opt_.warmup_ms) {
      KILN_RETURN_IF_ERROR(run_once());
      ++runs;
    }
    // The rate of the second half of warm-up sets K: the first runs may still be capturing.
    const int64_t tail = std::max<int64_t>(1, runs / 2);
    const Clock::time_point tail_start = Clock::now();
    for (int64_t i = 0; i < tail; ++i) KILN_RETURN_IF_ERROR(run_once());
    warmup_runs_done_ = runs + tail;
    const double per_run_ms = ms(Clock::now() - tail_start) / double(tail);
    runs_per_rep_ = opt_.runs_per_rep > 0
                        ? opt_.runs_per_rep
                        : std::clamp<int64_t>(int64_t(std::ceil(opt_.rep_ms / std::max(per_run_ms, 1e-6))), 1, 100000);
    return Status::ok();
  }

  Status time_runs() {
    per_run_s_.clear();
    for (int64_t r = 0; r < opt_.reps; ++r) {
      const Clock::time_point start = Clock::now();
      for (int64_t k = 0; k < runs_per_rep_; ++k) KILN_RETURN_IF_ERROR(run_once());
      per_run_s_.push_back(std::chrono::duration<double>(Clock::now() - start).count() / double(runs_per_rep_));
    }
    return Status::ok();
  }

  Status profile() {
    kiln_session* session = current_.session;
    if (kiln_status on = kiln_session_set_profiling(session, 1); on != KILN_OK) {
      profile_.error = std::string(kiln_status_name(on)) + ": " + kiln_last_error_message();
      return Status::ok();
    }
    std::vector<std::vector<double>> per_kernel;
    std::vector<double> sums;
    for (int64_t r = 0; r < opt_.profile_runs; ++r) {
      KILN_RETURN_IF_ERROR(run_once());
      size_t count = 0;
      KILN_RETURN_IF_ERROR(api(kiln_session_profile_count(session, &count), "kiln_session_profile_count"));
      double sum = 0;
      for (size_t i = 0; i < count; ++i) {
        kiln_kernel_time entry;
        KILN_RETURN_IF_ERROR(api(kiln_session_profile_entry(session, i, &entry), "kiln_session_profile_entry"));
        if (r == 0) {
          profile_.kernels.push_back({entry.name ? entry.name : "?", entry.kind ? entry.kind : "?", entry.kernel_index, NAN});
          per_kernel.emplace_back();
        }
        if (i < per_kernel.size()) per_kernel[i].push_back(entry.seconds);
        sum += entry.seconds;
      }
      sums.push_back(sum);
    }
    const char* clock = nullptr;
    if (kiln_session_profile_clock(session, &clock) == KILN_OK && clock) profile_.clock = clock;
    KILN_RETURN_IF_ERROR(api(kiln_session_set_profiling(session, 0), "kiln_session_set_profiling(0)"));
    for (size_t i = 0; i < profile_.kernels.size(); ++i)
      profile_.kernels[i].median_s = kiln::tools::latency_stats(per_kernel[i]).p50;
    profile_.sum_median_s = kiln::tools::latency_stats(sums).p50;
    profile_.available = true;
    return Status::ok();
  }

  void print_summary(std::FILE* out) const {
    std::fprintf(out, "artifact: %s\n", opt_.artifact.c_str());
    std::fprintf(out, "device:   %s (%s)\n", device_id_.c_str(), device_description_.c_str());
    for (const auto& [name, value] : opt_.env) std::fprintf(out, "env:      %s=%s\n", name.c_str(), value.c_str());
    for (const BoundTensor& t : current_.inputs)
      std::fprintf(out, "input  %-16s %s  %s\n", t.name.c_str(), type_text(t).c_str(), t.source.c_str());
    for (const BoundTensor& t : current_.outputs)
      std::fprintf(out, "output %-16s %s  (device buffer)\n", t.name.c_str(), type_text(t).c_str());
    for (const auto& [label, t] : {std::pair{"load (fresh process)", first_load_}, std::pair{"load (device open)", load_}})
      std::fprintf(out,
                   "%-21s artifact %.3f ms, session %.3f ms, buffers %.3f ms, first run %.3f ms: first result "
                   "after %.3f ms\n",
                   label, t.artifact, t.session, t.bind, t.first_run, t.first_result);
    std::fprintf(out, "%lld warm-up runs; %lld reps x %lld runs (%s)\n", (long long)warmup_runs_done_,
                 (long long)opt_.reps, (long long)runs_per_rep_, opt_.sync ? "kiln_session_run" : "run_async + event wait");
    const kiln::tools::LatencyStats per_run = kiln::tools::latency_stats(per_run_s_);
    std::fprintf(out, "per run: median %.4f ms  min %.4f ms  p90 %.4f ms\n", per_run.p50 * 1e3, per_run.min * 1e3,
                 per_run.p90 * 1e3);
    if (opt_.profile_runs == 0) return;
    if (!profile_.available) {
      std::fprintf(out, "profile: unavailable (%s)\n", profile_.error.c_str());
      return;
    }
    std::fprintf(out, "profile (%s clock, median of %lld runs): %zu entries, sum %.4f ms\n", profile_.clock.c_str(),
                 (long long)opt_.profile_runs, profile_.kernels.size(), profile_.sum_median_s * 1e3);
    for (const auto& k : profile_.kernels)
      std::fprintf(out, "  %10.4f ms  %-14s %s\n", k.median_s * 1e3, k.kind.c_str(), k.name.c_str());
  }

  // The --json report. Its keys are what bench/*.py read; keep them.
  json report() const {
    json j = {{"artifact", opt_.artifact},
              {"device", device_id_},
              {"device_description", device_description_},
              {"env", json::object()},
              {"symbols", symbols_},
              {"inputs", json::array()},
              {"outputs", json::array()},
              {"run_call", opt_.sync ? "kiln_session_run" : "kiln_session_run_async+kiln_event_wait"}};
    for (const auto& [name, value] : opt_.env) j["env"][name] = value;
    for (const BoundTensor& t : current_.inputs) {
      j["inputs"].push_back(tensor_json(t));
      j["inputs"].back()["source"] = t.source;
    }
    for (const BoundTensor& t : current_.outputs) j["outputs"].push_back(tensor_json(t));
    for (const auto& [prefix, t] : {std::pair{"", first_load_}, std::pair{"reload_", load_}}) {
      const std::string p = prefix;
      j[p + "artifact_load_ms"] = t.artifact;
      j[p + "session_create_ms"] = t.session;
      j[p + "bind_ms"] = t.bind;
      j[p + "first_run_ms"] = t.first_run;
      j[p + "first_result_ms"] = t.first_result;
    }
    const kiln::tools::LatencyStats per_run = kiln::tools::latency_stats(per_run_s_);
    j["warmup_runs"] = warmup_runs_done_;
    j["reps"] = opt_.reps;
    j["runs_per_rep"] = runs_per_rep_;
    j["median_ms"] = per_run.p50 * 1e3;
    j["min_ms"] = per_run.min * 1e3;
    j["p90_ms"] = per_run.p90 * 1e3;
    j["per_rep_ms"] = json::array();
    for (double seconds : per_run_s_) j["per_rep_ms"].push_back(seconds * 1e3);
    if (opt_.profile_runs > 0) {
      json& p = j["profile"] = {{"available", profile_.available}};
      if (!profile_.available) {
        p["error"] = profile_.error;
      } else {
        p["clock"] = profile_.clock;
        p["runs"] = opt_.profile_runs;
        p["sum_median_ms"] = profile_.sum_median_s * 1e3;
        p["kernels"] = json::array();
        for (const auto& k : profile_.kernels)
          p["kernels"].push_back({{"name", k.name},
                                  {"kind", k.kind},
                                  {"kernel_index", k.index == UINT32_MAX ? json(nullptr) : json(k.index)},
                                  {"median_ms", k.median_s * 1e3}});
      }
    }
    return j;
  }

  const Options& opt_;
  Loaded current_;
  std::vector<kiln::runtime::TensorSpec> input_specs_;
  std::vector<kiln::tools::PreparedInput> prepared_;
  bool inputs_prepared_ = false;
  std::string device_id_, device_description_;
  kiln::ir::SymbolBindings symbols_;
  LoadTimes first_load_, load_;  // in the fresh process, then again
  int64_t warmup_runs_done_ = 0;
  int64_t runs_per_rep_ = 1;
  std::vector<double> per_run_s_;  // per repetition: its time over its runs
  ProfileResult profile_;
};

}  // namespace

int main(int argc, char** argv) {
  return kiln::tools::run_guarded("kiln-bench", [&] {
    Options options;
    if (std::optional<int> stop = parse_options(argc, argv, options)) return *stop;
    // Before the first runtime call: drivers read their switches when they start.
    for (const auto& [name, value] : options.env) setenv(name.c_str(), value.c_str(), 1);
    Bench bench(options);
    Status status = bench.run();
    if (status.is_ok()) return 0;
    std::fprintf(stderr, "kiln-bench: error: %s\n", status.message().c_str());
    return 1;
  });
}
