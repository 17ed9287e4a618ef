// Convolution weights packed at compile time in the layout the cpu driver's oneDNN primitive
// reads them in (artifact/packed_layout.h, vendor/onednn/onednn_conv.h): the packing against
// oneDNN's own reorder, the layout checks, the cpu target's records, the writer and reader, and
// the driver using them in place.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "artifact/packed_layout.h"
#include "runtime/drivers/cpu/onednn.h"
#include "test_compile_util.h"
#include "vendor/onednn/onednn_conv.h"

namespace {

using kiln::artifact::ConvCall;
using kiln::artifact::PackedLayout;

const kiln::onednn::OneDnnApi& onednn_api() {
  kiln::Result<const kiln::onednn::OneDnnApi*> api = kiln::onednn::load_onednn();
  // scripts/setup.sh installs libdnnl-dev; the cpu device without it is a slower configuration,
  // not one these tests cover.
  REQUIRE_MESSAGE(api.is_ok(), api.status().to_string());
  return **api;
}

ConvCall conv(int64_t channels, int64_t out_channels, int64_t kernel, int64_t groups, bool channels_last) {
  ConvCall call;
  call.x_arg = 0;
  call.w_arg = 1;
  call.out_arg = 2;
  call.batch = kiln::ir::SizeExpr::constant(1);
  call.channels = channels;
  call.out_channels = out_channels;
  call.height = call.width = 14;
  call.kernel_h = call.kernel_w = kernel;
  call.pad_h = call.pad_w = kernel / 2;
  call.groups = groups;
  call.channels_last = channels_last;
  return call;
}

// `values` reordered by oneDNN from `from` into `to`.
std::vector<float> onednn_reorder(const kiln::onednn::OneDnnApi& api, const dnnl_memory_desc_t& from,
                                  const dnnl_memory_desc_t& to, std::vector<float>& values) {
  using kiln::onednn::dnnl_check;
  using kiln::onednn::Owned;
  std::vector<float> out(api.dnnl_memory_desc_get_size(&to) / sizeof(float), -1.0f);
  Owned<dnnl_primitive_desc_t> pd(api.dnnl_primitive_desc_destroy);
  REQUIRE(dnnl_check(api.dnnl_reorder_primitive_desc_create(pd.out(), &from, api.engine, &to, api.engine, nullptr), "pd").is_ok());
  Owned<dnnl_primitive_t> reorder(api.dnnl_primitive_destroy);
  REQUIRE(api.dnnl_primitive_create(reorder.out(), pd.get()) == dnnl_success);
  Owned<dnnl_memory_t> src(api.dnnl_memory_destroy), dst(api.dnnl_memory_destroy);
  REQUIRE(api.dnnl_memory_create(src.out(), &from, api.engine, values.data()) == dnnl_success);
  REQUIRE(api.dnnl_memory_create(dst.out(), &to, api.engine, out.data()) == dnnl_success);
  Owned<dnnl_stream_t> stream(api.dnnl_stream_destroy);
  REQUIRE(api.dnnl_stream_create(stream.out(), api.engine, dnnl_stream_default_flags) == dnnl_success);
  dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, src.get()}, {DNNL_ARG_TO, dst.get()}};
  REQUIRE(api.dnnl_primitive_execute(reorder.get(), stream.get(), 2, args) == dnnl_success);
  REQUIRE(api.dnnl_stream_wait(stream.get()) == dnnl_success);
  return out;
}

// "[[[[v, v, ...]]]]": a nested literal of distinct values for a tensor of `shape`.
std::string literal(const std::vector<int64_t>& shape, size_t dim, int64_t& next) {
  if (dim == shape.size()) return std::to_string(std::sin(double(next++) * 0.37) * 0.5);
  std::string out = "[";
  for (int64_t i = 0; i < shape[dim]; ++i) out += (i ? ", " : "") + literal(shape, dim + 1, next);
  return out + "]";
}

}  // namespace

