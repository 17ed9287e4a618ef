// Vulkan device-feature fallbacks: the word-storage variants the Vulkan target emits for kernels
// with 1- and 2-byte buffers, the artifact's rules for several binaries of one kernel, the
// driver's choice among them, and the KILN_VULKAN_HIDE_FEATURES testing knob (through the C API:
// the fallbacks compute what the reference interpreter does; a kernel no variant of which fits
// fails to load with a clear error).
//
// The C API tests set KILN_VULKAN_HIDE_FEATURES around creating a session: the Vulkan driver reads
// it when it opens a device, which the C API does when the first session on it is created (and
// again after the last one is gone). doctest runs the test cases one at a time on this thread.
// Without a Vulkan device the device tests print why and skip, unless KILN_REQUIRE_DRIVERS names
// "vulkan", in which case they fail.
#include <doctest/doctest.h>

#ifdef KILN_HAVE_SPIRV_COMPILER

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "artifact/reader.h"
#include "artifact/writer.h"
#include "codegen/target.h"
#include "frontend/parser.h"
#include "kiln/runtime.h"
#include "passes/pipeline.h"
#include "runtime/drivers/vulkan/vulkan_context.h"
#include "support/diagnostics.h"

using namespace kiln;

namespace {

struct Compiled {
  ir::Graph graph;
  ir::ExecutionPlan plan;
  codegen::CompiledKernels vulkan;
};

Compiled compile_for_vulkan(const std::string& text) {
  Diagnostics diags;
  Result<ir::Graph> g = frontend::parse_graph_text(text, "fallback.graph", "", diags);
  REQUIRE_MESSAGE(g.is_ok(), diags.to_string());
  Compiled c{std::move(g).value(), {}, {}};
  Result<ir::ExecutionPlan> plan = passes::run_pipeline(c.graph, passes::PipelineOptions{});
  REQUIRE_MESSAGE(plan.is_ok(), plan.status().to_string());
  c.plan = std::move(plan).value();
  Result<std::unique_ptr<codegen::Target>> target = codegen::create_target("vulkan");
  REQUIRE_MESSAGE(target.is_ok(), target.status().message());
  Result<codegen::CompiledKernels> kernels = codegen::compile_graph(**target, c.graph, c.plan, codegen::TargetOptions{});
  REQUIRE_MESSAGE(kernels.is_ok(), kernels.status().message());
  c.vulkan = std::move(kernels).value();
  return c;
}

std::vector<uint8_t> write(const Compiled& c, const std::vector<artifact::KernelBinary>& kernels) {
  artifact::WriteOptions options;
  options.kernels = kernels;
  Result<std::vector<uint8_t>> bytes = artifact::write_artifact(c.graph, c.plan, options);
  REQUIRE_MESSAGE(bytes.is_ok(), bytes.status().message());
  return std::move(bytes).value();
}

std::vector<const artifact::KernelBinary*> variants_of(const Compiled& c, uint32_t kernel_index) {
  std::vector<const artifact::KernelBinary*> out;
  for (const artifact::KernelBinary& k : c.vulkan.kernels)
    if (k.kernel_index == kernel_index) out.push_back(&k);
  return out;
}

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Sets (or, with nullopt, unsets) an environment variable for one scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The id of the first Vulkan device the C API lists, or "" after failing (when
// KILN_REQUIRE_DRIVERS names vulkan) or printing why the test is skipped.
std::string vulkan_device_or_skip(const char* test) {
  size_t count = 0;
  if (kiln_device_count(&count) == KILN_OK) {
    for (size_t i = 0; i < count; ++i) {
      kiln_device_info info;
      if (kiln_device_get_info(i, &info) == KILN_OK && std::string(info.driver) == "vulkan") return info.id;
    }
  }
  const char* required = std::getenv("KILN_REQUIRE_DRIVERS");
  if (required && contains(required, "vulkan")) FAIL("no Vulkan device (KILN_REQUIRE_DRIVERS requires vulkan)");
  std::cout << "[skip] " << test << ": no Vulkan device\n";
  return "";
}

// Every dtype the word storage handles, at odd sizes (N = 1001: 7007 elements, so the last
// 32-bit word of each buffer is partial), written by neighbouring invocations.
constexpr const char* kSmallTypesGraph = R"(
graph small(x: f16[N, 7], k: i8[N, 7], u: u8[7], b: bf16[N, 7]) -> (gt: bool[N, 7], ki: i8[N, 7], ku: u8[N, 7], h: f16[N, 7], bb: bf16[N, 7], r: f16[N], kk: i8[N, 7]) {
  xf = cast(x, to=f32)
  gt = greater(xf, cast(k, to=f32))
  ki = cast(mul(cast(k, to=i32), const i32[] 3), to=i8)
  ku = cast(add(cast(u, to=i32), cast(k, to=i32)), to=u8)
  h = cast(mul(xf, const f32[] 0.5), to=f16)
  bb = cast(add(cast(b, to=f32), xf), to=bf16)
  r = reduce_max(x, axes=[1])
  kk = sub(k, reduce_min(k, axes=[1], keepdims=true))
}
)";
constexpr int64_t kRows = 1001;

// A u8 -> i64 argmax: its kernel needs shaderInt64 in every variant (i64 is not emulated).
constexpr const char* kArgmaxGraph = R"(
graph am(x: u8[N, 9]) -> (y: i64[N]) {
  y = argmax(x, axis=1)
}
)";

