// The eviction rule of capped tables (core scores.ts / reference scoring.ts):
// when a call's new keys do not fit, keep, among the resident rows the call does
// not touch and the new keys, those with the highest scores; ties keep new keys
// first (as HierarchicalKV admits a key that ties the bucket's lowest score), then
// smaller signed keys. Losing residents are evicted, losing new keys refused.
//
// With L = size + new - cap losers (L <= new), a bounded heap of the L worst
// candidates is kept while scanning every untouched resident: O(size log L) time,
// O(L) extra memory. All memory is reserved before the first eviction.
#include <algorithm>

#include "dynamic_table.h"

namespace embedstack {

ScratchVector<uint32_t> DynamicTable::admit(WriteBatch& wb, const ScratchVector<uint8_t>* wantsNew,
                                            bool explicitScores) {
  const BatchDedupe& d = wb.dedupe;
  const size_t unique = d.uniqueCount();
  ScratchVector<uint32_t> fresh;
  for (size_t u = 0; u < unique; ++u) {
    if (wb.rows[u] == KeyIndex::kNoRow && (!wantsNew || (*wantsNew)[u])) fresh.push_back(static_cast<uint32_t>(u));
  }
  if (fresh.empty()) {
    reserve(wb, size_, 0);  // the records' widening, if any
    return fresh;
  }
  if (!capped_ || fresh.size() <= capCeiling_ - size_) {
    reserve(wb, checkedAdd(size_, fresh.size(), "the table"), fresh.size());
    return fresh;
  }

  const size_t losersNeeded = size_ + fresh.size() - capCeiling_;
  ScratchVector<uint64_t> touched((size_ + 63) / 64, 0);
  for (size_t u = 0; u < unique; ++u) {
    const uint32_t row = wb.rows[u];
    if (row != KeyIndex::kNoRow) touched[row >> 6] |= uint64_t{1} << (row & 63);
  }
  // Max-heap whose top is the most keepable of the current worst set.
  auto worse = [](const EvictionCandidate& a, const EvictionCandidate& b) { return keepsBefore(b, a); };
  ScratchVector<EvictionCandidate> heap;
  heap.reserve(losersNeeded);
  auto consider = [&](const EvictionCandidate& c) {
    if (heap.size() < losersNeeded) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), worse);
    } else if (keepsBefore(heap.front(), c)) {
      std::pop_heap(heap.begin(), heap.end(), worse);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  const MetaView m = meta();
  for (size_t row = 0; row < size_; ++row) {
    if (touched[row >> 6] & (uint64_t{1} << (row & 63))) continue;
    consider({m.score(row), m.key(row), true, static_cast<uint32_t>(row)});
  }
  const ScorePolicy policy = config_.scorePolicy;
  for (uint32_t u : fresh) {
    const uint64_t score =
        explicitScores ? wb.given(u) : nextScore(policy, 0, d.count(u), wb.hasGiven(u), wb.given(u), wb.clock);
    consider({score, d.key(u), false, u});
  }

  ScratchVector<int64_t> evict;
  size_t refusedCount = 0;
  for (const EvictionCandidate& c : heap) {
    if (c.resident) {
      evict.push_back(c.key);
    } else {
      ++refusedCount;
    }
  }
  const size_t admittedCount = fresh.size() - refusedCount;
  ScratchVector<uint32_t> admitted;
  admitted.reserve(admittedCount);
  reserve(wb, size_ - evict.size() + admittedCount, admittedCount);
  // From here on nothing can fail.
  for (const EvictionCandidate& c : heap) {
    if (!c.resident) wb.refused[c.ref] = 1;
  }
  for (int64_t key : evict) removeKey(key);
  for (size_t u = 0; u < unique; ++u) {
    if (wb.present[u]) wb.rows[u] = lookup(d.key(u));  // evictions moved records
  }
  for (uint32_t u : fresh) {
    if (!wb.refused[u]) admitted.push_back(u);
  }
  return admitted;
}

}  // namespace embedstack
