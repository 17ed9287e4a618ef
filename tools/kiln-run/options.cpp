#include "tools/kiln-run/options.h"

#include <charconv>
#include <string_view>

namespace kiln::tools {

const char* const kUsage = R"(usage: kiln-run [options] ARTIFACT.kiln
Runs a compiled Kiln artifact on a device; checks and benchmarks it.

options:
  --list-devices          print every device any driver can see (id, type, name) and exit
  --device=ID             device to run on; default: the fastest available device the
                          artifact has kernels for (a CUDA GPU, then a discrete Vulkan or
                          OpenCL GPU, then a CPU implementation such as lavapipe or PoCL);
                          `reference` is the built-in reference interpreter
  --input NAME=FILE.npy   an input from a NumPy file (repeatable); inputs not given are
                          filled with seeded random values
  --dim SYMBOL=SIZE       size of a symbolic dimension for random inputs (repeatable)
  --seed=N                seed for random inputs (default 0)
  --output-dir DIR        write each output as DIR/NAME.npy (otherwise print a summary)
  --check                 also run the reference interpreter on the same inputs and compare:
                          max abs / rel error and PASS/FAIL per output; exit 1 on FAIL
  --bench=N               N timed runs after a warm-up: p50/p90/p99 latency and runs/s
  --profile               per-kernel times for one run, slowest first, with source nodes
  --no-cuda-graph         on a CUDA device, launch the kernels one by one at every run
                          instead of replaying a captured CUDA graph (for comparison)
  --help                  show this help
  --version               show the version

exit status: 0 success, 1 user error (bad option, file, input or device), 2 internal error
)";

namespace {

Result<int64_t> parse_int(std::string_view text, std::string_view what) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return invalid_argument(std::string(what) + ": '" + std::string(text) + "' is not an integer");
  return value;
}

// Splits "NAME=VALUE"; both parts non-empty.
Result<std::pair<std::string, std::string>> split_assignment(std::string_view text,
                                                             std::string_view option,
                                                             std::string_view form) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return invalid_argument(std::string(option) + " expects " + std::string(form) + ", given '" +
                            std::string(text) + "'");
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

}  // namespace

Result<Options> parse_options(int argc, char** argv) {
  Options opts;
  bool have_artifact = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    // Value options: "--opt=V" or "--opt V".
    auto value_of = [&](std::string_view name) -> std::optional<Result<std::string>> {
      if (arg == name) {
        if (i + 1 >= argc) return Result<std::string>(invalid_argument(std::string(name) + " needs a value"));
        return Result<std::string>(std::string(argv[++i]));
      }
      if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=')
        return Result<std::string>(std::string(arg.substr(name.size() + 1)));
      return std::nullopt;
    };

    if (arg == "--help" || arg == "-h") { opts.help = true; continue; }
    if (arg == "--version") { opts.version = true; continue; }
    if (arg == "--list-devices") { opts.list_devices = true; continue; }
    if (arg == "--check") { opts.check = true; continue; }
    if (arg == "--profile") { opts.profile = true; continue; }
    if (arg == "--no-cuda-graph") { opts.cuda_graphs = false; continue; }
    if (auto v = value_of("--device")) {
      KILN_ASSIGN_OR_RETURN(opts.device, std::move(*v));
      if (opts.device.empty()) return invalid_argument("--device needs a device id");
      continue;
    }
    if (auto v = value_of("--input")) {
      KILN_ASSIGN_OR_RETURN(std::string text, std::move(*v));
      KILN_ASSIGN_OR_RETURN(auto pair, split_assignment(text, "--input", "NAME=FILE.npy"));
      opts.inputs.push_back(std::move(pair));
      continue;
    }
    if (auto v = value_of("--dim")) {
      KILN_ASSIGN_OR_RETURN(std::string text, std::move(*v));
      KILN_ASSIGN_OR_RETURN(auto pair, split_assignment(text, "--dim", "SYMBOL=SIZE"));
      KILN_ASSIGN_OR_RETURN(int64_t size, parse_int(pair.second, "--dim " + pair.first));
      if (size < 0) return invalid_argument("--dim " + pair.first + ": size must be >= 0");
      opts.dims.emplace_back(pair.first, size);
      continue;
    }
    if (auto v = value_of("--seed")) {
      KILN_ASSIGN_OR_RETURN(std::string text, std::move(*v));
      KILN_ASSIGN_OR_RETURN(int64_t seed, parse_int(text, "--seed"));
      if (seed < 0) return invalid_argument("--seed must be >= 0");
      opts.seed = uint64_t(seed);
      continue;
    }
    if (auto v = value_of("--output-dir")) {
      KILN_ASSIGN_OR_RETURN(std::string dir, std::move(*v));
      if (dir.empty()) return invalid_argument("--output-dir needs a directory");
      opts.output_dir = dir;
      continue;
    }
    if (auto v = value_of("--bench")) {
      KILN_ASSIGN_OR_RETURN(std::string text, std::move(*v));
      KILN_ASSIGN_OR_RETURN(int64_t runs, parse_int(text, "--bench"));
      if (runs < 1 || runs > 100000000) return invalid_argument("--bench: the number of runs must be in 1..100000000");
      opts.bench = runs;
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-')
      return invalid_argument("unknown option '" + std::string(arg) + "' (see --help)");
    if (have_artifact)
      return invalid_argument("more than one artifact given ('" + opts.artifact + "' and '" +
                              std::string(arg) + "')");
    opts.artifact = std::string(arg);
    have_artifact = true;
  }
  return opts;
}

}  // namespace kiln::tools
