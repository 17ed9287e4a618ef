// Artifact writer/reader: round trips (graph text, plan, constants, kernels), version and
// identifier checks, the format-3 layout (header, data segment, model) and file handling.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "frontend/parser.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "kiln_generated.h"
#include "test_artifact_util.h"

using namespace kiln;
using namespace kiln::artifact::testing;

namespace {

// Compiles a .graph file through the real frontend and pipeline.
struct Compiled {
  ir::Graph graph;
  ir::ExecutionPlan plan;
};
Compiled compile_file(const std::string& path, int opt_level) {
  Diagnostics diags;
  Result<ir::Graph> graph = frontend::parse_graph_file(path, diags);
  INFO(diags.to_string());
  REQUIRE(graph.is_ok());
  passes::PipelineOptions options;
  options.opt_level = opt_level;
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(*graph, options);
  INFO((plan.is_ok() ? std::string() : plan.status().message()));
  REQUIRE(plan.is_ok());
  return {std::move(graph).value(), std::move(plan).value()};
}

void require_round_trip(const ir::Graph& graph, const ir::ExecutionPlan& plan) {
  std::vector<uint8_t> bytes = write_or_fail(graph, plan);
  Result<artifact::LoadedArtifact> loaded = read_bytes(bytes);
  INFO((loaded.is_ok() ? std::string() : loaded.status().message()));
  REQUIRE(loaded.is_ok());
  CHECK(loaded->format_version == artifact::kFormatVersion);
  CHECK(ir::print_graph(loaded->graph) == ir::print_graph(graph));
  CHECK(passes::print_plan(loaded->graph, loaded->plan) == passes::print_plan(graph, plan));
  require_plans_equal(loaded->plan, plan);
  // Node by node: attributes (typed equality), types, inputs.
  REQUIRE(loaded->graph.num_nodes() == graph.num_nodes());
  for (ir::NodeId i = 0; i < graph.num_nodes(); ++i) {
    INFO("node " << graph.node(i).name);
    CHECK(loaded->graph.node(i).op == graph.node(i).op);
    CHECK(loaded->graph.node(i).attrs == graph.node(i).attrs);
    CHECK(loaded->graph.node(i).type == graph.node(i).type);
    CHECK(loaded->graph.node(i).inputs == graph.node(i).inputs);
  }
  REQUIRE(loaded->graph.kernels().size() == graph.kernels().size());
  for (size_t k = 0; k < graph.kernels().size(); ++k) {
    const ir::Kernel& a = loaded->graph.kernels()[k];
    const ir::Kernel& b = graph.kernels()[k];
    CHECK(a.name == b.name);
    CHECK(a.kind == b.kind);
    CHECK(a.nodes == b.nodes);
    CHECK(a.anchor == b.anchor);
    CHECK(a.inputs == b.inputs);
    CHECK(a.outputs == b.outputs);
  }
}

}  // namespace

