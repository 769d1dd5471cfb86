#include "combine.h"

#include <cmath>
#include <vector>

#include "bag_sum.h"
#include "combine_narrow.h"
#include "hd.h"
#include "multiversion.h"

namespace embedstack {

namespace {

struct LoadF32 : bagsum::ScalarBlocks<LoadF32> {
  using Elem = float;
  static double get(const float* e, size_t c) { return static_cast<double>(e[c]); }
};
struct LoadBf16 : bagsum::ScalarBlocks<LoadBf16> {
  using Elem = uint16_t;
  static double get(const uint16_t* e, size_t c) { return static_cast<double>(bf16ToFloat(e[c])); }
};
struct LoadF16 : bagsum::ScalarBlocks<LoadF16> {
  using Elem = uint16_t;
  static double get(const uint16_t* e, size_t c) { return static_cast<double>(halfToFloat(e[c])); }
};

/** max / min of one entry into acc: the first entry's scaled row, then a strictly greater (smaller) value wins. */
template <class L>
ES_ALWAYS_INLINE inline void combineExtreme(double* __restrict acc, const typename L::Elem* __restrict e, double scale, size_t dim, bool max, bool first) {
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

// The kernel body for one storage type, inlined into each clone of its rows* function below.
template <class L>
ES_ALWAYS_INLINE inline void combineRows(const BagSpan& s) {
  using Elem = typename L::Elem;
  const size_t dim = s.dim;
  const bool extreme = s.combiner == Combiner::kMax || s.combiner == Combiner::kMin;
  if (!extreme && !(s.maxNorm > 0)) {
    bagsum::sumRows<L>(s);
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

// combineRows out of line, once per storage type: the float32 body is called from three
// places (float32 spans and each narrow type's widened groups), and inlining it into
// each made combine.cc one 98 KB function that took GCC 20 s per CPU level and 54 s with
// the clones (10 and 27 s now). One call per span or widened group; the loops inside are
// the same.
ES_MULTIVERSION __attribute__((noinline)) void rowsF32(const BagSpan& s) { combineRows<LoadF32>(s); }
ES_MULTIVERSION __attribute__((noinline)) void rowsBf16(const BagSpan& s) { combineRows<LoadBf16>(s); }
ES_MULTIVERSION __attribute__((noinline)) void rowsF16(const BagSpan& s) { combineRows<LoadF16>(s); }

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
 * reduced with each element widened where it is read (`narrowRows`: rowsBf16 or rowsF16).
 */
ES_ALWAYS_INLINE inline void combineNarrow(const BagSpan& s, void (*narrowRows)(const BagSpan&)) {
  const size_t dim = s.dim;
  if (dim == 0) {
    narrowRows(s);
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
      narrowRows(part);
      continue;
    }
    float* values;
    part.rows = wideRows(e1 - e0, dim, &values);
    loadRows(s.dtype, s.rows + (e0 - s.entryBase), e1 - e0, dim, values, lastEntry - e0);
    part.entryBase = e0;
    part.dtype = StorageDtype::kFloat32;
    part.prefetch = false;
    rowsF32(part);
  }
}

}  // namespace

ES_MULTIVERSION
void combineBagRows(const BagSpan& s) {
  switch (s.dtype) {
    case StorageDtype::kBfloat16:
      if (!sumVectorRows(s)) combineNarrow(s, rowsBf16);
      break;
    case StorageDtype::kFloat16:
      if (!sumVectorRows(s)) combineNarrow(s, rowsF16);
      break;
    default:
      if (!sumVectorRows(s)) rowsF32(s);
      break;
  }
}

}  // namespace embedstack
