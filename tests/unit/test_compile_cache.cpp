// The persistent compile cache (codegen/compile_cache.h): keys, round trips, damaged entries,
// LRU eviction, the directory and size settings, and concurrent use by threads and processes.
// Every test works in its own fresh directory under the system temp directory.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "codegen/compile_cache.h"

using namespace kiln;
using namespace kiln::codegen;
namespace fs = std::filesystem;

namespace {

// A fresh, empty directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("kiln-compile-cache-test-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// Sets or unsets environment variables for one test and restores them afterwards.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) {
    for (std::string& name : names) {
      const char* v = std::getenv(name.c_str());
      saved_.emplace_back(std::move(name), v ? std::optional<std::string>(v) : std::nullopt);
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  static void set(const char* name, const char* value) {
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

using Fields = std::vector<std::pair<std::string, std::string>>;

// The inputs kilnc keys a kernel on.
Fields sample_fields() {
  return {{"source", "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }"},
          {"compiler", "nvrtc"},
          {"compiler-version", "12.4"},
          {"arch", "sm_90"},
          {"flags", "-O3 --use_fast_math"},
          {"kiln-version", "0.1.0"}};
}

CacheKey make_key(const Fields& fields) {
  CacheKey key;
  for (const auto& [name, value] : fields) key.add(name, value);
  return key;
}

CacheKey numbered_key(int i) { return CacheKey().add("source", "kernel " + std::to_string(i)).add("arch", "sm_90"); }

// Deterministic bytes of the given size, different for each seed.
std::vector<uint8_t> payload(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(size);
  for (uint8_t& b : out) b = uint8_t(rng());
  return out;
}

std::unique_ptr<CompileCache> open_or_fail(const std::string& dir, uint64_t max_bytes = CompileCache::kDefaultMaxBytes) {
  Result<std::unique_ptr<CompileCache>> cache = CompileCache::open(dir, max_bytes);
  REQUIRE_MESSAGE(cache.is_ok(), cache.status().to_string());
  return std::move(cache).value();
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

void set_age(const fs::path& path, std::chrono::seconds age) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - age);
}

// Every file under <dir>/v1: name -> size.
std::map<std::string, uintmax_t> files_in(const fs::path& dir) {
  std::map<std::string, uintmax_t> out;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir / "v1"))
    if (e.is_regular_file()) out[e.path().filename().string()] = e.file_size();
  return out;
}

constexpr size_t kEntryOverhead = 8 + 32 + 8 + 8;  // magic, digest, length, checksum

}  // namespace

