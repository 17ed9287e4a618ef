// Ed25519 signatures of .kiln artifacts (libsodium), for services that load artifacts they did
// not build (docs/security.md).
//
// A signed artifact (format 4 on) carries in its file header the signer's public key and a
// signature made with Ed25519ph (Ed25519 over the SHA-512 of the message, libsodium's
// multi-part crypto_sign_* API, so that a multi-gigabyte file is signed and checked without a
// second copy in memory). The message is the whole file with the 64 signature bytes set to zero.
// The reader checks it only when the caller names trusted public keys (ReadOptions): then an
// unsigned file, a file signed by another key, or any changed byte is refused.
//
// Key files are one line of text, so that a key pasted into a config or passed as a string works:
//   kiln-ed25519-secret-key <64 hex digits: the 32-byte seed>
//   kiln-ed25519-public-key <64 hex digits: the 32-byte public key>
// The bare 64 hex digits of a public key are accepted too.
//
// Thread-safety: every function is safe to call from any thread (sodium_init is called once).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln::artifact {

using PublicKey = std::array<uint8_t, 32>;
using Signature = std::array<uint8_t, 64>;

// A secret signing key. Its bytes are wiped when it is destroyed.
class SigningKey {
 public:
  SigningKey() = default;
  ~SigningKey();
  SigningKey(const SigningKey&) = default;
  SigningKey& operator=(const SigningKey&) = default;

  // A fresh random key.
  static Result<SigningKey> generate();
  // The key from a seed (32 bytes).
  static Result<SigningKey> from_seed(std::span<const uint8_t> seed);

  const PublicKey& public_key() const { return public_key_; }
  // Signs the Ed25519ph message made of `parts`, in order.
  Result<Signature> sign(std::span<const std::span<const uint8_t>> parts) const;
  // The secret key file's line (see above).
  std::string to_text() const;

 private:
  std::array<uint8_t, 32> seed_{};
  std::array<uint8_t, 64> secret_{};  // libsodium's secret key: seed + public key
  PublicKey public_key_{};
};

// Reads a secret key file (kInvalidArgument naming the path and what is wrong; the file must be a
// regular file, and a file that others may read is refused like ssh refuses one).
Result<SigningKey> read_signing_key_file(const std::string& path);
// Writes a new key: `path` (the secret key, mode 0600, never overwriting an existing file) and
// `path`.pub (the public key). Returns the public key.
Result<PublicKey> write_new_signing_key(const std::string& path);

// A public key from its text ("kiln-ed25519-public-key <hex>" or the bare hex digits).
Result<PublicKey> parse_public_key(const std::string& text);
// A public key file's contents (one line).
Result<PublicKey> read_public_key_file(const std::string& path);
std::string public_key_to_text(const PublicKey& key);
std::string public_key_hex(const PublicKey& key);

// True when `signature` is `signer`'s Ed25519ph signature of `parts`, in order.
bool verify_signature(const PublicKey& signer, const Signature& signature,
                      std::span<const std::span<const uint8_t>> parts);

}  // namespace kiln::artifact
