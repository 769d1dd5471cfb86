// Review tests (rev37) for the hash index's row numbers: a dynamic table that grows past 2^24
// rows (the last row 3 bytes can name is 2^24 - 1) keeps finding every key, by find (passes
// and pipeline), the bag, row leases, remove (which moves the last row) and a bag over shard
// tables of which one is past 2^24 rows and one is small. Values checked against what the
// test stored. Not under ASan (16M rows).
#include <algorithm>
#include <cstring>
#include <unordered_set>
#include <memory>
#include <vector>

#include "pass_table.h"
#include "planned_ops.h"
#include "shard_plan.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;
using estest::PassesFrom;

#if !defined(__SANITIZE_ADDRESS__)
namespace {

constexpr size_t k24 = size_t{1} << 24;

/** Key of the i-th stored row: even, spread (part 0 of a floorMod-2 split). */
int64_t bigKey(size_t i) { return static_cast<int64_t>(i) * 2 * 1000003 % (int64_t{1} << 50) * 2; }
/** The value stored for key k (exact in float32). */
float valueOf(int64_t k) { return static_cast<float>((static_cast<uint64_t>(k) >> 1) % 65521) - 30000.0f; }

/** Upserts keys bigKey(from..to) in batches of 1M. */
void fill(Table& t, size_t from, size_t to) {
  std::vector<int64_t> keys;
  std::vector<float> values;
  for (size_t b = from; b < to; b += size_t{1} << 20) {
    const size_t e = std::min(to, b + (size_t{1} << 20));
    keys.resize(e - b);
    values.resize(e - b);
    for (size_t i = b; i < e; ++i) {
      keys[i - b] = bigKey(i);
      values[i - b] = valueOf(keys[i - b]);
    }
    t.upsert(keys.data(), keys.size(), values.data(), nullptr);
  }
}

/** Counts the keys bigKey(0..n) not found with their value by findInto (passes or pipeline by `passesFrom`). */
size_t wrongFinds(Table& t, size_t n, size_t passesFrom, const std::vector<int64_t>& removedKeys) {
  const PassesFrom mode(passesFrom);
  const std::unordered_set<int64_t> removed(removedKeys.begin(), removedKeys.end());
  size_t wrong = 0;
  std::vector<int64_t> keys;
  std::vector<float> out;
  std::vector<uint8_t> exists;
  for (size_t b = 0; b < n; b += size_t{1} << 21) {
    const size_t e = std::min(n, b + (size_t{1} << 21));
    keys.resize(e - b);
    out.assign(e - b, -1e9f);
    exists.assign(e - b, 9);
    for (size_t i = b; i < e; ++i) keys[i - b] = bigKey(i);
    t.findInto(keys.data(), keys.size(), out.data(), exists.data());
    for (size_t j = 0; j < keys.size(); ++j) {
      const bool gone = removed.count(keys[j]) != 0;
      if (gone) {
        wrong += exists[j] != 0;
      } else {
        wrong += exists[j] != 1 || out[j] != valueOf(keys[j]);
      }
    }
  }
  return wrong;
}

/** Absent keys (odd) reported present. */
size_t absentFound(Table& t) {
  std::vector<int64_t> keys(1 << 16);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = bigKey(i) + 1;
  std::vector<float> out(keys.size());
  std::vector<uint8_t> exists(keys.size());
  t.findInto(keys.data(), keys.size(), out.data(), exists.data());
  size_t found = 0;
  for (uint8_t x : exists) found += x;
  return found;
}

/** Row leases (lend, with and without row prefetch) over keys bigKey(from..to): keys not lent with their value. */
size_t wrongLends(Table& t, size_t from, size_t to) {
  size_t wrong = 0;
  std::vector<int64_t> keys;
  for (size_t i = from; i < to; ++i) keys.push_back(bigKey(i));
  for (const bool prefetch : {false, true}) {
    auto lease = t.leaseRows();
    if (!lease) return SIZE_MAX;
    lease->begin();
    std::vector<const float*> rows(keys.size());
    std::vector<float> initial;
    lease->lend(keys.data(), keys.size(), rows.data(), initial, prefetch);
    for (size_t j = 0; j < keys.size(); ++j) wrong += rows[j] == nullptr || *rows[j] != valueOf(keys[j]);
  }
  return wrong;
}

/** A bag of one key per row over [big, small] split floorMod 2 (big owns the even keys): rows whose sum is wrong. */
size_t wrongShardBag(Table& big, Table& small, size_t from, size_t to) {
  std::vector<int64_t> keys;
  std::vector<int32_t> splits{0};
  std::vector<float> want;
  for (size_t i = from; i < to; ++i) {
    // Each bag row: one big key and one small key (odd: 2 i + 1, value 0.5).
    keys.push_back(bigKey(i));
    keys.push_back(2 * static_cast<int64_t>(i % 1000) + 1);
    splits.push_back(static_cast<int32_t>(keys.size()));
    want.push_back(valueOf(bigKey(i)) + 0.5f);
  }
  const BagInput bag{splits.data(), splits.size() - 1, keys.data(), keys.size(), nullptr};
  Table* raw[] = {&big, &small};
  const std::vector<ShardPlan> plans = estest::floorModPlans(2);
  size_t wrong = 0;
  for (const size_t passesFrom : {size_t{0}, SIZE_MAX}) {
    const PassesFrom mode(passesFrom);
    std::vector<float> out(bag.rows, -1e9f);
    lookupCombinedShards(raw, plans.data(), 2, bag, Combiner::kSum, 0.0, false, out.data());
    for (size_t r = 0; r < bag.rows; ++r) wrong += out[r] != want[r];
  }
  return wrong;
}

void checkBig(std::shared_ptr<Table> t, bool presized) {
  auto small = createTable(dynamicConfig(1, 64));
  {
    std::vector<int64_t> keys;
    std::vector<float> values;
    for (int64_t k = 1; k < 2000; k += 2) {
      keys.push_back(k);
      values.push_back(0.5f);
    }
    small->upsert(keys.data(), keys.size(), values.data(), nullptr);
  }
  // Exactly 2^24 rows: the last one is row 2^24 - 1.
  fill(*t, 0, k24);
  ASSERT_TRUE(t->size() == k24);
  // idx37: narrow (3-byte rows) up to 2^24 rows, unless presized past them (wide from the start).
  auto& d = dynamic_cast<DynamicTable&>(*t);
  EXPECT_EQ(d.indexNarrow(), t->capacity() <= k24);
  EXPECT_EQ(wrongFinds(*t, k24, 0, {}), size_t{0});
  EXPECT_EQ(wrongFinds(*t, k24, SIZE_MAX, {}), size_t{0});
  EXPECT_EQ(absentFound(*t), size_t{0});
  EXPECT_EQ(wrongLends(*t, k24 - 5000, k24), size_t{0});
  // Past it, one call at a time (the row 2^24 comes with the next write).
  const size_t n = k24 + 70000;
  fill(*t, k24, k24 + 1);
  EXPECT_TRUE(!d.indexNarrow());
  fill(*t, k24 + 1, n);
  ASSERT_TRUE(t->size() == n);
  EXPECT_EQ(wrongFinds(*t, n, 0, {}), size_t{0});
  EXPECT_EQ(wrongFinds(*t, n, SIZE_MAX, {}), size_t{0});
  EXPECT_EQ(absentFound(*t), size_t{0});
  EXPECT_EQ(wrongLends(*t, k24 - 5000, n), size_t{0});
  EXPECT_EQ(wrongShardBag(*t, *small, k24 - 30000, n), size_t{0});
  EXPECT_EQ(wrongShardBag(*small, *t, 0, 0), size_t{0});
  // The bag on the big table alone.
  {
    std::vector<int64_t> keys;
    std::vector<int32_t> splits{0};
    for (size_t i = k24 - 40000; i < n; ++i) {
      keys.push_back(bigKey(i));
      splits.push_back(static_cast<int32_t>(keys.size()));
    }
    const BagInput bag{splits.data(), splits.size() - 1, keys.data(), keys.size(), nullptr};
    for (const size_t passesFrom : {size_t{0}, SIZE_MAX}) {
      const PassesFrom mode(passesFrom);
      std::vector<float> out(bag.rows);
      t->lookupCombinedInto(bag, Combiner::kSum, 0.0, false, out.data());
      size_t wrong = 0;
      for (size_t r = 0; r < bag.rows; ++r) wrong += out[r] != valueOf(keys[r]);
      EXPECT_EQ(wrong, size_t{0});
    }
  }
  // Remove moves the last row (>= 2^24) into a hole below 2^24, and a key at row 2^24 - 1.
  std::vector<int64_t> removed{bigKey(0), bigKey(k24 - 1), bigKey(12345), bigKey(k24 + 3)};
  EXPECT_EQ(t->remove(removed.data(), removed.size()), removed.size());
  EXPECT_EQ(wrongFinds(*t, n, 0, removed), size_t{0});
  EXPECT_EQ(wrongFinds(*t, n, SIZE_MAX, removed), size_t{0});
  // Back below 2^24 rows and up again.
  std::vector<int64_t> tail;
  for (size_t i = k24 - 100; i < n; ++i) tail.push_back(bigKey(i));
  t->remove(tail.data(), tail.size());
  for (int64_t k : tail) removed.push_back(k);
  EXPECT_EQ(wrongFinds(*t, n, SIZE_MAX, removed), size_t{0});
  fill(*t, k24 - 100, n);
  removed = {bigKey(0), bigKey(12345)};  // the other two came back with the refill
  EXPECT_EQ(wrongFinds(*t, n, 0, removed), size_t{0});
  EXPECT_EQ(wrongFinds(*t, n, SIZE_MAX, removed), size_t{0});
  (void)presized;
}

}  // namespace

TEST(a_table_grown_past_2_24_rows_finds_every_key) {
  checkBig(createTable(dynamicConfig(1, 1024)), false);
}

TEST(a_table_presized_past_2_24_rows_finds_every_key) {
  checkBig(createTable(dynamicConfig(1, size_t{1} << 25)), true);
}

// Presized for exactly 2^24 rows: the index has room for more keys, so nothing but the row
// numbers forces its rebuild when the row 2^24 comes.
TEST(a_table_presized_for_2_24_rows_grown_past_it_finds_every_key) {
  checkBig(createTable(dynamicConfig(1, size_t{1} << 24)), true);
}
#endif

ES_TEST_FILE_END
