// Dynamic table semantics (core's reference dynamic table is the specification).
#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#if defined(__linux__) && defined(__GLIBC__)
#include <sys/mman.h>
#endif

#include "memory.h"
#include "planned_ops.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;
using estest::rowOf;
using estest::snapshot;

TEST(extreme_keys_round_trip) {
  auto t = createTable(dynamicConfig(3, 2));
  std::vector<int64_t> keys = {INT64_MIN, INT64_MAX, -1, 0, int64_t{1} << 40};
  auto vals = estest::valuesFor(keys, 3, [](int64_t k) { return static_cast<float>(k % 1000) + 0.5f; });
  t->upsert(keys.data(), keys.size(), vals.data(), nullptr);
  EXPECT_EQ(t->size(), size_t{5});
  auto r = t->find(keys.data(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(static_cast<int>(r.exists[i]), 1);
    for (size_t c = 0; c < 3; ++c) EXPECT_EQ(r.values[i * 3 + c], vals[i * 3 + c]);
  }
  int64_t missing[] = {1, INT64_MIN + 1, INT64_MAX - 1};
  auto m = t->find(missing, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(static_cast<int>(m.exists[i]), 0);
    EXPECT_EQ(m.values[i * 3], 0.0f);
  }
  auto s = snapshot(*t);
  EXPECT_EQ(s.values.size(), size_t{5});
  EXPECT_EQ(s.values[INT64_MIN][0], static_cast<float>(INT64_MIN % 1000) + 0.5f);
  // removing the extremes works too
  int64_t gone[] = {INT64_MIN, INT64_MAX};
  EXPECT_EQ(t->remove(gone, 2), size_t{2});
  auto after = t->find(keys.data(), keys.size());
  EXPECT_EQ(static_cast<int>(after.exists[0]), 0);
  EXPECT_EQ(static_cast<int>(after.exists[1]), 0);
  EXPECT_EQ(static_cast<int>(after.exists[2]), 1);
  EXPECT_EQ(after.values[2 * 3], vals[2 * 3]);
}

TEST(capacity_doubles_from_init_capacity) {
  auto t = createTable(dynamicConfig(2, 3));
  EXPECT_EQ(t->capacity(), size_t{3});
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 1000; ++k) keys.push_back(k * 7919 - 5000);
  size_t done = 0;
  for (size_t batch : {size_t{1}, size_t{2}, size_t{1}, size_t{96}, size_t{900}}) {
    std::vector<int64_t> part(keys.begin() + static_cast<long>(done), keys.begin() + static_cast<long>(done + batch));
    auto v = estest::valuesFor(part, 2, [](int64_t k) { return static_cast<float>(k); });
    t->upsert(part.data(), part.size(), v.data(), nullptr);
    done += batch;
    size_t cap = 3;
    while (cap < done) cap *= 2;
    EXPECT_EQ(t->capacity(), cap);
  }
  EXPECT_EQ(t->size(), size_t{1000});
  auto r = t->find(keys.data(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(static_cast<int>(r.exists[i]), 1);
    EXPECT_EQ(r.values[i * 2], static_cast<float>(keys[i]));
  }
}

TEST(remove_keeps_arena_dense_and_export_in_arena_order) {
  auto t = createTable(dynamicConfig(1, 4));
  std::vector<int64_t> keys = {10, 20, 30, 40, 50};
  std::vector<float> vals = {1, 2, 3, 4, 5};
  t->upsert(keys.data(), 5, vals.data(), nullptr);
  int64_t rm[] = {20, 20, 99};
  EXPECT_EQ(t->remove(rm, 3), size_t{1});
  auto e = t->exportBatch(0, 100);
  ASSERT_TRUE(e.keys.size() == 4);
  // 50 (last) moved into 20's hole
  std::vector<int64_t> order(e.keys.data(), e.keys.data() + 4);
  EXPECT_TRUE((order == std::vector<int64_t>{10, 50, 30, 40}));
  EXPECT_EQ(e.values[1], 5.0f);
  auto page = t->exportBatch(1, 2);
  EXPECT_EQ(page.keys.size(), size_t{2});
  EXPECT_EQ(page.keys[0], int64_t{50});
  EXPECT_EQ(t->exportBatch(4, 10).keys.size(), size_t{0});
  EXPECT_EQ(t->exportBatch(99, 10).keys.size(), size_t{0});
  auto f = t->find(keys.data(), 5);
  EXPECT_EQ(f.values[4], 5.0f);
  EXPECT_EQ(static_cast<int>(f.exists[1]), 0);
}

TEST(many_inserts_and_removes_against_a_map) {
  auto t = createTable(dynamicConfig(2, 16));
  std::unordered_map<int64_t, float> model;
  std::mt19937_64 rng(123);
  for (int round = 0; round < 200; ++round) {
    std::vector<int64_t> keys;
    for (int i = 0; i < 64; ++i) keys.push_back(static_cast<int64_t>(rng() % 3000) - 1500);
    if (round % 3 == 2) {
      size_t expected = 0;
      for (int64_t k : keys) expected += model.erase(k);
      EXPECT_EQ(t->remove(keys.data(), keys.size()), expected);
    } else {
      std::vector<float> v;
      for (size_t i = 0; i < keys.size(); ++i) {
        float x = static_cast<float>(round * 100 + static_cast<int>(i));
        v.push_back(x);
        v.push_back(-x);
        model[keys[i]] = x;  // the last occurrence wins
      }
      t->upsert(keys.data(), keys.size(), v.data(), nullptr);
    }
    EXPECT_EQ(t->size(), model.size());
  }
  auto s = snapshot(*t);
  EXPECT_EQ(s.values.size(), model.size());
  for (auto& kv : model) {
    ASSERT_TRUE(s.values.count(kv.first) == 1);
    EXPECT_EQ(s.values[kv.first][0], kv.second);
    EXPECT_EQ(s.values[kv.first][1], -kv.second);
  }
}

TEST(clear_keeps_capacity_and_clock) {
  auto t = createTable(dynamicConfig(1, 2));
  std::vector<int64_t> keys = {1, 2, 3, 4, 5};
  std::vector<float> v(5, 1.0f);
  t->upsert(keys.data(), 5, v.data(), nullptr);  // clock 1
  EXPECT_EQ(t->capacity(), size_t{8});
  t->clear();
  EXPECT_EQ(t->size(), size_t{0});
  EXPECT_EQ(t->capacity(), size_t{8});
  EXPECT_EQ(static_cast<int>(t->find(keys.data(), 1).exists[0]), 0);  // clock 2
  t->upsert(keys.data(), 1, v.data(), nullptr);                       // clock 3
  EXPECT_EQ(snapshot(*t).scores[1], uint64_t{3});
}

TEST(find_or_insert_reports_presence_before_the_call) {
  TableConfig c = dynamicConfig(2);
  c.initializer.kind = InitKind::kConstant;
  c.initializer.a = 0.5;
  auto t = createTable(c);
  int64_t keys[] = {7, 8, 7};
  auto r = t->findOrInsert(keys, 3, nullptr);
  EXPECT_EQ(static_cast<int>(r.exists[0]) + r.exists[1] + r.exists[2], 0);
  EXPECT_EQ(r.values[4], 0.5f);
  EXPECT_EQ(t->size(), size_t{2});
  auto again = t->findOrInsert(keys, 3, nullptr);
  EXPECT_EQ(static_cast<int>(again.exists[0]) + again.exists[1] + again.exists[2], 3);
  // find never inserts
  int64_t other = 9;
  t->find(&other, 1);
  EXPECT_EQ(t->size(), size_t{2});
}

TEST(assign_overwrites_existing_keys_only) {
  auto t = createTable(dynamicConfig(1));
  int64_t k1 = 1;
  float one = 1;
  t->upsert(&k1, 1, &one, nullptr);
  int64_t keys[] = {1, 2, 1};
  float vals[] = {5, 6, 7};
  t->assign(keys, 3, vals, nullptr);
  EXPECT_EQ(t->size(), size_t{1});
  EXPECT_EQ(snapshot(*t).values[1][0], 7.0f);
}

TEST(accum_follows_bp_v2_in_order) {
  auto t = createTable(dynamicConfig(1));
  int64_t k = 1;
  float ten = 10;
  t->upsert(&k, 1, &ten, nullptr);
  // 1 present: exists -> add, !exists -> no-op. 2 absent: !exists inserts, then exists adds.
  // 3 absent: exists -> no-op (never inserted).
  int64_t keys[] = {1, 1, 2, 2, 2, 3};
  float deltas[] = {1, 100, 5, 2, 1000, 9};
  uint8_t exists[] = {1, 0, 0, 1, 0, 1};
  t->accum(keys, 6, deltas, exists, nullptr);
  auto s = snapshot(*t);
  EXPECT_EQ(s.values.size(), size_t{2});
  EXPECT_EQ(s.values[1][0], 11.0f);
  EXPECT_EQ(s.values[2][0], 7.0f);
}

TEST(lru_scores_follow_the_call_clock) {
  auto t = createTable(dynamicConfig(1));
  int64_t keys[] = {1, 2};
  float v[] = {0, 0};
  t->upsert(keys, 2, v, nullptr);  // clock 1
  t->find(keys, 1);                // clock 2: key 1 read
  t->remove(keys + 1, 0);          // remove does not advance the clock
  auto e = t->exportBatch(0, 10);  // neither does export
  auto s = snapshot(*t);
  EXPECT_EQ(s.scores[1], uint64_t{2});
  EXPECT_EQ(s.scores[2], uint64_t{1});
  int64_t absent = 42;
  t->find(&absent, 1);                 // clock 3
  t->upsert(keys + 1, 1, v, nullptr);  // clock 4
  EXPECT_EQ(snapshot(*t).scores[2], uint64_t{4});
  (void)e;
}

TEST(lfu_epoch_frequency_and_customized_scores) {
  int64_t keys[] = {5, 6, 5, 5};
  float v[4] = {0, 0, 0, 0};
  {
    auto t = createTable(dynamicConfig(1, 8, SIZE_MAX, ScorePolicy::kLfu));
    t->upsert(keys, 4, v, nullptr);
    t->find(keys, 4);
    auto s = snapshot(*t);
    EXPECT_EQ(s.scores[5], uint64_t{6});
    EXPECT_EQ(s.scores[6], uint64_t{2});
  }
  {
    auto t = createTable(dynamicConfig(1, 8, SIZE_MAX, ScorePolicy::kFrequency));
    t->upsert(keys, 4, v, nullptr);
    t->find(keys, 4);  // reads do not count
    t->assign(keys, 4, v, nullptr);
    EXPECT_EQ(snapshot(*t).scores[5], uint64_t{2});
  }
  {
    auto t = createTable(dynamicConfig(1, 8, SIZE_MAX, ScorePolicy::kEpochLfu));
    t->setEpoch(3);
    t->upsert(keys, 4, v, nullptr);
    EXPECT_EQ(snapshot(*t).scores[5], (uint64_t{3} << 32) | 3);
    t->find(keys, 1);
    EXPECT_EQ(snapshot(*t).scores[5], (uint64_t{3} << 32) | 4);
    t->setEpoch(4);
    t->find(keys, 1);
    EXPECT_EQ(snapshot(*t).scores[5], (uint64_t{4} << 32) | 1);
  }
  {
    auto t = createTable(dynamicConfig(1, 8, SIZE_MAX, ScorePolicy::kEpochLru));
    t->setEpoch(2);
    t->upsert(keys, 4, v, nullptr);  // clock 1
    EXPECT_EQ(snapshot(*t).scores[6], (uint64_t{2} << 32) | 1);
  }
  {
    auto t = createTable(dynamicConfig(1, 8, SIZE_MAX, ScorePolicy::kCustomized));
    uint64_t given[] = {100, 200, 300, 400};
    t->upsert(keys, 4, v, given);
    auto s = snapshot(*t);
    EXPECT_EQ(s.scores[5], uint64_t{400});  // the last occurrence's score
    EXPECT_EQ(s.scores[6], uint64_t{200});
    t->upsert(keys, 2, v, nullptr);  // no scores: unchanged
    EXPECT_EQ(snapshot(*t).scores[5], uint64_t{400});
    int64_t fresh = 77;
    t->upsert(&fresh, 1, v, nullptr);  // a new row without a score gets 0
    EXPECT_EQ(snapshot(*t).scores[77], uint64_t{0});
  }
}

TEST(apply_gradients_inserts_missing_keys_and_sums_duplicates) {
  TableConfig c = dynamicConfig(2);
  c.initializer.kind = InitKind::kOnes;
  c.slotWidths = {2};
  c.slotInitial = {0.1f};
  auto t = createTable(c);
  int64_t keys[] = {3, 4, 3};
  float grads[] = {1, 2, 0.5f, 0.5f, 3, 4};
  OptimizerParams p;
  p.kind = OptimizerKind::kAdagrad;
  p.lr = 0.1;
  t->applyGradients(keys, 3, grads, p);
  auto s = snapshot(*t);
  // key 3: g = (4, 6), acc = 0.1 + g^2, w = 1 - 0.1 * g / sqrt(acc)
  float acc0 = static_cast<float>(static_cast<double>(0.1f) + 16.0);
  EXPECT_FLOAT_BITS(s.slots[3][0], acc0);
  EXPECT_FLOAT_BITS(s.values[3][0], static_cast<float>(1.0 - 0.4 / std::sqrt(static_cast<double>(acc0))));
  float acc4 = static_cast<float>(static_cast<double>(0.1f) + 0.25);
  EXPECT_FLOAT_BITS(s.values[4][1], static_cast<float>(1.0 - 0.1 * 0.5 / std::sqrt(static_cast<double>(acc4))));
  OptimizerParams adam;
  adam.kind = OptimizerKind::kAdam;
  EXPECT_THROW_CODE(t->applyGradients(keys, 3, grads, adam), kInvalidArgument);
}

namespace {

/** Adagrad of one key from its gradients in order, written out: float sum from 0, then the double formulas. */
void adagradByHand(std::vector<float>& weights, std::vector<float>& accumulators, const std::vector<const float*>& grads,
                   double lr) {
  // Raw pointers in the loops: -O0 (the sanitizer build) calls a function for every std::vector subscript.
  float* const w = weights.data();
  float* const acc = accumulators.data();
  const float* const* const rows = grads.data();
  const size_t n = grads.size();
  for (size_t c = 0; c < weights.size(); ++c) {
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) sum = sum + rows[i][c];
    const double g = static_cast<double>(sum) + 0.0 * static_cast<double>(w[c]);
    acc[c] = static_cast<float>(static_cast<double>(acc[c]) + g * g);
    w[c] = static_cast<float>(static_cast<double>(w[c]) - (lr * g) / std::sqrt(static_cast<double>(acc[c])));
  }
}

}  // namespace

