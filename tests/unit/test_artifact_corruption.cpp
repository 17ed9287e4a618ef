// Loading damaged artifacts: every truncation and thousands of random byte flips must give a
// clean error or a valid artifact, never a crash or an out-of-bounds read (run this binary
// under AddressSanitizer to check the latter).
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>

#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "test_artifact_util.h"

using namespace kiln;
using namespace kiln::artifact::testing;

TEST_CASE("artifact corruption: every truncation is a clear error") {
  SampleModel model = sample_model();
  const std::vector<uint8_t> bytes = write_or_fail(model.graph, model.plan);
  REQUIRE(bytes.size() > 64);
  for (size_t k = 0; k < 64; ++k) {
    const size_t size = bytes.size() * k / 64;
    INFO("truncated to " << size << " of " << bytes.size() << " bytes");
    Result<artifact::LoadedArtifact> r = read_bytes(std::vector<uint8_t>(bytes.begin(), bytes.begin() + long(size)));
    REQUIRE_FALSE(r.is_ok());
    CHECK((r.status().code() == ErrorCode::kCorrupt || r.status().code() == ErrorCode::kInvalidArgument));
    CHECK(r.status().message().find("artifact") != std::string::npos);
  }
  // Dropping only the last byte is also caught.
  Result<artifact::LoadedArtifact> r = read_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1));
  CHECK_FALSE(r.is_ok());
  // So is data appended after the end.
  std::vector<uint8_t> longer = bytes;
  longer.resize(bytes.size() + 64, 0);
  r = read_bytes(longer);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("truncated or with data appended") != std::string::npos);
}

TEST_CASE("artifact corruption: random byte flips never crash") {
  SampleModel model = sample_model();
  const std::vector<uint8_t> original = write_or_fail(model.graph, model.plan);
  std::mt19937 rng(20240611);
  int loaded = 0, rejected = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::vector<uint8_t> bytes = original;
    const int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % bytes.size();
      bytes[at] = uint8_t(bytes[at] ^ (1u << (rng() % 8)));
    }
    Result<artifact::LoadedArtifact> r = read_bytes(std::move(bytes));
    if (!r.is_ok()) {
      ++rejected;
      const ErrorCode code = r.status().code();
      CHECK((code == ErrorCode::kCorrupt || code == ErrorCode::kInvalidArgument));
      CHECK_FALSE(r.status().message().empty());
      continue;
    }
    ++loaded;
    // Whatever loads is a valid graph (the reader ran the verifier), so it can be executed.
    CHECK(ir::verify_graph(r->graph).is_ok());
    std::vector<ir::Tensor> inputs;
    bool runnable = true;
    for (ir::NodeId id : r->graph.inputs()) {
      std::vector<int64_t> sizes;
      for (const ir::Dim& d : r->graph.node(id).type.shape) sizes.push_back(d.is_static() ? d.size() : 2);
      Result<ir::Tensor> t = ir::Tensor::zeros(r->graph.node(id).type.dtype, sizes);
      if (!t.is_ok() || t->num_elements() > (1 << 20)) {
        runnable = false;
        break;
      }
      inputs.push_back(std::move(t).value());
    }
    if (runnable) (void)ir::interpret(r->graph, inputs);  // must return, ok or not
  }
  MESSAGE("byte flips: " << loaded << " loaded, " << rejected << " rejected");
  CHECK(loaded + rejected == 2000);
  CHECK(rejected > 0);
}

