#include "optimizer.h"

#include <cmath>

#include "hd.h"
#include "multiversion.h"
#include "optimizer_math.h"

namespace embedstack {

SlotRequirement slotRequirement(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return {0, {false, false}};
    case OptimizerKind::kAdagrad:
    case OptimizerKind::kMomentum:
      return {1, {true, false}};
    case OptimizerKind::kRowWiseAdagrad:
      return {1, {false, false}};
    default:
      return {2, {true, true}};
  }
}

const char* optimizerName(OptimizerKind kind) {
  static const char* const names[] = {"sgd",      "adagrad", "adagradMomentum", "adam", "ftrl", "rowWiseAdagrad",
                                      "momentum", "adamax",  "adadelta"};
  int k = static_cast<int>(kind);
  return k >= 0 && k < kOptimizerKinds ? names[k] : "unknown";
}

namespace {

template <OptimizerKind K>
ES_ALWAYS_INLINE inline void updateElements(const OptimizerParams& p, float* w, float* slots,
                                            const double* grad, size_t dim, double rowDenom) {
  // Full-row slots: slot 0 at slots[0..dim), slot 1 at slots[dim..2*dim); RowWiseAdagrad's
  // single float is handled by the caller.
  float* s0 = slots;
  float* s1 = slots + dim;
  for (size_t i = 0; i < dim; ++i) updateElement<K>(p, w + i, s0 + i, s1 + i, grad[i], rowDenom);
}

}  // namespace

// The update of one row, inlined into each multiversioned entry point below so
// that every clone (AVX-512 / AVX2 / baseline) vectorises it for its target.
ES_ALWAYS_INLINE static inline void updateRow(const OptimizerParams& p, float* w, float* slots,
                                              const float* g, size_t dim, double* grad) {
  for (size_t i = 0; i < dim; ++i) grad[i] = effectiveGradient(p, g[i], w[i]);
  if (p.kind == OptimizerKind::kRowWiseAdagrad) {
    double sq = 0;
    for (size_t i = 0; i < dim; ++i) sq += grad[i] * grad[i];
    const double denom = rowWiseAccumulate(p, slots, sq, dim);
    for (size_t i = 0; i < dim; ++i) updateElement<OptimizerKind::kRowWiseAdagrad>(p, w + i, nullptr, nullptr, grad[i], denom);
    return;
  }
  withOptimizerKind(p.kind, [&](auto tag) ES_ALWAYS_INLINE {
    updateElements<decltype(tag)::kind>(p, w, slots, grad, dim, 0);
  });
}

ES_MULTIVERSION
void applyOptimizerRow(const OptimizerParams& p, float* w, float* slots, const float* g, size_t dim, double* scratch) {
  updateRow(p, w, slots, g, dim, scratch);
}

namespace {

// A key's gradients (rows occurrences[k] of grads, or rowIndex[occurrences[k]]) summed in
// float, in order of appearance, from 0 (so a single -0 gradient becomes +0 exactly as
// the reference's Float32Array sums).
template <bool kIndexed>
ES_ALWAYS_INLINE inline void sumRows(const float* grads, const uint32_t* occurrences, size_t count, size_t dim,
                                     const uint32_t* rowIndex, float* sum) {
  const auto at = [&](size_t k) {
    return static_cast<size_t>(kIndexed ? rowIndex[occurrences[k]] : occurrences[k]) * dim;
  };
  const float* g0 = grads + at(0);
  for (size_t c = 0; c < dim; ++c) sum[c] = 0.0f + g0[c];
  for (size_t k = 1; k < count; ++k) {
    const float* g = grads + at(k);
    for (size_t c = 0; c < dim; ++c) sum[c] = sum[c] + g[c];
  }
}

// sumRows with its gradient rows addressed through rowIndex, or directly when it is null
// (one loop each), inlined into each multiversioned entry point below.
ES_ALWAYS_INLINE inline void sumRowsOf(const float* grads, const uint32_t* occurrences, size_t count, size_t dim,
                                       const uint32_t* rowIndex, float* sum) {
  if (rowIndex) {
    sumRows<true>(grads, occurrences, count, dim, rowIndex, sum);
  } else {
    sumRows<false>(grads, occurrences, count, dim, rowIndex, sum);
  }
}

}  // namespace

ES_MULTIVERSION
void sumGradientRows(const float* grads, const uint32_t* occurrences, size_t count, size_t dim, const uint32_t* rowIndex,
                     float* sum) {
  sumRowsOf(grads, occurrences, count, dim, rowIndex, sum);
}

ES_MULTIVERSION
void sumRowsInOrder(size_t n, const uint32_t* unique, const uint32_t* running, const uint32_t* first, const float* grads,
                    const uint32_t* rowIndex, size_t dim, float* sums) {
  const auto gradAt = [&](size_t i) ES_ALWAYS_INLINE {
    return grads + static_cast<size_t>(rowIndex ? rowIndex[i] : i) * dim;
  };
  // The gradient row this many entries ahead, when it is summed (a shard's rows through rowIndex
  // ascend, with gaps).
  constexpr size_t kAhead = 16;
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n && running[unique[i + kAhead]] != kNoRunningRow) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(gradAt(i + kAhead));
      for (uintptr_t l = a & ~uintptr_t{63}; l < a + dim * sizeof(float); l += 64) {
        __builtin_prefetch(reinterpret_cast<const void*>(l));
      }
    }
    const uint32_t u = unique[i];
    const uint32_t k = running[u];
    if (k == kNoRunningRow) continue;
    const float* g = gradAt(i);
    float* __restrict s = sums + static_cast<size_t>(k) * dim;
    if (first[u] == i) {
      for (size_t c = 0; c < dim; ++c) s[c] = 0.0f + g[c];
    } else {
      for (size_t c = 0; c < dim; ++c) s[c] = s[c] + g[c];
    }
  }
}

ES_MULTIVERSION
void applyGradientRow(const OptimizerParams& p, float* w, float* slots, const float* grads, const uint32_t* occurrences,
                      size_t count, size_t dim, const uint32_t* rowIndex, float* sum, double* scratch) {
  sumRowsOf(grads, occurrences, count, dim, rowIndex, sum);
  updateRow(p, w, slots, sum, dim, scratch);
}

}  // namespace embedstack
