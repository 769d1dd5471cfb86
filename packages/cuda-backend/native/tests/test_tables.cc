// The bucketed index and the tables in host mode: bucket runs that overflow into
// the next bucket stay findable after erasures and relinks; the host group's
// collectives; hybrid placement reports its split; eviction and compaction keep
// rows dense.
#include <random>
#include <vector>

#include "buffer.h"
#include "table_kernels.cuh"
#include "factory.h"
#include "test.h"

using namespace embedstack;
using namespace embedstack::cuda;

namespace {

/** A tiny index with `buckets` buckets, and the meta rows it points into. */
struct TinyIndex {
  explicit TinyIndex(size_t buckets) : b(buckets) {
    slotRow.resize(buckets * kBucketSlots);
    digests.resize(buckets * kBucketSlots);
    occupied.assign(buckets * kOccupancyWords, 0);
    overflow.assign(buckets + 1, 0);
  }
  IndexView view() { return {slotRow.data(), digests.data(), occupied.data(), overflow.data(), b - 1}; }
  size_t b;
  std::vector<uint32_t> slotRow;
  std::vector<uint8_t> digests;
  std::vector<uint32_t> occupied;
  std::vector<uint32_t> overflow;
};

/** Keys whose hashes all start in bucket 0 of a 4-bucket index. */
std::vector<int64_t> keysHomedAtZero(size_t n) {
  std::vector<int64_t> keys;
  for (int64_t k = -1000000; keys.size() < n; ++k) {
    if ((hashKey(k) & 3) == 0) keys.push_back(k);
  }
  return keys;
}

TableConfig dynamicConfig(size_t dim, size_t maxCapacity = SIZE_MAX) {
  TableConfig c;
  c.dim = dim;
  c.initCapacity = 4;
  c.maxCapacity = maxCapacity;
  c.initializer.kind = InitKind::kConstant;
  c.initializer.a = -1;
  c.scorePolicy = ScorePolicy::kCustomized;
  return c;
}

}  // namespace

TEST(host_group_collectives_behave_as_a_warp) {
  HostGroup g;
  HostGroup::Lanes<uint32_t> v;
  g.each([&](int l) { v[l] = static_cast<uint32_t>(l % 3); });
  EXPECT_EQ(g.ballot([&](int l) { return v[l] == 1; }), 0x92492492u);
  HostGroup::Lanes<uint32_t> peers = g.matchAny(v);
  EXPECT_EQ(peers[4], 0x92492492u);
  HostGroup::Lanes<uint32_t> up = g.shflUp(v, 2);
  EXPECT_EQ(up[1], 1u);  // below delta: its own
  EXPECT_EQ(up[5], 0u);  // lane 3's value
  HostGroup::Lanes<uint32_t> x = g.shflXor(v, 1);
  EXPECT_EQ(x[2], 0u);  // lane 3
  EXPECT_EQ(g.shfl(v, 31), 1u);
}

TEST(a_bucket_run_overflows_into_the_next_bucket_and_stays_findable) {
  TinyIndex ix(4);
  const std::vector<int64_t> keys = keysHomedAtZero(200);  // 200 > 128 slots of bucket 0
  std::vector<RowMeta> meta;
  for (int64_t k : keys) meta.push_back({k, 0});
  uint32_t failed = 0;
  launchGroups<IndexInsert>(*Exec::host(), keys.size(), {ix.view(), keys.data(), meta.data(), nullptr, 0, &failed});
  EXPECT_EQ(failed, 0u);
  EXPECT_TRUE(ix.overflow[0] != 0);
  std::vector<uint32_t> rows(keys.size());
  launchGroups<LookupRows>(*Exec::host(), keys.size(), {ix.view(), meta.data(), keys.data(), rows.data(), ScoreView{}, 0});
  bool all = true;
  for (size_t i = 0; i < keys.size(); ++i) all = all && rows[i] == i;
  EXPECT_TRUE(all);
  // erase the first 100 (bucket 0 gets room again): the overflowed keys are still found
  std::vector<uint32_t> gone(100);
  for (uint32_t i = 0; i < 100; ++i) gone[i] = i;
  launchGroups<IndexErase>(*Exec::host(), gone.size(), {ix.view(), meta.data(), gone.data()});
  launchGroups<LookupRows>(*Exec::host(), keys.size(), {ix.view(), meta.data(), keys.data(), rows.data(), ScoreView{}, 0});
  all = true;
  for (size_t i = 0; i < keys.size(); ++i) all = all && rows[i] == (i < 100 ? kNoRow : i);
  EXPECT_TRUE(all);
}

