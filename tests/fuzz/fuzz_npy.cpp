// libFuzzer target for the .npy reader (ir/npy.h): any byte string must read to a tensor or to a
// clean error, without crashes or out-of-bounds reads (ASan/UBSan). A tensor that reads must
// survive the writer: written and read back, it is the same tensor (bf16 is written as f32 and
// converted back, the convention of ir/npy.h, which quiets a signaling NaN: bf16 NaNs compare by
// being NaN, not by their bits).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "ir/npy.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// Bit-identical, except that a bf16 NaN matches any NaN (see above).
bool same_after_round_trip(const kiln::ir::Tensor& original, const kiln::ir::Tensor& reread) {
  if (original.dtype() != kiln::ir::DType::kBF16) return kiln::fuzz::same_tensor(original, reread);
  if (reread.dtype() != original.dtype() || reread.shape() != original.shape()) return false;
  for (int64_t i = 0; i < original.num_elements(); ++i) {
    const double a = original.element_as_double(i), b = reread.element_as_double(i);
    if (std::isnan(a) ? !std::isnan(b) : std::memcmp(original.data() + 2 * i, reread.data() + 2 * i, 2) != 0)
      return false;
  }
  return true;
}

}  // namespace

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
  fuzz::require(same_after_round_trip(*tensor, *converted));
  return 0;
}
