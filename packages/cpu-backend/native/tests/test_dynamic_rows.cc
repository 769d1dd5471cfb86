// The dynamic table's per-row memory: a record [values as stored, padded to 4 bytes]
// [float slots] in the arena plus a 12-byte {int64 key, uint32 score} entry while every
// score fits 32 bits (16 bytes, {int64 key, uint64 score}, once one may not, and for lfu
// tables from the start), plus the index. For every storage type, odd and even dims and slot layouts: the memory the
// table reports equals that layout computed here by hand (so bytes per key cannot grow
// unnoticed), and rows moved by removals and evictions keep their own key, score,
// values and slots (checked against a plain model).
#include <map>
#include <random>

#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;
using estest::snapshot;

namespace {

struct Layout {
  size_t dim;
  StorageDtype storage;
  std::vector<uint32_t> slots;
};

std::vector<Layout> layouts() {
  std::vector<Layout> all;
  for (size_t dim : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{64}}) {
    for (StorageDtype s : {StorageDtype::kFloat32, StorageDtype::kFloat16, StorageDtype::kBfloat16}) {
      const uint32_t d = static_cast<uint32_t>(dim);
      for (const std::vector<uint32_t>& w : {std::vector<uint32_t>{}, {1}, {d, 1}}) all.push_back({dim, s, w});
    }
  }
  return all;
}

/** Bytes per row of capacity by hand: 12 or 16 (key, score) + values padded to 4 + 4 per slot float. */
size_t rowBytes(const Layout& l, size_t keyScoreBytes) {
  const size_t valueBytes = (l.dim * (l.storage == StorageDtype::kFloat32 ? 4 : 2) + 3) / 4 * 4;
  size_t slotFloats = 0;
  for (uint32_t w : l.slots) slotFloats += w;
  return keyScoreBytes + valueBytes + 4 * slotFloats;
}

TableConfig configOf(const Layout& l, size_t initCap, size_t maxCap, ScorePolicy policy = ScorePolicy::kLru) {
  TableConfig c = dynamicConfig(l.dim, initCap, maxCap, policy);
  c.storage = l.storage;
  c.slotWidths = l.slots;
  c.slotInitial.assign(l.slots.size(), 0.0f);
  return c;
}

/** A value exact in float16 and bfloat16: small integers and quarters. */
float exact(int64_t key, size_t c) { return static_cast<float>(key % 50) + 0.25f * static_cast<float>(c % 4); }

}  // namespace

TEST(row_memory_is_key_score_values_and_slots) {
  for (const Layout& l : layouts()) {
    for (size_t cap : {size_t{1}, size_t{100}, size_t{4096}}) {
      // lru starts narrow (12-byte key/score entries), lfu wide (16)
      for (auto [policy, keyScore] : {std::pair{ScorePolicy::kLru, size_t{12}}, std::pair{ScorePolicy::kLfu, size_t{16}}}) {
        auto t = createTable(configOf(l, cap, SIZE_MAX, policy));
        auto* d = dynamic_cast<DynamicTable*>(t.get());
        ASSERT_TRUE(d != nullptr);
        EXPECT_EQ(d->narrowScores(), keyScore == 12);
        // 64-byte index groups of 16 slots (3-byte rows), presized to hold initCapacity keys at 13 per group
        EXPECT_TRUE(d->indexNarrow());
        EXPECT_EQ(d->indexGroups(), cap / 13 + 1);
        EXPECT_EQ(t->memoryUsage(), cap * rowBytes(l, keyScore) + d->indexGroups() * 64);
      }
    }
  }
  // A float32 row of dim 64 without slots: 12 + 256 bytes narrow, 16 + 256 wide.
  EXPECT_EQ(rowBytes({64, StorageDtype::kFloat32, {}}, 12), size_t{268});
  EXPECT_EQ(rowBytes({64, StorageDtype::kFloat32, {}}, 16), size_t{272});
}

