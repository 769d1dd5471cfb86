// The dynamic table's two index layouts (key_index.h): narrow (16 slots x 3-byte rows)
// while its rows fit 24 bits, wide (12 x 4-byte rows) above. A real 2^24-row table is too
// slow for these tests, so they lower DynamicTable::narrowIndexRows (the switch point) to
// 1000 rows and check that a table crossing it, both ways, reads, writes, exports and
// scores exactly as a table that stays narrow and one that is wide from the start.
#include <cstring>
#include <random>
#include <vector>

#include "dynamic_table.h"
#include "pass_table.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;

namespace {

/** Sets DynamicTable::narrowIndexRows for a scope. */
struct NarrowIndexRows {
  size_t saved;
  explicit NarrowIndexRows(size_t rows) : saved(DynamicTable::narrowIndexRows.load()) { DynamicTable::narrowIndexRows = rows; }
  ~NarrowIndexRows() { DynamicTable::narrowIndexRows = saved; }
};

constexpr size_t kSwitch = 1000;
constexpr size_t kDim = 3;

/** A table and the switch point its calls run under. */
struct Subject {
  std::shared_ptr<Table> t;
  size_t rows;  // narrowIndexRows during its calls
  DynamicTable& d() const { return dynamic_cast<DynamicTable&>(*t); }
};

float valueOf(int64_t k, size_t c, int round) {
  return static_cast<float>(static_cast<double>((k >> (c * 7)) % 1000) * 0.001 + round * 0.5 + static_cast<double>(c));
}

/** Runs op on every subject, each under its own switch point. */
template <class Op>
void onEach(std::vector<Subject>& subjects, Op&& op) {
  for (Subject& s : subjects) {
    NarrowIndexRows hook(s.rows);
    op(s);
  }
}

/** Same find results (values bits and exists) of `keys` on every subject, through the pipeline and the passes. */
size_t differentFinds(std::vector<Subject>& subjects, const std::vector<int64_t>& keys) {
  size_t bad = 0;
  for (size_t passesFrom : {SIZE_MAX, size_t{0}}) {
    estest::PassesFrom passes(passesFrom);
    std::vector<FindResult> r;
    onEach(subjects, [&](Subject& s) { r.push_back(s.t->find(keys.data(), keys.size())); });
    for (size_t i = 1; i < r.size(); ++i) {
      bad += std::memcmp(r[i].values.data(), r[0].values.data(), keys.size() * kDim * sizeof(float)) != 0;
      bad += std::memcmp(r[i].exists.data(), r[0].exists.data(), keys.size()) != 0;
    }
  }
  return bad;
}

/** Same bag sums (bags of 7 keys) on every subject, through the pipeline and the passes. */
size_t differentBags(std::vector<Subject>& subjects, const std::vector<int64_t>& keys) {
  size_t bad = 0;
  const size_t rows = keys.size() / 7;
  std::vector<int32_t> splits(rows + 1);
  for (size_t i = 0; i <= rows; ++i) splits[i] = static_cast<int32_t>(i * 7);
  const BagInput bag{splits.data(), rows, keys.data(), rows * 7, nullptr};
  for (size_t passesFrom : {SIZE_MAX, size_t{0}}) {
    estest::PassesFrom passes(passesFrom);
    std::vector<HostArray<float>> r;
    onEach(subjects, [&](Subject& s) { r.push_back(s.t->lookupCombined(bag, Combiner::kSum, 0, false)); });
    for (size_t i = 1; i < r.size(); ++i) bad += std::memcmp(r[i].data(), r[0].data(), rows * kDim * sizeof(float)) != 0;
  }
  return bad;
}

size_t differentExports(std::vector<Subject>& subjects) {
  size_t bad = 0;
  for (size_t i = 1; i < subjects.size(); ++i) bad += !estest::sameTables(*subjects[0].t, *subjects[i].t);
  return bad;
}

void upsertKeys(std::vector<Subject>& subjects, const std::vector<int64_t>& keys, int round) {
  std::vector<float> vals(keys.size() * kDim);
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t c = 0; c < kDim; ++c) vals[i * kDim + c] = valueOf(keys[i], c, round);
  }
  onEach(subjects, [&](Subject& s) { s.t->upsert(keys.data(), keys.size(), vals.data(), nullptr); });
}

}  // namespace