TEST_CASE("compile cache: a key is SHA-256 of its fields, deterministic, and every field changes it") {
  // The digest of no fields is the SHA-256 of the empty string: the digest is the real thing.
  CHECK(CacheKey().hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

  const Fields base = sample_fields();
  const std::string base_hex = make_key(base).hex();
  CHECK(base_hex == make_key(base).hex());
  REQUIRE(base_hex.size() == 64);
  CHECK(base_hex.find_first_not_of("0123456789abcdef") == std::string::npos);

  // Length prefixes keep field boundaries: moving bytes between name and value, or between
  // fields, is a different key.
  CHECK(CacheKey().add("ab", "c").hex() != CacheKey().add("a", "bc").hex());
  CHECK(CacheKey().add("a", "b").add("c", "d").hex() != CacheKey().add("a", "bcd").hex());
  CHECK(CacheKey().add("a", "").hex() != CacheKey().hex());
  // Order is part of the key.
  CHECK(CacheKey().add("a", "1").add("b", "2").hex() != CacheKey().add("b", "2").add("a", "1").hex());

  TempDir dir;
  std::unique_ptr<CompileCache> cache = open_or_fail(dir.str());
  const std::vector<uint8_t> bytes = payload(4096, 1);
  cache->store(make_key(base), bytes);
  REQUIRE(cache->load(make_key(base)) == bytes);

  for (size_t i = 0; i < base.size(); ++i) {
    for (bool change_name : {false, true}) {
      Fields changed = base;
      (change_name ? changed[i].first : changed[i].second) += "'";
      INFO("changed the " << (change_name ? "name" : "value") << " of field '" << base[i].first << "'");
      const CacheKey key = make_key(changed);
      CHECK(key.hex() != base_hex);
      CHECK_FALSE(cache->load(key).has_value());
    }
    // Dropping a field also misses.
    Fields dropped = base;
    dropped.erase(dropped.begin() + long(i));
    INFO("dropped field '" << base[i].first << "'");
    CHECK(make_key(dropped).hex() != base_hex);
    CHECK_FALSE(cache->load(make_key(dropped)).has_value());
  }
  // The unchanged key still hits after all those misses.
  CHECK(cache->load(make_key(base)) == bytes);
}

TEST_CASE("compile cache: store then load round-trips empty and 1 MB payloads in the v1 layout") {
  TempDir dir;
  std::unique_ptr<CompileCache> cache = open_or_fail(dir.str());
  CHECK(cache->dir() == dir.str());
  CHECK(fs::is_directory(dir.path() / "v1"));

  const CacheKey empty_key = numbered_key(0), big_key = numbered_key(1);
  CHECK_FALSE(cache->load(empty_key).has_value());
  cache->store(empty_key, {});
  std::optional<std::vector<uint8_t>> got = cache->load(empty_key);
  REQUIRE(got.has_value());
  CHECK(got->empty());

  const std::vector<uint8_t> big = payload(1 << 20, 2);
  cache->store(big_key, big);
  got = cache->load(big_key);
  REQUIRE(got.has_value());
  CHECK(*got == big);

  // <dir>/v1/<first two hex chars>/<hex>, header + payload + checksum.
  const std::string hex = big_key.hex();
  const fs::path entry = dir.path() / "v1" / hex.substr(0, 2) / hex;
  CHECK(cache->entry_path(big_key) == entry.string());
  REQUIRE(fs::is_regular_file(entry));
  CHECK(fs::file_size(entry) == big.size() + kEntryOverhead);
  const std::vector<uint8_t> raw = read_file(entry);
  CHECK(std::string(raw.begin(), raw.begin() + 8) == "KILNCC01");
  const std::array<uint8_t, 32> digest = big_key.digest();
  CHECK(std::equal(digest.begin(), digest.end(), raw.begin() + 8));

  // Overwriting an entry replaces it; no temp files stay behind.
  const std::vector<uint8_t> other = payload(1000, 3);
  cache->store(big_key, other);
  CHECK(cache->load(big_key) == other);
  for (const auto& [name, size] : files_in(dir.path())) CHECK(name.rfind("tmp.", 0) == std::string::npos);

  // Another CompileCache on the same directory (the next kilnc run) sees the entries.
  std::unique_ptr<CompileCache> again = open_or_fail(dir.str());
  CHECK(again->load(big_key) == other);
  CHECK(again->load(empty_key) == std::vector<uint8_t>{});
}

TEST_CASE("compile cache: a damaged entry is a miss and is removed") {
  TempDir dir;
  std::unique_ptr<CompileCache> cache = open_or_fail(dir.str());
  const CacheKey key = numbered_key(7);
  const std::vector<uint8_t> bytes = payload(5000, 7);
  const fs::path entry = cache->entry_path(key);

  auto damage_and_check = [&](const char* what, auto&& damage) {
    INFO(what);
    cache->store(key, bytes);
    REQUIRE(cache->load(key) == bytes);
    std::vector<uint8_t> raw = read_file(entry);
    damage(raw);
    write_file(entry, raw);
    const uint64_t misses = cache->stats().misses;
    CHECK_FALSE(cache->load(key).has_value());
    CHECK(cache->stats().misses == misses + 1);
    CHECK_FALSE(fs::exists(entry));
    // The next store repairs it.
    cache->store(key, bytes);
    CHECK(cache->load(key) == bytes);
  };

  damage_and_check("a flipped payload byte", [](std::vector<uint8_t>& raw) { raw[8 + 32 + 8 + 1234] ^= 0x10; });
  damage_and_check("a flipped checksum byte", [](std::vector<uint8_t>& raw) { raw.back() ^= 0x01; });
  damage_and_check("bad magic", [](std::vector<uint8_t>& raw) { raw[7] = '2'; });
  damage_and_check("a wrong length", [](std::vector<uint8_t>& raw) { raw[8 + 32] ^= 0x01; });
  damage_and_check("a huge length", [](std::vector<uint8_t>& raw) { raw[8 + 32 + 7] = 0xff; });
  damage_and_check("a wrong digest", [](std::vector<uint8_t>& raw) { raw[8 + 5] ^= 0x80; });
  damage_and_check("a byte appended", [](std::vector<uint8_t>& raw) { raw.push_back(0); });
  for (size_t keep : {size_t{0}, size_t{7}, size_t{8 + 32 + 8}, size_t{8 + 32 + 8 + 4999}, bytes.size() + kEntryOverhead - 1}) {
    INFO("truncated to " << keep << " bytes");
    damage_and_check("truncated", [&](std::vector<uint8_t>& raw) { raw.resize(keep); });
  }

  // Another key's complete, valid entry under this key's name: the digest inside catches it.
  const CacheKey other = numbered_key(8);
  cache->store(other, bytes);
  fs::copy_file(cache->entry_path(other), entry, fs::copy_options::overwrite_existing);
  CHECK_FALSE(cache->load(key).has_value());
  CHECK_FALSE(fs::exists(entry));
  CHECK(cache->load(other) == bytes);
}

TEST_CASE("compile cache: a non-regular file at an entry's path is a miss and is left alone") {
  TempDir dir;
  std::unique_ptr<CompileCache> cache = open_or_fail(dir.str());
  const CacheKey key = numbered_key(1);
  const fs::path entry = cache->entry_path(key);
  fs::create_directories(entry.parent_path());

  SUBCASE("a directory") {
    fs::create_directory(entry);
    CHECK_FALSE(cache->load(key).has_value());
    CHECK(fs::is_directory(entry));
  }
  SUBCASE("a FIFO (must not block)") {
    REQUIRE(::mkfifo(entry.c_str(), 0600) == 0);
    CHECK_FALSE(cache->load(key).has_value());
    CHECK(fs::is_fifo(fs::symlink_status(entry)));
  }
  SUBCASE("a symlink to a valid entry") {
    // A valid entry for `key`, reached only through a symlink.
    cache->store(key, payload(100, 2));
    const fs::path real = entry.string() + ".real";
    fs::rename(entry, real);
    fs::create_symlink(real, entry);
    CHECK_FALSE(cache->load(key).has_value());
    CHECK(fs::is_symlink(entry));
  }
  CHECK(cache->stats().hits == 0);
}

TEST_CASE("compile cache: trim evicts least recently used entries first, down to the bound") {
  TempDir dir;
  constexpr size_t kPayload = 1000;
  constexpr uint64_t kEntry = kPayload + kEntryOverhead;
  std::unique_ptr<CompileCache> cache = open_or_fail(dir.str(), 3 * kEntry);
  std::vector<CacheKey> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(numbered_key(i));
    cache->store(keys.back(), payload(kPayload, uint32_t(i)));
  }
  // Last use, in hours ago: key 1 is the oldest, then 3, 0, 4, 2 (not the order of the stores).
  const int hours_ago[5] = {3, 5, 1, 4, 2};
  for (int i = 0; i < 5; ++i) set_age(cache->entry_path(keys[i]), std::chrono::hours(hours_ago[i]));
  // A file the cache does not own is neither counted nor removed.
  const fs::path foreign = dir.path() / "v1" / "00" / "README";
  fs::create_directories(foreign.parent_path());
  write_file(foreign, payload(10 * kPayload, 99));
  set_age(foreign, std::chrono::hours(100));

  cache->trim();
  CHECK(cache->stats().evictions == 2);
  CHECK_FALSE(fs::exists(cache->entry_path(keys[1])));
  CHECK_FALSE(fs::exists(cache->entry_path(keys[3])));
  for (int i : {0, 2, 4}) CHECK(fs::exists(cache->entry_path(keys[i])));
  CHECK(fs::exists(foreign));
  uint64_t total = 0;
  for (const auto& [name, size] : files_in(dir.path()))
    if (name != "README") total += size;
  CHECK(total == 3 * kEntry);

  // Under the bound, trim removes nothing.
  cache->trim();
  CHECK(cache->stats().evictions == 2);

  // A hit refreshes the entry: key 2 was used least recently, a load makes it the newest, so a
  // tighter bound evicts key 4 and then key 0 instead.
  set_age(cache->entry_path(keys[2]), std::chrono::hours(10));
  set_age(cache->entry_path(keys[4]), std::chrono::hours(2));
  set_age(cache->entry_path(keys[0]), std::chrono::hours(1));
  REQUIRE(cache->load(keys[2]) == payload(kPayload, 2));
  std::unique_ptr<CompileCache> small = open_or_fail(dir.str(), kEntry + kEntry / 2);
  small->trim();
  CHECK(small->stats().evictions == 2);
  CHECK(fs::exists(cache->entry_path(keys[2])));
  CHECK_FALSE(fs::exists(cache->entry_path(keys[4])));
  CHECK_FALSE(fs::exists(cache->entry_path(keys[0])));
  CHECK(small->load(keys[2]) == payload(kPayload, 2));
}