TEST_CASE("artifact: sample graph round-trips (text, plan, kernels, constants in place)") {
  SampleModel model = sample_model();
  REQUIRE(ir::verify_graph(model.graph).is_ok());
  std::vector<uint8_t> bytes = write_or_fail(model.graph, model.plan);
  auto shared = std::make_shared<const std::vector<uint8_t>>(bytes);
  Result<artifact::LoadedArtifact> loaded = artifact::read_artifact(shared);
  REQUIRE(loaded.is_ok());
  CHECK(loaded->producer == std::string("kiln ") + kVersion);  // the default records Kiln's version
  CHECK(loaded->graph.name == "sample");
  CHECK(ir::print_graph(loaded->graph) == ir::print_graph(model.graph));
  require_plans_equal(loaded->plan, model.plan);
  REQUIRE(loaded->graph.inputs().size() == 2);
  CHECK(loaded->graph.node(loaded->graph.inputs()[1]).name == "y");
  REQUIRE(loaded->graph.outputs().size() == 2);
  CHECK(loaded->graph.outputs()[1].name == "s");
  CHECK(loaded->graph.outputs()[1].declared.to_string() == "f32[N]");
  CHECK(loaded->kernels.empty());
  CHECK(loaded->targets().empty());

  // The constant is used in place: a view into the shared bytes, 64-byte aligned within them.
  REQUIRE(loaded->graph.constants().size() == 1);
  const ir::Tensor& w = loaded->graph.constant(0);
  CHECK(w.is_view());
  const auto* begin = reinterpret_cast<const std::byte*>(shared->data());
  CHECK(w.data() >= begin);
  CHECK(w.data() + w.size_bytes() <= begin + shared->size());
  CHECK((w.data() - begin) % 64 == 0);
  CHECK(w.element_as_double(2) == 2.0);
  CHECK(w.element_as_double(3) == 0.25);
  // The view keeps the bytes alive after every other owner is gone.
  shared.reset();
  artifact::LoadedArtifact moved = std::move(loaded).value();
  CHECK(moved.graph.constant(0).element_as_double(1) == -1.0);
}

TEST_CASE("artifact: constants of every dtype keep their bytes and alignment") {
  ir::testing::GraphBuilder b;
  ir::NodeId x = b.input("x", "f32[3]");
  b.output("x", x);
  int index = 0;
  for (ir::DType dtype : ir::kAllDTypes) {
    Result<ir::Tensor> t = ir::Tensor::zeros(dtype, {3, int64_t(index + 1)});
    REQUIRE(t.is_ok());
    for (int64_t i = 0; i < t->num_elements(); ++i) t->set_element_from_double(i, double((i * 7 + index) % 3));
    ir::NodeId c = b.constant("c" + std::to_string(index), *t);
    b.output("c" + std::to_string(index), c);
    ++index;
  }
  std::vector<uint8_t> bytes = write_or_fail(b.graph, ir::ExecutionPlan{});
  Result<artifact::LoadedArtifact> loaded = read_bytes(bytes);
  REQUIRE(loaded.is_ok());
  REQUIRE(loaded->graph.constants().size() == b.graph.constants().size());
  const auto* begin = reinterpret_cast<const std::byte*>(loaded->bytes.data.data());
  for (size_t i = 0; i < b.graph.constants().size(); ++i) {
    const ir::Tensor& got = loaded->graph.constant(uint32_t(i));
    const ir::Tensor& want = b.graph.constant(uint32_t(i));
    INFO("constant " << i << " " << ir::dtype_name(want.dtype()));
    CHECK(got.dtype() == want.dtype());
    CHECK(got.shape() == want.shape());
    REQUIRE(got.size_bytes() == want.size_bytes());
    CHECK(std::memcmp(got.data(), want.data(), got.size_bytes()) == 0);
    CHECK((got.data() - begin) % 64 == 0);
  }
}

