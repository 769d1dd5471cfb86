// BatchDedupe against a plain reimplementation (a std::unordered_map walked in input order):
// the uniques in order of first appearance, each occurrence's unique id, counts, first and
// last occurrences and occurrence lists, for short and long batches of few, many and all
// distinct keys (the arrays are sized once for every key distinct and written in place).
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "dedupe.h"
#include "test.h"

using namespace embedstack;

namespace {

// splitmix64: the test's keys.
struct SplitMix64 {
  uint64_t s;
  explicit SplitMix64(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

void expectDedupe(const std::vector<int64_t>& keys) {
  std::unordered_map<int64_t, uint32_t> seen;
  std::vector<int64_t> uniq;
  std::vector<uint32_t> ids, counts, first, last;
  std::vector<std::vector<uint32_t>> occ;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = seen.find(keys[i]);
    uint32_t u;
    if (it == seen.end()) {
      u = static_cast<uint32_t>(uniq.size());
      seen.emplace(keys[i], u);
      uniq.push_back(keys[i]);
      counts.push_back(0);
      first.push_back(static_cast<uint32_t>(i));
      last.push_back(0);
      occ.emplace_back();
    } else {
      u = it->second;
    }
    ids.push_back(u);
    ++counts[u];
    last[u] = static_cast<uint32_t>(i);
    occ[u].push_back(static_cast<uint32_t>(i));
  }
  BatchDedupe d;
  d.build(keys.data(), keys.size());
  ASSERT_TRUE(d.uniqueCount() == uniq.size());
  size_t bad = 0;
  for (size_t i = 0; i < keys.size(); ++i) bad += d.uniqueOf(i) != ids[i] ? 1 : 0;
  for (size_t u = 0; u < uniq.size(); ++u) {
    bad += d.key(u) != uniq[u] || d.count(u) != counts[u] || d.firstOccurrence(u) != first[u] ||
                   d.lastOccurrence(u) != last[u]
               ? 1
               : 0;
  }
  d.buildOccurrenceLists();
  for (size_t u = 0; u < uniq.size(); ++u) {
    ASSERT_TRUE(d.occurrencesEnd(u) - d.occurrencesBegin(u) == occ[u].size());
    for (size_t k = 0; k < occ[u].size(); ++k) bad += d.occurrenceList()[d.occurrencesBegin(u) + k] != occ[u][k] ? 1 : 0;
  }
  EXPECT_EQ(bad, size_t{0});
}

}  // namespace

TEST(batch_dedupe_matches_a_plain_dedupe) {
  SplitMix64 rng(7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{16383}, size_t{65536}, size_t{100003}}) {
    std::vector<int64_t> keys(n);
    // Skewed: a few hot keys everywhere, a long tail, some keys only in later parts.
    for (size_t i = 0; i < n; ++i) {
      const uint64_t r = rng.next();
      keys[i] = (r & 3) == 0 ? static_cast<int64_t>(r % 7) : (r & 3) == 1 ? static_cast<int64_t>(i) * -3 - 1 : static_cast<int64_t>(r % 5000) + 1000;
    }
    expectDedupe(keys);
    // Every key distinct; then every key the same.
    for (size_t i = 0; i < n; ++i) keys[i] = static_cast<int64_t>(i * 2654435761u) - 5;
    expectDedupe(keys);
    for (size_t i = 0; i < n; ++i) keys[i] = -42;
    expectDedupe(keys);
    // A key first seen only in the last part, others only in the first.
    for (size_t i = 0; i < n; ++i) keys[i] = i < n / 2 ? static_cast<int64_t>(i % 97) : static_cast<int64_t>(i % 89) + 50;
    expectDedupe(keys);
  }
}
