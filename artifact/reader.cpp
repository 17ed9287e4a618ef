// The artifact reader's entry points: file reading, identifier / version checks, the
// FlatBuffers Verifier, then conversion (reader_graph.cpp) and ir::verify_graph.
#include "artifact/reader.h"

#include <flatbuffers/flatbuffers.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "artifact/reader_internal.h"
#include "ir/verifier.h"
#include "kiln_generated.h"

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

}  // namespace

Result<LoadedArtifact> read_artifact(std::shared_ptr<const std::vector<uint8_t>> bytes) {
  if (!bytes || bytes->empty()) return corrupt("not a Kiln artifact: the data is empty");
  const uint8_t* data = bytes->data();
  const size_t size = bytes->size();
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return corrupt("not a Kiln artifact: " + std::to_string(size) +
                   " bytes is larger than any .kiln file can be (2 GiB)");
  if (size < 8 || !flatbuffers::BufferHasIdentifier(data, fb::ModelIdentifier()))
    return corrupt("not a Kiln artifact (missing the 'KILN' file identifier)");

  // Verify only the root table's first field so that the version can be reported even when
  // the rest of a newer file does not verify against this schema.
  {
    flatbuffers::Verifier header_verifier(data, size, verifier_options(size));
    if (!header_verifier.VerifyBuffer<fb::Header>(fb::ModelIdentifier()))
      return corrupt("corrupt Kiln artifact: the file header is damaged or truncated");
  }
  const auto* header = flatbuffers::GetRoot<fb::Header>(data);
  const uint32_t version = header->format_version();
  if (version == 0) return corrupt("corrupt Kiln artifact: format version is 0");
  if (version > kFormatVersion)
    return invalid_argument("artifact format version " + std::to_string(version) +
                       " is newer than this runtime supports (" + std::to_string(kFormatVersion) +
                       "); rebuild it with a matching kilnc or upgrade the runtime");

  flatbuffers::Verifier verifier(data, size, verifier_options(size));
  if (!fb::VerifyModelBuffer(verifier))
    return corrupt("corrupt Kiln artifact: the FlatBuffers verifier rejected the file "
                   "(truncated or damaged)");
  const fb::Model* model = fb::GetModel(data);
  if (model->file_size() != size)
    return corrupt("corrupt Kiln artifact: the file has " + std::to_string(size) +
                   " bytes but was written with " + std::to_string(model->file_size()) +
                   " (truncated or with data appended)");
  if (!model->graph()) return corrupt("corrupt Kiln artifact: it has no graph");

  LoadedArtifact out;
  out.format_version = version;
  out.producer = model->producer() ? model->producer()->str() : std::string();
  out.bytes = bytes;
  {
    Result<ir::Graph> graph = detail::convert_graph(*model->graph(), bytes);
    if (!graph.is_ok()) return std::move(graph).status();
    out.graph = std::move(graph).value();
  }
  {
    Result<ir::ExecutionPlan> plan = detail::convert_plan(model->plan(), out.graph);
    if (!plan.is_ok()) return std::move(plan).status();
    out.plan = std::move(plan).value();
  }
  {
    Result<detail::ConvertedTargets> targets = detail::convert_targets(model->targets(), out.graph);
    if (!targets.is_ok()) return std::move(targets).status();
    out.kernels = std::move(targets->kernels);
    out.modules = std::move(targets->modules);
  }
  Status verified = ir::verify_graph(out.graph, /*require_topological=*/true);
  if (!verified.is_ok())
    return corrupt("corrupt Kiln artifact: the graph is invalid: " + verified.message());
  return out;
}

Result<LoadedArtifact> read_artifact_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return not_found("cannot open artifact '" + path + "': no such file");
    return invalid_argument("cannot open artifact '" + path + "': " + std::strerror(err));
  }
  in.seekg(0, std::ios::end);
  std::streamoff end = in.tellg();
  if (end < 0) return invalid_argument("cannot read artifact '" + path + "' (not a regular file?)");
  if (uint64_t(end) >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return corrupt("'" + path + "' is not a Kiln artifact: it is larger than 2 GiB");
  in.seekg(0, std::ios::beg);
  auto bytes = std::make_shared<std::vector<uint8_t>>(size_t(end));
  if (end > 0 && !in.read(reinterpret_cast<char*>(bytes->data()), end))
    return invalid_argument("cannot read artifact '" + path + "'");
  Result<LoadedArtifact> loaded = read_artifact(std::move(bytes));
  if (!loaded.is_ok()) {
    const Status& s = loaded.status();
    return Status(s.code(), path + ": " + s.message());
  }
  return loaded;
}

}  // namespace kiln::artifact
