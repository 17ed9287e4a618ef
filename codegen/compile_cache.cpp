#include "codegen/compile_cache.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <system_error>
#include <thread>

#include "support/cache_dir.h"
#include "support/check.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'C', '0', '1'};
constexpr size_t kDigestBytes = 32;
constexpr size_t kHeaderBytes = sizeof(kMagic) + kDigestBytes + 8;  // magic, digest, length
constexpr size_t kTrailerBytes = 8;                                  // checksum
constexpr const char* kFormatDir = "v1";    // bump with kMagic when the entry format changes
constexpr const char* kTempPrefix = "tmp.";  // cannot collide with a 64-hex-char entry name
// A temp file this old belongs to a writer that crashed: no store takes an hour.
constexpr auto kStaleTempAge = std::chrono::hours(1);

void put_u64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(v >> (8 * i));
}
uint64_t get_u64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(in[i]) << (8 * i);
  return v;
}

// FNV-1a 64: the digest in the header already names the key; the checksum only has to catch
// damage (a torn page, a flipped bit), for which a fast non-cryptographic hash is enough.
uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

bool is_entry_name(std::string_view name) {
  return name.size() == 2 * kDigestBytes &&
         std::all_of(name.begin(), name.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// write() until done, retrying on EINTR and short writes.
bool write_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= size_t(n);
  }
  return true;
}

bool read_all(int fd, uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return false;  // the file shrank since fstat
    data += n;
    size -= size_t(n);
  }
  return true;
}

// Closes on every path out of a scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A name no other writer uses at the same time: the pid separates processes (forked children
// included), the thread id the threads of one process, the counter the stores of one thread.
std::string temp_name() {
  static std::atomic<uint64_t> counter{0};
  const size_t thread = std::hash<std::thread::id>{}(std::this_thread::get_id());
  return std::string(kTempPrefix) + std::to_string(::getpid()) + "." + std::to_string(thread) + "." +
         std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
}

std::string getenv_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

// ---- CacheKey ----

CacheKey& CacheKey::add(std::string_view field, std::string_view value) {
  for (std::string_view part : {field, value}) {
    uint8_t length[8];
    put_u64(length, part.size());
    encoded_.append(reinterpret_cast<const char*>(length), sizeof(length));
    encoded_.append(part);
  }
  return *this;
}

std::array<uint8_t, 32> CacheKey::digest() const {
  std::array<uint8_t, 32> out{};
  unsigned int size = 0;
  const int ok = EVP_Digest(encoded_.data(), encoded_.size(), out.data(), &size, EVP_sha256(), nullptr);
  // SHA-256 is in every OpenSSL build's default provider; failing here is a broken install.
  KILN_CHECK(ok == 1 && size == out.size(), "OpenSSL EVP_Digest(SHA-256) failed");
  return out;
}

std::string CacheKey::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  const std::array<uint8_t, 32> d = digest();
  std::string out(2 * d.size(), '0');
  for (size_t i = 0; i < d.size(); ++i) {
    out[2 * i] = kDigits[d[i] >> 4];
    out[2 * i + 1] = kDigits[d[i] & 15];
  }
  return out;
}

// ---- CompileCache: configuration ----

std::string CompileCache::default_dir() { return kiln_cache_dir(); }

Result<uint64_t> CompileCache::parse_size(std::string_view text) {
  auto bad = [&] {
    // Appended piecewise: "'" + std::string(text) trips a GCC 12 -Wrestrict false positive.
    std::string message = "'";
    message.append(text);
    message += "' is not a size: expected digits with an optional K, M or G suffix (base 1024), e.g. 500M or 2G";
    return invalid_argument(std::move(message));
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || text.size() - digits > 1) return bad();
  int shift = 0;
  if (digits < text.size()) {
    switch (text[digits]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return bad();
    }
  }
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t digit = uint64_t(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return bad();
    value = value * 10 + digit;
  }
  if (value > (std::numeric_limits<uint64_t>::max() >> shift)) return bad();
  value <<= shift;
  // 0 would evict every entry at the end of each run; --no-cache is the way to turn it off.
  if (value == 0) return invalid_argument("a cache size of 0 keeps nothing; use --no-cache to turn the cache off");
  return value;
}

