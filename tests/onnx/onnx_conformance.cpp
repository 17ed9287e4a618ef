// The ONNX backend node-test runner. For every test directory (model.onnx + test_data_set_*/
// input_*.pb, output_*.pb) it does what `kilnc --target=T model.onnx` does in memory (import,
// the -O2 pipeline, code generation for the device's target, the .kiln artifact), loads that
// artifact with the runtime's C API (kiln/runtime.hpp), runs it on the chosen device for each
// data set and compares with the expected outputs (f32: rtol 1e-3, atol 1e-5; f16: rtol 4e-3,
// atol 1e-3; bf16: rtol 1.6e-2, atol 1e-2; NaN matches NaN; integers and bools exactly).
//
// A test is "unsupported" when the importer, code generation or the device rejects the model
// as something Kiln (or that device) does not support (an operator, attribute or dtype),
// "failed" on any other error or mismatch.
//
// Usage: kiln-onnx-conformance NODE_TEST_DIR [--device ID] [--expected FILE] [--exceptions FILE]
//                              [--write-passing FILE] [--filter S] [-O0|-O1|-O2] [-j N] [-v]
//   --device ID       reference (default; the runtime's reference interpreter), opencl:0,
//                     vulkan:0, ... When the device does not exist the run is skipped (exit 77),
//                     unless KILN_REQUIRE_DRIVERS names its driver: then it fails (exit 1).
//   --expected FILE   exits 1 when a test listed in FILE (one name a line, # comments) does
//                     not pass on this device ...
//   --exceptions FILE ... except tests listed there for this device's driver: lines
//                     "DRIVER TEST  # why", e.g. "vulkan test_foo  # ..." (a test that passes
//                     anyway is reported, so the list can shrink).
//   -O0|-O1|-O2       the pipeline's optimization level (default -O2, as kilnc's)
//   -j N              tests run on N threads (default: the hardware's threads), each with its
//                     own session; results are printed in name order.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "artifact/writer.h"
#include "codegen/target.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/shape.h"
#include "ir/tensor.h"
#include "kiln/runtime.hpp"
#include "passes/pipeline.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

constexpr int kSkipExitCode = 77;  // ctest's SKIP_RETURN_CODE for this test

enum class Outcome { kPassed, kFailed, kUnsupported };

struct TestResult {
  Outcome outcome = Outcome::kPassed;
  std::string detail;
};

bool mentions_support(const std::string& s) { return s.find("support") != std::string::npos; }

// Kiln computes f16 and bf16 ops in f32 and rounds what a kernel writes, where ONNX's reference
// rounds after every op: the two differ by a few units in the last place of the format (f16 has
// 11 significant bits, bf16 8), so their relative tolerance is about 4 and 2 ulps.
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance_of(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF16: return {4e-3, 1e-3};
    case ir::DType::kBF16: return {1.6e-2, 1e-2};
    default: return {1e-3, 1e-5};
  }
}

std::string compare(const ir::Tensor& got, const ir::Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return "dtype " + std::string(ir::dtype_name(got.dtype())) + ", expected " + std::string(ir::dtype_name(want.dtype()));
  }
  if (got.shape() != want.shape()) {
    return "shape " + ir::shape_to_string(ir::shape_of(got.shape())) + ", expected " +
           ir::shape_to_string(ir::shape_of(want.shape()));
  }
  const Tolerance tol = tolerance_of(want.dtype());
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    if (ir::is_float(want.dtype())) {
      const double g = got.element_as_double(i);
      const double w = want.element_as_double(i);
      if (std::isnan(w) && std::isnan(g)) continue;
      if (std::isinf(w) && g == w) continue;
      if (!(std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w))) {
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
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  // input_10.pb sorts after input_9.pb.
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    const std::string sa = a.filename().string(), sb = b.filename().string();
    return sa.size() != sb.size() ? sa.size() < sb.size() : sa < sb;
  });
  return out;
}

