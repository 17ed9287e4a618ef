// libFuzzer target for the ONNX importer's external data (frontend/onnx/onnx_tensor.cpp): the
// bounds and size checks of initializers whose bytes live in a file next to the model.
//
// Input layout (tests/fuzz/make_corpus.py writes the seeds):
//   [4 bytes: model size M, little-endian][M bytes: a ModelProto][the rest: the data file]
// The rest is written to weights.bin in a directory of this process, the model's base directory;
// the seeds' initializers name that file with offsets and lengths, which the fuzzer mutates
// together with the file's size. A size M past the end takes the whole rest as the model.
//
// Any input must import to a graph or to clean diagnostics, without crashes or out-of-bounds
// reads (ASan/UBSan). Single-threaded, like every libFuzzer target: the directory is reused.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "frontend/onnx/onnx_importer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// The model's directory, made once per process and removed at exit. A plain array, not a
// std::string: the exit handler runs after the destructors of statics constructed later than
// its registration, which would include the string's.
char g_dir[] = "/tmp/kiln-fuzz-onnx-XXXXXX";

std::string base_dir() {
  static const bool made = [] {
    kiln::fuzz::require(mkdtemp(g_dir) != nullptr);
    std::atexit([] {
      const std::string weights = std::string(g_dir) + "/weights.bin";
      std::remove(weights.c_str());
      rmdir(g_dir);
    });
    return true;
  }();
  (void)made;
  return g_dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const size_t model_size = std::min<size_t>(size - 4, uint32_t(data[0]) | uint32_t(data[1]) << 8 |
                                                           uint32_t(data[2]) << 16 | uint32_t(data[3]) << 24);
  const auto model = std::as_bytes(std::span(data + 4, model_size));
  const std::span<const uint8_t> weights(data + 4 + model_size, size - 4 - model_size);
  {
    FILE* f = std::fopen((base_dir() + "/weights.bin").c_str(), "wb");
    kiln::fuzz::require(f != nullptr);
    kiln::fuzz::require(std::fwrite(weights.data(), 1, weights.size(), f) == weights.size());
    std::fclose(f);
  }
  kiln::Diagnostics diags(20);
  kiln::Result<kiln::ir::Graph> graph = kiln::onnx_import::import_onnx_bytes(model, "fuzz.onnx", base_dir(), diags);
  kiln::fuzz::require(graph.is_ok() != diags.has_errors());  // failure is always explained
  return 0;
}