TEST_CASE("packed weights: pack_constant writes what oneDNN's reorder writes") {
  const kiln::onednn::OneDnnApi& api = onednn_api();
  int packed_shapes = 0;
  // A 3x3 conv whose output channels are no multiple of a block (padded), a ResNet 1x1, a first
  // conv of 3 channels, a depthwise and a grouped conv; NCHW and NHWC.
  for (bool channels_last : {false, true}) {
    for (ConvCall call : {conv(16, 24, 3, 1, channels_last), conv(64, 256, 1, 1, channels_last),
                          conv(3, 64, 7, 1, channels_last), conv(32, 32, 3, 32, channels_last),
                          conv(16, 32, 3, 2, channels_last)}) {
      CAPTURE(call.channels);
      CAPTURE(call.out_channels);
      CAPTURE(call.groups);
      CAPTURE(channels_last);
      auto described = kiln::onednn::describe_convolution(api, call, 1);
      REQUIRE_MESSAGE(described.is_ok(), described.status().to_string());
      std::optional<PackedLayout> layout =
          kiln::onednn::packed_layout_of(described->weights, described->plain_weights);
      if (!layout) continue;  // oneDNN reads this one as it is stored
      ++packed_shapes;
      const uint64_t source_elements = api.dnnl_memory_desc_get_size(&described->plain_weights) / sizeof(float);
      REQUIRE(kiln::artifact::check_packed_layout(*layout, source_elements).is_ok());
      CHECK(kiln::onednn::layout_is(api, *layout, described->weights));
      std::vector<float> plain(source_elements);
      for (size_t i = 0; i < plain.size(); ++i) plain[i] = float(i % 1009) * 0.25f + 1.0f;
      std::vector<float> packed(kiln::artifact::packed_elements(*layout), -1.0f);
      kiln::artifact::pack_constant(*layout, reinterpret_cast<const std::byte*>(plain.data()), sizeof(float),
                                    reinterpret_cast<std::byte*>(packed.data()));
      std::vector<float> expected = onednn_reorder(api, described->plain_weights, described->weights, plain);
      REQUIRE(packed.size() == expected.size());
      CHECK(std::memcmp(packed.data(), expected.data(), packed.size() * sizeof(float)) == 0);
    }
  }
  // On any x86-64 CPU oneDNN has a blocked layout for most of these.
  CHECK(packed_shapes >= 4);
}

TEST_CASE("packed weights: check_packed_layout refuses layouts that do not fit") {
  // OIhw8i8o of a [16, 16, 1, 1] tensor.
  const PackedLayout good{{16, 16, 1, 1}, {16, 1, 1, 1}, {16, 16, 1, 1}, {128, 64, 64, 64}, {1, 0}, {8, 8}};
  CHECK(kiln::artifact::check_packed_layout(good, 256).is_ok());
  CHECK(kiln::artifact::packed_elements(good) == 256);
  CHECK(kiln::artifact::check_packed_layout(good, 255).message().find("reads element 255") != std::string::npos);
  PackedLayout bad = good;
  bad.padded_dims[0] = 12;  // not a multiple of its block, and below its dim
  CHECK(kiln::artifact::check_packed_layout(bad, 256).message().find("dim 0") != std::string::npos);
  bad = good;
  bad.inner_dims = {1, 4};  // no dim 4
  CHECK(kiln::artifact::check_packed_layout(bad, 256).message().find("inner block 1") != std::string::npos);
  bad = good;
  bad.outer_strides.pop_back();
  CHECK(!kiln::artifact::check_packed_layout(bad, 256).is_ok());
  bad = good;
  bad.outer_strides[0] = -1;
  CHECK(!kiln::artifact::check_packed_layout(bad, 256).is_ok());
  bad = good;  // blocks whose product would wrap around 64 bits
  bad.inner_dims.assign(8, 0);
  bad.inner_sizes.assign(8, 1024);
  CHECK(kiln::artifact::check_packed_layout(bad, 256).message().find("too large") != std::string::npos);
  bad = good;  // strides whose extent would wrap around 64 bits
  bad.padded_dims = {int64_t(1) << 30, 16, 1, 1};
  bad.dims = bad.padded_dims;
  bad.outer_strides = {int64_t(1) << 40, 64, 64, 64};
  CHECK(kiln::artifact::check_packed_layout(bad, uint64_t(1) << 40).message().find("too large") != std::string::npos);
}

