#include "combine_plan.h"

#include <algorithm>
#include <cmath>

#include "bag_sum.h"
#include "column_blocks.h"
#include "combine_vector.h"
#include "hd.h"
#include "multiversion.h"
#include "widen_isa.h"

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

/**
 * acc [dim] = Σ s_j e_j over owned entries [k, kEnd) from 0, one entry at a time (the
 * clipping path: s_j needs the entry's norm; rows fetched 8 ahead).
 */
ES_ALWAYS_INLINE inline void clippedSum(const PlanSpan& s, size_t k, size_t kEnd, double* __restrict acc) {
  const size_t dim = s.dim;
  const size_t rowBytes = dim * sizeof(float);
  for (size_t c = 0; c < dim; ++c) acc[c] = 0.0;
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
    for (size_t c = 0; c < dim; ++c) acc[c] = acc[c] + scale * static_cast<double>(e[c]);
  }
}

namespace {

/**
 * acc = columns [c0, c0 + B) of the owned entries [k, kEnd), (weighted) summed in bag
 * order from 0, in L's sums (bag_sum.h's block policy: a local array kept in registers, or
 * combine_vector.h's float64 vectors). With `prefetch` (a row's first block), asks for the
 * lent row `ahead` owned entries on.
 */
template <class L, size_t B>
ES_ALWAYS_INLINE inline void ownedColumnSum(const PlanSpan& s, size_t k, size_t kEnd, size_t c0, bool prefetch,
                                            size_t ahead, size_t rowBytes, typename L::template Acc<B>& acc) {
  L::template zero<B>(acc);
  for (size_t i = k; i < kEnd; ++i) {
    if (prefetch && s.rowPtrs && i + ahead < s.lent) prefetchRow(s.rowPtrs[i + ahead], rowBytes);
    const float* e = rowOf(s, i) + c0;
    const double w = s.weights ? static_cast<double>(s.weights[entryOf(s, i)]) : 1.0;
    if (w == 1.0) {
      L::template add<B>(acc, e);  // 1.0 * e is exact
    } else {
      L::template addScaled<B>(acc, e, w);
    }
  }
}

/** Columns [c0, c0 + B) of a row's owned entries, divided by d and added to the row's partial. */
template <class L, size_t B>
ES_ALWAYS_INLINE inline void partialBlock(const PlanSpan& s, size_t k, size_t kEnd, double d, double* __restrict o,
                                          size_t c0, bool prefetch, size_t ahead, size_t rowBytes) {
  typename L::template Acc<B> sums;
  ownedColumnSum<L, B>(s, k, kEnd, c0, prefetch, ahead, rowBytes, sums);
  double buf[B];
  const double* acc = L::template sums<B>(sums, buf);
  for (size_t c = 0; c < B; ++c) o[c0 + c] = o[c0 + c] + acc[c] / d;
}

/** combinePartialRows without clipping, each row's owned entries in column blocks. */
template <class L>
ES_ALWAYS_INLINE inline void partialRows(const PlanSpan& s, double* out) {
  const size_t dim = s.dim;
  const size_t rowBytes = dim * sizeof(float);
  size_t k = firstOwned(s);
  const size_t ahead = prefetchDistance(rowBytes);
  for (size_t i = k; s.rowPtrs && i < k + ahead && i < s.lent; ++i) prefetchRow(s.rowPtrs[i], rowBytes);
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    const size_t kEnd = ownedEnd(s, r, k);
    const double d = s.denom[r];
    if (d != 0) {
      double* o = out + r * dim;
      forEachColumnBlock(dim, [&](auto width, size_t c0, bool first) ES_ALWAYS_INLINE {
        partialBlock<L, decltype(width)::value>(s, k, kEnd, d, o, c0, first, ahead, rowBytes);
      });
    }
    k = kEnd;
  }
}

/**
 * This shard's partial of columns [c0, c0 + B) of one row, p = 0 + acc / d with acc its
 * owned entries [k, kEnd) summed in registers (ownedColumnSum), folded into the running
 * shard-order sum: run = p (first), or run + p; the last shard writes the float32 rounding
 * to o instead. run + (0 + x) == run + x bit for bit when run is not -0, and it never is
 * (it starts at 0 + x), so later shards add acc / d directly; acc / 1 == acc.
 */
