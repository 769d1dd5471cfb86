// A small fork-join pool for large batches. The calling thread works on its own
// job too and only waits for chunks other threads already started, so nested or
// concurrent parallelFor calls (several async ops at once) cannot deadlock.
// Size: EMBEDSTACK_CPU_THREADS, else std::thread::hardware_concurrency().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace embedstack {

/** Batches at least this long are split across the pool (reads and parallel parts of writes). */
constexpr size_t kParallelThreshold = 16384;

class ThreadPool {
 public:
  /** The process-wide pool (created on first use, never destroyed: threads end with the process). */
  static ThreadPool& shared();

  /** `threads` counts the caller: threads - 1 workers are started. */
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t threads() const { return workers_.size() + 1; }

  /**
   * Runs fn(begin, end) over [0, n) in chunks of `grain` (>= 1) on the pool and the
   * caller; returns when every chunk is done. Rethrows the first exception a chunk threw.
   */
  void parallelFor(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  struct Job;
  void workerLoop();
  static void runChunks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
};

/** Grain for splitting `n` items over the shared pool: ~4 chunks per thread, at least `minGrain`. */
size_t parallelGrain(size_t n, size_t minGrain);

/** parallelFor on the shared pool when n >= kParallelThreshold, else inline. */
void forEachRange(size_t n, const std::function<void(size_t, size_t)>& fn, size_t minGrain = 2048);

}  // namespace embedstack
