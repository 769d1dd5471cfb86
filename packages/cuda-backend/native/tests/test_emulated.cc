// The tables on an emulated device (exec/runtime.h): host memory used through the
// device protocol, so that what host mode cannot show does show here:
//  - a call that runs out of device memory half-way must leave the table as it was
//    (every allocation of a call, its staged inputs included, before its first change);
//  - host data a call builds for a queued copy must outlive the copy (the stream may
//    run it after the call returned: here it always does);
//  - kernel bodies must not depend on the order of a launch's items or of a group's
//    lanes (a GPU gives none): reversed order gives the same bits as host mode;
//  - a batch must index below the uint32 sentinel of the dedupe table.
#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "factory.h"
#include "primitives.h"
#include "test.h"

using namespace embedstack;
using namespace embedstack::cuda;

namespace {

constexpr size_t kDim = 5;

TableConfig config(size_t maxCapacity = SIZE_MAX, bool slots = true) {
  TableConfig c;
  c.dim = kDim;
  c.initCapacity = 4;
  c.maxCapacity = maxCapacity;
  c.initializer.kind = InitKind::kNormal;
  c.initializer.a = 0;
  c.initializer.b = 1;
  c.initializer.seed = 3;
  c.scorePolicy = ScorePolicy::kCustomized;  // reads do not score: a snapshot does not change the table
  if (slots) {
    c.slotWidths = {static_cast<uint32_t>(kDim)};  // adagrad's accumulators
    c.slotInitial = {0.1f};
  }
  return c;
}

OptimizerParams adagrad() {
  OptimizerParams p;
  p.kind = OptimizerKind::kAdagrad;
  p.lr = 0.25;
  return p;
}

Placement emulated(bool reverse = false) {
  Placement p;
  p.emulated = true;
  p.emulation.reverseItems = reverse;
  p.emulation.reverseLanes = reverse;
  return p;
}

std::vector<float> valuesFor(const std::vector<int64_t>& keys, float salt) {
  std::vector<float> v(keys.size() * kDim);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(keys[i / kDim] % 97) * 0.5f + salt + static_cast<float>(i % kDim);
  return v;
}

/** Everything a table holds, rows sorted by key, plus whether each of `probe` is found (the index). */
struct Snapshot {
  std::vector<int64_t> keys;
  std::vector<float> values;
  std::vector<float> slots;
  std::vector<uint64_t> scores;
  std::vector<uint8_t> found;
  size_t size = 0;
  size_t capacity = 0;  // a failed call must not have grown the table either (capacity(), memoryUsage())
  size_t memory = 0;
  bool operator==(const Snapshot& o) const {
    return keys == o.keys && estest::differingBits(values, o.values) == 0 && estest::differingBits(slots, o.slots) == 0 &&
           scores == o.scores && found == o.found && size == o.size && capacity == o.capacity && memory == o.memory;
  }
};

Snapshot snapshot(Table& t, const std::vector<int64_t>& probe) {
  Snapshot s;
  s.size = t.size();
  s.capacity = t.capacity();
  s.memory = t.memoryUsage();
  ExportResult e = t.exportBatch(0, SIZE_MAX);
  const size_t n = e.keys.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return e.keys[a] < e.keys[b]; });
  for (size_t i : order) {
    s.keys.push_back(e.keys[i]);
    s.scores.push_back(e.scores[i]);
    for (size_t c = 0; c < kDim; ++c) s.values.push_back(e.values[i * kDim + c]);
    for (const HostArray<float>& slot : e.slots) {
      const size_t w = slot.size() / std::max<size_t>(n, 1);
      for (size_t c = 0; c < w; ++c) s.slots.push_back(slot[i * w + c]);
    }
  }
  if (probe.empty()) return s;  // no find: under read-scoring policies a find changes scores and the clock
  FindResult f = t.find(probe.data(), probe.size());
  s.found.assign(f.exists.data(), f.exists.data() + probe.size());
  return s;
}

