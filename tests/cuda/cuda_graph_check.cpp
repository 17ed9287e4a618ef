// kiln-cuda-graph-check: checks that CUDA-graph replay computes exactly what kernel-by-kernel
// launches compute, and that a session re-captures when its symbol sizes change.
//
//   kiln-cuda-graph-check ARTIFACT.kiln --device=cuda:N [--dim S=V ...] [--alt-dim S=V ...] [--runs=R]
//
// Two sessions on the device: A with CUDA graphs (runs 2.. replay the captured graph), B
// without. Both run R times on the same seeded random inputs; every output of every run must be
// byte-identical to A's first run (which launched kernel by kernel). With --alt-dim, both then
// run on inputs of the other sizes (A re-captures), then A returns to the first sizes and must
// reproduce its first results. Every run also reports a device time (CUDA events).
// Exit status: 0 all identical, 1 a difference or error (printed), 77 when the device is not a
// CUDA device (the caller gives a cuda:N id only when one exists).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "runtime/device_registry.h"
#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/session.h"
#include "tools/common/inputs.h"

namespace {

using kiln::Result;
using kiln::Status;
using Outputs = std::vector<std::vector<std::byte>>;

int fail(const std::string& message) {
  std::fprintf(stderr, "kiln-cuda-graph-check: error: %s\n", message.c_str());
  return 1;
}

Result<std::pair<std::string, int64_t>> parse_dim(const char* text) {
  const char* eq = std::strchr(text, '=');
  if (!eq || eq == text) return kiln::invalid_argument(std::string("expected SYMBOL=SIZE, given '") + text + "'");
  return std::make_pair(std::string(text, eq), int64_t(std::atoll(eq + 1)));
}

// Runs `session` once on `inputs` and returns its outputs' bytes.
Result<Outputs> run_once(kiln::runtime::Session& session, const std::vector<kiln::tools::PreparedInput>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    KILN_RETURN_IF_ERROR(session.set_input(session.input_specs()[i].name, inputs[i].tensor));
  KILN_RETURN_IF_ERROR(session.run());
  if (!session.last_device_seconds())
    return kiln::internal_error("the CUDA session reported no device time for its run");
  Outputs out;
  for (const kiln::ir::Tensor& t : session.outputs())
    out.emplace_back(t.data(), t.data() + t.size_bytes());
  return out;
}

// Compares, naming the first differing output.
std::string difference(const Outputs& got, const Outputs& want, const kiln::runtime::Session& session) {
  if (got.size() != want.size()) return "a different number of outputs";
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return "output '" + session.output_specs()[i].name + "' differs";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  std::string artifact_path, device_id;
  std::vector<std::pair<std::string, int64_t>> dims, alt_dims;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--device=", 9) == 0) {
      device_id = a + 9;
    } else if (std::strncmp(a, "--dim=", 6) == 0 || std::strncmp(a, "--alt-dim=", 10) == 0) {
      const bool alt = a[2] == 'a';
      Result<std::pair<std::string, int64_t>> d = parse_dim(std::strchr(a, '=') + 1);
      if (!d.is_ok()) return fail(d.status().message());
      (alt ? alt_dims : dims).push_back(*d);
    } else if (std::strncmp(a, "--runs=", 7) == 0) {
      runs = std::atoi(a + 7);
    } else if (a[0] == '-') {
      return fail(std::string("unknown option '") + a + "'");
    } else {
      artifact_path = a;
    }
  }
  if (artifact_path.empty() || device_id.empty() || runs < 2)
    return fail("usage: kiln-cuda-graph-check ARTIFACT.kiln --device=cuda:N [--dim=S=V] [--alt-dim=S=V] [--runs>=2]");

  Result<kiln::artifact::LoadedArtifact> loaded = kiln::artifact::read_artifact_file(artifact_path);
  if (!loaded.is_ok()) return fail(loaded.status().message());
  auto artifact = std::make_shared<const kiln::artifact::LoadedArtifact>(std::move(loaded).value());
  kiln::runtime::DeviceRegistry registry;
  Result<std::unique_ptr<kiln::runtime::hal::Device>> device = registry.open_device(device_id);
  if (!device.is_ok()) return fail(device.status().message());
  if ((*device)->info().driver != "cuda") {
    std::printf("skipped: %s is not a CUDA device\n", device_id.c_str());
    return 77;
  }

  // Session A with graphs, session B without (the setting applies to streams created after it).
  if (Status s = kiln::runtime::cuda::set_cuda_graphs_enabled(**device, true); !s.is_ok()) return fail(s.message());
  Result<std::unique_ptr<kiln::runtime::Session>> with_graphs = kiln::runtime::Session::create(artifact, **device);
  if (!with_graphs.is_ok()) return fail(with_graphs.status().message());
  if (Status s = kiln::runtime::cuda::set_cuda_graphs_enabled(**device, false); !s.is_ok()) return fail(s.message());
  Result<std::unique_ptr<kiln::runtime::Session>> without = kiln::runtime::Session::create(artifact, **device);
  if (!without.is_ok()) return fail(without.status().message());
  kiln::runtime::Session& a = **with_graphs;
  kiln::runtime::Session& b = **without;

  std::vector<std::string> warnings;
  auto inputs_for = [&](const std::vector<std::pair<std::string, int64_t>>& d, uint64_t seed) {
    return kiln::tools::prepare_inputs(a.input_specs(), {}, d, seed, warnings);
  };
  Result<std::vector<kiln::tools::PreparedInput>> inputs = inputs_for(dims, 1);
  if (!inputs.is_ok()) return fail(inputs.status().message());

  Result<Outputs> first = run_once(a, *inputs);
  if (!first.is_ok()) return fail("graphs on, run 1: " + first.status().message());
  auto check_runs = [&](kiln::runtime::Session& s, const char* name, const std::vector<kiln::tools::PreparedInput>& in,
                        const Outputs& want, int count) -> std::string {
    for (int r = 0; r < count; ++r) {
      Result<Outputs> got = run_once(s, in);
      if (!got.is_ok()) return std::string(name) + ", run " + std::to_string(r + 1) + ": " + got.status().message();
      std::string diff = difference(*got, want, s);
      if (!diff.empty()) return std::string(name) + ", run " + std::to_string(r + 1) + ": " + diff;
    }
    return "";
  };
  if (std::string e = check_runs(a, "graphs on", *inputs, *first, runs - 1); !e.empty()) return fail(e);
  if (std::string e = check_runs(b, "graphs off", *inputs, *first, runs); !e.empty()) return fail(e);
  std::printf("graphs on/off: %d runs each, %zu output(s), identical\n", runs, first->size());

  if (!alt_dims.empty()) {
    Result<std::vector<kiln::tools::PreparedInput>> alt = inputs_for(alt_dims, 2);
    if (!alt.is_ok()) return fail(alt.status().message());
    Result<Outputs> alt_first = run_once(b, *alt);
    if (!alt_first.is_ok()) return fail("graphs off, other sizes: " + alt_first.status().message());
    if (std::string e = check_runs(a, "graphs on, other sizes", *alt, *alt_first, 3); !e.empty()) return fail(e);
    if (std::string e = check_runs(a, "graphs on, first sizes again", *inputs, *first, 3); !e.empty()) return fail(e);
    std::printf("re-capture after a size change: identical\n");
  }
  for (const std::string& w : warnings) std::printf("warning: %s\n", w.c_str());
  return 0;
}
