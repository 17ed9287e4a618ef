// Writes the .kiln artifact (layout and schema: artifact/kiln.fbs): a header, the constants'
// bytes (each 64-byte aligned so the runtime can use them in place), then a FlatBuffer with the
// format version, the I/O signature, the optimized graph, the execution plan, and kernels per
// target.
//
// Thread-safety: the functions are pure functions of their arguments; an ArtifactFileWriter is
// used by one thread at a time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/signing.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "support/status.h"
#include "support/version.h"

namespace kiln::artifact {

struct WriteOptions {
  // Recorded in the file: the program and Kiln version that wrote it (kilnc: "kilnc 0.1.0").
  std::string producer = std::string("kiln ") + kVersion;
  std::vector<KernelBinary> kernels;   // compiled kernels for every target (may be empty)
  std::vector<ModuleBinary> modules;   // shared modules for every target (may be empty)
  // Signs the file with this key (artifact/signing.h) when set. Not owned: it must outlive the
  // write. ArtifactFileWriter takes its key in begin() (the header holding the signature is
  // written first) and refuses a different one here.
  const SigningKey* signing_key = nullptr;
};

// Where a graph's constants go in the data segment: constant i at offsets[i] (a multiple of 64),
// sizes[i] bytes, with checksum checksums[i] (blob_checksum, taken while the bytes are in memory:
// ArtifactFileWriter swaps them for views of the written file, which reading them again would
// bring back into memory); the model part starts at model_offset.
// After the constants come the packed weights (ConvCall::packed_layout): one entry per distinct
// (source constant, layout), whose checksum is taken as it is packed and written; packed_of maps
// a kernel binary's index in WriteOptions::kernels to its entry.
struct DataLayout {
  std::vector<uint64_t> offsets, sizes, checksums;
  struct Packed {
    uint32_t constant = 0;
    PackedLayout layout;
    uint64_t offset = 0, size = 0, checksum = 0;
  };
  std::vector<Packed> packed;
  std::map<size_t, size_t> packed_of;
  uint64_t data_size = 0;
  uint64_t model_offset = 0;
};

// The whole file in memory. The graph must be compacted (no erased nodes). Fails with
// kInvalidArgument if the graph or plan reference something out of range, and kUnsupported if
// the kernels exceed FlatBuffers' 2 GiB limit (the constants have none).
Result<std::vector<uint8_t>> write_artifact(const ir::Graph& graph, const ir::ExecutionPlan& plan);
Result<std::vector<uint8_t>> write_artifact(const ir::Graph& graph, const ir::ExecutionPlan& plan,
                                            const WriteOptions& options);

// Writes an artifact file in two steps, so that the constants can leave memory before code
// generation (kilnc's peak memory): begin() writes the header and every constant's bytes,
// map_constants() may then swap the graph's constants for views of the written file, and
// finish() writes the rest. The constants must not change in between.
// finish() packs the kernels' packed weights from the (mapped) constants and appends them to the
// data segment, then rewrites the header to cover them.
// A path is written through a temporary file beside it that finish() renames into place, so that
// a failed or abandoned compile leaves neither a partial artifact nor a damaged older one; "-"
// streams to stdout, all of it in finish(). With a signing key, finish() signs the file before the rename (a signed
// artifact cannot be streamed to stdout: the signature covers the whole file).
class ArtifactFileWriter {
 public:
  static Result<std::unique_ptr<ArtifactFileWriter>> begin(const std::string& path, const ir::Graph& graph,
                                                           const SigningKey* signing_key = nullptr);
  // Removes the temporary file unless finish() succeeded.
  ~ArtifactFileWriter();
  ArtifactFileWriter(const ArtifactFileWriter&) = delete;
  ArtifactFileWriter& operator=(const ArtifactFileWriter&) = delete;

  // Rebinds every constant of `graph` to a read-only view of its bytes in the written file (a
  // shared mapping that the views keep alive), so that the memory holding them can be freed.
  // Same bytes; nothing happens for stdout or when the file cannot be mapped.
  Status map_constants(ir::Graph& graph);
  Status finish(const ir::Graph& graph, const ir::ExecutionPlan& plan, const WriteOptions& options);

 private:
  ArtifactFileWriter() = default;
  Status sign_file(int fd);
  std::string path_, temp_path_;
  std::FILE* file_ = nullptr;
  DataLayout layout_;
  bool data_written_ = false;  // begin() wrote the header and the constants (not for stdout)
  uint64_t position_ = 0;      // where the file's next byte goes
  // map_constants()'s shared mapping of the file and its length (kept, so that finish() may
  // release its pages).
  std::shared_ptr<const void> mapping_;
  size_t mapped_length_ = 0;
  std::optional<SigningKey> signing_key_;
  size_t signature_offset_ = 0;  // where the signature goes in the file (0: unsigned)
};

// begin() + finish() in one call.
Status write_artifact_file(const std::string& path, const ir::Graph& graph, const ir::ExecutionPlan& plan,
                           const WriteOptions& options);

}  // namespace kiln::artifact