/**
 * Runs `op` on `t` with the k-th allocation from now failing; true when it threw (which must
 * be the out-of-memory error), false when it made fewer than k + 1 allocations and ran through.
 */
bool failsAt(Table& t, long long k, const std::function<void(Table&)>& op, const std::string& what) {
  Exec& ex = dynamic_cast<DeviceTable&>(t).exec();
  ex.failAllocation(k);
  bool failed = false;
  try {
    op(t);
  } catch (const EmbedError& e) {
    failed = true;
    if (e.code() != ErrorCode::kFailedPrecondition) estest::fail(__FILE__, __LINE__, what + ": " + e.what());
  }
  ex.failAllocation(-1);
  return failed;
}

/**
 * For k = 0, 1, ...: a fresh table set up by `setup`, then `op` with the k-th allocation
 * of the op failing, until the op makes fewer than k allocations. Every failed op must
 * be the out-of-memory error and leave the table exactly as before it. Returns how
 * many allocations the op made (so a test can see it was exercised).
 */
size_t everyAllocationFails(const TableConfig& c, const std::function<void(Table&)>& setup,
                            const std::function<void(Table&)>& op, const std::vector<int64_t>& probe, const char* what) {
  for (long long k = 0;; ++k) {
    std::shared_ptr<Table> t = cuda::createTable(c, emulated());
    setup(*t);
    const Snapshot before = snapshot(*t, probe);
    if (!failsAt(*t, k, op, what)) return static_cast<size_t>(k);
    if (!(snapshot(*t, probe) == before)) {
      estest::fail(__FILE__, __LINE__,
                   std::string(what) + ": allocation " + std::to_string(k) + " failed and the table changed");
      return static_cast<size_t>(k);
    }
  }
}

/** Pools a bag of `keys` split at `splits` (rows = splits.size() - 1); returns [rows * dim]. */
std::vector<float> pool(Table& t, const std::vector<int32_t>& splits, const int64_t* keys, Combiner c, double maxNorm,
                        bool insert) {
  BagInput bag;
  bag.rowSplits = splits.data();
  bag.rows = splits.size() - 1;
  bag.keys = keys;
  bag.n = static_cast<size_t>(splits.back());
  std::vector<float> out(bag.rows * kDim);
  t.lookupCombinedInto(bag, c, maxNorm, insert, out.data());
  return out;
}

std::vector<int64_t> range(int64_t from, int64_t count, int64_t step = 1) {
  std::vector<int64_t> k;
  for (int64_t i = 0; i < count; ++i) k.push_back(from + i * step);
  return k;
}

}  // namespace

TEST(emulated_device_runs_copies_and_kernels_only_when_the_host_waits) {
  std::shared_ptr<Exec> ex = Exec::emulated(Emulation{});
  std::vector<uint32_t> host = {1, 2, 3};
  DeviceArray<uint32_t> d(*ex, 3, "test");
  ex->toDevice(d.data(), host.data(), 3 * sizeof(uint32_t));
  host[1] = 20;  // before the wait: the queued copy reads this
  std::vector<uint32_t> back(3);
  ex->toHost(back.data(), d.data(), 3 * sizeof(uint32_t));
  EXPECT_TRUE(back == (std::vector<uint32_t>{1, 20, 3}));
}