// A batch of hot keys occurring hundreds of times, scattered, keys occurring once, and new keys,
// with gradients whose float sums depend on their order (1e7 and 1): two steps, every value and
// accumulator bit for bit against the formulas; directly and through a mod plan (each part's
// entries read in place, rows of the batch's gradient array); the scores as an upsert's.
// Batches and plan parts below 16384 entries sum, then update, on the calling thread; larger ones
// sum beside the pool's update of the keys of one occurrence (when it has two threads), and
// dedupe beside their probe; several dims.
TEST(apply_gradients_sums_scattered_duplicates_in_order) {
  const double lr = 0.05;
  const std::pair<size_t, size_t> shapes[] = {{5, 10000}, {5, 40000}, {48, 40000}, {64, 10000}, {64, 40000}};
  for (const auto& [dim, n] : shapes) {
    estest::Draw draw{7};
    std::vector<int64_t> keys(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t r = draw.below(100);
      keys[i] = r < 40 ? static_cast<int64_t>(r % 5) : static_cast<int64_t>(1000 + draw.below(30000));  // 5 hot keys
    }
    const float parts[] = {1e7f, 1.0f, -1e7f, 0.3f, -2.5f, 3e-5f};
    std::vector<float> grads(n * dim);
    for (float& g : grads) g = parts[draw.below(6)];
    OptimizerParams p;
    p.kind = OptimizerKind::kAdagrad;
    p.lr = lr;
    for (int planned = 0; planned < 2; ++planned) {
      TableConfig c = dynamicConfig(dim, 1024, SIZE_MAX, ScorePolicy::kLfu);
      c.initializer.kind = InitKind::kOnes;
      c.slotWidths = {static_cast<uint32_t>(dim)};
      c.slotInitial = {0.1f};
      auto t = createTable(c);
      auto twin = createTable(c);  // upserts of the same keys: the scores to expect
      const std::vector<ShardPlan> plans = estest::floorModPlans(2);
      std::map<int64_t, std::vector<const float*>> byKey;  // the entries each part applies, in order
      for (size_t i = 0; i < n; ++i) {
        int64_t l = keys[i];
        if (planned && !plans[1].owns(keys[i], &l)) continue;
        byKey[l].push_back(grads.data() + i * dim);
      }
      std::map<int64_t, std::vector<float>> w;
      std::map<int64_t, std::vector<float>> acc;
      for (auto& [k, g] : byKey) {
        w[k].assign(dim, 1.0f);
        acc[k].assign(dim, 0.1f);
      }
      std::vector<int64_t> local;
      for (auto& [k, g] : byKey) {
        for (size_t r = 0; r < g.size(); ++r) local.push_back(k);
      }
      std::vector<float> ones(local.size() * dim, 1.0f);
      for (int step = 0; step < 2; ++step) {
        if (planned) {
          plannedApplyGradients(*t, keys.data(), n, grads.data(), plans[1], p);
        } else {
          t->applyGradients(keys.data(), n, grads.data(), p);
        }
        twin->upsert(local.data(), local.size(), ones.data(), nullptr);
        for (auto& [k, g] : byKey) adagradByHand(w[k], acc[k], g, lr);
      }
      const auto s = snapshot(*t);
      const auto u = snapshot(*twin);
      EXPECT_EQ(s.values.size(), byKey.size());
      for (auto& [k, g] : byKey) {
        // each key's rows looked up once, not per column (an -O0 ASan build spent most of this
        // test in std::map look-ups)
        const auto& values = s.values.at(k);
        const auto& slots = s.slots.at(k);
        const std::vector<float>& wantValues = w.at(k);
        const std::vector<float>& wantSlots = acc.at(k);
        for (size_t col = 0; col < dim; ++col) {
          EXPECT_FLOAT_BITS(values[col], wantValues[col]);
          EXPECT_FLOAT_BITS(slots[col], wantSlots[col]);
        }
        EXPECT_EQ(s.scores.at(k), u.scores.at(k));
      }
    }
  }
}

