// A small fork-join pool for large batches, which also runs the addon's async ops.
//  - parallelFor: the calling thread works on its own job too, helped by at most
//    threads() - 1 workers, and only waits for chunks other threads already started,
//    so nested or concurrent parallelFor calls cannot deadlock.
//  - post: runs a task (an async op) on a worker; the task's own parallelFor calls
//    are then helped by the other workers, so an async op splits over the same
//    number of threads as a sync one, without a libuv thread in between. A task that
//    will split can bring its helpers along: they are woken with it (not after it has
//    started and split) and wait briefly for its parallelFor, so their wake-ups overlap.
// Workers: threads() (one more than a sync call's helpers, so a posted task has a
// driver and threads() - 1 helpers). Size: EMBEDSTACK_CPU_THREADS, else
// std::thread::hardware_concurrency().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace embedstack {

/** Batches at least this long are split across the pool (reads and parallel parts of writes). */
constexpr size_t kParallelThreshold = 16384;

/**
 * A callable fn(begin, end) for parallelFor / forEachRange, by reference: making one from a
 * lambda allocates nothing (a std::function of a lambda capturing more than two references
 * allocates), so a write's loops after its first change cannot fail for memory. It refers to
 * the callable it was made from, which must outlive it: use it only as a parameter type (a
 * call's argument lives to the end of the call); `RangeFn f = [&](size_t, size_t) {...};` as a
 * local would refer to a lambda gone at the end of that statement.
 */
class RangeFn {
 public:
  template <class F, class = std::enable_if_t<!std::is_same<std::decay_t<F>, RangeFn>::value>>
  RangeFn(F&& f) noexcept  // NOLINT(google-explicit-constructor): lambdas convert, as to std::function
      : callable_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* c, size_t b, size_t e) { (*static_cast<std::remove_reference_t<F>*>(c))(b, e); }) {}
  void operator()(size_t begin, size_t end) const { call_(callable_, begin, end); }

 private:
  void* callable_;
  void (*call_)(void*, size_t, size_t);
};

/**
 * Work for ThreadPool::post, owned by whoever posts it (the pool allocates nothing per
 * task: the queue is intrusive). run() must not throw; it may delete the task.
 */
class PoolTask {
 public:
  virtual ~PoolTask() = default;
  virtual void run() noexcept = 0;

  /**
   * True: the first parallelFor that run() calls on its own thread tells nearEnd() once, when
   * a thread of it finds no chunk left while others still run theirs (ThreadPool::parallelFor).
   */
  virtual bool wantsNearEnd() const noexcept { return false; }
  /**
   * Called at most once per run, on a pool thread, while that parallelFor still runs (it
   * returns only after this call does, so run() has not ended either). Must not throw or block.
   */
  virtual void nearEnd() noexcept {}

 private:
  friend class ThreadPool;
  PoolTask* next_ = nullptr;
};

class ThreadPool {
 public:
  /** The process-wide pool (created on first use, never destroyed: threads end with the process). */
  static ThreadPool& shared();

  /**
   * `threads` (>= 1) threads share a parallelFor: the caller and threads - 1 workers. An idle
   * worker stays awake `idleSpinNs` (>= 0) before it sleeps (kIdleSpinNs).
   */
  explicit ThreadPool(size_t threads, long long idleSpinNs = kIdleSpinNs);
  /** Joins the workers; tasks still queued are not run. */
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t threads() const { return threads_; }
  /** How long an idle worker stays awake before it sleeps, in nanoseconds. */
  long long idleSpinNs() const { return idleSpinNs_; }

  /** Times a worker woken by post(task, helpers) started waiting for the task's parallelFor (a count, for tests). */
  size_t helperWaits() const { return helperWaits_.load(std::memory_order_relaxed); }

  /**
   * Runs fn(begin, end) over [0, n) in chunks of `grain` (>= 1) on the caller and up to
   * threads() - 1 workers; returns when every chunk is done. Rethrows the first exception
   * a chunk threw. Allocates nothing: the job lives on the caller's stack, in an intrusive
   * queue, and the caller returns only once every worker that joined it has left it.
   *
   * Called by a posted task whose wantsNearEnd() is true (its first parallelFor only), the
   * chunks shrink towards the end (each at most `grain`, about a 2 * threads()-th of what is
   * left, at least grain / 8), and the first thread that finds no chunk left while other
   * threads still run theirs calls the task's nearEnd() (once; that thread is idle from then
   * on, so what nearEnd() wakes can take its core). An async op uses it to wake the JS thread
   * while the last chunks still run, so that wake overlaps them.
   */
  void parallelFor(size_t n, size_t grain, RangeFn fn);

