// The eviction rule of capped tables and restrict, checked against scenarios
// worked out by hand and against a brute-force model of the rule.
#include <random>

#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;
using estest::snapshot;

namespace {
std::vector<int64_t> residentKeys(Table& t) {
  std::vector<int64_t> out;
  for (auto& kv : snapshot(t).values) out.push_back(kv.first);
  return out;
}
}  // namespace

TEST(customized_scores_evict_lowest_and_refuse_losers) {
  auto t = createTable(dynamicConfig(1, 4, 4, ScorePolicy::kCustomized));
  int64_t keys[] = {1, 2, 3, 4};
  float v[] = {1, 2, 3, 4};
  uint64_t s[] = {10, 20, 30, 40};
  t->upsert(keys, 4, v, s);
  int64_t k5 = 5;
  float v5 = 5;
  uint64_t s5 = 25;
  t->upsert(&k5, 1, &v5, &s5);  // evicts 1 (score 10)
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{2, 3, 4, 5}));
  int64_t k6 = 6;
  uint64_t s6 = 5;
  t->upsert(&k6, 1, &v5, &s6);  // below every resident: refused
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{2, 3, 4, 5}));
  // a tie with the lowest resident (2, score 20): the new key replaces it, as HKV admits ties
  uint64_t s20 = 20;
  t->upsert(&k6, 1, &v5, &s20);
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{3, 4, 5, 6}));
  // findOrInsert of a refused key: initial value, exists 0, not inserted
  int64_t k7 = 7;
  auto r = t->findOrInsert(&k7, 1, &s6);
  EXPECT_EQ(static_cast<int>(r.exists[0]), 0);
  EXPECT_EQ(r.values[0], 0.0f);
  EXPECT_EQ(t->size(), size_t{4});
  EXPECT_EQ(t->capacity(), size_t{4});
}

TEST(touched_residents_are_never_evicted) {
  auto t = createTable(dynamicConfig(1, 2, 2, ScorePolicy::kCustomized));
  int64_t keys[] = {1, 2};
  float v[] = {1, 2};
  uint64_t s[] = {1, 100};
  t->upsert(keys, 2, v, s);
  // the call touches 1 (low score) and brings 3 (score 50): 2 is the only untouched resident
  int64_t call[] = {1, 3};
  uint64_t cs[] = {0, 50};
  t->upsert(call, 2, v, cs);
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{1, 2}));  // 3 (50) loses to 2 (100)
  uint64_t cs2[] = {0, 500};
  t->upsert(call, 2, v, cs2);
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{1, 3}));
}

TEST(lru_new_keys_always_win_over_older_rows) {
  auto t = createTable(dynamicConfig(1, 3, 3, ScorePolicy::kLru));
  float v[] = {0, 0, 0};
  for (int64_t k = 0; k < 10; ++k) t->upsert(&k, 1, v, nullptr);
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{7, 8, 9}));
  int64_t k7 = 7;
  t->find(&k7, 1);  // refresh 7
  int64_t more[] = {20, 21};
  t->upsert(more, 2, v, nullptr);
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{7, 20, 21}));
  // a batch with more new keys than the cap: ties among new keys keep smaller keys
  int64_t many[] = {50, -3, 40, 60};
  t->upsert(many, 4, v, nullptr);
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{-3, 40, 50}));
}

TEST(restrict_keeps_highest_scores_ties_smaller_keys) {
  auto t = createTable(dynamicConfig(1, 8, SIZE_MAX, ScorePolicy::kCustomized));
  int64_t keys[] = {5, -5, 9, 1, 2};
  float v[] = {0, 0, 0, 0, 0};
  uint64_t s[] = {7, 7, 3, 9, 7};
  t->upsert(keys, 5, v, s);
  EXPECT_EQ(t->restrict(10), size_t{0});
  EXPECT_EQ(t->restrict(3), size_t{2});
  EXPECT_TRUE((residentKeys(*t) == std::vector<int64_t>{-5, 1, 2}));
  EXPECT_EQ(t->restrict(0), size_t{3});
  EXPECT_EQ(t->size(), size_t{0});
}

// Brute-force model of upsert on a capped lfu table: scores per the policy, the
// eviction rule by sorting every candidate.
TEST(random_upserts_match_a_brute_force_model) {
  const size_t cap = 16;
  auto t = createTable(dynamicConfig(1, 4, cap, ScorePolicy::kLfu));
  std::map<int64_t, uint64_t> model;  // key -> score
  std::mt19937_64 rng(99);
  for (int round = 0; round < 300; ++round) {
    std::vector<int64_t> keys;
    size_t n = 1 + rng() % 12;
    for (size_t i = 0; i < n; ++i) keys.push_back(static_cast<int64_t>(rng() % 40) - 20);
    std::vector<float> v(n, 1.0f);
    std::map<int64_t, uint64_t> count;
    for (int64_t k : keys) ++count[k];
    std::vector<int64_t> fresh;
    for (auto& kv : count) {
      if (!model.count(kv.first)) fresh.push_back(kv.first);
    }
    if (fresh.size() > cap - model.size()) {
      struct C {
        uint64_t score;
        bool resident;
        int64_t key;
      };
      std::vector<C> cands;
      size_t touched = 0;
      for (auto& kv : model) {
        if (count.count(kv.first)) {
          ++touched;
        } else {
          cands.push_back({kv.second, true, kv.first});
        }
      }
      for (int64_t k : fresh) cands.push_back({count[k], false, k});
      std::sort(cands.begin(), cands.end(), [](const C& a, const C& b) {
        if (a.score != b.score) return a.score > b.score;
        if (a.resident != b.resident) return b.resident;
        return a.key < b.key;
      });
      for (size_t i = cap - touched; i < cands.size(); ++i) {
        if (cands[i].resident) {
          model.erase(cands[i].key);
        } else {
          count.erase(cands[i].key);  // refused
        }
      }
    }
    for (auto& kv : count) model[kv.first] += kv.second;
    t->upsert(keys.data(), n, v.data(), nullptr);
    auto s = snapshot(*t);
    ASSERT_TRUE(s.scores == model);
  }
}

ES_TEST_FILE_END
