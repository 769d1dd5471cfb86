// The bag's sum / mean / sqrtn loop without clipping, shared by the float32 kernel
// (combine.cc) and the narrow-row kernels that widen each row where they read it
// (combine_narrow.cc): each output row in column blocks (column_blocks.h), each block's
// sums in float64 in bag order, divided and rounded to float32 once. What a block sums
// and how is the policy L's:
//   L::Elem                  the stored value type;
//   L::Acc<B>                B float64 sums (a local the compiler keeps in registers);
//   L::zero(acc)             all sums 0;
//   L::add(acc, e)           acc[c] += e[c] widened, c < B;
//   L::addScaled(acc, e, w)  acc[c] = acc[c] + w * e[c] widened (no fused multiply-add);
//   L::store(acc, out, div)  out[c] = float(acc[c]) (div 1), float(acc[c] / div), or 0 (div 0);
//   L::sums(acc, buf)        the B sums as a double array (acc's own, or stored into buf [B]).
// The loop depends on nothing else, so every policy gives the reference's operations in
// its order, so the same bits.
#pragma once

#include <cmath>
#include <cstddef>

#include "column_blocks.h"
#include "combine.h"
#include "hd.h"

namespace embedstack {
namespace bagsum {

/** L's block operations over a double[B], from L::get(e, c) (one value widened to float64). */
template <class L>
struct ScalarBlocks {
  template <size_t B>
  struct Acc {
    double v[B];
  };
  template <size_t B>
  ES_ALWAYS_INLINE static inline void zero(Acc<B>& a) {
    for (size_t c = 0; c < B; ++c) a.v[c] = 0.0;
  }
  template <size_t B, class E>
  ES_ALWAYS_INLINE static inline void add(Acc<B>& a, const E* __restrict e) {
    for (size_t c = 0; c < B; ++c) a.v[c] += L::get(e, c);
  }
  template <size_t B, class E>
  ES_ALWAYS_INLINE static inline void addScaled(Acc<B>& a, const E* __restrict e, double w) {
    for (size_t c = 0; c < B; ++c) a.v[c] = a.v[c] + w * L::get(e, c);
  }
  template <size_t B>
  ES_ALWAYS_INLINE static inline void store(const Acc<B>& a, float* __restrict o, double div) {
    if (div == 0) {
      for (size_t c = 0; c < B; ++c) o[c] = 0.0f;
    } else if (div == 1.0) {
      for (size_t c = 0; c < B; ++c) o[c] = static_cast<float>(a.v[c]);
    } else {
      for (size_t c = 0; c < B; ++c) o[c] = static_cast<float>(a.v[c] / div);
    }
  }
  template <size_t B>
  ES_ALWAYS_INLINE static inline double* sums(Acc<B>& a, double*) {
    return a.v;
  }
};

/** Columns [c0, c0 + B) of one output row: its entries [j0, j1) and its divisor. */
struct ColumnBlock {
  size_t j0;
  size_t j1;
  double div;
  size_t ahead;  // prefetch distance into L2 (entries)
  size_t nearAhead;  // prefetch distance into L1 (entries)
  size_t lastEntry;
  size_t rowBytes;
  float* out;  // the output row
};

/** Entry i + ahead's row into L2, entry i + nearAhead's (asked into L2 before) into L1. */
ES_ALWAYS_INLINE inline void prefetchAheadAndNear(const void* const* rows, size_t i, size_t ahead, size_t nearAhead, size_t rowBytes) {
  prefetchRow<PrefetchTo::kL2>(rows[i + ahead], rowBytes);
  prefetchRow<PrefetchTo::kL1>(rows[i + nearAhead], rowBytes);
}

/**
 * Adds columns [c0, c0 + B) of entries [j0, j1) into acc in bag order, weighted or not,
 * asking (kPrefetch) for the row `ahead` entries on into L2 and the row `nearAhead`
 * entries on into L1 (column_blocks.h): the checks that depend only on the span (weights
 * or not, prefetch or not, how far the span goes) are made once per block by the caller,
 * not once per entry.
 */
template <class L, size_t B, bool kPrefetch>
ES_ALWAYS_INLINE inline void addEntries(const BagSpan& s, typename L::template Acc<B>& acc, size_t j0, size_t j1, size_t c0,
                                        size_t ahead, size_t nearAhead, size_t rowBytes) {
  using Elem = typename L::Elem;
  const void* const* rows = s.rows;
  const size_t base = s.entryBase;
  if (s.weights == nullptr) {
    for (size_t j = j0; j < j1; ++j) {
      if constexpr (kPrefetch) prefetchAheadAndNear(rows, j - base, ahead, nearAhead, rowBytes);
      L::template add<B>(acc, static_cast<const Elem*>(rows[j - base]) + c0);
    }
    return;
  }
  for (size_t j = j0; j < j1; ++j) {
    if constexpr (kPrefetch) prefetchAheadAndNear(rows, j - base, ahead, nearAhead, rowBytes);
    const Elem* e = static_cast<const Elem*>(rows[j - base]) + c0;
    const double w = static_cast<double>(s.weights[j]);
    if (w == 1.0) {
      L::template add<B>(acc, e);  // 1.0 * e is exact
    } else {
      L::template addScaled<B>(acc, e, w);
    }
  }
}

/**
 * The sum (or weighted sum) of columns [c0, c0 + B) over the row's entries in bag order,
 * then divided and rounded to float32 once: the reference's operations in its order, so
 * the same bits. The first block of a row asks for the row `ahead` entries on (entries
 * whose row `ahead` on is past the span: none).
 */
template <class L, size_t B>
ES_ALWAYS_INLINE inline void sumBlock(const BagSpan& s, const ColumnBlock& b, size_t c0, bool prefetch) {
  typename L::template Acc<B> acc;
  L::template zero<B>(acc);
  size_t jp = b.j0;  // entries [j0, jp) prefetch, [jp, j1) do not
  if (prefetch) {
    const size_t stop = b.lastEntry > b.ahead ? b.lastEntry - b.ahead : 0;
    jp = stop < b.j0 ? b.j0 : (stop > b.j1 ? b.j1 : stop);
  }
  addEntries<L, B, true>(s, acc, b.j0, jp, c0, b.ahead, b.nearAhead, b.rowBytes);
  addEntries<L, B, false>(s, acc, jp, b.j1, c0, b.ahead, b.nearAhead, b.rowBytes);
  L::template store<B>(acc, b.out + c0, b.div);
}

/** sum / mean / sqrtn without clipping, each output row in column blocks (column_blocks.h). */
template <class L>
ES_ALWAYS_INLINE inline void sumRows(const BagSpan& s) {
  const size_t dim = s.dim;
  const size_t rowBytes = dim * sizeof(typename L::Elem);
  const size_t ahead = prefetchDistance(rowBytes);
  const size_t nearAhead = nearPrefetchDistance(ahead);
  const size_t lastEntry = static_cast<size_t>(s.rowSplits[s.rowEnd]);
  const size_t first = static_cast<size_t>(s.rowSplits[s.rowBegin]);
  if (s.prefetch) {
    for (size_t j = first; j < first + ahead && j < lastEntry; ++j) prefetchRow<PrefetchTo::kL2>(s.rows[j - s.entryBase], rowBytes);
  }
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    const size_t j0 = static_cast<size_t>(s.rowSplits[r]);
    const size_t j1 = static_cast<size_t>(s.rowSplits[r + 1]);
    double wsum = 0;
    double wsq = 0;
    if (s.combiner != Combiner::kSum) {
      for (size_t j = j0; j < j1; ++j) {
        const double w = s.weights ? static_cast<double>(s.weights[j]) : 1.0;
        wsum += w;
        wsq += w * w;
      }
    }
    double div = 1;
    if (s.combiner == Combiner::kMean) div = wsum;
    if (s.combiner == Combiner::kSqrtn) div = std::sqrt(wsq);
    const ColumnBlock b{j0, j1, div, ahead, nearAhead, lastEntry, rowBytes, s.out + r * dim};
    forEachColumnBlock(dim, [&](auto width, size_t c0, bool firstBlock) ES_ALWAYS_INLINE { sumBlock<L, decltype(width)::value>(s, b, c0, firstBlock && s.prefetch); });
  }
}

}  // namespace bagsum
}  // namespace embedstack
