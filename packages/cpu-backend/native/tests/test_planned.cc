// Shard plans and the planned bag: ShardPlan::owns against plain floor division,
// withRows against findInto, lookupCombinedPartial's lent-row path against its copy path,
// lookupCombinedShards against one table's bag (a complete floorMod split) or the partials
// added in shard order (other plans).
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "combine_plan.h"
#include "planned_ops.h"
#include "shard_plan.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;

namespace {

/** floor(k / n) and floorMod(k, n) written out in 128-bit arithmetic (the reference). */
void floorDivMod(int64_t k, int64_t n, int64_t* q, int64_t* r) {
  __int128 qq = static_cast<__int128>(k) / n;
  __int128 rr = static_cast<__int128>(k) % n;
  if (rr < 0) {
    rr += n;
    qq -= 1;
  }
  *q = static_cast<int64_t>(qq);
  *r = static_cast<int64_t>(rr);
}

}  // namespace

TEST(shard_plan_mod_owns_exactly_floor_mod_for_any_shard_count) {
  const int64_t keys[] = {0, 1, -1, 2, -2, 7, -7, 1024, -1025, INT64_MAX, INT64_MIN, INT64_MIN + 1, INT64_MAX - 3};
  for (int64_t n = 1; n <= 9; ++n) {
    for (bool roundRobin : {false, true}) {
      for (int64_t k : keys) {
        int64_t q = 0;
        int64_t r = 0;
        floorDivMod(k, n, &q, &r);
        int owners = 0;
        for (int64_t shard = 0; shard < n; ++shard) {
          ShardPlan p;
          p.kind = ShardPlan::kMod;
          p.numShards = n;
          p.shard = shard;
          p.roundRobin = roundRobin;
          int64_t local = 12345;
          const bool owns = p.owns(k, &local);
          EXPECT_EQ(owns, shard == r);
          if (owns) {
            ++owners;
            EXPECT_EQ(local, roundRobin ? q : k);
          }
        }
        EXPECT_EQ(owners, 1);
      }
    }
  }
}

TEST(with_rows_lends_find_values_and_inserts_nothing) {
  TableConfig c = dynamicConfig(3);
  c.initializer.kind = InitKind::kConstant;
  c.initializer.a = 0.25;
  auto t = createTable(c);
  const int64_t present[] = {5, -9};
  const float values[] = {1, 2, 3, 4, 5, 6};
  t->upsert(present, 2, values, nullptr);
  const int64_t keys[] = {-9, 77, 5, -9};
  std::vector<float> seen;
  const bool lent = t->withRows(keys, 4, [&](const float* const* rows) {
    for (size_t i = 0; i < 4; ++i) seen.insert(seen.end(), rows[i], rows[i] + 3);
  });
  ASSERT_TRUE(lent);
  const std::vector<float> want = {4, 5, 6, 0.25f, 0.25f, 0.25f, 1, 2, 3, 4, 5, 6};
  EXPECT_TRUE(seen == want);
  EXPECT_EQ(t->size(), size_t{2});
}

