// The bag over dynamic tables split by floorMod (lookupCombinedShards over every part's table,
// DynamicTable::leaseBag: one pipeline, or on large tables the passes with each span's keys
// grouped by owner): against a plain loop written here over the values the test stored
// (present and absent keys, negative and extreme int64 keys, weights, sum / mean / sqrtn,
// clipping, 1, 2, 3, 4 and 8 parts), against one table's own bag on the same keys, and each
// part's scores against what its own reads would give. Each test runs both ways (the passes
// by lowering DynamicTable::findPassesFrom, as test_bag_passes.cc).
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "pass_table.h"
#include "planned_ops.h"
#include "shard_plan.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::differingBits;
using estest::Draw;
using estest::DrawnBag;
using estest::dynamicConfig;
using estest::PassesFrom;
using estest::residue;

namespace {

/** The stored value of key k, column c: a multiple of 1/16 below 8 in magnitude (exact in every storage type). */
float storedValue(int64_t k, size_t c) {
  const uint64_t h = (static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull) ^ (c * 0xBF58476D1CE4E5B9ull);
  return static_cast<float>(static_cast<int64_t>((h >> 40) % 255) - 127) / 16.0f;
}

/** Part d's initial value (constant; exact in every storage type): tells the owners apart. */
float partInitial(int64_t d) { return -0.75f + 0.5f * static_cast<float>(d); }

struct Setup {
  size_t dim;
  StorageDtype storage;
  ScorePolicy policy;
};

/** The parts of one logical table split over n by floorMod, each holding its stored keys (and a twin set built the same way). */
std::vector<std::shared_ptr<Table>> partTables(int64_t n, const std::vector<int64_t>& stored, const Setup& s,
                                               bool sharedInit) {
  std::vector<std::shared_ptr<Table>> out;
  for (int64_t d = 0; d < n; ++d) {
    TableConfig c = dynamicConfig(s.dim, 64, SIZE_MAX, s.policy);
    c.storage = s.storage;
    if (sharedInit) {
      c.initializer.kind = InitKind::kUniform;
      c.initializer.a = -1;
      c.initializer.b = 1;
      c.initializer.seed = 7;
    } else {
      c.initializer.kind = InitKind::kConstant;
      c.initializer.a = partInitial(d);
    }
    auto t = createTable(c);
    estest::upsertResidue(*t, n, d, stored, s.dim, storedValue);
    out.push_back(t);
  }
  return out;
}

std::vector<Table*> rawOf(const std::vector<std::shared_ptr<Table>>& tables) {
  std::vector<Table*> raw;
  for (const auto& t : tables) raw.push_back(t.get());
  return raw;
}

/** Each entry's e in float64 (bag.n rows of dim): its stored value, or the initial value of part floorMod(k, n). */
std::vector<double> entryRows(const BagInput& bag, size_t dim, int64_t n, const std::map<int64_t, bool>& isStored) {
  std::vector<double> rows(bag.n * dim);
  double* e = rows.data();
  for (size_t j = 0; j < bag.n; ++j, e += dim) {
    const int64_t k = bag.keys[j];
    const bool keyStored = isStored.count(k) != 0;  // once per entry, not per column (-O0 ASan: most of the case's time)
    for (size_t col = 0; col < dim; ++col) e[col] = keyStored ? storedValue(k, col) : partInitial(residue(k, n));
  }
  return rows;
}

/**
 * The bag written out: each row's entries in order, w e (w (maxNorm / ||e||) e when
 * clipped) added in float64, divided by 1, Σw or sqrt(Σw²), rounded once (zeros for a zero
 * divisor); an entry's e is entryRows' (its stored value, or the initial value of part
 * floorMod(k, n)). Raw pointers in the loops: -O0 (the sanitizer build) calls a function
 * for every std::vector subscript.
 */
std::vector<float> plainBagOf(const BagInput& bag, Combiner c, double maxNorm, size_t dim, const std::vector<double>& entries) {
  std::vector<float> out(bag.rows * dim);
  std::vector<double> accRow(dim);
  double* const acc = accRow.data();
  for (size_t r = 0; r < bag.rows; ++r) {
    for (size_t col = 0; col < dim; ++col) acc[col] = 0.0;
    double wsum = 0;
    double wsq = 0;
    for (int32_t j = bag.rowSplits[r]; j < bag.rowSplits[r + 1]; ++j) {
      const double* const e = entries.data() + static_cast<size_t>(j) * dim;
      const double w = bag.weights ? static_cast<double>(bag.weights[j]) : 1.0;
      wsum += w;
      wsq += w * w;
      double scale = w;
      if (maxNorm > 0) {
        double n2 = 0;
        for (size_t col = 0; col < dim; ++col) n2 += e[col] * e[col];
        if (std::sqrt(n2) > maxNorm) scale = (w * maxNorm) / std::sqrt(n2);
      }
      for (size_t col = 0; col < dim; ++col) acc[col] = acc[col] + scale * e[col];
    }
    const double div = c == Combiner::kMean ? wsum : c == Combiner::kSqrtn ? std::sqrt(wsq) : 1.0;
    float* const o = out.data() + r * dim;
    for (size_t col = 0; col < dim; ++col) o[col] = div == 0 ? 0.0f : static_cast<float>(acc[col] / div);
  }
  return out;
}

std::vector<float> plainBag(const BagInput& bag, Combiner c, double maxNorm, size_t dim, int64_t n,
                            const std::map<int64_t, bool>& isStored) {
  return plainBagOf(bag, c, maxNorm, dim, entryRows(bag, dim, n, isStored));
}

/** findPassesFrom for the pipeline (never passes) and for the passes (always). */
constexpr size_t kReadModes[] = {SIZE_MAX, 0};

/** Keys every residue class of every part count sees: extremes, small negatives, random. */
std::vector<int64_t> storedKeys(Draw& r) {
  std::vector<int64_t> stored{INT64_MIN, INT64_MAX, -1, 0, 1, -2, -3, -7, -8, INT64_MIN + 3, INT64_MAX - 5};
  for (int i = 0; i < 2000; ++i) stored.push_back(static_cast<int64_t>(r.next() % 40000) - 20000);
  for (int i = 0; i < 50; ++i) stored.push_back(static_cast<int64_t>(r.next()));  // anywhere in int64
  return stored;
}

/** A bag of `rows` rows (some empty) over stored keys, absent ones and absent extremes; weights of both signs, zeros. */
DrawnBag drawBag(Draw& r, size_t rows, const std::vector<int64_t>& stored) {
  const int64_t absentEdges[] = {INT64_MIN + 1, INT64_MAX - 1, INT64_MIN + 2, -9223372036854775000LL};
  DrawnBag b;
  for (size_t row = 0; row < rows; ++row) {
    const size_t len = row % 11 == 4 ? 0 : static_cast<size_t>(r.next() % 45);
    for (size_t j = 0; j < len; ++j) {
      const uint64_t pick = r.next() % 20;
      int64_t k;
      if (pick < 14) {
        k = stored[r.next() % stored.size()];
      } else if (pick < 18) {
        k = static_cast<int64_t>(r.next() % 200000) - 100000;  // mostly absent
      } else {
        k = absentEdges[r.next() % 4];
      }
      b.keys.push_back(k);
      b.weights.push_back(r.next() % 13 == 0 ? 0.0f : static_cast<float>(static_cast<int>(r.next() % 17) - 6) / 4.0f);
    }
    if (row == 3 && len >= 2) b.weights[b.weights.size() - 1] = -b.weights[b.weights.size() - 2];  // a mean row summing to 0
    b.splits.push_back(static_cast<int32_t>(b.keys.size()));
  }
  return b;
}

/** Each part's occurrences of its keys in the bag, in bag order. */
std::vector<std::vector<int64_t>> ownedInOrder(const BagInput& bag, int64_t n) {
  std::vector<std::vector<int64_t>> owned(static_cast<size_t>(n));
  for (size_t j = 0; j < bag.n; ++j) owned[static_cast<size_t>(residue(bag.keys[j], n))].push_back(bag.keys[j]);
  return owned;
}

}  // namespace