TEST(apply_gradients_in_order_sums_on_narrow_storage_match_the_key_by_key_loop) {
  // float16 / bfloat16 tables take the in-order sums too (stop 38): a batch of duplicates (5 hot
  // keys in 40% of the entries) against a twin table given each key's gradients summed by hand in
  // float, in order, as a batch of distinct keys (the key-by-key loop): the same bits, values and slots.
  const size_t dim = 48;
  const size_t n = 40000;
  for (StorageDtype dtype : {StorageDtype::kFloat16, StorageDtype::kBfloat16}) {
    estest::Draw draw{11};
    std::vector<int64_t> keys(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t r = draw.below(100);
      keys[i] = r < 40 ? static_cast<int64_t>(r % 5) : static_cast<int64_t>(1000 + draw.below(30000));
    }
    const float parts[] = {1e3f, 1.0f, -1e3f, 0.3f, -2.5f, 3e-5f};
    std::vector<float> grads(n * dim);
    for (float& g : grads) g = parts[draw.below(6)];
    std::map<int64_t, std::vector<float>> sums;
    for (size_t i = 0; i < n; ++i) {
      auto it = sums.find(keys[i]);
      if (it == sums.end()) {
        std::vector<float> z(dim);
        for (size_t c = 0; c < dim; ++c) z[c] = 0.0f + grads[i * dim + c];
        sums.emplace(keys[i], z);
      } else {
        for (size_t c = 0; c < dim; ++c) it->second[c] = it->second[c] + grads[i * dim + c];
      }
    }
    std::vector<int64_t> distinct;
    std::vector<float> summed;
    for (auto& [k, g] : sums) {
      distinct.push_back(k);
      summed.insert(summed.end(), g.begin(), g.end());
    }
    OptimizerParams p;
    p.kind = OptimizerKind::kAdagrad;
    p.lr = 0.05;
    TableConfig c = dynamicConfig(dim, 1024, SIZE_MAX, ScorePolicy::kLru);
    c.initializer.kind = InitKind::kOnes;
    c.storage = dtype;
    c.slotWidths = {static_cast<uint32_t>(dim)};
    c.slotInitial = {0.1f};
    auto t = createTable(c);
    auto twin = createTable(c);
    for (int step = 0; step < 2; ++step) {
      t->applyGradients(keys.data(), n, grads.data(), p);
      twin->applyGradients(distinct.data(), distinct.size(), summed.data(), p);
    }
    const auto a = snapshot(*t);
    const auto b = snapshot(*twin);
    EXPECT_EQ(a.values.size(), sums.size());
    size_t differ = 0;
    for (auto& [k, g] : sums) {
      differ += estest::differingBits(a.values.at(k), b.values.at(k)) + estest::differingBits(a.slots.at(k), b.slots.at(k));
    }
    EXPECT_EQ(differ, size_t{0});
  }
}