TEST(planned_partial_bag_lent_rows_equal_the_copied_rows) {
  // The same bag pooled on a table that lends rows (float32) and on one that copies (bfloat16
  // storage of values exact in bfloat16): partial sums per shard, added, equal a hand sum.
  const size_t dim = 2;
  const int64_t stored[] = {0, 1, 2, 3, -4, -5};
  const float values[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const int32_t splits[] = {0, 3, 3, 6};
  const int64_t keys[] = {0, -5, 3, 2, 1, 99};  // 99 missing: its initial value (0.5)
  const float weights[] = {1, 2, 0.5f, 1, 1, 2};
  BagInput bag{splits, 3, keys, 6, weights};
  // Hand sums (combiner sum): row 0 = 1*[1,2] + 2*[11,12] + 0.5*[7,8]; row 1 empty; row 2 = [5,6] + [3,4] + 2*[0.5,0.5]
  const double want[] = {26.5, 30, 0, 0, 9, 11};
  for (StorageDtype storage : {StorageDtype::kFloat32, StorageDtype::kBfloat16}) {
    for (int64_t n : {1, 2, 3, 4}) {
      std::vector<double> out(3 * dim, 0.0);
      for (int64_t shard = 0; shard < n; ++shard) {
        TableConfig c = dynamicConfig(dim);
        c.initializer.kind = InitKind::kConstant;
        c.initializer.a = 0.5;
        c.storage = storage;
        auto t = createTable(c);
        ShardPlan p;
        p.kind = n == 1 ? ShardPlan::kAll : ShardPlan::kMod;
        p.numShards = n;
        p.shard = shard;
        for (size_t i = 0; i < 6; ++i) {
          int64_t local = 0;
          if (p.owns(stored[i], &local)) t->upsert(&local, 1, values + i * dim, nullptr);
        }
        const size_t before = t->size();
        lookupCombinedPartial(*t, bag, Combiner::kSum, 0.0, false, p, out.data());
        EXPECT_EQ(t->size(), before);
      }
      for (size_t i = 0; i < 3 * dim; ++i) EXPECT_EQ(out[i], want[i]);
    }
  }
}

TEST(static_with_rows_lends_float32_rows_and_checks_keys) {
  TableConfig c;
  c.isStatic = true;
  c.vocabularySize = 4;
  c.dim = 2;
  auto t = createTable(c);
  const int64_t rows[] = {0, 1, 2, 3};
  const float values[] = {1, 2, 3, 4, 5, 6, 7, 8};
  t->upsert(rows, 4, values, nullptr);
  const int64_t keys[] = {3, 0, 3};
  std::vector<float> seen;
  ASSERT_TRUE(t->withRows(keys, 3, [&](const float* const* r) {
    for (size_t i = 0; i < 3; ++i) seen.insert(seen.end(), r[i], r[i] + 2);
  }));
  const std::vector<float> want = {7, 8, 1, 2, 7, 8};
  EXPECT_TRUE(seen == want);
  // A key past the rows: OUT_OF_RANGE before fn runs.
  const int64_t bad[] = {1, 4};
  bool called = false;
  EXPECT_THROW_CODE(t->withRows(bad, 2, [&](const float* const*) { called = true; }), kOutOfRange);
  EXPECT_TRUE(!called);
  // Narrower storage is not lent (the caller copies with findInto).
  c.storage = StorageDtype::kBfloat16;
  auto narrow = createTable(c);
  EXPECT_TRUE(!narrow->withRows(keys, 3, [&](const float* const*) { called = true; }));
  EXPECT_TRUE(!called);
}

TEST(planned_partial_bag_on_static_round_robin_shards_with_and_without_insert) {
  // Global rows 0..5 over N shards round-robin (row g on shard g % N at local row g / N);
  // a static table's findOrInsert is find, so training lookups pool from lent rows too.
  const size_t dim = 2;
  const float values[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // global row g = [2g+1, 2g+2]
  const int32_t splits[] = {0, 2, 2, 5};
  const int64_t keys[] = {5, 0, 2, 2, 3};
  const float weights[] = {1, 0.5f, 2, 1, 0.25f};
  BagInput bag{splits, 3, keys, 5, weights};
  // Hand sums (sum): row 0 = [11,12] + 0.5*[1,2]; row 1 empty; row 2 = 2*[5,6] + [5,6] + 0.25*[7,8]
  const double want[] = {11.5, 13, 0, 0, 16.75, 20};
  for (bool insert : {false, true}) {
    for (int64_t n : {1, 2, 3, 4}) {
      std::vector<double> out(3 * dim, 0.0);
      for (int64_t shard = 0; shard < n; ++shard) {
        TableConfig c;
        c.isStatic = true;
        c.dim = dim;
        c.vocabularySize = static_cast<size_t>((6 - shard + n - 1) / n);
        auto t = createTable(c);
        ShardPlan p;
        p.kind = n == 1 ? ShardPlan::kAll : ShardPlan::kMod;
        p.numShards = n;
        p.shard = shard;
        p.roundRobin = true;
        for (int64_t g = 0; g < 6; ++g) {
          int64_t local = 0;
          if (p.owns(g, &local)) t->upsert(&local, 1, values + g * dim, nullptr);
        }
        lookupCombinedPartial(*t, bag, Combiner::kSum, 0.0, insert, p, out.data());
      }
      for (size_t i = 0; i < 3 * dim; ++i) EXPECT_EQ(out[i], want[i]);
    }
  }
}

namespace {

using estest::Draw;

/** Tables of one logical table split by `plans` (twice built the same way: same rows, same scores). */
std::vector<std::shared_ptr<Table>> shardTables(const std::vector<ShardPlan>& plans, const std::vector<int64_t>& keys,
                                                size_t dim, StorageDtype storage) {
  std::vector<std::shared_ptr<Table>> out;
  for (const ShardPlan& p : plans) {
    TableConfig c = dynamicConfig(dim, 64);
    c.storage = storage;
    c.initializer.kind = InitKind::kConstant;
    c.initializer.a = 0.125;
    auto t = createTable(c);
    for (size_t i = 0; i < keys.size(); ++i) {
      int64_t local = 0;
      if (!p.owns(keys[i], &local)) continue;
      std::vector<float> v(dim);
      for (size_t d = 0; d < dim; ++d) v[d] = static_cast<float>((static_cast<int64_t>(i * 31 + d * 7) % 97) - 48) / 16.0f;
      t->upsert(&local, 1, v.data(), nullptr);
    }
    out.push_back(t);
  }
  return out;
}

std::vector<ShardPlan> modPlans(int64_t n) {
  std::vector<ShardPlan> plans;
  for (int64_t d = 0; d < n; ++d) {
    ShardPlan p;
    p.kind = n == 1 ? ShardPlan::kAll : ShardPlan::kMod;
    p.numShards = n;
    p.shard = d;
    plans.push_back(p);
  }
  return plans;
}

/** Whether the plans split keys by floorMod over one N, each residue owned by at most one plan (written out). */
bool modSplit(const std::vector<ShardPlan>& plans) {
  const int64_t n = plans[0].numShards;
  std::vector<int> owners(static_cast<size_t>(n), 0);
  for (const ShardPlan& p : plans) {
    if (p.kind != ShardPlan::kMod || p.numShards != n || p.roundRobin) return false;
    if (p.shard >= 0 && p.shard < n) owners[static_cast<size_t>(p.shard)] += 1;
  }
  for (int o : owners) {
    if (o > 1) return false;
  }
  return true;
}

/**
 * Whether every key of `bag` has exactly one owner under a floorMod split (its residue,
 * written out, owned by a plan): then lookupCombinedShards pools in bag order, as one table.
 */
bool everyKeyOwned(const std::vector<ShardPlan>& plans, const BagInput& bag) {
  if (!modSplit(plans)) return false;
  const int64_t n = plans[0].numShards;
  for (size_t i = 0; i < bag.n; ++i) {
    const int64_t residue = ((bag.keys[i] % n) + n) % n;
    bool owned = false;
    for (const ShardPlan& p : plans) owned = owned || p.shard == residue;
    if (!owned) return false;
  }
  return true;
}

/**
 * One split's tables (dim 5): the shards lookupCombinedShards reads, their twins (built the same
 * way) that the partials read, and, for a floorMod split, one table holding every row.
 */
struct SplitTables {
  std::vector<std::shared_ptr<Table>> mine;
  std::vector<std::shared_ptr<Table>> twin;
  std::vector<std::shared_ptr<Table>> whole;
};

SplitTables splitTables(const std::vector<ShardPlan>& plans, const std::vector<int64_t>& stored, StorageDtype storage) {
  SplitTables t;
  t.mine = shardTables(plans, stored, 5, storage);
  t.twin = shardTables(plans, stored, 5, storage);
  if (modSplit(plans)) t.whole = shardTables({ShardPlan{}}, stored, 5, storage);
  return t;
}

/**
 * lookupCombinedShards against its definition, the bits of every value: when every key
 * of the bag has exactly one owner (a floorMod split, the key's residue owned), the bag of one table holding every
 * row (its own lookupCombinedInto: each row's entries in bag order, signed zeros
 * included); otherwise each shard's lookupCombinedPartial into zeros, added in shard order
 * in the test and rounded once. The partials run on twin tables, and the shard tables'
 * rows and scores afterwards must equal the twins'. The tables may have been read before
 * (by earlier calls, alike: the shards by lookupCombinedShards, the twins by the partials).
 */
void expectShardsEqualPartials(const std::vector<ShardPlan>& plans, SplitTables& tables, const BagInput& bag, Combiner c,
                               double maxNorm, bool insert) {
  const size_t dim = 5;
  auto& mine = tables.mine;
  auto& twin = tables.twin;
  const size_t parts = plans.size();
  const size_t n = bag.rows * dim;
  std::vector<double> partials(parts * n, 0.0);
  for (size_t d = 0; d < parts; ++d) lookupCombinedPartial(*twin[d], bag, c, maxNorm, insert, plans[d], partials.data() + d * n);
  std::vector<float> want(n);
  if (everyKeyOwned(plans, bag)) {
    tables.whole[0]->lookupCombinedInto(bag, c, maxNorm, insert, want.data());
  } else {
    for (size_t i = 0; i < n; ++i) {
      double s = partials[i];
      for (size_t d = 1; d < parts; ++d) s = s + partials[d * n + i];
      want[i] = static_cast<float>(s);
    }
  }
  std::vector<Table*> raw;
  for (auto& t : mine) raw.push_back(t.get());
  std::vector<float> got(n, -7.0f);
  lookupCombinedShards(raw.data(), plans.data(), parts, bag, c, maxNorm, insert, got.data());
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += estest::floatBits(got[i]) != estest::floatBits(want[i]) ? 1 : 0;
  EXPECT_EQ(differ, size_t{0});
  for (size_t d = 0; d < parts; ++d) {
    const estest::Snapshot a = estest::snapshot(*mine[d]);
    const estest::Snapshot b = estest::snapshot(*twin[d]);
    EXPECT_TRUE(a.values == b.values);
    EXPECT_TRUE(a.scores == b.scores);
  }
}

}  // namespace

TEST(shards_lookup_is_one_tables_bag_or_the_partials_in_shard_order_bit_for_bit) {
  Draw r{42};
  std::vector<int64_t> stored(3000);
  for (auto& k : stored) k = static_cast<int64_t>(r.next() % 20000) - 10000;
  // Plans that are not one floorMod split: ranges, and a mod shard overlapping a range.
  std::vector<ShardPlan> mixed(3);
  mixed[0].kind = ShardPlan::kRange;
  mixed[0].start = -20000;
  mixed[0].end = 0;
  mixed[1].kind = ShardPlan::kRange;
  mixed[1].start = 0;
  mixed[1].end = 20000;
  mixed[2].kind = ShardPlan::kMod;
  mixed[2].numShards = 5;
  mixed[2].shard = 2;
  const int64_t partCounts[] = {1, 2, 3, 4, 8};
  // Bags: a small one (one thread) and one over the chunked parallel path, with empty
  // rows, missing keys, weights of both signs and zero (mean rows summing to 0, a NaN weight).
  for (size_t rows : {7, 400}) {
    std::vector<int32_t> splits{0};
    std::vector<int64_t> keys;
    std::vector<float> weights;
    for (size_t row = 0; row < rows; ++row) {
      const size_t len = row % 9 == 3 ? 0 : static_cast<size_t>(r.next() % 40);
      for (size_t j = 0; j < len; ++j) {
        keys.push_back(r.next() % 8 == 0 ? static_cast<int64_t>(r.next() % 100000) - 50000 : stored[r.next() % stored.size()]);
        weights.push_back(row == 5 && j == 0 ? NAN : static_cast<float>(r.unit() * 3 - 1));
      }
      if (row == 2 && len >= 2) weights[weights.size() - 1] = -weights[weights.size() - 2];
      splits.push_back(static_cast<int32_t>(keys.size()));
    }
    // The tables of each split that reads without inserting, built once per bag: each read
    // (weights or not, combiner, clipping) checks the values read and that the shards' rows and
    // scores still equal the twins' (reads insert nothing; the scores they touch are compared
    // after every read). Building two or three sets of tables per read took most of this case's
    // time in the sanitizer build (snapshots aside).
    std::vector<SplitTables> modTables;
    for (int64_t n : partCounts) modTables.push_back(splitTables(modPlans(n), stored, StorageDtype::kFloat32));
    SplitTables bf16Tables = splitTables(modPlans(3), stored, StorageDtype::kBfloat16);
    SplitTables mixedTables = splitTables(mixed, stored, StorageDtype::kFloat32);
    std::vector<ShardPlan> partial = modPlans(4);
    partial.pop_back();
    SplitTables partialTables = splitTables(partial, stored, StorageDtype::kFloat32);
    // The same bag without its keys of residue 3 (mod 4).
    std::vector<int32_t> ownedSplits{0};
    std::vector<int64_t> ownedKeys;
    std::vector<float> ownedWeights;
    for (size_t row = 0; row < rows; ++row) {
      for (size_t e = static_cast<size_t>(splits[row]); e < static_cast<size_t>(splits[row + 1]); ++e) {
        if (((keys[e] % 4) + 4) % 4 == 3) continue;
        ownedKeys.push_back(keys[e]);
        ownedWeights.push_back(weights[e]);
      }
      ownedSplits.push_back(static_cast<int32_t>(ownedKeys.size()));
    }
    for (bool weighted : {false, true}) {
      BagInput bag{splits.data(), rows, keys.data(), keys.size(), weighted ? weights.data() : nullptr};
      for (Combiner c : {Combiner::kSum, Combiner::kMean, Combiner::kSqrtn}) {
        for (size_t i = 0; i < modTables.size(); ++i) {
          expectShardsEqualPartials(modPlans(partCounts[i]), modTables[i], bag, c, 0.0, false);
          expectShardsEqualPartials(modPlans(partCounts[i]), modTables[i], bag, c, 2.5, false);
        }
        // Inserting: the find-first path, on fresh tables (every absent key inserted by this read).
        // (bfloat16 parts now take the one pipeline over every part, DynamicTable::leaseBag;
        // test_shards_bag.cc tests the find-first path over mixed storage.)
        SplitTables inserting = splitTables(modPlans(4), stored, StorageDtype::kFloat32);
        expectShardsEqualPartials(modPlans(4), inserting, bag, c, 0.0, true);
        expectShardsEqualPartials(modPlans(3), bf16Tables, bag, c, 0.0, false);
        expectShardsEqualPartials(mixed, mixedTables, bag, c, 0.0, false);
        // A floorMod split of 4 whose residue 3 has no part (sok's static variable of fewer rows
        // than devices): this bag has keys there (the partials in shard order); the bag of its
        // owned keys only pools in bag order, as one table, reading and inserting.
        expectShardsEqualPartials(partial, partialTables, bag, c, 0.0, false);
        BagInput ownedBag{ownedSplits.data(), rows, ownedKeys.data(), ownedKeys.size(), weighted ? ownedWeights.data() : nullptr};
        EXPECT_TRUE(!everyKeyOwned(partial, bag) && everyKeyOwned(partial, ownedBag));
        expectShardsEqualPartials(partial, partialTables, ownedBag, c, 2.5, false);
        SplitTables partialInserting = splitTables(partial, stored, StorageDtype::kFloat32);
        expectShardsEqualPartials(partial, partialInserting, ownedBag, c, 0.0, true);
      }
    }
  }
}

TEST(shards_lookup_keeps_one_tables_negative_zero) {
  // A mean row whose weights sum below zero over values summing to +0 pools to
  // +0 / negative = -0 in one table's bag; split over 2 or 4 floorMod shards it must too.
  const size_t dim = 3;
  const std::vector<int64_t> stored{10, 11, 12, 13};
  const float rows[] = {0.0f, 1.5f, -2.0f, 0.0f, -0.5f, 4.0f, 0.0f, 2.0f, 1.0f, 0.0f, 0.25f, -1.0f};
  const int64_t keys[] = {10, 11, 12, 13, 11};
  const float weights[] = {-2.0f, -1.0f, 0.5f, -0.5f, -3.0f};
  const int32_t splits[] = {0, 1, 3, 5};
  BagInput bag{splits, 3, keys, 5, weights};
  TableConfig wc = dynamicConfig(dim);
  auto whole = createTable(wc);
  whole->upsert(stored.data(), stored.size(), rows, nullptr);
  std::vector<float> want(3 * dim);
  whole->lookupCombinedInto(bag, Combiner::kMean, 0.0, false, want.data());
  EXPECT_TRUE(std::signbit(want[0]) && want[0] == 0.0f);  // row 0: (-2 * 0) / -2
  for (int64_t n : {2, 4}) {
    std::vector<std::shared_ptr<Table>> tables;
    std::vector<Table*> raw;
    const std::vector<ShardPlan> plans = modPlans(n);
    for (const ShardPlan& p : plans) {
      auto t = createTable(dynamicConfig(dim));
      for (size_t i = 0; i < stored.size(); ++i) {
        int64_t local = 0;
        if (p.owns(stored[i], &local)) t->upsert(&local, 1, rows + i * dim, nullptr);
      }
      raw.push_back(t.get());
      tables.push_back(t);
    }
    std::vector<float> got(3 * dim, 7.0f);
    lookupCombinedShards(raw.data(), plans.data(), plans.size(), bag, Combiner::kMean, 0.0, false, got.data());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(estest::floatBits(got[i]), estest::floatBits(want[i]));
  }
}

TEST(shards_lookup_gives_one_table_twice_the_partial_twice) {
  // One table as two parts (kAll): the fallback adds its partial to itself.
  TableConfig c = dynamicConfig(2);
  auto t = createTable(c);
  const int64_t k[] = {3};
  const float v[] = {1.5f, -2};
  t->upsert(k, 1, v, nullptr);
  const int32_t splits[] = {0, 1};
  BagInput bag{splits, 1, k, 1, nullptr};
  Table* raw[] = {t.get(), t.get()};
  ShardPlan plans[2];
  float out[2] = {0, 0};
  lookupCombinedShards(raw, plans, 2, bag, Combiner::kSum, 0.0, false, out);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], -4.0f);
}

