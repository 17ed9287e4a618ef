// The artifact's trust boundary (docs/security.md): the plan and kernel binaries are cross-checked
// against the graph at load (an edited plan or argument list is refused before a driver binds
// memory from it), constants are checksummed, and Ed25519 signatures (artifact/signing.h) let a
// service load only the artifacts that a trusted key signed.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "artifact/checksum_check.h"
#include "artifact/signing.h"
#include "kiln_generated.h"
#include "test_artifact_util.h"
#include "test_compile_util.h"

using namespace kiln;

namespace {

// Three kernels at -O0 (mul, reduce_sum, sub): two arena values alive together, a constant, a
// symbolic dim (so each kernel also takes a size argument).
constexpr const char* kGraph = R"(graph g(x: f32[N, 4]) -> (y: f32[N, 4]) {
  w = const f32[4] [1, 2, 3, 4]
  a = mul(x, w)
  s = reduce_sum(a, axes=[1], keepdims=true)
  y = sub(a, s)
}
)";

struct Compiled {
  ir::Graph graph;
  ir::ExecutionPlan plan;
  artifact::WriteOptions write;

  ir::NodeId node(const std::string& name) const {
    for (ir::NodeId id = 0; id < graph.num_nodes(); ++id)
      if (graph.node(id).name == name) return id;
    FAIL("no node " << name);
    return ir::kNoNode;
  }
  ir::BufferAssignment& buffer(const std::string& name) {
    for (ir::BufferAssignment& b : plan.buffers)
      if (b.value == node(name)) return b;
    FAIL("no buffer for " << name);
    return plan.buffers.front();
  }
  artifact::KernelBinary& binary_writing(const std::string& name) {
    for (artifact::KernelBinary& k : write.kernels)
      for (ir::NodeId out : graph.kernels()[k.kernel_index].outputs)
        if (out == node(name)) return k;
    FAIL("no binary writes " << name);
    return write.kernels.front();
  }
};

// The graph at -O0 with OpenCL C kernels (generated without a device).
Compiled compile() {
  Diagnostics diags;
  Result<ir::Graph> graph = frontend::parse_graph_text(kGraph, "trust.graph", "", diags);
  REQUIRE_MESSAGE(graph.is_ok(), diags.to_string());
  Compiled c{std::move(graph).value(), {}, {}};
  passes::PipelineOptions options;
  options.opt_level = 0;
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(c.graph, options);
  REQUIRE(plan.is_ok());
  c.plan = std::move(plan).value();
  REQUIRE(c.graph.kernels().size() == 3);
  Result<std::unique_ptr<codegen::Target>> target = codegen::create_target("opencl");
  REQUIRE(target.is_ok());
  Result<codegen::CompiledKernels> kernels = codegen::compile_graph(**target, c.graph, c.plan, codegen::TargetOptions{});
  REQUIRE(kernels.is_ok());
  c.write.kernels = std::move(kernels->kernels);
  return c;
}

// The load error of `c` after `edit`, or "" when it loads.
std::string load_error_after(const std::function<void(Compiled&)>& edit) {
  Compiled c = compile();
  edit(c);
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(c.graph, c.plan, c.write);
  if (!bytes.is_ok()) return "not written: " + bytes.status().message();
  Result<artifact::LoadedArtifact> loaded = artifact::testing::read_bytes(std::move(bytes).value());
  if (loaded.is_ok()) return "";
  CHECK(loaded.status().code() == ErrorCode::kCorrupt);
  return loaded.status().message();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kiln-trust-" + std::to_string(getpid()) + "-" + name)).string();
}

}  // namespace

TEST_CASE("artifact trust: an unedited artifact loads and its binaries follow the calling convention") {
  CHECK(load_error_after([](Compiled&) {}) == "");
  Compiled c = compile();
  for (const artifact::KernelBinary& k : c.write.kernels)
    CHECK(k.args == artifact::kernel_signature(c.graph, c.graph.kernels()[k.kernel_index]));
}

