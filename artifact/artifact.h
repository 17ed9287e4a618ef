// Types shared by the artifact writer and reader (the .kiln format, schema artifact/kiln.fbs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::artifact {

// The format version this build writes and the newest it can read. Bump it when a reader of the
// previous version could not run a new file correctly (see the rules atop kiln.fbs).
inline constexpr uint32_t kFormatVersion = 1;

// Every constant's bytes start at a multiple of this within the file.
inline constexpr size_t kConstantAlignment = 64;

// A compiled kernel for one target (PTX, cubin, SPIR-V, OpenCL C, ...), as produced by codegen
// and stored per target. The blob is opaque to the artifact layer; `format` tells the driver
// how to load it.
struct KernelBinary {
  std::string target;        // "cuda", "vulkan", "opencl"
  std::string kernel_name;   // the Graph kernel it implements (provenance name)
  uint32_t kernel_index = 0; // index into Graph::kernels()
  std::string format;        // e.g. "ptx", "cubin:sm_80", "spirv", "opencl-c"
  std::string entry_point;
  std::vector<uint8_t> blob;
  std::vector<std::string> required_features;

  bool operator==(const KernelBinary&) const = default;
};

}  // namespace kiln::artifact
