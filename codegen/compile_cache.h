// CompileCache: kilnc's persistent, on-disk cache of compiled kernels (like ccache, sccache or
// Triton's cache), so that recompiling an unchanged model skips NVRTC / shaderc.
//
// An entry is keyed on a CacheKey: the SHA-256 of every input that changes the compiled bytes
// (the kernel source, the compiler and its version, the target architecture, the flags, Kiln's
// version). A key that forgets an input would return stale code, so callers add everything
// that can change the output; a key that has too much only costs misses.
//
// Layout: <dir>/v1/<first two hex chars of the key>/<64 hex chars>. The two-character shard
// keeps directories small. "v1" names the entry format: a change to it bumps the directory, so
// old and new kilnc versions sharing one cache never read each other's entries.
// Entry file: "KILNCC01" (8 bytes), the key's 32-byte digest, the payload length (u64 LE), the
// payload, and the FNV-1a 64 checksum of the payload (u64 LE). The digest catches a file
// under the wrong name; length and checksum catch truncation and damage.
//
// The cache is an optimisation, never a source of errors once open: a missing or damaged entry
// is a miss, a failed store is counted and ignored.
//
// Ownership: a CompileCache owns only its path and counters; the files belong to whoever shares
// the directory.
// Thread-safety: load, store, trim and stats may be called concurrently from any threads of one
// process, and several processes (several kilnc runs) may share one directory: entries are
// written to a uniquely named temp file and rename()d into place, so a reader sees either no
// entry or a complete one, and concurrent writers of one key are safe (the last rename wins;
// both wrote the same bytes for the same key). Files that vanish under trim (another process
// evicted them) are fine. CacheKey is a plain value: not safe to add to from two threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace kiln::codegen {

// The inputs that decide one compile unit's output. Every field goes into the digest,
// length-prefixed with its name, so ("ab","c") and ("a","bc") differ. Field order matters:
// callers add their fields in a fixed order.
class CacheKey {
 public:
  CacheKey& add(std::string_view field, std::string_view value);
  // SHA-256 (OpenSSL EVP) of the fields, 32 bytes.
  std::array<uint8_t, 32> digest() const;
  // The digest as 64 lowercase hex chars: the entry's file name.
  std::string hex() const;

 private:
  std::string encoded_;  // the fields as they are digested: (u64 LE length, bytes) of name, value
};

struct CacheStats {
  uint64_t hits = 0, misses = 0, stores = 0, store_failures = 0, evictions = 0;
};

class CompileCache {
 public:
  // The default size bound when KILN_CACHE_MAX_SIZE is not set: 1 GiB.
  static constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 30;
  // The directory: kiln_cache_dir() (support/cache_dir.h); "" when none is known.
  static std::string default_dir();
  // Size bound: $KILN_CACHE_MAX_SIZE ("500M", "2G", "1048576", K/M/G suffixes, base 1024) else
  // kDefaultMaxBytes; an empty value counts as unset. A malformed value (garbage, 0, overflow)
  // is a kInvalidArgument error naming the variable.
  static Result<uint64_t> default_max_bytes();
  // The size syntax of KILN_CACHE_MAX_SIZE: digits, then an optional K, M or G (either case).
  static Result<uint64_t> parse_size(std::string_view text);
  // Creates the directory (and parents) if needed. kInvalidArgument (an empty path, or one that
  // is not a directory) or kUnavailable (cannot be created or written) with the path otherwise.
  static Result<std::unique_ptr<CompileCache>> open(std::string dir, uint64_t max_bytes);
  // open(default_dir(), default_max_bytes()): kUnavailable when no directory is known, the
  // error of default_max_bytes when KILN_CACHE_MAX_SIZE is malformed.
  static Result<std::unique_ptr<CompileCache>> open_default();

  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }
  // Where key's entry lives (whether or not it exists).
  std::string entry_path(const CacheKey& key) const;

  // A hit returns the stored bytes and refreshes the entry's mtime (LRU). A missing,
  // unreadable, non-regular, truncated or damaged entry (bad magic, wrong key digest, bad
  // length, bad checksum) is a miss; a damaged regular file is removed.
  std::optional<std::vector<uint8_t>> load(const CacheKey& key);
  // Writes a temp file in the entry's directory (unique name: pid + thread + counter), then
  // rename()s it over the entry: readers never see a partial entry, concurrent writers of the
  // same key are safe. A failure (disk full, permissions) is counted in
  // stats().store_failures, never fatal.
  void store(const CacheKey& key, const std::vector<uint8_t>& value);
  // Evicts least-recently-used entries (oldest mtime first) until the total size of the
  // entries is <= max_bytes; also removes temp files older than an hour left by crashed
  // writers. Called once per kilnc run, after compiling. Files it does not recognise are left.
  void trim();
  CacheStats stats() const;

 private:
  CompileCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  void count(uint64_t CacheStats::*counter, uint64_t n = 1);

  const std::string dir_;
  const uint64_t max_bytes_;
  mutable std::mutex stats_mutex_;  // guards stats_ only: file operations take no lock
  CacheStats stats_;
};

}  // namespace kiln::codegen
