// kilnc: the Kiln compiler driver. Reads a .graph file, runs the pass pipeline, and writes the
// requested form: the .kiln artifact (default), the optimized IR, Graphviz, or the plan.
//
// Exit status: 0 success, 1 user error (bad input, bad option, unsupported feature),
// 2 internal error.
#include <CLI/CLI.hpp>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "artifact/writer.h"
#include "codegen/compile_cache.h"
#include "codegen/target.h"
#include "compiler/compile.h"
#include "frontend/graph_writer.h"
#include "ir/infer.h"
#include "ir/ops.h"
#include "ir/printer.h"
#include "tools/common/main_guard.h"
#include "passes/pipeline.h"
#include "support/version.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kilnc [options] INPUT
Compiles a Kiln .graph file into a .kiln artifact (or another form, see --emit).

options:
  -o FILE                  output file ('-' for stdout); default: INPUT with its suffix
                           replaced (.kiln, .opt.graph, .dot, .plan); stdout for
                           --emit=kernels
  --target=LIST            comma list of cuda, vulkan, opencl, cpu; default: every target
                           this build has (every --opt=VALUE option also takes --opt VALUE)
  -O0 | -O1 | -O2          -O0: no simplification or fusion (one kernel per op); default -O2
  -fno-fuse                keep the other optimizations, fuse nothing
  -fchannels-last          run every float convolution network in NHWC (-O1 and up); by
                           default only f16/bf16 ones, and only when targeting cuda
  -fno-channels-last       keep every convolution in NCHW
  -ffuse-attention         run every float attention pattern as one attention kernel (-O1
                           and up); by default all of them, but only f16/bf16 ones when
                           targeting cuda
  -fno-fuse-attention      keep attention as matmul, softmax and matmul kernels
  -S                       write kernel sources / assembly instead of an artifact: one file
                           per kernel and target, <BASE>.<kernel>.<suffix> (.cl for opencl,
                           .comp and .spvasm for vulkan), and <BASE>.cu and <BASE>.ptx for
                           cuda (one program for the graph); BASE is -o FILE, else the
                           input's name without its folder and suffix (in the current
                           directory, as gcc -S does)
  --emit=KIND              ir | dot | plan | kernels | kiln (default); kernels prints every
                           kernel source of the selected targets
  --print-ir-after-all     print the IR after every pass to stderr
  --print-ir-after=P[,P]   print the IR after the named passes (see --list-passes)
  --list-passes            list the passes of the pipeline and exit
  --list-ops=json          print the operator table (ir/ops.cpp) as JSON and exit: per
                           op its name, family, operand count, fusion class, operand
                           dtypes, attribute struct and required attributes
  --gpu-arch=sm_XX[,..]    CUDA architectures for cubin (needs the cuda target; default
                           sm_80,sm_90; sm_80 or newer); PTX for compute_80 is always
                           embedded too
  --allow-tf32             f32 matmuls run by cuBLASLt may use TF32 tensor cores (cuda)
  --cpu=CPU                the CPU the cpu target builds for: an LLVM CPU name of x86-64
                           (x86-64-v2, x86-64-v3, skylake-avx512, znver3, ...) or of AArch64
                           (neoverse-n1, cortex-a76, ...), aarch64 for a generic AArch64 CPU,
                           or native; default x86-64-v3 (generic on AArch64 machines).
                           Cross-compiling for AArch64 needs its C library (Debian:
                           libc6-arm64-cross)
  --sign=KEY               sign the artifact with the secret key file KEY (Ed25519), so that
                           runtimes given its public key (KEY.pub) as trusted load it
  --new-signing-key=KEY    write a new key pair, KEY (secret, mode 600) and KEY.pub, and exit
  -j N, --jobs=N           compile kernels on N threads (default: every core); the output
                           is the same for every N
  --no-cache               neither read nor write the compile cache (kernels compiled
                           before are kept in $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
                           ~/.cache/kiln, bounded by $KILN_CACHE_MAX_SIZE, default 1G)
  -ftime-report, --time-passes
                           per-pass and per-phase compile times, kernel and cache counts on
                           stderr
  -v                       say what is being done
  --help                   show this help
  --version                show the version and the targets this build has
)";

