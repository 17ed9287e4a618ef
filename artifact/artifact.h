// Types shared by the artifact writer and reader (the .kiln format, schema artifact/kiln.fbs).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "artifact/packed_layout.h"
#include "artifact/targets.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::artifact {

// The format version this build writes and the newest it can read. Bump it when a reader of the
// previous version could not run a new file correctly (see the rules atop kiln.fbs).
// 3: the constants moved out of the Model FlatBuffer into a data segment (layout atop kiln.fbs).
// 4: a 256-byte file header with room for a signature (artifact/signing.h); constants carry
//    checksums, checked at load.
// 5: checksums are over 1 MiB segments (blob_checksum), so that a reader can check one large
//    constant on several threads.
// 6: segments are hashed with XXH3-64 (xxHash) instead of FNV-1a lanes, about 2x faster.
inline constexpr uint32_t kFormatVersion = 6;
// The oldest format version the reader still reads (it converts older layouts on load).
inline constexpr uint32_t kOldestFormatVersion = 1;

// Every constant's bytes, the data segment and the model start at a multiple of this within the
// file.
inline constexpr size_t kConstantAlignment = 64;

// The size of the header part (the FileHeader FlatBuffer, zero-padded) of the files this build
// writes, and of a file of format `version` (3 on; 128 bytes in format 3).
inline constexpr size_t kFileHeaderBytes = 256;
constexpr size_t file_header_bytes(uint32_t version) { return version >= 4 ? kFileHeaderBytes : 128; }

// One parameter of a kernel's entry point, in order. This is the calling convention between
// codegen (which writes the kernel) and the runtime drivers (which bind and launch it):
//  - kBuffer: the device buffer holding value `value` (an ir::NodeId of the artifact's graph),
//    located through the plan (ir::ExecutionPlan::find_buffer): a graph input or output, a
//    constant, an arena slice at the value's offset, or, for Storage::kAlias, the buffer of
//    `alias_of`. OpenCL/CUDA: a global pointer; Vulkan: a storage-buffer binding (binding
//    number = the buffer's position among the kBuffer args, descriptor set 0).
//  - kSymbol: the run-time size bound to `symbol`. OpenCL: `long`; CUDA: `long long`;
//    Vulkan: one 32-bit `uint` in the push-constant block, in arg order.
struct KernelArg {
  enum class Kind : uint8_t { kBuffer = 0, kSymbol = 1 };
  Kind kind = Kind::kBuffer;
  uint32_t value = 0;
  std::string symbol;
  bool operator==(const KernelArg&) const = default;
};

// The parameters of graph kernel `kernel`'s entry point, by the calling convention above: one
// kBuffer arg per kernel input, then one per kernel output (Kernel::inputs, then
// Kernel::outputs, in order), then one kSymbol arg per distinct symbol that the shapes of those
// buffers, of the kernel's nodes and of their operands mention, sorted by name. Codegen builds
// every entry point from this list and the reader requires each binary's args to equal it, so a
// damaged or edited argument list (a buffer swapped, an output pointed at a constant, a size
// relabelled as a buffer) is refused at load instead of reaching a driver.
std::vector<KernelArg> kernel_signature(const ir::Graph& graph, const ir::Kernel& kernel);

// The 1-D dispatch of a kernel. The runtime launches
//   groups = clamp(ceil(work_items / items_per_group), 1, device limit)
// workgroups of `workgroup_size` threads; kernels loop (grid-stride) over the work units so any
// group count gives the same result.
struct KernelDispatch {
  ir::SizeExpr work_items;       // independent work units: elements, rows, output pixels, tiles
  uint32_t items_per_group = 1;  // units one workgroup covers per pass of its loop
  uint32_t workgroup_size = 64;  // threads per workgroup
  bool operator==(const KernelDispatch&) const = default;
};

// The rest of a kernel's elementwise epilogue after a vendor library call (GemmCall, ConvCall)
// that covers only its start: the library computes its part into the kernel's output, then the
// driver launches the kernel's function <entry_point><kLibraryEpilogueSuffix>, which finishes the
// epilogue in place, with these parameters (indices into KernelBinary::args, in order) and this
// dispatch. No args: the library's result is the kernel's.
struct LibraryEpilogue {
  std::vector<uint32_t> args;
  KernelDispatch dispatch;
  bool empty() const { return args.empty(); }
  bool operator==(const LibraryEpilogue&) const = default;
};
inline constexpr const char* kLibraryEpilogueSuffix = "_epilogue";

// The bytes of a kernel or module binary: owned (as codegen makes them and the writer takes
// them) or, in a loaded artifact, a view of the file's bytes that keeps them alive (a model's
// megabytes of cubins are not copied at every load). Immutable; copies share the bytes, so a
// Blob may be read from several threads at once.
class Blob {
 public:
  Blob() = default;
  Blob(std::vector<uint8_t> bytes);  // implicit: codegen's byte vectors are assigned to blobs
  // A view of `bytes`, which `owner` keeps alive.
  static Blob view(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner);

  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  const uint8_t* begin() const { return bytes_.data(); }
  const uint8_t* end() const { return bytes_.data() + bytes_.size(); }
  uint8_t operator[](size_t i) const { return bytes_[i]; }
  operator std::span<const uint8_t>() const { return bytes_; }
  bool operator==(const Blob& other) const;

