#include "combine.h"

#include <cmath>

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

// The kernel body for one storage type, inlined into each multiversioned clone.
template <class L>
__attribute__((always_inline)) inline void combineRows(const BagSpan& s) {
  using Elem = typename L::Elem;
  const size_t dim = s.dim;
  const bool extreme = s.combiner == Combiner::kMax || s.combiner == Combiner::kMin;
  double* __restrict acc = s.acc;
  const size_t lastEntry = static_cast<size_t>(s.rowSplits[s.rowEnd]);
  const size_t rowBytes = dim * sizeof(Elem);
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    for (size_t c = 0; c < dim; ++c) acc[c] = 0.0;
    double wsum = 0;
    double wsq = 0;
    const size_t end = static_cast<size_t>(s.rowSplits[r + 1]);
    for (size_t j = static_cast<size_t>(s.rowSplits[r]); j < end; ++j) {
      if (j + 8 < lastEntry) {
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

}  // namespace

ES_MULTIVERSION
void combineBagRows(const BagSpan& s) {
  switch (s.dtype) {
    case StorageDtype::kBfloat16:
      combineRows<LoadBf16>(s);
      break;
    case StorageDtype::kFloat16:
      combineRows<LoadF16>(s);
      break;
    default:
      combineRows<LoadF32>(s);
      break;
  }
}

}  // namespace embedstack