enum class EmitKind { kKiln, kIr, kDot, kPlan, kKernels };

struct Options {
  std::string input;
  std::optional<std::string> output;
  EmitKind emit = EmitKind::kKiln;
  bool emit_sources = false;  // -S
  kiln::compiler::CompileOptions compile;
  // The pipeline's dump and timing switches (--print-ir-after*, -ftime-report); the rest of the
  // pipeline's options follow from `compile`.
  kiln::passes::PipelineOptions reports;
  bool list_passes = false;
  bool list_ops = false;  // --list-ops=json
  bool verbose = false;
  std::optional<std::string> signing_key_file;      // --sign
  std::optional<std::string> new_signing_key_file;  // --new-signing-key
};

struct UsageError {
  std::string message;
};

std::vector<std::string> split_commas(std::string_view list) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    if (end > start) items.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

std::string join(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& s : list) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// Parses argv with CLI11. Returns an error message for a bad option; exits for --help/--version.
// gcc's spellings: -O2, -o FILE or -oFILE, -j N or -jN, -fFEATURE, and --name=VALUE or
// --name VALUE for the long options.
std::optional<UsageError> parse_options(int argc, char** argv, Options& opts) {
  // A bare -O means -O2 (as gcc's), and must not take the next argument as its level.
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args)
    if (a == "-O") a = "-O2";
  std::vector<char*> arg_pointers;
  for (std::string& a : args) arg_pointers.push_back(a.data());

  CLI::App app{"kilnc"};
  app.set_help_flag();  // kUsage instead of CLI11's generated help
  app.allow_extras();   // reported below in kilnc's words
  bool help = false, version = false, verbose = false, list_passes = false;
  std::string output, opt_level, emit, targets, gpu_archs, jobs, list_ops;
  std::vector<std::string> features, print_after, inputs;
  app.add_flag("-h,--help", help);
  app.add_flag("--version", version);
  app.add_option("-o", output);
  app.add_option("-O", opt_level);
  // One value per occurrence: "-fno-fuse model.onnx" must not take the model as a feature.
  app.add_option("-f", features)->allow_extra_args(false);
  app.add_flag("-S", opts.emit_sources);
  app.add_option("--emit", emit);
  app.add_option("--target", targets);
  app.add_option("--gpu-arch", gpu_archs);
  app.add_flag("--allow-tf32", opts.compile.allow_tf32);
  app.add_option("--cpu", opts.compile.cpu);
  std::string sign, new_signing_key;
  app.add_option("--sign", sign);
  app.add_option("--new-signing-key", new_signing_key);
  app.add_flag("--print-ir-after-all", opts.reports.print_after_all);
  app.add_option("--print-ir-after", print_after)->allow_extra_args(false);
  app.add_flag("--list-passes", list_passes);
  app.add_option("--list-ops", list_ops);
  app.add_option("-j,--jobs", jobs)->expected(0, 1);
  bool no_cache = false, time_passes = false;
  app.add_flag("--no-cache", no_cache);
  app.add_flag("--time-passes", time_passes);
  app.add_flag("-v", verbose);
  app.add_option("input", inputs);
  try {
    app.parse(int(arg_pointers.size()), arg_pointers.data());
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    // CLI11 says "--target: 1 required TEXT missing"; say which option needs what.
    const size_t colon = what.find(':');
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && colon != std::string::npos)
      return UsageError{what.substr(0, colon) + " needs a value (see kilnc --help)"};
    return UsageError{what + " (see kilnc --help)"};
  }
  if (help) {
    std::cout << kUsage;
    std::exit(0);
  }
  if (version) {
    const std::string missing = kiln::codegen::unavailable_targets_note();
    // Missing targets go on their own line: scripts read the "targets:" line as a list.
    std::cout << "kilnc (Kiln) " << kiln::kVersion << "\ntargets: " << join(kiln::compiler::build_targets()) << "\n"
              << (missing.empty() ? "" : "unavailable: " + missing + "\n");
    std::exit(0);
  }
  for (const std::string& extra : app.remaining()) {
    if (extra.size() > 1 && extra[0] == '-') return UsageError{"unknown option '" + extra + "' (see kilnc --help)"};
    inputs.push_back(extra);
  }
  if (inputs.size() > 1) return UsageError{"more than one input file ('" + inputs[0] + "' and '" + inputs[1] + "')"};
  if (!inputs.empty()) opts.input = inputs[0];
  if (app.count("-o")) opts.output = output;
  if (app.count("-O")) {
    if (opt_level.size() != 1 || opt_level[0] < '0' || opt_level[0] > '3')
      return UsageError{"-O" + opt_level + ": the optimization level is 0, 1, 2 or 3"};
    opts.compile.opt_level = std::min(opt_level[0] - '0', 2);
  }
  for (const std::string& f : features) {
    if (f == "fuse" || f == "no-fuse") opts.compile.fuse = f == "fuse";
    else if (f == "fuse-attention" || f == "no-fuse-attention") opts.compile.fuse_attention = f == "fuse-attention";
    else if (f == "channels-last" || f == "no-channels-last") opts.compile.channels_last = f == "channels-last";
    else if (f == "time-report") opts.reports.time_report = true;
    else return UsageError{"unknown option '-f" + f + "' (see kilnc --help)"};
  }
  opts.reports.time_report = opts.reports.time_report || time_passes;
  if (app.count("--emit")) {
    if (emit == "kiln") opts.emit = EmitKind::kKiln;
    else if (emit == "ir") opts.emit = EmitKind::kIr;
    else if (emit == "dot") opts.emit = EmitKind::kDot;
    else if (emit == "plan") opts.emit = EmitKind::kPlan;
    else if (emit == "kernels") opts.emit = EmitKind::kKernels;
    else return UsageError{"unknown --emit kind '" + emit + "' (expected ir, dot, plan, kernels or kiln)"};
  }
  if (app.count("--target")) opts.compile.targets = split_commas(targets);
  if (app.count("--gpu-arch")) opts.compile.gpu_archs = split_commas(gpu_archs);  // checked with the targets
  for (const std::string& list : print_after)
    for (const std::string& p : split_commas(list)) opts.reports.print_after.push_back(p);
  if (app.count("-j")) {
    char* end = nullptr;
    const long n = std::strtol(jobs.c_str(), &end, 10);
    if (jobs.empty() || *end != '\0' || n < 1 || n > 1024)
      return UsageError{"-j needs a number of threads from 1 to 1024, not '" + jobs + "'"};
    opts.compile.jobs = int(n);
  }
  if (app.count("--sign")) opts.signing_key_file = sign;
  if (opts.signing_key_file && (opts.emit_sources || opts.emit != EmitKind::kKiln))
    return UsageError{"--sign signs artifacts: it cannot be combined with -S or --emit=" + emit};
  if (app.count("--new-signing-key")) opts.new_signing_key_file = new_signing_key;
  opts.compile.use_cache = !no_cache;
  opts.list_passes = list_passes;
  if (app.count("--list-ops")) {
    if (list_ops != "json") return UsageError{"--list-ops takes 'json' (the only format), not '" + list_ops + "'"};
    opts.list_ops = true;
  }
  opts.verbose = verbose;
  return std::nullopt;
}