TEST_CASE("artifact: kernel binaries per target round-trip") {
  SampleModel model = sample_model();
  artifact::WriteOptions options;
  options.producer = "kilnc test";
  artifact::KernelBinary ptx{"cuda", "fused_add_mul_relu_0", 0, "ptx", "k0", std::vector<uint8_t>{1, 2, 3, 4, 5},
                             {"sm_80"}, {}, {}};
  artifact::KernelBinary spv{"vulkan", "reduce_sum_1", 1, "spirv", "main", std::vector<uint8_t>{7, 7}, {"shaderFloat16", "int64"}, {}, {}};
  artifact::KernelBinary ptx2{"cuda", "reduce_sum_1", 1, "ptx", "k1", {}, {}, {}, {}};
  // The calling convention (args, dispatch) round-trips too; the reader requires it to be the
  // kernel's signature.
  spv.args = artifact::kernel_signature(model.graph, model.graph.kernels()[1]);
  ptx2.args = spv.args;
  spv.dispatch.work_items = ir::SizeExpr::symbol("N") * 256 + ir::SizeExpr::constant(3);
  spv.dispatch.items_per_group = 1;
  spv.dispatch.workgroup_size = 128;
  ptx.args = artifact::kernel_signature(model.graph, model.graph.kernels()[0]);
  ptx.dispatch.work_items = ir::SizeExpr::constant(1000);
  ptx.dispatch.items_per_group = 64;
  options.kernels = {ptx, spv, ptx2};
  Result<artifact::LoadedArtifact> loaded = read_bytes(write_or_fail(model.graph, model.plan, options));
  REQUIRE(loaded.is_ok());
  CHECK(loaded->producer == "kilnc test");
  CHECK(loaded->targets() == std::vector<std::string>{"cuda", "vulkan"});
  // Grouped by target in first-appearance order.
  REQUIRE(loaded->kernels.size() == 3);
  CHECK(loaded->kernels[0] == ptx);
  CHECK(loaded->kernels[1] == ptx2);
  CHECK(loaded->kernels[2] == spv);
  // A damaged kernel binary is named.
  std::vector<uint8_t> bytes = write_or_fail(model.graph, model.plan, options);
  const std::vector<uint8_t> ptx_blob{1, 2, 3, 4, 5};
  auto at = std::search(bytes.begin(), bytes.end(), ptx_blob.begin(), ptx_blob.end());
  REQUIRE(at != bytes.end());
  at[2] ^= 0x10;
  Result<artifact::LoadedArtifact> damaged = read_bytes(std::move(bytes));
  REQUIRE_FALSE(damaged.is_ok());
  CHECK(damaged.status().code() == ErrorCode::kCorrupt);
  const std::string& message = damaged.status().message();
  CHECK_MESSAGE(message.find("kernel 'fused_add_mul_relu_0': its binary is damaged") != std::string::npos, message);

  // A binary for a kernel the graph does not have is refused by the writer.
  options.kernels = {artifact::KernelBinary{"cuda", "nope", 9, "ptx", "", {}, {}, {}, {}}};
  Result<std::vector<uint8_t>> bad = artifact::write_artifact(model.graph, model.plan, options);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("out of range") != std::string::npos);

  // So is a buffer argument naming a node the graph does not have.
  artifact::KernelBinary bad_arg = spv;
  bad_arg.args = {{artifact::KernelArg::Kind::kBuffer, 100000, ""}};
  options.kernels = {bad_arg};
  bad = artifact::write_artifact(model.graph, model.plan, options);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("buffer argument out of range") != std::string::npos);
}

TEST_CASE("artifact: every op and attribute round-trips through the real pipeline") {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/tests/roundtrip/all_ops.graph";
  for (int level : {0, 2}) {
    INFO("-O" << level);
    Compiled c = compile_file(path, level);
    require_round_trip(c.graph, c.plan);
  }
  Compiled mlp = compile_file(std::string(KILN_SOURCE_DIR) + "/examples/mlp.graph", 2);
  require_round_trip(mlp.graph, mlp.plan);
}

