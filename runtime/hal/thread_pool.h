// A fork-join thread pool for the drivers: the cpu driver's kernel launches, the CUDA driver's
// copies into pinned staging memory.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime::hal {

// Threads that run the chunks of one job (a cpu kernel launch, a staging window's copy) at a time,
// with the calling thread.
//
// Threads are started on the first launch that has more than one chunk (a device that only
// copies buffers, or runs tiny graphs, starts none) and joined by the destructor. If the system
// refuses a thread, the pool runs with those it has (at worst the caller alone): results are the
// same, only slower.
//
// Thread-safety: parallel_for may be called from any number of threads at once. Launches with
// one chunk run on the calling thread alone, concurrently with anything; launches with several
// take the pool one at a time (launch_mutex_), so two sessions' launches interleave at launch
// granularity instead of splitting the threads between them.
class ThreadPool {
 public:
  // `threads`: the most threads a launch runs on, the caller included (>= 1).
  explicit ThreadPool(unsigned threads) : threads_(threads < 1 ? 1 : threads) {}
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Calls fn(begin, end) over contiguous chunks covering [0, units): about 4 chunks per thread
  // (so a slow chunk does not hold the others back), each of at least `grain` units (taken as 1
  // when smaller) except the last, on the pool's threads and the caller's; returns when every
  // chunk has run. `fn` must not
  // throw, and must not call parallel_for of the same pool.
  void parallel_for(int64_t units, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // The most threads a launch runs on, the caller included.
  unsigned threads() const { return threads_; }

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t units = 0;
    int64_t chunk = 1;
    int64_t chunks = 0;
    std::atomic<int64_t> next_chunk{0};
    int workers_inside = 0;  // guarded by mutex_
  };
  static void run_chunks(Job& job);
  void start_workers();  // under launch_mutex_
  void worker_loop();

  const unsigned threads_;
  std::mutex launch_mutex_;  // one multi-chunk launch at a time
  std::mutex mutex_;         // guards everything below
  std::condition_variable job_posted_;
  std::condition_variable worker_left_;
  std::vector<std::thread> workers_;
  bool workers_started_ = false;
  bool stopping_ = false;
  uint64_t generation_ = 0;  // bumped for every posted job
  Job* job_ = nullptr;       // the job in progress, or null
};

}  // namespace kiln::runtime::hal