TEST(import_rows_sets_slots_and_explicit_scores) {
  TableConfig c = dynamicConfig(1);
  c.slotWidths = {1, 1};
  c.slotInitial = {0.5f, 0.25f};
  auto t = createTable(c);
  int64_t keys[] = {1, 2};
  float vals[] = {10, 20};
  float s0[] = {1, 2};
  float s1[] = {3, 4};
  const float* slots[] = {s0, s1};
  uint64_t scores[] = {1000, 7};
  t->importRows(keys, 2, vals, slots, scores);
  auto s = snapshot(*t);
  EXPECT_EQ(s.scores[1], uint64_t{1000});
  EXPECT_EQ(s.slots[2][1], 4.0f);
  t->importRows(keys, 1, vals, nullptr, nullptr);  // slots reset, score by policy (lru: clock 2)
  s = snapshot(*t);
  EXPECT_EQ(s.slots[1][0], 0.5f);
  EXPECT_EQ(s.scores[1], uint64_t{2});
}

TEST(lookup_combined_sum_mean_sqrtn_weights_and_max_norm) {
  auto t = createTable(dynamicConfig(2));
  int64_t keys[] = {1, 2};
  float vals[] = {3, 4, 1, 0};  // |e1| = 5
  t->upsert(keys, 2, vals, nullptr);
  int32_t splits[] = {0, 2, 2, 3};
  int64_t ids[] = {1, 2, 99};  // 99 is missing: zeros
  float w[] = {2, 1, 1};
  BagInput bag{splits, 3, ids, 3, w};
  auto sum = t->lookupCombined(bag, Combiner::kSum, 0, false);
  EXPECT_EQ(sum[0], 7.0f);
  EXPECT_EQ(sum[1], 8.0f);
  EXPECT_EQ(sum[2], 0.0f);  // empty row
  EXPECT_EQ(sum[4], 0.0f);  // missing key
  auto mean = t->lookupCombined(bag, Combiner::kMean, 0, false);
  EXPECT_FLOAT_BITS(mean[0], static_cast<float>(7.0 / 3.0));
  auto sqrtn = t->lookupCombined(bag, Combiner::kSqrtn, 0, false);
  EXPECT_FLOAT_BITS(sqrtn[1], static_cast<float>(8.0 / std::sqrt(5.0)));
  auto clipped = t->lookupCombined(bag, Combiner::kSum, 2.5, false);  // e1 -> (1.5, 2) then * 2
  EXPECT_EQ(clipped[0], 4.0f);
  EXPECT_EQ(clipped[1], 4.0f);
  float zero[] = {0, 0, 0};
  BagInput zw{splits, 3, ids, 3, zero};
  auto dn = t->lookupCombined(zw, Combiner::kMean, 0, false);  // div-no-nan
  EXPECT_EQ(dn[0], 0.0f);
  EXPECT_EQ(t->size(), size_t{2});
  t->lookupCombined(bag, Combiner::kSum, 0, true);  // insertMissing
  EXPECT_EQ(t->size(), size_t{3});
}

