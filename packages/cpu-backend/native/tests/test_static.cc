#include <cmath>
#include <cstdio>

#include "memory.h"
#include "static_table.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::snapshot;
using estest::staticConfig;

TEST(static_rows_all_exist_and_reset_on_remove) {
  TableConfig c = staticConfig(5, 2);
  c.initializer.kind = InitKind::kArray;
  c.initializer.values = {0, 1, 10, 11, 20, 21, 30, 31, 40, 41};
  c.slotWidths = {1};
  c.slotInitial = {0.5f};
  auto t = createTable(c);
  EXPECT_EQ(t->size(), size_t{5});
  EXPECT_EQ(t->capacity(), size_t{5});
  EXPECT_EQ(t->memoryUsage(), size_t{5 * 3 * 4});
  int64_t keys[] = {3, 0, 3};
  auto r = t->find(keys, 3);
  EXPECT_EQ(r.values[0], 30.0f);
  EXPECT_EQ(r.values[2], 0.0f);
  EXPECT_EQ(static_cast<int>(r.exists[1]), 1);
  float vals[] = {1, 1, 2, 2, 3, 3};
  t->upsert(keys, 3, vals, nullptr);  // row 3: last occurrence wins
  EXPECT_EQ(snapshot(*t).values[3][0], 3.0f);
  uint8_t ex[] = {1, 0, 1};
  t->accum(keys, 3, vals, ex, nullptr);
  EXPECT_EQ(snapshot(*t).values[3][1], 7.0f);
  EXPECT_EQ(snapshot(*t).values[0][0], 2.0f);
  EXPECT_EQ(t->remove(keys, 3), size_t{2});
  auto s = snapshot(*t);
  EXPECT_EQ(s.values[3][0], 30.0f);
  EXPECT_EQ(s.slots[3][0], 0.5f);
  EXPECT_EQ(t->restrict(0), size_t{0});
  auto e = t->exportBatch(3, 10);
  EXPECT_EQ(e.keys.size(), size_t{2});
  EXPECT_EQ(e.keys[0], int64_t{3});
  EXPECT_EQ(e.scores[1], uint64_t{0});
}

TEST(static_keys_out_of_range_change_nothing) {
  auto t = createTable(staticConfig(4, 1));
  int64_t keys[] = {0, 4};
  float vals[] = {9, 9};
  EXPECT_THROW_CODE(t->upsert(keys, 2, vals, nullptr), kOutOfRange);
  int64_t neg = -1;
  EXPECT_THROW_CODE(t->find(&neg, 1), kOutOfRange);
  EXPECT_EQ(snapshot(*t).values[0][0], 0.0f);
}

// A negative int32 id read as unsigned is at least 2^31: on a table of more rows than that
// it must still be refused (not pooled as row 2^31 + ...). The table is address space only:
// zero-initialized rows are never touched.
TEST(static_negative_int32_ids_refused_past_2_pow_31_rows) {
  const size_t rows = (size_t{1} << 31) + 2;
  // 8 GiB of address space; the table refuses more than the machine's RAM (memory.cc).
  if (physicalMemoryBytes() != 0 && physicalMemoryBytes() < rows * sizeof(float)) {
    std::printf("  skip: a %zu-row table needs more than this machine's %zu bytes of RAM\n", rows,
                physicalMemoryBytes());
    return;
  }
  auto t = createTable(staticConfig(rows, 1));
  int32_t splits[] = {0, 2};
  int32_t ids[] = {1, INT32_MIN};
  BagInput bag;
  bag.rowSplits = splits;
  bag.rows = 1;
  bag.n = 2;
  bag.keys32 = ids;
  EXPECT_THROW_CODE(t->lookupCombined(bag, Combiner::kSum, 0, false), kOutOfRange);
  int32_t last[] = {1, INT32_MAX};  // the largest int32 id is a row here
  bag.keys32 = last;
  auto out = t->lookupCombined(bag, Combiner::kSum, 0, false);
  EXPECT_EQ(out[0], 0.0f);
  int64_t neg[] = {int64_t{1} << 31, -1};  // int64 keys: row 2^31 exists, -1 does not
  EXPECT_THROW_CODE(t->find(neg, 2), kOutOfRange);
}

TEST(static_apply_gradients_and_bags) {
  TableConfig c = staticConfig(3, 2);
  c.initializer.kind = InitKind::kOnes;
  auto t = createTable(c);
  int64_t keys[] = {1, 1, 2};
  float grads[] = {1, 1, 2, 2, 4, 4};
  OptimizerParams p;
  p.kind = OptimizerKind::kSgd;
  p.lr = 0.5;
  t->applyGradients(keys, 3, grads, p);
  auto s = snapshot(*t);
  EXPECT_EQ(s.values[1][0], -0.5f);  // 1 - 0.5 * 3
  EXPECT_EQ(s.values[2][1], -1.0f);
  EXPECT_EQ(s.values[0][0], 1.0f);
  int32_t splits[] = {0, 3};
  BagInput bag{splits, 1, keys, 3, nullptr};
  auto out = t->lookupCombined(bag, Combiner::kMean, 0, false);
  EXPECT_FLOAT_BITS(out[0], static_cast<float>((-0.5 - 0.5 - 1.0) / 3.0));
  t->clear();
  EXPECT_EQ(snapshot(*t).values[1][0], 1.0f);
}

TEST(find_splits_at_the_pool_threshold_on_both_table_kinds) {
  // An async find brings the pool's helpers along exactly when findInto splits at once
  // (forEachRange: kParallelThreshold keys and more).
  auto s = createTable(staticConfig(4, 2));
  auto d = createTable(estest::dynamicConfig(2));
  for (Table* t : {s.get(), d.get()}) {
    EXPECT_TRUE(!t->findSplits(0));
    EXPECT_TRUE(!t->findSplits(kParallelThreshold - 1));
    EXPECT_TRUE(t->findSplits(kParallelThreshold));
  }
}

ES_TEST_FILE_END