TEST_CASE("artifact: a loaded artifact computes what the original graph computes") {
  Compiled c = compile_file(std::string(KILN_SOURCE_DIR) + "/tests/roundtrip/all_ops.graph", 2);
  Result<artifact::LoadedArtifact> loaded = read_bytes(write_or_fail(c.graph, c.plan));
  REQUIRE(loaded.is_ok());
  std::vector<ir::Tensor> inputs;
  uint32_t seed = 1;
  for (ir::NodeId id : c.graph.inputs()) {
    std::vector<int64_t> sizes;
    for (const ir::Dim& d : c.graph.node(id).type.shape) sizes.push_back(d.is_static() ? d.size() : 2);
    Result<ir::Tensor> t = ir::Tensor::zeros(c.graph.node(id).type.dtype, sizes);
    REQUIRE(t.is_ok());
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      seed = seed * 1103515245u + 12345u;
      t->set_element_from_double(i, double((seed >> 16) % 3));  // 0..2: valid gather indices too
    }
    inputs.push_back(std::move(t).value());
  }
  Result<std::vector<ir::Tensor>> want = ir::interpret(c.graph, inputs);
  Result<std::vector<ir::Tensor>> got = ir::interpret(loaded->graph, inputs);
  REQUIRE(want.is_ok());
  REQUIRE(got.is_ok());
  REQUIRE(want->size() == got->size());
  for (size_t i = 0; i < want->size(); ++i) {
    INFO("output " << c.graph.outputs()[i].name);
    REQUIRE((*got)[i].size_bytes() == (*want)[i].size_bytes());
    CHECK(std::memcmp((*got)[i].data(), (*want)[i].data(), (*got)[i].size_bytes()) == 0);
  }
}

TEST_CASE("artifact: the writer refuses graphs it cannot represent") {
  SampleModel model = sample_model();
  ir::ExecutionPlan bad_plan = model.plan;
  bad_plan.launches.push_back(ir::Launch{7, {}});
  Result<std::vector<uint8_t>> r = artifact::write_artifact(model.graph, bad_plan);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);

  model.graph.node(2).erased = true;
  r = artifact::write_artifact(model.graph, model.plan);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("erased") != std::string::npos);
}

TEST_CASE("artifact: a plan that stores a computed value as a constant is refused at load") {
  SampleModel model = sample_model();
  // Buffer 0 is input x; the drivers would upload it from a constant tensor it does not have.
  model.plan.buffers[0].storage = ir::Storage::kConstant;
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(model.graph, model.plan);
  REQUIRE(bytes.is_ok());
  Result<artifact::LoadedArtifact> loaded = read_bytes(std::move(bytes).value());
  REQUIRE_FALSE(loaded.is_ok());
  CHECK(loaded.status().code() == ErrorCode::kCorrupt);
  CHECK_MESSAGE(loaded.status().message().find("plan buffer 0: stored as a constant, but value") != std::string::npos,
                loaded.status().message());
}

TEST_CASE("artifact: newer format versions are refused with both versions named") {
  SampleModel model = sample_model();
  std::vector<uint8_t> bytes = write_or_fail(model.graph, model.plan);
  set_format_version(bytes, artifact::kFormatVersion + 1);
  Result<artifact::LoadedArtifact> loaded = read_bytes(bytes);
  REQUIRE_FALSE(loaded.is_ok());
  CHECK(loaded.status().code() == ErrorCode::kInvalidArgument);
  const std::string expected = "artifact format version " + std::to_string(artifact::kFormatVersion + 1) +
                               " is newer than this runtime supports (" +
                               std::to_string(artifact::kFormatVersion) + ")";
  CHECK(loaded.status().message().find(expected) != std::string::npos);

  set_format_version(bytes, 0);
  loaded = read_bytes(bytes);
  REQUIRE_FALSE(loaded.is_ok());
  CHECK(loaded.status().code() == ErrorCode::kCorrupt);

  set_format_version(bytes, artifact::kFormatVersion);
  CHECK(read_bytes(bytes).is_ok());
}

