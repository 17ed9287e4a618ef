// libFuzzer target for the safetensors reader (frontend/safetensors.h): any byte string must
// open to a file or to a clean error, without crashes or out-of-bounds reads (ASan/UBSan). Every
// entry of a file that opens must load (or be refused as an unsupported dtype), and the loaded
// tensors must survive the writer: encoded and opened again, each is the same tensor.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frontend/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  const auto* begin = reinterpret_cast<const std::byte*>(data);
  Result<frontend::SafetensorsFile> file =
      frontend::SafetensorsFile::from_bytes(std::vector<std::byte>(begin, begin + size), "fuzz.safetensors");
  fuzz::require_explained(file);
  if (!file.is_ok()) return 0;
  std::map<std::string, ir::Tensor> loaded;
  for (const auto& [name, entry] : file->entries()) {
    Result<ir::Tensor> tensor = file->load(name);
    fuzz::require(tensor.is_ok() == entry.dtype.has_value());
    fuzz::require_explained(tensor);
    if (tensor.is_ok()) loaded.emplace(name, std::move(tensor).value());
  }
  Result<frontend::SafetensorsFile> reopened =
      frontend::SafetensorsFile::from_bytes(frontend::encode_safetensors(loaded, file->metadata()), "re-encoded");
  fuzz::require(reopened.is_ok());
  fuzz::require(reopened->entries().size() == loaded.size() && reopened->metadata() == file->metadata());
  for (const auto& [name, tensor] : loaded) {
    Result<ir::Tensor> again = reopened->load(name);
    fuzz::require(again.is_ok() && fuzz::same_tensor(tensor, *again));
  }
  return 0;
}
