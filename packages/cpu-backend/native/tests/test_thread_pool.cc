#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include <numeric>
#include <stdexcept>

#include "test.h"
#include "thread_pool.h"
#include "waitable_task.h"

using namespace embedstack;

namespace {

/** pool.parallelFor over [0, n) in chunks of `grain` hits every index exactly once. */
void expectEachIndexOnce(ThreadPool& pool, size_t n, size_t grain) {
  std::vector<std::atomic<int>> hits(n);
  pool.parallelFor(hits.size(), grain, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

}  // namespace

TEST(parallel_for_covers_every_index_once) {
  ThreadPool pool(4);
  expectEachIndexOnce(pool, 100003, 97);
}

TEST(pools_that_sleep_at_once_or_spin_long_run_every_chunk_and_task) {
  // idleSpinNs 0: a worker sleeps as soon as it has nothing to do (EMBEDSTACK_CPU_SPIN_US=0);
  // 2 ms: posts and jobs mostly find it awake. Both run every chunk once, and posted tasks.
  for (long long spin : {0LL, 2000000LL}) {
    ThreadPool pool(3, spin);
    for (int rep = 0; rep < 20; ++rep) expectEachIndexOnce(pool, 5003, 13);
    std::atomic<int> ran{0};
    struct Count final : PoolTask {
      std::atomic<int>* ran;
      std::atomic<bool> done{false};
      void run() noexcept override {
        ran->fetch_add(1);
        done = true;
      }
    };
    std::vector<std::unique_ptr<Count>> tasks;
    for (int i = 0; i < 50; ++i) {
      tasks.push_back(std::make_unique<Count>());
      tasks.back()->ran = &ran;
      pool.post(tasks.back().get(), i % 2);
      if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));  // let workers go idle
    }
    for (auto& t : tasks) {
      while (!t->done) std::this_thread::yield();
    }
    EXPECT_EQ(ran.load(), 50);
  }
}

TEST(parallel_for_rethrows_the_first_exception) {
  ThreadPool pool(3);
  bool thrown = false;
  try {
    pool.parallelFor(1000, 10, [&](size_t b, size_t) {
      if (b == 500) throw std::runtime_error("chunk 50");
    });
  } catch (const std::runtime_error& e) {
    thrown = std::string(e.what()) == "chunk 50";
  }
  EXPECT_TRUE(thrown);
}

TEST(concurrent_and_nested_parallel_for_do_not_deadlock) {
  ThreadPool pool(2);
  std::atomic<long> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) {
        pool.parallelFor(64, 4, [&](size_t b, size_t e) {
          pool.parallelFor(e - b, 1, [&](size_t bb, size_t ee) { total.fetch_add(static_cast<long>(ee - bb)); });
        });
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4L * 20 * 64);
}

TEST(single_thread_pool_runs_inline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.threads(), size_t{1});
  size_t sum = 0;
  pool.parallelFor(10, 1, [&](size_t b, size_t e) { sum += e - b; });
  EXPECT_EQ(sum, size_t{10});
}

namespace {

// A posted task that records its run and signals the test thread.
struct CountingTask final : PoolTask {
  std::atomic<int>* runs;
  std::atomic<int>* left;
  std::mutex* m;
  std::condition_variable* cv;
  std::function<void()> body;
  void run() noexcept override {
    if (body) body();
    runs->fetch_add(1);
    std::lock_guard<std::mutex> lock(*m);
    left->fetch_sub(1);
    cv->notify_all();
  }
};

// Counts posted tasks down to zero; wait() returns when every attached task has run.
struct Completion {
  std::atomic<int> runs{0};
  std::atomic<int> left;
  std::mutex m;
  std::condition_variable cv;
  explicit Completion(int tasks) : left(tasks) {}
  void attach(CountingTask& t) {
    t.runs = &runs;
    t.left = &left;
    t.m = &m;
    t.cv = &cv;
  }
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return left.load() == 0; });
  }
};

}  // namespace

TEST(posted_tasks_each_run_once) {
  ThreadPool pool(2);
  std::atomic<int> runs{0}, left{50};
  std::mutex m;
  std::condition_variable cv;
  std::vector<CountingTask> tasks(50);
  for (auto& t : tasks) {
    t.runs = &runs;
    t.left = &left;
    t.m = &m;
    t.cv = &cv;
    pool.post(&t);
  }
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return left.load() == 0; });
  EXPECT_EQ(runs.load(), 50);
}

