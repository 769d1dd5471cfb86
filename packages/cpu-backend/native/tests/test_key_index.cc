// Control-byte groups and the hash index on their own (keys kept in a vector, as
// the arena keeps them in records).
#include <climits>
#include <random>
#include <unordered_set>

#include "group.h"
#include "key_index.h"
#include "test.h"

using namespace embedstack;

TEST(group_matches_fragments_and_empties) {
  alignas(16) uint8_t ctrl[16];
  // slots 12..15 are padding: never reported
  for (int i = 0; i < 16; ++i) ctrl[i] = static_cast<uint8_t>(i * 7 % 128);
  ctrl[3] = kCtrlEmpty;
  ctrl[9] = kCtrlDeleted;
  ctrl[10] = 0x05;
  ctrl[11] = 0x05;
  ctrl[12] = 0x05;  // padding
  ctrl[13] = kCtrlEmpty;
  ctrl[14] = kCtrlDeleted;
  Group g(ctrl);
  uint32_t m = g.match(0x05).raw();
  EXPECT_TRUE(m & (1u << 10));
  EXPECT_TRUE(m & (1u << 11));
  EXPECT_EQ(m >> 12, 0u);
  EXPECT_EQ(g.matchEmpty().raw(), 1u << 3);
  EXPECT_EQ(g.matchFree().raw(), (1u << 3) | (1u << 9));
  // Bits the matcher reports must be true matches except (SWAR) the byte just above one.
  for (int i = 0; i < 16; ++i) {
    if (m & (1u << i)) EXPECT_TRUE(ctrl[i] == 0x05 || (i > 0 && ctrl[i - 1] == 0x05));
  }
}

TEST(group_of_all_empty_and_all_full) {
  alignas(16) uint8_t ctrl[16];
  std::memset(ctrl, kCtrlEmpty, 16);
  EXPECT_EQ(Group(ctrl).matchEmpty().raw(), 0xfffu);
  EXPECT_EQ(Group(ctrl).match(0).raw(), 0u);
  std::memset(ctrl, 0x7f, 16);
  EXPECT_EQ(Group(ctrl).matchEmpty().raw(), 0u);
  EXPECT_EQ(Group(ctrl).matchFree().raw(), 0u);
  EXPECT_EQ(Group(ctrl).match(0x7f).raw(), 0xfffu);
}

namespace {
struct Harness {
  KeyIndex index;
  std::vector<int64_t> keys;  // row -> key
  size_t find(int64_t k) const {
    return index.find(k, hashKey(k), [this](uint32_t r) { return keys[r]; });
  }
  void insert(int64_t k) {
    keys.push_back(k);
    index.insert(hashKey(k), static_cast<uint32_t>(keys.size() - 1));
  }
};
}  // namespace

TEST(index_holds_extreme_keys) {
  Harness h;
  h.index.reset(1);
  const int64_t extremes[] = {INT64_MIN, INT64_MAX, -1, 0, int64_t{1} << 40, 1, INT64_MIN + 1};
  for (int64_t k : extremes) {
    EXPECT_EQ(h.find(k), KeyIndex::kNoSlot);
    h.insert(k);
  }
  for (size_t r = 0; r < h.keys.size(); ++r) {
    size_t slot = h.find(h.keys[r]);
    ASSERT_TRUE(slot != KeyIndex::kNoSlot);
    EXPECT_EQ(h.index.rowAt(slot), static_cast<uint32_t>(r));
  }
  EXPECT_EQ(h.find(2), KeyIndex::kNoSlot);
}

TEST(index_full_to_max_load_then_erase_and_reinsert) {
  Harness h;
  h.index.reset(8);  // 96 slots, 88 entries at max load
  std::mt19937_64 rng(42);
  while (h.index.fits(1)) h.insert(static_cast<int64_t>(rng()));
  EXPECT_EQ(h.index.used(), size_t{8 * KeyIndex::kMaxPerGroup});
  for (size_t r = 0; r < h.keys.size(); ++r) EXPECT_TRUE(h.find(h.keys[r]) != KeyIndex::kNoSlot);
  // erase every other key; the rest stay findable, erased ones are gone
  for (size_t r = 0; r < h.keys.size(); r += 2) h.index.erase(h.find(h.keys[r]));
  for (size_t r = 0; r < h.keys.size(); ++r) {
    EXPECT_EQ(h.find(h.keys[r]) == KeyIndex::kNoSlot, r % 2 == 0);
  }
  EXPECT_EQ(h.index.used() + h.index.tombstones() <= 8 * KeyIndex::kMaxPerGroup, true);
}

TEST(index_groups_for_keeps_load_under_max) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{1000}, size_t{1} << 20}) {
    size_t g = KeyIndex::groupsFor(n);
    EXPECT_TRUE(n <= g * KeyIndex::kMaxPerGroup);
    if (n >= 1000) EXPECT_TRUE(static_cast<double>(n) / static_cast<double>(g * kGroupSlots) >= 0.8);
  }
}

TEST(index_many_random_keys_against_a_set) {
  Harness h;
  const size_t n = 50000;
  h.index.reset(KeyIndex::groupsFor(n));
  std::mt19937_64 rng(7);
  std::unordered_set<int64_t> set;
  while (set.size() < n) {
    int64_t k = static_cast<int64_t>(rng());
    if (set.insert(k).second) h.insert(k);
  }
  for (int64_t k : h.keys) EXPECT_TRUE(h.find(k) != KeyIndex::kNoSlot);
  size_t misses = 0;
  for (int i = 0; i < 10000; ++i) {
    int64_t k = static_cast<int64_t>(rng());
    if (!set.count(k))
      misses += h.find(k) == KeyIndex::kNoSlot;
    else
      misses += 1;
  }
  EXPECT_EQ(misses, size_t{10000});
}
