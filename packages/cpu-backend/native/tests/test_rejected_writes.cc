// A rejected call changes nothing (fix38, stop 38):
//  - F6: applyCombinedGradients with maxNorm clipping on a dynamic table read its rows with a
//    scored find before the step, so a step then rejected (here: its arena growth out of memory)
//    left read scores and the clock changed. Its read now runs inside the step, after everything
//    that can fail; a successful call scores exactly as find then applyGradients (core's reference).
//  - N1: an index rebuild that succeeded followed by an arena growth that failed left the index
//    rebuilt (memoryUsage() changed); the fresh index is now published only with the growth.
//  - F3: a write that widened its key/score records (12 -> 16 bytes) and then ran out of memory
//    left them wide; the widening is now published with the growth.
//  - a write rejected after its clock was taken (growth out of memory) left the clock advanced.
// The memory failures come from RLIMIT_AS (not under ASan: its shadow memory needs it).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#endif

#include "planned_ops.h"
#include "table_helpers.h"
#include "test.h"
#include "thread_pool.h"

using namespace embedstack;
using estest::dynamicConfig;
using estest::snapshot;

namespace {

OptimizerParams sgd(double lr) {
  OptimizerParams p;
  p.kind = OptimizerKind::kSgd;
  p.lr = lr;
  return p;
}

}  // namespace

// Scores after a successful clipped step, by hand. lru: upsert {1, 2} takes clock 1; the step's
// read takes clock 2 and its write clock 3, so key 1 (read, then written) and key 3 (inserted)
// score 3, key 2 keeps 1; the next upsert of key 2 takes clock 4. lfu: upsert {1, 2} counts 1
// each; the step's bag [1, 1, 3] reads key 1 twice (3) and writes it twice (5), key 3 once (1).
TEST(a_clipped_combined_step_scores_as_find_then_apply_gradients) {
  for (ScorePolicy policy : {ScorePolicy::kLru, ScorePolicy::kLfu}) {
    auto t = createTable(dynamicConfig(2, 16, SIZE_MAX, policy));
    const int64_t keys[] = {1, 2};
    const float values[] = {3, 4, 0.5f, 0.5f};
    t->upsert(keys, 2, values, nullptr);
    const int32_t splits[] = {0, 3};
    const int64_t bagKeys[] = {1, 1, 3};
    const BagInput bag{splits, 1, bagKeys, 3, nullptr};
    const float grads[] = {1, 1};
    applyCombinedGradients(*t, bag, grads, Combiner::kSum, 1.0, ShardPlan{}, sgd(0.5));
    auto s = snapshot(*t);
    if (policy == ScorePolicy::kLru) {
      EXPECT_EQ(s.scores.at(1), uint64_t{3});
      EXPECT_EQ(s.scores.at(2), uint64_t{1});
      EXPECT_EQ(s.scores.at(3), uint64_t{3});
      t->upsert(keys + 1, 1, values + 2, nullptr);
      EXPECT_EQ(snapshot(*t).scores.at(2), uint64_t{4});
    } else {
      EXPECT_EQ(s.scores.at(1), uint64_t{5});
      EXPECT_EQ(s.scores.at(2), uint64_t{1});
      EXPECT_EQ(s.scores.at(3), uint64_t{1});
    }
    // Key 1's row e = (3, 4) (read before the step) has norm 5 > 1: each of its two entries'
    // gradients is (1 / 5) * (dy - e (e . dy) / 25) with dy = (1, 1), e . dy = 7: (0.032, -0.024);
    // summed (0.064, -0.048), times lr 0.5 off the row: (2.968, 4.024).
    EXPECT_TRUE(std::fabs(s.values.at(1)[0] - 2.968f) < 1e-5f);
    EXPECT_TRUE(std::fabs(s.values.at(1)[1] - 4.024f) < 1e-5f);
  }
}

