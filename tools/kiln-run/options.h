// kiln-run's command line: parsed into Options, or a usage error message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/status.h"

namespace kiln::tools {

struct Options {
  std::string artifact;
  bool help = false;
  bool version = false;
  bool list_devices = false;
  std::string device;  // "" = the default (fastest) device
  std::vector<std::pair<std::string, std::string>> inputs;  // NAME, FILE.npy in command-line order
  std::vector<std::pair<std::string, int64_t>> dims;        // SYMBOL, SIZE
  uint64_t seed = 0;
  std::optional<std::string> output_dir;
  bool check = false;
  std::optional<int64_t> bench;  // number of timed runs
  bool profile = false;
  bool cuda_graphs = true;  // --no-cuda-graph: CUDA devices launch kernel by kernel
};

extern const char* const kUsage;

// Options may come before or after the artifact; value options take `--opt=V` or `--opt V`.
// Errors are kInvalidArgument with a message fit for "kiln-run: error: ...".
Result<Options> parse_options(int argc, char** argv);

}  // namespace kiln::tools