 private:
  std::shared_ptr<const void> owner_;
  std::span<const uint8_t> bytes_;
};

// A matmul kernel that a driver may run through a vendor GEMM library (CUDA: cuBLASLt) instead
// of its generated code, which stays in the artifact as the fallback. Codegen records it when the
// kernel is, or starts with (then `in_place_epilogue` finishes it),
//   out[b] = epilogue(alpha * a[b] @ w[b] + residual[b] + bias)
// (row-major; bias optional, broadcast over rows; residual optional, shaped as out) with one
// dtype for a, w, bias, residual and out (f32, f16 or bf16) and f32 accumulation.
struct GemmCall {
  enum class Epilogue : uint8_t {
    kNone = 0,
    kRelu = 1,
    kGeluTanh = 2,  // 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))), the form cuBLASLt implements
  };
  // Indices into KernelBinary::args (each a kBuffer arg).
  uint32_t a_arg = 0;        // [batch?, m, k]
  uint32_t b_arg = 0;        // [batch?, k, n]
  uint32_t out_arg = 0;      // [batch?, m, n]
  int32_t bias_arg = -1;     // [n], or -1 for none
  int32_t residual_arg = -1; // [batch?, m, n], or -1 for none
  float alpha = 1.0f;        // the product's scale (x * s, or x / s for s a power of two, right after the matmul)
  ir::DType dtype = ir::DType::kF32;
  ir::SizeExpr batch;        // 1 for a plain matrix product
  ir::SizeExpr m, n, k;
  bool a_batched = true;     // false: one a matrix is shared by every batch entry
  bool b_batched = false;    // false: one b matrix (weights) is shared by every batch entry
  Epilogue epilogue = Epilogue::kNone;
  bool allow_tf32 = false;   // f32 only: kilnc --allow-tf32 (never the default)
  LibraryEpilogue in_place_epilogue;  // what follows the pattern above (exact gelu, ...), if anything
  bool operator==(const GemmCall&) const = default;
};

// A 2-D convolution kernel that a driver may run through a vendor DNN library (CUDA: cuDNN)
// instead of its generated code, which stays in the artifact as the fallback. Codegen records it
// when the kernel is, or starts with (then `in_place_epilogue` finishes it),
//   out = activation(conv2d(x, w) + bias + residual)    (NCHW or NHWC; bias and residual optional)
// with one dtype for every tensor (f32, f16 or bf16), f32 accumulation, and symmetric padding.
// The output's spatial size follows from the fields: (height + 2 pad_h - dilation_h (kernel_h - 1)
// - 1) / stride_h + 1, and likewise for the width.
struct ConvCall {
  // kClamp: min(max(x, clamp_min), clamp_max) (MobileNet's relu6), recorded only for targets
  // whose library fuses it (the cpu target's oneDNN; cuDNN's fused call takes relu only).
  enum class Activation : uint8_t { kNone = 0, kRelu = 1, kClamp = 2 };
  // Indices into KernelBinary::args (each a kBuffer arg).
  // Shapes in NCHW; with channels_last, x, out and residual are NHWC and w is
  // [out_channels, kernel_h, kernel_w, channels / groups].
  uint32_t x_arg = 0;        // [batch, channels, height, width]
  uint32_t w_arg = 0;        // [out_channels, channels / groups, kernel_h, kernel_w]
  uint32_t out_arg = 0;      // [batch, out_channels, out_h, out_w]
  int32_t bias_arg = -1;     // out_channels values, or -1 for none
  int32_t residual_arg = -1; // shaped as out, or -1 for none
  ir::DType dtype = ir::DType::kF32;
  ir::SizeExpr batch;
  int64_t channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel_h = 0, kernel_w = 0, groups = 1;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  Activation activation = Activation::kNone;
  float clamp_min = 0.0f, clamp_max = 0.0f;  // kClamp's bounds (a missing one: -inf or +inf)
  bool allow_tf32 = false;   // f32 only: kilnc --allow-tf32 (never the default)
  LibraryEpilogue in_place_epilogue;  // what follows the pattern above (relu6, SiLU, ...), if anything
  bool channels_last = false;
  // Set by the cpu target where its oneDNN primitive reads w in a blocked layout
  // (packed_layout.h; the source strides are w's): the writer stores w a second time in that
  // layout, and in a loaded artifact packed_weights are those bytes, which the cpu driver uses in
  // place when its oneDNN asks for the same layout (else it reorders w at load). Empty in
  // codegen's records and without a layout.
  std::optional<PackedLayout> packed_layout;
  Blob packed_weights;