TEST(large_batches_use_the_pool_and_agree) {
  auto t = createTable(dynamicConfig(4, 64));
  const size_t n = 70000;
  std::vector<int64_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = static_cast<int64_t>(i * 2654435761ULL) - 12345;
  auto vals = estest::valuesFor(keys, 4, [](int64_t k) { return static_cast<float>(k & 1023); });
  t->upsert(keys.data(), n, vals.data(), nullptr);
  EXPECT_EQ(t->size(), n);
  std::vector<int64_t> probe(keys);
  probe.push_back(-7);  // missing
  auto r = t->find(probe.data(), probe.size());
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += r.values[i * 4 + 3] != vals[i * 4 + 3] || !r.exists[i];
  EXPECT_EQ(wrong, size_t{0});
  EXPECT_EQ(static_cast<int>(r.exists[n]), 0);
  // a bag over all keys, one key per row
  std::vector<int32_t> splits(n + 1);
  for (size_t i = 0; i <= n; ++i) splits[i] = static_cast<int32_t>(i);
  BagInput bag{splits.data(), n, keys.data(), n, nullptr};
  auto out = t->lookupCombined(bag, Combiner::kSum, 0, false);
  wrong = 0;
  for (size_t i = 0; i < n * 4; ++i) wrong += out[i] != vals[i];
  EXPECT_EQ(wrong, size_t{0});
}

// Write calls take their per-call scratch from the scratch cache (memory.h): blocks
// come back for the next call of the same size class, and the cache never holds more
// than kScratchCacheBytes, whatever sizes pass through it.
TEST(scratch_cache_reuses_blocks_under_its_cap) {
  void* a = scratchAllocate(300000);  // the 512 KiB class
  static_cast<char*>(a)[299999] = 1;
  scratchFree(a, 300000);
  EXPECT_TRUE(scratchCachedBytes() <= kScratchCacheBytes);
  void* b = scratchAllocate(400000);  // same class: the block just freed
  EXPECT_TRUE(a == b);
  scratchFree(b, 400000);
  // More than the cap freed at once, in mixed sizes (some past the cap, some small).
  std::vector<std::pair<void*, size_t>> blocks;
  for (size_t i = 0; i < 48; ++i) {
    const size_t bytes = (i % 5 == 4) ? kScratchCacheBytes + 1 : (size_t{1000} << (i % 13));
    void* p = scratchAllocate(bytes);
    std::memset(p, static_cast<int>(i), bytes < 4096 ? bytes : 4096);
    blocks.emplace_back(p, bytes);
  }
  for (auto& [p, bytes] : blocks) {
    scratchFree(p, bytes);
    EXPECT_TRUE(scratchCachedBytes() <= kScratchCacheBytes);
  }
  // A scratch vector grows through several classes and keeps its contents.
  ScratchVector<int64_t> v;
  for (int64_t i = 0; i < 300000; ++i) v.push_back(i * 3 - 7);
  int64_t wrong = 0;
  for (int64_t i = 0; i < 300000; ++i) wrong += v[static_cast<size_t>(i)] != i * 3 - 7;
  EXPECT_EQ(wrong, int64_t{0});
}

// A stream of 64K-key writes (inserts, then overwrites with duplicates) through the
// scratch cache and the trim policy reads back the last value written per key.
TEST(stream_of_large_writes_reads_back_the_last_values) {
  auto t = createTable(dynamicConfig(2));
  const size_t n = 65536;
  std::unordered_map<int64_t, float> model;
  std::vector<int64_t> keys(n);
  std::vector<float> vals(n * 2);
  uint64_t x = 99;
  for (int call = 0; call < 12; ++call) {
    for (size_t i = 0; i < n; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      keys[i] = static_cast<int64_t>((x >> 33) % (call < 6 ? 400000 : 100000));  // later calls: many duplicates
      vals[i * 2] = static_cast<float>(call * 1000003 + static_cast<int>(i));
      vals[i * 2 + 1] = -vals[i * 2];
      model[keys[i]] = vals[i * 2];  // the last occurrence wins
    }
    t->upsert(keys.data(), n, vals.data(), nullptr);
    EXPECT_TRUE(scratchCachedBytes() <= kScratchCacheBytes);
  }
  EXPECT_EQ(t->size(), model.size());
  std::vector<int64_t> all;
  for (auto& [k, v] : model) all.push_back(k);
  auto r = t->find(all.data(), all.size());
  size_t wrong = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = model[all[i]];
    wrong += !r.exists[i] || r.values[i * 2] != want || r.values[i * 2 + 1] != -want;
  }
  EXPECT_EQ(wrong, size_t{0});
}