TEST_CASE("artifact: foreign, empty and missing files are clear errors") {
  auto message_of = [](std::vector<uint8_t> bytes) {
    Result<artifact::LoadedArtifact> r = read_bytes(std::move(bytes));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kCorrupt);
    return r.status().message();
  };
  CHECK(message_of({}).find("empty") != std::string::npos);
  CHECK(message_of({'K', 'I'}).find("not a Kiln artifact") != std::string::npos);
  // A .npy file and a zip file start with other magic.
  std::vector<uint8_t> npy = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0x76, 0, '{', '}'};
  CHECK(message_of(npy).find("not a Kiln artifact") != std::string::npos);
  std::vector<uint8_t> zip(256, 0);
  zip[0] = 'P'; zip[1] = 'K'; zip[2] = 3; zip[3] = 4;
  CHECK(message_of(zip).find("'KILN' file identifier") != std::string::npos);
  // The identifier alone does not make a file valid.
  std::vector<uint8_t> fake = {0xff, 0xff, 0xff, 0x7f, 'K', 'I', 'L', 'N', 0, 0, 0, 0};
  CHECK(message_of(fake).find("corrupt Kiln artifact") != std::string::npos);

  Result<artifact::LoadedArtifact> null_bytes = artifact::read_artifact(nullptr);
  CHECK_FALSE(null_bytes.is_ok());

  Result<artifact::LoadedArtifact> missing = artifact::read_artifact_file("/nonexistent/dir/model.kiln");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK(missing.status().message().find("/nonexistent/dir/model.kiln") != std::string::npos);

  Result<artifact::LoadedArtifact> dir = artifact::read_artifact_file(KILN_SOURCE_DIR);
  CHECK_FALSE(dir.is_ok());
}

TEST_CASE("artifact: read_artifact_file reads what write_artifact wrote") {
  SampleModel model = sample_model();
  std::vector<uint8_t> bytes = write_or_fail(model.graph, model.plan);
  const std::string path = std::string(KILN_BINARY_DIR) + "/test_artifact_file.kiln";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  Result<artifact::LoadedArtifact> loaded = artifact::read_artifact_file(path);
  REQUIRE(loaded.is_ok());
  CHECK(ir::print_graph(loaded->graph) == ir::print_graph(model.graph));
  std::remove(path.c_str());
}

namespace {

// The sample model's file with its parts located, for the format-3 layout tests.
struct Layout {
  std::vector<uint8_t> bytes;
  uint64_t data_offset = 0, data_size = 0, model_offset = 0;
};
Layout sample_layout(const SampleModel& model = sample_model()) {
  Layout out;
  out.bytes = write_or_fail(model.graph, model.plan);
  const auto* header = flatbuffers::GetRoot<fb::FileHeader>(out.bytes.data());
  out.data_offset = header->data_offset();
  out.data_size = header->data_size();
  out.model_offset = header->model_offset();
  return out;
}

std::string load_error(std::vector<uint8_t> bytes) {
  Result<artifact::LoadedArtifact> r = read_bytes(std::move(bytes));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kCorrupt);
  return r.status().message();
}

std::string temp_path(const std::string& name) { return std::string(KILN_BINARY_DIR) + "/" + name; }

bool exists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

TEST_CASE("artifact: format 3 puts the constants in an aligned data segment before the model") {
  SampleModel model = sample_model();
  Layout layout = sample_layout();
  REQUIRE(layout.bytes.size() > artifact::kFileHeaderBytes);
  CHECK(flatbuffers::BufferHasIdentifier(layout.bytes.data(), fb::ModelIdentifier()));
  CHECK(layout.data_offset == artifact::kFileHeaderBytes);
  CHECK(layout.model_offset % 64 == 0);
  CHECK(layout.data_offset + layout.data_size <= layout.model_offset);
  CHECK(flatbuffers::BufferHasIdentifier(layout.bytes.data() + layout.model_offset, fb::ModelIdentifier()));
  const fb::Model* fb_model = fb::GetModel(layout.bytes.data() + layout.model_offset);
  CHECK(fb_model->file_size() == layout.bytes.size());
  REQUIRE(fb_model->graph()->constants()->size() == model.graph.constants().size());
  size_t total = 0;
  for (size_t i = 0; i < model.graph.constants().size(); ++i) {
    const fb::ConstantData* c = fb_model->graph()->constants()->Get(flatbuffers::uoffset_t(i));
    const ir::Tensor& t = model.graph.constants()[i];
    CHECK(c->data() == nullptr);
    CHECK(c->offset() % 64 == 0);
    REQUIRE(c->size() == t.size_bytes());
    CHECK(std::memcmp(layout.bytes.data() + layout.data_offset + c->offset(), t.data(), t.size_bytes()) == 0);
    total += t.size_bytes();
  }
  CHECK(layout.data_size >= total);
}