TEST_CASE("compile cache: trim removes temp files older than an hour, keeps recent ones") {
  TempDir dir;
  std::unique_ptr<CompileCache> cache = open_or_fail(dir.str());
  const fs::path shard = dir.path() / "v1" / "ab";
  fs::create_directories(shard);
  const fs::path stale = shard / "tmp.123.456.7", fresh = shard / "tmp.123.456.8";
  write_file(stale, payload(100, 1));
  write_file(fresh, payload(100, 2));
  set_age(stale, std::chrono::minutes(61));
  set_age(fresh, std::chrono::minutes(5));
  cache->trim();
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(fresh));
  CHECK(cache->stats().evictions == 0);  // temp files are not entries
}

TEST_CASE("compile cache: open fails clearly on a path it cannot use") {
  TempDir dir;
  const fs::path file = dir.path() / "not-a-dir";
  write_file(file, {1, 2, 3});

  Result<std::unique_ptr<CompileCache>> r = CompileCache::open(file.string(), 1 << 20);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK(r.status().message().find(file.string()) != std::string::npos);
  CHECK(r.status().message().find("not a directory") != std::string::npos);

  // Below a regular file: cannot be created.
  r = CompileCache::open((file / "sub").string(), 1 << 20);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find((file / "sub").string()) != std::string::npos);

  // A regular file where the format directory goes.
  const fs::path blocked = dir.path() / "blocked";
  fs::create_directories(blocked);
  write_file(blocked / "v1", {1});
  r = CompileCache::open(blocked.string(), 1 << 20);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find((blocked / "v1").string()) != std::string::npos);

  r = CompileCache::open("", 1 << 20);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);

  // Missing parents are created.
  const fs::path nested = dir.path() / "a" / "b" / "c";
  r = CompileCache::open(nested.string(), 1 << 20);
  REQUIRE(r.is_ok());
  CHECK(fs::is_directory(nested / "v1"));

  // Not writable: root may write anywhere, so this part only runs as another user.
  if (::geteuid() != 0) {
    const fs::path read_only = dir.path() / "read-only";
    fs::create_directories(read_only / "v1");
    fs::permissions(read_only / "v1", fs::perms::owner_read | fs::perms::owner_exec);
    r = CompileCache::open(read_only.string(), 1 << 20);
    fs::permissions(read_only / "v1", fs::perms::owner_all);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kUnavailable);
    CHECK(r.status().message().find("not writable") != std::string::npos);
  }
}

