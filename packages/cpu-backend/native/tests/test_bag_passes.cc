// The dynamic bag on large tables resolves its keys with find's passes (poolBagPasses,
// dynamic_read.cc). These tests lower DynamicTable::findPassesFrom so that small tables take
// that path, and check lookupCombined (no insertMissing) against a plain loop over a map of
// what was stored: float64 sums in bag order, the divisor, absent keys' initial values (rounded
// to the storage type), and the scores the read leaves.
#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "pass_table.h"
#include "table_helpers.h"
#include "test.h"

using namespace embedstack;
using estest::dynamicConfig;
using estest::snapshot;

namespace {

using estest::PassesFrom;
using estest::storedAs;

/** The reference bag: per row, float64 sums in entry order (w * e, or e unweighted), then the divisor. */
std::vector<float> plainBag(const std::vector<int32_t>& splits, const std::vector<int64_t>& ids, const float* weights,
                            Combiner combiner, size_t dim, const std::map<int64_t, std::vector<float>>& want,
                            const Initializer& init, StorageDtype storage) {
  const size_t rows = splits.size() - 1;
  std::vector<float> out(rows * dim);
  std::vector<float> e(dim);
  for (size_t r = 0; r < rows; ++r) {
    std::vector<double> acc(dim, 0.0);
    double wsum = 0;
    double wsq = 0;
    for (int32_t j = splits[r]; j < splits[r + 1]; ++j) {
      const auto it = want.find(ids[j]);
      if (it != want.end()) {
        e = it->second;
      } else {
        init.fill(ids[j], 0, dim, e.data());
        for (float& v : e) v = storedAs(storage, v);
      }
      const double w = weights ? weights[j] : 1.0;
      wsum += w;
      wsq += w * w;
      for (size_t c = 0; c < dim; ++c) acc[c] = weights ? acc[c] + w * static_cast<double>(e[c]) : acc[c] + e[c];
    }
    const double div = combiner == Combiner::kMean ? wsum : combiner == Combiner::kSqrtn ? std::sqrt(wsq) : 1.0;
    for (size_t c = 0; c < dim; ++c) out[r * dim + c] = div == 0 ? 0.0f : static_cast<float>(acc[c] / div);
  }
  return out;
}

/**
 * A table with a crowded index group (60 keys sharing home group 5), the extreme keys and
 * random keys; bags of 0, 1, a few, 2500 entries (more than a chunk: resolved in pieces) and
 * random sizes, over present keys, absent keys (some sharing a crowded key's group and
 * fragment) and repeats; with and without weights; sum, mean and sqrtn; a small bag (one
 * range) and a large one (split over the pool).
 */
void checkBagPasses(StorageDtype storage, size_t dim, ScorePolicy policy) {
  std::mt19937_64 rng(4077);
  estest::PassTable p = estest::passTable(storage, dim, policy, rng, 26, 60);
  Table* const t = p.table.get();
  ASSERT_TRUE(dynamic_cast<DynamicTable&>(*t).bagInPasses());
  const Initializer& init = p.init;
  const std::vector<int64_t>& keys = p.keys;
  const std::vector<int64_t>& crowded = p.crowded;
  const std::vector<int64_t>& absent = p.absent;
  const std::map<int64_t, std::vector<float>>& want = p.want;
  const auto draw = [&]() {
    const uint64_t u = rng() % 100;
    if (u < 8) return absent[rng() % absent.size()];
    if (u < 20) return crowded[rng() % crowded.size()];
    return keys[rng() % keys.size()];
  };
  // Bag shapes: row sizes, then ids.
  std::vector<std::vector<size_t>> shapes;
  shapes.push_back({0});
  shapes.push_back({1, 0, 3, 0, 0, 20, 2500, 7, 0});
  std::vector<size_t> many;
  size_t total = 0;
  while (total < 40000) {
    many.push_back(rng() % 100 == 0 ? 1500 + rng() % 1200 : rng() % 41);
    total += many.back();
  }
  shapes.push_back(many);
  uint64_t clock = 1;  // the upsert's call
  for (const auto& sizes : shapes) {
    std::vector<int32_t> splits = {0};
    std::vector<int64_t> ids;
    for (size_t s : sizes) {
      for (size_t k = 0; k < s; ++k) ids.push_back(draw());
      splits.push_back(static_cast<int32_t>(ids.size()));
    }
    std::vector<float> weights(ids.size());
    for (float& w : weights) w = static_cast<float>(static_cast<int>(rng() % 2001) - 500) / 256.0f;
    for (const bool weighted : {false, true}) {
      for (const Combiner combiner : {Combiner::kSum, Combiner::kMean, Combiner::kSqrtn}) {
        ++clock;
        const estest::Snapshot before = snapshot(*t);
        BagInput bag{splits.data(), sizes.size(), ids.data(), ids.size(), weighted ? weights.data() : nullptr};
        auto got = t->lookupCombined(bag, combiner, 0, false);
        const estest::Snapshot after = snapshot(*t);
        const std::vector<float> expect =
            plainBag(splits, ids, weighted ? weights.data() : nullptr, combiner, dim, want, init, storage);
        size_t wrong = 0;
        for (size_t i = 0; i < expect.size(); ++i) wrong += estest::floatBits(got[i]) != estest::floatBits(expect[i]);
        EXPECT_EQ(wrong, size_t{0});
        std::map<int64_t, uint64_t> reads;
        for (int64_t k : ids) {
          if (want.count(k)) ++reads[k];
        }
        EXPECT_EQ(after.scores.size(), keys.size());  // reads insert nothing
        const size_t badScores = estest::wrongScores(before, after, reads, policy, clock);
        EXPECT_EQ(badScores, size_t{0});
      }
    }
  }
}

}  // namespace

