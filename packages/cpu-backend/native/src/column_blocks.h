// Shared shape of the gather-reduce kernels (bag_sum.h, combine.cc, combine_plan.cc):
// rows are random reads from a large table, so a kernel is bound by how many cache
// misses it keeps in flight and by accumulator traffic, not by arithmetic. Two rules follow:
//  - prefetch rows far enough ahead (about 6 KiB of rows: 24 rows at dim 64 float32),
//    into every cache level (the bag's pooling loop, bag_sum.h: that far only into L2,
//    and again into L1 a third of the way ahead, which was 1.2-1.6x less CPU on a 1M-row
//    table than one prefetch into every level);
//  - sum each output row in fixed-width column blocks held in a local array the
//    compiler keeps in vector registers (no store and reload per entry).
// On a 2-core AMD EPYC VM this doubled a 1M x 64 bag against a double[dim] accumulator in
// memory with rows prefetched 8 ahead (1 thread: 37-43 -> 75-88 M rows/s).
#pragma once

#include <cstddef>
#include <type_traits>

#include "hd.h"

namespace embedstack {

/** Bytes of rows to have in flight ahead of the entry being summed. */
constexpr size_t kPrefetchBytes = 6144;
constexpr size_t kMaxPrefetchEntries = 32;

/** Entries to prefetch ahead for rows of `rowBytes`. */
inline size_t prefetchDistance(size_t rowBytes) {
  const size_t d = kPrefetchBytes / (rowBytes == 0 ? 1 : rowBytes);
  return d < 2 ? 2 : (d > kMaxPrefetchEntries ? kMaxPrefetchEntries : d);
}

/** Which caches a prefetch fills: every level (prefetcht0) or L2 and beyond (prefetcht1). */
enum class PrefetchTo : int { kL2 = 2, kL1 = 3 };

/** Entries ahead at which the bag's pooling loop asks again, into L1, for a row already asked into L2. */
inline size_t nearPrefetchDistance(size_t ahead) { return ahead / 3; }

/**
 * Asks for every cache line of a row of `rowBytes`, into `kTo`: four lines per step (a
 * dim-64 float32 row in one step, no per-line loop counter), then the rest.
 */
template <PrefetchTo kTo = PrefetchTo::kL1>
ES_ALWAYS_INLINE inline void prefetchRow(const void* row, size_t rowBytes) {
  constexpr int kLocality = static_cast<int>(kTo);
  const char* p = static_cast<const char*>(row);
  size_t off = 0;
  for (; off + 256 <= rowBytes; off += 256) {
    __builtin_prefetch(p + off, 0, kLocality);
    __builtin_prefetch(p + off + 64, 0, kLocality);
    __builtin_prefetch(p + off + 128, 0, kLocality);
    __builtin_prefetch(p + off + 192, 0, kLocality);
  }
  for (; off < rowBytes; off += 64) __builtin_prefetch(p + off, 0, kLocality);
}

template <size_t B, class F>
ES_ALWAYS_INLINE inline void columnTail(size_t dim, size_t& c0, bool& first, F& f) {
  if (dim - c0 >= B) {
    f(std::integral_constant<size_t, B>{}, c0, first);
    c0 += B;
    first = false;
  }
  if constexpr (B > 1) columnTail<B / 2>(dim, c0, first, f);
}

/**
 * Calls f(integral_constant<B>, c0, first) for column blocks covering [0, dim): blocks of
 * 64, then at most one each of 32, 16, ..., 1. `first` is true for the first block only
 * (the pass over a row's entries that should prefetch; later passes read lines it fetched).
 */
template <class F>
ES_ALWAYS_INLINE inline void forEachColumnBlock(size_t dim, F&& f) {
  size_t c0 = 0;
  bool first = true;
  for (; dim - c0 >= 64; c0 += 64, first = false) f(std::integral_constant<size_t, 64>{}, c0, first);
  columnTail<32>(dim, c0, first, f);
}

}  // namespace embedstack
