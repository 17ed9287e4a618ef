// kiln-interp-cases: runs the per-op cases written by tests/interp/gen_cases.py through the
// reference interpreter and compares with NumPy's answers.
//
// Usage: kiln-interp-cases CASES_DIR [NAME_SUBSTRING]
// Reads CASES_DIR/cases.txt ("NAME RTOL ATOL" per line); for each case parses NAME/model.graph,
// reads NAME/INPUT.npy per graph input, runs ir::interpret and compares every output with
// NAME/expected_OUTPUT.npy: integers and bools exactly, floats with |got - want| <= atol +
// rtol * |want| (NaN matches NaN, infinities match by sign). Prints one line per case and a
// final "N passed, M failed"; exits 1 if any case failed (or none ran).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/parser.h"
#include "ir/interpreter.h"
#include "ir/npy.h"

using namespace kiln;

namespace {

struct CaseSpec {
  std::string name;
  double rtol = 0;
  double atol = 0;
};

std::string type_string(const ir::Tensor& t) {
  std::string s(ir::dtype_name(t.dtype()));
  s += "[";
  for (size_t i = 0; i < t.shape().size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape()[i]);
  return s + "]";
}

// Empty when `got` matches `want`; otherwise what differs.
std::string compare(const ir::Tensor& got, const ir::Tensor& want, const CaseSpec& spec) {
  const bool bf16_as_f32 = got.dtype() == ir::DType::kBF16 && want.dtype() == ir::DType::kF32;
  if ((got.dtype() != want.dtype() && !bf16_as_f32) || got.shape() != want.shape()) {
    return "got " + type_string(got) + ", expected " + type_string(want);
  }
  const bool floating = ir::is_float(got.dtype());
  int64_t mismatches = 0;
  std::string first;
  double worst = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    bool ok;
    double g, w;
    if (floating) {
      g = got.element_as_double(i);
      w = want.element_as_double(i);
      if (std::isnan(w) || std::isnan(g)) {
        ok = std::isnan(w) && std::isnan(g);
      } else if (std::isinf(w) || std::isinf(g)) {
        ok = g == w;
      } else {
        const double err = std::fabs(g - w);
        ok = err <= spec.atol + spec.rtol * std::fabs(w);
        if (!ok) worst = std::max(worst, err);
      }
    } else {
      g = double(got.element_as_int(i));
      w = double(want.element_as_int(i));
      ok = got.element_as_int(i) == want.element_as_int(i);
    }
    if (!ok) {
      if (mismatches++ == 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "element %lld: got %.9g, expected %.9g", static_cast<long long>(i), g, w);
        first = buf;
      }
    }
  }
  if (mismatches == 0) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, " (%lld mismatches, worst abs error %.3g)", static_cast<long long>(mismatches), worst);
  return first + buf;
}

// Runs one case; returns "" on success or the failure reason.
std::string run_case(const std::string& dir, const CaseSpec& spec) {
  const std::string case_dir = dir + "/" + spec.name;
  Diagnostics diags;
  Result<ir::Graph> graph = frontend::parse_graph_file(case_dir + "/model.graph", diags);
  if (!graph.is_ok() || diags.has_errors()) {
    return "parse failed: " + (diags.has_errors() ? diags.to_string() : graph.status().to_string());
  }
  std::vector<ir::Tensor> inputs;
  for (ir::NodeId id : graph->inputs()) {
    const ir::Node& node = graph->node(id);
    Result<ir::Tensor> t = ir::read_npy(case_dir + "/" + node.name + ".npy");
    if (!t.is_ok()) return "input '" + node.name + "': " + t.status().to_string();
    Result<ir::Tensor> converted = ir::convert_npy_tensor(*t, node.type.dtype);
    if (!converted.is_ok()) return "input '" + node.name + "': " + converted.status().to_string();
    inputs.push_back(std::move(converted).value());
  }
  Result<std::vector<ir::Tensor>> outputs = ir::interpret(*graph, inputs);
  if (!outputs.is_ok()) return "interpret failed: " + outputs.status().to_string();
  if (outputs->size() != graph->outputs().size()) return "wrong number of outputs";
  for (size_t i = 0; i < outputs->size(); ++i) {
    const std::string& name = graph->outputs()[i].name;
    Result<ir::Tensor> want = ir::read_npy(case_dir + "/expected_" + name + ".npy");
    if (!want.is_ok()) return "expected '" + name + "': " + want.status().to_string();
    std::string diff = compare((*outputs)[i], *want, spec);
    if (!diff.empty()) return "output '" + name + "': " + diff;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: kiln-interp-cases CASES_DIR [NAME_SUBSTRING]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string filter = argc == 3 ? argv[2] : "";
  std::ifstream manifest(dir + "/cases.txt");
  if (!manifest) {
    std::fprintf(stderr, "kiln-interp-cases: cannot read %s/cases.txt (run gen_cases.py first)\n", dir.c_str());
    return 1;
  }
  int passed = 0, failed = 0;
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream fields(line);
    CaseSpec spec;
    if (!(fields >> spec.name >> spec.rtol >> spec.atol)) continue;
    if (!filter.empty() && spec.name.find(filter) == std::string::npos) continue;
    const std::string failure = run_case(dir, spec);
    if (failure.empty()) {
      ++passed;
      std::printf("PASS %s\n", spec.name.c_str());
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", spec.name.c_str(), failure.c_str());
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return (failed == 0 && passed > 0) ? 0 : 1;
}