TEST_CASE("artifact: a header or constant that points outside its part is a clear error") {
  // A second constant, so that one constant's offset is not 0 (a default FlatBuffers omits).
  SampleModel model = sample_model();
  model.graph.add_constant(ir::testing::f32_tensor({2}, {1.0f, 2.0f}));
  const Layout layout = sample_layout(model);
  auto mutated = [&](auto&& mutate) {
    std::vector<uint8_t> bytes = layout.bytes;
    mutate(bytes);
    return load_error(std::move(bytes));
  };
  auto header = [](std::vector<uint8_t>& b) { return flatbuffers::GetMutableRoot<fb::FileHeader>(b.data()); };
  CHECK(mutated([&](auto& b) { header(b)->mutate_model_offset(b.size() + 64); }).find("places the data") !=
        std::string::npos);
  CHECK(mutated([&](auto& b) { header(b)->mutate_data_size(layout.model_offset); }).find("places the data") !=
        std::string::npos);
  CHECK(mutated([&](auto& b) { header(b)->mutate_data_offset(8); }).find("places the data") != std::string::npos);
  CHECK(mutated([&](auto& b) { header(b)->mutate_model_offset(layout.model_offset + 64); }).find("verifier") !=
        std::string::npos);
  auto second_constant = [&](std::vector<uint8_t>& b) {
    fb::ConstantData* c =
        fb::GetMutableModel(b.data() + layout.model_offset)->mutable_graph()->mutable_constants()->GetMutableObject(1);
    REQUIRE(c->offset() != 0);
    return c;
  };
  auto mutate_offset = [&](uint64_t offset) {
    return mutated([&](auto& b) { REQUIRE(second_constant(b)->mutate_offset(offset)); });
  };
  CHECK(mutate_offset(layout.data_size).find("data segment") != std::string::npos);
  CHECK(mutate_offset(64 * ((layout.data_size + 63) / 64)).find("data segment") != std::string::npos);
  CHECK(mutate_offset(4).find("64-byte aligned") != std::string::npos);
  CHECK(mutated([&](auto& b) { REQUIRE(second_constant(b)->mutate_size(4)); }).find("bytes of data") != std::string::npos);
  // A header and a model that disagree on the version.
  CHECK(mutated([&](auto& b) { fb::GetMutableModel(b.data() + layout.model_offset)->mutate_format_version(2); })
            .find("model format 2") != std::string::npos);
}