#if defined(__linux__) && defined(__GLIBC__)
namespace {
// `bytes` of fresh anonymous memory, every page written: RSS the process gains.
struct Touched {
  explicit Touched(size_t b) : bytes(b) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    std::memset(p, 1, bytes);
  }
  ~Touched() { munmap(p, bytes); }
  Touched(const Touched&) = delete;
  Touched& operator=(const Touched&) = delete;
  void* p;
  size_t bytes;
};
}  // namespace

// ScratchRelease trims once the RSS grew kTrimGrowthBytes inside write calls since the
// last trim (summed over calls); what grows between calls does not count, nor do calls
// of fewer than kMinItems keys or the inner one of nested calls. A call of kLargeItems
// keys always trims (which also starts the count afresh).
TEST(scratch_trim_counts_growth_inside_write_calls) {
  const size_t mib = size_t{1} << 20;
  static_assert(ScratchRelease::kTrimGrowthBytes == (size_t{4} << 20), "the sizes below assume 4 MiB");
  { ScratchRelease large(ScratchRelease::kLargeItems); }
  uint64_t trims = scratchTrims();
  EXPECT_TRUE(trims > 0);
  std::vector<std::unique_ptr<Touched>> kept;
  // 3 MiB inside a call: below the threshold; 3 more in the next call: past it.
  {
    ScratchRelease call(ScratchRelease::kMinItems);
    kept.push_back(std::make_unique<Touched>(3 * mib));
  }
  EXPECT_EQ(scratchTrims(), trims);
  {
    ScratchRelease call(ScratchRelease::kMinItems);
    kept.push_back(std::make_unique<Touched>(3 * mib));
  }
  EXPECT_EQ(scratchTrims(), trims + 1);
  trims = scratchTrims();
  // 24 MiB between calls, then calls that grow nothing: no trim.
  kept.push_back(std::make_unique<Touched>(24 * mib));
  for (int i = 0; i < 3; ++i) {
    ScratchRelease call(ScratchRelease::kMinItems);
  }
  EXPECT_EQ(scratchTrims(), trims);
  // A call below kMinItems, and a nested call, decide nothing; the outer call counts the
  // growth inside the inner one once.
  {
    ScratchRelease small(ScratchRelease::kMinItems - 1);
    kept.push_back(std::make_unique<Touched>(8 * mib));
  }
  EXPECT_EQ(scratchTrims(), trims);
  {
    ScratchRelease outer(ScratchRelease::kMinItems);
    {
      ScratchRelease inner(ScratchRelease::kMinItems);
      kept.push_back(std::make_unique<Touched>(8 * mib));
    }
    EXPECT_EQ(scratchTrims(), trims);
  }
  EXPECT_EQ(scratchTrims(), trims + 1);
  trims = scratchTrims();
  { ScratchRelease large(ScratchRelease::kLargeItems); }
  EXPECT_EQ(scratchTrims(), trims + 1);
}

// Write calls open at the same time on two threads (two tables written at once, a planned
// call's table writes on pool threads) count the growth made while both are open once, not
// once per call: 3 MiB grown inside both windows stays below the 4 MiB that trims (each
// call counting it made 6 MiB and a trim), whichever call ends first; the growth is still
// counted (1.5 MiB more in a later call trims).
TEST(scratch_trim_counts_growth_of_overlapping_calls_once) {
  const size_t mib = size_t{1} << 20;
  static_assert(ScratchRelease::kTrimGrowthBytes == (size_t{4} << 20), "the sizes below assume 4 MiB");
  std::vector<std::unique_ptr<Touched>> kept;
  uint64_t trims = 0;
  // The other thread's call opens and ends inside this thread's call.
  { ScratchRelease large(ScratchRelease::kLargeItems); }
  trims = scratchTrims();
  {
    ScratchRelease mine(ScratchRelease::kMinItems);
    std::unique_ptr<Touched> grown;
    std::thread other([&grown] {
      ScratchRelease call(ScratchRelease::kMinItems);
      grown = std::make_unique<Touched>(3 * mib);
    });
    other.join();
    kept.push_back(std::move(grown));
    EXPECT_EQ(scratchTrims(), trims);
  }
  EXPECT_EQ(scratchTrims(), trims);
  // This thread's call ends first, while the other's is still open.
  { ScratchRelease large(ScratchRelease::kLargeItems); }
  trims = scratchTrims();
  {
    std::mutex m;
    std::condition_variable cv;
    int stage = 0;
    const auto reach = [&](int s) {
      {
        std::lock_guard<std::mutex> lock(m);
        stage = s;
      }
      cv.notify_all();
    };
    const auto await = [&](int s) {
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return stage >= s; });
    };
    std::unique_ptr<Touched> grown;
    auto mine = std::make_unique<ScratchRelease>(ScratchRelease::kMinItems);
    std::thread other([&] {
      ScratchRelease call(ScratchRelease::kMinItems);
      grown = std::make_unique<Touched>(3 * mib);
      reach(1);
      await(2);
    });
    await(1);
    mine.reset();
    EXPECT_EQ(scratchTrims(), trims);
    reach(2);
    other.join();
    kept.push_back(std::move(grown));
  }
  EXPECT_EQ(scratchTrims(), trims);
  {
    ScratchRelease call(ScratchRelease::kMinItems);
    kept.push_back(std::make_unique<Touched>(3 * mib / 2));
  }
  EXPECT_EQ(scratchTrims(), trims + 1);
}

