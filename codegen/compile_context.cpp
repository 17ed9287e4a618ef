#include "codegen/compile_context.h"

#include <algorithm>
#include <thread>

namespace kiln::codegen {

CompileContext::CompileContext(int jobs, CompileCache* cache, ProgressFn progress)
    : jobs_(jobs > 0 ? jobs : std::max(1, int(std::thread::hardware_concurrency()))),
      cache_(cache),
      progress_(std::move(progress)) {}

Status CompileContext::parallel_for(std::string_view label, size_t n, const std::function<Status(size_t)>& work) {
  std::vector<Status> results(n);
  std::atomic<size_t> next{0}, done{0};
  std::mutex progress_mutex;  // progress_ prints; one call at a time
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      results[i] = work(i);
      const size_t finished = ++done;
      if (progress_) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        progress_(label, finished, n);
      }
    }
  };
  const size_t threads = std::min<size_t>(size_t(jobs_), n);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (Status& status : results)
    if (!status.is_ok()) return std::move(status);
  return Status::ok();
}

Result<std::vector<uint8_t>> CompileContext::cached(const CacheKey& key,
                                                    const std::function<Result<std::vector<uint8_t>>()>& produce) {
  ++units_;
  if (cache_) {
    if (std::optional<std::vector<uint8_t>> hit = cache_->load(key)) {
      ++hits_;
      return std::move(*hit);
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, produce());
  if (cache_) cache_->store(key, bytes);
  return bytes;
}

CompileCounts CompileContext::counts() const {
  CompileCounts c;
  c.units = units_;
  c.cache_hits = hits_;
  c.cache_misses = c.units - c.cache_hits;
  return c;
}

}  // namespace kiln::codegen
