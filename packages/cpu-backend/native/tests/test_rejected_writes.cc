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
//  - R1 (rev38, fixed stop 39): a step allocated its per-key loop's row buffers (and, on float16 /
//    bfloat16 storage, insertRow its widened row) after rows had been inserted and the read had
//    scored rows; every allocation of a dynamic write now comes before its first change.
// The memory failures come from RLIMIT_AS (not under ASan: its shadow memory needs it).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#if defined(__linux__)
#include <malloc.h>
#include <sys/resource.h>
#endif

#include "dedupe.h"
#include "planned_ops.h"
#include "table_helpers.h"
#include "test.h"
#include "thread_pool.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;
using estest::snapshot;
using estest::unfusedStep;

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
// that evicts, all keys or one shard, float32 and bfloat16 storage (the read widens, insertRow
// fills through its row buffer): the clipped step ends with the values, scores and the clock
// (the next upsert's epoch/lru score) of lookupCombinedBackward (its scored find) then
// applyGradients of the owned entries on a twin table.
TEST(a_clipped_combined_step_ends_as_the_unfused_read_then_step_for_every_policy) {
  const size_t dim = 3;
  const int32_t splits[] = {0, 3, 3, 7, 9};
  const int64_t bagKeys[] = {4, 7, 4, 11, 4, 20, 7, 22, 13};
  const BagInput bag{splits, 4, bagKeys, 9, nullptr};
  std::vector<float> grads(4 * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(static_cast<int64_t>(i * 5 % 7) - 3) / 2.0f;
  for (StorageDtype storage : {StorageDtype::kFloat32, StorageDtype::kBfloat16}) {
  for (ScorePolicy policy : {ScorePolicy::kLru, ScorePolicy::kLfu, ScorePolicy::kEpochLru, ScorePolicy::kEpochLfu,
                             ScorePolicy::kFrequency}) {
    for (bool capped : {false, true}) {
      for (bool sharded : {false, true}) {
        TableConfig c = dynamicConfig(dim, 4, capped ? 6 : SIZE_MAX, policy);
        c.storage = storage;
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
          unfusedStep(*twin, bag, grads.data(), Combiner::kMean, 1.5, plan, sgd(0.25));
        }
        const int64_t probe[] = {2};
        for (Table* t : {fused.get(), twin.get()}) t->upsert(probe, 1, v.data(), nullptr);
        const auto a = snapshot(*fused);
        const auto b = snapshot(*twin);
        EXPECT_TRUE(a.values == b.values);
        EXPECT_TRUE(a.scores == b.scores);
        if (a.scores != b.scores) {
          std::printf("  storage %d policy %d capped %d sharded %d\n", static_cast<int>(storage), static_cast<int>(policy),
                      capped, sharded);
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
}

// Batches past kParallelThreshold in entries AND distinct keys, so that every loop of the step
// splits over the pool: the clipped step's read (rows, read scores), the update loop (its row
// buffers one set per thread), the scores. lfu (reads count), hot keys repeated, resident and
// new keys, float32 and bfloat16, clipped and not: the same rows and scores as the unfused read
// then step on a twin. And applyGradients with a quarter of its entries repeats (the in-order
// sums, updateFromSums over the pool) against a twin given each key's gradients summed here, in
// order, in float (one distinct key each: the key-by-key loop).
TEST(steps_over_the_pool_end_as_their_unfused_definitions) {
  const size_t dim = 5;
  const size_t rows = 5000;
  estest::Draw draw{39};
  std::vector<int32_t> splits{0};
  std::vector<int64_t> bagKeys;
  for (size_t r = 0; r < rows; ++r) {
    const size_t len = 4 + draw.below(9);
    for (size_t k = 0; k < len; ++k) {
      bagKeys.push_back(static_cast<int64_t>(draw.below(8) == 0 ? draw.below(16) : draw.below(60000)));  // 1 in 8 hot
    }
    splits.push_back(static_cast<int32_t>(bagKeys.size()));
  }
  const std::set<int64_t> distinct(bagKeys.begin(), bagKeys.end());
  ASSERT_TRUE(distinct.size() >= kParallelThreshold);
  ASSERT_TRUE(distinct.size() < bagKeys.size());
  const BagInput bag{splits.data(), rows, bagKeys.data(), bagKeys.size(), nullptr};
  std::vector<float> grads(rows * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(draw.unit()) - 0.5f;
  std::vector<int64_t> resident(30000);
  for (size_t k = 0; k < resident.size(); ++k) resident[k] = static_cast<int64_t>(2 * k);  // the even keys below 60000
  std::vector<float> v(resident.size() * dim);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(draw.unit()) * 2.0f - 1.0f;
  for (StorageDtype storage : {StorageDtype::kFloat32, StorageDtype::kBfloat16}) {
    for (double maxNorm : {0.75, 0.0}) {
      TableConfig c = dynamicConfig(dim, 64, SIZE_MAX, ScorePolicy::kLfu);
      c.storage = storage;
      auto fused = createTable(c);
      auto twin = createTable(c);
      for (Table* t : {fused.get(), twin.get()}) t->upsert(resident.data(), resident.size(), v.data(), nullptr);
      for (int step = 0; step < 2; ++step) {
        applyCombinedGradients(*fused, bag, grads.data(), Combiner::kSum, maxNorm, ShardPlan{}, sgd(0.25));
        unfusedStep(*twin, bag, grads.data(), Combiner::kSum, maxNorm, ShardPlan{}, sgd(0.25));
      }
      const auto a = snapshot(*fused);
      const auto b = snapshot(*twin);
      EXPECT_EQ(a.values.size(), b.values.size());
      EXPECT_TRUE(a.values == b.values);
      EXPECT_TRUE(a.scores == b.scores);
      if (a.values != b.values || a.scores != b.scores) {
        std::printf("  storage %d maxNorm %g\n", static_cast<int>(storage), maxNorm);
      }
    }
    // applyGradients of the bag's keys (one gradient row per entry) vs the sums by hand.
    std::vector<float> entryGrads(bagKeys.size() * dim);
    for (size_t i = 0; i < entryGrads.size(); ++i) entryGrads[i] = static_cast<float>(draw.unit()) - 0.5f;
    std::vector<int64_t> keys;
    std::map<int64_t, size_t> slot;
    std::vector<float> summed;
    for (size_t j = 0; j < bagKeys.size(); ++j) {
      auto it = slot.find(bagKeys[j]);
      if (it == slot.end()) {
        it = slot.emplace(bagKeys[j], keys.size()).first;
        keys.push_back(bagKeys[j]);
        summed.insert(summed.end(), dim, 0.0f);  // 0 + g, then + g ...: the step's float sum in order
      }
      for (size_t col = 0; col < dim; ++col) summed[it->second * dim + col] += entryGrads[j * dim + col];
    }
    TableConfig c = dynamicConfig(dim, 64, SIZE_MAX, ScorePolicy::kLru);
    c.storage = storage;
    auto stepped = createTable(c);
    auto byHand = createTable(c);
    for (Table* t : {stepped.get(), byHand.get()}) t->upsert(resident.data(), resident.size(), v.data(), nullptr);
    stepped->applyGradients(bagKeys.data(), bagKeys.size(), entryGrads.data(), sgd(0.5));
    byHand->applyGradients(keys.data(), keys.size(), summed.data(), sgd(0.5));
    const auto a = snapshot(*stepped);
    const auto b = snapshot(*byHand);
    EXPECT_TRUE(a.values == b.values);
    EXPECT_TRUE(a.scores == b.scores);
  }
}

// A batch past kParallelThreshold dedupes on one thread while the pool's others probe the keys
// it has found (dedupeAndProbe). A dedupe that fails midway (failDedupeBuildsForTests: it throws
// std::bad_alloc once it has found and published 256 uniques, as one out of memory would, on
// whichever thread runs it) must end the probing threads too: the call returns, rejected, and
// the table is as before (values, scores, size, memoryUsage), the clock too. Without the failure
// the same upsert goes through, each key's last entry winning.
TEST(a_split_write_whose_dedupe_fails_midway_returns_and_changes_nothing) {
  constexpr size_t kDim = 2;
  constexpr size_t kKeys = 5000;  // the batch's distinct keys: 0 .. 4999, the even ones resident
  auto t = createTable(dynamicConfig(kDim, 64, SIZE_MAX, ScorePolicy::kLru));
  std::vector<int64_t> resident;
  for (size_t k = 0; k < kKeys; k += 2) resident.push_back(static_cast<int64_t>(k));
  std::vector<float> half(resident.size() * kDim, 0.5f);
  t->upsert(resident.data(), resident.size(), half.data(), nullptr);  // clock 1
  const auto before = snapshot(*t);
  const size_t memory = t->memoryUsage();
  const size_t n = 40000;
  ASSERT_TRUE(n >= kParallelThreshold);
  std::vector<int64_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = static_cast<int64_t>((i * 7919) % kKeys);
  std::vector<float> values(n * kDim);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i / kDim);  // entry i's row: i
  bool threw = false;
  failDedupeBuildsForTests(true);
  try {
    t->upsert(keys.data(), n, values.data(), nullptr);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  failDedupeBuildsForTests(false);
  EXPECT_TRUE(threw);
  EXPECT_EQ(t->size(), resident.size());
  EXPECT_EQ(t->memoryUsage(), memory);
  const auto after = snapshot(*t);
  EXPECT_TRUE(after.values == before.values);
  EXPECT_TRUE(after.scores == before.scores);
  t->upsert(keys.data(), n, values.data(), nullptr);  // clock 2: the failed call spent none
  EXPECT_EQ(t->size(), kKeys);
  std::vector<size_t> lastOf(kKeys, n);
  for (size_t i = 0; i < n; ++i) lastOf[static_cast<size_t>(keys[i])] = i;
  const auto done = snapshot(*t);
  for (size_t k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(lastOf[k] < n);
    EXPECT_EQ(done.scores.at(static_cast<int64_t>(k)), uint64_t{2});
    const auto& row = done.values.at(static_cast<int64_t>(k));
    for (size_t c = 0; c < kDim; ++c) EXPECT_EQ(row[c], static_cast<float>(lastOf[k]));
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

/**
 * Runs f with the address space limited to `room` bytes more than the process holds; whether f
 * threw. The C heap's free memory (what earlier tests freed) is taken first, in 1 MiB blocks
 * while no new address space is allowed, and given back after f: otherwise a free chunk could
 * serve one of f's large buffers without any new address space.
 */
template <class F>
bool throwsWithRoom(size_t room, F&& f) {
  ThreadPool::shared();  // its threads started before the limit
  // Every malloc of 128 KiB or more is mapped (a fixed threshold: glibc's dynamic one rises to
  // 32 MiB, and a heap grown for a large buffer keeps its free space).
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  std::vector<void*> taken;
  taken.reserve(16384);
  const size_t vm = addressSpaceBytes();
  if (vm == 0) return false;
  rlimit old{};
  if (getrlimit(RLIMIT_AS, &old) != 0) return false;
  rlimit tight = old;
  tight.rlim_cur = vm;
  if (setrlimit(RLIMIT_AS, &tight) != 0) return false;
  while (taken.size() < taken.capacity()) {
    void* p = std::malloc(size_t{1} << 20);
    if (p == nullptr) break;
    taken.push_back(p);
  }
  tight.rlim_cur = vm + room;  // the blocks took no new address space (the limit allowed none)
  if (setrlimit(RLIMIT_AS, &tight) != 0) {
    for (void* p : taken) std::free(p);
    return false;
  }
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
  for (void* p : taken) std::free(p);
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

// R1 (rev38): a write's memory comes before its first change. bfloat16's insertRow widened a
// new row's initial value into a thread's buffer that it allocated on first use, after reserve()
// committed the call (the clock kept, rows inserted). Here findOrInsert of a new key at dim 2^20
// (a 4 MiB buffer) with 2 MiB of room: either rejected with nothing changed (the buffer is sized
// in startWrite, before the clock is taken, unless this thread's already is: then it succeeds),
// or done, as on a twin with memory. The old code failed after the commit: key 7 inserted or
// the clock spent.
TEST(a_narrow_insert_whose_row_buffer_does_not_fit_changes_nothing) {
  constexpr size_t kMaxDim = size_t{1} << 20;
  TableConfig c = dynamicConfig(kMaxDim, 4, SIZE_MAX, ScorePolicy::kLru);
  c.storage = StorageDtype::kBfloat16;
  auto t = createTable(c);
  auto twin = createTable(c);
  const int64_t resident[] = {0};
  std::vector<float> values(kMaxDim, 0.5f);
  for (Table* x : {t.get(), twin.get()}) x->upsert(resident, 1, values.data(), nullptr);  // clock 1
  const auto before = snapshot(*t);
  const int64_t keys[] = {0, 7};
  std::vector<float> out(2 * kMaxDim);
  uint8_t exists[2];
  const bool threw = throwsWithRoom(size_t{2} << 20, [&] { t->findOrInsertInto(keys, 2, nullptr, out.data(), exists); });
  if (threw) {
    EXPECT_EQ(t->size(), size_t{1});
    EXPECT_TRUE(snapshot(*t).scores == before.scores);
    EXPECT_TRUE(snapshot(*t).values == before.values);
  } else {
    twin->findOrInsertInto(keys, 2, nullptr, out.data(), exists);
    EXPECT_EQ(t->size(), size_t{2});
    EXPECT_TRUE(snapshot(*t).scores == snapshot(*twin).scores);
    EXPECT_TRUE(snapshot(*t).values == snapshot(*twin).values);
  }
  const int64_t probe[] = {0};
  t->upsert(probe, 1, values.data(), nullptr);
  EXPECT_EQ(snapshot(*t).scores.at(0), uint64_t{threw ? 2u : 3u});
}

// R1 (rev38): a step's memory comes before its first change. Its per-key loop allocated its row
// buffers (sum [dim] floats, scratch [dim] doubles, and the widened row on float16 / bfloat16)
// per range, after admission had inserted the new key 9 and (clipped) the read had scored key 0,
// both clocks kept. At dim 2^20 the scratch alone is 8 MiB: with 6 MiB of room the call is
// rejected before any change (its row buffers are allocated before admission now), the table
// exactly as before (export, size, memoryUsage) and the clock too (the next upsert scores one
// more than the step with memory left it). Three steps: distinct keys (the key-by-key loop), a repeated key (the
// in-order sums, updateFromSums), clipped (the read inside the step). Each runs once with memory
// first, so the buffers kept from a call (the clipped rows' scratch, cached scratch blocks) are
// there: what remains to allocate is the step's own.
TEST(a_step_whose_row_buffers_do_not_fit_changes_nothing) {
  constexpr size_t kMaxDim = size_t{1} << 20;
  for (StorageDtype storage : {StorageDtype::kFloat32, StorageDtype::kBfloat16}) {
    for (int shape = 0; shape < 3; ++shape) {
      TableConfig c = dynamicConfig(kMaxDim, 4, SIZE_MAX, ScorePolicy::kLru);
      c.storage = storage;
      auto t = createTable(c);
      const int64_t resident[] = {0, 1};
      std::vector<float> values(2 * kMaxDim, 0.5f);
      values[3] = 3.0f;  // key 0's row has norm > 1 (clipped)
      t->upsert(resident, 2, values.data(), nullptr);
      const int64_t distinct[] = {0, 9};
      const int64_t repeated[] = {0, 0, 9};
      std::vector<float> grads(3 * kMaxDim, 0.125f);
      const int32_t splits[] = {0, 1};
      const int64_t bagKeys[] = {0};
      const BagInput bag{splits, 1, bagKeys, 1, nullptr};
      const auto step = [&] {
        if (shape == 0) t->applyGradients(distinct, 2, grads.data(), sgd(0.5));
        if (shape == 1) t->applyGradients(repeated, 3, grads.data(), sgd(0.5));
        if (shape == 2) applyCombinedGradients(*t, bag, grads.data(), Combiner::kSum, 1.0, ShardPlan{}, sgd(0.5));
      };
      step();  // with memory (clock 2)
      const int64_t gone[] = {9};
      t->remove(gone, 1);
      const auto before = snapshot(*t);
      const size_t memory = t->memoryUsage();
      const bool threw = throwsWithRoom(size_t{6} << 20, step);
      EXPECT_TRUE(threw);
      EXPECT_EQ(t->size(), size_t{2});
      EXPECT_EQ(t->memoryUsage(), memory);
      const auto after = snapshot(*t);
      EXPECT_TRUE(after.scores == before.scores);
      EXPECT_TRUE(after.values == before.values);
      if (after.scores != before.scores || after.values != before.values || t->size() != 2) {
        std::printf("  storage %d shape %d\n", static_cast<int>(storage), shape);
      }
      const int64_t probe[] = {1};
      t->upsert(probe, 1, values.data(), nullptr);
      // upsert clock 1, the step with memory 2 (clipped: 2 and 3), so the probe 3 (clipped: 4)
      EXPECT_EQ(snapshot(*t).scores.at(1), uint64_t{shape == 2 ? 4u : 3u});
    }
  }
}
#endif

ES_TEST_FILE_END
