// The ONNX backend node-test runner: for every test directory (model.onnx + test_data_set_*/
// input_*.pb, output_*.pb) it imports the model, runs the -O2 pipeline, runs the reference
// interpreter on each data set and compares with the expected outputs (floats: rtol 1e-3,
// atol 1e-5, NaN matches NaN; integers and bools exactly).
//
// A test is "unsupported" when the importer rejects the model as unsupported (an operator,
// attribute or dtype Kiln does not have), "failed" on any other error or mismatch.
// Usage: kiln-onnx-conformance NODE_TEST_DIR [--expected FILE] [--write-passing FILE] [--filter S]
// With --expected, exits 1 when a test listed in FILE (one name a line, # comments) does not pass.
//
// Run mode (used by check_examples.py): kiln-onnx-conformance --run MODEL.onnx|MODEL.graph
//   [--input NAME=FILE.npy]... --output-dir DIR  compiles the model at -O2, runs the reference
//   interpreter and writes each output as DIR/NAME.npy.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_importer.h"
#include "frontend/parser.h"
#include "ir/npy.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

enum class Outcome { kPassed, kFailed, kUnsupported };

struct TestResult {
  Outcome outcome = Outcome::kPassed;
  std::string detail;
};

bool mentions_support(const std::string& s) { return s.find("support") != std::string::npos; }

std::string compare(const ir::Tensor& got, const ir::Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return "dtype " + std::string(ir::dtype_name(got.dtype())) + ", expected " + std::string(ir::dtype_name(want.dtype()));
  }
  if (got.shape() != want.shape()) {
    return "shape " + ir::shape_to_string(ir::shape_of(got.shape())) + ", expected " +
           ir::shape_to_string(ir::shape_of(want.shape()));
  }
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    if (ir::is_float(want.dtype())) {
      const double g = got.element_as_double(i);
      const double w = want.element_as_double(i);
      if (std::isnan(w) && std::isnan(g)) continue;
      if (std::isinf(w) && g == w) continue;
      if (!(std::fabs(g - w) <= 1e-5 + 1e-3 * std::fabs(w))) {
        return "element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " + std::to_string(w);
      }
    } else if (got.element_as_int(i) != want.element_as_int(i)) {
      return "element " + std::to_string(i) + " is " + std::to_string(got.element_as_int(i)) + ", expected " +
             std::to_string(want.element_as_int(i));
    }
  }
  return "";
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  // input_10.pb sorts after input_9.pb.
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    const std::string sa = a.filename().string(), sb = b.filename().string();
    return sa.size() != sb.size() ? sa.size() < sb.size() : sa < sb;
  });
  return out;
}

// Imports the model (freezing the given inputs) and runs the -O2 pipeline.
Result<ir::Graph> compile(const fs::path& dir, const onnx_import::ImportOptions& options, std::string& diag_text) {
  Diagnostics diags(100);
  Result<ir::Graph> imported = onnx_import::import_onnx_file((dir / "model.onnx").string(), diags, options);
  if (!imported.is_ok()) {
    diag_text = diags.has_errors() ? diags.to_string() : imported.status().message() + "\n";
    return imported.status();
  }
  ir::Graph graph = std::move(imported).value();
  passes::PipelineOptions pipeline;
  pipeline.opt_level = 2;
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(graph, pipeline);
  if (!plan.is_ok()) {
    diag_text = "pipeline: " + plan.status().message() + "\n";
    return plan.status();
  }
  return graph;
}

TestResult run_test(const fs::path& dir) {
  std::string diag_text;
  Result<ir::Graph> plain = compile(dir, {}, diag_text);
  // Shapes, axes and slice bounds fed as data must be known at compile time: such a model is
  // compiled once per data set with its integer inputs frozen to that set's values.
  const bool freeze = !plain.is_ok() && diag_text.find("must be a constant") != std::string::npos &&
                      diag_text.find("training") == std::string::npos;
  if (!plain.is_ok() && !freeze) {
    return {mentions_support(diag_text) ? Outcome::kUnsupported : Outcome::kFailed, "import: " + diag_text};
  }
  int sets = 0;
  for (const fs::path& set_dir : sorted_files(dir, "test_data_set_")) {
    ++sets;
    std::vector<ir::Tensor> inputs;
    for (const fs::path& p : sorted_files(set_dir, "input_")) {
      Result<ir::Tensor> t = onnx_import::read_tensor_proto_file(p.string());
      if (!t.is_ok()) {
        return {mentions_support(t.status().message()) ? Outcome::kUnsupported : Outcome::kFailed,
                "input: " + t.status().message()};
      }
      inputs.push_back(std::move(t).value());
    }
    std::optional<ir::Graph> frozen_graph;
    std::vector<ir::Tensor> runtime_inputs;
    if (freeze) {
      onnx_import::ImportOptions options;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const ir::DType d = inputs[i].dtype();
        if (d == ir::DType::kI64 || d == ir::DType::kI32 || inputs[i].rank() == 0) {
          options.frozen_inputs[i] = inputs[i];
        } else {
          runtime_inputs.push_back(inputs[i]);
        }
      }
      Result<ir::Graph> g = compile(dir, options, diag_text);
      if (!g.is_ok()) {
        return {mentions_support(diag_text) ? Outcome::kUnsupported : Outcome::kFailed, "import (frozen): " + diag_text};
      }
      frozen_graph = std::move(g).value();
    } else {
      runtime_inputs = inputs;
    }
    const ir::Graph& graph = freeze ? *frozen_graph : *plain;
    Result<std::vector<ir::Tensor>> outputs = ir::interpret(graph, runtime_inputs);
    if (!outputs.is_ok()) return {Outcome::kFailed, "interpret: " + outputs.status().message()};
    const auto expected_files = sorted_files(set_dir, "output_");
    if (expected_files.size() != outputs->size()) {
      return {Outcome::kFailed, "produced " + std::to_string(outputs->size()) + " outputs, expected " +
                                    std::to_string(expected_files.size())};
    }
    for (size_t i = 0; i < expected_files.size(); ++i) {
      Result<ir::Tensor> want = onnx_import::read_tensor_proto_file(expected_files[i].string());
      if (!want.is_ok()) {
        return {mentions_support(want.status().message()) ? Outcome::kUnsupported : Outcome::kFailed,
                "output: " + want.status().message()};
      }
      const std::string diff = compare((*outputs)[i], *want);
      if (!diff.empty()) return {Outcome::kFailed, set_dir.filename().string() + " output " + std::to_string(i) + ": " + diff};
    }
  }
  if (sets == 0) return {Outcome::kFailed, "no test_data_set_* directories"};
  return {};
}