TEST_CASE("artifact corruption: flips in a larger real graph never crash") {
  // The all-ops graph has every attribute table, so flips reach every conversion path.
  ir::testing::GraphBuilder b;
  ir::NodeId x = b.input("x", "f32[N, 3, 8, 8]");
  ir::NodeId w = b.constant("w", ir::testing::f32_tensor({4, 3, 1, 1}, std::vector<float>(12, 0.5f)));
  ir::NodeId conv = b.op(ir::OpKind::kConv2d, "conv", {x, w});
  ir::NodeId pool = b.op(ir::OpKind::kMaxPool2d, "pool", {conv},
                         ir::Pool2dAttrs{{2, 2}, {2, 2}, {0, 0, 0, 0}, false});
  ir::NodeId t = b.op(ir::OpKind::kTranspose, "t", {pool}, ir::TransposeAttrs{{0, 2, 3, 1}});
  ir::NodeId r = b.op(ir::OpKind::kReshape, "r", {t},
                      ir::ReshapeAttrs{{ir::Dim::symbol("N"), ir::Dim::of(-1)}});
  ir::NodeId c = b.op(ir::OpKind::kClamp, "c", {r}, ir::ClampAttrs{-1.0, std::nullopt});
  ir::NodeId s = b.op(ir::OpKind::kSoftmax, "s", {c}, ir::AxisAttrs{-1});
  ir::NodeId cast = b.op(ir::OpKind::kCast, "cast", {s}, ir::CastAttrs{ir::DType::kF16});
  b.output("cast", cast);
  const std::vector<uint8_t> original = write_or_fail(b.graph, ir::ExecutionPlan{});
  Result<artifact::LoadedArtifact> clean = read_bytes(original);
  REQUIRE(clean.is_ok());
  std::mt19937 rng(7);
  int rejected = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::vector<uint8_t> bytes = original;
    const size_t at = rng() % bytes.size();
    bytes[at] = uint8_t(rng());
    Result<artifact::LoadedArtifact> r = read_bytes(std::move(bytes));
    if (!r.is_ok()) ++rejected;
  }
  CHECK(rejected > 0);
}

namespace {

// The sample model with CUDA-style kernels: "module" kernels with a GEMM call, a PTX module and
// a cubin (blobs are stand-ins: the artifact layer treats them as opaque bytes).
artifact::WriteOptions module_options() {
  artifact::WriteOptions options;
  using Arg = artifact::KernelArg;
  artifact::KernelBinary k0{"cuda", "fused_add_mul_relu_0", 0, "module", "k_fused_add_mul_relu_0", {}, {},
                            // kernel_signature: inputs x, w, y, output r, symbol N
                            {{Arg::Kind::kBuffer, 0, ""}, {Arg::Kind::kBuffer, 2, ""}, {Arg::Kind::kBuffer, 1, ""},
                             {Arg::Kind::kBuffer, 5, ""}, {Arg::Kind::kSymbol, 0, "N"}},
                            {}};
  k0.dispatch.work_items = ir::SizeExpr::symbol("N") * 4;
  k0.dispatch.items_per_group = 1024;
  k0.dispatch.workgroup_size = 256;
  artifact::GemmCall gemm;
  gemm.a_arg = 0;
  gemm.b_arg = 1;
  gemm.out_arg = 3;
  gemm.bias_arg = 2;
  gemm.residual_arg = 0;  // a stand-in, as the conv call below
  gemm.alpha = 0.125f;
  gemm.m = ir::SizeExpr::symbol("N");
  gemm.n = ir::SizeExpr::constant(4);
  gemm.k = ir::SizeExpr::constant(4);
  gemm.batch = ir::SizeExpr::constant(1);
  gemm.b_batched = false;
  gemm.epilogue = artifact::GemmCall::Epilogue::kGeluTanh;
  gemm.allow_tf32 = true;
  gemm.in_place_epilogue.args = {3, 2, 3, 4};  // a function finishing the epilogue (artifact.h)
  gemm.in_place_epilogue.dispatch.work_items = ir::SizeExpr::symbol("N") * 4;
  gemm.in_place_epilogue.dispatch.items_per_group = 256;
  gemm.in_place_epilogue.dispatch.workgroup_size = 256;
  k0.gemm = gemm;
  artifact::KernelBinary k1{"cuda", "reduce_sum_1", 1, "module", "k_reduce_sum_1", {}, {},
                            {{Arg::Kind::kBuffer, 5, ""}, {Arg::Kind::kBuffer, 6, ""}, {Arg::Kind::kSymbol, 0, "N"}},
                            {}};
  artifact::ConvCall conv;  // a stand-in: the artifact layer checks indices and sizes, not meaning
  conv.x_arg = 0;
  conv.w_arg = 0;
  conv.out_arg = 1;
  conv.residual_arg = 0;
  conv.dtype = ir::DType::kBF16;
  conv.batch = ir::SizeExpr::symbol("N");
  conv.channels = 4;
  conv.height = 7;
  conv.width = 5;
  conv.out_channels = 8;
  conv.kernel_h = 3;
  conv.kernel_w = 1;
  conv.groups = 2;
  conv.pad_h = 1;
  conv.stride_w = 2;
  conv.dilation_h = 2;
  conv.activation = artifact::ConvCall::Activation::kRelu;
  k1.conv = conv;
  // Every module holds every entry point's name (the reader checks that).
  const std::string ptx = "//\n.version 8.0\n.target sm_80\n.visible .entry k_fused_add_mul_relu_0()\n{ ret; }\n"
                          ".visible .entry k_fused_add_mul_relu_0_epilogue()\n{ ret; }\n"
                          ".visible .entry k_reduce_sum_1()\n{ ret; }\n";
  std::vector<uint8_t> cubin(300, 0x5a);
  const std::string symbols =
      std::string("k_fused_add_mul_relu_0") + '\0' + "k_fused_add_mul_relu_0_epilogue" + '\0' + "k_reduce_sum_1";
  std::copy(symbols.begin(), symbols.end(), cubin.begin() + 100);
  options.kernels = {k0, k1};
  options.modules = {{"cuda", "ptx", std::vector<uint8_t>(ptx.begin(), ptx.end())}, {"cuda", "cubin:sm_80", cubin}};
  return options;
}

// Replaces the first occurrence of `from` in `bytes` by `to` (same length).
bool patch(std::vector<uint8_t>& bytes, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  auto it = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
  if (it == bytes.end()) return false;
  std::copy(to.begin(), to.end(), it);
  return true;
}

}  // namespace