TEST_CASE("packed weights: the cpu target packs constant weights, the file carries them, the driver reads them in place") {
  if (!kiln::testing::cpu_target_available()) return;
  const kiln::onednn::OneDnnApi& api = onednn_api();
  int64_t next = 0;
  const std::string w = literal({24, 16, 3, 3}, 0, next), d = literal({16, 1, 3, 3}, 0, next);
  const std::string text = "graph g(x: f32[1, 16, 10, 9]) -> (y: f32[1, 24, 10, 9], z: f32[1, 16, 5, 5]) {\n"
                           "  y = relu(conv2d(x, const f32[24, 16, 3, 3] " + w + ", pads=[1, 1, 1, 1]))\n"
                           "  z = conv2d(x, const f32[16, 1, 3, 3] " + d + ", strides=[2, 2], pads=[1, 1, 1, 1], groups=16)\n}\n";
  // NHWC, as kilnc compiles for the cpu target alone: oneDNN's NCHW convolution (im2col + GEMM)
  // reads the weights as they are stored, and there is nothing to pack.
  kiln::Diagnostics diags;
  kiln::Result<kiln::ir::Graph> graph = kiln::frontend::parse_graph_text(text, "packed.graph", "", diags);
  REQUIRE_MESSAGE(graph.is_ok(), diags.to_string());
  kiln::testing::PlannedGraph planned{std::move(graph).value(), {}};
  kiln::passes::PipelineOptions pipeline;
  pipeline.channels_last = kiln::passes::PipelineOptions::Floats::kAll;
  kiln::Result<kiln::ir::ExecutionPlan> plan = kiln::passes::run_pipeline(planned.graph, pipeline);
  REQUIRE_MESSAGE(plan.is_ok(), plan.status().to_string());
  planned.plan = std::move(plan).value();
  auto target = kiln::codegen::create_target(kiln::artifact::kCpuTarget);
  REQUIRE(target.is_ok());
  auto compiled = kiln::codegen::compile_graph(**target, planned.graph, planned.plan, kiln::codegen::TargetOptions{});
  REQUIRE_MESSAGE(compiled.is_ok(), compiled.status().to_string());
  kiln::artifact::WriteOptions options;
  options.kernels = compiled->kernels;
  options.modules = compiled->modules;
  auto bytes = kiln::artifact::write_artifact(planned.graph, planned.plan, options);
  REQUIRE_MESSAGE(bytes.is_ok(), bytes.status().to_string());

  SUBCASE("the file writer writes the same bytes as the in-memory writer") {
    const std::string path = (std::filesystem::temp_directory_path() / ("kiln-packed-" + std::to_string(getpid()) + ".kiln")).string();
    auto writer = kiln::artifact::ArtifactFileWriter::begin(path, planned.graph);
    REQUIRE(writer.is_ok());
    REQUIRE((*writer)->map_constants(planned.graph).is_ok());  // packed from the file's pages, as kilnc does
    REQUIRE((*writer)->finish(planned.graph, planned.plan, options).is_ok());
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::filesystem::remove(path);
    CHECK(file == *bytes);
  }

  // Read from a file, as the runtime reads artifacts: mapped, so that the packed weights are
  // 64-byte aligned (the driver reorders weights it finds less aligned).
  auto shared = std::make_shared<const std::vector<uint8_t>>(std::move(bytes).value());
  const std::string path = (std::filesystem::temp_directory_path() / ("kiln-packed-read-" + std::to_string(getpid()) + ".kiln")).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(shared->data()), std::streamsize(shared->size()));
  auto loaded = kiln::artifact::read_artifact_file(path);
  std::filesystem::remove(path);
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().to_string());
  int packed_convs = 0;
  for (const kiln::artifact::KernelBinary& k : loaded->kernels) {
    if (!k.conv || !k.conv->packed_layout) continue;
    ++packed_convs;
    const ConvCall& call = *k.conv;
    CAPTURE(k.kernel_name);
    // The bytes are the source constant packed.
    const kiln::ir::Tensor& source = loaded->graph.constant_of(k.args[call.w_arg].value);
    std::vector<std::byte> expected(kiln::artifact::packed_elements(*call.packed_layout) * sizeof(float));
    kiln::artifact::pack_constant(*call.packed_layout, source.data(), sizeof(float), expected.data());
    REQUIRE(call.packed_weights.size() == expected.size());
    CHECK(std::memcmp(call.packed_weights.data(), expected.data(), expected.size()) == 0);

    // The driver's primitive takes them in place, and computes what it computes from w reordered.
    auto in_place = kiln::runtime::cpu::OneDnnConvolution::create(api, call, 1, source.data());
    ConvCall unpacked = call;
    unpacked.packed_layout.reset();
    unpacked.packed_weights = {};
    auto reordered = kiln::runtime::cpu::OneDnnConvolution::create(api, unpacked, 1, source.data());
    REQUIRE(in_place.is_ok());
    REQUIRE(reordered.is_ok());
    CHECK((*in_place)->uses_packed_weights());
    CHECK(!(*reordered)->uses_packed_weights());
    std::vector<float> x(size_t(16 * 10 * 9));  // NHWC
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(float(i) * 0.1f);
    std::vector<float> out_in_place(size_t(call.out_channels * call.out_height() * call.out_width())), out_reordered(out_in_place.size());
    std::vector<void*> args(k.args.size(), nullptr);
    args[call.x_arg] = x.data();
    if (call.bias_arg >= 0) FAIL("no bias in this graph");
    args[call.out_arg] = out_in_place.data();
    REQUIRE((*in_place)->run(args).is_ok());
    args[call.out_arg] = out_reordered.data();
    REQUIRE((*reordered)->run(args).is_ok());
    CHECK(out_in_place == out_reordered);
  }
  CHECK(packed_convs == 2);

  SUBCASE("a damaged byte of the packed weights is reported as such") {
    std::vector<uint8_t> damaged = *shared;
    for (const kiln::artifact::KernelBinary& k : loaded->kernels)
      if (k.conv && k.conv->packed_layout) {
        damaged[size_t(k.conv->packed_weights.data() - loaded->bytes.data.data()) + 5] ^= 0x40;
        break;
      }
    auto reread = kiln::artifact::read_artifact(std::make_shared<const std::vector<uint8_t>>(std::move(damaged)));
    REQUIRE(!reread.is_ok());
    CHECK(reread.status().message().find("packed weights are damaged") != std::string::npos);
  }
}