// What `kilnc --target=TARGET model.onnx` writes, in memory: the artifact's bytes. `target` is
// empty for the reference device (which needs no kernels). On failure, `diag_text` says why and
// `unsupported` whether it is something Kiln or the target does not support.
struct CompileError {
  std::string text;
  bool unsupported = false;
};

int g_opt_level = 2;  // set once by main before any test runs

Result<std::vector<uint8_t>> compile(const fs::path& dir, const onnx_import::ImportOptions& options,
                                     const std::string& target, CompileError& error) {
  Diagnostics diags(100);
  Result<ir::Graph> imported = onnx_import::import_onnx_file((dir / "model.onnx").string(), diags, options);
  if (!imported.is_ok()) {
    error.text = diags.has_errors() ? diags.to_string() : imported.status().message() + "\n";
    error.unsupported = mentions_support(error.text);
    return imported.status();
  }
  ir::Graph graph = std::move(imported).value();
  passes::PipelineOptions pipeline;
  pipeline.opt_level = g_opt_level;
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(graph, pipeline);
  if (!plan.is_ok()) {
    error.text = "pipeline: " + plan.status().message() + "\n";
    error.unsupported = plan.status().code() == ErrorCode::kUnsupported;
    return plan.status();
  }
  artifact::WriteOptions write_options;
  write_options.producer = "kiln-onnx-conformance";
  if (!target.empty()) {
    Result<std::unique_ptr<codegen::Target>> t = codegen::create_target(target);
    if (!t.is_ok()) {
      error.text = "codegen: " + t.status().message() + "\n";
      return t.status();
    }
    codegen::TargetOptions target_options;
    target_options.opt_level = g_opt_level;
    Result<codegen::CompiledKernels> compiled = codegen::compile_graph(**t, graph, *plan, target_options);
    if (!compiled.is_ok()) {
      error.text = "codegen (" + target + "): " + compiled.status().message() + "\n";
      error.unsupported = compiled.status().code() == ErrorCode::kUnsupported;
      return compiled.status();
    }
    write_options.kernels = std::move(compiled->kernels);
    write_options.modules = std::move(compiled->modules);
  }
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(graph, *plan, write_options);
  if (!bytes.is_ok()) {
    error.text = "artifact: " + bytes.status().message() + "\n";
    error.unsupported = bytes.status().code() == ErrorCode::kUnsupported;
  }
  return bytes;
}

// The runtime's failures: UNSUPPORTED (the device lacks a feature the artifact needs) counts as
// unsupported, anything else as failed.
TestResult runtime_failure(const std::string& what, const rt::Status& s) {
  return {s.code() == KILN_UNSUPPORTED ? Outcome::kUnsupported : Outcome::kFailed, what + ": " + s.to_string()};
}

// Loads the artifact, runs it on `device` with `inputs` and returns its outputs as tensors.
// ONNX before 1.13 stored bf16 test data as UINT16 tensors of the bits: read where the model has
// a bf16 value, such a tensor is that bf16 tensor.
ir::DType data_dtype(const ir::Tensor& t, ir::DType model_dtype) {
  return t.dtype() == ir::DType::kU16 && model_dtype == ir::DType::kBF16 ? ir::DType::kBF16 : t.dtype();
}