TEST(shards_bag_over_dynamic_parts_is_the_plain_bag_bit_for_bit) {
  Draw r{2029};
  const std::vector<int64_t> stored = storedKeys(r);
  std::map<int64_t, bool> isStored;
  for (int64_t k : stored) isStored[k] = true;
  const Setup setups[] = {{5, StorageDtype::kFloat32, ScorePolicy::kLru},
                          {64, StorageDtype::kFloat32, ScorePolicy::kLfu},
                          {16, StorageDtype::kBfloat16, ScorePolicy::kLru},
                          {24, StorageDtype::kFloat16, ScorePolicy::kEpochLfu}};
  // A bag on one thread and one over the parallel chunks (about 13k entries), read by the
  // pipeline and in passes. The parts' rows and scores are checked after the first read of each
  // set of parts (a read's scores depend on the keys and their order only, not on the combiner,
  // the clipping or the weights); the 11 other reads (weights or not, combiners, clippings) then
  // read the same parts, whose scores the reads before have touched (the values never change:
  // nothing is inserted). Building the parts and their snapshots for every read took most of
  // this case's time in the sanitizer build (118 of 210 s; now about 20).
  for (const size_t from : kReadModes) {
    const PassesFrom mode(from);
    for (size_t rows : {9, 600}) {
      const DrawnBag b = drawBag(r, rows, stored);
      for (const Setup& s : setups) {
        for (int64_t n : {1, 2, 3, 4, 8}) {
          const std::vector<ShardPlan> plans = estest::floorModPlans(n);
          auto tables = partTables(n, stored, s, false);
          std::vector<Table*> raw = rawOf(tables);
          // the entries' rows of the plain bag, the same for the 12 reads (weights only scale them)
          const std::vector<double> entries =
              entryRows(BagInput{b.splits.data(), rows, b.keys.data(), b.keys.size(), nullptr}, s.dim, n, isStored);
          bool first = true;
          for (bool weighted : {false, true}) {
            const BagInput bag{b.splits.data(), rows, b.keys.data(), b.keys.size(), weighted ? b.weights.data() : nullptr};
            for (Combiner c : {Combiner::kSum, Combiner::kMean, Combiner::kSqrtn}) {
              for (double maxNorm : {0.0, 2.5}) {
                std::vector<float> got(rows * s.dim, -7.0f);
                lookupCombinedShards(raw.data(), plans.data(), plans.size(), bag, c, maxNorm, false, got.data());
                EXPECT_EQ(differingBits(got, plainBagOf(bag, c, maxNorm, s.dim, entries)), size_t{0});
                if (!first) continue;
                first = false;
                // Each part's rows and scores: as its own read of its keys in bag order (twins), nothing inserted.
                auto twins = partTables(n, stored, s, false);
                const auto owned = ownedInOrder(bag, n);
                for (size_t d = 0; d < tables.size(); ++d) {
                  const estest::Snapshot before = estest::snapshot(*twins[d]);
                  std::vector<float> v(owned[d].size() * s.dim);
                  std::vector<uint8_t> e(owned[d].size());
                  twins[d]->findInto(owned[d].data(), owned[d].size(), v.data(), e.data());
                  const estest::Snapshot a = estest::snapshot(*tables[d]);
                  const estest::Snapshot t = estest::snapshot(*twins[d]);
                  EXPECT_TRUE(a.values == t.values);
                  EXPECT_TRUE(a.scores == t.scores);
                  if (s.policy == ScorePolicy::kLfu) {
                    // Written out: every stored key's score grew by its occurrences.
                    std::map<int64_t, uint64_t> count;
                    for (int64_t k : owned[d]) count[k] += 1;
                    for (const auto& [k, score] : a.scores) {
                      const auto it = count.find(k);
                      EXPECT_EQ(score, before.scores.at(k) + (it == count.end() ? 0 : it->second));
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(shards_bag_over_dynamic_parts_is_one_tables_bag_with_a_shared_initializer) {
  // Parts that share a per-key initializer: every value, missing ones too, is the whole table's.
  Draw r{77};
  const std::vector<int64_t> stored = storedKeys(r);
  const DrawnBag b = drawBag(r, 500, stored);
  const BagInput bag{b.splits.data(), 500, b.keys.data(), b.keys.size(), b.weights.data()};
  for (const Setup& s : {Setup{7, StorageDtype::kFloat32, ScorePolicy::kLru}, Setup{64, StorageDtype::kBfloat16, ScorePolicy::kLfu}}) {
    auto whole = partTables(1, stored, s, true);
    for (Combiner c : {Combiner::kSum, Combiner::kMean, Combiner::kSqrtn}) {
      std::vector<float> want(500 * s.dim);
      whole[0]->lookupCombinedInto(bag, c, 0.0, false, want.data());
      for (int64_t n : {1, 2, 3, 4, 8}) {
        auto tables = partTables(n, stored, s, true);
        std::vector<Table*> raw = rawOf(tables);
        const std::vector<ShardPlan> plans = estest::floorModPlans(n);
        for (const size_t from : kReadModes) {
          const PassesFrom mode(from);
          std::vector<float> got(want.size(), 3.0f);
          lookupCombinedShards(raw.data(), plans.data(), plans.size(), bag, c, 0.0, false, got.data());
          EXPECT_EQ(differingBits(got, want), size_t{0});
        }
      }
    }
  }
}

TEST(shards_bag_over_a_disposed_part_throws_and_releases_every_lock) {
  Draw r{5};
  const std::vector<int64_t> stored = storedKeys(r);
  const DrawnBag b = drawBag(r, 300, stored);
  const BagInput bag{b.splits.data(), 300, b.keys.data(), b.keys.size(), nullptr};
  auto tables = partTables(3, stored, {4, StorageDtype::kFloat32, ScorePolicy::kLru}, false);
  std::vector<Table*> raw = rawOf(tables);
  const std::vector<ShardPlan> plans = estest::floorModPlans(3);
  tables[2]->markDisposed();
  std::vector<float> out(300 * 4);
  EXPECT_THROW_CODE(lookupCombinedShards(raw.data(), plans.data(), 3, bag, Combiner::kSum, 0.0, false, out.data()), kDisposed);
  // The locks taken before the disposed part are released: writers go through.
  const int64_t k = 9;
  const float v[4] = {1, 2, 3, 4};
  tables[0]->upsert(&k, 1, v, nullptr);
  tables[1]->upsert(&k, 1, v, nullptr);
  EXPECT_EQ(tables[0]->size() + tables[1]->size() > 0, true);
}

TEST(shards_bag_reads_each_part_under_its_own_clock_in_any_part_order) {
  // Parts with different call histories (part d read d + 1 times before), given in a
  // permuted order, plus a part that owns nothing; a bag with an empty row, a row longer
  // than a pooling chunk (2500 entries: the passes group it in pieces) and ordinary rows;
  // then a bag without entries. By the pipeline and in passes.
  for (const size_t from : kReadModes) {
    const PassesFrom mode(from);
    Draw r{31};
    const std::vector<int64_t> stored = storedKeys(r);
    std::map<int64_t, bool> isStored;
    for (int64_t k : stored) isStored[k] = true;
    const Setup s{8, StorageDtype::kFloat32, ScorePolicy::kLru};
    DrawnBag b = drawBag(r, 40, stored);
    DrawnBag longRow;
    for (size_t j = 0; j < 2500; ++j) longRow.keys.push_back(j % 3 == 0 ? static_cast<int64_t>(j) - 90000 : stored[r.next() % stored.size()]);
    longRow.splits = {0, 0, 2500};
    for (size_t i = 1; i < b.splits.size(); ++i) longRow.splits.push_back(2500 + b.splits[i]);
    longRow.keys.insert(longRow.keys.end(), b.keys.begin(), b.keys.end());
    const size_t rows = longRow.splits.size() - 1;
    const BagInput bag{longRow.splits.data(), rows, longRow.keys.data(), longRow.keys.size(), nullptr};
    auto tables = partTables(3, stored, s, false);
    auto twins = partTables(3, stored, s, false);
    const int64_t absent = 123456789;
    for (size_t d = 0; d < 3; ++d) {
      for (size_t i = 0; i <= d; ++i) {
        tables[d]->find(&absent, 1);
        twins[d]->find(&absent, 1);
      }
    }
    TableConfig idle = dynamicConfig(s.dim, 64, SIZE_MAX, s.policy);
    auto empty = createTable(idle);
    // Part order 2, 0, idle, 1: each plan names its residue; the idle part owns none (shard 3 of 3).
    std::vector<ShardPlan> plans = estest::floorModPlans(3);
    ShardPlan none = plans[0];
    none.shard = 3;
    const std::vector<ShardPlan> order{plans[2], plans[0], none, plans[1]};
    std::vector<Table*> raw{tables[2].get(), tables[0].get(), empty.get(), tables[1].get()};
    std::vector<float> got(rows * s.dim, -7.0f);
    lookupCombinedShards(raw.data(), order.data(), order.size(), bag, Combiner::kMean, 0.0, false, got.data());
    EXPECT_EQ(differingBits(got, plainBag(bag, Combiner::kMean, 0.0, s.dim, 3, isStored)), size_t{0});
    const auto owned = ownedInOrder(bag, 3);
    for (size_t d = 0; d < 3; ++d) {
      std::vector<float> v(owned[d].size() * s.dim);
      std::vector<uint8_t> e(owned[d].size());
      twins[d]->findInto(owned[d].data(), owned[d].size(), v.data(), e.data());
      EXPECT_TRUE(estest::snapshot(*tables[d]).scores == estest::snapshot(*twins[d]).scores);
    }
    EXPECT_EQ(empty->size(), size_t{0});
    // No entries at all: every row is zeros, nothing touched.
    const std::vector<int32_t> emptySplits{0, 0, 0};
    const BagInput noEntries{emptySplits.data(), 2, longRow.keys.data(), 0, nullptr};
    const estest::Snapshot before = estest::snapshot(*tables[1]);
    std::vector<float> zeros(2 * s.dim, 5.0f);
    lookupCombinedShards(raw.data(), order.data(), order.size(), noEntries, Combiner::kSum, 0.0, false, zeros.data());
    for (float x : zeros) EXPECT_FLOAT_BITS(x, 0.0f);
    EXPECT_TRUE(estest::snapshot(*tables[1]).scores == before.scores);
  }
}

TEST(shards_bag_falls_back_for_parts_one_pipeline_cannot_read) {
  // leaseBag refuses parts of another storage type or dim, a static part and round-robin
  // owners; lookupCombinedShards then takes its other paths (each part's rows read first for
  // a table that does not lend), with the same values.
  Draw r{43};
  const std::vector<int64_t> stored = storedKeys(r);
  std::map<int64_t, bool> isStored;
  for (int64_t k : stored) isStored[k] = true;
  auto f32 = partTables(3, stored, {16, StorageDtype::kFloat32, ScorePolicy::kLru}, false);
  auto bf16 = partTables(3, stored, {16, StorageDtype::kBfloat16, ScorePolicy::kLru}, false);
  auto dim8 = partTables(3, stored, {8, StorageDtype::kFloat32, ScorePolicy::kLru}, false);
  auto fixed = createTable(estest::staticConfig(100, 16));
  const uint32_t residues[3] = {0, 1, 2};
  const ResidueOwners mod(residues, 3, false);
  std::vector<Table*> mixedStorage{f32[0].get(), bf16[1].get(), bf16[2].get()};
  std::vector<Table*> mixedDim{f32[0].get(), dim8[1].get(), f32[2].get()};
  std::vector<Table*> withStatic{f32[0].get(), fixed.get(), f32[2].get()};
  std::vector<Table*> same{f32[0].get(), f32[1].get(), f32[2].get()};
  EXPECT_TRUE(f32[0]->leaseBag(mixedStorage.data(), 3, mod) == nullptr);
  EXPECT_TRUE(f32[0]->leaseBag(mixedDim.data(), 3, mod) == nullptr);
  EXPECT_TRUE(f32[0]->leaseBag(withStatic.data(), 3, mod) == nullptr);
  EXPECT_TRUE(f32[0]->leaseBag(same.data(), 3, ResidueOwners(residues, 3, true)) == nullptr);
  EXPECT_TRUE(f32[0]->leaseBag(same.data(), 3, mod) != nullptr);
  // Mixed storage through lookupCombinedShards: the stored values are exact in bfloat16, so the plain bag holds.
  const DrawnBag b = drawBag(r, 200, stored);
  const BagInput bag{b.splits.data(), 200, b.keys.data(), b.keys.size(), b.weights.data()};
  const std::vector<ShardPlan> plans = estest::floorModPlans(3);
  for (Combiner c : {Combiner::kSum, Combiner::kSqrtn}) {
    std::vector<float> got(200 * 16, -7.0f);
    lookupCombinedShards(mixedStorage.data(), plans.data(), 3, bag, c, 0.0, false, got.data());
    EXPECT_EQ(differingBits(got, plainBag(bag, c, 0.0, 16, 3, isStored)), size_t{0});
  }
}

ES_TEST_FILE_END