namespace {

/** The same bits, or both NaN (a NaN's payload is not part of the contract). */
bool sameDouble(double a, double b) {
  uint64_t x, y;
  std::memcpy(&x, &a, 8);
  std::memcpy(&y, &b, 8);
  return (std::isnan(a) && std::isnan(b)) || x == y;
}
bool sameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || estest::floatBits(a) == estest::floatBits(b); }

}  // namespace

TEST(planned_bag_kernels_equal_a_plain_float64_loop_on_every_isa) {
  // combinePartialRows / combineShardStep without clipping (one kernel per WidenIsa:
  // kPortable the scalar loop, AVX2 / AVX-512 combine_vector.h's float64 vectors) against
  // the definition written out here: shard d's partial of bag row r, column c, is
  // p = 0 + (0.0 + Σ w_j e_j[c] over d's entries of r in bag order, widened to float64) / denom_r,
  // or 0 when denom_r == 0; combinePartialRows adds it to out; the shards' steps give
  // float32((p_0 + p_1) + ...) in shard order. Rows hold random bit patterns (NaNs,
  // infinities, subnormals), -0.0 everywhere in one row, values that cancel; entries are
  // owned by 3 shards at random, some by none (an incomplete plan), some rows by no shard
  // or by one only; denominators 0 and NaN; the rows copied or lent; every dim 1..130.
  uint32_t x = 99;
  const auto next = [&x]() {
    x = x * 1664525u + 1013904223u;
    return x >> 8;
  };
  const size_t parts = 3;
  for (size_t dim = 1; dim <= 130; ++dim) {
    const size_t nrows = 24;
    std::vector<float> v(nrows * dim);
    for (size_t r = 0; r < nrows; ++r) {
      for (size_t c = 0; c < dim; ++c) {
        const uint32_t u = next() * 2654435761u ^ static_cast<uint32_t>(r * 977 + c);
        float f;
        std::memcpy(&f, &u, 4);
        if (r % 4 != 0) f = std::ldexp(std::fmod(f, 1.0f), static_cast<int>(r % 7) * 9 - 20);  // finite (NaN stays NaN)
        if (r == 2) f = -0.0f;
        if (r == 3) f = c % 2 ? 1e30f : -1e30f;
        v[r * dim + c] = f;
      }
    }
    // Bags: 0..25 entries (bag 5 empty, bag 6 the -0.0 row alone, bag 9 owned by shard 1 only).
    std::vector<int32_t> splits{0};
    std::vector<size_t> ids;
    std::vector<size_t> owner;  // parts = owned by none
    const size_t bags = 20;
    for (size_t b = 0; b < bags; ++b) {
      const size_t len = b == 5 ? 0 : b == 6 ? 2 : (b * 7 + dim) % 26;
      for (size_t j = 0; j < len; ++j) {
        ids.push_back(b == 6 ? 2 : next() % nrows);
        const size_t o = next() % 8;
        owner.push_back(b == 9 ? 1 : b == 6 ? j : o < 7 ? o % parts : parts);
      }
      splits.push_back(static_cast<int32_t>(ids.size()));
    }
    const size_t nnz = ids.size();
    std::vector<float> weights(nnz);
    for (size_t j = 0; j < nnz; ++j) weights[j] = j % 3 == 0 ? 1.0f : 0.25f * static_cast<float>(j % 7) - 0.5f;
    if (splits[3] > splits[2]) weights[splits[2]] = std::nanf("");  // bag 2: NaN weight, NaN mean denominator
    // Each shard's owned entries (ascending positions) and their rows, copied and lent.
    std::vector<std::vector<uint32_t>> pos(parts);
    std::vector<std::vector<float>> copied(parts);
    std::vector<std::vector<const float*>> lent(parts);
    for (size_t j = 0; j < nnz; ++j) {
      if (owner[j] >= parts) continue;
      pos[owner[j]].push_back(static_cast<uint32_t>(j));
      copied[owner[j]].insert(copied[owner[j]].end(), v.begin() + ids[j] * dim, v.begin() + (ids[j] + 1) * dim);
      lent[owner[j]].push_back(v.data() + ids[j] * dim);
    }
    std::vector<double> acc(dim);
    for (Combiner comb : {Combiner::kSum, Combiner::kMean, Combiner::kSqrtn}) {
      for (bool weighted : {false, true}) {
        std::vector<double> denom(bags);
        for (size_t b = 0; b < bags; ++b) {
          double ws = 0, wq = 0;
          for (int32_t j = splits[b]; j < splits[b + 1]; ++j) {
            const double w = weighted ? weights[j] : 1.0;
            ws += w;
            wq += w * w;
          }
          denom[b] = comb == Combiner::kSum ? 1.0 : comb == Combiner::kMean ? ws : std::sqrt(wq);
        }
        // The plain quotients q = Σ / denom, partials p = 0 + q (0 when denom is 0), their shard-order sum.
        std::vector<std::vector<double>> q(parts, std::vector<double>(bags * dim));
        std::vector<std::vector<double>> p(parts, std::vector<double>(bags * dim));
        std::vector<float> want(bags * dim);
        for (size_t b = 0; b < bags; ++b) {
          for (size_t c = 0; c < dim; ++c) {
            double total = 0;
            for (size_t d = 0; d < parts; ++d) {
              double s = 0.0;
              for (int32_t j = splits[b]; j < splits[b + 1]; ++j) {
                if (owner[j] == d) s = s + (weighted ? weights[j] : 1.0) * static_cast<double>(v[ids[j] * dim + c]);
              }
              q[d][b * dim + c] = s / denom[b];
              p[d][b * dim + c] = denom[b] == 0 ? 0.0 : 0.0 + s / denom[b];
              total = d == 0 ? p[d][b * dim + c] : total + p[d][b * dim + c];
            }
            want[b * dim + c] = static_cast<float>(total);
          }
        }
        for (WidenIsa isa : widenIsas()) {
          for (bool lend : {false, true}) {
            const auto span = [&](size_t d, size_t r0, size_t r1) {
              PlanSpan s{splits.data(), r0, r1, weighted ? weights.data() : nullptr, pos[d].data(), pos[d].size(),
                         lend ? nullptr : copied[d].data(), denom.data(), 0.0, dim};
              if (lend) {
                s.rowPtrs = lent[d].data();
                s.lent = lent[d].size();
              }
              return s;
            };
            // combinePartialRows adds to what out holds (here -0.0 and 1.5): two spans.
            for (size_t d = 0; d < parts; ++d) {
              std::vector<double> out(bags * dim);
              for (size_t i = 0; i < out.size(); ++i) out[i] = i % 2 ? 1.5 : -0.0;
              combinePartialRowsWith(isa, span(d, 0, 7), out.data(), acc.data());
              combinePartialRowsWith(isa, span(d, 7, bags), out.data(), acc.data());
              size_t bad = 0;
              for (size_t i = 0; i < out.size(); ++i) {
                const double before = i % 2 ? 1.5 : -0.0;
                const double w = denom[i / dim] == 0 ? before : before + q[d][i];
                bad += sameDouble(out[i], w) ? 0 : 1;
              }
              EXPECT_EQ(bad, size_t{0});
            }
            // The shards' steps over two chunks of rows; one shard alone (first and last).
            std::vector<float> got(bags * dim, -1.0f);
            for (const auto& [r0, r1] : {std::pair<size_t, size_t>{0, 11}, std::pair<size_t, size_t>{11, bags}}) {
              std::vector<double> sum((r1 - r0) * dim, -7.0);
              for (size_t d = 0; d < parts; ++d) combineShardStepWith(isa, span(d, r0, r1), d == 0, d + 1 == parts, sum.data(), acc.data(), got.data());
            }
            size_t bad = 0;
            for (size_t i = 0; i < got.size(); ++i) bad += sameFloat(got[i], want[i]) ? 0 : 1;
            EXPECT_EQ(bad, size_t{0});
            std::vector<float> alone(bags * dim, -1.0f);
            std::vector<double> sum(bags * dim, -7.0);
            combineShardStepWith(isa, span(1, 0, bags), true, true, sum.data(), acc.data(), alone.data());
            bad = 0;
            for (size_t i = 0; i < alone.size(); ++i) bad += sameFloat(alone[i], static_cast<float>(p[1][i])) ? 0 : 1;
            EXPECT_EQ(bad, size_t{0});
          }
        }
      }
    }
  }
}

ES_TEST_FILE_END
