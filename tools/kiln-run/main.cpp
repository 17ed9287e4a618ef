// kiln-run: runs a compiled .kiln artifact on a device, writes or summarizes its outputs, and
// optionally checks them against the reference interpreter, benchmarks and profiles it; or
// describes the artifact (--info) without running it.
//
// Exit status: 0 success, 1 user error (bad option, file, input, device, or a --check FAIL),
// 2 internal error. Diagnostics go to stderr as "kiln-run: error: ...".
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "runtime/device_registry.h"
#include "runtime/session.h"
#include "support/version.h"
#include "tools/common/inputs.h"
#include "tools/common/json_file.h"
#include "tools/common/latency.h"
#include "tools/common/main_guard.h"
#include "tools/kiln-run/info.h"
#include "tools/kiln-run/options.h"
#include "tools/kiln-run/report.h"

namespace {

using kiln::ErrorCode;
using kiln::Status;

// Where the human-readable report goes: stdout, unless a JSON report goes there ("-"), so that
// stdout holds exactly one JSON document.
std::FILE* g_text = stdout;

int exit_code_for(const Status& status) { return status.code() == ErrorCode::kInternal ? 2 : 1; }

int fail(const Status& status) {
  std::string where = status.loc().valid() ? status.loc().to_string() + ": " : "";
  std::fprintf(stderr, "kiln-run: %serror: %s\n", where.c_str(), status.message().c_str());
  return exit_code_for(status);
}

// --list-devices: every device, fastest first (the first is the default for artifacts with its
// kernels), then each driver without devices and why. Exit 1 when KILN_REQUIRE_DRIVERS names a
// driver without a usable device, so CI fails instead of silently skipping it.
int list_devices(const kiln::runtime::DeviceRegistry& registry) {
  for (const auto& info : registry.list_devices()) {
    std::printf("%-12s %-6s %s\n", info.id.c_str(),
                std::string(kiln::runtime::hal::device_type_name(info.type)).c_str(),
                info.description.c_str());
  }
  for (const auto& driver : registry.drivers()) {
    std::string reason = driver->unavailable_reason();
    if (!reason.empty())
      std::printf("(%s driver unavailable: %s)\n", std::string(driver->name()).c_str(), reason.c_str());
  }
  Status required = registry.check_required_drivers_from_env();
  if (!required.is_ok()) return fail(required);
  return 0;
}

// Prints one line per output comparing it with `expected` (--check's tolerances, report.h).
// Returns true when every output passes.
bool compare_outputs(const kiln::runtime::Session& session, const std::vector<kiln::ir::Tensor>& expected) {
  bool all_pass = true;
  for (size_t i = 0; i < session.output_specs().size(); ++i) {
    kiln::tools::Comparison c = kiln::tools::compare(session.outputs()[i], expected[i]);
    all_pass = all_pass && c.pass;
    std::fprintf(g_text, "  %-20s max abs err %-12.4g max rel err %-12.4g %s%s%s\n",
                 session.output_specs()[i].name.c_str(), c.max_abs_error, c.max_rel_error,
                 c.pass ? "PASS" : "FAIL", c.note.empty() ? "" : "  ", c.note.c_str());
  }
  return all_pass;
}

// The interpreter mode --check compares with: --check-reference's, else the one that computes as
// the device does (runtime::matching_interpreter_precision: faithful for kernels, exact for the
// reference device), so the check compares like with like.
kiln::ir::InterpreterPrecision check_reference_for(const kiln::tools::Options& opts,
                                                   const kiln::runtime::Session& session) {
  if (opts.check_reference) return *opts.check_reference;
  return kiln::runtime::matching_interpreter_precision(session.device().info());
}

// --check: the reference interpreter on the same inputs, in `precision`; prints which mode and
// one line per output. Returns true when every output passes.
kiln::Result<bool> check_outputs(const kiln::artifact::LoadedArtifact& artifact,
                                 const std::vector<kiln::ir::Tensor>& inputs,
                                 const kiln::runtime::Session& session, kiln::ir::InterpreterPrecision precision) {
  kiln::Result<std::vector<kiln::ir::Tensor>> expected = kiln::ir::interpret(artifact.graph, inputs, precision);
  if (!expected.is_ok())
    return Status(ErrorCode::kInternal,
                  "--check: the reference interpreter failed: " + expected.status().message());
  std::fprintf(g_text, "check against the reference interpreter (%s):\n",
               std::string(kiln::ir::interpreter_precision_name(precision)).c_str());
  return compare_outputs(session, *expected);
}

// --check-against=DIR: each output against DIR/NAME.npy. Returns true when every output passes.
kiln::Result<bool> check_outputs_against(const std::string& dir, const kiln::runtime::Session& session) {
  std::vector<kiln::ir::Tensor> expected;
  for (size_t i = 0; i < session.output_specs().size(); ++i) {
    const std::string& name = session.output_specs()[i].name;
    const std::string path = (std::filesystem::path(dir) / (name + ".npy")).string();
    kiln::Result<kiln::ir::Tensor> read = kiln::ir::read_npy(path);
    if (!read.is_ok())
      return Status(read.status().code(), "--check-against: output '" + name + "': " + read.status().message());
    // bf16 and the 8-bit floats are stored as f32 (ir/npy.h); any other dtype difference is the comparison's to report.
    kiln::Result<kiln::ir::Tensor> converted = kiln::ir::convert_npy_tensor(*read, session.outputs()[i].dtype());
    expected.push_back(converted.is_ok() ? std::move(converted).value() : std::move(read).value());
  }
  std::fprintf(g_text, "check against %s:\n", dir.c_str());
  return compare_outputs(session, expected);
}

// --bench: `runs` timed runs after a short warm-up, printed and, with --bench-json, written
// as JSON. Wall time of whole runs, as an application calling run() sees it (upload and download
// included), and the device's own time per run where its stream measures one.
Status bench(const kiln::tools::Options& opts, kiln::runtime::Session& session,
             const std::vector<kiln::ir::Tensor>& inputs) {
  using Clock = std::chrono::steady_clock;
  const int64_t runs = *opts.bench;
  const int64_t warmup = std::min<int64_t>(3, runs);
  for (int64_t i = 0; i < warmup; ++i) KILN_RETURN_IF_ERROR(session.run());
  std::vector<double> seconds;
  seconds.reserve(size_t(runs));
  std::vector<double> device_seconds;  // per run, when the device has timers for whole runs
  device_seconds.reserve(size_t(runs));
  const Clock::time_point all_start = Clock::now();
  for (int64_t i = 0; i < runs; ++i) {
    const Clock::time_point start = Clock::now();
    KILN_RETURN_IF_ERROR(session.run());
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    if (std::optional<double> on_device = session.last_device_seconds()) device_seconds.push_back(*on_device);
  }
  const double total = std::chrono::duration<double>(Clock::now() - all_start).count();
  const kiln::tools::LatencyStats host = kiln::tools::latency_stats(seconds, total);
  const std::string& device_id = session.device().info().id;
  constexpr const char* kHostClock = "host wall time per run, including input upload and output download";
  constexpr const char* kDeviceClock = "device timers, from the first kernel's start to the last one's end";
  auto print = [](const kiln::tools::LatencyStats& s) {
    std::fprintf(g_text, "  p50 %.4f ms  p90 %.4f ms  p99 %.4f ms  min %.4f ms  mean %.4f ms  max %.4f ms", s.p50 * 1e3,
                 s.p90 * 1e3, s.p99 * 1e3, s.min * 1e3, s.mean * 1e3, s.max * 1e3);
    if (s.runs_per_second) std::fprintf(g_text, "  %.2f runs/s", *s.runs_per_second);
    std::fprintf(g_text, "\n");
  };
  std::fprintf(g_text, "bench: %lld runs after %lld warm-up on %s; %s\n", (long long)runs, (long long)warmup,
               device_id.c_str(), kHostClock);
  print(host);
  // Device time only when every run has it (a device whose stream measures none gives none).
  const bool device_timed = !seconds.empty() && device_seconds.size() == seconds.size();
  kiln::tools::LatencyStats device;
  if (device_timed) {
    device = kiln::tools::latency_stats(device_seconds);
    std::fprintf(g_text, "  device time per run (%s):\n", kDeviceClock);
    print(device);
  }
  if (!opts.bench_json) return Status::ok();

  nlohmann::json report = {
      {"tool", "kiln-run"},
      {"kiln_version", kiln::kVersion},
      {"artifact", opts.artifact},
      {"device", {{"id", device_id}, {"description", session.device().info().description}}},
      {"runs", runs},
      {"warmup_runs", warmup},
      {"inputs", nlohmann::json::array()},
      {"symbols", nlohmann::json::object()},
      {"host", kiln::tools::to_json(host)},
      {"device_timed", nullptr},
  };
  report["host"]["clock"] = kHostClock;
  for (size_t i = 0; i < inputs.size(); ++i)
    report["inputs"].push_back({{"name", session.input_specs()[i].name},
                                {"dtype", kiln::ir::dtype_name(inputs[i].dtype())},
                                {"shape", inputs[i].shape()}});
  for (const auto& [symbol, size] : session.bindings()) report["symbols"][symbol] = size;
  if (device_timed) {
    report["device_timed"] = kiln::tools::to_json(device);
    report["device_timed"]["clock"] = kDeviceClock;
  }
  return kiln::tools::write_json_file(*opts.bench_json, report);
}

int run_main(int argc, char** argv) {
  kiln::tools::Options opts;
  if (std::optional<int> stop = kiln::tools::parse_options(argc, argv, opts)) return *stop;
  int json_to_stdout = 0;
  for (const std::optional<std::string>& path : {opts.info_json, opts.bench_json, opts.profile_trace})
    json_to_stdout += path == "-";
  if (json_to_stdout > 1) return fail(kiln::invalid_argument("only one JSON report can go to stdout ('-')"));
  if (json_to_stdout) g_text = stderr;
  if (opts.version) {
    std::printf("kiln-run %s (artifact format version %u)\n", kiln::kVersion,
                kiln::artifact::kFormatVersion);
    return 0;
  }
  kiln::runtime::DeviceRegistry registry;
  if (opts.list_devices) return list_devices(registry);
  if (opts.artifact.empty())
    return fail(kiln::invalid_argument("no artifact given (usage: kiln-run [options] ARTIFACT.kiln)"));

  kiln::artifact::ReadOptions read_options;
  for (const std::string& path : opts.trusted_keys) {
    kiln::Result<kiln::artifact::PublicKey> key = kiln::artifact::read_public_key_file(path);
    if (!key.is_ok()) return fail(key.status());
    read_options.trusted_keys.push_back(*key);
  }
  kiln::Result<kiln::artifact::LoadedArtifact> loaded = kiln::artifact::read_artifact_file(opts.artifact, read_options);
  if (!loaded.is_ok()) return fail(loaded.status());
  auto artifact = std::make_shared<const kiln::artifact::LoadedArtifact>(std::move(loaded).value());
  if (opts.info) {
    const nlohmann::json description = kiln::tools::describe_artifact(*artifact, opts.artifact);
    std::fputs(kiln::tools::format_description(description).c_str(), g_text);
    if (opts.info_json) {
      Status written = kiln::tools::write_json_file(*opts.info_json, description);
      if (!written.is_ok()) return fail(written);
    }
    return 0;
  }

  // The default device is the fastest one whose driver the artifact has kernels for; the
  // reference interpreter only when asked for (or for an artifact without kernels).
  std::string device_id = opts.device;
  if (device_id.empty()) {
    Status required = registry.check_required_drivers_from_env();
    if (!required.is_ok()) return fail(required);
    kiln::Result<std::string> chosen = registry.default_device(*artifact);
    if (!chosen.is_ok()) return fail(chosen.status());
    device_id = *chosen;
  }
  // Device options go to the device's driver; others ignore them (--no-cuda-graph on an
  // OpenCL device changes nothing).
  kiln::runtime::hal::DeviceOptions device_options;
  if (!opts.cuda_graphs) device_options.set("cuda.graphs", "off");
  kiln::Result<std::unique_ptr<kiln::runtime::hal::Device>> device = registry.open_device(device_id, device_options);
  if (!device.is_ok()) return fail(device.status());
  kiln::Result<std::unique_ptr<kiln::runtime::Session>> created =
      kiln::runtime::Session::create(artifact, **device);
  if (!created.is_ok()) return fail(created.status());
  kiln::runtime::Session& session = **created;

  std::vector<std::string> warnings;
  kiln::Result<std::vector<kiln::tools::PreparedInput>> prepared =
      kiln::tools::prepare_inputs(session.input_specs(), opts.inputs, opts.dims, opts.seed, warnings);
  if (!prepared.is_ok()) return fail(prepared.status());
  for (const std::string& w : warnings) std::fprintf(stderr, "kiln-run: warning: %s\n", w.c_str());
  std::vector<kiln::ir::Tensor> inputs;
  for (size_t i = 0; i < prepared->size(); ++i) {
    const auto& in = (*prepared)[i];
    Status set = session.set_input(session.input_specs()[i].name, in.tensor);
    if (!set.is_ok()) return fail(Status(set.code(), set.message() + " (from " + in.source + ")"));
    inputs.push_back(in.tensor);
  }

  std::fprintf(g_text, "device: %s (%s)\n", session.device().info().id.c_str(),
               session.device().info().description.c_str());
  for (size_t i = 0; i < prepared->size(); ++i)
    std::fprintf(g_text, "input %s: %s from %s\n", session.input_specs()[i].name.c_str(),
                 kiln::tools::tensor_type_string(inputs[i]).c_str(), (*prepared)[i].source.c_str());

  Status ran = session.run();
  if (!ran.is_ok()) return fail(ran);

  if (opts.output_dir) {
    std::error_code ec;
    std::filesystem::create_directories(*opts.output_dir, ec);
    if (ec)
      return fail(kiln::invalid_argument("cannot create output directory '" + *opts.output_dir +
                                         "': " + ec.message()));
    for (size_t i = 0; i < session.output_specs().size(); ++i) {
      const std::string path = (std::filesystem::path(*opts.output_dir) /
                                (session.output_specs()[i].name + ".npy")).string();
      Status written = kiln::ir::write_npy(path, session.outputs()[i]);
      if (!written.is_ok()) return fail(written);
      std::fprintf(g_text, "wrote %s (%s)\n", path.c_str(),
                   kiln::tools::tensor_type_string(session.outputs()[i]).c_str());
    }
  } else {
    for (size_t i = 0; i < session.output_specs().size(); ++i)
      std::fprintf(g_text, "output %s\n",
                   kiln::tools::summarize(session.output_specs()[i].name, session.outputs()[i]).c_str());
  }

  if (opts.profile) {
    // A second, profiled run: the first one warmed caches and allocated the session's buffers,
    // so the per-kernel times describe steady-state execution.
    session.set_profiling(true);
    Status profiled = session.run();
    session.set_profiling(false);
    if (!profiled.is_ok()) return fail(profiled);
    std::fputs(kiln::tools::format_profile(session.last_profile()).c_str(), g_text);
    if (opts.profile_trace) {
      Status written = kiln::tools::write_json_file(
          *opts.profile_trace, kiln::tools::profile_trace(session.last_profile(), session.device().info().id));
      if (!written.is_ok()) return fail(written);
    }
  }

  bool check_failed = false;
  if (opts.check) {
    kiln::Result<bool> passed = check_outputs(*artifact, inputs, session, check_reference_for(opts, session));
    if (!passed.is_ok()) return fail(passed.status());
    check_failed = !*passed;
  } else if (opts.check_against) {
    kiln::Result<bool> passed = check_outputs_against(*opts.check_against, session);
    if (!passed.is_ok()) return fail(passed.status());
    check_failed = !*passed;
  }
  if (opts.bench) {
    Status benched = bench(opts, session, inputs);
    if (!benched.is_ok()) return fail(benched);
  }
  if (check_failed) {
    std::fprintf(stderr, "kiln-run: error: --check failed: outputs differ from the reference\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return kiln::tools::run_guarded("kiln-run", [&] { return run_main(argc, argv); });
}