TEST(bag_in_passes_float32_against_a_plain_loop) {
  PassesFrom all(0);
  checkBagPasses(StorageDtype::kFloat32, 64, ScorePolicy::kLru);
  checkBagPasses(StorageDtype::kFloat32, 40, ScorePolicy::kLfu);
}

TEST(bag_in_passes_narrow_storage_against_a_plain_loop) {
  PassesFrom all(0);
  checkBagPasses(StorageDtype::kBfloat16, 64, ScorePolicy::kLru);
  checkBagPasses(StorageDtype::kFloat16, 7, ScorePolicy::kLfu);
}

TEST(bag_pipeline_and_passes_agree_with_clipping_and_extremes) {
  // max / min and maxNorm clipping: the same bits through either path.
  auto t = createTable(dynamicConfig(16, 4096));
  std::vector<int64_t> keys(3000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<int64_t>(i * 7919) - 1000;
  std::vector<float> vals(keys.size() * 16);
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(i % 1013) * 0.37f - 181.0f;
  t->upsert(keys.data(), keys.size(), vals.data(), nullptr);
  std::vector<int64_t> ids;
  std::vector<int32_t> splits = {0};
  for (size_t r = 0; r < 1500; ++r) {
    for (size_t k = 0; k < r % 23; ++k) ids.push_back(r * 31 + k == 77 ? -5 : keys[(r * 131 + k * 17) % keys.size()]);
    splits.push_back(static_cast<int32_t>(ids.size()));
  }
  std::vector<float> w(ids.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.5f - 1.0f;
  BagInput bag{splits.data(), splits.size() - 1, ids.data(), ids.size(), w.data()};
  for (const Combiner c : {Combiner::kSum, Combiner::kMean, Combiner::kMax, Combiner::kMin}) {
    HostArray<float> a, b;
    auto& d = dynamic_cast<DynamicTable&>(*t);
    {
      PassesFrom none(SIZE_MAX);
      ASSERT_TRUE(!d.bagInPasses());
      a = t->lookupCombined(bag, c, 40.0, false);
    }
    {
      PassesFrom all(0);
      ASSERT_TRUE(d.bagInPasses());
      b = t->lookupCombined(bag, c, 40.0, false);
    }
    EXPECT_EQ(a.size(), b.size());
    EXPECT_TRUE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
}