int run_model(int argc, char** argv) {
  std::string model, out_dir;
  std::map<std::string, std::string> input_files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--run" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--output-dir" && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (a == "--input" && i + 1 < argc) {
      const std::string spec = argv[++i];
      const size_t eq = spec.find('=');
      if (eq == std::string::npos) { std::cerr << "--input needs NAME=FILE.npy\n"; return 2; }
      input_files[spec.substr(0, eq)] = spec.substr(eq + 1);
    } else {
      std::cerr << "kiln-onnx-conformance: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  Diagnostics diags;
  const bool is_onnx = model.size() > 5 && model.substr(model.size() - 5) == ".onnx";
  Result<ir::Graph> loaded = is_onnx ? onnx_import::import_onnx_file(model, diags)
                                     : frontend::parse_graph_file(model, diags);
  if (!loaded.is_ok()) {
    std::cerr << (diags.has_errors() ? diags.to_string() : loaded.status().to_string() + "\n");
    return 1;
  }
  ir::Graph graph = std::move(loaded).value();
  passes::PipelineOptions pipeline;
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(graph, pipeline);
  if (!plan.is_ok()) { std::cerr << plan.status().to_string() << "\n"; return 1; }
  std::vector<ir::Tensor> inputs;
  for (ir::NodeId id : graph.inputs()) {
    const std::string& name = graph.node(id).name;
    auto it = input_files.find(name);
    if (it == input_files.end()) { std::cerr << "missing --input " << name << "=FILE.npy\n"; return 1; }
    Result<ir::Tensor> t = ir::read_npy(it->second);
    if (!t.is_ok()) { std::cerr << t.status().to_string() << "\n"; return 1; }
    inputs.push_back(std::move(t).value());
  }
  Result<std::vector<ir::Tensor>> outputs = ir::interpret(graph, inputs);
  if (!outputs.is_ok()) { std::cerr << outputs.status().to_string() << "\n"; return 1; }
  for (size_t i = 0; i < outputs->size(); ++i) {
    Status s = ir::write_npy(out_dir + "/" + graph.outputs()[i].name + ".npy", (*outputs)[i]);
    if (!s.is_ok()) { std::cerr << s.to_string() << "\n"; return 1; }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--run") return run_model(argc, argv);
  if (argc < 2) {
    std::cerr << "usage: kiln-onnx-conformance NODE_TEST_DIR [--expected FILE] [--write-passing FILE] [--filter S] [-v]\n";
    return 2;
  }
  const fs::path root = argv[1];
  std::string expected_path, write_path, filter;
  bool verbose = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--expected" && i + 1 < argc) expected_path = argv[++i];
    else if (a == "--write-passing" && i + 1 < argc) write_path = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "-v") verbose = true;
    else { std::cerr << "kiln-onnx-conformance: unknown argument '" << a << "'\n"; return 2; }
  }
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    std::cerr << "kiln-onnx-conformance: '" << root.string() << "' is not a directory\n";
    return 2;
  }
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        e.path().filename().string().find(filter) != std::string::npos) {
      tests.push_back(e.path());
    }
  }
  std::sort(tests.begin(), tests.end());
  std::set<std::string> passed_names;
  std::vector<std::pair<std::string, std::string>> failures, unsupported;
  for (const fs::path& t : tests) {
    const std::string name = t.filename().string();
    TestResult r = run_test(t);
    if (r.outcome == Outcome::kPassed) passed_names.insert(name);
    if (r.outcome == Outcome::kFailed) failures.emplace_back(name, r.detail);
    if (r.outcome == Outcome::kUnsupported) unsupported.emplace_back(name, r.detail);
  }
  if (verbose) {
    for (const auto& [name, detail] : unsupported) std::cout << "UNSUPPORTED " << name << ": " << detail;
  }
  for (const auto& [name, detail] : failures) {
    std::cout << "FAILED " << name << ": " << detail << (detail.empty() || detail.back() != '\n' ? "\n" : "");
  }
  std::cout << "passed: " << passed_names.size() << "\nfailed: " << failures.size()
            << "\nunsupported: " << unsupported.size() << "\n";
  if (!write_path.empty()) {
    std::ofstream out(write_path);
    for (const auto& n : passed_names) out << n << "\n";
  }
  int regressions = 0;
  if (!expected_path.empty()) {
    std::ifstream in(expected_path);
    if (!in) {
      std::cerr << "kiln-onnx-conformance: cannot read '" << expected_path << "'\n";
      return 2;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      if (!passed_names.count(line)) {
        std::cout << "REGRESSION " << line << " is in the expected-pass list but did not pass\n";
        ++regressions;
      }
    }
  }
  std::cout << passed_names.size() << " passed, " << failures.size() << " failed\n";
  return regressions > 0 ? 1 : 0;
}
