// The data-parallel primitives in host mode against plain sequential references:
// exclusive scan, stable radix sort, dedupe (first appearance order, counts, first
// and last occurrences, ordered occurrence lists), radix selection and compaction.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "primitives.h"
#include "test.h"

using namespace embedstack;
using namespace embedstack::cuda;

namespace {

Exec& host() {
  return *Exec::host();
}

template <class T>
std::vector<T> copyOut(const T* p, size_t n) {
  return std::vector<T>(p, p + n);
}

}  // namespace

TEST(exclusive_scan_matches_a_sequential_sum_across_tiles_and_levels) {
  std::mt19937 rng(7);
  for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{70000}}) {
    std::vector<uint32_t> in(n);
    for (auto& x : in) x = rng() % 5;
    std::vector<uint32_t> out(n);
    Stage st(host());
    const uint32_t total = exclusiveScan(st, in.data(), out.data(), n);
    uint32_t run = 0;
    bool same = true;
    for (size_t i = 0; i < n; ++i) {
      same = same && out[i] == run;
      run += in[i];
    }
    EXPECT_TRUE(same);
    EXPECT_EQ(total, run);
    exclusiveScan(st, in.data(), in.data(), n);  // in place
    EXPECT_TRUE(in == out);
  }
}

TEST(radix_sort_is_stable_and_sorted) {
  std::mt19937 rng(11);
  for (size_t n : {size_t{2}, size_t{300}, size_t{5000}}) {
    for (uint32_t bits : {8u, 16u, 24u}) {
      std::vector<uint32_t> keys(n), values(n);
      for (size_t i = 0; i < n; ++i) {
        keys[i] = rng() % (bits == 8 ? 7u : (1u << bits));
        values[i] = static_cast<uint32_t>(i);
      }
      std::vector<std::pair<uint32_t, uint32_t>> expected;
      for (size_t i = 0; i < n; ++i) expected.push_back({keys[i], values[i]});
      std::stable_sort(expected.begin(), expected.end(), [](auto& a, auto& b) { return a.first < b.first; });
      Stage st(host());
      sortPairs(st, keys.data(), values.data(), n, bits);
      bool same = true;
      for (size_t i = 0; i < n; ++i) same = same && keys[i] == expected[i].first && values[i] == expected[i].second;
      EXPECT_TRUE(same);
    }
  }
}

TEST(dedupe_orders_uniques_by_first_appearance_with_counts_and_occurrences) {
  std::mt19937_64 rng(3);
  const size_t n = 20000;
  std::vector<int64_t> keys(n);
  const int64_t specials[] = {INT64_MIN, INT64_MAX, 0, -1};
  for (size_t i = 0; i < n; ++i) keys[i] = i % 9 == 0 ? specials[i % 4] : static_cast<int64_t>(rng() % 3000) - 1500;
  Stage st(host());
  const Dedupe d = dedupe(st, keys.data(), n, true);
  // reference: first appearance order
  std::vector<int64_t> order;
  std::map<int64_t, std::vector<uint32_t>> occ;
  for (size_t i = 0; i < n; ++i) {
    if (occ[keys[i]].empty()) order.push_back(keys[i]);
    occ[keys[i]].push_back(static_cast<uint32_t>(i));
  }
  ASSERT_TRUE(d.unique == order.size());
  bool same = true;
  for (size_t u = 0; u < d.unique; ++u) {
    const auto& o = occ[order[u]];
    same = same && d.uniqueKeys[u] == order[u] && d.countOf[u] == o.size() && d.firstOf[u] == o.front() &&
           d.lastOf[u] == o.back();
    const std::vector<uint32_t> list(d.occList + d.occOffsets[u], d.occList + d.occOffsets[u + 1]);
    same = same && list == o;
  }
  for (size_t i = 0; i < n; ++i) same = same && d.uniqueKeys[d.uniqueOf[i]] == keys[i];
  EXPECT_TRUE(same);
  EXPECT_EQ(d.occOffsets[d.unique], n);
}

TEST(selection_keeps_the_best_by_score_then_new_keys_then_smaller_keys) {
  std::mt19937_64 rng(5);
  for (size_t n : {size_t{1}, size_t{10}, size_t{700}}) {
    std::vector<SelectCandidate> c(n);
    for (size_t i = 0; i < n; ++i) {
      c[i] = {rng() % 4 == 0 ? UINT64_MAX : rng() % 8, static_cast<int64_t>(rng()), static_cast<uint32_t>(i),
              static_cast<uint32_t>(rng() % 2)};
    }
    c[0].key = INT64_MIN;
    if (n > 1) c[1] = {c[0].score, INT64_MAX, 1, c[0].resident};
    auto better = [](const SelectCandidate& a, const SelectCandidate& b) {
      return std::make_tuple(~a.score, a.resident ? 1 : 0, a.key) < std::make_tuple(~b.score, b.resident ? 1 : 0, b.key);
    };
    std::vector<SelectCandidate> ranked = c;
    std::sort(ranked.begin(), ranked.end(), better);
    for (size_t keep : {size_t{0}, n / 3, n - 1, n}) {
      std::vector<uint8_t> state(n);
      Stage st(host());
      selectKeep(st, c.data(), n, keep, state.data());
      std::vector<uint8_t> expected(n, kDrop);
      for (size_t k = 0; k < keep; ++k) expected[ranked[k].ref] = kKeep;
      EXPECT_TRUE(state == expected);
    }
  }
}

TEST(compaction_lists_flagged_indices_in_order_with_a_base) {
  std::vector<uint8_t> flags = {0, 1, 1, 0, 0, 1, 0, 1};
  std::vector<uint32_t> out(flags.size());
  Stage st(host());
  const uint32_t n = compactIndices(st, flags.data(), flags.size(), out.data(), 100);
  EXPECT_EQ(n, 4u);
  EXPECT_TRUE(copyOut(out.data(), n) == (std::vector<uint32_t>{101, 102, 105, 107}));
}