uint16_t f16_bits(float v) {  // exact for the small multiples of 1/8 used below
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (v == 0.0f) return uint16_t((u >> 16) & 0x8000u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int32_t exp = int32_t((u >> 23) & 0xffu) - 127 + 15;
  return uint16_t(sign | (uint32_t(exp) << 10) | ((u >> 13) & 0x3ffu));
}

uint16_t bf16_bits(float v) {  // exact: the values used have at most 8 significant bits
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return uint16_t(u >> 16);
}

struct SmallOutputs {
  std::vector<std::vector<uint8_t>> bytes;  // per output, in graph order
};

const char* const kSmallOutputs[] = {"gt", "ki", "ku", "h", "bb", "r", "kk"};
const size_t kSmallOutputBytes[] = {kRows * 7, kRows * 7, kRows * 7, kRows * 14, kRows * 14, kRows * 2, kRows * 7};

// Runs kSmallTypesGraph on `device` with fixed inputs; REQUIREs success.
SmallOutputs run_small(kiln_artifact* artifact, const std::string& device) {
  kiln_session* session = nullptr;
  REQUIRE_MESSAGE(kiln_session_create(artifact, device.c_str(), &session) == KILN_OK,
                  std::string(kiln_last_error_message()));
  std::vector<uint16_t> x(kRows * 7), b(kRows * 7);
  std::vector<int8_t> k(kRows * 7);
  std::vector<uint8_t> u(7);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = f16_bits(float(int(i * 37 % 41) - 20) * 0.125f);
    b[i] = bf16_bits(float(int(i * 11 % 29) - 14) * 0.25f);
    k[i] = int8_t(int(i * 53 % 256) - 128);
  }
  for (size_t i = 0; i < u.size(); ++i) u[i] = uint8_t(250 - 40 * i);
  const int64_t nd[2] = {kRows, 7}, ud[1] = {7};
  REQUIRE(kiln_session_set_input(session, "x", KILN_DTYPE_F16, nd, 2, x.data(), x.size() * 2) == KILN_OK);
  REQUIRE(kiln_session_set_input(session, "k", KILN_DTYPE_I8, nd, 2, k.data(), k.size()) == KILN_OK);
  REQUIRE(kiln_session_set_input(session, "u", KILN_DTYPE_U8, ud, 1, u.data(), u.size()) == KILN_OK);
  REQUIRE(kiln_session_set_input(session, "b", KILN_DTYPE_BF16, nd, 2, b.data(), b.size() * 2) == KILN_OK);
  REQUIRE_MESSAGE(kiln_session_run(session) == KILN_OK, std::string(kiln_last_error_message()));
  SmallOutputs out;
  for (size_t o = 0; o < std::size(kSmallOutputs); ++o) {
    std::vector<uint8_t> bytes(kSmallOutputBytes[o]);
    REQUIRE(kiln_session_read_output(session, kSmallOutputs[o], bytes.data(), bytes.size()) == KILN_OK);
    out.bytes.push_back(std::move(bytes));
  }
  kiln_session_destroy(session);
  return out;
}

