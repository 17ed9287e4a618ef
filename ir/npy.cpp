// NumPy .npy I/O; see ir/npy.h for the supported subset and the bf16 convention.
#include "ir/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>

#include "support/file_io.h"
#include "support/half.h"

namespace kiln::ir {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kMaxHeaderSize = size_t(1) << 20;  // NumPy itself refuses headers over 10 KB

Status npy_error(const std::string& message) { return corrupt("invalid .npy file: " + message); }

// A parser for the header: a Python dict literal with string keys and values that are strings,
// True/False or tuples of non-negative integers. Never reads past the header text.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  struct Header {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<int64_t>> shape;
  };

  Result<Header> parse() {
    Header header;
    skip_space();
    if (!consume('{')) return npy_error("header is not a dict");
    while (true) {
      skip_space();
      if (consume('}')) break;
      KILN_ASSIGN_OR_RETURN(std::string key, parse_string());
      skip_space();
      if (!consume(':')) return npy_error("expected ':' after '" + key + "' in the header");
      skip_space();
      if (key == "descr") {
        KILN_ASSIGN_OR_RETURN(std::string descr, parse_string());
        header.descr = descr;
      } else if (key == "fortran_order") {
        KILN_ASSIGN_OR_RETURN(bool b, parse_bool());
        header.fortran_order = b;
      } else if (key == "shape") {
        KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, parse_tuple());
        header.shape = shape;
      } else {
        return npy_error("unexpected header key '" + key + "'");
      }
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume('}')) break;
      return npy_error("expected ',' or '}' in the header");
    }
    skip_space();
    if (pos_ != text_.size()) return npy_error("unexpected text after the header dict");
    if (!header.descr || !header.fortran_order || !header.shape) {
      return npy_error("header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return header;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool consume_word(std::string_view w) {
    if (text_.substr(pos_, w.size()) == w) {
      pos_ += w.size();
      return true;
    }
    return false;
  }
  Result<std::string> parse_string() {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return npy_error("expected a quoted string in the header");
    }
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) ++pos_;
    if (pos_ >= text_.size()) return npy_error("unterminated string in the header");
    return std::string(text_.substr(start, pos_++ - start));
  }
  Result<bool> parse_bool() {
    if (consume_word("True")) return true;
    if (consume_word("False")) return false;
    return npy_error("expected True or False for 'fortran_order'");
  }
  Result<std::vector<int64_t>> parse_tuple() {
    if (!consume('(')) return npy_error("expected a tuple for 'shape'");
    std::vector<int64_t> dims;
    while (true) {
      skip_space();
      if (consume(')')) break;
      if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
        return npy_error("shape entries must be non-negative integers");
      }
      int64_t v = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        const int digit = text_[pos_++] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return npy_error("shape entry overflows");
        v = v * 10 + digit;
      }
      consume('L');  // Python 2 long suffix
      dims.push_back(v);
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume(')')) break;
      return npy_error("expected ',' or ')' in 'shape'");
    }
    return dims;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// The descrs read_npy accepts, by their type after the byte-order character. bf16 has two
// spellings and no descr of its own (see ir/npy.h).
struct DescrType {
  std::string_view type;
  DType dtype;
};
constexpr DescrType kReadableTypes[] = {
    {"f8", DType::kF64}, {"f4", DType::kF32}, {"f2", DType::kF16},  {"i8", DType::kI64}, {"i4", DType::kI32}, {"i2", DType::kI16},
    {"i1", DType::kI8},  {"u4", DType::kU32},  {"u2", DType::kU16}, {"u1", DType::kU8},  {"b1", DType::kBool},
    {"V2", DType::kBF16},
};

Result<DType> dtype_from_descr(const std::string& descr) {
  if (descr.size() >= 2) {
    const char order = descr[0];
    const std::string_view type = std::string_view(descr).substr(1);
    // Single bytes have no byte order; neither has a void (ml_dtypes' bf16 is '<V2' or '|V2').
    const bool any_order = type == "i1" || type == "u1" || type == "b1" || type == "V2";
    if (order == '>' && !any_order) {
      return unsupported("big-endian .npy data ('" + descr + "') is not supported; save it little-endian");
    }
    if (order == '<' || (any_order && (order == '|' || order == '=' || order == '>'))) {
      for (const DescrType& entry : kReadableTypes)
        if (entry.type == type) return entry.dtype;
    }
  }
  return unsupported(".npy dtype '" + descr + "' is not a Kiln dtype" +
                     "; supported: <f8 <f4 <f2 <i8 <i4 <i2 |i1 <u4 <u2 |u1 |b1, and for bf16 <u2 (raw bits) or "
                     "<V2 (ml_dtypes.bfloat16)");
}

std::string_view descr_of(DType dtype) {
  switch (dtype) {
    case DType::kF64: return "<f8";
    case DType::kF32: return "<f4";
    case DType::kBF16: return "<f4";  // written as f32 (see ir/npy.h)
    case DType::kF16: return "<f2";
    case DType::kI64: return "<i8";
    case DType::kI32: return "<i4";
    case DType::kI16: return "<i2";
    case DType::kI8: return "|i1";
    case DType::kU32: return "<u4";
    case DType::kU16: return "<u2";
    case DType::kU8: return "|u1";
    case DType::kBool: return "|b1";
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
      return "<f4";  // written as f32 (see ir/npy.h)
  }
  return "<f4";
}

uint32_t read_le(const uint8_t* p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}

}  // namespace