Result<uint64_t> CompileCache::default_max_bytes() {
  const std::string text = getenv_or_empty("KILN_CACHE_MAX_SIZE");
  if (text.empty()) return kDefaultMaxBytes;
  Result<uint64_t> size = parse_size(text);
  if (!size.is_ok()) return invalid_argument("KILN_CACHE_MAX_SIZE: " + size.status().message());
  return size;
}

Result<std::unique_ptr<CompileCache>> CompileCache::open(std::string dir, uint64_t max_bytes) {
  if (dir.empty()) return invalid_argument("compile cache: the cache directory is empty");
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    return invalid_argument("compile cache: '" + dir + "' exists and is not a directory");
  const fs::path format_dir = fs::path(dir) / kFormatDir;
  fs::create_directories(format_dir, ec);
  if (ec)
    return Status(ErrorCode::kUnavailable,
                  "compile cache: cannot create '" + format_dir.string() + "': " + ec.message());
  if (!fs::is_directory(format_dir, ec))
    return invalid_argument("compile cache: '" + format_dir.string() + "' is not a directory");
  // access() and not a test write: it is enough to give a clear error at open; a store that
  // still fails (disk full) is counted, not fatal.
  if (::access(format_dir.c_str(), W_OK | X_OK) != 0)
    return Status(ErrorCode::kUnavailable, "compile cache: '" + format_dir.string() +
                                               "' is not writable: " + std::strerror(errno));
  return std::unique_ptr<CompileCache>(new CompileCache(std::move(dir), max_bytes));
}

Result<std::unique_ptr<CompileCache>> CompileCache::open_default() {
  std::string dir = default_dir();
  if (dir.empty())
    return Status(ErrorCode::kUnavailable,
                  "compile cache: no cache directory: set KILN_CACHE_DIR, XDG_CACHE_HOME or HOME");
  KILN_ASSIGN_OR_RETURN(uint64_t max_bytes, default_max_bytes());
  return open(std::move(dir), max_bytes);
}

std::string CompileCache::entry_path(const CacheKey& key) const {
  const std::string hex = key.hex();
  return (fs::path(dir_) / kFormatDir / hex.substr(0, 2) / hex).string();
}

void CompileCache::count(uint64_t CacheStats::*counter, uint64_t n) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.*counter += n;
}

CacheStats CompileCache::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

// ---- load / store ----

std::optional<std::vector<uint8_t>> CompileCache::load(const CacheKey& key) {
  const std::array<uint8_t, 32> digest = key.digest();
  const std::string path = entry_path(key);
  auto miss = [&]() -> std::optional<std::vector<uint8_t>> {
    count(&CacheStats::misses);
    return std::nullopt;
  };
  // O_NOFOLLOW: a symlink is not an entry. O_NONBLOCK: opening a FIFO planted at the entry's
  // path must not hang kilnc (it has no effect on regular files).
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
  if (file.fd < 0) return miss();
  struct stat st {};
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) return miss();

  // Removes the damaged file we read, but not a good entry another process has renamed over it
  // since we opened it (compare the inode). A remaining race only costs a later miss.
  auto damaged = [&]() -> std::optional<std::vector<uint8_t>> {
    struct stat now {};
    if (::lstat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
      ::unlink(path.c_str());
    return miss();
  };
  const uint64_t file_size = uint64_t(st.st_size);
  if (file_size < kHeaderBytes + kTrailerBytes) return damaged();
  uint8_t header[kHeaderBytes];
  if (!read_all(file.fd, header, sizeof(header))) return miss();  // an I/O error is not damage
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0) return damaged();
  if (std::memcmp(header + sizeof(kMagic), digest.data(), kDigestBytes) != 0) return damaged();
  const uint64_t length = get_u64(header + sizeof(kMagic) + kDigestBytes);
  // The length must account for the file exactly; this also bounds the allocation below by the
  // file's real size.
  if (length != file_size - kHeaderBytes - kTrailerBytes) return damaged();
  std::vector<uint8_t> payload(length);
  uint8_t trailer[kTrailerBytes];
  if (!read_all(file.fd, payload.data(), payload.size()) || !read_all(file.fd, trailer, sizeof(trailer)))
    return damaged();  // shorter than fstat said: truncated in place
  if (get_u64(trailer) != fnv1a(payload.data(), payload.size())) return damaged();

  // LRU: a hit makes the entry the newest. Best effort: a read-only cache still hits.
  ::futimens(file.fd, nullptr);
  count(&CacheStats::hits);
  return payload;
}