TEST_CASE("compile cache: default_dir honours KILN_CACHE_DIR, then XDG_CACHE_HOME, then HOME") {
  EnvGuard guard({"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"});
  EnvGuard::set("KILN_CACHE_DIR", "/tmp/kiln-explicit");
  EnvGuard::set("XDG_CACHE_HOME", "/tmp/xdg");
  EnvGuard::set("HOME", "/home/someone");
  CHECK(CompileCache::default_dir() == "/tmp/kiln-explicit");

  EnvGuard::set("KILN_CACHE_DIR", "");  // empty counts as unset
  CHECK(CompileCache::default_dir() == "/tmp/xdg/kiln");
  EnvGuard::set("KILN_CACHE_DIR", nullptr);
  CHECK(CompileCache::default_dir() == "/tmp/xdg/kiln");

  EnvGuard::set("XDG_CACHE_HOME", "");
  CHECK(CompileCache::default_dir() == "/home/someone/.cache/kiln");
  EnvGuard::set("XDG_CACHE_HOME", "relative/cache");  // the XDG spec says to ignore it
  CHECK(CompileCache::default_dir() == "/home/someone/.cache/kiln");
  EnvGuard::set("XDG_CACHE_HOME", nullptr);
  CHECK(CompileCache::default_dir() == "/home/someone/.cache/kiln");

  EnvGuard::set("HOME", nullptr);
  CHECK(CompileCache::default_dir() == "");

  // open_default uses it, and fails clearly when there is none.
  Result<std::unique_ptr<CompileCache>> r = CompileCache::open_default();
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kUnavailable);
  CHECK(r.status().message().find("KILN_CACHE_DIR") != std::string::npos);

  TempDir dir;
  EnvGuard::set("KILN_CACHE_DIR", (dir.path() / "from-env").c_str());
  r = CompileCache::open_default();
  REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
  CHECK((*r)->dir() == (dir.path() / "from-env").string());
  CHECK(fs::is_directory(dir.path() / "from-env" / "v1"));
}

