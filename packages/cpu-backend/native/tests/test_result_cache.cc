// The result cache (memory.h, resultAllocate): freed blocks of 1 MiB or more are reused
// by the next request of a similar size, within a cap. The tests recycle a block full of
// garbage into real results and check every element against values computed here.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "memory.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;
using estest::staticConfig;

namespace {

constexpr size_t kDim = 64;
// 4096 rows of 64 floats: a 1 MiB result, the smallest the cache keeps.
constexpr size_t kRows = kResultMinBlock / (kDim * sizeof(float));

// Sets a cap for one test and restores the process's default after it (the cache is process-wide).
struct CacheCap {
  size_t before;
  explicit CacheCap(size_t cap) : before(resultCacheStats().capBytes) {
    clearResultCache();
    setResultCacheCap(cap);
  }
  ~CacheCap() {
    clearResultCache();
    setResultCacheCap(before);
  }
};

// Frees a block of `bytes` filled with 0xFF bytes (NaN floats) into the cache; returns its address.
void* freeGarbageBlock(size_t bytes) {
  HostArray<uint8_t> junk(bytes);
  std::memset(junk.data(), 0xFF, bytes);
  return junk.data();  // freed (into the cache) by junk's destructor
}

float rowValue(size_t row, size_t c) { return static_cast<float>(row % 97) * 0.5f + static_cast<float>(c) * 0.125f; }

}  // namespace

TEST(result_cache_recycled_garbage_never_reaches_a_bag_result) {
  CacheCap cap(size_t{64} << 20);
  const size_t tableRows = 300;
  auto t = createTable(staticConfig(tableRows, kDim));
  std::vector<int64_t> keys(tableRows);
  std::vector<float> vals(tableRows * kDim);
  for (size_t r = 0; r < tableRows; ++r) {
    keys[r] = static_cast<int64_t>(r);
    for (size_t c = 0; c < kDim; ++c) vals[r * kDim + c] = rowValue(r, c);
  }
  t->upsert(keys.data(), tableRows, vals.data(), nullptr);
  // kRows bags: bag r holds r % 4 ids (every fourth bag is empty).
  std::vector<int32_t> splits(kRows + 1, 0);
  std::vector<int32_t> ids;
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t k = 0; k < r % 4; ++k) ids.push_back(static_cast<int32_t>((r * 7 + k * 13) % tableRows));
    splits[r + 1] = static_cast<int32_t>(ids.size());
  }
  BagInput bag;
  bag.rowSplits = splits.data();
  bag.rows = kRows;
  bag.n = ids.size();
  bag.keys32 = ids.data();
  for (Combiner comb : {Combiner::kSum, Combiner::kMean}) {
    void* garbage = freeGarbageBlock(kRows * kDim * sizeof(float));
    const uint64_t hits = resultCacheStats().hits;
    auto out = t->lookupCombined(bag, comb, 0, false);
    EXPECT_TRUE(static_cast<void*>(out.data()) == garbage);  // the garbage block was reused
    EXPECT_EQ(resultCacheStats().hits, hits + 1);
    size_t wrong = 0;
    for (size_t r = 0; r < kRows; ++r) {
      const size_t n = r % 4;
      for (size_t c = 0; c < kDim; ++c) {
        double sum = 0;
        for (size_t k = 0; k < n; ++k) sum += static_cast<double>(rowValue((r * 7 + k * 13) % tableRows, c));
        float want = n == 0 ? 0.0f : static_cast<float>(comb == Combiner::kMean ? sum / static_cast<double>(n) : sum);
        if (estest::floatBits(out[r * kDim + c]) != estest::floatBits(want)) ++wrong;
      }
    }
    EXPECT_EQ(wrong, size_t{0});
  }
}

TEST(result_cache_recycled_garbage_never_reaches_a_find_result) {
  CacheCap cap(size_t{64} << 20);
  auto t = createTable(dynamicConfig(kDim, 1024));
  std::vector<int64_t> present;
  for (int64_t k = 0; k < 500; ++k) present.push_back(k * 3 + 1);
  std::vector<float> vals(present.size() * kDim);
  for (size_t i = 0; i < present.size(); ++i)
    for (size_t c = 0; c < kDim; ++c) vals[i * kDim + c] = rowValue(static_cast<size_t>(present[i]), c);
  t->upsert(present.data(), present.size(), vals.data(), nullptr);
  // kRows keys, every third one present: the absent ones' rows are zeros.
  std::vector<int64_t> keys(kRows);
  for (size_t i = 0; i < kRows; ++i) keys[i] = static_cast<int64_t>(i % 1500);
  void* garbage = freeGarbageBlock(kRows * kDim * sizeof(float));
  auto r = t->find(keys.data(), keys.size());
  EXPECT_TRUE(static_cast<void*>(r.values.data()) == garbage);
  size_t wrong = 0;
  for (size_t i = 0; i < kRows; ++i) {
    const int64_t k = keys[i];
    const bool exists = k % 3 == 1 && k / 3 < 500;
    if (static_cast<bool>(r.exists[i]) != exists) ++wrong;
    for (size_t c = 0; c < kDim; ++c) {
      const float want = exists ? rowValue(static_cast<size_t>(k), c) : 0.0f;
      if (estest::floatBits(r.values[i * kDim + c]) != estest::floatBits(want)) ++wrong;
    }
  }
  EXPECT_EQ(wrong, size_t{0});
}

