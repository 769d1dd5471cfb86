// find on large tables runs in passes (DynamicTable::findPasses, dynamic_read.cc). These
// tests lower DynamicTable::findPassesFrom so that small tables take that path, and check
// it against a plain map of what was stored: values (rounded to the storage type), exists,
// absent keys' initial values, and the scores a read leaves.
#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "table_helpers.h"
#include "test.h"

using namespace embedstack;
using estest::dynamicConfig;
using estest::snapshot;

namespace {

/** Sets DynamicTable::findPassesFrom for a scope. */
struct PassesFrom {
  size_t saved;
  explicit PassesFrom(size_t bytes) : saved(DynamicTable::findPassesFrom.load()) { DynamicTable::findPassesFrom = bytes; }
  ~PassesFrom() { DynamicTable::findPassesFrom = saved; }
};

float stored(StorageDtype d, float v) {
  if (d == StorageDtype::kFloat16) return halfToFloat(floatToHalf(v));
  if (d == StorageDtype::kBfloat16) return bf16ToFloat(floatToBf16(v));
  return v;
}

/**
 * A table whose index has crowded groups (60 keys sharing home group 5: overflow into the
 * next groups, fragments shared within a group), the extreme keys, and random keys; queries
 * of every key, absent keys (some sharing a crowded key's group and fragment, some extreme),
 * duplicates, in batches of 1, 5, 1000, 1031 and 70K keys (several chunks and pool ranges).
 */
void checkPasses(StorageDtype storage, size_t dim, ScorePolicy policy) {
  TableConfig config = dynamicConfig(dim, 4096, SIZE_MAX, policy);
  config.storage = storage;
  config.initializer.kind = InitKind::kUniform;
  config.initializer.a = -2;
  config.initializer.b = 3;
  config.initializer.seed = 5;
  const Initializer init = config.initializer;
  auto t = createTable(config);
  auto* d = dynamic_cast<DynamicTable*>(t.get());
  ASSERT_TRUE(d != nullptr);
  const size_t groups = d->indexGroups();
  auto home = [&](int64_t k) { return hashGroup(hashKey(k), groups); };
  std::mt19937_64 rng(2029);
  std::vector<int64_t> keys = {INT64_MIN, INT64_MAX, 0, -1, 1};
  std::vector<int64_t> crowded;
  while (crowded.size() < 60) {
    const int64_t k = static_cast<int64_t>(rng());
    if (home(k) == 5) crowded.push_back(k);
  }
  keys.insert(keys.end(), crowded.begin(), crowded.end());
  while (keys.size() < 3000) keys.push_back(static_cast<int64_t>(rng()));
  std::vector<int64_t> absent = {INT64_MIN + 1, INT64_MAX - 1, 2, -2};
  while (absent.size() < 40) {
    const int64_t k = static_cast<int64_t>(rng());
    if (home(k) != 5) continue;
    for (int64_t c : crowded) {
      if (hashFragment(hashKey(c)) == hashFragment(hashKey(k)) && c != k) {
        absent.push_back(k);
        break;
      }
    }
  }
  while (absent.size() < 80) absent.push_back(static_cast<int64_t>(rng()));
  // The expectation: each key's values as stored (not whole numbers, some far from 1).
  std::map<int64_t, std::vector<float>> want;
  std::vector<float> vals;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<float> row(dim);
    for (size_t c = 0; c < dim; ++c) {
      row[c] = static_cast<float>((static_cast<double>(i % 97) - 48.3) * std::pow(10.0, static_cast<double>((i + c) % 9) - 4));
    }
    vals.insert(vals.end(), row.begin(), row.end());
    for (float& v : row) v = stored(storage, v);
    want[keys[i]] = row;
  }
  t->upsert(keys.data(), keys.size(), vals.data(), nullptr);
  ASSERT_TRUE(d->indexGroups() == groups);  // no rebuild: the crowded keys share group 5
  // Queries: every key in a shuffled order, twice, with the absent keys among them.
  std::vector<int64_t> q;
  for (int rep = 0; rep < 2; ++rep) q.insert(q.end(), keys.begin(), keys.end());
  q.insert(q.end(), absent.begin(), absent.end());
  std::shuffle(q.begin(), q.end(), rng);
  std::vector<int64_t> big;
  while (big.size() < 70000) big.insert(big.end(), q.begin(), q.end());
  big.resize(70000);
  const std::vector<std::vector<int64_t>> batches = {
      {absent[0]}, {keys[0], absent[5], keys[7], keys[7], keys[1]}, std::vector<int64_t>(q.begin(), q.begin() + 1000),
      std::vector<int64_t>(q.begin() + 3, q.begin() + 1034), big};
  uint64_t clock = 1;  // the upsert's call
  for (const auto& batch : batches) {
    ++clock;  // this find's call clock (snapshots do not advance it)
    const estest::Snapshot before = snapshot(*t);
    auto r = t->find(batch.data(), batch.size());
    const estest::Snapshot after = snapshot(*t);
    size_t wrong = 0;
    std::map<int64_t, uint64_t> reads;
    std::vector<float> initial(dim);
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t k = batch[i];
      const auto it = want.find(k);
      if (it != want.end()) {
        ++reads[k];
        wrong += r.exists[i] != 1;
        for (size_t c = 0; c < dim; ++c) wrong += estest::floatBits(r.values[i * dim + c]) != estest::floatBits(it->second[c]);
      } else {
        init.fill(k, 0, dim, initial.data());
        wrong += r.exists[i] != 0;
        for (size_t c = 0; c < dim; ++c) {
          wrong += estest::floatBits(r.values[i * dim + c]) != estest::floatBits(stored(storage, initial[c]));
        }
      }
    }
    EXPECT_EQ(wrong, size_t{0});
    // Scores: lru sets every key read to this call's clock; lfu adds its reads in the batch.
    EXPECT_EQ(after.scores.size(), keys.size());  // reads insert nothing
    size_t badScores = 0;
    for (const auto& [k, s] : after.scores) {
      const auto n = reads.find(k);
      const uint64_t old = before.scores.at(k);
      if (policy == ScorePolicy::kLru) {
        badScores += s != (n != reads.end() ? clock : old);
      } else {
        badScores += s != old + (n != reads.end() ? n->second : 0);
      }
    }
    EXPECT_EQ(badScores, size_t{0});
  }
}

}  // namespace