Result<std::vector<ir::Tensor>> run_on_device(const std::vector<uint8_t>& bytes, const std::string& device,
                                              const std::vector<ir::Tensor>& inputs, TestResult& failure) {
  auto fail = [&](const std::string& what, const rt::Status& s) -> Status {
    failure = runtime_failure(what, s);
    return internal_error(failure.detail);
  };
  rt::Result<rt::Artifact> art = rt::Artifact::load_memory(bytes.data(), bytes.size());
  if (!art.ok()) return fail("load", art.status());
  rt::Result<rt::Session> session = rt::Session::create(art.value(), device);
  if (!session.ok()) return fail("session on " + device, session.status());
  const std::vector<rt::TensorInfo> in_info = art.value().inputs();
  if (in_info.size() != inputs.size()) {
    failure = {Outcome::kFailed, "the artifact has " + std::to_string(in_info.size()) + " inputs, the data set " +
                                     std::to_string(inputs.size())};
    return internal_error(failure.detail);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Tensor& t = inputs[i];
    const ir::DType dtype = data_dtype(t, static_cast<ir::DType>(in_info[i].dtype));
    rt::Status s = session.value().set_input(in_info[i].name, static_cast<kiln_dtype>(dtype), t.shape(), t.data(),
                                             t.size_bytes());
    if (!s) return fail("input '" + in_info[i].name + "'", s);
  }
  rt::Status ran = session.value().run();
  if (!ran) return fail("run on " + device, ran);
  std::vector<ir::Tensor> outputs;
  for (const rt::TensorInfo& out : art.value().outputs()) {
    rt::Result<std::vector<int64_t>> shape = session.value().output_shape(out.name);
    if (!shape.ok()) return fail("output '" + out.name + "' shape", shape.status());
    rt::Result<std::vector<uint8_t>> data = session.value().output_bytes(out.name);
    if (!data.ok()) return fail("output '" + out.name + "'", data.status());
    Result<ir::Tensor> t = ir::Tensor::from_bytes(
        static_cast<ir::DType>(out.dtype), shape.value(),
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.value().data()), data.value().size()));
    if (!t.is_ok()) {
      failure = {Outcome::kFailed, "output '" + out.name + "': " + t.status().message()};
      return t.status();
    }
    outputs.push_back(std::move(t).value());
  }
  return outputs;
}

TestResult run_test(const fs::path& dir, const std::string& device, const std::string& target) {
  CompileError error;
  std::optional<std::vector<uint8_t>> plain;
  if (Result<std::vector<uint8_t>> bytes = compile(dir, {}, target, error); bytes.is_ok()) {
    plain = std::move(bytes).value();
  }
  // Shapes, axes, slice bounds and Resize's scales and roi fed as data must be known at compile
  // time: such a model is compiled once per data set with its integer and 1-D (or scalar)
  // inputs frozen to that set's values; tensors of higher rank stay run-time inputs.
  const bool freeze = !plain && error.text.find("must be a constant") != std::string::npos &&
                      error.text.find("training") == std::string::npos;
  if (!plain && !freeze) {
    return {error.unsupported ? Outcome::kUnsupported : Outcome::kFailed, "compile: " + error.text};
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
    std::vector<uint8_t> frozen_bytes;
    std::vector<ir::Tensor> runtime_inputs;
    if (freeze) {
      onnx_import::ImportOptions options;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const ir::DType d = inputs[i].dtype();
        if (d == ir::DType::kI64 || d == ir::DType::kI32 || inputs[i].rank() <= 1) {
          options.frozen_inputs[i] = inputs[i];
        } else {
          runtime_inputs.push_back(inputs[i]);
        }
      }
      CompileError frozen_error;
      Result<std::vector<uint8_t>> bytes = compile(dir, options, target, frozen_error);
      if (!bytes.is_ok()) {
        return {frozen_error.unsupported ? Outcome::kUnsupported : Outcome::kFailed,
                "compile (frozen inputs): " + frozen_error.text};
      }
      frozen_bytes = std::move(bytes).value();
    } else {
      runtime_inputs = inputs;
    }
    TestResult failure;
    Result<std::vector<ir::Tensor>> outputs =
        run_on_device(freeze ? frozen_bytes : *plain, device, runtime_inputs, failure);
    if (!outputs.is_ok()) return failure;
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
      if (data_dtype(*want, (*outputs)[i].dtype()) != want->dtype()) {
        want = ir::Tensor::from_bytes(ir::DType::kBF16, want->shape(), std::span(want->data(), want->size_bytes()));
        if (!want.is_ok()) return {Outcome::kFailed, "output: " + want.status().message()};
      }
      const std::string diff = compare((*outputs)[i], *want);
      if (!diff.empty()) return {Outcome::kFailed, set_dir.filename().string() + " output " + std::to_string(i) + ": " + diff};
    }
  }
  if (sets == 0) return {Outcome::kFailed, "no test_data_set_* directories"};
  return {};
}