// When the RSS cannot be read (no /proc/self/statm), write calls count their own keys and
// trim once per kTrimItemsUnknownRss keys (1M: 64 calls of 16K keys), not after every call
// as before stop 37; calls below kMinItems and inner nested calls count nothing, growth
// counts nothing, a trim starts the count again; a call of kLargeItems keys still trims.
TEST(scratch_trim_without_the_rss_counts_keys) {
  const size_t mib = size_t{1} << 20;
  static_assert(ScratchRelease::kTrimItemsUnknownRss == 64 * ScratchRelease::kMinItems, "the counts below assume 64 calls");
  struct Failing {
    Failing() { failResidentReadsForTests(true); }
    ~Failing() { failResidentReadsForTests(false); }
  } failing;
  std::vector<std::unique_ptr<Touched>> kept;
  { ScratchRelease large(ScratchRelease::kLargeItems); }
  uint64_t trims = scratchTrims();
  for (int call = 0; call < 63; ++call) {
    ScratchRelease release(ScratchRelease::kMinItems);
    if (call == 0) kept.push_back(std::make_unique<Touched>(8 * mib));  // growth: not counted
    { ScratchRelease inner(ScratchRelease::kMinItems); }  // nested: not counted
  }
  for (int call = 0; call < 8; ++call) {
    ScratchRelease small(ScratchRelease::kMinItems - 1);
  }
  EXPECT_EQ(scratchTrims(), trims);
  { ScratchRelease release(ScratchRelease::kMinItems); }
  EXPECT_EQ(scratchTrims(), trims + 1);
  // Larger calls: 10 of 100,000 keys stay below 1M (1,048,576), the 11th trims.
  trims = scratchTrims();
  for (int call = 0; call < 10; ++call) {
    ScratchRelease release(100000);
  }
  EXPECT_EQ(scratchTrims(), trims);
  { ScratchRelease release(100000); }
  EXPECT_EQ(scratchTrims(), trims + 1);
  // A large call trims and starts the count again.
  trims = scratchTrims();
  for (int call = 0; call < 40; ++call) {
    ScratchRelease release(ScratchRelease::kMinItems);
  }
  { ScratchRelease large(ScratchRelease::kLargeItems); }
  EXPECT_EQ(scratchTrims(), trims + 1);
  for (int call = 0; call < 40; ++call) {
    ScratchRelease release(ScratchRelease::kMinItems);
  }
  EXPECT_EQ(scratchTrims(), trims + 1);
}

// Through a table: a write that adds 64K rows of 256 bytes trims; writes of the same keys
// with 16 MiB of other memory made between them (a lookup's fresh result) do not; every
// value read back is the last one written.
TEST(scratch_trim_after_rows_added_not_after_other_memory) {
  const size_t dim = 64, n = 65536;
  auto t = createTable(dynamicConfig(dim, n));
  std::vector<int64_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = static_cast<int64_t>(i * 7919 + 13);
  std::vector<float> vals(n * dim);
  auto fill = [&](int call) {
    for (size_t i = 0; i < n * dim; ++i) vals[i] = static_cast<float>(call * 100000 + static_cast<int>(i % 99991));
  };
  fill(0);
  uint64_t trims = scratchTrims();
  t->upsert(keys.data(), n, vals.data(), nullptr);
  EXPECT_TRUE(scratchTrims() > trims);
  t->upsert(keys.data(), n, vals.data(), nullptr);  // refills the scratch cache (not counted)
  trims = scratchTrims();
  std::vector<std::unique_ptr<Touched>> results;
  for (int call = 1; call <= 4; ++call) {
    results.push_back(std::make_unique<Touched>(size_t{16} << 20));
    fill(call);
    t->upsert(keys.data(), n, vals.data(), nullptr);
  }
  EXPECT_EQ(scratchTrims(), trims);
  EXPECT_TRUE(scratchCachedBytes() > 0);
  auto r = t->find(keys.data(), n);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    wrong += !r.exists[i];
    for (size_t c = 0; c < dim; ++c) wrong += r.values[i * dim + c] != vals[i * dim + c];
  }
  EXPECT_EQ(wrong, size_t{0});
}
#endif