TEST(a_table_crossing_the_narrow_index_limit_reads_and_writes_as_one_that_does_not) {
  // 0: grows from 16 rows across the switch point; 1: the same calls with the default switch
  // (2^24: narrow throughout); 2: presized past the switch point (wide from the start).
  std::vector<Subject> s;
  {
    NarrowIndexRows hook(kSwitch);
    s.push_back({createTable(dynamicConfig(kDim, 16)), kSwitch});
    s.push_back({nullptr, KeyIndex::kNarrowRows});
    s.push_back({createTable(dynamicConfig(kDim, 5000)), kSwitch});
  }
  s[1].t = createTable(dynamicConfig(kDim, 16));
  EXPECT_TRUE(s[0].d().indexNarrow());
  EXPECT_TRUE(s[1].d().indexNarrow());
  EXPECT_TRUE(!s[2].d().indexNarrow());
  std::mt19937_64 rng(2024);
  std::vector<int64_t> stored = {INT64_MIN, INT64_MAX, 0, -1, 1};
  upsertKeys(s, stored, 0);
  // Batches of 99 + the 5 above: size 995 narrow, then 1094 wide (the switch rebuilds the index).
  for (int b = 0; b < 15; ++b) {
    std::vector<int64_t> batch;
    for (int i = 0; i < 99; ++i) batch.push_back(static_cast<int64_t>(rng()));
    stored.insert(stored.end(), batch.begin(), batch.end());
    upsertKeys(s, batch, b);
    EXPECT_EQ(s[0].d().indexNarrow(), s[0].t->size() <= kSwitch);
    EXPECT_TRUE(s[1].d().indexNarrow());
    EXPECT_TRUE(!s[2].d().indexNarrow());
  }
  EXPECT_EQ(s[0].t->size(), size_t{1490});
  // A batch that ends exactly at the switch point keeps the index narrow; one row more does not.
  {
    NarrowIndexRows hook(kSwitch);
    auto t = createTable(dynamicConfig(kDim, 16));
    auto& d = dynamic_cast<DynamicTable&>(*t);
    std::vector<int64_t> keys(stored.begin(), stored.begin() + kSwitch);
    std::vector<float> vals(keys.size() * kDim, 0.5f);
    t->upsert(keys.data(), keys.size(), vals.data(), nullptr);
    EXPECT_TRUE(d.indexNarrow());
    t->upsert(&stored[kSwitch], 1, vals.data(), nullptr);
    EXPECT_TRUE(!d.indexNarrow());
    std::vector<int64_t> all(stored.begin(), stored.begin() + kSwitch + 1);
    auto r = t->find(all.data(), all.size());
    size_t missing = 0;
    for (size_t i = 0; i < all.size(); ++i) missing += r.exists[i] == 0;
    EXPECT_EQ(missing, size_t{0});
  }
  std::vector<int64_t> queries = stored;
  for (int i = 0; i < 300; ++i) queries.push_back(static_cast<int64_t>(rng()));
  std::shuffle(queries.begin(), queries.end(), rng);
  EXPECT_EQ(differentFinds(s, queries), size_t{0});
  EXPECT_EQ(differentBags(s, queries), size_t{0});
  EXPECT_EQ(differentExports(s), size_t{0});
  // Removals (rows moved into holes: index rows rewritten), then new keys, findOrInsert, accum.
  std::vector<int64_t> gone;
  for (size_t i = 0; i < stored.size(); i += 3) gone.push_back(stored[i]);
  onEach(s, [&](Subject& x) { EXPECT_EQ(x.t->remove(gone.data(), gone.size()), gone.size()); });
  std::vector<int64_t> more;
  for (int i = 0; i < 400; ++i) more.push_back(static_cast<int64_t>(rng()));
  upsertKeys(s, more, 7);
  std::vector<int64_t> mixed(gone.begin(), gone.begin() + 100);
  mixed.insert(mixed.end(), stored.begin() + 1, stored.begin() + 101);
  onEach(s, [&](Subject& x) { x.t->findOrInsert(mixed.data(), mixed.size(), nullptr); });
  std::vector<float> deltas(mixed.size() * kDim, 0.25f);
  std::vector<uint8_t> exists(mixed.size(), 1);
  onEach(s, [&](Subject& x) { x.t->accum(mixed.data(), mixed.size(), deltas.data(), exists.data(), nullptr); });
  queries.insert(queries.end(), more.begin(), more.end());
  EXPECT_EQ(differentFinds(s, queries), size_t{0});
  EXPECT_EQ(differentBags(s, queries), size_t{0});
  EXPECT_EQ(differentExports(s), size_t{0});
  EXPECT_TRUE(!s[0].d().indexNarrow());
  // clear keeps each index's layout and size; the tables refill alike.
  onEach(s, [](Subject& x) { x.t->clear(); });
  EXPECT_TRUE(!s[0].d().indexNarrow());
  EXPECT_TRUE(s[1].d().indexNarrow());
  EXPECT_EQ(differentFinds(s, queries), size_t{0});
  upsertKeys(s, std::vector<int64_t>(queries.begin(), queries.begin() + 700), 9);
  EXPECT_EQ(differentFinds(s, queries), size_t{0});
  EXPECT_EQ(differentBags(s, queries), size_t{0});
  EXPECT_EQ(differentExports(s), size_t{0});
}

TEST(a_wide_index_rebuilt_for_room_while_the_rows_fit_24_bits_turns_narrow_again) {
  // Wide from the start (initCapacity 16 past a switch point of 10), then grown under a switch
  // point of 1000: the first rebuild for room is narrow, and the table reads as a narrow twin.
  std::shared_ptr<Table> t;
  {
    NarrowIndexRows hook(10);
    t = createTable(dynamicConfig(kDim, 16));
  }
  std::vector<Subject> s{{t, kSwitch}, {createTable(dynamicConfig(kDim, 16)), KeyIndex::kNarrowRows}};
  EXPECT_TRUE(!s[0].d().indexNarrow());
  const size_t groups = s[0].d().indexGroups();
  std::mt19937_64 rng(5);
  std::vector<int64_t> keys;
  for (int i = 0; i < 10; ++i) keys.push_back(static_cast<int64_t>(rng()));
  upsertKeys(s, keys, 0);
  EXPECT_EQ(s[0].d().indexGroups(), groups);  // 10 keys fit the wide index: no rebuild
  EXPECT_TRUE(!s[0].d().indexNarrow());
  std::vector<int64_t> batch;
  for (int i = 0; i < 40; ++i) batch.push_back(static_cast<int64_t>(rng()));
  upsertKeys(s, batch, 1);
  keys.insert(keys.end(), batch.begin(), batch.end());
  EXPECT_TRUE(s[0].d().indexNarrow());
  for (int i = 0; i < 200; ++i) keys.push_back(static_cast<int64_t>(rng()));
  EXPECT_EQ(differentFinds(s, keys), size_t{0});
  EXPECT_EQ(differentBags(s, keys), size_t{0});
  EXPECT_EQ(differentExports(s), size_t{0});
}

ES_TEST_FILE_END