template <class L, size_t B>
ES_ALWAYS_INLINE inline void shardBlock(const PlanSpan& s, size_t k, size_t kEnd, double d, double* __restrict run,
                                        float* __restrict o, bool first, bool last, size_t c0, bool prefetch,
                                        size_t ahead, size_t rowBytes) {
  typename L::template Acc<B> sums;
  ownedColumnSum<L, B>(s, k, kEnd, c0, prefetch, ahead, rowBytes, sums);
  double buf[B];
  double* acc = L::template sums<B>(sums, buf);
  if (d != 1.0) {
    for (size_t c = 0; c < B; ++c) acc[c] = acc[c] / d;
  }
  run += c0;
  o += c0;
  if (first && last) {
    for (size_t c = 0; c < B; ++c) o[c] = static_cast<float>(0.0 + acc[c]);
  } else if (first) {
    for (size_t c = 0; c < B; ++c) run[c] = 0.0 + acc[c];
  } else if (last) {
    for (size_t c = 0; c < B; ++c) o[c] = static_cast<float>(run[c] + acc[c]);
  } else {
    for (size_t c = 0; c < B; ++c) run[c] = run[c] + acc[c];
  }
}

/**
 * combineShardStep's rows: the rows this shard owns no entry of (or whose denominator is
 * 0) directly, the others' partials in column blocks (L's sums) or, clipping, an entry at
 * a time (clippedSum, into acc).
 */
template <class L>
ES_ALWAYS_INLINE inline void shardRows(const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out) {
  const size_t dim = s.dim;
  const size_t rowBytes = dim * sizeof(float);
  const size_t ahead = prefetchDistance(rowBytes);
  size_t k = firstOwned(s);
  const bool clip = s.maxNorm > 0;
  if (!clip) {
    for (size_t i = k; s.rowPtrs && i < k + ahead && i < s.lent; ++i) prefetchRow(s.rowPtrs[i], rowBytes);
  }
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    const size_t kEnd = ownedEnd(s, r, k);
    const double d = s.denom[r];
    double* __restrict run = sum + (r - s.rowBegin) * dim;
    float* __restrict o = out + r * dim;
    // The partial is 0 + acc / d, or 0 when d == 0. Owning no entry of the row (acc = 0) it
    // is +0 unless d is NaN, and +0 leaves the running sum as it is: nothing to compute.
    if (d == 0 || (kEnd == k && d == d)) {
      if (first && last) {
        for (size_t c = 0; c < dim; ++c) o[c] = 0.0f;
      } else if (first) {
        for (size_t c = 0; c < dim; ++c) run[c] = 0.0;
      } else if (last) {
        for (size_t c = 0; c < dim; ++c) o[c] = static_cast<float>(run[c]);
      }
    } else if (!clip) {
      forEachColumnBlock(dim, [&](auto width, size_t c0, bool firstBlock) ES_ALWAYS_INLINE {
        shardBlock<L, decltype(width)::value>(s, k, kEnd, d, run, o, first, last, c0, firstBlock, ahead, rowBytes);
      });
    } else {
      clippedSum(s, k, kEnd, acc);
      for (size_t c = 0; c < dim; ++c) {
        const double p = acc[c] / d;
        if (first && last) {
          o[c] = static_cast<float>(0.0 + p);
        } else if (first) {
          run[c] = 0.0 + p;
        } else if (last) {
          o[c] = static_cast<float>(run[c] + p);
        } else {
          run[c] = run[c] + p;
        }
      }
    }
    k = kEnd;
  }
}

using ScalarF32 = bagsum::ScalarBlocks<vecsum::F32Src>;

ES_MULTIVERSION
void scalarPartialRows(const PlanSpan& s, double* out, double* acc) {
  if (!(s.maxNorm > 0)) {
    partialRows<ScalarF32>(s, out);
    return;
  }
  // Clipping needs each entry's norm first: one entry at a time into acc.
  const size_t dim = s.dim;
  size_t k = firstOwned(s);
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    const size_t kEnd = ownedEnd(s, r, k);
    clippedSum(s, k, kEnd, acc);
    k = kEnd;
    const double d = s.denom[r];
    if (d == 0) continue;
    double* __restrict o = out + r * dim;
    for (size_t c = 0; c < dim; ++c) o[c] = o[c] + acc[c] / d;
  }
}

