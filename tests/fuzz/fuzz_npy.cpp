// libFuzzer target for the .npy reader (ir/npy.h): any byte string must read to a tensor or to a
// clean error, without crashes or out-of-bounds reads (ASan/UBSan). A tensor that reads must
// survive the writer: written and read back, it is the same tensor (bf16 is written as f32 and
// converted back, the convention of ir/npy.h).
#include <cstddef>
#include <cstdint>
#include <span>

#include "ir/npy.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  Result<ir::Tensor> tensor = ir::read_npy_bytes(std::span(data, size));
  fuzz::require_explained(tensor);
  if (!tensor.is_ok()) return 0;
  fuzz::require(tensor->size_bytes() == size_t(tensor->num_elements()) * ir::dtype_size(tensor->dtype()));
  const std::vector<uint8_t> written = ir::to_npy_bytes(*tensor);
  Result<ir::Tensor> reread = ir::read_npy_bytes(written);
  fuzz::require(reread.is_ok());
  Result<ir::Tensor> converted = ir::convert_npy_tensor(*reread, tensor->dtype());
  fuzz::require(converted.is_ok());
  fuzz::require(fuzz::same_tensor(*tensor, *converted));
  return 0;
}