TEST_CASE("artifact trust: edited kernel arguments are refused at load") {
  const std::string calling = "its arguments are not its kernel's inputs, outputs and sizes";
  // Two buffer arguments swapped (the subtraction reads s as a and a as s).
  CHECK(contains(load_error_after([](Compiled& c) {
    artifact::KernelBinary& k = c.binary_writing("y");
    std::swap(k.args[0], k.args[1]);
  }), calling));
  // The output argument pointed at the 16-byte constant (a heap overflow on OpenCL before).
  CHECK(contains(load_error_after([](Compiled& c) {
    artifact::KernelBinary& k = c.binary_writing("a");
    const size_t outputs_at = c.graph.kernels()[k.kernel_index].inputs.size();
    k.args[outputs_at].value = c.node("w");
  }), calling));
  // A size argument relabelled as a buffer.
  CHECK(contains(load_error_after([](Compiled& c) {
    artifact::KernelBinary& k = c.binary_writing("s");
    REQUIRE(k.args.back().kind == artifact::KernelArg::Kind::kSymbol);
    k.args.back() = {artifact::KernelArg::Kind::kBuffer, c.node("x"), ""};
  }), calling));
  // A binary recorded for another graph kernel.
  CHECK(contains(load_error_after([](Compiled& c) { c.binary_writing("a").kernel_name = "other"; }),
                 "is recorded for graph kernel"));
}

TEST_CASE("artifact trust: edited launches are refused at load") {
  CHECK(contains(load_error_after([](Compiled& c) { c.plan.launches.pop_back(); }), "launches for 3 kernels"));
  CHECK(contains(load_error_after([](Compiled& c) { c.plan.launches[2] = c.plan.launches[0]; }), "launched twice"));
  CHECK(contains(load_error_after([](Compiled& c) { std::swap(c.plan.launches[0], c.plan.launches[1]); }),
                 "before any launch writes it"));
}

TEST_CASE("artifact trust: buffers whose role or size disagrees with the graph are refused at load") {
  CHECK(contains(load_error_after([](Compiled& c) { c.buffer("a").storage = ir::Storage::kOutput; }),
                 "the value is not stored that way"));
  CHECK(contains(load_error_after([](Compiled& c) { c.buffer("y").storage = ir::Storage::kArena; }),
                 "the value is not stored that way"));
  CHECK(contains(load_error_after([](Compiled& c) {
    ir::BufferAssignment& x = c.buffer("x");
    x.storage = ir::Storage::kArena;
    x.slot = 0;
  }), "the value is not stored that way"));
  CHECK(contains(load_error_after([](Compiled& c) { c.buffer("s").size = ir::SizeExpr::constant(4); }),
                 "but the value needs"));
  // The arena: a value larger than its slot, and two values alive together in one slot.
  CHECK(contains(load_error_after([](Compiled& c) {
    c.plan.slots[c.buffer("a").slot] = ir::SizeExpr::constant(4);
  }), "does not fit arena slot"));
  CHECK(contains(load_error_after([](Compiled& c) {
    REQUIRE(c.buffer("a").slot != c.buffer("s").slot);
    c.buffer("s").slot = c.buffer("a").slot;
  }), "which are alive at the same time"));
  // A graph kernel that writes the constant instead of its own value.
  CHECK(!load_error_after([](Compiled& c) {
    for (ir::Kernel& k : c.graph.kernels())
      for (ir::NodeId& out : k.outputs)
        if (out == c.node("a")) out = c.node("w");
  }).empty());
}

TEST_CASE("artifact trust: a constant's damaged bytes are refused at load") {
  Compiled c = compile();
  std::vector<uint8_t> bytes = artifact::testing::write_or_fail(c.graph, c.plan, c.write);
  // The constant w = [1, 2, 3, 4] is the first (and only) one in the data segment.
  const float one = 1.0f;
  const size_t at = artifact::kFileHeaderBytes;
  REQUIRE(std::memcmp(&bytes[at], &one, 4) == 0);
  bytes[at + 3] ^= 0x40;
  Result<artifact::LoadedArtifact> loaded = artifact::testing::read_bytes(std::move(bytes));
  REQUIRE_FALSE(loaded.is_ok());
  CHECK(loaded.status().code() == ErrorCode::kCorrupt);
  CHECK_MESSAGE(contains(loaded.status().message(), "constant 0: its bytes are damaged (checksum mismatch)"),
                loaded.status().message());
}