TEST_CASE("compile cache: default_max_bytes parses K/M/G sizes and rejects garbage") {
  EnvGuard guard({"KILN_CACHE_MAX_SIZE", "KILN_CACHE_DIR"});
  EnvGuard::set("KILN_CACHE_MAX_SIZE", nullptr);
  Result<uint64_t> size = CompileCache::default_max_bytes();
  REQUIRE(size.is_ok());
  CHECK(*size == uint64_t{1} << 30);
  EnvGuard::set("KILN_CACHE_MAX_SIZE", "");
  size = CompileCache::default_max_bytes();
  REQUIRE(size.is_ok());
  CHECK(*size == uint64_t{1} << 30);

  const std::pair<const char*, uint64_t> good[] = {
      {"1048576", 1048576},     {"500M", 500ull << 20}, {"2G", 2ull << 30}, {"64K", 64ull << 10},
      {"3g", 3ull << 30},       {"7m", 7ull << 20},     {"1k", 1024},       {"1", 1},
      {"16000000000G", 16000000000ull << 30}};
  for (const auto& [text, expected] : good) {
    INFO("KILN_CACHE_MAX_SIZE=" << text);
    EnvGuard::set("KILN_CACHE_MAX_SIZE", text);
    size = CompileCache::default_max_bytes();
    REQUIRE_MESSAGE(size.is_ok(), size.status().to_string());
    CHECK(*size == expected);
  }

  for (const char* text : {"abc", "12X", "-5", "1.5G", "M", " 5", "5 ", "5MB", "0", "0K", "18446744073709551616",
                           "17179869184G", "99999999999999999999999"}) {
    INFO("KILN_CACHE_MAX_SIZE=" << text);
    EnvGuard::set("KILN_CACHE_MAX_SIZE", text);
    size = CompileCache::default_max_bytes();
    REQUIRE_FALSE(size.is_ok());
    CHECK(size.status().code() == ErrorCode::kInvalidArgument);
    CHECK(size.status().message().find("KILN_CACHE_MAX_SIZE") != std::string::npos);
  }

  // open_default reports the malformed size rather than ignoring it.
  TempDir dir;
  EnvGuard::set("KILN_CACHE_DIR", dir.str().c_str());
  EnvGuard::set("KILN_CACHE_MAX_SIZE", "lots");
  Result<std::unique_ptr<CompileCache>> r = CompileCache::open_default();
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("KILN_CACHE_MAX_SIZE") != std::string::npos);
  EnvGuard::set("KILN_CACHE_MAX_SIZE", "2M");
  r = CompileCache::open_default();
  REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
  CHECK((*r)->max_bytes() == 2ull << 20);
}