Result<Tensor> read_npy_bytes(std::span<const uint8_t> bytes) {
  if (bytes.size() < kMagicSize + 2 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    return npy_error("missing the \\x93NUMPY magic");
  }
  const uint8_t major = bytes[6];
  const size_t len_size = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
  if (len_size == 0) return unsupported(".npy format version " + std::to_string(major) + " is not supported");
  const size_t prefix = kMagicSize + 2 + len_size;
  if (bytes.size() < prefix) return npy_error("truncated before the header length");
  const size_t header_len = read_le(bytes.data() + kMagicSize + 2, len_size);
  if (header_len > kMaxHeaderSize) return npy_error("header length " + std::to_string(header_len) + " is absurd");
  if (bytes.size() - prefix < header_len) return npy_error("truncated inside the header");
  const std::string_view header_text(reinterpret_cast<const char*>(bytes.data() + prefix), header_len);
  KILN_ASSIGN_OR_RETURN(HeaderParser::Header header, HeaderParser(header_text).parse());
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_descr(*header.descr));
  if (*header.fortran_order) {
    return unsupported("Fortran-order .npy data is not supported; save with numpy.ascontiguousarray");
  }
  // Element count with overflow checks, before trusting the file's size.
  uint64_t count = 1;
  for (int64_t d : *header.shape) {
    if (d != 0 && count > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(d)) {
      return npy_error("shape " + std::to_string(d) + "... overflows 64 bits");
    }
    count *= uint64_t(d);
  }
  const size_t elem = dtype_size(dtype);
  const size_t data_size = bytes.size() - prefix - header_len;
  if (count > data_size / elem || count * elem != data_size) {
    return npy_error("data is " + std::to_string(data_size) + " bytes but the header describes " +
                     std::to_string(count) + " elements of " + std::to_string(elem) + " bytes");
  }
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data() + prefix + header_len);
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::from_bytes(dtype, *header.shape,
                                                     std::span<const std::byte>(data, data_size)));
  if (dtype == DType::kBool && count > 0) {
    // NumPy only writes 0/1; normalize anything else so bool stays a 0/1 byte everywhere.
    auto* p = reinterpret_cast<uint8_t*>(t.mutable_data());
    for (uint64_t i = 0; i < count; ++i) p[i] = p[i] != 0 ? 1 : 0;
  }
  return t;
}

Result<Tensor> read_npy(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, read_regular_file(path));
  Result<Tensor> t = read_npy_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!t.is_ok()) return Status(t.status().code(), path + ": " + t.status().message());
  return t;
}

std::vector<uint8_t> to_npy_bytes(const Tensor& tensor) {
  std::string dict = "{'descr': '" + std::string(descr_of(tensor.dtype())) +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.shape().size(); ++i) {
    if (i > 0) dict += ", ";
    dict += std::to_string(tensor.shape()[i]);
  }
  if (tensor.shape().size() == 1) dict += ",";  // "(5,)" like Python
  dict += "), }";
  // Pad with spaces and a final newline so the data starts on a 64-byte boundary.
  size_t len_size = 2;
  if (kMagicSize + 2 + 2 + dict.size() + 1 > 65535) len_size = 4;
  const size_t unpadded = kMagicSize + 2 + len_size + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';

  std::vector<uint8_t> out(kMagic, kMagic + kMagicSize);
  out.push_back(len_size == 2 ? 1 : 2);
  out.push_back(0);
  for (size_t i = 0; i < len_size; ++i) out.push_back(uint8_t(dict.size() >> (8 * i)));
  out.insert(out.end(), dict.begin(), dict.end());
  const int64_t n = tensor.num_elements();
  if (tensor.dtype() == DType::kBF16 || is_float8(tensor.dtype())) {
    for (int64_t i = 0; i < n; ++i) {
      const float f = float(tensor.element_as_double(i));  // exact: f32 holds every bf16 and f8 value
      const auto* p = reinterpret_cast<const uint8_t*>(&f);
      out.insert(out.end(), p, p + 4);
    }
  } else if (n > 0) {
    const auto* p = reinterpret_cast<const uint8_t*>(tensor.data());
    out.insert(out.end(), p, p + tensor.size_bytes());
  }
  return out;
}

Status write_npy(const std::string& path, const Tensor& tensor) {
  const std::vector<uint8_t> bytes = to_npy_bytes(tensor);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return invalid_argument("cannot open '" + path + "' for writing");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return invalid_argument("cannot write '" + path + "'");
  return Status::ok();
}

Result<Tensor> convert_npy_tensor(const Tensor& tensor, DType wanted) {
  if (tensor.dtype() == wanted) return tensor;
  if (tensor.dtype() == DType::kU16 && wanted == DType::kBF16) {  // raw bf16 bits (a uint16 view)
    return Tensor::from_bytes(DType::kBF16, tensor.shape(),
                              std::span<const std::byte>(tensor.data(), tensor.size_bytes()));
  }
  if (tensor.dtype() == DType::kF32 && (wanted == DType::kBF16 || is_float8(wanted))) {
    KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(wanted, tensor.shape()));
    for (int64_t i = 0, n = tensor.num_elements(); i < n; ++i) {
      out.set_element_from_double(i, tensor.element_as_double(i));
    }
    return out;
  }
  if (tensor.dtype() == DType::kU8 && is_float8(wanted)) {  // raw bits
    return Tensor::from_bytes(wanted, tensor.shape(), std::span<const std::byte>(tensor.data(), tensor.size_bytes()));
  }
  return invalid_argument("expected " + std::string(dtype_name(wanted)) + " data, got " +
                          std::string(dtype_name(tensor.dtype())) +
                          (wanted == DType::kBF16 ? " (bf16 inputs are read from .npy files of f32, of raw bits as "
                                                    "uint16, or of ml_dtypes.bfloat16)"
                           : is_float8(wanted)    ? " (8-bit float inputs are read from .npy files of f32 or of raw "
                                                    "bits as uint8)"
                                                  : ""));
}

}  // namespace kiln::ir
