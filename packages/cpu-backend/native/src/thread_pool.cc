#include "thread_pool.h"

#include <chrono>
#include <cstdlib>
#include <exception>

#include "env.h"
#include "fp_mode.h"

namespace embedstack {

struct ThreadPool::Job {
  explicit Job(RangeFn f) : fn(f) {}
  RangeFn fn;
  size_t n = 0;
  size_t grain = 1;
  size_t maxHelpers = 0;  // workers that may join (guarded by the pool's mutex_)
  size_t helpers = 0;     // workers that joined (guarded by the pool's mutex_)
  std::atomic<size_t> left{0};  // joined workers done with the job (parallelFor returns once all are)
  Job* link = nullptr;    // the next queued job (guarded by the pool's mutex_)
  bool queued = false;    // in the pool's queue (guarded by the pool's mutex_)
  // A posted task's first parallelFor (nearEnd != nullptr): chunks shrink to `tail` items
  // (a `spread`-th of what is left), and nearEnd is told once, by the first idle thread.
  size_t tail = 0;
  size_t spread = 1;
  PoolTask* nearEnd = nullptr;
  std::atomic<bool> told{false};
  std::atomic<int> telling{0};  // threads in tellIdle (parallelFor returns only once it is 0)
  std::atomic<size_t> next{0};  // items claimed
  std::atomic<size_t> done{0};  // items done
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex m;
  std::condition_variable finished;
};

ThreadPool& ThreadPool::shared() {
  static ThreadPool* pool = [] {
    const long hardware = static_cast<long>(std::thread::hardware_concurrency());
    const long n = envWhole("EMBEDSTACK_CPU_THREADS", 1, 1024, hardware < 1 ? 1 : hardware);
    const long long spin = static_cast<long long>(envWhole("EMBEDSTACK_CPU_SPIN_US", 0, 100000, kIdleSpinNs / 1000)) * 1000;
    return new ThreadPool(static_cast<size_t>(n), spin);
  }();
  return *pool;
}

ThreadPool::ThreadPool(size_t threads, long long idleSpinNs)
    : threads_(threads < 1 ? 1 : threads), idleSpinNs_(idleSpinNs < 0 ? 0 : idleSpinNs) {
  for (size_t i = 0; i < threads_; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    work_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {

/** The task a pool thread is running (for its first parallelFor to tell nearEnd), or null. */
thread_local PoolTask* tlsNearEndTask = nullptr;

}  // namespace

ThreadPool::NotTheLastStep::NotTheLastStep() noexcept : saved_(tlsNearEndTask) { tlsNearEndTask = nullptr; }

ThreadPool::NotTheLastStep::~NotTheLastStep() { tlsNearEndTask = saved_; }

void ThreadPool::tellIdle(Job& job) {
  if (job.told.load(std::memory_order_relaxed)) return;
  job.telling.fetch_add(1, std::memory_order_seq_cst);
  if (job.done.load(std::memory_order_seq_cst) < job.n && !job.told.exchange(true, std::memory_order_relaxed)) {
    job.nearEnd->nearEnd();
  }
  job.telling.fetch_sub(1, std::memory_order_seq_cst);
}

bool ThreadPool::claim(Job& job, size_t& begin, size_t& end) {
  if (job.tail == 0) {
    begin = job.next.fetch_add(job.grain, std::memory_order_relaxed);
    if (begin >= job.n) return false;
    end = job.n - begin > job.grain ? begin + job.grain : job.n;
    return true;
  }
  size_t p = job.next.load(std::memory_order_relaxed);
  for (;;) {
    if (p >= job.n) return false;
    size_t size = (job.n - p) / job.spread;
    if (size > job.grain) size = job.grain;
    if (size < job.tail) size = job.tail;
    const size_t e = job.n - p > size ? p + size : job.n;
    if (job.next.compare_exchange_weak(p, e, std::memory_order_relaxed)) {
      begin = p;
      end = e;
      return true;
    }
  }
}

void ThreadPool::runChunks(Job& job) {
  for (;;) {
    size_t begin = 0;
    size_t end = 0;
    if (!claim(job, begin, end)) {
      if (job.nearEnd != nullptr) tellIdle(job);
      return;
    }
    if (!job.failed.load(std::memory_order_relaxed)) {
      try {
        job.fn(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(job.m);
        if (!job.error) job.error = std::current_exception();
        job.failed.store(true, std::memory_order_relaxed);
      }
    }
    if (job.done.fetch_add(end - begin, std::memory_order_seq_cst) + (end - begin) == job.n) {
      std::lock_guard<std::mutex> lock(job.m);
      job.finished.notify_all();
    }
  }
}

void ThreadPool::unqueue(Job* prev, Job* job) {
  (prev != nullptr ? prev->link : queueHead_) = job->link;
  if (queueTail_ == job) queueTail_ = prev;
  job->link = nullptr;
  job->queued = false;
}

ThreadPool::Job* ThreadPool::joinableJob() {
  Job* prev = nullptr;
  for (Job* job = queueHead_; job != nullptr;) {
    Job* const after = job->link;
    if (job->next.load(std::memory_order_relaxed) >= job->n) {
      unqueue(prev, job);  // every chunk taken: the threads running them finish it
    } else if (job->helpers < job->maxHelpers) {
      ++job->helpers;
      return job;
    } else {
      prev = job;
    }
    job = after;
  }
  return nullptr;
}

namespace {

/** Yields (another thread may need this core) until done() or `ns` nanoseconds have passed. */
template <class Done>
void yieldUntil(long long ns, Done&& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

}  // namespace

void ThreadPool::workerLoop() {
  setDefaultFpMode();  // not the mode of the thread that created the pool (fp_mode.h)
  for (;;) {
    Job* job = nullptr;
    PoolTask* task = nullptr;
    bool help = false;
    size_t seen = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        if (stop_) return;
        job = joinableJob();
        if (job) break;
        if (tasksHead_ != nullptr) {
          task = tasksHead_;
          tasksHead_ = task->next_;
          if (tasksHead_ == nullptr) tasksTail_ = nullptr;
          break;
        }
        if (helpersWanted_ > 0) {
          --helpersWanted_;
          help = true;
          seen = jobsQueued_.load(std::memory_order_relaxed);
          helperWaits_.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        // Nothing to do: stay awake a while for the next post (kIdleSpinNs), then sleep. A
        // post during the spin changes work_; one after the check below takes the mutex, so
        // its notify comes after this wait has released it.
        const size_t seen = work_.load(std::memory_order_relaxed);
        if (idleSpinNs_ > 0) {
          lock.unlock();
          yieldUntil(idleSpinNs_, [&] { return work_.load(std::memory_order_acquire) != seen; });
          lock.lock();
          if (work_.load(std::memory_order_relaxed) != seen) continue;
        }
        wake_.wait(lock);
      }
    }
    if (job != nullptr) {
      runChunks(*job);
      job->left.fetch_add(1, std::memory_order_release);  // the job may be gone from here on
    } else if (task) {
      if (task->wantsNearEnd()) tlsNearEndTask = task;
      task->run();  // may delete the task
      tlsNearEndTask = nullptr;
    } else if (help) {
      awaitJob(seen);
    }
  }
}


void ThreadPool::awaitJob(size_t seen) {
  yieldUntil(kHelperWaitNs, [&] { return jobsQueued_.load(std::memory_order_acquire) != seen; });
}

void ThreadPool::post(PoolTask* task, size_t helpers) noexcept {
  task->next_ = nullptr;
  if (helpers > threads_ - 1) helpers = threads_ - 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tasksTail_ != nullptr) {
      tasksTail_->next_ = task;
    } else {
      tasksHead_ = task;
    }
    tasksTail_ = task;
    helpersWanted_ = helpersWanted_ + helpers < threads_ ? helpersWanted_ + helpers : threads_ - 1;
    work_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_one();
  for (size_t i = 0; i < helpers; ++i) wake_.notify_one();
}

void ThreadPool::parallelFor(size_t n, size_t grain, RangeFn fn) {
  if (n == 0) return;
  if (grain < 1) grain = 1;
  if (threads_ <= 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // On this stack: nothing here allocates (a write's loops after its first change rely on it).
  Job job(fn);
  job.n = n;
  job.grain = grain;
  const size_t chunks = (n + grain - 1) / grain;
  job.maxHelpers = threads_ - 1 < chunks - 1 ? threads_ - 1 : chunks - 1;
  if (PoolTask* task = tlsNearEndTask) {
    tlsNearEndTask = nullptr;  // the task's first parallelFor only
    job.nearEnd = task;
    job.tail = grain / 8 > 0 ? grain / 8 : 1;
    job.spread = 2 * threads_;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    (queueTail_ != nullptr ? queueTail_->link : queueHead_) = &job;
    queueTail_ = &job;
    job.queued = true;
    helpersWanted_ = 0;  // helpers still on their way join through the queue
    jobsQueued_.fetch_add(1, std::memory_order_release);
    work_.fetch_add(1, std::memory_order_release);
  }
  for (size_t i = 0; i < job.maxHelpers; ++i) wake_.notify_one();
  runChunks(job);
  // The last chunks are running on helpers: wait for them awake for a while (a sleeping
  // caller is woken tens of microseconds after the last one ends on a VM), then sleep.
  // seq_cst, as tellIdle's `telling` and `done`: a teller that read done < n is then seen below.
  yieldUntil(kHelperWaitNs, [&] { return job.done.load(std::memory_order_seq_cst) == job.n; });
  {
    std::unique_lock<std::mutex> lock(job.m);
    job.finished.wait(lock, [&] { return job.done.load(std::memory_order_seq_cst) == job.n; });
  }
  // No worker joins from here on; wait for those that did to leave it (they have no chunk
  // left, so they leave at once), and then the job can go.
  size_t joined;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (job.queued) {
      Job* prev = nullptr;
      for (Job* j = queueHead_; j != &job; j = j->link) prev = j;
      unqueue(prev, &job);
    }
    joined = job.helpers;
  }
  while (job.left.load(std::memory_order_acquire) != joined) std::this_thread::yield();
  // A thread out of chunks may still be telling the task (it read done < n): the task, and
  // what nearEnd touches, must outlive that.
  while (job.telling.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  if (job.error) std::rethrow_exception(job.error);
}

size_t parallelGrain(size_t n, size_t minGrain) {
  size_t t = ThreadPool::shared().threads();
  size_t g = n / (4 * t) + 1;
  return g < minGrain ? minGrain : g;
}

void forEachRange(size_t n, RangeFn fn, size_t minGrain) {
  if (n < kParallelThreshold) {
    if (n > 0) fn(0, n);
    return;
  }
  ThreadPool::shared().parallelFor(n, parallelGrain(n, minGrain), fn);
}

}  // namespace embedstack