TEST_CASE("artifact modules: PTX/cubin modules, GEMM and conv calls round-trip") {
  SampleModel model = sample_model();
  const artifact::WriteOptions options = module_options();
  std::vector<uint8_t> file = write_or_fail(model.graph, model.plan, options);
  const uint8_t* file_begin = file.data();
  const uint8_t* file_end = file.data() + file.size();
  Result<artifact::LoadedArtifact> r = read_bytes(std::move(file));
  REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
  CHECK(r->modules == options.modules);
  CHECK(r->kernels == options.kernels);
  // The modules' blobs are views of the file's bytes, not copies.
  for (const artifact::ModuleBinary& m : r->modules)
    CHECK((m.blob.data() >= file_begin && m.blob.data() + m.blob.size() <= file_end));
  REQUIRE(r->kernels[1].conv.has_value());
  CHECK(r->kernels[1].conv->out_height() == 5);
  CHECK(r->kernels[1].conv->out_width() == 3);
  CHECK(r->targets() == std::vector<std::string>{"cuda"});

  // Several modules (NVRTC programs), each kernel in its own: ids round-trip, and one format may
  // appear once per module.
  artifact::WriteOptions split = module_options();
  const std::string ptx1 = "//\n.version 8.0\n.target sm_80\n.visible .entry k_reduce_sum_1()\n{ ret; }\n";
  split.modules.push_back({"cuda", "ptx", std::vector<uint8_t>(ptx1.begin(), ptx1.end()), 1});
  split.kernels[1].module_id = 1;
  r = read_bytes(write_or_fail(model.graph, model.plan, split));
  REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
  CHECK(r->modules == split.modules);
  CHECK(r->kernels == split.kernels);
}

TEST_CASE("artifact modules: the writer refuses inconsistent modules, GEMM and conv calls") {
  SampleModel model = sample_model();
  auto refused = [&](const artifact::WriteOptions& options, const std::string& why) {
    Result<std::vector<uint8_t>> bytes = artifact::write_artifact(model.graph, model.plan, options);
    REQUIRE_FALSE(bytes.is_ok());
    CHECK_MESSAGE(bytes.status().message().find(why) != std::string::npos, bytes.status().message());
  };
  artifact::WriteOptions o = module_options();
  o.modules.clear();
  refused(o, "has no such module");
  o = module_options();
  o.kernels[1].module_id = 1;
  refused(o, "lives in module 1, but target 'cuda' has no such module");
  o = module_options();
  o.modules[1].format = "cubin:sm_";
  refused(o, "unknown format");
  o = module_options();
  o.modules.push_back(o.modules[0]);
  refused(o, "two 'ptx' modules");
  o = module_options();
  o.modules[0].blob = artifact::Blob();
  refused(o, "is empty");
  o = module_options();
  o.kernels[1].format = "cubin";
  refused(o, "unknown format");
  o = module_options();
  o.kernels[0].gemm->out_arg = 9;
  refused(o, "out of range");
  o = module_options();
  o.kernels[0].gemm->b_arg = 4;  // the symbol argument
  refused(o, "not a buffer");
  o = module_options();
  o.kernels[0].gemm->dtype = ir::DType::kF16;  // allow_tf32 is f32 only
  refused(o, "allow_tf32");
  o = module_options();
  o.kernels[0].gemm->in_place_epilogue.args.push_back(9);
  refused(o, "epilogue argument 9 is out of range");
  o = module_options();
  o.kernels[1].conv->residual_arg = 1;
  refused(o, "conv call: its output is also one of its operands");
  o = module_options();
  o.kernels[1].conv->groups = 3;
  refused(o, "not divisible by the groups");
  o = module_options();
  o.kernels[1].conv->kernel_h = 20;
  refused(o, "conv call: the output is empty");
  o = module_options();
  o.kernels[1].conv->dtype = ir::DType::kI32;
  refused(o, "is not f32, f16 or bf16");
}