TEST_CASE("artifact: ArtifactFileWriter writes the same file, maps the constants, and leaves nothing when abandoned") {
  SampleModel model = sample_model();
  const std::vector<uint8_t> expected = write_or_fail(model.graph, model.plan);
  const std::string path = temp_path("test_artifact_writer.kiln");
  std::remove(path.c_str());
  {
    Result<std::unique_ptr<artifact::ArtifactFileWriter>> writer = artifact::ArtifactFileWriter::begin(path, model.graph);
    REQUIRE(writer.is_ok());
    CHECK_FALSE(exists(path));  // written beside it until finish()
    SampleModel copy = sample_model();
    ir::Graph& mapped = copy.graph;
    REQUIRE((*writer)->map_constants(mapped).is_ok());
    for (size_t i = 0; i < mapped.constants().size(); ++i) {
      const ir::Tensor& t = mapped.constants()[i];
      CHECK(t.is_view());
      REQUIRE(t.size_bytes() == model.graph.constants()[i].size_bytes());
      CHECK(std::memcmp(t.data(), model.graph.constants()[i].data(), t.size_bytes()) == 0);
    }
    REQUIRE((*writer)->finish(mapped, model.plan, {}).is_ok());
    CHECK_FALSE((*writer)->finish(mapped, model.plan, {}).is_ok());  // once only
  }
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(written == expected);

  // Abandoned after begin(): the earlier file stays as it was, and no temporary file is left.
  {
    Result<std::unique_ptr<artifact::ArtifactFileWriter>> writer = artifact::ArtifactFileWriter::begin(path, model.graph);
    REQUIRE(writer.is_ok());
  }
  std::ifstream again(path, std::ios::binary);
  CHECK(std::vector<uint8_t>((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()) == expected);
  bool temp_left = false;
  for (const auto& entry : std::filesystem::directory_iterator(KILN_BINARY_DIR))
    temp_left = temp_left || entry.path().filename().string().rfind("test_artifact_writer.kiln.tmp-", 0) == 0;
  CHECK_FALSE(temp_left);
  std::remove(path.c_str());

  // A folder that does not exist: a clear error at begin().
  Result<std::unique_ptr<artifact::ArtifactFileWriter>> nowhere =
      artifact::ArtifactFileWriter::begin("/nonexistent/dir/x.kiln", model.graph);
  REQUIRE_FALSE(nowhere.is_ok());
  CHECK(nowhere.status().message().find("/nonexistent/dir/x.kiln") != std::string::npos);
}

TEST_CASE("artifact: read_artifact_file refuses what is not a regular file, before reading it") {
  Result<artifact::LoadedArtifact> dir = artifact::read_artifact_file(KILN_BINARY_DIR);
  REQUIRE_FALSE(dir.is_ok());
  CHECK(dir.status().message().find("not a regular file") != std::string::npos);
  const std::string fifo = temp_path("test_artifact_fifo.kiln");
  std::remove(fifo.c_str());
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  Result<artifact::LoadedArtifact> from_fifo = artifact::read_artifact_file(fifo);  // must not block
  REQUIRE_FALSE(from_fifo.is_ok());
  CHECK(from_fifo.status().message().find("not a regular file") != std::string::npos);
  std::remove(fifo.c_str());
  Result<artifact::LoadedArtifact> device = artifact::read_artifact_file("/dev/zero");
  REQUIRE_FALSE(device.is_ok());
  CHECK(device.status().message().find("not a regular file") != std::string::npos);
}

TEST_CASE("artifact: constants beyond FlatBuffers' 2 GiB are written, mapped and read back") {
  // 2.25 GiB of one constant: formats 1-2 could not hold it (one FlatBuffer, 32-bit offsets).
  ir::testing::GraphBuilder b;
  const int64_t elements = (int64_t(9) << 28) / 4;
  Result<ir::Tensor> big = ir::Tensor::zeros(ir::DType::kF32, {elements});
  REQUIRE(big.is_ok());
  float* values = big->mutable_data_as<float>();
  values[0] = 1.5f;
  values[elements - 1] = -2.5f;
  ir::NodeId c = b.constant("big", *big);
  b.output("big", c);
  const std::string path = temp_path("test_artifact_big.kiln");
  REQUIRE(artifact::write_artifact_file(path, b.graph, ir::ExecutionPlan{}, {}).is_ok());
  big = ir::Tensor();  // the graph still holds it; the reader must not need a second copy
  b.graph = ir::Graph();
  {
    Result<artifact::LoadedArtifact> loaded = artifact::read_artifact_file(path);
    INFO((loaded.is_ok() ? std::string() : loaded.status().message()));
    REQUIRE(loaded.is_ok());
    REQUIRE(loaded->graph.constants().size() == 1);
    const ir::Tensor& t = loaded->graph.constants()[0];
    CHECK(t.is_view());  // in place in the mapping, not copied
    REQUIRE(t.num_elements() == elements);
    CHECK(t.data_as<float>()[0] == 1.5f);
    CHECK(t.data_as<float>()[elements - 1] == -2.5f);
  }
  std::remove(path.c_str());
}
