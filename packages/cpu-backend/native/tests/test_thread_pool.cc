#include <atomic>
#include <numeric>
#include <stdexcept>

#include "test.h"
#include "thread_pool.h"

using namespace embedstack;

TEST(parallel_for_covers_every_index_once) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(100003);
  pool.parallelFor(hits.size(), 97, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
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