TEST(result_cache_takes_a_similar_size_and_keeps_to_its_cap) {
  CacheCap cap(size_t{8} << 20);
  // A block at most 1/4 larger than the request is reused; a larger one is not.
  void* big = freeGarbageBlock(size_t{4} << 20);
  HostArray<uint8_t> small(size_t{2} << 20);
  EXPECT_TRUE(static_cast<void*>(small.data()) != big);
  EXPECT_EQ(resultCacheStats().heldBlocks, size_t{1});
  HostArray<uint8_t> close((size_t{7} << 20) / 2);  // 3.5 MiB: the 4 MiB block serves it
  EXPECT_TRUE(static_cast<void*>(close.data()) == big);
  EXPECT_EQ(resultCacheStats().heldBlocks, size_t{0});
  // The cap: three 3 MiB blocks freed into 8 MiB keep the two newest.
  {
    HostArray<uint8_t> a(size_t{3} << 20), b(size_t{3} << 20), c(size_t{3} << 20);
  }
  EXPECT_EQ(resultCacheStats().heldBlocks, size_t{2});
  EXPECT_EQ(resultCacheStats().heldBytes, size_t{6} << 20);
  // A block larger than the cap is not kept; small blocks (malloc) never are.
  { HostArray<uint8_t> huge(size_t{9} << 20); }
  { HostArray<uint8_t> tiny(1000); }
  EXPECT_EQ(resultCacheStats().heldBlocks, size_t{2});
  // Lowering the cap frees the oldest; 0 turns caching off.
  setResultCacheCap(size_t{4} << 20);
  EXPECT_EQ(resultCacheStats().heldBlocks, size_t{1});
  setResultCacheCap(0);
  EXPECT_EQ(resultCacheStats().heldBytes, size_t{0});
  { HostArray<uint8_t> d(size_t{2} << 20); }
  EXPECT_EQ(resultCacheStats().heldBlocks, size_t{0});
}

TEST(result_cache_is_shared_by_threads) {
  CacheCap cap(size_t{16} << 20);
  std::vector<std::thread> threads;
  std::vector<size_t> wrong(4, 0);
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      for (size_t i = 0; i < 200; ++i) {
        const size_t n = (size_t{1} << 18) + ((i + t) % 5) * 4096;  // 1 MiB and a little more
        HostArray<uint32_t> a(n);
        for (size_t j = 0; j < n; j += 1024) a[j] = static_cast<uint32_t>(t * 1000 + i);
        for (size_t j = 0; j < n; j += 1024) wrong[t] += a[j] != static_cast<uint32_t>(t * 1000 + i);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(wrong[t], size_t{0});
  EXPECT_TRUE(resultCacheStats().heldBytes <= (size_t{16} << 20));
}

TEST(result_cache_default_cap_is_a_sixteenth_of_memory_within_128_mib_to_1_gib) {
  constexpr size_t MiB = size_t{1} << 20;
  EXPECT_EQ(resultCacheDefaultCap(0), 128 * MiB);  // memory unknown
  EXPECT_EQ(resultCacheDefaultCap(1024 * MiB), 128 * MiB);
  EXPECT_EQ(resultCacheDefaultCap(2048 * MiB), 128 * MiB);
  EXPECT_EQ(resultCacheDefaultCap(4096 * MiB + 16), 256 * MiB + 1);
  EXPECT_EQ(resultCacheDefaultCap(8192 * MiB), 512 * MiB);
  EXPECT_EQ(resultCacheDefaultCap(16384 * MiB), 1024 * MiB);
  EXPECT_EQ(resultCacheDefaultCap(size_t{1} << 40), 1024 * MiB);
  // the process's cache starts at that default (unless EMBEDSTACK_CPU_RESULT_CACHE_MB is set)
  if (std::getenv("EMBEDSTACK_CPU_RESULT_CACHE_MB") == nullptr) {
    EXPECT_EQ(resultCacheStats().capBytes, resultCacheDefaultCap(physicalMemoryBytes()));
  }
  // and it holds 256 MiB blocks (a 1M-key find at dim 64) when the machine has 8 GiB or more
  CacheCap big(resultCacheDefaultCap(8192 * MiB));
  HostArray<float> r(size_t{1} << 26);  // 256 MiB
  void* p = r.data();
  r = HostArray<float>();
  EXPECT_EQ(resultCacheStats().heldBytes, 256 * MiB);
  HostArray<float> again(size_t{1} << 26);
  EXPECT_TRUE(again.data() == p);
  EXPECT_EQ(resultCacheStats().heldBytes, size_t{0});
}

ES_TEST_FILE_END