TEST_CASE("artifact trust: checksums over segments find the first damaged blob, whatever its size") {
  // Blobs across the 1 MiB segment boundaries, hashed on several threads: the checksum of each
  // is the writer's (blob_checksum), so only a flipped byte makes a mismatch.
  std::vector<std::vector<uint8_t>> blobs;
  for (size_t size : {size_t(3.5 * (1 << 20)), size_t(100), size_t(0), size_t(2 << 20) + 5, size_t(1 << 20)}) {
    std::vector<uint8_t> blob(size);
    for (size_t i = 0; i < size; ++i) blob[i] = uint8_t(i * 131 + size);
    blobs.push_back(std::move(blob));
  }
  for (uint32_t version : {4u, 5u, artifact::kFormatVersion}) {
    CAPTURE(version);
    auto first_mismatch = [&](const std::vector<std::vector<uint8_t>>& contents) {
      std::vector<artifact::detail::ChecksumCheck::Item> checks;
      for (size_t i = 0; i < blobs.size(); ++i) checks.push_back({contents[i], artifact::blob_checksum(blobs[i], version)});
      return artifact::detail::ChecksumCheck(std::move(checks), version).first_mismatch();
    };
    CHECK_FALSE(first_mismatch(blobs).has_value());
    std::vector<std::vector<uint8_t>> damaged = blobs;
    damaged[3][(2 << 20) + 1] ^= 1;  // the third segment of blob 3
    CHECK(first_mismatch(damaged) == std::optional<size_t>(3));
    damaged[0][(1 << 20) + 7] ^= 0x80;  // and the second segment of blob 0: the first one is named
    CHECK(first_mismatch(damaged) == std::optional<size_t>(0));
  }
  // Formats 5 and 6 fold their segments' checksums (FNV-1a lanes, then XXH3); an unfinished
  // check (an early return) just joins.
  const std::span<const uint8_t> big = blobs[0];
  for (uint32_t version : {5u, 6u}) {
    CAPTURE(version);
    std::vector<uint64_t> segments;
    for (size_t at = 0; at < big.size(); at += artifact::kChecksumSegmentBytes)
      segments.push_back(artifact::checksum_segment(
          big.subspan(at, std::min(artifact::kChecksumSegmentBytes, big.size() - at)), version));
    CHECK(segments.size() == 4);
    CHECK(artifact::blob_checksum(big, version) == artifact::fold_segment_checksums(segments, big.size()));
  }
  CHECK(artifact::blob_checksum(big, 5) != artifact::blob_checksum(big, 4));
  CHECK(artifact::blob_checksum(big, 6) != artifact::blob_checksum(big, 5));
  // A format-6 segment's checksum is XXH3-64 with seed 0: `printf kiln | xxhsum -H3`.
  const std::string text = "kiln";
  CHECK(artifact::checksum_segment({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, 6) ==
        0x5c14e8865e2aa02aull);
  { artifact::detail::ChecksumCheck unfinished({{big, 0}}, artifact::kFormatVersion); }
}

TEST_CASE("artifact trust: a signed artifact loads only with its signer's key and unchanged") {
  Compiled c = compile();
  Result<artifact::SigningKey> key = artifact::SigningKey::generate();
  Result<artifact::SigningKey> other = artifact::SigningKey::generate();
  REQUIRE(key.is_ok());
  REQUIRE(other.is_ok());
  c.write.signing_key = &*key;
  const std::vector<uint8_t> signed_bytes = artifact::testing::write_or_fail(c.graph, c.plan, c.write);
  c.write.signing_key = nullptr;
  const std::vector<uint8_t> unsigned_bytes = artifact::testing::write_or_fail(c.graph, c.plan, c.write);

  auto load = [](std::vector<uint8_t> bytes, std::vector<artifact::PublicKey> trusted) {
    return artifact::read_artifact(std::make_shared<const std::vector<uint8_t>>(std::move(bytes)),
                                   artifact::ReadOptions{std::move(trusted)});
  };
  // Without trusted keys, signatures are informational.
  Result<artifact::LoadedArtifact> plain = load(signed_bytes, {});
  REQUIRE(plain.is_ok());
  CHECK(plain->signer == key->public_key());
  CHECK_FALSE(plain->signature_verified);
  Result<artifact::LoadedArtifact> checked = load(signed_bytes, {other->public_key(), key->public_key()});
  REQUIRE(checked.is_ok());
  CHECK(checked->signature_verified);

  auto refused = [&](std::vector<uint8_t> bytes, std::vector<artifact::PublicKey> trusted, const std::string& why) {
    Result<artifact::LoadedArtifact> r = load(std::move(bytes), std::move(trusted));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kUntrusted);
    CHECK_MESSAGE(contains(r.status().message(), why), r.status().message());
  };
  refused(unsigned_bytes, {key->public_key()}, "the artifact is not signed");
  refused(signed_bytes, {other->public_key()}, "which is not a trusted key");
  // Any changed byte: in the header, a constant, the model; and the signature itself.
  for (size_t at : {size_t(8), size_t(artifact::kFileHeaderBytes + 1), signed_bytes.size() / 2, signed_bytes.size() - 1}) {
    std::vector<uint8_t> damaged = signed_bytes;
    damaged[at] ^= 0x01;
    Result<artifact::LoadedArtifact> r = load(std::move(damaged), {key->public_key()});
    INFO("byte " << at);
    REQUIRE_FALSE(r.is_ok());
    // A damaged header may fail to parse before the signature is found; then it is corrupt.
    CHECK((r.status().code() == ErrorCode::kUntrusted || r.status().code() == ErrorCode::kCorrupt));
  }
  const auto* header = flatbuffers::GetRoot<kiln::fb::FileHeader>(signed_bytes.data());
  REQUIRE(header->signature());
  std::vector<uint8_t> bad_signature = signed_bytes;
  bad_signature[size_t(header->signature()->data() - signed_bytes.data())] ^= 0x01;
  refused(bad_signature, {key->public_key()}, "signature does not match its contents");
  // Another signer's key in the header with the original signature.
  std::vector<uint8_t> other_signer = signed_bytes;
  std::memcpy(&other_signer[size_t(header->signer()->data() - signed_bytes.data())], other->public_key().data(), 32);
  refused(other_signer, {other->public_key()}, "signature does not match its contents");
}

