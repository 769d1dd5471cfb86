// Kernels of the planned embedding bag and of the combiner's backward, bit-compatible
// with core's reference/combineOps.ts: double arithmetic, entries in bag order, IEEE
// add/mul/div/sqrt only (the build disables contraction).
//  - denom_r over EVERY entry of row r: sum 1; mean Σw; sqrtn sqrt(Σw²);
//  - forward term s_j e_j: s_j = w_j, or (w_j * maxNorm) / ||e_j|| when clipped;
//  - backward: dy = (w_j / denom_r) g_r (0 when denom_r == 0), through the gradient
//    of clip_by_norm when ||e_j|| > maxNorm: (maxNorm/||e||) (dy - e (e·dy) / ||e||²).
#pragma once

#include <cstddef>
#include <cstdint>

#include "combine.h"
#include "storage.h"

namespace embedstack {

/** Rows [rowBegin, rowEnd) of a bag whose owned entries have rows in `rows`. */
struct PlanSpan {
  const int32_t* rowSplits;  // absolute entry offsets
  size_t rowBegin;
  size_t rowEnd;
  const float* weights;   // [nnz] or null = ones
  const uint32_t* positions;  // [owned] the owned entries' positions in the bag, ascending; null = every entry (entry j is owned entry j)
  size_t owned;               // entries of positions
  const float* rows;      // [owned * dim] the owned entries' rows, in positions order (null when not needed)
  const double* denom;    // [nrows]
  double maxNorm;         // 0 = none
  size_t dim;
  const float* const* rowPtrs = nullptr;  // [lent] pointers to the owned entries' rows, used instead of `rows` when set
  size_t lent = 0;                        // entries of rowPtrs
};

/** denom[r] for r in [rb, re). */
void bagDenominators(const int32_t* rowSplits, const float* weights, size_t rb, size_t re, Combiner c, double* denom);

/**
 * out[r * dim + c] += (Σ_{owned j in r} s_j e_j)[c] / denom_r for the span's rows (nothing
 * when denom_r == 0). Without clipping, in the float64-vector kernel of the best WidenIsa
 * the build and CPU have (combine_vector.h; the scalar loop's bits).
 */
void combinePartialRows(const PlanSpan& s, double* out, double* acc);
/** combinePartialRows with a given kernel (one of widenIsas(); kPortable or clipping: the scalar loop; tests compare them). */
void combinePartialRowsWith(WidenIsa isa, const PlanSpan& s, double* out, double* acc);

/**
 * One shard's step of the shard-order sum of bag rows [rowBegin, rowEnd): with p the
 * shard's partial (combinePartialRows into zeros), `sum` [(rowEnd - rowBegin) * dim]
 * becomes p (`first`) or sum + p, bit for bit; the `last` shard writes the float32
 * rounding of the result to out[r * dim + c] instead (`sum` then left as it was).
 * ((0 + p_0) + p_1) + ... in shard order is then exactly the partials added in order.
 */
void combineShardStep(const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out);
/** combineShardStep with a given kernel (as combinePartialRowsWith). */
void combineShardStepWith(WidenIsa isa, const PlanSpan& s, bool first, bool last, double* sum, double* acc, float* out);

/**
 * Per-entry gradients of the span's owned entries from pooled grads [nrows * dim]:
 * written at row j of `out` (entry j), or at row index[j] with `compact`.
 * `rows` is read only when maxNorm > 0.
 */
void combineBackwardRows(const PlanSpan& s, const float* grads, float* out, bool compact, double* dy);

/**
 * The backward of a whole bag, an owned entry at a time (applyCombinedGradients' per-key
 * sums): owned entry i (bag entry positions[i], or i when positions is null) of bag row
 * rowOf[i] has the gradient combineBackwardRows writes for it.
 */
struct BackwardBag {
  const float* grads;         // [rows * dim] the pooled rows' gradients
  const float* weights;       // [nnz] or null = ones
  const uint32_t* positions;  // [owned] or null
  const uint32_t* rowOf;      // [owned] each owned entry's bag row (backwardRowsOfOwned)
  const double* denom;        // [rows]
  const float* rows;          // [owned * dim] the owned entries' rows, read only when maxNorm > 0
  double maxNorm;             // 0 = none
  size_t dim;
};

/** rowOf [owned] = each owned entry's bag row; positions ascending, or null (every entry: owned = rowSplits[rows]). */
void backwardRowsOfOwned(const int32_t* rowSplits, size_t rows, const uint32_t* positions, size_t owned, uint32_t* rowOf);

/**
 * sum [dim] = owned entries occurrences[0..count)'s gradients (each the float32 value
 * combineBackwardRows writes) added in float, in that order, from 0: bit for bit the sum
 * applyGradients makes of them from a per-entry array. dy holds dim doubles.
 */
void combineBackwardSum(const BackwardBag& b, const uint32_t* occurrences, size_t count, float* sum, double* dy);

}  // namespace embedstack