  int64_t out_height() const { return (height + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1; }
  int64_t out_width() const { return (width + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1; }
  bool operator==(const ConvCall&) const = default;
};

// A compiled module holding the code of several kernels of one target. CUDA: a graph's unique
// kernels are split into a few NVRTC programs (compiled in parallel), each stored as one module
// `id`: one "ptx" module (always, for JIT on newer GPUs) and one "cubin:sm_XX" module per
// --gpu-arch. Its KernelBinary records have format "module", an empty blob, the module_id of the
// program holding them, and name their function in it by entry_point. A driver loads every module
// id, each from the cubin of its device's architecture, else from the PTX.
struct ModuleBinary {
  std::string target;  // kCudaTarget (artifact/targets.h)
  std::string format;  // "ptx", "cubin:sm_90", ...
  Blob blob;
  uint32_t id = 0;     // which module of the target: one id, one program, several formats
  bool operator==(const ModuleBinary&) const = default;
};

// A compiled kernel for one target (PTX, cubin, SPIR-V, OpenCL C, ...), as produced by codegen
// and stored per target. The blob is opaque to the artifact layer; `format` tells the driver
// how to load it. One kernel may have several binaries for a target, its variants for devices
// with different features (Vulkan: 8/16-bit storage, or the 32-bit-word fallback): they differ in
// required_features (the reader rejects two with the same set), and a driver runs the first, in
// file order, whose features its device has.
struct KernelBinary {
  std::string target;        // one of artifact/targets.h: "cuda", "vulkan", "opencl"
  std::string kernel_name;   // the Graph kernel it implements (provenance name)
  uint32_t kernel_index = 0; // index into Graph::kernels()
  std::string format;        // e.g. "ptx", "cubin:sm_80", "spirv", "opencl-c"
  std::string entry_point;
  Blob blob;
  std::vector<std::string> required_features;
  std::vector<KernelArg> args;  // the entry point's parameters, in order
  KernelDispatch dispatch;
  std::optional<GemmCall> gemm = std::nullopt;  // set when a vendor GEMM library may run this kernel
  uint32_t module_id = 0;        // format "module": the ModuleBinary::id holding entry_point
  std::optional<ConvCall> conv = std::nullopt;  // set when a vendor DNN library may run this kernel

  bool operator==(const KernelBinary&) const = default;
};

// Format strings the writer and reader accept. A kernel: "opencl-c", "spirv", "ptx",
// "cubin:sm_<digits>" or "module" (a function of its target's shared module: empty blob,
// non-empty entry_point, and the target must have a module of its module_id). A module: "ptx"
// (text without a terminating NUL) or "cubin:sm_<digits>", non-empty, at most one of each format
// per target and module id.
inline constexpr const char* kModuleFormat = "module";
bool is_kernel_format(const std::string& format);
bool is_module_format(const std::string& format);

// Checks a GemmCall against the args of its kernel: a, b, out (and bias unless -1) index
// kBuffer args, a float dtype, allow_tf32 only for f32. kInvalidArgument naming the fault.
Status check_gemm_call(const GemmCall& call, const std::vector<KernelArg>& args);

// The in-place epilogue of a kernel's library call (GEMM or conv), or nullptr when it has none.
const LibraryEpilogue* library_epilogue(const KernelBinary& binary);

// Checks a ConvCall likewise: buffer args, an output distinct from the operands, a float dtype,
// positive sizes, channels divisible by groups, a non-empty output, allow_tf32 only for f32.
Status check_conv_call(const ConvCall& call, const std::vector<KernelArg>& args);

// The checksum of a kernel or module blob, stored beside it so that the reader can reject a
// damaged kernel before a driver's compiler or loader sees it (drivers do not defend against
// garbage). Format 3 on: FNV-1a's step over 64-bit little-endian words in four interleaved
// lanes, then the tail bytes (about 10x faster: a few MB of cubins are checked at every load).
// Formats 1-2: FNV-1a (64-bit) byte by byte. Format 5 on: a hash of each kChecksumSegmentBytes
// segment (checksum_segment), folded in order (fold_segment_checksums), so that the segments of
// one blob can be hashed on several threads: a model's largest weight (MobileNetV2's 5 MB
// classifier) used to bound the time of the whole parallel check. The segment hash is the lane
// hash in format 5 and XXH3-64 from format 6 (reading the weights is most of what the check costs
// at load: 5-10 GB/s a core with FNV lanes, 13-20 with XXH3 on the 2-core machine).
uint64_t blob_checksum(std::span<const uint8_t> blob, uint32_t format_version = kFormatVersion);

inline constexpr size_t kChecksumSegmentBytes = size_t(1) << 20;
// Whether `format_version`'s checksums fold segments (then a blob's checksum is
// fold_segment_checksums over checksum_segment of each of its segments).
constexpr bool checksums_have_segments(uint32_t format_version) { return format_version >= 5; }
uint64_t checksum_segment(std::span<const uint8_t> segment, uint32_t format_version = kFormatVersion);
uint64_t fold_segment_checksums(std::span<const uint64_t> segment_checksums, size_t blob_bytes);

}  // namespace kiln::artifact
