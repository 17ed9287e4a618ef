// End-to-end checks of the pipeline on real .graph files: every example and every golden test
// input is compiled at -O0, -O1, -O2 and -O2 -fno-fuse; the result must verify, have a plan
// with one launch per kernel, and compute what the unoptimized graph computes (reference
// interpreter, symbols bound to 3).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "frontend/parser.h"
#include "test_passes_helpers.h"

namespace kiln::passes {
namespace {

std::vector<std::string> graph_files() {
  std::vector<std::string> files;
  for (const char* dir : {"/examples", "/tests/golden"}) {
    std::filesystem::path root = std::filesystem::path(KILN_SOURCE_DIR + std::string(dir));
    if (!std::filesystem::exists(root)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(root)) {
      if (entry.path().extension() == ".graph") files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool small_enough_to_interpret(const ir::Graph& graph) {
  for (ir::NodeId id : graph.inputs()) {
    int64_t elements = 1;
    for (const ir::Dim& d : graph.node(id).type.shape) elements *= d.is_static() ? d.size() : 3;
    if (elements > (int64_t(1) << 16)) return false;
  }
  return true;
}

TEST_CASE("passes examples: every example and golden graph compiles and keeps its results") {
  std::vector<std::string> files = graph_files();
  REQUIRE(!files.empty());
  for (const std::string& file : files) {
    Diagnostics diags;
    Result<ir::Graph> parsed = frontend::parse_graph_file(file, diags);
    INFO(file << "\n" << diags.to_string());
    REQUIRE(parsed.is_ok());
    for (PipelineOptions options : {testing::options_at(0), testing::options_at(1),
                                    testing::options_at(2), testing::options_at(2, false)}) {
      INFO("-O" << options.opt_level << (options.fuse ? "" : " -fno-fuse"));
      ir::Graph graph = parsed->clone();
      ir::ExecutionPlan plan = testing::compile(graph, options);
      CHECK(plan.launches.size() == graph.kernels().size());
      CHECK(!print_plan(graph, plan).empty());
      if (small_enough_to_interpret(*parsed)) testing::check_same_results(*parsed, graph, 1e-4);
    }
  }
}

}  // namespace
}  // namespace kiln::passes