TEST(find_in_passes_float32_against_a_map) {
  PassesFrom all(0);
  checkPasses(StorageDtype::kFloat32, 64, ScorePolicy::kLru);
  checkPasses(StorageDtype::kFloat32, 40, ScorePolicy::kLfu);  // 3 lines a row: the run-time prefetch loop
}

TEST(find_in_passes_narrow_storage_against_a_map) {
  PassesFrom all(0);
  checkPasses(StorageDtype::kBfloat16, 64, ScorePolicy::kLru);
  checkPasses(StorageDtype::kFloat16, 7, ScorePolicy::kLfu);
}

TEST(find_pipeline_and_passes_agree) {
  // The same rows read through either path (threshold above or below the table) give the same bits.
  auto t = createTable(dynamicConfig(16, 4096));
  auto* d = dynamic_cast<DynamicTable*>(t.get());
  ASSERT_TRUE(d != nullptr);
  std::vector<int64_t> keys(3000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<int64_t>(i * 7919) - 1000;
  std::vector<float> vals(keys.size() * 16);
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(i) * 0.37f - 11.0f;
  t->upsert(keys.data(), keys.size(), vals.data(), nullptr);
  std::vector<int64_t> q(keys.rbegin(), keys.rend());
  q.push_back(-5);  // absent
  FindResult a, b;
  {
    PassesFrom none(SIZE_MAX);
    a = t->find(q.data(), q.size());
  }
  {
    PassesFrom all(0);
    b = t->find(q.data(), q.size());
  }
  EXPECT_TRUE(std::memcmp(a.values.data(), b.values.data(), q.size() * 16 * sizeof(float)) == 0);
  EXPECT_TRUE(std::memcmp(a.exists.data(), b.exists.data(), q.size()) == 0);
  EXPECT_EQ(static_cast<int>(b.exists[q.size() - 1]), 0);
  EXPECT_EQ(b.values[(q.size() - 2) * 16 + 3], vals[3]);
}
