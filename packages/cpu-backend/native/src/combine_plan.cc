#include "combine_plan.h"

#include <algorithm>
#include <cmath>

#include "multiversion.h"

namespace embedstack {

void bagDenominators(const int32_t* rowSplits, const float* weights, size_t rb, size_t re, Combiner c, double* denom) {
  for (size_t r = rb; r < re; ++r) {
    if (c == Combiner::kSum) {
      denom[r] = 1.0;
      continue;
    }
    double s = 0;
    for (int32_t j = rowSplits[r]; j < rowSplits[r + 1]; ++j) {
      const double w = weights ? static_cast<double>(weights[j]) : 1.0;
      s += c == Combiner::kMean ? w : w * w;
    }
    denom[r] = c == Combiner::kMean ? s : std::sqrt(s);
  }
}

namespace {

/** Index (among the owned entries) of the span's first owned entry. */
inline size_t firstOwned(const PlanSpan& s) {
  const uint32_t start = static_cast<uint32_t>(s.rowSplits[s.rowBegin]);
  if (!s.positions) return start;
  return static_cast<size_t>(std::lower_bound(s.positions, s.positions + s.owned, start) - s.positions);
}

/**
 * The end of row r's owned entries [k, end) (indices among the owned entries), k being
 * its first. The positions ascend, so a row's owned entries are one run of them: no
 * per-entry ownership test (a 50/50 branch that mispredicts).
 */
inline size_t ownedEnd(const PlanSpan& s, size_t r, size_t k) {
  const size_t end = static_cast<size_t>(s.rowSplits[r + 1]);
  if (!s.positions) return end;
  while (k < s.owned && s.positions[k] < end) ++k;
  return k;
}

/** The bag entry of owned entry i. */
inline size_t entryOf(const PlanSpan& s, size_t i) {
  return s.positions ? static_cast<size_t>(s.positions[i]) : i;
}

/** The values [dim] of owned entry i: lent by the table (rowPtrs) or copied into `rows`. */
inline const float* rowOf(const PlanSpan& s, size_t i) {
  return s.rowPtrs ? s.rowPtrs[i] : s.rows + i * s.dim;
}

}  // namespace

namespace {

/** acc [dim] = Σ s_j e_j over owned entries [k, kEnd) (bag order, from 0); inlined into each clone. */
__attribute__((always_inline)) inline void accumulateOwned(const PlanSpan& s, size_t k, size_t kEnd, double* __restrict acc) {
  const size_t dim = s.dim;
  const size_t rowBytes = dim * sizeof(float);
  if (k == kEnd) {
    for (size_t c = 0; c < dim; ++c) acc[c] = 0.0;
    return;
  }
  for (size_t i = k; i < kEnd; ++i) {
    const size_t j = entryOf(s, i);
    // Lent rows are scattered over the table: fetch the owned row 8 ahead (owned entries are in bag order).
    if (s.rowPtrs && i + 8 < s.lent) {
      const char* p = reinterpret_cast<const char*>(s.rowPtrs[i + 8]);
      for (size_t off = 0; off < rowBytes; off += 64) __builtin_prefetch(p + off, 0, 1);
    }
    const float* __restrict e = rowOf(s, i);
    const double w = s.weights ? static_cast<double>(s.weights[j]) : 1.0;
    double scale = w;
    if (s.maxNorm > 0) {
      double n2 = 0;
      for (size_t c = 0; c < dim; ++c) n2 += static_cast<double>(e[c]) * static_cast<double>(e[c]);
      const double norm = std::sqrt(n2);
      if (norm > s.maxNorm) scale = (w * s.maxNorm) / norm;
    }
    // The first entry starts the sum at 0 (0 + x, not x: -0 becomes +0 as in a zeroed acc).
    if (i == k) {
      if (scale == 1.0) {
        for (size_t c = 0; c < dim; ++c) acc[c] = 0.0 + static_cast<double>(e[c]);  // 1.0 * e is exact
      } else {
        for (size_t c = 0; c < dim; ++c) acc[c] = 0.0 + scale * static_cast<double>(e[c]);
      }
    } else if (scale == 1.0) {
      for (size_t c = 0; c < dim; ++c) acc[c] = acc[c] + static_cast<double>(e[c]);
    } else {
      for (size_t c = 0; c < dim; ++c) acc[c] = acc[c] + scale * static_cast<double>(e[c]);
    }
  }
}

}  // namespace

ES_MULTIVERSION
void combinePartialRows(const PlanSpan& s, double* out, double* acc) {
  const size_t dim = s.dim;
  size_t k = firstOwned(s);
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    const size_t kEnd = ownedEnd(s, r, k);
    accumulateOwned(s, k, kEnd, acc);
    k = kEnd;
    const double d = s.denom[r];
    if (d == 0) continue;
    double* __restrict o = out + r * dim;
    for (size_t c = 0; c < dim; ++c) o[c] = o[c] + acc[c] / d;
  }
}