constexpr const char* kHideSmallStorage =
    "storage_buffer_16bit, storage_buffer_8bit,shader_float16,shader_int16,shader_int8";

}  // namespace

TEST_CASE("vulkan fallback: kernels with 1- and 2-byte buffers also get a word-storage variant") {
  Compiled c = compile_for_vulkan(
      "graph g(x: f16[N, 7], k: i8[N, 7], f: f32[N, 7], q: u8[N, 9]) -> (y: f16[N, 7], z: f32[N, 7], a: i64[N]) {\n"
      "  y = add(x, cast(k, to=f16))\n  z = exp(f)\n  a = argmax(q, axis=1)\n}\n");
  REQUIRE(c.graph.kernels().size() == 3);
  int small_kernels = 0;
  for (uint32_t k = 0; k < c.graph.kernels().size(); ++k) {
    const std::vector<const artifact::KernelBinary*> variants = variants_of(c, k);
    CAPTURE(c.graph.kernels()[k].name);
    const std::vector<std::string>& primary = variants.front()->required_features;
    const bool small = has(primary, "storage_buffer_16bit") || has(primary, "storage_buffer_8bit");
    if (!small) {
      CHECK(variants.size() == 1);  // f32 only: nothing to fall back from
      continue;
    }
    ++small_kernels;
    REQUIRE(variants.size() == 2);
    const artifact::KernelBinary& words = *variants[1];
    // Same kernel, same calling convention; only the features (and the code) differ.
    CHECK(words.kernel_name == variants[0]->kernel_name);
    CHECK(words.args == variants[0]->args);
    CHECK(words.dispatch == variants[0]->dispatch);
    CHECK(words.blob != variants[0]->blob);
    const bool i64 = has(primary, "shader_int64");
    CHECK(words.required_features == (i64 ? std::vector<std::string>{"shader_int64"} : std::vector<std::string>{}));
  }
  CHECK(small_kernels == 2);  // the f16/i8 add and the u8 -> i64 argmax

  // -S sources: the word variant declares its small buffers as uint words, uses no 8/16-bit
  // extension, and writes sub-word elements with atomics.
  // Only the add kernel writes a small buffer (y: f16); the argmax writes i64 and only reads u8.
  int word_sources = 0, with_atomics = 0;
  Result<std::unique_ptr<codegen::Target>> target = codegen::create_target("vulkan");
  REQUIRE(target.is_ok());
  codegen::TargetOptions sources_only;
  sources_only.sources_only = true;
  Result<codegen::CompiledKernels> sources = codegen::compile_graph(**target, c.graph, c.plan, sources_only);
  REQUIRE_MESSAGE(sources.is_ok(), sources.status().message());
  for (const codegen::SourceFile& f : sources->sources) {
    if (f.suffix != ".words.comp") continue;
    ++word_sources;
    CAPTURE(f.text);
    CHECK(contains(f.text, "uint d[]"));
    CHECK_FALSE(contains(f.text, "GL_EXT_shader_16bit_storage"));
    CHECK_FALSE(contains(f.text, "GL_EXT_shader_8bit_storage"));
    CHECK_FALSE(contains(f.text, "float16_t"));
    if (contains(f.text, "atomicAnd(") && contains(f.text, "atomicOr(")) ++with_atomics;
  }
  CHECK(word_sources == 2);
  CHECK(with_atomics == 1);
}

TEST_CASE("vulkan fallback: the artifact keeps a kernel's variants in order and rejects ambiguous ones") {
  Compiled c = compile_for_vulkan(kArgmaxGraph);
  REQUIRE(c.vulkan.kernels.size() == 2);
  Result<artifact::LoadedArtifact> loaded =
      artifact::read_artifact(std::make_shared<std::vector<uint8_t>>(write(c, c.vulkan.kernels)));
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
  REQUIRE(loaded->kernels.size() == 2);
  CHECK(loaded->kernels[0] == c.vulkan.kernels[0]);
  CHECK(loaded->kernels[1] == c.vulkan.kernels[1]);

  // Two binaries of one kernel with the same features (in any order): a driver could not choose.
  std::vector<artifact::KernelBinary> twins = c.vulkan.kernels;
  twins[1].required_features = twins[0].required_features;
  std::reverse(twins[1].required_features.begin(), twins[1].required_features.end());
  Result<artifact::LoadedArtifact> ambiguous =
      artifact::read_artifact(std::make_shared<std::vector<uint8_t>>(write(c, twins)));
  REQUIRE_FALSE(ambiguous.is_ok());
  CHECK(ambiguous.status().code() == ErrorCode::kCorrupt);
  CHECK(contains(ambiguous.status().message(), "two binaries for kernel 0 with the same required features"));
}