ES_MULTIVERSION
void scalarShardStep(const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out) {
  shardRows<ScalarF32>(s, first, last, sum, acc, out);
}

// The float64-vector kernels (combine_vector.h) of the paths without clipping: the scalar
// loops' operations in their order, so the same bits. Each is `flatten` so that GCC
// inlines the policy's target operations into the generic loop.
using PartialFn = void (*)(const PlanSpan&, double*);
using StepFn = void (*)(const PlanSpan&, bool, bool, double*, double*, float*);
struct PlanKernels {
  PartialFn partial;
  StepFn step;
};

#if ES_WIDEN_AVX2
using Avx2F32 = vecsum::VectorBlocks<vecsum::Avx2Ops<vecsum::F32Src>>;
ES_TARGET_AVX2 __attribute__((flatten)) void partialAvx2(const PlanSpan& s, double* out) { partialRows<Avx2F32>(s, out); }
ES_TARGET_AVX2 __attribute__((flatten)) void stepAvx2(const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out) {
  shardRows<Avx2F32>(s, first, last, sum, acc, out);
}
#endif

#if ES_WIDEN_AVX512
using Avx512F32 = vecsum::VectorBlocks<vecsum::Avx512Ops<vecsum::F32Src>>;
ES_TARGET_AVX512 __attribute__((flatten)) void partialAvx512(const PlanSpan& s, double* out) { partialRows<Avx512F32>(s, out); }
ES_TARGET_AVX512 __attribute__((flatten)) void stepAvx512(const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out) {
  shardRows<Avx512F32>(s, first, last, sum, acc, out);
}
#endif

PlanKernels planKernels(WidenIsa isa) {
  switch (isa) {
#if ES_WIDEN_AVX512
    case WidenIsa::kAvx512:
      return {partialAvx512, stepAvx512};
#endif
#if ES_WIDEN_AVX2
    case WidenIsa::kAvx2F16c:
      return {partialAvx2, stepAvx2};
#endif
    default:
      return {nullptr, nullptr};
  }
}

/** The kernels of the best WidenIsa the build and CPU have, picked at first use. */
const PlanKernels& bestPlanKernels() {
  static const PlanKernels k = planKernels(widenIsas().back());
  return k;
}

void partialWith(const PlanKernels& k, const PlanSpan& s, double* out, double* acc) {
  if (k.partial != nullptr && !(s.maxNorm > 0)) {
    k.partial(s, out);
  } else {
    scalarPartialRows(s, out, acc);
  }
}

void stepWith(const PlanKernels& k, const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out) {
  if (k.step != nullptr && !(s.maxNorm > 0)) {
    k.step(s, first, last, sum, acc, out);
  } else {
    scalarShardStep(s, first, last, sum, acc, out);
  }
}

}  // namespace

void combinePartialRows(const PlanSpan& s, double* out, double* acc) { partialWith(bestPlanKernels(), s, out, acc); }

void combinePartialRowsWith(WidenIsa isa, const PlanSpan& s, double* out, double* acc) { partialWith(planKernels(isa), s, out, acc); }

void combineShardStep(const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out) {
  stepWith(bestPlanKernels(), s, first, last, sum, acc, out);
}

void combineShardStepWith(WidenIsa isa, const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out) {
  stepWith(planKernels(isa), s, first, last, sum, acc, out);
}

