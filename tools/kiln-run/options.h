// kiln-run's command line (CLI11, through tools/common/cli.h): parsed into Options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/interpreter.h"

namespace kiln::tools {

struct Options {
  std::string artifact;
  bool version = false;
  bool list_devices = false;
  bool info = false;                     // --info: describe the artifact, run nothing
  std::optional<std::string> info_json;  // --info-json=FILE: the same as JSON ("-": stdout)
  std::string device;  // "" = the default (fastest) device
  std::vector<std::pair<std::string, std::string>> inputs;  // NAME, FILE.npy in command-line order
  std::vector<std::pair<std::string, int64_t>> dims;        // SYMBOL, SIZE
  uint64_t seed = 0;
  std::optional<std::string> output_dir;
  bool check = false;
  // --check-against=DIR: compare with DIR/NAME.npy (--check's tolerances) instead of running the
  // reference interpreter on the artifact's own (optimized) graph.
  std::optional<std::string> check_against;
  // --check-reference=exact|faithful; nullopt: the mode that matches the device (main.cpp).
  std::optional<ir::InterpreterPrecision> check_reference;
  std::optional<int64_t> bench;            // number of timed runs
  std::optional<std::string> bench_json;   // --bench-json=FILE ("-": stdout)
  bool profile = false;
  std::optional<std::string> profile_trace;  // --profile-trace=FILE: Chrome trace JSON
  bool cuda_graphs = true;  // --no-cuda-graph: CUDA devices launch kernel by kernel
  std::vector<std::string> trusted_keys;  // --trusted-key=FILE.pub: only load artifacts they signed
};

// Parses argv into `options`. Returns the exit status when kiln-run must stop here: 0 after
// --help, 1 after a usage error (printed as "kiln-run: error: ..."); nullopt to go on.
std::optional<int> parse_options(int argc, char** argv, Options& options);

}  // namespace kiln::tools