std::string driver_of(const std::string& device) { return device.substr(0, device.find(':')); }

std::vector<std::string> required_drivers() {
  std::vector<std::string> out;
  const char* env = std::getenv("KILN_REQUIRE_DRIVERS");
  std::stringstream list(env ? env : "");
  std::string item;
  while (std::getline(list, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Why the driver named `driver` has no device ("" when unknown).
std::string driver_unavailable_reason(const std::string& driver) {
  size_t count = 0;
  if (kiln_driver_count(&count) != KILN_OK) return "";
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    const char* reason = nullptr;
    if (kiln_driver_get_info(i, &name, &reason) == KILN_OK && name && driver == name) return reason ? reason : "";
  }
  return "the runtime has no '" + driver + "' driver";
}

// Lines "NAME" (expected) or "DRIVER NAME  # why" (exceptions); '#' starts a comment.
Result<std::vector<std::vector<std::string>>> read_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read '" + path + "'");
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::vector<std::string> row;
    std::string w;
    while (words >> w) row.push_back(w);
    if (!row.empty()) rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: kiln-onnx-conformance NODE_TEST_DIR [--device ID] [--expected FILE] [--exceptions FILE]"
                 " [--write-passing FILE] [--filter S] [-O0|-O1|-O2] [-j N] [-v]\n";
    return 2;
  }
  const fs::path root = argv[1];
  std::string expected_path, exceptions_path, write_path, filter, device = "reference";
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  bool verbose = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--expected" && i + 1 < argc) expected_path = argv[++i];
    else if (a == "--exceptions" && i + 1 < argc) exceptions_path = argv[++i];
    else if (a == "--write-passing" && i + 1 < argc) write_path = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "-j" && i + 1 < argc) {
      const int n = std::atoi(argv[++i]);
      if (n < 1 || n > 256) { std::cerr << "kiln-onnx-conformance: -j needs 1..256\n"; return 2; }
      jobs = unsigned(n);
    } else if (a == "-O0" || a == "-O1" || a == "-O2") g_opt_level = a[2] - '0';
    else if (a == "-v") verbose = true;
    else { std::cerr << "kiln-onnx-conformance: unknown argument '" << a << "'\n"; return 2; }
  }
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    std::cerr << "kiln-onnx-conformance: '" << root.string() << "' is not a directory\n";
    return 2;
  }

  // The device: present, or skipped, or (when KILN_REQUIRE_DRIVERS names its driver) a failure.
  const std::string driver = driver_of(device);
  if (driver_unavailable_reason(driver).rfind("the runtime has no", 0) == 0) {
    std::cerr << "kiln-onnx-conformance: unknown device '" << device
              << "' (expected reference or DRIVER:N, e.g. opencl:0, vulkan:0, cuda:0)\n";
    return 2;
  }
  std::string target;
  if (driver != "reference") {
    const std::vector<std::string> targets = codegen::available_targets();
    if (std::find(targets.begin(), targets.end(), driver) == targets.end()) {
      const std::vector<std::string> required = required_drivers();
      const bool must = std::find(required.begin(), required.end(), driver) != required.end();
      std::cout << (must ? "FAILED" : "SKIPPED") << ": this build has no '" << driver << "' code-generation target"
                << (must ? " (KILN_REQUIRE_DRIVERS requires it)" : "") << "\n";
      return must ? 1 : kSkipExitCode;
    }
    target = driver;
  }
  rt::Result<std::vector<rt::DeviceInfo>> devices = rt::list_devices();
  if (!devices.ok()) {
    std::cout << "FAILED: listing devices: " << devices.status().to_string() << "\n";
    return 1;
  }
  std::optional<std::string> description;
  for (const rt::DeviceInfo& d : devices.value())
    if (d.id == device) description = d.description;
  if (!description) {
    const std::vector<std::string> required = required_drivers();
    const bool must = std::find(required.begin(), required.end(), driver) != required.end();
    std::string reason = driver_unavailable_reason(driver);
    std::cout << (must ? "FAILED" : "SKIPPED") << ": no device '" << device << "'"
              << (reason.empty() ? "" : " (" + reason + ")")
              << (must ? "; KILN_REQUIRE_DRIVERS requires the " + driver + " driver" : "") << "\n";
    return must ? 1 : kSkipExitCode;
  }
  std::cout << "device: " << device << " (" << *description << "), " << jobs << " threads\n";

  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::error_code model_ec;
    if (e.is_directory(model_ec) && fs::is_regular_file(e.path() / "model.onnx", model_ec) &&
        e.path().filename().string().find(filter) != std::string::npos) {
      tests.push_back(e.path());
    }
  }
  std::sort(tests.begin(), tests.end());

  const auto start = std::chrono::steady_clock::now();
  std::vector<TestResult> results(tests.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<size_t>(jobs, tests.size()); ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < tests.size(); i = next++) results[i] = run_test(tests[i], device, target);
    });
  }
  for (std::thread& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::set<std::string> passed_names;
  std::vector<std::pair<std::string, std::string>> failures, unsupported;
  for (size_t i = 0; i < tests.size(); ++i) {
    const std::string name = tests[i].filename().string();
    const TestResult& r = results[i];
    if (r.outcome == Outcome::kPassed) passed_names.insert(name);
    if (r.outcome == Outcome::kFailed) failures.emplace_back(name, r.detail);
    if (r.outcome == Outcome::kUnsupported) unsupported.emplace_back(name, r.detail);
  }
  auto line = [](const std::string& detail) {
    return detail + (detail.empty() || detail.back() != '\n' ? "\n" : "");
  };
  if (verbose) {
    for (const auto& [name, detail] : unsupported) std::cout << "UNSUPPORTED " << name << ": " << line(detail);
  }
  for (const auto& [name, detail] : failures) std::cout << "FAILED " << name << ": " << line(detail);
  std::cout << "device " << device << ": passed: " << passed_names.size() << ", failed: " << failures.size()
            << ", unsupported: " << unsupported.size() << " (" << tests.size() << " tests, " << std::fixed
            << std::setprecision(1) << seconds << " s)\n";
  if (!write_path.empty()) {
    std::ofstream out(write_path);
    for (const auto& n : passed_names) out << n << "\n";
    if (!out) {
      std::cerr << "kiln-onnx-conformance: cannot write '" << write_path << "'\n";
      return 2;
    }
  }

  int regressions = 0;
  if (!expected_path.empty()) {
    std::set<std::string> excepted;
    if (!exceptions_path.empty()) {
      Result<std::vector<std::vector<std::string>>> rows = read_list(exceptions_path);
      if (!rows.is_ok()) {
        std::cerr << "kiln-onnx-conformance: " << rows.status().message() << "\n";
        return 2;
      }
      for (const auto& row : *rows) {
        if (row.size() != 2) {
          std::cerr << "kiln-onnx-conformance: " << exceptions_path << ": expected 'DRIVER TEST  # why', got '"
                    << row[0] << " ...'\n";
          return 2;
        }
        if (row[0] == driver) excepted.insert(row[1]);
      }
    }
    Result<std::vector<std::vector<std::string>>> rows = read_list(expected_path);
    if (!rows.is_ok()) {
      std::cerr << "kiln-onnx-conformance: " << rows.status().message() << "\n";
      return 2;
    }
    size_t expected = 0;
    for (const auto& row : *rows) {
      const std::string& name = row[0];
      if (excepted.count(name)) {
        if (passed_names.count(name))
          std::cout << "NOTE " << name << " passes on " << device << " but is excepted for " << driver
                    << " in " << exceptions_path << ": remove the exception\n";
        continue;
      }
      ++expected;
      if (!passed_names.count(name)) {
        std::cout << "REGRESSION " << name << " is in the expected-pass list but did not pass on " << device << "\n";
        ++regressions;
      }
    }
    std::cout << expected << " tests expected to pass on " << device << " (" << excepted.size() << " excepted for "
              << driver << "), " << regressions << " did not\n";
  }
  return regressions > 0 ? 1 : 0;
}