namespace {

enum class GradOut { kStore, kFirst, kAdd };

/**
 * One entry's gradient, each value rounded to float32 v: scale * g, or with maxNorm and
 * ||e|| > maxNorm the gradient of clip_by_norm at e, (maxNorm/||e||) (dy - e (e·dy) / ||e||²)
 * with dy = scale * g. Written to o as v (kStore), 0 + v (kFirst: a sum's first term) or
 * o + v (kAdd). `e` is read only when maxNorm > 0; dy holds dim doubles.
 */
template <GradOut M>
ES_ALWAYS_INLINE inline void entryGradient(double scale, const float* __restrict g, const float* __restrict e,
                                           double maxNorm, size_t dim, double* __restrict dy,
                                           float* __restrict o) {
  const auto put = [&](size_t c, float v) ES_ALWAYS_INLINE {
    if (M == GradOut::kStore) o[c] = v;
    if (M == GradOut::kFirst) o[c] = 0.0f + v;
    if (M == GradOut::kAdd) o[c] = o[c] + v;
  };
  if (!(maxNorm > 0)) {
    // dy rounded to float32 straight into o: one vectorizable pass (o, g and dy apart).
    for (size_t c = 0; c < dim; ++c) put(c, static_cast<float>(scale * static_cast<double>(g[c])));
    return;
  }
  for (size_t c = 0; c < dim; ++c) dy[c] = scale * static_cast<double>(g[c]);
  double n2 = 0;
  for (size_t c = 0; c < dim; ++c) n2 += static_cast<double>(e[c]) * static_cast<double>(e[c]);
  const double norm = std::sqrt(n2);
  if (norm > maxNorm) {
    double dot = 0;
    for (size_t c = 0; c < dim; ++c) dot += static_cast<double>(e[c]) * dy[c];
    const double k2 = maxNorm / norm;
    for (size_t c = 0; c < dim; ++c) put(c, static_cast<float>(k2 * (dy[c] - (static_cast<double>(e[c]) * dot) / n2)));
    return;
  }
  for (size_t c = 0; c < dim; ++c) put(c, static_cast<float>(dy[c]));
}

}  // namespace

ES_MULTIVERSION
void combineBackwardRows(const PlanSpan& s, const float* grads, float* out, bool compact, double* dy) {
  const size_t dim = s.dim;
  size_t k = firstOwned(s);
  for (size_t r = s.rowBegin; r < s.rowEnd; ++r) {
    const double d = s.denom[r];
    const float* g = grads + r * dim;
    const size_t kEnd = ownedEnd(s, r, k);
    for (size_t i = k; i < kEnd; ++i) {
      const size_t j = entryOf(s, i);
      const double w = s.weights ? static_cast<double>(s.weights[j]) : 1.0;
      const double scale = d == 0 ? 0.0 : w / d;
      const float* e = s.maxNorm > 0 ? s.rows + i * dim : nullptr;
      entryGradient<GradOut::kStore>(scale, g, e, s.maxNorm, dim, dy, out + (compact ? i : j) * dim);
    }
    k = kEnd;
  }
}

void backwardRowsOfOwned(const int32_t* rowSplits, size_t rows, const uint32_t* positions, size_t owned, uint32_t* rowOf) {
  size_t k = 0;
  for (size_t r = 0; r < rows; ++r) {
    const size_t end = static_cast<size_t>(rowSplits[r + 1]);
    if (!positions) {
      for (; k < end; ++k) rowOf[k] = static_cast<uint32_t>(r);
      continue;
    }
    for (; k < owned && positions[k] < end; ++k) rowOf[k] = static_cast<uint32_t>(r);
  }
}

ES_MULTIVERSION
void combineBackwardSum(const BackwardBag& b, const uint32_t* occurrences, size_t count, float* sum, double* dy) {
  const size_t dim = b.dim;
  for (size_t k = 0; k < count; ++k) {
    const size_t i = occurrences[k];
    const size_t j = b.positions ? static_cast<size_t>(b.positions[i]) : i;
    const size_t r = b.rowOf[i];
    const double d = b.denom[r];
    const double w = b.weights ? static_cast<double>(b.weights[j]) : 1.0;
    const double scale = d == 0 ? 0.0 : w / d;
    const float* g = b.grads + r * dim;
    const float* e = b.maxNorm > 0 ? b.rows + i * dim : nullptr;
    if (k == 0) {
      entryGradient<GradOut::kFirst>(scale, g, e, b.maxNorm, dim, dy, sum);
    } else {
      entryGradient<GradOut::kAdd>(scale, g, e, b.maxNorm, dim, dy, sum);
    }
  }
}

}  // namespace embedstack