namespace {

// The shared workload of the concurrency tests: kKeys keys, each with one value (the same key
// always compiles to the same bytes), large enough that a torn write would be visible.
constexpr int kKeys = 8;
std::vector<uint8_t> value_of(int k) { return payload(size_t(40000 + 17389 * k), uint32_t(1000 + k)); }

std::vector<std::vector<uint8_t>> all_values() {
  std::vector<std::vector<uint8_t>> values;
  for (int k = 0; k < kKeys; ++k) values.push_back(value_of(k));
  return values;
}

// One worker's loop of random stores and loads; returns how many loads were wrong. A load that
// returns other bytes is always wrong. With must_hit (every key was stored before the workers
// started and nothing evicts), a miss is wrong too: a store replaces an entry atomically, so a
// reader never finds it missing or partial (which it would report as a miss, and remove).
int hammer(CompileCache& cache, int worker, int iterations, const std::vector<std::vector<uint8_t>>& values,
           bool must_hit) {
  int wrong = 0;
  std::mt19937 rng(uint32_t(worker * 7919 + 1));
  for (int i = 0; i < iterations; ++i) {
    const int k = int(rng() % kKeys);
    if (rng() % 2) {
      cache.store(numbered_key(k), values[size_t(k)]);
    } else {
      std::optional<std::vector<uint8_t>> got = cache.load(numbered_key(k));
      if (got ? *got != values[size_t(k)] : must_hit) ++wrong;
    }
  }
  return wrong;
}

// After the writers are done: every file is a complete entry of one of our keys, no temp file
// remains, and each key loads as nothing or its exact bytes.
void check_only_complete_entries(const TempDir& dir, const std::vector<std::vector<uint8_t>>& values) {
  std::map<std::string, int> key_of_hex;
  for (int k = 0; k < kKeys; ++k) key_of_hex[numbered_key(k).hex()] = k;
  std::unique_ptr<CompileCache> reader = open_or_fail(dir.str());
  int present = 0;
  for (const auto& [name, size] : files_in(dir.path())) {
    INFO("file " << name);
    REQUIRE(key_of_hex.count(name) == 1);  // no temp files, nothing unexpected
    const int k = key_of_hex[name];
    CHECK(size == values[size_t(k)].size() + kEntryOverhead);
    ++present;
  }
  for (int k = 0; k < kKeys; ++k) {
    std::optional<std::vector<uint8_t>> got = reader->load(numbered_key(k));
    if (got) CHECK(*got == values[size_t(k)]);
  }
  CHECK(reader->stats().hits == uint64_t(present));
  CHECK(reader->stats().misses == uint64_t(kKeys - present));
}

// Runs `work` in `count` forked children; each child's exit status is its result (0: ok). No
// doctest inside a child (its results would be lost); _exit skips the parent's atexit handlers
// and stdio buffers.
template <class Work>
void run_children(int count, Work work) {
  std::vector<pid_t> children;
  for (int p = 0; p < count; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) ::_exit(work(p));
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("child " << pid << " status " << status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

}  // namespace

TEST_CASE("compile cache: 8 threads storing, loading and trimming the same keys see only complete entries") {
  TempDir dir;
  const std::vector<std::vector<uint8_t>> values = all_values();
  std::unique_ptr<CompileCache> cache = open_or_fail(dir.str());
  constexpr int kThreads = 8, kIterations = 150;

  // Rewriting present entries: every load hits with the exact bytes.
  for (int k = 0; k < kKeys; ++k) cache->store(numbered_key(k), values[size_t(k)]);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { wrong += hammer(*cache, t, kIterations, values, /*must_hit=*/true); });
  for (std::thread& t : threads) t.join();
  CHECK(wrong == 0);
  check_only_complete_entries(dir, values);

  // A second cache on the same directory with a bound of about half the entries trims all the
  // while: loads may now miss, but never see other bytes.
  std::unique_ptr<CompileCache> trimmer = open_or_fail(dir.str(), 4 * 100000);
  std::atomic<bool> done{false};
  wrong = 0;
  threads.clear();
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { wrong += hammer(*cache, 100 + t, kIterations, values, /*must_hit=*/false); });
  std::thread trim_thread([&] {
    while (!done) trimmer->trim();
  });
  for (std::thread& t : threads) t.join();
  done = true;
  trim_thread.join();
  CHECK(wrong == 0);
  CHECK(trimmer->stats().evictions > 0);