TEST_CASE("vulkan fallback: KILN_VULKAN_HIDE_FEATURES lists are parsed into canonical names") {
  Result<std::set<std::string>> parsed = runtime::vulkan::parse_feature_list(" storage_buffer_16bit, int64 ,,storage8");
  REQUIRE(parsed.is_ok());
  CHECK(*parsed == std::set<std::string>{"shaderInt64", "storageBuffer16BitAccess", "storageBuffer8BitAccess"});
  CHECK(runtime::vulkan::parse_feature_list("")->empty());
  Result<std::set<std::string>> bad = runtime::vulkan::parse_feature_list("shader_int64,rayQuery");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(contains(bad.status().message(), "KILN_VULKAN_HIDE_FEATURES: unknown Vulkan feature 'rayQuery'"));
}

TEST_CASE("vulkan fallback: with 8/16-bit storage hidden, the word variants match the reference bit for bit") {
  const std::string device = vulkan_device_or_skip("vulkan fallback results");
  if (device.empty()) return;
  Compiled c = compile_for_vulkan(kSmallTypesGraph);
  std::vector<uint8_t> bytes = write(c, c.vulkan.kernels);
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);

  const SmallOutputs reference = run_small(artifact, "reference");
  SmallOutputs primary, fallback;
  {
    ScopedEnv env(runtime::vulkan::kHideFeaturesEnv, std::nullopt);
    primary = run_small(artifact, device);
  }
  {
    ScopedEnv env(runtime::vulkan::kHideFeaturesEnv, std::string(kHideSmallStorage));
    fallback = run_small(artifact, device);
  }
  // Every value is exact in its dtype (integers, bools, f16 halves of multiples of 1/8, bf16
  // sums rounded to nearest even like the reference), so all three agree byte for byte.
  for (size_t o = 0; o < std::size(kSmallOutputs); ++o) {
    CAPTURE(kSmallOutputs[o]);
    CHECK(primary.bytes[o] == reference.bytes[o]);
    CHECK(fallback.bytes[o] == reference.bytes[o]);
  }

  // Control: without its fallbacks the artifact cannot load on that device.
  std::vector<artifact::KernelBinary> primaries;
  for (const artifact::KernelBinary& k : c.vulkan.kernels) {
    bool seen = false;
    for (const artifact::KernelBinary& p : primaries) seen = seen || p.kernel_index == k.kernel_index;
    if (!seen) primaries.push_back(k);
  }
  std::vector<uint8_t> primary_bytes = write(c, primaries);
  kiln_artifact* primary_only = nullptr;
  REQUIRE(kiln_artifact_load_memory(primary_bytes.data(), primary_bytes.size(), &primary_only) == KILN_OK);
  {
    ScopedEnv env(runtime::vulkan::kHideFeaturesEnv, std::string(kHideSmallStorage));
    kiln_session* session = nullptr;
    CHECK(kiln_session_create(primary_only, device.c_str(), &session) == KILN_UNSUPPORTED);
    CHECK(session == nullptr);
    const std::string message = kiln_last_error_message();
    CHECK(contains(message, "which this device lacks"));
    CHECK((contains(message, "'storageBuffer16BitAccess'") || contains(message, "'storageBuffer8BitAccess'")));
    CHECK(contains(message, "hidden by KILN_VULKAN_HIDE_FEATURES"));
  }
  kiln_artifact_destroy(primary_only);
  kiln_artifact_destroy(artifact);
}