TEST_CASE("artifact modules: damaged modules, formats and GEMM calls are clear errors") {
  SampleModel model = sample_model();
  const std::vector<uint8_t> original = write_or_fail(model.graph, model.plan, module_options());
  auto rejected = [&](std::vector<uint8_t> bytes, const std::string& why) {
    Result<artifact::LoadedArtifact> r = read_bytes(std::move(bytes));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kCorrupt);
    CHECK_MESSAGE(r.status().message().find(why) != std::string::npos, r.status().message());
  };
  std::vector<uint8_t> bytes = original;
  REQUIRE(patch(bytes, "cubin:sm_80", "cubin:sm_8x"));
  rejected(bytes, "unknown module format");
  bytes = original;
  REQUIRE(patch(bytes, ".target sm_80", ".target sm_81"));
  rejected(bytes, "target 'cuda' module 0 'ptx': its binary is damaged (checksum mismatch)");
  bytes = original;  // damaged bytes are named before the entry points they no longer hold
  REQUIRE(patch(bytes, ".entry k_reduce_sum_1", ".entry k_reduce_sum_7"));
  rejected(bytes, "target 'cuda' module 0 'ptx': its binary is damaged (checksum mismatch)");
  bytes = original;
  REQUIRE(patch(bytes, "module", "modulx"));
  rejected(bytes, "unknown format 'modulx'");
  bytes = original;
  REQUIRE(patch(bytes, "ptx", "ptz"));
  rejected(bytes, "unknown module format");
  bytes = original;
  REQUIRE(patch(bytes, "k_reduce_sum_1", "k_reduce_sum_7"));  // the kernel's entry_point string
  rejected(bytes, "is not in the 'ptx' module");
  // A GEMM call with an epilogue function that the modules lack.
  artifact::WriteOptions no_epilogue = module_options();
  no_epilogue.modules.resize(1);
  const std::string ptx = "//\n.version 8.0\n.target sm_80\n.visible .entry k_fused_add_mul_relu_0()\n{ ret; }\n"
                          ".visible .entry k_reduce_sum_1()\n{ ret; }\n";
  no_epilogue.modules[0].blob = std::vector<uint8_t>(ptx.begin(), ptx.end());
  rejected(write_or_fail(model.graph, model.plan, no_epilogue),
           "its library epilogue function 'k_fused_add_mul_relu_0_epilogue' is not in the 'ptx' module");

  // Every truncation and random flips: an error or a valid artifact, never a crash.
  for (size_t k = 0; k < 64; ++k) {
    Result<artifact::LoadedArtifact> r =
        read_bytes(std::vector<uint8_t>(original.begin(), original.begin() + long(original.size() * k / 64)));
    CHECK_FALSE(r.is_ok());
  }
  std::mt19937 rng(99);
  int loaded = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    bytes = original;
    for (int f = 0, flips = 1 + int(rng() % 3); f < flips; ++f) {
      const size_t at = rng() % bytes.size();
      bytes[at] = uint8_t(bytes[at] ^ (1u << (rng() % 8)));
    }
    Result<artifact::LoadedArtifact> r = read_bytes(std::move(bytes));
    if (!r.is_ok()) {
      CHECK((r.status().code() == ErrorCode::kCorrupt || r.status().code() == ErrorCode::kInvalidArgument));
      continue;
    }
    ++loaded;
    // What loads is consistent: module kernels have a module, GEMM calls index buffer args.
    for (const artifact::KernelBinary& k : r->kernels) {
      if (k.format == "module")
        CHECK(std::any_of(r->modules.begin(), r->modules.end(),
                          [&](const artifact::ModuleBinary& m) { return m.id == k.module_id; }));
      if (k.gemm) CHECK(artifact::check_gemm_call(*k.gemm, k.args).is_ok());
    }
  }
  MESSAGE("module artifact flips: " << loaded << " loaded of 2000");
}
