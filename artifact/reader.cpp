// The artifact reader's entry points: file reading, identifier / version checks, the
// FlatBuffers Verifier, then conversion (reader_graph.cpp) and ir::verify_graph.
#include "artifact/reader.h"

#include <fcntl.h>
#include <flatbuffers/flatbuffers.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "artifact/reader_internal.h"
#include "ir/verifier.h"
#include "kiln_generated.h"
#include "support/file_io.h"

namespace kiln::artifact {

std::vector<std::string> LoadedArtifact::targets() const {
  std::vector<std::string> out;
  auto add = [&out](const std::string& target) {
    bool seen = false;
    for (const std::string& t : out) seen = seen || t == target;
    if (!seen) out.push_back(target);
  };
  for (const KernelBinary& k : kernels) add(k.target);
  for (const ModuleBinary& m : modules) add(m.target);
  return out;
}

namespace {

// The verifier counts tables to bound its work; every table occupies at least 4 bytes, so a
// limit of size/4 can never reject a well-formed file, however large its graph.
flatbuffers::Verifier::Options verifier_options(size_t size) {
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 64;
  opts.max_tables = flatbuffers::uoffset_t(std::max<size_t>(size / 4, 1024));
  opts.check_alignment = true;
  return opts;
}

// Where a format-3 file's data segment and model are: checked against the file's size. The
// header of a format-4 file may name a signer and hold its signature.
struct Parts {
  detail::DataSegment segment;
  std::span<const uint8_t> model;
  std::optional<PublicKey> signer;
  std::optional<Signature> signature;
  size_t signature_offset = 0;  // in the file
};

Result<Parts> locate_parts(const ArtifactBytes& bytes, uint32_t version) {
  const uint8_t* data = bytes.data.data();
  const size_t size = bytes.data.size();
  Parts parts;
  parts.segment.owner = bytes.owner;
  if (version < 3) {  // one Model FlatBuffer, constants inline
    if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
      return corrupt("corrupt Kiln artifact: " + std::to_string(size) + " bytes is larger than a format-" +
                     std::to_string(version) + " file can be (2 GiB)");
    parts.segment.inline_data = true;
    parts.segment.format_version = version;  // the algorithm of the blobs' checksums
    parts.model = bytes.data;
    return parts;
  }
  const size_t header_bytes = file_header_bytes(version);
  const size_t header_size = std::min(size, header_bytes);
  flatbuffers::Verifier header_verifier(data, header_size, verifier_options(header_size));
  if (size < header_bytes || !header_verifier.VerifyBuffer<fb::FileHeader>(fb::ModelIdentifier()))
    return corrupt("corrupt Kiln artifact: the file header is damaged or truncated");
  const auto* header = flatbuffers::GetRoot<fb::FileHeader>(data);
  if (header->signer() || header->signature()) {
    if (version < 4 || !header->signer() || !header->signature() || header->signer()->size() != PublicKey().size() ||
        header->signature()->size() != Signature().size())
      return corrupt("corrupt Kiln artifact: its signature fields are damaged");
    parts.signer.emplace();
    std::memcpy(parts.signer->data(), header->signer()->data(), parts.signer->size());
    parts.signature.emplace();
    std::memcpy(parts.signature->data(), header->signature()->data(), parts.signature->size());
    parts.signature_offset = size_t(header->signature()->data() - data);
  }
  const uint64_t data_offset = header->data_offset(), data_size = header->data_size();
  const uint64_t model_offset = header->model_offset();
  const bool placed = data_offset >= header_bytes && data_offset % kConstantAlignment == 0 &&
                      model_offset % kConstantAlignment == 0 && data_offset <= model_offset &&
                      data_size <= model_offset - data_offset && model_offset < size;
  if (!placed)
    return corrupt("corrupt Kiln artifact: the header places the data at [" + std::to_string(data_offset) + ", +" +
                   std::to_string(data_size) + ") and the model at " + std::to_string(model_offset) + " in a " +
                   std::to_string(size) + "-byte file (truncated or damaged)");
  if (size - model_offset >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return corrupt("corrupt Kiln artifact: its model part is larger than 2 GiB");
  parts.segment.bytes = bytes.data.subspan(size_t(data_offset), size_t(data_size));
  parts.segment.format_version = version;
  parts.model = bytes.data.subspan(size_t(model_offset));
  return parts;
}

// With trusted keys: the file must be signed by one of them, over every byte (the signature's
// own bytes counted as zeros).
Status check_signature(const ArtifactBytes& bytes, const Parts& parts, const ReadOptions& options) {
  if (options.trusted_keys.empty()) return Status::ok();
  if (!parts.signer)
    return Status(ErrorCode::kUntrusted, "the artifact is not signed, and only artifacts signed by a trusted key may "
                                         "be loaded (kilnc --sign)");
  if (std::find(options.trusted_keys.begin(), options.trusted_keys.end(), *parts.signer) ==
      options.trusted_keys.end())
    return Status(ErrorCode::kUntrusted, "the artifact is signed by key " + public_key_hex(*parts.signer) +
                                         ", which is not a trusted key");
  const Signature zeros{};
  const std::span<const uint8_t> message[] = {
      bytes.data.first(parts.signature_offset), std::span<const uint8_t>(zeros),
      bytes.data.subspan(parts.signature_offset + zeros.size())};
  if (!verify_signature(*parts.signer, *parts.signature, message))
    return Status(ErrorCode::kUntrusted, "the artifact's signature does not match its contents (it was changed "
                                         "after signing, or the signature is damaged)");
  return Status::ok();
}

}  // namespace

Result<LoadedArtifact> read_artifact(std::shared_ptr<const std::vector<uint8_t>> bytes, const ReadOptions& options) {
  if (!bytes) return corrupt("not a Kiln artifact: the data is empty");
  std::span<const uint8_t> data(bytes->data(), bytes->size());
  return read_artifact(ArtifactBytes{data, std::move(bytes)}, options);
}

Result<LoadedArtifact> read_artifact(ArtifactBytes bytes, const ReadOptions& options) {
  if (bytes.data.empty()) return corrupt("not a Kiln artifact: the data is empty");
  const uint8_t* data = bytes.data.data();
  const size_t size = bytes.data.size();
  if (size < 8 || !flatbuffers::BufferHasIdentifier(data, fb::ModelIdentifier()))
    return corrupt("not a Kiln artifact (missing the 'KILN' file identifier)");

  // Verify only the root table's first field (Model's or FileHeader's format_version) so that
  // the version can be reported even when the rest of a newer file does not verify against
  // this schema.
  {
    const size_t verified = std::min<size_t>(size, FLATBUFFERS_MAX_BUFFER_SIZE - 1);
    flatbuffers::Verifier header_verifier(data, verified, verifier_options(verified));
    if (!header_verifier.VerifyBuffer<fb::Header>(fb::ModelIdentifier()))
      return corrupt("corrupt Kiln artifact: the file header is damaged or truncated");
  }
  const auto* header = flatbuffers::GetRoot<fb::Header>(data);
  const uint32_t version = header->format_version();
  if (version < kOldestFormatVersion)
    return corrupt("corrupt Kiln artifact: format version " + std::to_string(version) + " does not exist");
  if (version > kFormatVersion)
    return invalid_argument("artifact format version " + std::to_string(version) +
                       " is newer than this runtime supports (" + std::to_string(kFormatVersion) +
                       "); rebuild it with a matching kilnc or upgrade the runtime");
  KILN_ASSIGN_OR_RETURN(Parts parts, locate_parts(bytes, version));
  if (version < 3 && !options.trusted_keys.empty())
    return Status(ErrorCode::kUntrusted, "the artifact's format " + std::to_string(version) +
                                         " cannot be signed, and only artifacts signed by a trusted key may be loaded");
  KILN_RETURN_IF_ERROR(check_signature(bytes, parts, options));

  const uint8_t* model_data = parts.model.data();
  const size_t model_size = parts.model.size();
  flatbuffers::Verifier verifier(model_data, model_size, verifier_options(model_size));
  // (The identifier sits at bytes 4-7: a shorter model part has none, and must not be read past.)
  if (model_size < 8 || !flatbuffers::BufferHasIdentifier(model_data, fb::ModelIdentifier()) ||
      !fb::VerifyModelBuffer(verifier))
    return corrupt("corrupt Kiln artifact: the FlatBuffers verifier rejected the file "
                   "(truncated or damaged)");
  const fb::Model* model = fb::GetModel(model_data);
  if (model->format_version() != version)
    return corrupt("corrupt Kiln artifact: its header says format " + std::to_string(version) +
                   " and its model format " + std::to_string(model->format_version()));
  if (model->file_size() != size)
    return corrupt("corrupt Kiln artifact: the file has " + std::to_string(size) +
                   " bytes but was written with " + std::to_string(model->file_size()) +
                   " (truncated or with data appended)");
  if (!model->graph()) return corrupt("corrupt Kiln artifact: it has no graph");

  LoadedArtifact out;
  out.format_version = version;
  out.producer = model->producer() ? model->producer()->str() : std::string();
  out.signer = parts.signer;
  out.signature_verified = !options.trusted_keys.empty();
  out.bytes = bytes;
  // The targets' blobs and the constants are hashed on other threads from here on.
  std::vector<detail::ChecksumCheck::Item> blob_checks = detail::target_blob_checks(model->targets(), parts.segment);
  const size_t num_blob_checks = blob_checks.size();
  std::unique_ptr<detail::ChecksumCheck> checks;  // reads `bytes`, which outlive it
  {
    Result<ir::Graph> graph = detail::convert_graph(*model->graph(), parts.segment, std::move(blob_checks), checks);
    if (!graph.is_ok()) return std::move(graph).status();
    out.graph = std::move(graph).value();
  }
  {
    Result<ir::ExecutionPlan> plan = detail::convert_plan(model->plan(), out.graph);
    if (!plan.is_ok()) return std::move(plan).status();
    out.plan = std::move(plan).value();
  }
  Result<detail::ConvertedTargets> targets = detail::convert_targets(model->targets(), out.graph, bytes.owner, parts.segment);
  // A damaged blob is reported before what converting it found wrong (a missing entry point in
  // damaged PTX); the verifier below may read the constants' values.
  if (checks) {
    if (std::optional<size_t> damaged = checks->first_mismatch()) {
      if (*damaged < num_blob_checks) return detail::damaged_target_blob(model->targets(), *damaged);
      return corrupt("corrupt Kiln artifact: constant " + std::to_string(*damaged - num_blob_checks) +
                     ": its bytes are damaged (checksum mismatch)");
    }
  }
  if (!targets.is_ok()) return std::move(targets).status();
  out.kernels = std::move(targets->kernels);
  out.modules = std::move(targets->modules);
  Status verified = ir::verify_graph(out.graph, /*require_topological=*/true);
  if (!verified.is_ok())
    return corrupt("corrupt Kiln artifact: the graph is invalid: " + verified.message());
  KILN_RETURN_IF_ERROR(detail::check_plan_against_graph(out.graph, out.plan, out.kernels));
  return out;
}

Result<LoadedArtifact> read_artifact_file(const std::string& path, const ReadOptions& options) {
  size_t size = 0;
  KILN_ASSIGN_OR_RETURN(const int fd, open_regular_file(path, &size, "artifact '" + path + "'"));
  ArtifactBytes bytes;
  if (size > 0) {
    // MAP_PRIVATE: the process sees the file as it was mapped even if its pages are not yet
    // read; kilnc writes artifacts through a rename, so a file is never rewritten in place.
    void* base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      close(fd);
      return invalid_argument("cannot read artifact '" + path + "': " + std::strerror(err));
    }
    bytes.data = std::span<const uint8_t>(static_cast<const uint8_t*>(base), size);
    bytes.owner = std::shared_ptr<const void>(base, [size](const void* p) { munmap(const_cast<void*>(p), size); });
  }
  close(fd);
  Result<LoadedArtifact> loaded = read_artifact(std::move(bytes), options);
  if (!loaded.is_ok()) {
    const Status& s = loaded.status();
    return Status(s.code(), path + ": " + s.message());
  }
  return loaded;
}

}  // namespace kiln::artifact
