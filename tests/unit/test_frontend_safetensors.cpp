// Unit tests of the safetensors reader/writer and of `param` tensors in .graph files: round
// trips for every dtype, and each kind of corrupted file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "frontend/parser.h"
#include "frontend/safetensors.h"
#include "support/half.h"

namespace {

using namespace kiln;
using frontend::SafetensorsFile;

std::string temp_dir() {
  std::string dir = std::string(KILN_BINARY_DIR) + "/test_frontend_safetensors";
  std::filesystem::create_directories(dir);
  return dir;
}

ir::Tensor make_tensor(ir::DType dtype, std::vector<int64_t> shape) {
  ir::Tensor t = ir::Tensor::zeros(dtype, shape).value();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.set_element_from_double(i, dtype == ir::DType::kBool ? double(i % 2) : double(i) - 2);
  }
  return t;
}

// A file image with a hand-written header and `data_bytes` bytes of data.
std::vector<std::byte> raw_file(const std::string& header, size_t data_bytes, uint64_t declared_len = ~0ull) {
  uint64_t len = declared_len == ~0ull ? header.size() : declared_len;
  std::vector<std::byte> out(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out[size_t(i)] = std::byte((len >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string error_of(const std::vector<std::byte>& bytes) {
  Result<SafetensorsFile> f = SafetensorsFile::from_bytes(bytes, "w.safetensors");
  REQUIRE_FALSE(f.is_ok());
  return f.status().message();
}

}  // namespace

TEST_CASE("frontend safetensors: write and read back every dtype") {
  std::map<std::string, ir::Tensor> tensors;
  for (ir::DType d : ir::kAllDTypes) {
    if (d == ir::DType::kF8E4M3FNUZ || d == ir::DType::kF8E5M2FNUZ) continue;  // no safetensors name: below
    tensors["t_" + std::string(ir::dtype_name(d))] = make_tensor(d, {2, 3});
  }
  tensors["scalar"] = make_tensor(ir::DType::kF32, {});
  tensors["empty"] = make_tensor(ir::DType::kI32, {0, 4});
  std::string path = temp_dir() + "/all.safetensors";
  REQUIRE(frontend::write_safetensors(path, tensors, {{"format", "pt"}}).is_ok());

  Result<SafetensorsFile> file = SafetensorsFile::open(path);
  REQUIRE(file.is_ok());
  CHECK(file->metadata().at("format") == "pt");
  CHECK(file->entries().size() == tensors.size());
  for (const auto& [name, expected] : tensors) {
    INFO(name);
    Result<ir::Tensor> t = file->load(name);
    REQUIRE(t.is_ok());
    CHECK(t->dtype() == expected.dtype());
    CHECK(t->shape() == expected.shape());
    REQUIRE(t->size_bytes() == expected.size_bytes());
    CHECK(std::memcmp(t->data(), expected.data(), expected.size_bytes()) == 0);
  }
  CHECK(file->load("missing").status().code() == ErrorCode::kNotFound);

  Result<std::map<std::string, ir::Tensor>> all = frontend::read_safetensors(path);
  REQUIRE(all.is_ok());
  CHECK(all->at("t_bf16").element_as_double(5) == 3.0);

  // A dtype safetensors cannot name is refused, not written under a made-up name.
  const Status fnuz = frontend::write_safetensors(temp_dir() + "/fnuz.safetensors",
                                                  {{"w", make_tensor(ir::DType::kF8E5M2FNUZ, {2})}});
  CHECK(fnuz.code() == ErrorCode::kUnsupported);
  CHECK(fnuz.message().find("cannot write tensor 'w'") != std::string::npos);
  CHECK(fnuz.message().find("safetensors has no f8e5m2fnuz dtype") != std::string::npos);
}

TEST_CASE("frontend safetensors: the header length and data section are 8-byte aligned") {
  std::vector<std::byte> bytes = frontend::encode_safetensors({{"a", make_tensor(ir::DType::kF32, {3})}});
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | uint64_t(bytes[size_t(i)]);
  CHECK((8 + len) % 8 == 0);
  CHECK(bytes.size() == 8 + len + 12);
}

TEST_CASE("frontend safetensors: corrupted files give clear errors") {
  const std::string good = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(SafetensorsFile::from_bytes(raw_file(good, 8), "w").is_ok());

  CHECK(error_of(std::vector<std::byte>(5)).find("too short") != std::string::npos);
  CHECK(error_of(raw_file(good, 8, 1000000)).find("exceeds the file size") != std::string::npos);
  CHECK(error_of(raw_file("{not json", 0)).find("not valid JSON") != std::string::npos);
  CHECK(error_of(raw_file("[1, 2]", 0)).find("not a JSON object") != std::string::npos);
  CHECK(error_of(raw_file(good, 4)).find("outside the data section") != std::string::npos);
  CHECK(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))
            .find("needs 12") != std::string::npos);
  CHECK(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", 8))
            .find("not a non-negative integer") != std::string::npos);
  CHECK(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8))
            .find("end before they begin") != std::string::npos);
  CHECK(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", 8)).find("data_offsets") != std::string::npos);
  CHECK(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})", 8))
            .find("overflows") != std::string::npos);
  CHECK(error_of(raw_file(R"({"a":5})", 0)).find("JSON object") != std::string::npos);
  // Deeply nested JSON is rejected without crashing.
  CHECK_FALSE(SafetensorsFile::from_bytes(raw_file(std::string(100000, '['), 0), "w").is_ok());

  // Unsupported dtypes are readable metadata but cannot be loaded.
  Result<SafetensorsFile> u64 =
      SafetensorsFile::from_bytes(raw_file(R"({"d":{"dtype":"U64","shape":[1],"data_offsets":[0,8]}})", 8), "w");
  REQUIRE(u64.is_ok());
  Result<ir::Tensor> u64_tensor = u64->load("d");
  REQUIRE_FALSE(u64_tensor.is_ok());
  CHECK(u64_tensor.status().code() == ErrorCode::kUnsupported);
  CHECK(u64_tensor.status().message().find("(F64, F32,") != std::string::npos);

  CHECK(SafetensorsFile::open("/nonexistent/x.safetensors").status().code() == ErrorCode::kNotFound);
}