TEST_CASE("artifact trust: files are signed as written, never to stdout") {
  Compiled c = compile();
  Result<artifact::SigningKey> key = artifact::SigningKey::generate();
  REQUIRE(key.is_ok());
  c.write.signing_key = &*key;
  const std::string path = temp_path("signed.kiln");
  REQUIRE(artifact::write_artifact_file(path, c.graph, c.plan, c.write).is_ok());
  Result<artifact::LoadedArtifact> loaded = artifact::read_artifact_file(path, {{key->public_key()}});
  INFO((loaded.is_ok() ? std::string() : loaded.status().message()));
  CHECK(loaded.is_ok());
  std::remove(path.c_str());
  Result<std::unique_ptr<artifact::ArtifactFileWriter>> to_stdout =
      artifact::ArtifactFileWriter::begin("-", c.graph, &*key);
  REQUIRE_FALSE(to_stdout.is_ok());
  CHECK(contains(to_stdout.status().message(), "cannot sign an artifact written to stdout"));
  // finish() signs with the key of begin() only.
  const std::string second = temp_path("second.kiln");
  Result<std::unique_ptr<artifact::ArtifactFileWriter>> writer = artifact::ArtifactFileWriter::begin(second, c.graph);
  REQUIRE(writer.is_ok());
  Status finished = (*writer)->finish(c.graph, c.plan, c.write);
  CHECK(contains(finished.message(), "sign with the key given to ArtifactFileWriter::begin"));
}

TEST_CASE("artifact trust: key files") {
  const std::string path = temp_path("key");
  Result<artifact::PublicKey> public_key = artifact::write_new_signing_key(path);
  REQUIRE(public_key.is_ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  Result<artifact::SigningKey> key = artifact::read_signing_key_file(path);
  REQUIRE(key.is_ok());
  CHECK(key->public_key() == *public_key);
  Result<artifact::PublicKey> read_public = artifact::read_public_key_file(path + ".pub");
  REQUIRE(read_public.is_ok());
  CHECK(*read_public == *public_key);
  CHECK(artifact::parse_public_key(artifact::public_key_hex(*public_key)).value() == *public_key);

  // An existing key is never overwritten; a readable secret key, a public key given as the secret
  // one, a secret one given as public, and malformed keys are refused with their reasons.
  CHECK(contains(artifact::write_new_signing_key(path).status().message(), "never overwritten"));
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  CHECK(contains(artifact::read_signing_key_file(path).status().message(), "chmod 600"));
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  CHECK(contains(artifact::read_signing_key_file(path + ".pub").status().message(), "is a public key"));
  CHECK(contains(artifact::read_public_key_file(path).status().message(), "is a secret signing key"));
  CHECK(contains(artifact::parse_public_key("kiln-ed25519-public-key 12ab").status().message(), "64 hexadecimal"));
  CHECK(contains(artifact::read_signing_key_file("/tmp").status().message(), "not a regular file"));
  std::remove(path.c_str());
  std::remove((path + ".pub").c_str());
}
