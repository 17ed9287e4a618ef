#include "artifact/artifact.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

// xxHash compiled into this file (header-only): the runtime then needs no libxxhash at run time,
// and the hash inlines into the checksum loops.
#define XXH_INLINE_ALL
#include <xxhash.h>

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

bool is_module_format(const std::string& format) {
  return format == "ptx" || is_cubin_format(format) || format == kCpuModuleFormatX86_64 || format == kCpuModuleFormatAarch64;
}

namespace {

using Operands = std::vector<std::pair<int64_t, const char*>>;

// Each index names a kBuffer arg (an optional operand may be -1, absent); the output is none of
// the operands.
Status check_call_args(const char* call, const Operands& required, const Operands& optional, int64_t out,
                       const std::vector<KernelArg>& args) {
  auto buffer_arg = [&](int64_t index, const char* what) -> Status {
    if (index < 0 || uint64_t(index) >= args.size())
      return invalid_argument(std::string(call) + ": its " + what + " argument " + std::to_string(index) +
                              " is out of range (the kernel has " + std::to_string(args.size()) + " arguments)");
    if (args[size_t(index)].kind != KernelArg::Kind::kBuffer)
      return invalid_argument(std::string(call) + ": its " + what + " argument is not a buffer");
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(buffer_arg(out, "out"));
  for (const Operands* list : {&required, &optional}) {
    for (const auto& [index, what] : *list) {
      if (index == -1 && list == &optional) continue;
      KILN_RETURN_IF_ERROR(buffer_arg(index, what));
      if (index == out) return invalid_argument(std::string(call) + ": its output is also one of its operands");
    }
  }
  return Status::ok();
}

Status check_call_dtype(const char* call, ir::DType dtype, bool allow_tf32) {
  if (dtype != ir::DType::kF32 && dtype != ir::DType::kF16 && dtype != ir::DType::kBF16)
    return invalid_argument(std::string(call) + ": dtype " + std::string(ir::dtype_name(dtype)) +
                            " is not f32, f16 or bf16");
  if (allow_tf32 && dtype != ir::DType::kF32)
    return invalid_argument(std::string(call) + ": allow_tf32 is set on a non-f32 call");
  return Status::ok();
}

Status check_library_epilogue(const char* call, const LibraryEpilogue& epilogue, const std::vector<KernelArg>& args) {
  for (uint32_t index : epilogue.args)
    if (index >= args.size())
      return invalid_argument(std::string(call) + ": epilogue argument " + std::to_string(index) + " is out of range");
  if (!epilogue.empty() && (epilogue.dispatch.items_per_group == 0 || epilogue.dispatch.workgroup_size == 0))
    return invalid_argument(std::string(call) + ": its epilogue has a zero dispatch size");
  return Status::ok();
}

}  // namespace

const LibraryEpilogue* library_epilogue(const KernelBinary& binary) {
  if (binary.gemm && !binary.gemm->in_place_epilogue.empty()) return &binary.gemm->in_place_epilogue;
  if (binary.conv && !binary.conv->in_place_epilogue.empty()) return &binary.conv->in_place_epilogue;
  return nullptr;
}

Status check_gemm_call(const GemmCall& call, const std::vector<KernelArg>& args) {
  KILN_RETURN_IF_ERROR(check_call_args(
      "GEMM call", {{call.a_arg, "a"}, {call.b_arg, "b"}}, {{call.bias_arg, "bias"}, {call.residual_arg, "residual"}},
      call.out_arg, args));
  if (!std::isfinite(call.alpha)) return invalid_argument("GEMM call: alpha is not finite");
  KILN_RETURN_IF_ERROR(check_call_dtype("GEMM call", call.dtype, call.allow_tf32));
  return check_library_epilogue("GEMM call", call.in_place_epilogue, args);
}

Status check_conv_call(const ConvCall& call, const std::vector<KernelArg>& args) {
  KILN_RETURN_IF_ERROR(check_call_args(
      "conv call", {{call.x_arg, "x"}, {call.w_arg, "w"}},
      {{call.bias_arg, "bias"}, {call.residual_arg, "residual"}}, call.out_arg, args));
  KILN_RETURN_IF_ERROR(check_call_dtype("conv call", call.dtype, call.allow_tf32));
  for (int64_t v : {call.channels, call.height, call.width, call.out_channels, call.kernel_h, call.kernel_w,
                    call.groups, call.stride_h, call.stride_w, call.dilation_h, call.dilation_w})
    if (v < 1 || v > 0x7fffffff) return invalid_argument("conv call: a size, stride or dilation is out of range");
  if (call.pad_h < 0 || call.pad_w < 0 || call.pad_h > 0x7fffffff || call.pad_w > 0x7fffffff)
    return invalid_argument("conv call: a padding is out of range");
  if (call.channels % call.groups != 0 || call.out_channels % call.groups != 0)
    return invalid_argument("conv call: the channels are not divisible by the groups");
  if (call.out_height() < 1 || call.out_width() < 1) return invalid_argument("conv call: the output is empty");
  return check_library_epilogue("conv call", call.in_place_epilogue, args);
}

std::vector<KernelArg> kernel_signature(const ir::Graph& graph, const ir::Kernel& kernel) {
  std::vector<KernelArg> args;
  std::set<std::string> symbols;
  auto collect_symbols = [&](const ir::Shape& shape) {
    for (const ir::Dim& d : shape)
      if (d.is_symbolic())
        for (const std::string& symbol : d.symbol_factors()) symbols.insert(symbol);
  };
  for (const std::vector<ir::NodeId>* list : {&kernel.inputs, &kernel.outputs}) {
    for (ir::NodeId value : *list) {
      args.push_back({KernelArg::Kind::kBuffer, value, ""});
      collect_symbols(graph.node(value).type.shape);
    }
  }
  for (ir::NodeId n : kernel.nodes) {
    collect_symbols(graph.node(n).type.shape);
    for (ir::NodeId in : graph.node(n).inputs) collect_symbols(graph.node(in).type.shape);
  }
  for (const std::string& symbol : symbols) args.push_back({KernelArg::Kind::kSymbol, 0, symbol});
  return args;
}

Blob::Blob(std::vector<uint8_t> bytes) {
  if (bytes.empty()) return;
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  bytes_ = std::span<const uint8_t>(owned->data(), owned->size());
  owner_ = std::move(owned);
}

Blob Blob::view(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner) {
  Blob blob;
  blob.bytes_ = bytes;
  blob.owner_ = std::move(owner);
  return blob;
}

bool Blob::operator==(const Blob& other) const { return std::ranges::equal(bytes_, other.bytes_); }

namespace {

constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
constexpr uint64_t kFnvPrime = 0x100000001b3ull;       // FNV-1a 64 prime

// FNV-1a's step over 64-bit little-endian words in four interleaved lanes, then the tail bytes
// (formats 3-4 for a whole blob, format 5 for a segment). Formats 1-2 (`lanes` false): byte by byte.
uint64_t fnv_hash(std::span<const uint8_t> blob, bool lanes) {
  uint64_t hash = kFnvBasis;
  size_t at = 0;
  if (lanes) {
    uint64_t lane_hash[4] = {kFnvBasis, kFnvBasis ^ 1, kFnvBasis ^ 2, kFnvBasis ^ 3};
    for (; at + 32 <= blob.size(); at += 32) {
      for (int lane = 0; lane < 4; ++lane) {
        uint64_t word;
        std::memcpy(&word, blob.data() + at + 8 * lane, 8);  // little-endian hosts only (as the format)
        lane_hash[lane] = (lane_hash[lane] ^ word) * kFnvPrime;
      }
    }
    for (uint64_t lane : lane_hash) hash = (hash ^ lane) * kFnvPrime;
  }
  for (; at < blob.size(); ++at) hash = (hash ^ blob[at]) * kFnvPrime;
  return hash;
}

}  // namespace

uint64_t checksum_segment(std::span<const uint8_t> segment, uint32_t format_version) {
  if (format_version >= 6) return XXH3_64bits(segment.data(), segment.size());
  return fnv_hash(segment, /*lanes=*/true);
}

uint64_t fold_segment_checksums(std::span<const uint64_t> segment_checksums, size_t blob_bytes) {
  uint64_t hash = kFnvBasis;
  for (uint64_t segment : segment_checksums) hash = (hash ^ segment) * kFnvPrime;
  return (hash ^ uint64_t(blob_bytes)) * kFnvPrime;
}

uint64_t blob_checksum(std::span<const uint8_t> blob, uint32_t format_version) {
  if (!checksums_have_segments(format_version)) return fnv_hash(blob, /*lanes=*/format_version >= 3);
  std::vector<uint64_t> segments;
  segments.reserve(blob.size() / kChecksumSegmentBytes + 1);
  for (size_t at = 0; at < blob.size(); at += kChecksumSegmentBytes)
    segments.push_back(
        checksum_segment(blob.subspan(at, std::min(kChecksumSegmentBytes, blob.size() - at)), format_version));
  return fold_segment_checksums(segments, blob.size());
}

}  // namespace kiln::artifact
