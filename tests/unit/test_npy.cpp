// Unit tests of NumPy .npy I/O (ir/npy.h): round trips for every dtype, the bf16 convention,
// bytes exactly as NumPy writes them, and clear errors (never crashes) on malformed files.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/npy.h"
#include "support/half.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

Tensor sample(DType dtype, std::vector<int64_t> shape) {
  Result<Tensor> t = Tensor::zeros(dtype, std::move(shape));
  REQUIRE(t.is_ok());
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    t->set_element_from_double(i, dtype == DType::kBool ? double(i % 3 == 0) : double(i % 7) - 3.5 * is_float(dtype));
  }
  return std::move(t).value();
}

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// A file the way NumPy 1.x writes np.arange(6, dtype='<f4').reshape(2, 3) (header padded to 64).
std::vector<uint8_t> numpy_file(const std::string& dict, const std::vector<uint8_t>& data, int version = 1) {
  std::string header = dict;
  const size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + char(version) + '\0';
  out += char(header.size() & 0xff);
  out += char((header.size() >> 8) & 0xff);
  if (version != 1) out += std::string(2, '\0');
  out += header;
  std::vector<uint8_t> b = bytes_of(out);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<uint8_t> f32_data(int n) {
  std::vector<uint8_t> d(size_t(n) * 4);
  for (int i = 0; i < n; ++i) {
    float f = float(i);
    std::memcpy(d.data() + 4 * i, &f, 4);
  }
  return d;
}

}  // namespace

TEST_CASE("npy: every dtype round-trips through bytes") {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kI64, DType::kI32, DType::kI8, DType::kU8, DType::kBool}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {5}, {2, 3}, {2, 0, 4}}) {
      Tensor t = sample(dtype, shape);
      std::vector<uint8_t> bytes = to_npy_bytes(t);
      Result<Tensor> back = read_npy_bytes(bytes);
      INFO(dtype_name(dtype), " ", shape.size());
      REQUIRE(back.is_ok());
      CHECK(back->dtype() == dtype);
      CHECK(back->shape() == shape);
      REQUIRE(back->size_bytes() == t.size_bytes());
      CHECK(std::memcmp(back->data(), t.data(), t.size_bytes()) == 0);
    }
  }
}

TEST_CASE("npy: the header is what NumPy writes, data aligned to 64 bytes") {
  Tensor t = sample(DType::kF32, {2, 3});
  std::vector<uint8_t> bytes = to_npy_bytes(t);
  CHECK(bytes.size() == 128 + 24);  // NumPy's size for this array: a 118-byte header
  const std::string header(bytes.begin() + 10, bytes.begin() + 128);
  CHECK(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0) == 0);
  CHECK(header.back() == '\n');
  std::vector<uint8_t> one_d = to_npy_bytes(sample(DType::kU8, {5}));
  CHECK(std::string(one_d.begin() + 10, one_d.begin() + 64).find("'descr': '|u1'") != std::string::npos);
  CHECK(std::string(one_d.begin() + 10, one_d.begin() + 64).find("'shape': (5,)") != std::string::npos);
  std::vector<uint8_t> scalar = to_npy_bytes(sample(DType::kBool, {}));
  CHECK(std::string(scalar.begin() + 10, scalar.begin() + 64).find("'shape': ()") != std::string::npos);
}

TEST_CASE("npy: reads NumPy-style files of versions 1.0, 2.0 and 3.0") {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  for (int version : {1, 2, 3}) {
    Result<Tensor> t = read_npy_bytes(numpy_file(dict, f32_data(6), version));
    INFO(version);
    REQUIRE(t.is_ok());
    CHECK(t->shape() == std::vector<int64_t>{2, 3});
    CHECK(t->element_as_double(5) == 5.0);
  }
  // Key order and quoting vary between writers.
  Result<Tensor> t = read_npy_bytes(
      numpy_file("{\"shape\": (6,), \"fortran_order\": False, \"descr\": \"<f4\"}", f32_data(6)));
  REQUIRE(t.is_ok());
  CHECK(t->shape() == std::vector<int64_t>{6});
}