// The read probe checks the home group's first fragment match and falls back to a
// full probe: keys that overflowed their home group (a chain of full groups), present
// keys behind a same-fragment neighbour, and absent keys sharing a present key's home
// group and fragment must all read right, inline and on the pool, in find and the bag.
TEST(find_through_full_groups_and_shared_fragments) {
  // A per-key initializer: an absent key reads its own initial row, not zeros or a neighbour's.
  TableConfig config = dynamicConfig(2, 1000);
  config.initializer.kind = InitKind::kUniform;
  config.initializer.a = -3;
  config.initializer.b = 5;
  config.initializer.seed = 17;
  const Initializer init = config.initializer;
  auto initial = [&init](int64_t k, size_t c) {
    float row[2];
    init.fill(k, 0, 2, row);
    return row[c];
  };
  auto t = createTable(config);
  auto* d = dynamic_cast<DynamicTable*>(t.get());
  ASSERT_TRUE(d != nullptr);
  const size_t groups = d->indexGroups();
  auto home = [&](int64_t k) { return hashGroup(hashKey(k), groups); };
  std::mt19937_64 rng(99);
  // 40 keys with home group 3 (2.5 full 16-slot groups' worth), then random keys up to ~13 per group.
  std::vector<int64_t> crowded, absent;
  while (crowded.size() < 40) {
    const int64_t k = static_cast<int64_t>(rng());
    if (home(k) == 3) crowded.push_back(k);
  }
  std::vector<int64_t> keys(crowded);
  while (keys.size() < 1000) keys.push_back(static_cast<int64_t>(rng()));
  // Absent keys in group 3 whose fragment equals a crowded key's, and a few more absent ones.
  while (absent.size() < 20) {
    const int64_t k = static_cast<int64_t>(rng());
    if (home(k) != 3) continue;
    for (int64_t c : crowded) {
      if (hashFragment(hashKey(c)) == hashFragment(hashKey(k)) && c != k) {
        absent.push_back(k);
        break;
      }
    }
  }
  // Values from 1e-6 to 1e18 in magnitude, not whole numbers.
  auto vals = estest::valuesFor(keys, 2, [](int64_t k) {
    const int64_t m = ((k % 1000) + 1000) % 1000;
    return static_cast<float>(static_cast<double>(m % 7 - 3) * std::pow(10.0, static_cast<double>(m % 5) * 6 - 6) + 0.25 * static_cast<double>(m % 3));
  });
  t->upsert(keys.data(), keys.size(), vals.data(), nullptr);
  ASSERT_TRUE(d->indexGroups() == groups);  // no rebuild: the crowded keys really share group 3
  // Queries: every key, every absent one, repeated past the pool threshold (70 * 1020 keys).
  std::vector<int64_t> q;
  for (int rep = 0; rep < 70; ++rep) {
    q.insert(q.end(), keys.begin(), keys.end());
    q.insert(q.end(), absent.begin(), absent.end());
  }
  for (size_t n : {keys.size() + absent.size(), q.size()}) {
    auto r = t->find(q.data(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t m = i % (keys.size() + absent.size());
      if (m < keys.size()) {
        wrong += !r.exists[i] || r.values[i * 2] != vals[m * 2] || r.values[i * 2 + 1] != vals[m * 2 + 1];
      } else {
        const int64_t k = absent[m - keys.size()];
        wrong += r.exists[i] != 0 || r.values[i * 2] != initial(k, 0) || r.values[i * 2 + 1] != initial(k, 1);
      }
    }
    EXPECT_EQ(wrong, size_t{0});
    // The bag: one key per row, so each output row is that key's row (absent: its initial row).
    std::vector<int32_t> splits(n + 1);
    for (size_t i = 0; i <= n; ++i) splits[i] = static_cast<int32_t>(i);
    BagInput bag{splits.data(), n, q.data(), n, nullptr};
    auto out = t->lookupCombined(bag, Combiner::kSum, 0, false);
    wrong = 0;
    for (size_t i = 0; i < n * 2; ++i) wrong += out[i] != r.values[i];
    EXPECT_EQ(wrong, size_t{0});
  }
  // A ragged bag over all the queries: empty rows, short ones, and two rows longer than the
  // chunks the read path pools at once (512 entries), absent keys among them. Each output row
  // is the float64 sum of its entries' values in bag order (absent: the key's initial row),
  // rounded once; the mean divides that sum by the row's length first (an empty row: zeros).
  std::vector<int32_t> splits{0};
  const size_t lengths[] = {0, 1, 7, 20, 3000, 3, 0, 600, 19};
  for (size_t r = 0; static_cast<size_t>(splits.back()) < q.size(); ++r) {
    const size_t want = r >= 9 && lengths[r % 9] > 500 ? 20 : lengths[r % 9];  // the long rows once
    splits.push_back(static_cast<int32_t>(splits.back() + std::min(want, q.size() - splits.back())));
  }
  const size_t bagRows = splits.size() - 1;
  BagInput ragged{splits.data(), bagRows, q.data(), q.size(), nullptr};
  for (Combiner combiner : {Combiner::kSum, Combiner::kMean}) {
    auto pooled = t->lookupCombined(ragged, combiner, 0, false);
    size_t wrong = 0;
    for (size_t r = 0; r < bagRows; ++r) {
      double acc[2] = {0, 0};
      for (int32_t j = splits[r]; j < splits[r + 1]; ++j) {
        const size_t m = static_cast<size_t>(j) % (keys.size() + absent.size());
        for (size_t c = 0; c < 2; ++c) {
          acc[c] += m < keys.size() ? static_cast<double>(vals[m * 2 + c]) : static_cast<double>(initial(absent[m - keys.size()], c));
        }
      }
      const double count = static_cast<double>(splits[r + 1] - splits[r]);
      for (size_t c = 0; c < 2; ++c) {
        const float want = combiner == Combiner::kSum ? static_cast<float>(acc[c]) : (count == 0 ? 0.0f : static_cast<float>(acc[c] / count));
        wrong += pooled[r * 2 + c] != want;
      }
    }
    EXPECT_EQ(wrong, size_t{0});
  }
  EXPECT_EQ(t->size(), keys.size());  // reads inserted nothing
}

TEST(disposed_table_throws_disposed) {
  auto t = createTable(dynamicConfig(1));
  t->markDisposed();
  int64_t k = 1;
  EXPECT_THROW_CODE(t->find(&k, 1), kDisposed);
  EXPECT_THROW_CODE(t->size(), kDisposed);
}

TEST(create_table_validates_config) {
  EXPECT_THROW_CODE(createTable(dynamicConfig(0)), kInvalidArgument);
  TableConfig c = dynamicConfig(2);
  c.slotWidths = {3};
  c.slotInitial = {0};
  EXPECT_THROW_CODE(createTable(c), kInvalidArgument);
  TableConfig huge = dynamicConfig(1024);
  huge.isStatic = true;
  huge.vocabularySize = SIZE_MAX / 4;
  EXPECT_THROW_CODE(createTable(huge), kInvalidArgument);  // size overflow
  TableConfig big = dynamicConfig(1024, size_t{1} << 40);  // 4 PiB: more than the machine has
  EXPECT_THROW_CODE(createTable(big), kFailedPrecondition);
}

ES_TEST_FILE_END