TEST(digest_matching_is_exact_per_byte) {
  EXPECT_EQ(matchDigests(0x11223344u, 0x33), 0x2u);
  EXPECT_EQ(matchDigests(0x00000000u, 0x00), 0xfu);
  EXPECT_EQ(matchDigests(0x01000100u, 0x00), 0x5u);  // no borrow false positives
  EXPECT_EQ(matchDigests(0x80ff7f01u, 0xff), 0x4u);
}

TEST(dynamic_table_grows_evicts_and_compacts_in_host_mode) {
  auto t = cuda::createTable(dynamicConfig(2, 50), Placement{});
  std::vector<int64_t> keys;
  std::vector<float> values;
  std::vector<uint64_t> scores;
  for (int64_t k = 0; k < 80; ++k) {
    keys.push_back(k * 7919 - 300);
    values.push_back(static_cast<float>(k));
    values.push_back(static_cast<float>(-k));
    scores.push_back(static_cast<uint64_t>(k));
  }
  t->upsert(keys.data(), keys.size(), values.data(), scores.data());
  EXPECT_EQ(t->size(), 50u);  // the 50 best scores: k = 30..79
  FindResult r = t->find(keys.data(), keys.size());
  bool right = true;
  for (size_t k = 0; k < 80; ++k) {
    const bool kept = k >= 30;
    right = right && r.exists[k] == (kept ? 1 : 0) && r.values[2 * k] == (kept ? static_cast<float>(k) : -1.0f);
  }
  EXPECT_TRUE(right);
  EXPECT_EQ(t->remove(keys.data() + 30, 25), 25u);
  ExportResult e = t->exportBatch(0, SIZE_MAX);
  ASSERT_TRUE(e.keys.size() == 25);
  std::vector<bool> seen(80, false);
  for (size_t i = 0; i < 25; ++i) {
    const int64_t k = (e.keys[i] + 300) / 7919;
    seen[static_cast<size_t>(k)] = true;
    EXPECT_EQ(e.values[2 * i], static_cast<float>(k));
    EXPECT_EQ(e.scores[i], static_cast<uint64_t>(k));
  }
  for (size_t k = 55; k < 80; ++k) EXPECT_TRUE(seen[k]);
}

TEST(hybrid_placement_spills_rows_past_the_budget_and_reports_both) {
  Placement p;
  p.hbmBudget = 8 * 4 * sizeof(float);  // 8 rows of dim 4 in "HBM"
  auto t = cuda::createTable(dynamicConfig(4), p);
  auto* d = dynamic_cast<DeviceTable*>(t.get());
  ASSERT_TRUE(d != nullptr);
  std::vector<int64_t> keys(100);
  std::vector<float> values(400);
  for (size_t i = 0; i < 100; ++i) {
    keys[i] = static_cast<int64_t>(i) * 13;
    for (size_t c = 0; c < 4; ++c) values[i * 4 + c] = static_cast<float>(i * 10 + c);
  }
  t->upsert(keys.data(), keys.size(), values.data(), nullptr);
  const DeviceTable::MemorySplit m = d->memorySplit();
  EXPECT_TRUE(m.pinned >= (t->capacity() - 8) * 4 * sizeof(float));
  EXPECT_EQ(m.device + m.pinned, t->memoryUsage());
  FindResult r = t->find(keys.data(), keys.size());
  bool same = true;
  for (size_t i = 0; i < 400; ++i) same = same && r.values[i] == values[i];
  EXPECT_TRUE(same);
}