std::string default_output(const Options& opts) {
  std::string base = opts.input;
  if (base == "-") base = "out";
  size_t slash = base.find_last_of('/');
  size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) base.resize(dot);
  switch (opts.emit) {
    case EmitKind::kKiln: return base + ".kiln";
    case EmitKind::kIr: return base + ".opt.graph";
    case EmitKind::kDot: return base + ".dot";
    case EmitKind::kPlan: return base + ".plan";
    case EmitKind::kKernels: return "-";  // an inspection dump: to stdout unless -o says otherwise
  }
  return base + ".out";
}

bool write_output(const std::string& path, std::string_view bytes) {
  if (path == "-") {
    std::cout.write(bytes.data(), std::streamsize(bytes.size()));
    std::cout.flush();
    return bool(std::cout);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return false;
  out.write(bytes.data(), std::streamsize(bytes.size()));
  return bool(out);
}

int fail(const kiln::Status& status) {
  std::cerr << "kilnc: " << status.to_string() << "\n";
  return status.code() == kiln::ErrorCode::kInternal ? 2 : 1;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A stage's outcome: its value, or the exit status kilnc ends with (its message already printed).
template <typename T>
struct Staged {
  std::optional<T> value;
  int exit_code = 0;
};

// The targets to compile for, validated before any work is done (kiln::compiler::select_targets,
// plus what -S and --emit=kernels need).
Staged<std::vector<std::string>> select_targets(const Options& opts) {
  auto error = [](const std::string& message) -> Staged<std::vector<std::string>> {
    std::cerr << "kilnc: error: " << message << "\n";
    return {std::nullopt, 1};
  };
  kiln::Result<std::vector<std::string>> targets = kiln::compiler::select_targets(opts.compile);
  if (!targets.is_ok()) return error(targets.status().message());
  if ((opts.emit_sources || opts.emit == EmitKind::kKernels) && targets->empty()) {
    return error(std::string(opts.emit_sources ? "-S" : "--emit=kernels") +
                 " needs a code-generation target, and this build has none (targets: " + join(kiln::compiler::build_targets()) + ")");
  }
  return {std::move(targets).value(), 0};
}

// Stage 1, the frontend: .onnx models through the ONNX importer, everything else through the
// .graph parser. Prints every error found.
Staged<kiln::ir::Graph> read_graph(const Options& opts, std::ostream& log) {
  if (opts.verbose) log << "kilnc: reading " << opts.input << "\n";
  kiln::Diagnostics diags;
  kiln::Result<kiln::ir::Graph> parsed = kiln::compiler::read_source_file(opts.input, diags);
  if (diags.has_errors()) {
    std::cerr << diags.to_string();
    return {std::nullopt, 1};
  }
  if (!parsed.is_ok()) return {std::nullopt, fail(parsed.status())};
  return {std::move(parsed).value(), 0};
}

// Stage 3, code generation for every selected target (kiln::compiler::generate_code), with
// every unsupported node of every target reported at once.
Staged<std::vector<kiln::codegen::CompiledKernels>> generate_code(const Options& opts,
                                                                  const std::vector<std::string>& target_names,
                                                                  const kiln::ir::Graph& graph,
                                                                  const kiln::ir::ExecutionPlan& plan,
                                                                  kiln::codegen::CompileContext& context) {
  kiln::codegen::TargetOptions target_options = kiln::compiler::target_options(opts.compile);
  target_options.sources_only = opts.emit_sources || opts.emit == EmitKind::kKernels;
  kiln::Diagnostics unsupported(/*limit=*/100);
  kiln::Result<std::vector<kiln::codegen::CompiledKernels>> results =
      kiln::compiler::generate_code(target_names, graph, plan, target_options, context, unsupported);
  if (unsupported.has_errors()) {
    std::cerr << unsupported.to_string();
    return {std::nullopt, 1};
  }
  if (!results.is_ok()) return {std::nullopt, fail(results.status())};
  return {std::move(results).value(), 0};
}

// -S: every target's source files, <BASE>[.<kernel>]<suffix>. Returns the exit status.
int write_source_files(const Options& opts, const std::vector<kiln::codegen::CompiledKernels>& results,
                       std::ostream& log) {
  // Like gcc -S: into the current directory, named after the input without its folder and
  // suffix, unless -o names the base (the input's folder may be read-only or shared).
  std::string base = opts.output.value_or("");
  if (base.empty() || base == "-") {
    base = opts.input == "-" ? "out" : opts.input;
    const size_t slash = base.find_last_of('/');
    if (slash != std::string::npos) base = base.substr(slash + 1);
    const size_t dot = base.find_last_of('.');
    if (dot != std::string::npos && dot > 0) base.resize(dot);
  }
  for (const kiln::codegen::CompiledKernels& compiled : results) {
    for (const kiln::codegen::SourceFile& file : compiled.sources) {
      // An unnamed file holds the whole graph's program (CUDA): <BASE>.cu, <BASE>.ptx.
      const std::string path = base + (file.kernel_name.empty() ? "" : "." + file.kernel_name) + file.suffix;
      if (opts.verbose) log << "kilnc: writing " << path << "\n";
      if (!write_output(path, file.text)) {
        std::cerr << "kilnc: error: cannot write '" << path << "'\n";
        return 1;
      }
    }
  }
  return 0;
}

// Stage 4: the bytes of a text --emit form (ir, dot, plan, kernels).
kiln::Result<std::string> render_output(const Options& opts, const kiln::ir::Graph& graph,
                                        const kiln::ir::ExecutionPlan& plan,
                                        const std::vector<kiln::codegen::CompiledKernels>& results) {
  std::string bytes;
  switch (opts.emit) {
    case EmitKind::kIr: bytes = kiln::ir::print_graph(graph); break;
    case EmitKind::kDot: bytes = kiln::ir::print_dot(graph); break;
    case EmitKind::kPlan: bytes = kiln::passes::print_plan(graph, plan); break;
    case EmitKind::kKernels:
      for (const kiln::codegen::CompiledKernels& compiled : results) {
        for (const kiln::codegen::SourceFile& file : compiled.sources) {
          const std::string label = file.kernel_name.empty() ? graph.name : file.kernel_name;
          bytes += "// ===== " + label + file.suffix + " =====\n" + file.text;
          if (!file.text.empty() && file.text.back() != '\n') bytes += '\n';
        }
      }
      break;
    case EmitKind::kKiln: break;  // write_artifact_output
  }
  return bytes;
}

struct StageTimes {
  double parse = 0, passes = 0, codegen = 0, output = 0, total = 0;
};

// -ftime-report: the phases, then per target its kernels, render and device-compile times, then
// the compile cache's counts.
void print_time_report(const StageTimes& t, const std::vector<std::string>& target_names,
                       const std::vector<kiln::codegen::CompiledKernels>& results,
                       const kiln::codegen::CompileContext& context, std::ostream& log) {
  char line[200];
  auto row = [&](const std::string& label, double seconds, const std::string& note = "") {
    std::snprintf(line, sizeof line, "  %-28s %10.3f ms%s\n", label.c_str(), seconds * 1e3, note.c_str());
    log << line;
  };
  log << "===- kilnc phase times (" << context.jobs() << " threads) -===\n";
  row("import", t.parse);
  row("passes + planning", t.passes);
  row("code generation", t.codegen);
  for (size_t i = 0; i < results.size() && i < target_names.size(); ++i) {
    const kiln::codegen::CompiledKernels& r = results[i];
    const std::string kernels = "   " + std::to_string(r.kernel_count) + " kernels, " +
                                std::to_string(r.compiled_kernel_count) + " compiled (the rest share their code)";
    row("  " + target_names[i] + " render", r.render_seconds, kernels);
    row("  " + target_names[i] + " device compile", r.compile_seconds);
  }
  row("write", t.output);
  row("total", t.total);
  const kiln::codegen::CompileCounts counts = context.counts();
  if (const kiln::codegen::CompileCache* cache = context.cache()) {
    log << "  compile cache: " << counts.cache_hits << " hits, " << counts.cache_misses << " misses of "
        << counts.units << " units (" << cache->dir() << ")\n";
  } else {
    log << "  compile cache: off, " << counts.units << " units compiled\n";
  }
}

// Progress on a terminal for compiles longer than a couple of seconds: one line, rewritten in
// place and erased when its phase ends, so messages never land on it. Nothing when stderr is
// not a terminal (logs, CI). Called under CompileContext's progress lock.
class Progress {
 public:
  explicit Progress(std::ostream& log) : log_(log), enabled_(isatty(STDERR_FILENO) == 1) {}
  void update(std::string_view label, size_t done, size_t total) {
    if (!enabled_ || std::chrono::steady_clock::now() - start_ < std::chrono::seconds(2)) return;
    if (done == total) {
      if (shown_) log_ << "\r\033[K" << std::flush;
      shown_ = false;
      return;
    }
    shown_ = true;
    log_ << "\r\033[Kkilnc: " << label << " " << done << "/" << total << std::flush;
  }

 private:
  std::ostream& log_;
  const bool enabled_;
  bool shown_ = false;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// ---- --list-ops=json: the operator table for tools (tests/difffuzz reads it) ----------------

std::string_view family_name(kiln::ir::OpFamily family) {
  using F = kiln::ir::OpFamily;
  switch (family) {
    case F::kSource: return "source";
    case F::kUnary: return "unary";
    case F::kBinary: return "binary";
    case F::kCompare: return "compare";
    case F::kLogic: return "logic";
    case F::kSelect: return "select";
    case F::kConvert: return "convert";
    case F::kReduce: return "reduce";
    case F::kNormalize: return "normalize";
    case F::kLinalg: return "linalg";
    case F::kAttention: return "attention";
    case F::kLayout: return "layout";
    case F::kConv: return "conv";
  }
  return "?";
}

std::string_view fusion_name(kiln::ir::FusionClass fusion) {
  using X = kiln::ir::FusionClass;
  switch (fusion) {
    case X::kSource: return "source";
    case X::kCheap: return "cheap";
    case X::kElementwise: return "elementwise";
    case X::kPrologueAnchor: return "prologue_anchor";
    case X::kEpilogueAnchor: return "epilogue_anchor";
    case X::kOwnKernel: return "own_kernel";
  }
  return "?";
}

// The attribute struct's name without its Attrs suffix ("Reduce", "Pool2d"; "No" for NoAttrs).
// A new struct fails to compile here until it has its name.
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
std::string_view attrs_name(const kiln::ir::Attrs& attrs) {
  namespace ir = kiln::ir;
  return std::visit(
      Overloaded{
          [](const ir::NoAttrs&) { return "No"; }, [](const ir::InputAttrs&) { return "Input"; },
          [](const ir::ConstantAttrs&) { return "Constant"; }, [](const ir::GeluAttrs&) { return "Gelu"; },
          [](const ir::CastAttrs&) { return "Cast"; }, [](const ir::ClampAttrs&) { return "Clamp"; },
          [](const ir::ReduceAttrs&) { return "Reduce"; }, [](const ir::ArgMaxAttrs&) { return "ArgMax"; },
          [](const ir::AxisAttrs&) { return "Axis"; }, [](const ir::LayerNormAttrs&) { return "LayerNorm"; },
          [](const ir::ReshapeAttrs&) { return "Reshape"; }, [](const ir::TransposeAttrs&) { return "Transpose"; },
          [](const ir::BroadcastToAttrs&) { return "BroadcastTo"; }, [](const ir::SliceAttrs&) { return "Slice"; },
          [](const ir::Conv2dAttrs&) { return "Conv2d"; }, [](const ir::Pool2dAttrs&) { return "Pool2d"; },
          [](const ir::AttentionAttrs&) { return "Attention"; }, [](const ir::IotaAttrs&) { return "Iota"; },
          [](const ir::TopKAttrs&) { return "TopK"; }, [](const ir::ScatterAttrs&) { return "Scatter"; }},
      attrs);
}

// One JSON object per user-callable op (sources are not called by name), in table order. The
// names and values are identifiers, so they need no escaping.
std::string ops_json() {
  namespace ir = kiln::ir;
  auto quoted = [](std::string_view s) { return "\"" + std::string(s) + "\""; };
  std::string out = "[\n";
  bool first = true;
  for (int k = 0; k < ir::kNumOpKinds; ++k) {
    const ir::OpInfo& info = ir::op_info(ir::OpKind(k));
    if (info.family == ir::OpFamily::kSource) continue;
    std::string dtypes, required;
    for (ir::DType d : ir::kAllDTypes)
      if (ir::dtype_in_class(info.operand_dtypes, d)) dtypes += (dtypes.empty() ? "" : ", ") + quoted(ir::dtype_name(d));
    for (std::string_view r : info.required_attrs)
      if (!r.empty()) required += (required.empty() ? "" : ", ") + quoted(r);
    out += std::string(first ? "" : ",\n") + "  {\"name\": " + quoted(info.name) +
           ", \"kind\": " + quoted(ir::op_kind_id(info.kind)) + ", \"family\": " + quoted(family_name(info.family)) +
           ", \"min_inputs\": " + std::to_string(info.min_inputs) + ", \"max_inputs\": " +
           std::to_string(info.max_inputs) + ", \"fusion\": " + quoted(fusion_name(info.fusion)) +
           ", \"dtypes\": [" + dtypes + "], \"attrs\": " + quoted(attrs_name(info.default_attrs())) +
           ", \"required_attrs\": [" + required + "]}";
    first = false;
  }
  return out + "\n]\n";
}

int run(int argc, char** argv) {
  Options opts;
  if (std::optional<UsageError> err = parse_options(argc, argv, opts)) {
    std::cerr << "kilnc: error: " << err->message << "\n";
    return 1;
  }
  if (opts.list_ops) {
    std::cout << ops_json();
    return 0;
  }
  if (opts.list_passes) {
    for (const kiln::passes::PassInfo& p : kiln::passes::list_passes()) {
      std::cout << p.name << "\t" << p.description << "\n";
    }
    return 0;
  }
  if (opts.new_signing_key_file) {
    kiln::Result<kiln::artifact::PublicKey> key = kiln::artifact::write_new_signing_key(*opts.new_signing_key_file);
    if (!key.is_ok()) return fail(key.status());
    std::cerr << "kilnc: wrote the secret key " << *opts.new_signing_key_file << " and the public key "
              << *opts.new_signing_key_file << ".pub (" << kiln::artifact::public_key_hex(*key) << ")\n";
    return 0;
  }
  if (opts.input.empty()) {
    std::cerr << "kilnc: error: no input file (see kilnc --help)\n";
    return 1;
  }
  // The key is read before anything is compiled: a wrong key file fails at once.
  std::optional<kiln::artifact::SigningKey> signing_key;
  if (opts.signing_key_file) {
    kiln::Result<kiln::artifact::SigningKey> key = kiln::artifact::read_signing_key_file(*opts.signing_key_file);
    if (!key.is_ok()) return fail(key.status());
    signing_key = std::move(key).value();
  }
  Staged<std::vector<std::string>> targets = select_targets(opts);
  if (!targets.value) return targets.exit_code;
  std::ostream& log = std::cerr;
  kiln::passes::PipelineOptions pipeline = kiln::compiler::pipeline_options(opts.compile, *targets.value);
  pipeline.print_after_all = opts.reports.print_after_all;
  pipeline.print_after = opts.reports.print_after;
  pipeline.time_report = opts.reports.time_report;
  pipeline.log = &log;
  StageTimes times;
  const auto total_start = std::chrono::steady_clock::now();

  // 1. Frontend.
  auto stage_start = std::chrono::steady_clock::now();
  Staged<kiln::ir::Graph> graph = read_graph(opts, log);
  times.parse = seconds_since(stage_start);
  if (!graph.value) return graph.exit_code;

  // 2. Passes.
  if (opts.verbose) {
    log << "kilnc: optimizing " << graph.value->num_nodes() << " nodes at -O" << pipeline.opt_level
        << (pipeline.fuse ? "" : " -fno-fuse") << "\n";
  }
  stage_start = std::chrono::steady_clock::now();
  kiln::Result<kiln::ir::ExecutionPlan> plan = kiln::passes::run_pipeline(*graph.value, pipeline);
  times.passes = seconds_since(stage_start);
  if (!plan.is_ok()) return fail(plan.status());

  // 3. The artifact's constants go to the output first: nothing after the passes reads them, so
  // the graph keeps only views of the written file and their memory is returned before the
  // device compilers take theirs (kilnc's peak memory is then about the weights, not the
  // weights plus the compilers). On stdout they wait for code generation, so that a failed
  // compile writes nothing there.
  const std::string out_path = opts.output.value_or(default_output(opts));
  const bool writes_artifact = !opts.emit_sources && opts.emit == EmitKind::kKiln;
  std::unique_ptr<kiln::artifact::ArtifactFileWriter> artifact_writer;
  auto begin_artifact = [&]() -> kiln::Status {
    stage_start = std::chrono::steady_clock::now();
    if (opts.verbose) log << "kilnc: writing the artifact to " << out_path << "\n";
    KILN_ASSIGN_OR_RETURN(artifact_writer, kiln::artifact::ArtifactFileWriter::begin(
                                               out_path, *graph.value, signing_key ? &*signing_key : nullptr));
    KILN_RETURN_IF_ERROR(artifact_writer->map_constants(*graph.value));
    malloc_trim(0);  // give the freed weights back to the system now, not at exit
    times.output = seconds_since(stage_start);
    return kiln::Status::ok();
  };
  if (writes_artifact && out_path != "-") {
    if (kiln::Status begun = begin_artifact(); !begun.is_ok()) return fail(begun);
  }

  // 4. Code generation, for the forms that carry kernels.
  stage_start = std::chrono::steady_clock::now();
  std::vector<kiln::codegen::CompiledKernels> codegen_results;
  const bool generates_code = opts.emit_sources || opts.emit == EmitKind::kKernels || opts.emit == EmitKind::kKiln;
  // Only artifact compiles use the cache (-S and --emit=kernels compile without it).
  std::string cache_warning;
  std::unique_ptr<kiln::codegen::CompileCache> cache =
      writes_artifact ? kiln::compiler::open_cache(opts.compile, &cache_warning) : nullptr;
  if (!cache_warning.empty()) log << "kilnc: warning: " << cache_warning << "\n";
  if (cache && opts.verbose) log << "kilnc: compile cache in " << cache->dir() << "\n";
  Progress progress(log);
  kiln::codegen::CompileContext context(opts.compile.jobs, cache.get(), [&](std::string_view label, size_t done, size_t total) {
    progress.update(label, done, total);
  });
  if (generates_code) {
    Staged<std::vector<kiln::codegen::CompiledKernels>> generated =
        generate_code(opts, *targets.value, *graph.value, *plan, context);
    if (!generated.value) return generated.exit_code;
    codegen_results = std::move(*generated.value);
  }
  if (cache) cache->trim();
  times.codegen = seconds_since(stage_start);
  if (opts.emit_sources) return write_source_files(opts, codegen_results, log);

  // 5. Output.
  stage_start = std::chrono::steady_clock::now();
  if (writes_artifact) {
    if (!artifact_writer) {
      if (kiln::Status begun = begin_artifact(); !begun.is_ok()) return fail(begun);
    }
    stage_start = std::chrono::steady_clock::now();
    kiln::artifact::WriteOptions contents = kiln::compiler::artifact_contents(codegen_results);
    contents.signing_key = signing_key ? &*signing_key : nullptr;
    kiln::Status written = artifact_writer->finish(*graph.value, *plan, contents);
    if (!written.is_ok()) return fail(written);
  } else if (opts.emit == EmitKind::kIr && out_path != "-") {
    // Text that compiles back: large constants and weights go to a .safetensors file beside it.
    if (opts.verbose) log << "kilnc: writing " << out_path << "\n";
    kiln::Status written = kiln::frontend::write_graph_file(*graph.value, out_path);
    if (!written.is_ok()) return fail(written);
  } else {
    if (opts.emit == EmitKind::kIr) {
      const size_t elided = kiln::ir::count_elided_constants(*graph.value);
      if (elided > 0)
        log << "kilnc: warning: " << elided << " large constants are elided on stdout ('[...]'), so this text is a "
            << "summary that does not compile; write it to a file (-o FILE.graph) to get them in FILE.safetensors\n";
    }
    kiln::Result<std::string> bytes = render_output(opts, *graph.value, *plan, codegen_results);
    if (!bytes.is_ok()) return fail(bytes.status());
    if (opts.verbose) log << "kilnc: writing " << bytes->size() << " bytes to " << out_path << "\n";
    if (!write_output(out_path, *bytes)) {
      std::cerr << "kilnc: error: cannot write '" << out_path << "'\n";
      return 1;
    }
  }
  times.output += seconds_since(stage_start);
  times.total = seconds_since(total_start);
  if (opts.reports.time_report) print_time_report(times, *targets.value, codegen_results, context, log);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  // Weights (every tensor of 1 MiB or more) get pages of their own and return them when freed.
  // glibc's default threshold rises to the largest block freed so far, after which the passes'
  // replacement weights (folded, permuted: the same sizes) came from the heap, which does not
  // shrink: ResNet-50 for the cpu target peaked 30-40 MB higher.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  return kiln::tools::run_guarded("kilnc", [&] { return run(argc, argv); });
}