  const CacheStats stats = cache->stats();
  CHECK(stats.store_failures == 0);
  CHECK(stats.hits > 0);
  CHECK(stats.hits + stats.misses + stats.stores == uint64_t(kKeys + 2 * kThreads * kIterations));
  check_only_complete_entries(dir, values);
}

TEST_CASE("compile cache: 4 processes storing, loading and trimming the same keys see only complete entries") {
  TempDir dir;
  const std::vector<std::vector<uint8_t>> values = all_values();
  constexpr int kProcesses = 4, kIterations = 200;
  {
    std::unique_ptr<CompileCache> cache = open_or_fail(dir.str());
    for (int k = 0; k < kKeys; ++k) cache->store(numbered_key(k), values[size_t(k)]);
  }
  // Rewriting present entries, then trimming under a bound they fit in: every load hits.
  run_children(kProcesses, [&](int p) {
    Result<std::unique_ptr<CompileCache>> cache = CompileCache::open(dir.str(), CompileCache::kDefaultMaxBytes);
    if (!cache.is_ok()) return 2;
    const int wrong = hammer(**cache, 300 + p, kIterations, values, /*must_hit=*/true);
    (*cache)->trim();
    const CacheStats stats = (*cache)->stats();
    return wrong != 0 ? 1 : stats.store_failures != 0 ? 3 : stats.evictions != 0 ? 4 : 0;
  });
  check_only_complete_entries(dir, values);

  // Like kilnc runs that each trim at their end, under a bound of about half the entries,
  // racing the others' stores, loads and trims: loads may miss, but never see other bytes.
  run_children(kProcesses, [&](int p) {
    Result<std::unique_ptr<CompileCache>> cache = CompileCache::open(dir.str(), 4 * 100000);
    if (!cache.is_ok()) return 2;
    int wrong = 0;
    for (int round = 0; round < 4; ++round) {
      wrong += hammer(**cache, 400 + 10 * p + round, kIterations / 4, values, /*must_hit=*/false);
      (*cache)->trim();
    }
    return wrong != 0 ? 1 : (*cache)->stats().store_failures != 0 ? 3 : 0;
  });
  check_only_complete_entries(dir, values);
}

TEST_CASE("compile cache: stats count hits, misses, stores, store failures and evictions") {
  TempDir dir;
  std::unique_ptr<CompileCache> cache = open_or_fail(dir.str(), 1);
  const CacheKey a = numbered_key(1);
  // b in another shard directory than a, so that blocking b's shard below leaves a alone.
  int b_index = 2;
  while (numbered_key(b_index).hex().substr(0, 2) == a.hex().substr(0, 2)) ++b_index;
  const CacheKey b = numbered_key(b_index);
  CacheStats s = cache->stats();
  CHECK((s.hits == 0 && s.misses == 0 && s.stores == 0 && s.store_failures == 0 && s.evictions == 0));

  CHECK_FALSE(cache->load(a).has_value());
  cache->store(a, payload(10, 1));
  CHECK(cache->load(a).has_value());
  CHECK(cache->load(a).has_value());
  CHECK_FALSE(cache->load(b).has_value());
  s = cache->stats();
  CHECK(s.misses == 2);
  CHECK(s.hits == 2);
  CHECK(s.stores == 1);
  CHECK(s.store_failures == 0);

  // A store that cannot write (a regular file where its shard directory goes) is counted, not
  // fatal, and leaves nothing behind.
  const fs::path shard = fs::path(cache->entry_path(b)).parent_path();
  if (fs::exists(shard)) fs::remove_all(shard);
  write_file(shard, {0});
  cache->store(b, payload(10, 2));
  s = cache->stats();
  CHECK(s.store_failures == 1);
  CHECK(s.stores == 1);
  CHECK_FALSE(cache->load(b).has_value());
  fs::remove(shard);

  // A bound of 1 byte: trim evicts every entry.
  cache->store(b, payload(10, 2));
  cache->trim();
  s = cache->stats();
  CHECK(s.stores == 2);
  CHECK(s.evictions == 2);
  CHECK_FALSE(cache->load(a).has_value());
  CHECK_FALSE(cache->load(b).has_value());
}