// Every read policy (and frequency, which scores on write only), duplicates, a capped table
// that evicts, all keys or one shard: the clipped step ends with the values, scores and the
// clock (the next upsert's epoch/lru score) of lookupCombinedBackward (its scored find) then
// applyGradients of the owned entries on a twin table.
TEST(a_clipped_combined_step_ends_as_the_unfused_read_then_step_for_every_policy) {
  const size_t dim = 3;
  const int32_t splits[] = {0, 3, 3, 7, 9};
  const int64_t bagKeys[] = {4, 7, 4, 11, 4, 20, 7, 22, 13};
  const BagInput bag{splits, 4, bagKeys, 9, nullptr};
  std::vector<float> grads(4 * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(static_cast<int64_t>(i * 5 % 7) - 3) / 2.0f;
  for (ScorePolicy policy : {ScorePolicy::kLru, ScorePolicy::kLfu, ScorePolicy::kEpochLru, ScorePolicy::kEpochLfu,
                             ScorePolicy::kFrequency}) {
    for (bool capped : {false, true}) {
      for (bool sharded : {false, true}) {
        TableConfig c = dynamicConfig(dim, 4, capped ? 6 : SIZE_MAX, policy);
        auto fused = createTable(c);
        auto twin = createTable(c);
        const int64_t resident[] = {4, 7, 1, 2, 3};
        std::vector<float> v(5 * dim);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 5) + 0.25f;
        for (Table* t : {fused.get(), twin.get()}) {
          t->upsert(resident, 5, v.data(), nullptr);
          t->setEpoch(3);
          t->upsert(resident + 2, 1, v.data(), nullptr);  // key 1 scores higher than 2 and 3
        }
        ShardPlan plan;
        if (sharded) {
          plan.kind = ShardPlan::kMod;
          plan.numShards = 2;
          plan.shard = 0;
        }
        for (int step = 0; step < 2; ++step) {
          applyCombinedGradients(*fused, bag, grads.data(), Combiner::kMean, 1.5, plan, sgd(0.25));
          std::vector<float> perEntry(bag.n * dim, 0.0f);
          lookupCombinedBackward(*twin, bag, grads.data(), Combiner::kMean, 1.5, plan, perEntry.data());
          std::vector<int64_t> local;
          std::vector<float> owned;
          for (size_t j = 0; j < bag.n; ++j) {
            int64_t l = 0;
            if (!plan.owns(bag.keys[j], &l)) continue;
            local.push_back(l);
            owned.insert(owned.end(), perEntry.begin() + j * dim, perEntry.begin() + (j + 1) * dim);
          }
          twin->applyGradients(local.data(), local.size(), owned.data(), sgd(0.25));
        }
        const int64_t probe[] = {2};
        for (Table* t : {fused.get(), twin.get()}) t->upsert(probe, 1, v.data(), nullptr);
        const auto a = snapshot(*fused);
        const auto b = snapshot(*twin);
        EXPECT_TRUE(a.values == b.values);
        EXPECT_TRUE(a.scores == b.scores);
        if (a.scores != b.scores) {
          std::printf("  policy %d capped %d sharded %d\n", static_cast<int>(policy), capped, sharded);
          for (const auto& [k, s] : b.scores) {
            std::printf("    key %lld want %llu got %llu\n", static_cast<long long>(k),
                        static_cast<unsigned long long>(s),
                        static_cast<unsigned long long>(a.scores.count(k) ? a.scores.at(k) : 0));
          }
        }
      }
    }
  }
}

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
namespace {

/** The process's address space now (VmSize), in bytes; 0 if unknown. */
size_t addressSpaceBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  }
  return 0;
}

/** Runs f with the address space limited to `room` bytes more than the process holds; whether f threw. */
template <class F>
bool throwsWithRoom(size_t room, F&& f) {
  ThreadPool::shared();  // its threads started before the limit
  const size_t vm = addressSpaceBytes();
  if (vm == 0) return false;
  rlimit old{};
  if (getrlimit(RLIMIT_AS, &old) != 0) return false;
  rlimit tight = old;
  tight.rlim_cur = vm + room;
  if (setrlimit(RLIMIT_AS, &tight) != 0) return false;
  bool threw = false;
  try {
    f();
  } catch (const std::exception& e) {
    threw = true;
    std::printf("  (rejected: %s)\n", e.what());
  } catch (...) {
    threw = true;
  }
  setrlimit(RLIMIT_AS, &old);
  return threw;
}

constexpr size_t kWideDim = 4096;  // float32 rows of 16 KiB: 1024 rows are a 16 MiB arena
constexpr size_t kResident = 1024;

/** An lru table of kResident rows at capacity kResident (keys 0..1023), so one more key grows the arena to 32 MiB. */
std::shared_ptr<Table> fullTable(ScorePolicy policy = ScorePolicy::kLru) {
  auto t = createTable(dynamicConfig(kWideDim, kResident, SIZE_MAX, policy));
  std::vector<int64_t> keys(kResident);
  for (size_t k = 0; k < kResident; ++k) keys[k] = static_cast<int64_t>(k);
  std::vector<float> values(kResident * kWideDim, 0.5f);
  values[3] = 3.0f;  // key 0's row has norm > 1 (clipped)
  t->upsert(keys.data(), kResident, values.data(), nullptr);  // clock 1
  return t;
}

}  // namespace

