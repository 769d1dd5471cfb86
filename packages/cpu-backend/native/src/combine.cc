#include "combine.h"

#include <cmath>
#include <vector>

#include "column_blocks.h"
#include "multiversion.h"

namespace embedstack {

namespace {

struct LoadF32 {
  using Elem = float;
  static double get(const float* e, size_t c) { return static_cast<double>(e[c]); }
};
struct LoadBf16 {
  using Elem = uint16_t;
  static double get(const uint16_t* e, size_t c) { return static_cast<double>(bf16ToFloat(e[c])); }
};
struct LoadF16 {
  using Elem = uint16_t;
  static double get(const uint16_t* e, size_t c) { return static_cast<double>(halfToFloat(e[c])); }
};

/** max / min of one entry into acc: the first entry's scaled row, then a strictly greater (smaller) value wins. */
template <class L>
__attribute__((always_inline)) inline void combineExtreme(double* __restrict acc, const typename L::Elem* __restrict e, double scale, size_t dim, bool max, bool first) {
  if (first) {
    for (size_t c = 0; c < dim; ++c) acc[c] = scale * L::get(e, c);
  } else if (max) {
    for (size_t c = 0; c < dim; ++c) {
      const double x = scale * L::get(e, c);
      if (x > acc[c]) acc[c] = x;
    }
  } else {
    for (size_t c = 0; c < dim; ++c) {
      const double x = scale * L::get(e, c);
      if (x < acc[c]) acc[c] = x;
    }
  }
}

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
__attribute__((always_inline)) inline void prefetchAheadAndNear(const void* const* rows, size_t i, size_t ahead, size_t nearAhead, size_t rowBytes) {
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
__attribute__((always_inline)) inline void addEntries(const BagSpan& s, double* __restrict acc, size_t j0, size_t j1, size_t c0,
                                                      size_t ahead, size_t nearAhead, size_t rowBytes) {
  using Elem = typename L::Elem;
  const void* const* rows = s.rows;
  const size_t base = s.entryBase;
  if (s.weights == nullptr) {
    for (size_t j = j0; j < j1; ++j) {
      if constexpr (kPrefetch) prefetchAheadAndNear(rows, j - base, ahead, nearAhead, rowBytes);
      const Elem* __restrict e = static_cast<const Elem*>(rows[j - base]) + c0;
      for (size_t c = 0; c < B; ++c) acc[c] += L::get(e, c);
    }
    return;
  }
  for (size_t j = j0; j < j1; ++j) {
    if constexpr (kPrefetch) prefetchAheadAndNear(rows, j - base, ahead, nearAhead, rowBytes);
    const Elem* __restrict e = static_cast<const Elem*>(rows[j - base]) + c0;
    const double w = static_cast<double>(s.weights[j]);
    if (w == 1.0) {
      for (size_t c = 0; c < B; ++c) acc[c] += L::get(e, c);  // 1.0 * e is exact
    } else {
      for (size_t c = 0; c < B; ++c) acc[c] = acc[c] + w * L::get(e, c);
    }
  }
}

/**
 * The sum (or weighted sum) of columns [c0, c0 + B) over the row's entries in bag order,
 * in a local double[B] kept in registers, then divided and rounded to float32 once: the
 * reference's operations in its order, so the same bits. The first block of a row asks
 * for the row `ahead` entries on (entries whose row `ahead` on is past the span: none).
 */
template <class L, size_t B>
__attribute__((always_inline)) inline void sumBlock(const BagSpan& s, const ColumnBlock& b, size_t c0, bool prefetch) {
  double acc[B];
  for (size_t c = 0; c < B; ++c) acc[c] = 0.0;
  size_t jp = b.j0;  // entries [j0, jp) prefetch, [jp, j1) do not
  if (prefetch) {
    const size_t stop = b.lastEntry > b.ahead ? b.lastEntry - b.ahead : 0;
    jp = stop < b.j0 ? b.j0 : (stop > b.j1 ? b.j1 : stop);
  }
  addEntries<L, B, true>(s, acc, b.j0, jp, c0, b.ahead, b.nearAhead, b.rowBytes);
  addEntries<L, B, false>(s, acc, jp, b.j1, c0, b.ahead, b.nearAhead, b.rowBytes);
  float* __restrict o = b.out + c0;
  if (b.div == 0) {
    for (size_t c = 0; c < B; ++c) o[c] = 0.0f;
  } else if (b.div == 1.0) {
    for (size_t c = 0; c < B; ++c) o[c] = static_cast<float>(acc[c]);
  } else {
    for (size_t c = 0; c < B; ++c) o[c] = static_cast<float>(acc[c] / b.div);
  }
}

/** sum / mean / sqrtn without clipping, each output row in column blocks (column_blocks.h). */
template <class L>
__attribute__((always_inline)) inline void sumRows(const BagSpan& s) {
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
    forEachColumnBlock(dim, [&](auto width, size_t c0, bool firstBlock) __attribute__((always_inline)) { sumBlock<L, decltype(width)::value>(s, b, c0, firstBlock && s.prefetch); });
  }
}

// The kernel body for one storage type, inlined into each multiversioned clone.
template <class L>
__attribute__((always_inline)) inline void combineRows(const BagSpan& s) {
  using Elem = typename L::Elem;
  const size_t dim = s.dim;
  const bool extreme = s.combiner == Combiner::kMax || s.combiner == Combiner::kMin;
  if (!extreme && !(s.maxNorm > 0)) {
    sumRows<L>(s);
    return;
  }
  // max / min, or clipping (each entry's norm first): one entry at a time into s.acc.
  double* __restrict acc = s.acc;
  const size_t lastEntry = static_cast<size_t>(s.rowSplits[s.rowEnd]);
  const size_t rowBytes = dim * sizeof(Elem);
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    for (size_t c = 0; c < dim; ++c) acc[c] = 0.0;
    double wsum = 0;
    double wsq = 0;
    const size_t end = static_cast<size_t>(s.rowSplits[r + 1]);
    for (size_t j = static_cast<size_t>(s.rowSplits[r]); j < end; ++j) {
      if (s.prefetch && j + 8 < lastEntry) {
        const char* p = reinterpret_cast<const char*>(s.rows[j + 8 - s.entryBase]);
        for (size_t off = 0; off < rowBytes; off += 64) __builtin_prefetch(p + off, 0, 1);
      }
      const Elem* __restrict e = static_cast<const Elem*>(s.rows[j - s.entryBase]);
      const double w = s.weights ? static_cast<double>(s.weights[j]) : 1.0;
      wsum += w;
      wsq += w * w;
      double scale = w;
      if (s.maxNorm > 0) {
        double n2 = 0;
        for (size_t c = 0; c < dim; ++c) n2 += L::get(e, c) * L::get(e, c);
        const double norm = std::sqrt(n2);
        if (norm > s.maxNorm) scale = (w * s.maxNorm) / norm;
      }
      if (extreme) {
        combineExtreme<L>(acc, e, scale, dim, s.combiner == Combiner::kMax, j == static_cast<size_t>(s.rowSplits[r]));
      } else if (scale == 1.0) {
        for (size_t c = 0; c < dim; ++c) acc[c] += L::get(e, c);  // 1.0 * e is exact
      } else {
        for (size_t c = 0; c < dim; ++c) acc[c] = acc[c] + scale * L::get(e, c);
      }
    }
    double div = 1;
    if (s.combiner == Combiner::kMean) div = wsum;
    if (s.combiner == Combiner::kSqrtn) div = std::sqrt(wsq);
    float* __restrict o = s.out + r * dim;
    if (div == 0) {
      for (size_t c = 0; c < dim; ++c) o[c] = 0.0f;
    } else if (div == 1.0) {
      for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(acc[c]);
    } else {
      for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(acc[c] / div);
    }
  }
}

/** Bytes of widened rows per pass of a narrow span: a few bags, well inside L1. */
constexpr size_t kWideBytes = 16384;
/** A bag larger than kWideBytes widened is widened alone, up to this (inside L2). */
constexpr size_t kWideMaxBytes = size_t{1} << 20;

/** This thread's buffer of widened rows of `dim` (at least `count`) and pointers to them. */
const void* const* wideRows(size_t count, size_t dim, float** values) {
  thread_local std::vector<float> buffer;
  thread_local std::vector<const void*> rows;
  thread_local size_t rowsDim = 0;
  thread_local const float* rowsBase = nullptr;
  if (buffer.size() < count * dim) buffer.resize(count * dim);
  const size_t held = buffer.size() / dim;
  if (rowsDim != dim || rowsBase != buffer.data() || rows.size() != held) {
    rows.resize(held);
    for (size_t k = 0; k < held; ++k) rows[k] = buffer.data() + k * dim;
    rowsDim = dim;
    rowsBase = buffer.data();
  }
  *values = buffer.data();
  return rows.data();
}

/**
 * A narrow span: output rows grouped so that each group's entries fit kWideBytes
 * widened (a larger bag alone, up to kWideMaxBytes), each group's rows widened at once
 * (loadRows, which also prefetches the span's later rows) and reduced by the float32
 * kernel: the entry order and the arithmetic are unchanged. A bag past kWideMaxBytes is
 * reduced with each element widened where it is read (L).
 */
template <class L>
__attribute__((always_inline)) inline void combineNarrow(const BagSpan& s) {
  const size_t dim = s.dim;
  if (dim == 0) {
    combineRows<L>(s);
    return;
  }
  const size_t rowFloatBytes = dim * sizeof(float);
  const size_t cap = kWideBytes / rowFloatBytes > 0 ? kWideBytes / rowFloatBytes : 1;
  const size_t maxCap = kWideMaxBytes / rowFloatBytes > 0 ? kWideMaxBytes / rowFloatBytes : 1;
  const size_t lastEntry = static_cast<size_t>(s.rowSplits[s.rowEnd]);
  size_t r = s.rowBegin;
  while (r < s.rowEnd) {
    const size_t e0 = static_cast<size_t>(s.rowSplits[r]);
    size_t rb = r + 1;  // the group: rows [r, rb)
    while (rb < s.rowEnd && static_cast<size_t>(s.rowSplits[rb + 1]) - e0 <= cap) ++rb;
    const size_t e1 = static_cast<size_t>(s.rowSplits[rb]);
    BagSpan part = s;
    part.rowBegin = r;
    part.rowEnd = rb;
    r = rb;
    if (e1 - e0 > maxCap) {
      combineRows<L>(part);
      continue;
    }
    float* values;
    part.rows = wideRows(e1 - e0, dim, &values);
    loadRows(s.dtype, s.rows + (e0 - s.entryBase), e1 - e0, dim, values, lastEntry - e0);
    part.entryBase = e0;
    part.dtype = StorageDtype::kFloat32;
    part.prefetch = false;
    combineRows<LoadF32>(part);
  }
}

}  // namespace

ES_MULTIVERSION
void combineBagRows(const BagSpan& s) {
  switch (s.dtype) {
    case StorageDtype::kBfloat16:
      combineNarrow<LoadBf16>(s);
      break;
    case StorageDtype::kFloat16:
      combineNarrow<LoadF16>(s);
      break;
    default:
      combineRows<LoadF32>(s);
      break;
  }
}

}  // namespace embedstack
