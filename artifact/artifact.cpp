#include "artifact/artifact.h"

#include <cstring>

namespace kiln::artifact {

namespace {

bool is_cubin_format(const std::string& format) {
  const std::string prefix = "cubin:sm_";
  return format.size() > prefix.size() && format.compare(0, prefix.size(), prefix) == 0 &&
         format.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
}

}  // namespace

bool is_kernel_format(const std::string& format) {
  return format == "opencl-c" || format == "spirv" || format == "ptx" || format == kModuleFormat ||
         is_cubin_format(format);
}

bool is_module_format(const std::string& format) { return format == "ptx" || is_cubin_format(format); }

Status check_gemm_call(const GemmCall& call, const std::vector<KernelArg>& args) {
  auto buffer_arg = [&](int64_t index, const char* what) -> Status {
    if (index < 0 || uint64_t(index) >= args.size())
      return invalid_argument(std::string("GEMM call: its ") + what + " argument " + std::to_string(index) +
                              " is out of range (the kernel has " + std::to_string(args.size()) + " arguments)");
    if (args[size_t(index)].kind != KernelArg::Kind::kBuffer)
      return invalid_argument(std::string("GEMM call: its ") + what + " argument is not a buffer");
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(buffer_arg(call.a_arg, "a"));
  KILN_RETURN_IF_ERROR(buffer_arg(call.b_arg, "b"));
  KILN_RETURN_IF_ERROR(buffer_arg(call.out_arg, "out"));
  if (call.bias_arg != -1) KILN_RETURN_IF_ERROR(buffer_arg(call.bias_arg, "bias"));
  if (call.out_arg == call.a_arg || call.out_arg == call.b_arg || int64_t(call.out_arg) == call.bias_arg)
    return invalid_argument("GEMM call: its output is also one of its operands");
  if (call.dtype != ir::DType::kF32 && call.dtype != ir::DType::kF16 && call.dtype != ir::DType::kBF16)
    return invalid_argument("GEMM call: dtype " + std::string(ir::dtype_name(call.dtype)) + " is not f32, f16 or bf16");
  if (call.allow_tf32 && call.dtype != ir::DType::kF32)
    return invalid_argument("GEMM call: allow_tf32 is set on a non-f32 GEMM");
  return Status::ok();
}

uint64_t blob_checksum(std::span<const uint8_t> blob, uint32_t format_version) {
  constexpr uint64_t kBasis = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  constexpr uint64_t kPrime = 0x100000001b3ull;       // FNV-1a 64 prime
  uint64_t hash = kBasis;
  size_t at = 0;
  if (format_version >= 3) {
    uint64_t lanes[4] = {kBasis, kBasis ^ 1, kBasis ^ 2, kBasis ^ 3};
    for (; at + 32 <= blob.size(); at += 32) {
      for (int lane = 0; lane < 4; ++lane) {
        uint64_t word;
        std::memcpy(&word, blob.data() + at + 8 * lane, 8);  // little-endian hosts only (as the format)
        lanes[lane] = (lanes[lane] ^ word) * kPrime;
      }
    }
    for (uint64_t lane : lanes) hash = (hash ^ lane) * kPrime;
  }
  for (; at < blob.size(); ++at) hash = (hash ^ blob[at]) * kPrime;
  return hash;
}

}  // namespace kiln::artifact