// F6: the clipped step's arena growth fails (8 MiB of room, 16 MiB needed): rejected, and
// every score, value and the clock are as before (the next upsert takes clock 2). Before the
// fix the step's read had scored keys 0 and 5 with clock 2 and spent it.
TEST(a_clipped_combined_step_rejected_for_memory_changes_no_score_and_no_clock) {
  auto t = fullTable();
  const auto before = snapshot(*t);
  const size_t memory = t->memoryUsage();
  const int32_t splits[] = {0, 2, 3};
  const int64_t bagKeys[] = {0, 5, 5000};  // 5000 is new: the arena must grow
  const BagInput bag{splits, 2, bagKeys, 3, nullptr};
  std::vector<float> grads(2 * kWideDim, 0.125f);
  const bool threw = throwsWithRoom(size_t{8} << 20, [&] {
    applyCombinedGradients(*t, bag, grads.data(), Combiner::kSum, 1.0, ShardPlan{}, sgd(0.5));
  });
  EXPECT_TRUE(threw);
  EXPECT_EQ(t->size(), kResident);
  EXPECT_EQ(t->memoryUsage(), memory);
  const auto after = snapshot(*t);
  EXPECT_TRUE(after.scores == before.scores);
  EXPECT_TRUE(after.values == before.values);
  const int64_t probe[] = {7};
  std::vector<float> row(kWideDim, 1.0f);
  t->upsert(probe, 1, row.data(), nullptr);
  EXPECT_EQ(snapshot(*t).scores.at(7), uint64_t{2});
}

// N1 + the clock: an upsert of 1024 new keys needs a fresh index (the presized one holds about
// 1024 keys) and the arena doubled; the index builds, the arena cannot grow. Rejected with the
// index, memoryUsage() and the clock as before.
TEST(a_write_whose_arena_cannot_grow_after_its_index_rebuilt_changes_nothing) {
  auto t = fullTable();
  auto* d = dynamic_cast<DynamicTable*>(t.get());
  ASSERT_TRUE(d != nullptr);
  const size_t groups = d->indexGroups();
  const size_t memory = t->memoryUsage();
  const auto before = snapshot(*t);
  std::vector<int64_t> fresh(kResident);
  for (size_t k = 0; k < kResident; ++k) fresh[k] = static_cast<int64_t>(kResident + k);
  std::vector<float> values(kResident * kWideDim, 2.0f);
  const bool threw = throwsWithRoom(size_t{8} << 20, [&] { t->upsert(fresh.data(), kResident, values.data(), nullptr); });
  EXPECT_TRUE(threw);
  EXPECT_EQ(d->indexGroups(), groups);
  EXPECT_EQ(t->memoryUsage(), memory);
  EXPECT_EQ(t->size(), kResident);
  EXPECT_TRUE(snapshot(*t).scores == before.scores);
  const int64_t probe[] = {7};
  t->upsert(probe, 1, values.data(), nullptr);
  EXPECT_EQ(snapshot(*t).scores.at(7), uint64_t{2});
  // With memory the same upsert goes through (the rebuild really was needed).
  t->upsert(fresh.data(), kResident, values.data(), nullptr);
  EXPECT_EQ(t->size(), 2 * kResident);
  EXPECT_TRUE(d->indexGroups() > groups);
}

// F3: an lru table whose next clock is 2^32 must widen its records (12 -> 16 bytes, 12 KiB ->
// 16 KiB: room enough) for a write that also grows its arena (no room): rejected, the records
// still narrow, memoryUsage() and the clock as before (the next write scores 2^32).
TEST(a_write_that_must_widen_and_cannot_grow_leaves_the_records_narrow) {
  auto t = fullTable();
  auto* d = dynamic_cast<DynamicTable*>(t.get());
  ASSERT_TRUE(d != nullptr);
  d->setClockForTests(kLow32);
  ASSERT_TRUE(d->narrowScores());
  const size_t memory = t->memoryUsage();
  const auto before = snapshot(*t);
  const int64_t fresh[] = {5000};
  std::vector<float> row(kWideDim, 1.0f);
  const bool threw = throwsWithRoom(size_t{8} << 20, [&] { t->upsert(fresh, 1, row.data(), nullptr); });
  EXPECT_TRUE(threw);
  EXPECT_TRUE(d->narrowScores());
  EXPECT_EQ(t->memoryUsage(), memory);
  EXPECT_TRUE(snapshot(*t).scores == before.scores);
  const int64_t probe[] = {7};
  t->upsert(probe, 1, row.data(), nullptr);
  EXPECT_TRUE(!d->narrowScores());
  EXPECT_EQ(snapshot(*t).scores.at(7), uint64_t{1} << 32);
}
#endif