ES_MULTIVERSION
void combineShardStep(const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out) {
  const size_t dim = s.dim;
  size_t k = firstOwned(s);
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    const size_t kEnd = ownedEnd(s, r, k);
    const double d = s.denom[r];
    // This shard's partial of the row is 0 + acc / d, or 0 when d == 0. Owning no entry of
    // the row (acc = 0) it is +0 unless d is NaN, and +0 leaves the running sum as it is
    // (the sum starts at 0 + p_0, so it is never -0): nothing to compute.
    const bool adds = d != 0 && (kEnd > k || d != d);
    if (adds) accumulateOwned(s, k, kEnd, acc);
    k = kEnd;
    double* __restrict run = sum + (r - s.rowBegin) * dim;
    float* __restrict o = out + r * dim;
    if (first) {
      // run = p_0 (rounded to float32 at once when it is the only shard).
      if (!adds) {
        for (size_t c = 0; c < dim; ++c) run[c] = 0.0;
      } else if (d == 1) {
        for (size_t c = 0; c < dim; ++c) run[c] = 0.0 + acc[c];  // acc / 1 == acc
      } else {
        for (size_t c = 0; c < dim; ++c) run[c] = 0.0 + acc[c] / d;
      }
      if (last) {
        for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(run[c]);
      }
      continue;
    }
    // run + (0 + x) == run + x for every x when run is not -0; the last shard rounds.
    if (!adds) {
      if (last) {
        for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(run[c]);
      }
    } else if (d == 1) {
      if (last) {
        for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(run[c] + acc[c]);
      } else {
        for (size_t c = 0; c < dim; ++c) run[c] = run[c] + acc[c];
      }
    } else if (last) {
      for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(run[c] + acc[c] / d);
    } else {
      for (size_t c = 0; c < dim; ++c) run[c] = run[c] + acc[c] / d;
    }
  }
}

ES_MULTIVERSION
void combineBackwardRows(const PlanSpan& s, const float* grads, float* out, bool compact, double* dy) {
  const size_t dim = s.dim;
  size_t k = firstOwned(s);
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    const double d = s.denom[r];
    const float* __restrict g = grads + r * dim;
    const size_t kEnd = ownedEnd(s, r, k);
    for (size_t i = k; i < kEnd; ++i) {
      const size_t j = entryOf(s, i);
      const double w = s.weights ? static_cast<double>(s.weights[j]) : 1.0;
      const double scale = d == 0 ? 0.0 : w / d;
      for (size_t c = 0; c < dim; ++c) dy[c] = scale * static_cast<double>(g[c]);
      float* __restrict o = out + (compact ? i : j) * dim;
      if (s.maxNorm > 0) {
        const float* __restrict e = s.rows + i * dim;
        double n2 = 0;
        for (size_t c = 0; c < dim; ++c) n2 += static_cast<double>(e[c]) * static_cast<double>(e[c]);
        const double norm = std::sqrt(n2);
        if (norm > s.maxNorm) {
          double dot = 0;
          for (size_t c = 0; c < dim; ++c) dot += static_cast<double>(e[c]) * dy[c];
          const double k2 = s.maxNorm / norm;
          for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(k2 * (dy[c] - (static_cast<double>(e[c]) * dot) / n2));
          continue;
        }
      }
      for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(dy[c]);
    }
    k = kEnd;
  }
}

}  // namespace embedstack