  /**
   * While one lives, the calling thread's parallelFor calls leave its task's nearEnd() to a
   * later parallelFor: a step before a task's last one (a static find's key check before its
   * row copy) must not wake the JS thread for the whole copy still to come.
   */
  class NotTheLastStep {
   public:
    NotTheLastStep() noexcept;
    ~NotTheLastStep();
    NotTheLastStep(const NotTheLastStep&) = delete;
    NotTheLastStep& operator=(const NotTheLastStep&) = delete;

   private:
    PoolTask* saved_;
  };

  /**
   * Queues `task` to run once on a worker (FIFO; workers help running parallelFor jobs
   * first). `helpers` (capped at threads() - 1) more workers are woken with it for a task
   * that will call parallelFor soon after it starts: each waits up to kHelperWaitNs for a
   * job to join (yielding its core), then sleeps again.
   */
  void post(PoolTask* task, size_t helpers = 0) noexcept;

  /**
   * How long a helper woken by post waits awake for the task's parallelFor, and a
   * parallelFor caller for the chunks still running on helpers, before sleeping.
   */
  static constexpr long long kHelperWaitNs = 50000;

  /**
   * How long a worker with nothing to do stays awake (yielding its core) before it sleeps, so
   * that the next call of a caller issuing calls back to back finds it awake. On a VM whose
   * idle vCPUs halt, a sleeping worker is woken tens to hundreds of microseconds late, and a
   * call split over two workers pays it twice. (OpenMP runtimes spin similarly before
   * sleeping: GNU's GOMP_SPINCOUNT, Intel's KMP_BLOCKTIME.) The shared pool takes
   * EMBEDSTACK_CPU_SPIN_US (microseconds, 0 to 100000; 0: sleep at once) when it is set.
   */
  static constexpr long long kIdleSpinNs = 200000;

 private:
  struct Job;
  void workerLoop();
  /** Under mutex_: a job a worker may help (and joins it), after dropping exhausted ones. */
  Job* joinableJob();
  /** Under mutex_: takes `job` (after `prev`, or first when null) out of the queue. */
  void unqueue(Job* prev, Job* job);
  static void runChunks(Job& job);
  /** Claims the next chunk [begin, end) of job; false when none is left. */
  static bool claim(Job& job, size_t& begin, size_t& end);
  /** A thread that found no chunk left: calls the job's nearEnd once if the job is still running. */
  static void tellIdle(Job& job);
  /** A worker woken by post(task, helpers): yields until a job is queued after `seen`, at most kHelperWaitNs. */
  void awaitJob(size_t seen);

  size_t threads_;
  long long idleSpinNs_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  Job* queueHead_ = nullptr;  // parallelFor jobs workers may join, oldest first (Job::link; guarded by mutex_)
  Job* queueTail_ = nullptr;
  PoolTask* tasksHead_ = nullptr;
  PoolTask* tasksTail_ = nullptr;
  /** Workers post() woke to help its task's coming parallelFor, not yet claimed (guarded by mutex_). */
  size_t helpersWanted_ = 0;
  /** parallelFor jobs queued so far (written under mutex_; waiting helpers poll it). */
  std::atomic<size_t> jobsQueued_{0};
  /** Tasks, jobs and stops posted so far (written under mutex_; idle workers poll it before sleeping). */
  std::atomic<size_t> work_{0};
  std::atomic<size_t> helperWaits_{0};
  bool stop_ = false;
};

/** Grain for splitting `n` items over the shared pool: ~4 chunks per thread, at least `minGrain`. */
size_t parallelGrain(size_t n, size_t minGrain);

/** parallelFor on the shared pool when n >= kParallelThreshold, else inline. Allocates nothing. */
void forEachRange(size_t n, RangeFn fn, size_t minGrain = 2048);

}  // namespace embedstack