TEST_CASE("frontend safetensors: param tensors in a .graph file") {
  std::string dir = temp_dir();
  ir::Tensor w = make_tensor(ir::DType::kF32, {4, 2});
  ir::Tensor b = make_tensor(ir::DType::kF16, {2});
  REQUIRE(frontend::write_safetensors(dir + "/p.safetensors", {{"fc.weight", w}, {"fc.bias", b}}).is_ok());
  auto parse = [&](const std::string& text, std::string& errors) {
    Diagnostics diags;
    Result<ir::Graph> g = frontend::parse_graph_text(text, "p.graph", dir, diags);
    errors = diags.to_string();
    return g;
  };
  std::string errors;
  Result<ir::Graph> g = parse(R"(weights "p.safetensors"
graph g(x: f32[N, 4]) -> (y: f32[N, 2]) {
  w = param f32[4, 2] "fc.weight"
  b = cast(param f16[2] "fc.bias", to=f32)
  y = add(matmul(x, w), b)
}
)",
                              errors);
  INFO(errors);
  REQUIRE(g.is_ok());
  CHECK(g->weights_path == "p.safetensors");
  CHECK(g->weights_base_dir == dir);
  ir::NodeId wid = g->find("w");
  CHECK(std::get<ir::ConstantAttrs>(g->node(wid).attrs).weight_name == "fc.weight");
  CHECK(g->constant_of(wid).element_as_double(7) == 5.0);
  CHECK(g->constant_of(g->find("b.1")).dtype() == ir::DType::kF16);

  CHECK_FALSE(parse("weights \"p.safetensors\"\ngraph g() -> (y: f32[4, 2]) {\n  y = param f32[2, 4] \"fc.weight\"\n}\n", errors).is_ok());
  CHECK(errors == "p.graph:3:13: error: weight 'fc.weight' is f32[4, 2] in 'p.safetensors' but declared f32[2, 4]\n");
  CHECK_FALSE(parse("weights \"p.safetensors\"\ngraph g() -> (y: f32[4, 2]) {\n  y = param f32[4, 2] \"nope\"\n}\n", errors).is_ok());
  CHECK(errors == "p.graph:3:23: error: weight 'nope' not found in 'p.safetensors'\n");

  // A file that is not safetensors at all.
  { std::ofstream(dir + "/text.safetensors") << "hello, I am not a tensor file"; }
  CHECK_FALSE(parse("weights \"text.safetensors\"\ngraph g() -> (y: f32[4, 2]) {\n  y = param f32[4, 2] \"w\"\n}\n", errors).is_ok());
  CHECK(errors.rfind("p.graph:1:9: error: 'text.safetensors' is not a valid safetensors file", 0) == 0);
  // The failed weights file does not cascade into one error per param.
  CHECK(std::count(errors.begin(), errors.end(), '\n') == 1);
}