TEST_CASE("npy: bf16 is written as f32 and converted back on request") {
  Result<Tensor> bf = Tensor::zeros(DType::kBF16, {3});
  REQUIRE(bf.is_ok());
  bf->set_element_from_double(0, 1.5);
  bf->set_element_from_double(1, -0.1);
  bf->set_element_from_double(2, 3e38);
  Result<Tensor> read = read_npy_bytes(to_npy_bytes(*bf));
  REQUIRE(read.is_ok());
  CHECK(read->dtype() == DType::kF32);
  for (int i = 0; i < 3; ++i) CHECK(read->element_as_double(i) == bf->element_as_double(i));
  Result<Tensor> back = convert_npy_tensor(*read, DType::kBF16);
  REQUIRE(back.is_ok());
  CHECK(back->dtype() == DType::kBF16);
  CHECK(std::memcmp(back->data(), bf->data(), 6) == 0);
  CHECK(convert_npy_tensor(*read, DType::kF32).is_ok());
  Result<Tensor> wrong = convert_npy_tensor(*read, DType::kI32);
  REQUIRE_FALSE(wrong.is_ok());
  CHECK(wrong.status().message().find("expected i32 data, got f32") != std::string::npos);
}

TEST_CASE("npy: 8-bit floats are written as f32 and read from f32 or from raw bits as uint8") {
  Result<Tensor> f8 = Tensor::zeros(DType::kF8E5M2, {3});
  REQUIRE(f8.is_ok());
  f8->set_element_from_double(0, 1.5);
  f8->set_element_from_double(1, -0.1);
  f8->set_element_from_double(2, std::numeric_limits<double>::infinity());
  Result<Tensor> read = read_npy_bytes(to_npy_bytes(*f8));
  REQUIRE(read.is_ok());
  CHECK(read->dtype() == DType::kF32);
  for (int i = 0; i < 3; ++i) CHECK(read->element_as_double(i) == f8->element_as_double(i));
  Result<Tensor> back = convert_npy_tensor(*read, DType::kF8E5M2);
  REQUIRE(back.is_ok());
  CHECK(std::memcmp(back->data(), f8->data(), 3) == 0);
  // Rounded without saturation: f8e4m3fn has no infinity (NaN).
  Result<Tensor> rounded = convert_npy_tensor(*read, DType::kF8E4M3FN);
  REQUIRE(rounded.is_ok());
  CHECK(rounded->element_as_double(1) == -0.09375);
  CHECK(std::isnan(rounded->element_as_double(2)));
  // Raw bits: |u1 is read as u8, reinterpreted when an 8-bit float is expected.
  Result<Tensor> bits = read_npy_bytes(numpy_file("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", {0x38, 0x80}));
  REQUIRE(bits.is_ok());
  Result<Tensor> e4m3 = convert_npy_tensor(*bits, DType::kF8E4M3FNUZ);
  REQUIRE(e4m3.is_ok());
  CHECK(e4m3->element_as_double(0) == 0.5);
  CHECK(std::isnan(e4m3->element_as_double(1)));
  Result<Tensor> wrong = convert_npy_tensor(*bits, DType::kBF16);
  REQUIRE_FALSE(wrong.is_ok());
  Result<Tensor> wrong_f8 = convert_npy_tensor(*convert_npy_tensor(*read, DType::kF8E5M2), DType::kF8E4M3FN);
  REQUIRE_FALSE(wrong_f8.is_ok());
  CHECK(wrong_f8.status().message().find("8-bit float inputs are read from .npy files of f32 or of raw bits as uint8") !=
        std::string::npos);
}