TEST(a_posted_task_s_parallel_for_is_helped_by_another_worker) {
  // threads = 2: the task's driver and one helper. Each chunk waits until both threads
  // have entered a chunk (or 2 s pass), so a lone driver shows as fewer distinct threads.
  ThreadPool pool(2);
  std::mutex idsMutex;
  std::vector<std::thread::id> ids;
  std::atomic<int> entered{0};
  std::atomic<int> runs{0}, left{1};
  std::mutex m;
  std::condition_variable cv;
  CountingTask t;
  t.runs = &runs;
  t.left = &left;
  t.m = &m;
  t.cv = &cv;
  t.body = [&] {
    pool.parallelFor(8, 1, [&](size_t, size_t) {
      {
        std::lock_guard<std::mutex> lock(idsMutex);
        if (std::find(ids.begin(), ids.end(), std::this_thread::get_id()) == ids.end()) ids.push_back(std::this_thread::get_id());
      }
      entered.fetch_add(1);
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (entered.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
  };
  pool.post(&t);
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return left.load() == 0; });
  EXPECT_EQ(ids.size(), size_t{2});
}

TEST(sync_parallel_for_uses_at_most_threads_callers_and_helpers) {
  // threads = 2: the caller plus one worker, although the pool has two workers.
  ThreadPool pool(2);
  std::mutex idsMutex;
  std::vector<std::thread::id> ids;
  pool.parallelFor(64, 1, [&](size_t, size_t) {
    std::lock_guard<std::mutex> lock(idsMutex);
    if (std::find(ids.begin(), ids.end(), std::this_thread::get_id()) == ids.end()) ids.push_back(std::this_thread::get_id());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  EXPECT_TRUE(ids.size() <= 2);
}

TEST(posted_tasks_and_sync_parallel_for_together_do_not_deadlock) {
  ThreadPool pool(2);
  constexpr int kTasks = 16;
  std::atomic<long> total{0};
  std::atomic<int> runs{0}, left{kTasks};
  std::mutex m;
  std::condition_variable cv;
  std::vector<CountingTask> tasks(kTasks);
  for (auto& t : tasks) {
    t.runs = &runs;
    t.left = &left;
    t.m = &m;
    t.cv = &cv;
    t.body = [&] {
      pool.parallelFor(1000, 7, [&](size_t b, size_t e) { total.fetch_add(static_cast<long>(e - b)); });
    };
    pool.post(&t);
  }
  for (int rep = 0; rep < 20; ++rep) {
    pool.parallelFor(500, 3, [&](size_t b, size_t e) { total.fetch_add(static_cast<long>(e - b)); });
  }
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return left.load() == 0; });
  EXPECT_EQ(total.load(), static_cast<long>(kTasks) * 1000 + 20L * 500);
}

TEST(a_one_thread_pool_still_runs_posted_tasks) {
  ThreadPool pool(1);
  std::atomic<int> runs{0}, left{1};
  std::mutex m;
  std::condition_variable cv;
  CountingTask t;
  t.runs = &runs;
  t.left = &left;
  t.m = &m;
  t.cv = &cv;
  size_t sum = 0;
  t.body = [&] { pool.parallelFor(10, 1, [&](size_t b, size_t e) { sum += e - b; }); };
  pool.post(&t);
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return left.load() == 0; });
  EXPECT_EQ(sum, size_t{10});
}