void CompileCache::store(const CacheKey& key, const std::vector<uint8_t>& value) {
  const std::array<uint8_t, 32> digest = key.digest();
  const fs::path path = entry_path(key);
  const fs::path shard = path.parent_path();
  std::error_code ec;
  fs::create_directories(shard, ec);  // no-op when it exists; another writer may race us here
  const fs::path temp = shard / temp_name();
  Fd file{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
  if (file.fd < 0) {
    count(&CacheStats::store_failures);
    return;
  }
  uint8_t header[kHeaderBytes];
  std::memcpy(header, kMagic, sizeof(kMagic));
  std::memcpy(header + sizeof(kMagic), digest.data(), kDigestBytes);
  put_u64(header + sizeof(kMagic) + kDigestBytes, value.size());
  uint8_t trailer[kTrailerBytes];
  put_u64(trailer, fnv1a(value.data(), value.size()));
  // No fsync: after a power loss an entry may be empty or torn, which load() treats as a miss
  // (length and checksum); paying an fsync per kernel for that is not worth it.
  bool ok = write_all(file.fd, header, sizeof(header)) && write_all(file.fd, value.data(), value.size()) &&
            write_all(file.fd, trailer, sizeof(trailer));
  // close() can report a deferred write error (NFS, quota): check it before publishing.
  ok = (::close(file.fd) == 0) && ok;
  file.fd = -1;
  // rename() is atomic within one file system: readers see the old entry, or none, or this one.
  if (ok) ok = ::rename(temp.c_str(), path.c_str()) == 0;
  if (!ok) {
    ::unlink(temp.c_str());
    count(&CacheStats::store_failures);
    return;
  }
  count(&CacheStats::stores);
}

// ---- trim ----

void CompileCache::trim() {
  struct Entry {
    fs::path path;
    uint64_t size = 0;
    struct timespec mtime {};
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  const fs::path format_dir = fs::path(dir_) / kFormatDir;
  const auto now = std::chrono::system_clock::now();
  std::error_code ec;
  for (fs::directory_iterator shards(format_dir, ec), end; !ec && shards != end; shards.increment(ec)) {
    std::error_code shard_ec;
    if (!shards->is_directory(shard_ec) || shards->is_symlink(shard_ec)) continue;
    for (fs::directory_iterator it(shards->path(), shard_ec); !shard_ec && it != end; it.increment(shard_ec)) {
      const std::string name = it->path().filename().string();
      struct stat st {};
      // lstat: only regular files are ours; a file gone since the listing was evicted by another
      // process.
      if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (name.rfind(kTempPrefix, 0) == 0) {
        const auto mtime = std::chrono::system_clock::time_point(
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
        if (now - mtime > kStaleTempAge) ::unlink(it->path().c_str());
        continue;
      }
      if (!is_entry_name(name)) continue;  // not ours: leave it
      entries.push_back(Entry{it->path(), uint64_t(st.st_size), st.st_mtim});
      total += uint64_t(st.st_size);
    }
  }
  if (total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
    return a.path < b.path;  // deterministic order for equal times
  });
  uint64_t evicted = 0;
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    // Gone already (ENOENT: another process evicted it) also frees its size.
    if (::unlink(e.path.c_str()) == 0) {
      ++evicted;
    } else if (errno != ENOENT) {
      continue;  // cannot remove it: it still counts
    }
    total -= e.size;
  }
  if (evicted > 0) count(&CacheStats::evictions, evicted);
}

}  // namespace kiln::codegen
