// Which parallelFor of a posted task tells its nearEnd(): the last step's, not a step before it
// (ThreadPool::NotTheLastStep). An async static find checks its keys in a parallelFor before
// copying rows; the JS thread woken during the check would wait out the whole copy (review30b).
#include <atomic>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "table.h"
#include "test.h"
#include "thread_pool.h"
#include "waitable_task.h"

using namespace embedstack;

namespace {

/**
 * Two parallelFor steps, the first under NotTheLastStep when `guarded`; in each, the chunk at 0
 * (the driver's first) holds its thread until the helper has run out of chunks, so whichever
 * step holds the task's tell tells it then. It waits for the tell itself where one is due (up
 * to 10 s), and where none is due (the guarded first step) for every other chunk to be done and
 * then 20 ms: a fixed sleep alone failed on a loaded machine, whose helper thread was not
 * scheduled within it.
 */
struct TwoSteps final : estest::WaitableTask {
  ThreadPool* pool = nullptr;
  bool guarded = true;
  std::atomic<int> step{0};
  std::atomic<int> told{0};
  std::atomic<int> toldIn{0};
  bool wantsNearEnd() const noexcept override { return true; }
  void nearEnd() noexcept override {
    toldIn = step.load();
    told.fetch_add(1);
  }
  void run() noexcept override {
    std::atomic<size_t> done{0};
    const std::function<void(size_t, size_t)> slowFirst = [&](size_t b, size_t e) {
      if (b != 0) {
        done.fetch_add(e - b);
        return;
      }
      using Clock = std::chrono::steady_clock;
      const auto start = Clock::now();
      const bool tellDue = !(guarded && step.load() == 1);
      auto othersDoneAt = Clock::time_point::max();
      while (told.load() == 0 && Clock::now() - start < std::chrono::seconds(10)) {
        if (!tellDue) {
          if (othersDoneAt == Clock::time_point::max() && done.load() == 1000 - e) othersDoneAt = Clock::now();
          if (Clock::now() - othersDoneAt > std::chrono::milliseconds(20)) break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      done.fetch_add(e - b);
    };
    step = 1;
    if (guarded) {
      const ThreadPool::NotTheLastStep notLast;
      pool->parallelFor(1000, 10, slowFirst);
    } else {
      pool->parallelFor(1000, 10, slowFirst);
    }
    step = 2;
    done = 0;
    pool->parallelFor(1000, 10, slowFirst);
    finish();
  }
};

/** A static table's findInto as an async find runs it; when told, counts the rows copied so far. */
struct StaticFind final : estest::WaitableTask {
  Table* table = nullptr;
  const std::vector<int64_t>* keys = nullptr;
  float* out = nullptr;  // keys->size() rows
  std::vector<uint8_t> exists;
  std::atomic<int> told{0};
  std::atomic<size_t> copiedWhenTold{0};
  bool wantsNearEnd() const noexcept override { return true; }
  void nearEnd() noexcept override {
    size_t c = 0;  // exists[] starts at 0 and the copy sets it: a racy count, enough here
    for (size_t i = 0; i < exists.size(); ++i) c += reinterpret_cast<volatile uint8_t*>(exists.data())[i];
    copiedWhenTold = c;
    told.fetch_add(1);
  }
  void run() noexcept override {
    try {
      table->findInto(keys->data(), keys->size(), out, exists.data());
    } catch (...) {
    }
    finish();
  }
};

}  // namespace

TEST(a_step_before_the_last_leaves_the_tell_to_the_last_parallel_for) {
  ThreadPool pool(2);
  for (const bool guarded : {true, false}) {
    TwoSteps t;
    t.pool = &pool;
    t.guarded = guarded;
    pool.post(&t, 1);
    t.wait();
    EXPECT_EQ(t.told.load(), 1);
    EXPECT_EQ(t.toldIn.load(), guarded ? 2 : 1);  // unguarded, the first parallelFor takes it
  }
}

TEST(an_async_static_find_is_told_during_its_row_copy_never_during_its_key_check) {
  // Over 64K keys the key check is a parallelFor of its own (minimum grain 1 << 16).
  TableConfig c;
  c.isStatic = true;
  c.vocabularySize = 300000;
  c.dim = 64;
  auto t = createTable(c);
  ThreadPool& pool = ThreadPool::shared();
  if (pool.threads() < 2) {
    std::fprintf(stderr, "  (skipped: the shared pool has one thread, so nothing is split)\n");
    return;
  }
  size_t early = 0;
  size_t toldRuns = 0;
  // The keys and the output rows (51 MB, never checked: only exists is) are the same for the 40
  // runs: allocated once, not zeroed again per run (in the -O0 sanitizer build, that zeroing and
  // its page faults were most of this case's time). exists starts at 0 in every run.
  std::vector<int64_t> keys(200000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<int64_t>((i * 7919) % 300000);
  std::vector<float> out(keys.size() * 64);
  for (int run = 0; run < 40; ++run) {
    StaticFind f;
    f.table = t.get();
    f.keys = &keys;
    f.out = out.data();
    f.exists.assign(keys.size(), 0);
    pool.post(&f, pool.threads() - 1);
    f.wait();
    if (f.told.load() > 0) ++toldRuns;
    if (f.told.load() > 0 && f.copiedWhenTold.load() == 0) ++early;
    EXPECT_TRUE(f.told.load() <= 1);
    // every key found (a raw loop: -O0 calls a function per iterator step)
    const uint8_t* const e = f.exists.data();
    size_t notFound = 0;
    for (size_t i = 0; i < keys.size(); ++i) notFound += e[i] != 1;
    ASSERT_TRUE(notFound == 0);
  }
  std::fprintf(stderr, "  (told in %zu of 40 runs, %zu of them before any row was copied)\n", toldRuns, early);
  EXPECT_EQ(early, size_t{0});
}
