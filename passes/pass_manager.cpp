// The pass manager (see pass_manager.h).
#include "passes/pass_manager.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "ir/printer.h"
#include "ir/verifier.h"

namespace kiln::passes {
namespace {

std::ostream& log_stream(const PipelineOptions& options) {
  return options.log ? *options.log : std::cerr;
}

bool wants_print_after(const PipelineOptions& options, std::string_view pass) {
  if (options.print_after_all) return true;
  for (const std::string& name : options.print_after) {
    if (name == pass) return true;
  }
  return false;
}

struct PassTiming {
  std::string_view name;
  double seconds = 0;
};

void print_time_report(std::ostream& log, const std::vector<PassTiming>& timings,
                       double verify_seconds) {
  double total = verify_seconds;
  for (const PassTiming& t : timings) total += t.seconds;
  auto row = [&](double seconds, std::string_view what) {
    char line[160];
    double percent = total > 0 ? 100.0 * seconds / total : 0.0;
    std::snprintf(line, sizeof line, "  %12.3f  %6.1f%%  %.*s\n", seconds * 1e3, percent,
                  int(what.size()), what.data());
    log << line;
  };
  log << "===---------------------------------------------------------===\n"
      << "                 Kiln pass execution timing report\n"
      << "===---------------------------------------------------------===\n"
      << "  Wall time (ms)   Share  Pass\n";
  for (const PassTiming& t : timings) row(t.seconds, t.name);
  if (verify_seconds > 0) row(verify_seconds, "(verifier, after each pass)");
  row(total, "total");
}

}  // namespace

Status check_print_after_names(const PipelineOptions& options, std::span<const Pass> known) {
  for (const std::string& name : options.print_after) {
    bool found = false;
    for (const Pass& pass : known) found |= pass.name == name;
    if (found) continue;
    std::string valid;
    for (const Pass& pass : known) {
      if (!valid.empty()) valid += ", ";
      valid += pass.name;
    }
    return invalid_argument("unknown pass '" + name + "' in --print-ir-after (valid passes: " +
                            valid + ")");
  }
  return Status::ok();
}

Status run_passes(ir::Graph& graph, std::span<const Pass> pipeline, const PassContext& context) {
  const PipelineOptions& options = context.options;
  std::vector<PassTiming> timings;
  double verify_seconds = 0;
  bool sorted = false;
  using Clock = std::chrono::steady_clock;
  for (const Pass& pass : pipeline) {
    auto start = Clock::now();
    Status status = pass.run(graph, context);
    timings.push_back({pass.name, std::chrono::duration<double>(Clock::now() - start).count()});
    if (!status.is_ok()) return status;
    sorted |= pass.sorts_nodes;
    if (options.verify_each) {
      auto verify_start = Clock::now();
      Status verified = ir::verify_graph(graph, /*require_topological=*/sorted);
      verify_seconds += std::chrono::duration<double>(Clock::now() - verify_start).count();
      if (!verified.is_ok()) {
        return internal_error("pass '" + std::string(pass.name) +
                              "' left an invalid graph: " + verified.message());
      }
    }
    if (wants_print_after(options, pass.name)) {
      log_stream(options) << "// ----- IR after " << pass.name << " -----\n"
                          << ir::print_graph(graph);
    }
  }
  if (options.time_report) print_time_report(log_stream(options), timings, verify_seconds);
  return Status::ok();
}

}  // namespace kiln::passes