TEST(a_write_that_runs_out_of_device_memory_changes_nothing) {
  const std::vector<int64_t> old = range(-40, 60, 7);
  const std::vector<int64_t> fresh = range(1000, 50, 3);
  std::vector<int64_t> mixed = fresh;
  mixed.insert(mixed.end(), old.begin(), old.begin() + 30);
  mixed.insert(mixed.end(), fresh.begin(), fresh.begin() + 10);  // duplicates
  std::vector<int64_t> probe = old;
  probe.insert(probe.end(), fresh.begin(), fresh.end());
  const std::vector<float> oldValues = valuesFor(old, 0.25f);
  std::vector<uint64_t> oldScores(old.size());
  for (size_t i = 0; i < old.size(); ++i) oldScores[i] = 100 + i;
  auto fill = [&](Table& t) { t.upsert(old.data(), old.size(), oldValues.data(), oldScores.data()); };
  const std::vector<float> v = valuesFor(mixed, 1.5f);
  std::vector<uint64_t> s(mixed.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = 50 + 3 * i;  // some beat residents, some not
  std::vector<uint8_t> ex(mixed.size());
  for (size_t i = 0; i < ex.size(); ++i) ex[i] = static_cast<uint8_t>(i % 3 == 0);
  const TableConfig open = config();
  const TableConfig capped = config(70);  // 60 residents: the new keys evict

  size_t made = 0;
  for (const TableConfig* c : {&open, &capped}) {
    made += everyAllocationFails(*c, fill, [&](Table& t) { t.upsert(mixed.data(), mixed.size(), v.data(), s.data()); },
                                 probe, "upsert");
    made += everyAllocationFails(*c, fill, [&](Table& t) { t.accum(mixed.data(), mixed.size(), v.data(), ex.data(), s.data()); },
                                 probe, "accum");
    made += everyAllocationFails(
        *c, fill,
        [&](Table& t) {
          std::vector<float> acc(mixed.size() * kDim, 0.5f);
          const float* slots[] = {acc.data()};
          t.importRows(mixed.data(), mixed.size(), v.data(), slots, s.data());
        },
        probe, "importRows");
    made += everyAllocationFails(*c, fill, [&](Table& t) { t.applyGradients(mixed.data(), mixed.size(), v.data(), adagrad()); },
                                 probe, "applyGradients");
    made += everyAllocationFails(*c, fill, [&](Table& t) { t.findOrInsert(mixed.data(), mixed.size(), s.data()); }, probe,
                                 "findOrInsert");
    made += everyAllocationFails(
        *c, fill,
        [&](Table& t) { pool(t, {0, 3, 3, static_cast<int32_t>(mixed.size())}, mixed.data(), Combiner::kMean, 2.0, true); },
        probe, "lookupCombined with inserts");
    made += everyAllocationFails(
        *c, fill,
        [&](Table& t) {
          ShardPlan plan;
          plan.kind = ShardPlan::kMod;
          plan.numShards = 2;
          plan.shard = 0;
          std::vector<float> out(mixed.size() * kDim, -3.0f);
          std::vector<uint8_t> e(mixed.size(), 7);
          dynamic_cast<DeviceTable&>(t).plannedFind(mixed.data(), mixed.size(), plan, true, s.data(), out.data(), e.data());
        },
        probe, "planned findOrInsert");
  }
  made += everyAllocationFails(open, fill, [&](Table& t) { t.remove(mixed.data(), mixed.size()); }, probe, "remove");
  made += everyAllocationFails(open, fill, [&](Table& t) { t.restrict(17); }, probe, "restrict");
  EXPECT_TRUE(made > 200);  // the ops allocate: every one of those allocations was made to fail once
}

TEST(a_write_that_failed_for_memory_leaves_the_clock_and_so_later_scores_as_they_were) {
  // lru scores are the clock of the call that touched a row: a failed call must not count
  TableConfig c = config(70);
  c.scorePolicy = ScorePolicy::kLru;
  const std::vector<int64_t> old = range(-40, 60, 7);
  std::vector<int64_t> mixed = range(1000, 30, 3);
  mixed.insert(mixed.end(), old.begin(), old.begin() + 20);
  const std::vector<float> oldValues = valuesFor(old, 0.25f);
  const std::vector<float> v = valuesFor(mixed, 1.5f);
  std::vector<uint8_t> ex(mixed.size(), 0);
  const std::vector<std::pair<const char*, std::function<void(Table&)>>> ops = {
      {"upsert", [&](Table& t) { t.upsert(mixed.data(), mixed.size(), v.data(), nullptr); }},
      {"accum", [&](Table& t) { t.accum(mixed.data(), mixed.size(), v.data(), ex.data(), nullptr); }},
      {"applyGradients", [&](Table& t) { t.applyGradients(mixed.data(), mixed.size(), v.data(), adagrad()); }},
      {"findOrInsert", [&](Table& t) { t.findOrInsert(mixed.data(), mixed.size(), nullptr); }},
  };
  size_t failures = 0;
  for (const auto& [what, op] : ops) {
    for (long long k = 0;; ++k) {
      std::shared_ptr<Table> retried = cuda::createTable(c, emulated());
      std::shared_ptr<Table> once = cuda::createTable(c, emulated());
      for (Table* t : {retried.get(), once.get()}) t->upsert(old.data(), old.size(), oldValues.data(), nullptr);
      if (!failsAt(*retried, k, op, what)) break;
      ++failures;
      op(*retried);
      op(*once);
      if (!(snapshot(*retried, old) == snapshot(*once, old))) {
        estest::fail(__FILE__, __LINE__, std::string(what) + ": a failure at allocation " + std::to_string(k) +
                                             " changed the scores of the retried call");
        break;
      }
    }
  }
  EXPECT_TRUE(failures > 50);
}

TEST(imported_slots_reach_their_rows_when_the_copies_run_after_the_call_returned) {
  std::shared_ptr<Table> t = cuda::createTable(config(), emulated());
  const std::vector<int64_t> keys = {5, -9, 1LL << 40};
  const std::vector<float> v = valuesFor(keys, 0.0f);
  std::vector<float> acc(keys.size() * kDim);
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = 0.5f + static_cast<float>(i);
  const float* slots[] = {acc.data()};
  t->importRows(keys.data(), keys.size(), v.data(), slots, nullptr);
  ExportResult e = t->exportBatch(0, SIZE_MAX);
  ASSERT_TRUE(e.keys.size() == 3 && e.slots.size() == 1);
  bool same = true;
  for (size_t r = 0; r < 3; ++r) {
    const size_t i = static_cast<size_t>(std::find(keys.begin(), keys.end(), e.keys[r]) - keys.begin());
    for (size_t c = 0; c < kDim; ++c) {
      same = same && e.slots[0][r * kDim + c] == acc[i * kDim + c] && e.values[r * kDim + c] == v[i * kDim + c];
    }
  }
  EXPECT_TRUE(same);
}

TEST(kernels_give_the_same_bits_whatever_the_order_of_items_and_lanes) {
  // host mode, the emulated device in order, and in reverse (items and lanes): one workload each
  std::vector<std::vector<float>> results;
  std::vector<Snapshot> states;
  for (int mode = 0; mode < 3; ++mode) {
    std::shared_ptr<Table> t = cuda::createTable(config(300), mode == 0 ? Placement{} : emulated(mode == 2));
    std::mt19937_64 rng(17);
    std::vector<float> out;
    std::vector<int64_t> all;
    for (int round = 0; round < 6; ++round) {
      std::vector<int64_t> keys(900);
      for (int64_t& k : keys) k = static_cast<int64_t>(rng() % 700) - 350 + (rng() % 5 == 0 ? INT64_MIN / 2 : 0);
      all.insert(all.end(), keys.begin(), keys.end());
      std::vector<float> v(keys.size() * kDim);
      for (float& x : v) x = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 256.0f;
      std::vector<uint64_t> s(keys.size());
      for (uint64_t& x : s) x = rng() % 64;
      std::vector<uint8_t> ex(keys.size());
      for (uint8_t& x : ex) x = static_cast<uint8_t>(rng() % 2);
      t->upsert(keys.data(), keys.size() / 2, v.data(), s.data());
      t->accum(keys.data(), keys.size(), v.data(), ex.data(), s.data());
      t->applyGradients(keys.data(), keys.size(), v.data(), adagrad());
      FindResult f = t->findOrInsert(keys.data() + 100, 300, s.data());
      out.insert(out.end(), f.values.data(), f.values.data() + f.values.size());
      const std::vector<float> pooled =
          pool(*t, {0, 0, 7, 400, 401, 900}, keys.data(), round % 2 ? Combiner::kSqrtn : Combiner::kMax, round % 3 ? 0.75 : 0, false);
      out.insert(out.end(), pooled.begin(), pooled.end());
      t->remove(keys.data() + 50, 40);
      out.push_back(static_cast<float>(t->restrict(250)));
    }
    results.push_back(out);
    states.push_back(snapshot(*t, all));
  }
  EXPECT_EQ(estest::differingBits(results[0], results[1]), size_t{0});
  EXPECT_EQ(estest::differingBits(results[0], results[2]), size_t{0});
  EXPECT_TRUE(states[0] == states[1]);
  EXPECT_TRUE(states[0] == states[2]);
}

TEST(primitives_in_reverse_order_match_the_host_mode) {
  std::mt19937_64 rng(9);
  const size_t n = 5000;
  std::vector<int64_t> keys(n);
  for (int64_t& k : keys) k = static_cast<int64_t>(rng() % 900) - 450;
  std::vector<uint32_t> sortKeys(n), sortValues(n);
  for (size_t i = 0; i < n; ++i) {
    sortKeys[i] = static_cast<uint32_t>(rng() % 70000);
    sortValues[i] = static_cast<uint32_t>(i);
  }
  std::vector<SelectCandidate> c(n);
  for (size_t i = 0; i < n; ++i) c[i] = {rng() % 16, static_cast<int64_t>(rng()), static_cast<uint32_t>(i), static_cast<uint32_t>(rng() % 2)};
  struct Out {
    std::vector<uint32_t> uniqueOf, occList, sortedKeys, sortedValues;
    std::vector<uint8_t> state;
  };
  auto run = [&](Exec& ex) {
    Out o;
    Stage st(ex);
    const Dedupe d = dedupe(st, keys.data(), n, true);
    std::vector<uint32_t> k = sortKeys, v = sortValues;
    sortPairs(st, k.data(), v.data(), n, 24);
    o.state.resize(n);
    selectKeep(st, c.data(), n, n / 3, o.state.data());
    ex.sync();
    o.uniqueOf.assign(d.uniqueOf, d.uniqueOf + n);
    o.occList.assign(d.occList, d.occList + n);
    o.sortedKeys = k;
    o.sortedValues = v;
    return o;
  };
  const Out host = run(*Exec::host());
  const Out reversed = run(*Exec::emulated(Emulation{true, true}));
  EXPECT_TRUE(host.uniqueOf == reversed.uniqueOf);
  EXPECT_TRUE(host.occList == reversed.occList);
  EXPECT_TRUE(host.sortedKeys == reversed.sortedKeys);
  EXPECT_TRUE(host.sortedValues == reversed.sortedValues);
  EXPECT_TRUE(host.state == reversed.state);
}

TEST(a_batch_must_index_below_the_uint32_sentinel) {
  Stage st(*Exec::host());
  int64_t one = 1;
  EXPECT_THROW_CODE(dedupe(st, &one, size_t{0xffffffffu}, false), kInvalidArgument);
  uint8_t flag = 1;
  uint32_t out = 0;
  EXPECT_THROW_CODE(compactIndices(st, &flag, size_t{1} << 32, &out), kInvalidArgument);
}

namespace {

/** A bag over `keys`: rows of 3, 0, 4, then the rest; per-entry weights. */
struct TestBag {
  std::vector<int32_t> splits;
  std::vector<float> weights;
  BagInput in;
  TestBag(const std::vector<int64_t>& keys) {
    const int32_t n = static_cast<int32_t>(keys.size());
    splits = {0, 3, 3, 7, n};
    for (int32_t i = 0; i < n; ++i) weights.push_back(0.5f + static_cast<float>(i % 4) * 0.25f);
    in.rowSplits = splits.data();
    in.rows = splits.size() - 1;
    in.keys = keys.data();
    in.n = keys.size();
    in.weights = weights.data();
  }
};

}  // namespace

TEST(a_training_step_that_fails_at_any_stage_leaves_scores_values_slots_size_and_clock_as_they_were) {
  // Read-scoring policies: the fused step with clipping reads the rows (a find) before it
  // trains, and that read must not score until the step can no longer fail.
  const std::vector<int64_t> old = range(-40, 60, 7);
  std::vector<int64_t> mixed = range(1000, 24, 3);  // new keys
  mixed.insert(mixed.end(), old.begin(), old.begin() + 30);
  mixed.insert(mixed.end(), old.begin(), old.begin() + 8);  // duplicates
  mixed.insert(mixed.end(), mixed.begin(), mixed.begin() + 5);
  const std::vector<float> oldValues = valuesFor(old, 0.25f);
  const std::vector<float> g = valuesFor(mixed, -0.75f);
  const TestBag bag(mixed);
  std::vector<float> pooled(bag.in.rows * kDim);
  for (size_t i = 0; i < pooled.size(); ++i) pooled[i] = 0.125f * static_cast<float>(i % 11) - 0.5f;
  ShardPlan all;
  ShardPlan half;
  half.kind = ShardPlan::kMod;
  half.numShards = 2;
  half.shard = 1;
  using Op = std::function<void(Table&)>;
  const std::vector<std::pair<const char*, Op>> ops = {
      {"applyGradients", [&](Table& t) { t.applyGradients(mixed.data(), mixed.size(), g.data(), adagrad()); }},
      {"applyCombinedGradients, maxNorm",
       [&](Table& t) {
         dynamic_cast<DeviceTable&>(t).applyCombinedGradients(bag.in, pooled.data(), Combiner::kMean, 2.5, all, adagrad());
       }},
      {"applyCombinedGradients, maxNorm, a shard's part",
       [&](Table& t) {
         dynamic_cast<DeviceTable&>(t).applyCombinedGradients(bag.in, pooled.data(), Combiner::kSqrtn, 0.75, half, adagrad());
       }},
      {"applyCombinedGradients, no maxNorm",
       [&](Table& t) {
         dynamic_cast<DeviceTable&>(t).applyCombinedGradients(bag.in, pooled.data(), Combiner::kSum, 0, all, adagrad());
       }},
      {"applyGradients with a plan",
       [&](Table& t) { dynamic_cast<DeviceTable&>(t).plannedApplyGradients(mixed.data(), mixed.size(), g.data(), half, adagrad()); }},
  };
  size_t failures = 0;
  for (ScorePolicy policy : {ScorePolicy::kLfu, ScorePolicy::kLru, ScorePolicy::kEpochLfu, ScorePolicy::kEpochLru}) {
    for (size_t cap : {SIZE_MAX, size_t{70}}) {  // 70: the new keys evict
      TableConfig c = config(cap);
      c.scorePolicy = policy;
      for (const auto& [what, op] : ops) {
        for (long long k = 0;; ++k) {
          std::shared_ptr<Table> failed = cuda::createTable(c, emulated(k % 2 == 1));
          std::shared_ptr<Table> once = cuda::createTable(c, emulated());
          for (Table* t : {failed.get(), once.get()}) {
            t->setEpoch(3);
            t->upsert(old.data(), old.size(), oldValues.data(), nullptr);
            FindResult warm = t->find(old.data(), 20);  // read scores to build on
            (void)warm;
          }
          const Snapshot before = snapshot(*failed, {});
          if (!failsAt(*failed, k, op, what)) break;
          ++failures;
          const std::string at = std::string(what) + " (policy " + std::to_string(static_cast<int>(policy)) + ", cap " +
                                 std::to_string(cap) + "), allocation " + std::to_string(k);
          if (!(snapshot(*failed, {}) == before)) {
            estest::fail(__FILE__, __LINE__, at + " failed and the table changed");
            break;
          }
          // The clock: the same step now, on the table that failed and on one that never did.
          op(*failed);
          op(*once);
          if (!(snapshot(*failed, {}) == snapshot(*once, {}))) {
            estest::fail(__FILE__, __LINE__, at + " failed and the clock changed (a later step scores differently)");
            break;
          }
        }
      }
    }
  }
  EXPECT_TRUE(failures > 300);
  // A static table (no scores; its clipping read and step are one call too): values and slots.
  TableConfig st = config();
  st.isStatic = true;
  st.vocabularySize = 2000;
  std::vector<int64_t> rowsOf = mixed;
  for (int64_t& k : rowsOf) k = (k % 1000 + 1000) % 1000;
  const TestBag staticBag(rowsOf);
  size_t made = 0;
  for (double maxNorm : {0.0, 2.5}) {
    made += everyAllocationFails(
        st, [&](Table& t) { t.upsert(rowsOf.data(), 40, valuesFor(rowsOf, 0.5f).data(), nullptr); },
        [&](Table& t) {
          dynamic_cast<DeviceTable&>(t).applyCombinedGradients(staticBag.in, pooled.data(), Combiner::kMean, maxNorm, all,
                                                              adagrad());
        },
        {}, "static applyCombinedGradients");
  }
  EXPECT_TRUE(made > 20);
}

TEST(a_find_kernel_measurement_whose_launch_fails_half_way_leaves_the_scores_and_clock_as_they_were) {
  // findKernelSeconds scores its reads (as find does) and puts the scores back: also when a
  // launch fails after some runs have scored (on a device: a launch error, or one seen at a
  // wait). Launch k fails, for each launch before the restore's own (lookup, save, warm-up,
  // 3 timed runs; a failing restore cannot be helped: a launch that fails once fails again).
  const std::vector<int64_t> old = range(-40, 60, 7);
  std::vector<int64_t> probe = range(-40, 30, 7);
  probe.insert(probe.end(), old.begin(), old.begin() + 10);  // duplicates
  probe.push_back(123456);                                   // missing
  const std::vector<float> oldValues = valuesFor(old, 0.25f);
  size_t failures = 0;
  for (ScorePolicy policy : {ScorePolicy::kLfu, ScorePolicy::kLru, ScorePolicy::kEpochLfu}) {
    TableConfig c = config();
    c.scorePolicy = policy;
    for (long long k = 0; k < 6; ++k) {
      std::shared_ptr<Table> measured = cuda::createTable(c, emulated(k % 2 == 1));
      std::shared_ptr<Table> twin = cuda::createTable(c, emulated());
      for (Table* t : {measured.get(), twin.get()}) {
        t->setEpoch(2);
        t->upsert(old.data(), old.size(), oldValues.data(), nullptr);
        FindResult warm = t->find(old.data(), 20);
        (void)warm;
      }
      const Snapshot before = snapshot(*measured, {});
      Exec& ex = dynamic_cast<DeviceTable&>(*measured).exec();
      ex.failLaunch(k);
      bool failed = false;
      try {
        dynamic_cast<DeviceTable&>(*measured).findKernelSeconds(probe.data(), probe.size(), 3);
      } catch (const EmbedError& e) {
        failed = true;
        EXPECT_TRUE(e.code() == ErrorCode::kInternal);
      }
      ex.failLaunch(-1);
      const std::string at = "policy " + std::to_string(static_cast<int>(policy)) + ", launch " + std::to_string(k);
      if (!(snapshot(*measured, {}) == before)) {
        estest::fail(__FILE__, __LINE__, at + (failed ? " failed" : " (none failed)") + " and the scores changed");
        break;
      }
      // The clock: a later find scores the same on the measured table as on its twin.
      for (Table* t : {measured.get(), twin.get()}) {
        FindResult later = t->find(probe.data(), probe.size());
        (void)later;
      }
      if (!(snapshot(*measured, {}) == snapshot(*twin, {}))) {
        estest::fail(__FILE__, __LINE__, at + ": a later find scores differently");
        break;
      }
      if (failed) ++failures;
    }
  }
  EXPECT_TRUE(failures == 3 * 6);
}