TEST_CASE("npy: bf16 bits are read from '<u2' (a uint16 view) and '<V2' / '|V2' (ml_dtypes.bfloat16)") {
  // 1.5 and -2.0 as bf16 bits: what numpy.save writes for
  // numpy.array([1.5, -2.0], dtype=ml_dtypes.bfloat16), and for its .view(numpy.uint16).
  const std::vector<uint8_t> bits = {0xC0, 0x3F, 0x00, 0xC0};
  for (const char* descr : {"<u2", "<V2", "|V2"}) {
    INFO(descr);
    Result<Tensor> t = read_npy_bytes(
        numpy_file(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2,), }", bits));
    REQUIRE(t.is_ok());
    // '<u2' is a u16 tensor until an input that expects bf16 reinterprets it.
    CHECK(t->dtype() == (descr[1] == 'u' ? DType::kU16 : DType::kBF16));
    Result<Tensor> bf = convert_npy_tensor(*t, DType::kBF16);
    REQUIRE(bf.is_ok());
    CHECK(bf->dtype() == DType::kBF16);
    CHECK(bf->element_as_double(0) == 1.5);
    CHECK(bf->element_as_double(1) == -2.0);
    Result<Tensor> wrong = convert_npy_tensor(*t, DType::kF32);
    REQUIRE_FALSE(wrong.is_ok());
    CHECK(wrong.status().message().find("expected f32 data, got " + std::string(descr[1] == 'u' ? "u16" : "bf16")) !=
          std::string::npos);
  }
  // A type Kiln lacks is refused with the list of those it reads.
  Result<Tensor> c8 =
      read_npy_bytes(numpy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f32_data(2)));
  REQUIRE_FALSE(c8.is_ok());
  CHECK(c8.status().message().find("for bf16 <u2 (raw bits) or <V2") != std::string::npos);
}

TEST_CASE("npy: malformed files are clear errors") {
  const std::vector<uint8_t> data = f32_data(6);
  auto error_of = [](const std::vector<uint8_t>& b) {
    Result<Tensor> t = read_npy_bytes(b);
    REQUIRE_FALSE(t.is_ok());
    return t.status().message();
  };
  CHECK(error_of(bytes_of("hello")).find("magic") != std::string::npos);
  CHECK(error_of({}).find("magic") != std::string::npos);
  CHECK(error_of(numpy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data))
            .find("Fortran") != std::string::npos);
  CHECK(error_of(numpy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", data))
            .find("big-endian") != std::string::npos);
  CHECK(error_of(numpy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", data))
            .find("'<c8' is not a Kiln dtype") != std::string::npos);
  CHECK(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", data))
            .find("header describes 8 elements") != std::string::npos);
  CHECK(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", data))
            .find("non-negative") != std::string::npos);
  CHECK(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False}", data)).find("lacks") !=
        std::string::npos);
  CHECK(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': "
                            "(4294967296, 4294967296, 4294967296), }",
                            data))
            .find("overflows") != std::string::npos);
  CHECK(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", data))
            .find("overflows") != std::string::npos);
  std::vector<uint8_t> v9 = numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", data);
  v9[6] = 9;
  CHECK(error_of(v9).find("version 9") != std::string::npos);
}

TEST_CASE("npy: every truncation and random corruption is an error or a valid tensor, never a crash") {
  const std::vector<uint8_t> good = to_npy_bytes(sample(DType::kI32, {3, 5}));
  for (size_t n = 0; n < good.size(); ++n) {
    CHECK_FALSE(read_npy_bytes(std::span<const uint8_t>(good.data(), n)).is_ok());
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> b = good;
    for (int k = 0; k < 3; ++k) b[rng() % 80] = uint8_t(rng());
    Result<Tensor> t = read_npy_bytes(b);
    if (t.is_ok()) CHECK(t->size_bytes() + 64 <= b.size());
  }
}

TEST_CASE("npy: files round-trip through the filesystem; a missing file is kNotFound") {
  const std::string path = std::string(KILN_BINARY_DIR) + "/test_npy_roundtrip.npy";
  Tensor t = sample(DType::kF16, {4, 2});
  REQUIRE(write_npy(path, t).is_ok());
  Result<Tensor> back = read_npy(path);
  REQUIRE(back.is_ok());
  CHECK(std::memcmp(back->data(), t.data(), t.size_bytes()) == 0);
  std::remove(path.c_str());
  Result<Tensor> missing = read_npy(path);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK_FALSE(write_npy(std::string(KILN_BINARY_DIR) + "/no/such/dir/x.npy", t).is_ok());
}
