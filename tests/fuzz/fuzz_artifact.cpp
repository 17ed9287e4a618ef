// libFuzzer target for the artifact reader and loader: any byte string must load as a .kiln
// artifact (artifact::read_artifact) or fail with an explained error; an artifact that loads must
// create a session on the reference device and run on small random inputs, or fail with an
// explained error; never a crash, a hang, a leak or an out-of-bounds access (ASan/UBSan).
//
// Mutations are structure-aware (artifact_mutator.h), so most of them reach the reader's meaning
// checks, ir::verify_graph and the reference interpreter rather than stopping at the FlatBuffers
// verifier. Symbolic sizes are bound to 1-3 (chosen from the input, so a run is reproducible);
// a graph with a value of more than kMaxElements elements is loaded but not run, to keep each
// execution fast.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "artifact/reader.h"
#include "ir/shape.h"
#include "runtime/drivers/reference/reference_driver.h"
#include "runtime/session.h"
#include "tests/fuzz/artifact_mutator.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace kiln;

constexpr int64_t kMaxElements = 1 << 20;

// FNV-1a of the input: the seed of the symbol sizes and input values.
uint64_t input_hash(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

// The reference device, opened once per process (the fuzzer is single-threaded).
runtime::hal::Device& reference_device() {
  static const std::unique_ptr<runtime::hal::Driver> driver = runtime::reference::create_reference_driver();
  static const std::unique_ptr<runtime::hal::Device> device = [] {
    Result<std::unique_ptr<runtime::hal::Device>> opened = driver->open_device(runtime::reference::kReferenceDeviceId);
    fuzz::require(opened.is_ok());
    return std::move(opened).value();
  }();
  return *device;
}

// Every value's size with `bindings`, or false when one is unknown or larger than kMaxElements.
bool small_enough(const ir::Graph& graph, const ir::SymbolBindings& bindings) {
  for (const ir::Node& node : graph.nodes()) {
    Result<std::vector<int64_t>> shape = ir::resolve_shape(node.type.shape, bindings);
    if (!shape.is_ok()) return false;
    int64_t numel = 1;
    for (int64_t d : *shape)
      if (d < 0 || __builtin_mul_overflow(numel, d, &numel) || numel > kMaxElements) return false;
  }
  return true;
}

// Loads the artifact on the reference device and runs it once on random inputs.
void run_on_reference(std::shared_ptr<const artifact::LoadedArtifact> artifact, uint64_t seed) {
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(artifact, reference_device());
  fuzz::require_explained(session);
  if (!session.is_ok()) return;
  ir::SymbolBindings bindings;
  for (const runtime::TensorSpec& spec : (*session)->input_specs())
    for (const ir::Dim& dim : spec.type.shape)
      if (dim.is_symbolic()) bindings.emplace(dim.symbol_name(), int64_t(1 + (seed++ % 3)));
  if (!small_enough(artifact->graph, bindings)) return;
  std::vector<ir::Tensor> inputs;
  for (const runtime::TensorSpec& spec : (*session)->input_specs()) {
    Result<std::vector<int64_t>> shape = ir::resolve_shape(spec.type.shape, bindings);
    fuzz::require(shape.is_ok());  // every symbol of an input is bound above
    Result<ir::Tensor> tensor = ir::Tensor::zeros(spec.type.dtype, *shape);
    fuzz::require(tensor.is_ok());
    // Small integers: valid and invalid gather indices, slice bounds and divisors alike.
    for (int64_t i = 0; i < tensor->num_elements(); ++i)
      tensor->set_element_from_double(i, double(int64_t((seed = seed * 6364136223846793005ull + 1) >> 61) - 3));
    inputs.push_back(std::move(tensor).value());
  }
  Result<std::vector<ir::Tensor>> outputs = (*session)->run(inputs);
  fuzz::require_explained(outputs);
  if (outputs.is_ok()) fuzz::require(outputs->size() == (*session)->output_specs().size());
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return kiln::fuzz::mutate_artifact(data, size, max_size, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy in a vector: its storage is aligned like a mapped file's, and ASan sees its bounds.
  auto bytes = std::make_shared<const std::vector<uint8_t>>(data, data + size);
  Result<artifact::LoadedArtifact> loaded = artifact::read_artifact(bytes);
  fuzz::require_explained(loaded);
  if (!loaded.is_ok()) return 0;
  run_on_reference(std::make_shared<const artifact::LoadedArtifact>(std::move(loaded).value()),
                   input_hash(data, size));
  return 0;
}
