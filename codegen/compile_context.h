// CompileContext: what a target's compile step may use besides its inputs — worker threads
// (kilnc -j) and the persistent compile cache (compile_cache.h) — and what it reports back:
// how many units it compiled and how many came from the cache. One context serves one kilnc run
// (every target); compile_graph() passes it to Target::compile.
//
// Determinism: parallel_for runs items in any order on any thread, but every caller stores
// results by item index, so the output never depends on -j.
//
// Thread-safety: parallel_for must not be nested (a work item must not call it); cached() and
// counts() are safe from any thread. The cache, when given, is borrowed and must outlive the
// context.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/compile_cache.h"
#include "support/status.h"

namespace kiln::codegen {

struct CompileCounts {
  uint64_t units = 0;        // compile units run through cached(): NVRTC programs, shaders
  uint64_t cache_hits = 0;   // of them, read from the cache
  uint64_t cache_misses = 0; // of them, compiled (and stored, when a cache is open)
};

// Progress of the current parallel_for: items done of total, and a label ("cuda: NVRTC").
using ProgressFn = std::function<void(std::string_view label, size_t done, size_t total)>;

class CompileContext {
 public:
  // jobs <= 0: one worker per hardware thread. cache may be null (no cache: --no-cache).
  explicit CompileContext(int jobs = 0, CompileCache* cache = nullptr, ProgressFn progress = nullptr);

  int jobs() const { return jobs_; }
  CompileCache* cache() const { return cache_; }

  // Runs work(i) for every i in [0, n) on up to jobs() threads (the calling thread included).
  // Every item runs; the result is the Status of the lowest failing index, so the error a user
  // sees does not depend on scheduling.
  Status parallel_for(std::string_view label, size_t n, const std::function<Status(size_t)>& work);

  // One compile unit's output: the cache's copy when `key` hits, else produce()'s result, which
  // is then stored. A failing produce() stores nothing.
  Result<std::vector<uint8_t>> cached(const CacheKey& key,
                                      const std::function<Result<std::vector<uint8_t>>()>& produce);

  CompileCounts counts() const;

 private:
  int jobs_;
  CompileCache* cache_;
  ProgressFn progress_;
  std::atomic<uint64_t> units_{0}, hits_{0};
};

}  // namespace kiln::codegen
