// Reads a .kiln artifact (schema artifact/kiln.fbs) back into an ir::Graph, an ir::ExecutionPlan
// and the kernel binaries per target.
//
// Loading never trusts the file: it checks the identifier and the format version, runs the
// FlatBuffers Verifier over the whole buffer, then checks the meaning of everything it converts
// (enum values, node and kernel ids in range, attributes matching each op kind, constant sizes
// matching their types, plan references, the recorded file size) and finally runs
// ir::verify_graph. A truncated, corrupted or foreign file gives kCorrupt, a newer format
// version kInvalidArgument, each with a message saying what is wrong; it never crashes or reads
// out of bounds.
//
// Files are memory-mapped, not read: a constant's bytes are paged in when a driver uploads it.
//
// Ownership: the LoadedArtifact keeps the file's bytes alive (`bytes`); constants whose data is
// suitably aligned in memory are ir::Tensor views into those bytes (no copy), the others are
// copied. A LoadedArtifact is immutable after loading: share it as
// std::shared_ptr<const LoadedArtifact> between sessions and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/signing.h"
#include "ir/graph.h"
#include "ir/plan.h"
#include "support/status.h"

namespace kiln::artifact {

// An artifact's bytes and what keeps them alive (a vector, a memory mapping, a caller's buffer).
struct ArtifactBytes {
  std::span<const uint8_t> data;
  std::shared_ptr<const void> owner;
};

// How much to trust a file beyond its integrity checks (docs/security.md).
struct ReadOptions {
  // Not empty: the file must carry a valid signature by one of these keys (artifact/signing.h);
  // an unsigned file, another signer or any changed byte is kUntrusted, refused before the rest
  // of the file is parsed.
  std::vector<PublicKey> trusted_keys;
};

struct LoadedArtifact {
  uint32_t format_version = 0;
  std::string producer;
  // The signer the file's header names (format 4 on), if any. Checked only when the reader was
  // given trusted keys (signature_verified); otherwise informational.
  std::optional<PublicKey> signer;
  bool signature_verified = false;
  ir::Graph graph;  // the optimized graph with its kernels and constants
  ir::ExecutionPlan plan;
  std::vector<KernelBinary> kernels;  // every target's compiled kernels
  std::vector<ModuleBinary> modules;  // every target's shared modules (CUDA: PTX, cubins)
  ArtifactBytes bytes;  // the file; constant views point into it

  // Names of the targets that have compiled kernels, in file order.
  std::vector<std::string> targets() const;
};

// Parses an artifact held in memory. `bytes` may be null or empty (an error, not a crash).
Result<LoadedArtifact> read_artifact(std::shared_ptr<const std::vector<uint8_t>> bytes,
                                     const ReadOptions& options = {});
Result<LoadedArtifact> read_artifact(ArtifactBytes bytes, const ReadOptions& options = {});

// Maps a file (read-only, private) and parses it. A missing or unreadable file is kNotFound /
// kInvalidArgument naming the path; so is one that is not a regular file (a directory, a FIFO,
// a device), refused before anything is read.
Result<LoadedArtifact> read_artifact_file(const std::string& path, const ReadOptions& options = {});

}  // namespace kiln::artifact