TEST(records_keep_key_score_values_and_slots_through_moves) {
  for (const Layout& l : layouts()) {
    size_t slotFloats = 0;
    for (uint32_t w : l.slots) slotFloats += w;
    auto t = createTable(configOf(l, 8, SIZE_MAX));
    struct Row {
      std::vector<float> values, slots;
      uint64_t score;
    };
    std::map<int64_t, Row> model;
    std::mt19937_64 rng(7 + l.dim);
    for (int round = 0; round < 12; ++round) {
      std::vector<int64_t> keys;
      for (int i = 0; i < 40; ++i) keys.push_back(static_cast<int64_t>(rng() % 200) - 100);
      if (round % 3 == 2) {
        t->remove(keys.data(), keys.size());
        for (int64_t k : keys) model.erase(k);
        continue;
      }
      // importRows with explicit scores and slots (the last occurrence of a key wins)
      std::vector<float> values, slots[2];  // slot widths are 1 or dim
      std::vector<uint64_t> scores;
      for (size_t i = 0; i < keys.size(); ++i) {
        Row r;
        for (size_t c = 0; c < l.dim; ++c) r.values.push_back(exact(keys[i] + round, c));
        for (size_t j = 0; j < l.slots.size(); ++j) {
          for (uint32_t c = 0; c < l.slots[j]; ++c) {
            const float v = static_cast<float>(round * 1000 + static_cast<int>(i) * 10 + static_cast<int>(c)) + 0.5f;
            slots[j].push_back(v);
            r.slots.push_back(v);
          }
        }
        r.score = rng();
        values.insert(values.end(), r.values.begin(), r.values.end());
        scores.push_back(r.score);
        model[keys[i]] = r;
      }
      const float* slotPtrs[] = {slots[0].data(), slots[1].data()};
      t->importRows(keys.data(), keys.size(), values.data(), l.slots.empty() ? nullptr : slotPtrs, scores.data());
    }
    EXPECT_EQ(t->size(), model.size());
    auto s = snapshot(*t);
    for (auto& kv : model) {
      ASSERT_TRUE(s.values.count(kv.first) == 1);
      for (size_t c = 0; c < l.dim; ++c) EXPECT_EQ(s.values[kv.first][c], kv.second.values[c]);
      EXPECT_EQ(s.scores[kv.first], kv.second.score);
      ASSERT_TRUE(s.slots[kv.first].size() == slotFloats);
      for (size_t c = 0; c < slotFloats; ++c) EXPECT_EQ(s.slots[kv.first][c], kv.second.slots[c]);
    }
    // find reads the same rows through the probe pipeline
    std::vector<int64_t> keys;
    for (auto& kv : model) keys.push_back(kv.first);
    keys.push_back(1000);  // absent
    auto f = t->find(keys.data(), keys.size());
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      EXPECT_EQ(static_cast<int>(f.exists[i]), 1);
      for (size_t c = 0; c < l.dim; ++c) EXPECT_EQ(f.values[i * l.dim + c], model[keys[i]].values[c]);
    }
    EXPECT_EQ(static_cast<int>(f.exists[keys.size() - 1]), 0);
  }
}

TEST(eviction_keeps_the_highest_scores_with_their_rows) {
  for (const Layout& l : layouts()) {
    // Capacity 6: six residents with scores 10..60, then four new keys with scores 5, 35, 45, 70.
    auto t = createTable(configOf(l, 6, 6));
    std::vector<int64_t> keys = {1, 2, 3, 4, 5, 6};
    std::vector<uint64_t> scores = {10, 20, 30, 40, 50, 60};
    std::vector<float> values;
    for (int64_t k : keys) {
      for (size_t c = 0; c < l.dim; ++c) values.push_back(exact(k, c));
    }
    t->importRows(keys.data(), keys.size(), values.data(), nullptr, scores.data());
    std::vector<int64_t> fresh = {7, 8, 9, 10};
    std::vector<uint64_t> freshScores = {5, 35, 45, 70};
    std::vector<float> freshValues;
    for (int64_t k : fresh) {
      for (size_t c = 0; c < l.dim; ++c) freshValues.push_back(exact(k, c));
    }
    t->importRows(fresh.data(), fresh.size(), freshValues.data(), nullptr, freshScores.data());
    // The 6 highest of {10..60, 5, 35, 45, 70}: 70, 60, 50, 45, 40, 35 -> keys 10, 6, 5, 9, 4, 8.
    auto s = snapshot(*t);
    std::map<int64_t, uint64_t> expected = {{10, 70}, {6, 60}, {5, 50}, {9, 45}, {4, 40}, {8, 35}};
    EXPECT_EQ(s.scores.size(), expected.size());
    for (auto& kv : expected) {
      ASSERT_TRUE(s.scores.count(kv.first) == 1);
      EXPECT_EQ(s.scores[kv.first], kv.second);
      for (size_t c = 0; c < l.dim; ++c) EXPECT_EQ(s.values[kv.first][c], exact(kv.first, c));
    }
  }
}

ES_TEST_FILE_END
