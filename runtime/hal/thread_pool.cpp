// ThreadPool (thread_pool.h): chunks of a job handed out through one atomic counter.
//
// A launch posts a Job and bumps `generation_`; each worker that wakes for that generation
// registers in the job (workers_inside, under mutex_), takes chunks until none are left, and
// leaves. The caller takes chunks too, then waits until no worker is inside, so the Job (on the
// caller's stack) is never touched after parallel_for returns. A worker that wakes only after
// the job was withdrawn sees job_ == nullptr and goes back to sleep. Results written by workers
// are visible to the caller through mutex_ (a worker leaves under it, the caller waits under it).
#include <algorithm>
#include <system_error>

#include "runtime/hal/thread_pool.h"
#include "runtime/log.h"

namespace kiln::runtime::hal {

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  job_posted_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::run_chunks(Job& job) {
  for (;;) {
    const int64_t c = job.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks) return;
    const int64_t begin = c * job.chunk;
    (*job.fn)(begin, std::min(job.units, begin + job.chunk));
  }
}

void ThreadPool::start_workers() {
  if (workers_started_) return;
  workers_started_ = true;
  workers_.reserve(threads_ - 1);
  try {
    for (unsigned i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::system_error& e) {
    log(LogLevel::kWarning, "thread pool: started " + std::to_string(workers_.size() + 1) + " of " +
                                std::to_string(threads_) + " threads (" + e.what() + "); work runs on those");
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    job_posted_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    Job* job = job_;
    if (!job) continue;  // woke after the job was withdrawn
    ++job->workers_inside;
    lock.unlock();
    run_chunks(*job);
    lock.lock();
    if (--job->workers_inside == 0) worker_left_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t units, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (units <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t wanted_chunks = int64_t(threads_) * 4;
  const int64_t chunk = std::max(grain, (units + wanted_chunks - 1) / wanted_chunks);
  const int64_t chunks = (units + chunk - 1) / chunk;
  if (chunks == 1 || threads_ == 1) {
    fn(0, units);  // one chunk, or one thread: no hand-off
    return;
  }

  std::lock_guard<std::mutex> launch(launch_mutex_);
  start_workers();
  Job job;
  job.fn = &fn;
  job.units = units;
  job.chunk = chunk;
  job.chunks = chunks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
  }
  job_posted_.notify_all();
  run_chunks(job);
  std::unique_lock<std::mutex> lock(mutex_);
  worker_left_.wait(lock, [&] { return job.workers_inside == 0; });
  job_ = nullptr;
}

}  // namespace kiln::runtime::hal