TEST_CASE("vulkan fallback: without shaderInt64 an i64 kernel fails to load with a clear error") {
  const std::string device = vulkan_device_or_skip("vulkan fallback int64");
  if (device.empty()) return;
  Compiled c = compile_for_vulkan(kArgmaxGraph);
  const std::string kernel = c.graph.kernels()[0].name;
  std::vector<uint8_t> bytes = write(c, c.vulkan.kernels);
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  {
    // Only shaderInt64 hidden: both variants need it.
    ScopedEnv env(runtime::vulkan::kHideFeaturesEnv, std::string("shader_int64"));
    kiln_session* session = nullptr;
    CHECK(kiln_session_create(artifact, device.c_str(), &session) == KILN_UNSUPPORTED);
    CHECK(session == nullptr);
    const std::string message = kiln_last_error_message();
    CHECK(contains(message, "kernel '" + kernel + "'"));
    CHECK(contains(message, "variant 1 of 2 needs 'shaderInt64'; variant 2 of 2 needs 'shaderInt64'"));
    CHECK(contains(message, "hidden by KILN_VULKAN_HIDE_FEATURES: shaderInt64"));
  }
  {
    // 8-bit storage and shaderInt64 hidden: the primary lacks both, the fallback shaderInt64.
    ScopedEnv env(runtime::vulkan::kHideFeaturesEnv, std::string("storage8,int8,int64"));
    kiln_session* session = nullptr;
    CHECK(kiln_session_create(artifact, device.c_str(), &session) == KILN_UNSUPPORTED);
    const std::string message = kiln_last_error_message();
    CHECK(contains(message, "variant 2 of 2 needs 'shaderInt64'"));
    CHECK(contains(message, "'storageBuffer8BitAccess'"));
  }
  {
    // 8-bit storage hidden only: the fallback runs and gives the reference's indices.
    ScopedEnv env(runtime::vulkan::kHideFeaturesEnv, std::string("storage_buffer_8bit,shader_int8"));
    std::vector<std::vector<int64_t>> results;
    for (const std::string& id : {std::string("reference"), device}) {
      kiln_session* session = nullptr;
      REQUIRE_MESSAGE(kiln_session_create(artifact, id.c_str(), &session) == KILN_OK,
                      std::string(kiln_last_error_message()));
      std::vector<uint8_t> x(13 * 9);
      for (size_t i = 0; i < x.size(); ++i) x[i] = uint8_t(i * 97 % 251);
      const int64_t dims[2] = {13, 9};
      REQUIRE(kiln_session_set_input(session, "x", KILN_DTYPE_U8, dims, 2, x.data(), x.size()) == KILN_OK);
      REQUIRE_MESSAGE(kiln_session_run(session) == KILN_OK, std::string(kiln_last_error_message()));
      std::vector<int64_t> y(13);
      REQUIRE(kiln_session_read_output(session, "y", y.data(), y.size() * 8) == KILN_OK);
      results.push_back(y);
      kiln_session_destroy(session);
    }
    CHECK(results[0] == results[1]);
  }
  {
    // A misspelt knob is an error when the device is opened, not a crash or a silent no-op.
    ScopedEnv env(runtime::vulkan::kHideFeaturesEnv, std::string("storage_buffer_7bit"));
    kiln_session* session = nullptr;
    CHECK(kiln_session_create(artifact, device.c_str(), &session) == KILN_INVALID_ARGUMENT);
    CHECK(contains(kiln_last_error_message(), "unknown Vulkan feature 'storage_buffer_7bit'"));
  }
  kiln_artifact_destroy(artifact);
}

TEST_CASE("vulkan: an entry point its SPIR-V lacks is a corrupt artifact, not a driver crash") {
  const std::string device = vulkan_device_or_skip("vulkan entry point");
  if (device.empty()) return;
  Compiled c = compile_for_vulkan(kArgmaxGraph);
  std::vector<artifact::KernelBinary> kernels = c.vulkan.kernels;
  for (artifact::KernelBinary& k : kernels) k.entry_point = "mian";  // not covered by the blob checksum
  std::vector<uint8_t> bytes = write(c, kernels);
  kiln_artifact* artifact = nullptr;
  REQUIRE(kiln_artifact_load_memory(bytes.data(), bytes.size(), &artifact) == KILN_OK);
  kiln_session* session = nullptr;
  CHECK(kiln_session_create(artifact, device.c_str(), &session) == KILN_CORRUPT);
  CHECK(session == nullptr);
  CHECK(contains(kiln_last_error_message(), "its SPIR-V has no compute entry point 'mian'"));
  kiln_artifact_destroy(artifact);
}

#endif  // KILN_HAVE_SPIRV_COMPILER
