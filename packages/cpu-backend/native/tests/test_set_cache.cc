// The set-associative LRU cache (set_cache.h) against a scenario worked out by hand
// and a brute-force model: per set, a list of (key, last use) pairs.
#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "hash.h"
#include "set_cache.h"
#include "test.h"

using namespace embedstack;

namespace {

/** Keys (from 0 up) whose set is `set` among `sets`: by the contract's hash, computed here. */
std::vector<int64_t> keysOfSet(uint64_t set, uint64_t sets, size_t count) {
  std::vector<int64_t> out;
  for (int64_t k = 0; out.size() < count; k++) {
    if (((hashKey(k) >> 32) * sets) >> 32 == set) out.push_back(k);
  }
  return out;
}

std::vector<int64_t> resident(const SetCache& c) {
  std::vector<int64_t> out(c.size());
  c.keys(out.data());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(set_cache_rounds_capacity_up_to_whole_sets) {
  SetCache a(100, 4, 16);
  EXPECT_EQ(a.sets(), uint64_t{7});
  EXPECT_EQ(a.capacity(), uint64_t{112});
  SetCache b(3, 4, 16);  // fewer rows than ways: one set of 3
  EXPECT_EQ(b.sets(), uint64_t{1});
  EXPECT_EQ(b.ways(), 3u);
  SetCache z(0, 4, 16);
  EXPECT_EQ(z.capacity(), uint64_t{0});
  int64_t k = 1;
  float v[4] = {1, 2, 3, 4};
  EXPECT_EQ(z.insert(&k, 1, v), size_t{0});
  uint8_t e = 9;
  EXPECT_EQ(z.query(&k, 1, v, &e), size_t{0});
  EXPECT_EQ(e, 0);
}

TEST(set_cache_full_set_evicts_its_least_recently_used_key) {
  SetCache c(8, 1, 4);  // 2 sets of 4
  std::vector<int64_t> s0 = keysOfSet(0, 2, 5);
  std::vector<int64_t> s1 = keysOfSet(1, 2, 1);
  for (size_t i = 0; i < 4; i++) {
    float v = static_cast<float>(s0[i]);
    c.insert(&s0[i], 1, &v);
  }
  float v1 = 7;
  c.insert(&s1[0], 1, &v1);  // the other set: no effect on set 0
  float out = 0;
  uint8_t e = 0;
  c.query(&s0[0], 1, &out, &e);  // s0[0] becomes the most recent: s0[1] is now the LRU
  EXPECT_EQ(e, 1);
  EXPECT_TRUE(out == static_cast<float>(s0[0]));
  float v4 = 44;
  EXPECT_EQ(c.insert(&s0[4], 1, &v4), size_t{1});
  std::vector<int64_t> want = {s0[0], s0[2], s0[3], s0[4], s1[0]};
  std::sort(want.begin(), want.end());
  EXPECT_TRUE(resident(c) == want);
  // update does not stamp: s0[2] stays the LRU
  float v2 = 22;
  EXPECT_EQ(c.update(&s0[2], 1, &v2), size_t{1});
  float v5 = 55;
  c.insert(&s0[1], 1, &v5);
  c.query(&s0[2], 1, &out, &e);
  EXPECT_EQ(e, 0);
  EXPECT_EQ(c.remove(&s0[3], 1), size_t{1});
  EXPECT_EQ(c.size(), uint64_t{4});
}

TEST(set_cache_random_ops_match_a_brute_force_model) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; round++) {
    const uint64_t capacity = 1 + rng() % 40;
    const uint32_t ways = 1u << (rng() % 4);
    SetCache c(capacity, 2, ways);
    const uint32_t w = static_cast<uint32_t>(std::min<uint64_t>(ways, capacity));
    const uint64_t sets = (capacity + w - 1) / w;
    std::vector<std::map<int64_t, std::pair<uint64_t, float>>> model(sets);  // key -> (stamp, value)
    uint64_t clock = 0;
    for (int step = 0; step < 300; step++) {
      int64_t k = static_cast<int64_t>(rng() % 60) - 10;
      auto& set = model[((hashKey(k) >> 32) * sets) >> 32];
      float v[2] = {static_cast<float>(step), -static_cast<float>(step)};
      switch (rng() % 4) {
        case 0: {  // insert
          if (set.count(k) == 0 && set.size() == w) {
            auto lru = std::min_element(set.begin(), set.end(),
                                        [](auto& a, auto& b) { return a.second.first < b.second.first; });
            set.erase(lru);
          }
          set[k] = {++clock, v[0]};
          c.insert(&k, 1, v);
          break;
        }
        case 1: {  // query
          float out[2] = {0, 0};
          uint8_t e = 0;
          c.query(&k, 1, out, &e);
          EXPECT_EQ(e, static_cast<uint8_t>(set.count(k)));
          if (set.count(k)) {
            set[k].first = ++clock;
            EXPECT_TRUE(out[0] == set[k].second && out[1] == -set[k].second);
          }
          break;
        }
        case 2:
          EXPECT_EQ(c.update(&k, 1, v), set.count(k));
          if (set.count(k)) set[k].second = v[0];
          break;
        default:
          EXPECT_EQ(c.remove(&k, 1), set.erase(k));
      }
    }
    std::vector<int64_t> want;
    for (auto& s : model)
      for (auto& kv : s) want.push_back(kv.first);
    std::sort(want.begin(), want.end());
    EXPECT_TRUE(resident(c) == want);
  }
}

TEST(set_cache_rejects_bad_sizes) {
  bool threw = false;
  try {
    SetCache c(10, 4, 3);
  } catch (const EmbedError& e) {
    threw = e.code() == ErrorCode::kInvalidArgument;
  }
  EXPECT_TRUE(threw);
  threw = false;
  try {
    SetCache c(SetCache::kMaxSlots, 1 << 20, 16);
  } catch (const EmbedError& e) {
    threw = e.code() == ErrorCode::kOutOfRange;
  }
  EXPECT_TRUE(threw);
}