TEST(a_task_posted_with_a_helper_wakes_it_before_its_parallel_for) {
  // The helper comes with the task: it is awake (waiting for a job) while the task has
  // not split yet, then joins the task's parallelFor, whose sum is exact.
  ThreadPool pool(2);
  Completion done(1);
  CountingTask t;
  done.attach(t);
  bool helperFirst = false;
  std::atomic<long> total{0};
  t.body = [&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (pool.helperWaits() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    helperFirst = pool.helperWaits() == 1;
    pool.parallelFor(1000, 7, [&](size_t b, size_t e) { total.fetch_add(static_cast<long>(e - b)); });
  };
  pool.post(&t, 1);
  done.wait();
  EXPECT_TRUE(helperFirst);
  EXPECT_EQ(total.load(), 1000L);
}

TEST(helpers_of_tasks_that_never_split_leave_the_pool_usable) {
  // Tasks posted with more helpers than the pool has (capped) that never call
  // parallelFor: every task still runs once, each wakes at most its capped helpers, and a
  // later parallelFor still covers every index once.
  ThreadPool pool(3);
  constexpr int kTasks = 40;
  Completion done(kTasks);
  std::vector<CountingTask> tasks(kTasks);
  for (auto& t : tasks) {
    done.attach(t);
    pool.post(&t, 5);
  }
  done.wait();
  EXPECT_EQ(done.runs.load(), kTasks);
  EXPECT_TRUE(pool.helperWaits() <= static_cast<size_t>(kTasks) * 2);
  expectEachIndexOnce(pool, 5000, 10);
}

// The helper is most likely still in its awake wait for a split when the pool is destroyed
// (the task never splits): the destructor must join it, not hang.
TEST(a_pool_destroyed_right_after_a_helped_task_joins) {
  Completion done(1);
  CountingTask t;
  done.attach(t);
  {
    ThreadPool pool(2);
    pool.post(&t, 1);
    done.wait();
  }
  EXPECT_EQ(done.runs.load(), 1);
}

namespace {

// A posted task whose first parallelFor tells nearEnd() (PoolTask::wantsNearEnd): records
// when it was told and the chunks it ran.
struct NearEndTask final : estest::WaitableTask {
  bool wants = true;
  size_t n = 0;
  size_t grain = 1;
  bool secondFor = false;  // run a second parallelFor after the first (not told)
  bool slowFirst = false;  // the chunk holding index 0 takes 100 ms, then throws
  std::vector<std::atomic<int>> hits;
  std::atomic<size_t> itemsDone{0};
  std::atomic<int> told{0};
  std::atomic<size_t> doneWhenTold{0};
  std::atomic<bool> tellingStarted{false};
  std::atomic<bool> tellingEnded{false};
  bool returnedWhileTelling = false;
  std::atomic<size_t> smallest{~size_t{0}};
  std::atomic<size_t> largest{0};
  bool threw = false;

  bool wantsNearEnd() const noexcept override { return wants; }
  void nearEnd() noexcept override {
    doneWhenTold = itemsDone.load();
    tellingStarted = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // parallelFor must wait for this
    tellingEnded = true;
    told.fetch_add(1);
  }
  void run() noexcept override {
    const std::function<void(size_t, size_t)> body = [&](size_t b, size_t e) {
      size_t s = e - b;
      for (size_t v = smallest.load(); s < v && !smallest.compare_exchange_weak(v, s);) {
      }
      for (size_t v = largest.load(); s > v && !largest.compare_exchange_weak(v, s);) {
      }
      for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
      // Some work per chunk, and uneven: threads run out of chunks at different times.
      volatile size_t sink = 0;
      for (size_t i = 0; i < (b % 3 + 1) * 30 * s; ++i) sink = sink + i;
      if (slowFirst && b == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      itemsDone.fetch_add(s);
      if (slowFirst && b == 0) throw std::runtime_error("first chunk");
    };
    try {
      pool->parallelFor(n, grain, body);
      returnedWhileTelling = tellingStarted && !tellingEnded;
      if (secondFor) pool->parallelFor(n, grain, [](size_t, size_t) {});
    } catch (const std::runtime_error&) {
      threw = true;
    }
    finish();
  }
  ThreadPool* pool = nullptr;
  explicit NearEndTask(size_t items) : n(items), hits(items) {}
};

}  // namespace

TEST(a_task_is_told_at_most_once_before_its_parallel_for_ends_and_every_index_runs_once) {
  // Grains that give one chunk (inline: never told) and many; 1 to 4 threads; with and
  // without helpers woken with the task. Told at most once (never if every chunk ended
  // before a thread ran out), and only while the job still ran.
  for (size_t threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 3; ++rep) {
      for (size_t grain : {size_t{1}, size_t{97}, size_t{4096}, size_t{100000}}) {
        for (bool helpers : {false, true}) {
          NearEndTask t(20011);
          t.pool = &pool;
          t.grain = grain;
          t.secondFor = true;
          pool.post(&t, helpers ? threads - 1 : 0);
          t.wait();
          for (auto& h : t.hits) EXPECT_EQ(h.load(), 1);
          const bool splits = threads > 1 && t.n > grain;
          EXPECT_TRUE(t.told.load() <= (splits ? 1 : 0));  // for the first parallelFor only
          if (splits) {
            EXPECT_TRUE(!t.returnedWhileTelling);  // the job had not ended
            EXPECT_TRUE(t.largest.load() <= grain);
            if (grain >= 32) EXPECT_TRUE(t.smallest.load() < grain);  // the tail is finer
          }
          EXPECT_TRUE(!t.threw);
        }
      }
    }
  }
}

TEST(a_task_is_told_while_a_slow_chunk_runs_and_its_error_still_comes_back) {
  // The driver's first chunk is slow (and throws): the helper runs every other chunk and
  // then finds none left, so the task is told, with that chunk still running.
  ThreadPool pool(2);
  NearEndTask t(5000);
  t.pool = &pool;
  t.grain = 64;
  t.slowFirst = true;
  pool.post(&t, 1);
  t.wait();
  EXPECT_TRUE(t.threw);
  EXPECT_EQ(t.told.load(), 1);
  EXPECT_TRUE(t.doneWhenTold.load() < t.n);
  for (auto& h : t.hits) EXPECT_EQ(h.load(), 1);
}

TEST(parallel_for_outside_a_told_task_keeps_its_chunks) {
  // No task, or a task that does not want nearEnd: chunks of exactly `grain` (the last one shorter).
  ThreadPool pool(3);
  std::mutex m;
  std::vector<std::pair<size_t, size_t>> chunks;
  pool.parallelFor(1000, 64, [&](size_t b, size_t e) {
    std::lock_guard<std::mutex> lock(m);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  EXPECT_EQ(chunks.size(), size_t{16});
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].first, i * 64);
    EXPECT_EQ(chunks[i].second, std::min<size_t>(1000, i * 64 + 64));
  }
  NearEndTask t(3000);
  t.pool = &pool;
  t.wants = false;
  t.grain = 100;
  pool.post(&t, 2);
  t.wait();
  EXPECT_EQ(t.told.load(), 0);
  EXPECT_EQ(t.smallest.load(), size_t{100});
  EXPECT_EQ(t.largest.load(), size_t{100});
}
