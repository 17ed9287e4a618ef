#include "artifact/signing.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "support/file_io.h"

namespace kiln::artifact {

namespace {

constexpr std::string_view kSecretLabel = "kiln-ed25519-secret-key";
constexpr std::string_view kPublicLabel = "kiln-ed25519-public-key";

Status init_sodium() {
  // sodium_init is thread-safe and returns 1 once already initialized.
  if (sodium_init() < 0) return internal_error("libsodium could not be initialized");
  return Status::ok();
}

std::string to_hex(std::span<const uint8_t> bytes) {
  std::string hex(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), bytes.data(), bytes.size());
  hex.pop_back();
  return hex;
}

// "<label> <64 hex digits>" (trailing whitespace allowed); `bare_allowed` also takes the hex
// digits alone. 32 bytes, or an error saying what is wrong with `what`.
Result<std::array<uint8_t, 32>> parse_key_line(std::string text, std::string_view label, bool bare_allowed,
                                               const std::string& what) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  text = text.substr(start);
  std::string hex;
  if (text.rfind(label, 0) == 0 && text.size() > label.size() && text[label.size()] == ' ') {
    hex = text.substr(label.size() + 1);
  } else if (bare_allowed) {
    hex = text;
  } else {
    return invalid_argument(what + " is not a Kiln signing key (expected one line '" + std::string(label) +
                            " <64 hex digits>')");
  }
  std::array<uint8_t, 32> key{};
  size_t length = 0;
  if (hex.size() != 64 ||
      sodium_hex2bin(key.data(), key.size(), hex.data(), hex.size(), nullptr, &length, nullptr) != 0 ||
      length != key.size())
    return invalid_argument(what + ": the key must be 64 hexadecimal digits (32 bytes)");
  return key;
}

Result<std::string> read_key_text(const std::string& path, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, read_regular_file(path, what));
  if (bytes.size() > 4096) return invalid_argument(what + " '" + path + "' is too large to be a key file");
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void absorb(crypto_sign_state& state, std::span<const std::span<const uint8_t>> parts) {
  for (std::span<const uint8_t> part : parts) {
    // crypto_sign_update takes any length; large parts are fed in 1 GiB steps so that the length
    // stays well within what every libsodium build accepts.
    constexpr size_t kStep = size_t(1) << 30;
    for (size_t at = 0; at < part.size(); at += kStep)
      crypto_sign_update(&state, part.data() + at, std::min(kStep, part.size() - at));
  }
}

}  // namespace

SigningKey::~SigningKey() {
  sodium_memzero(seed_.data(), seed_.size());
  sodium_memzero(secret_.data(), secret_.size());
}

Result<SigningKey> SigningKey::generate() {
  KILN_RETURN_IF_ERROR(init_sodium());
  std::array<uint8_t, 32> seed{};
  randombytes_buf(seed.data(), seed.size());
  Result<SigningKey> key = from_seed(seed);
  sodium_memzero(seed.data(), seed.size());
  return key;
}

Result<SigningKey> SigningKey::from_seed(std::span<const uint8_t> seed) {
  KILN_RETURN_IF_ERROR(init_sodium());
  if (seed.size() != crypto_sign_SEEDBYTES) return invalid_argument("a signing key's seed must be 32 bytes");
  SigningKey key;
  std::memcpy(key.seed_.data(), seed.data(), seed.size());
  if (crypto_sign_seed_keypair(key.public_key_.data(), key.secret_.data(), key.seed_.data()) != 0)
    return internal_error("libsodium could not derive a key pair");
  return key;
}

Result<Signature> SigningKey::sign(std::span<const std::span<const uint8_t>> parts) const {
  KILN_RETURN_IF_ERROR(init_sodium());
  crypto_sign_state state;
  crypto_sign_init(&state);
  absorb(state, parts);
  Signature signature{};
  if (crypto_sign_final_create(&state, signature.data(), nullptr, secret_.data()) != 0)
    return internal_error("libsodium could not sign the artifact");
  return signature;
}

std::string SigningKey::to_text() const { return std::string(kSecretLabel) + " " + to_hex(seed_) + "\n"; }

Result<SigningKey> read_signing_key_file(const std::string& path) {
  const std::string what = "signing key '" + path + "'";
  KILN_ASSIGN_OR_RETURN(std::string text, read_key_text(path, "signing key"));
  if (text.rfind(kPublicLabel, 0) == 0)
    return invalid_argument(what + " is a public key; signing needs the secret key file");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    sodium_memzero(text.data(), text.size());
    return invalid_argument(what + " may be read by other users (mode " + std::to_string((st.st_mode >> 6) & 7) +
                            std::to_string((st.st_mode >> 3) & 7) + std::to_string(st.st_mode & 7) +
                            "); run chmod 600 on it");
  }
  Result<std::array<uint8_t, 32>> seed = parse_key_line(text, kSecretLabel, false, what);
  sodium_memzero(text.data(), text.size());  // the caller's copy; parse_key_line's is its own
  if (!seed.is_ok()) return seed.status();
  Result<SigningKey> key = SigningKey::from_seed(*seed);
  sodium_memzero(seed->data(), seed->size());
  return key;
}

Result<PublicKey> write_new_signing_key(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(SigningKey key, SigningKey::generate());
  auto write_new = [](const std::string& file, const std::string& text, mode_t mode) -> Status {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
      return invalid_argument("cannot create '" + file + "': " + std::strerror(errno) +
                              (errno == EEXIST ? " (an existing key is never overwritten)" : ""));
    const bool written = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    const bool closed = ::close(fd) == 0;
    if (!written || !closed) return invalid_argument("cannot write '" + file + "': " + std::strerror(errno));
    return Status::ok();
  };
  std::string secret = key.to_text();
  Status wrote = write_new(path, secret, 0600);
  sodium_memzero(secret.data(), secret.size());
  KILN_RETURN_IF_ERROR(wrote);
  Status wrote_public = write_new(path + ".pub", public_key_to_text(key.public_key()), 0644);
  if (!wrote_public.is_ok()) {
    ::unlink(path.c_str());  // no secret key without its public half
    return wrote_public;
  }
  return key.public_key();
}

Result<PublicKey> parse_public_key(const std::string& text) {
  if (text.rfind(kSecretLabel, 0) == 0)
    return invalid_argument("a secret signing key was given where a public key is expected (use the .pub file)");
  return parse_key_line(text, kPublicLabel, true, "public key '" + text.substr(0, 80) + "'");
}

Result<PublicKey> read_public_key_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_key_text(path, "public key"));
  if (text.rfind(kSecretLabel, 0) == 0)
    return invalid_argument("public key '" + path + "' is a secret signing key (use its .pub file)");
  return parse_key_line(std::move(text), kPublicLabel, true, "public key '" + path + "'");
}

std::string public_key_hex(const PublicKey& key) { return to_hex(key); }

std::string public_key_to_text(const PublicKey& key) {
  return std::string(kPublicLabel) + " " + public_key_hex(key) + "\n";
}

bool verify_signature(const PublicKey& signer, const Signature& signature,
                      std::span<const std::span<const uint8_t>> parts) {
  if (!init_sodium().is_ok()) return false;
  crypto_sign_state state;
  crypto_sign_init(&state);
  absorb(state, parts);
  // The API takes a non-const signature pointer but does not write through it.
  Signature copy = signature;
  return crypto_sign_final_verify(&state, copy.data(), signer.data()) == 0;
}

}  // namespace kiln::artifact
