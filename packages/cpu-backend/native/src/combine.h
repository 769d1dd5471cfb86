// Embedding-bag reduction, bit-compatible with core's reference combineBag: per
// output row in double, entries in bag order, each entry optionally clipped to
// `maxNorm` (TF clip_by_norm), sum / mean (÷ Σw) / sqrtn (÷ sqrt Σw²), a zero
// denominator -> zeros, the result rounded to float32 once. max / min: the
// element-wise maximum / minimum of the (clipped) w e, the first entry's value kept
// unless a later one is strictly greater / smaller; a row without entries -> zeros.
#pragma once

#include <cstddef>
#include <cstdint>

#include "storage.h"

namespace embedstack {

enum class Combiner : int { kSum = 0, kMean = 1, kSqrtn = 2, kMax = 3, kMin = 4 };

/** One run of the bag kernel: output rows [rowBegin, rowEnd) of a bag. */
struct BagSpan {
  const int32_t* rowSplits;  // the bag's row splits (absolute entry offsets)
  size_t rowBegin;
  size_t rowEnd;
  /** rows[j - entryBase] is entry j's embedding ([dim] values stored as `dtype`, read only). */
  const void* const* rows;
  size_t entryBase;
  const float* weights;  // [entries] (absolute index) or null = all ones
  Combiner combiner;
  double maxNorm;  // 0 = no clipping
  size_t dim;
  float* out;   // [rows * dim], row r at out + r * dim
  double* acc;  // scratch [dim]
  StorageDtype dtype = StorageDtype::kFloat32;
  bool prefetch = true;  // false: the rows are cache resident (a narrow span's widened rows)
};

/**
 * Combines the span's rows into `out` (every element of those rows written),
 * prefetching about 6 KiB of rows ahead. Multiversioned (AVX-512 / AVX2 / baseline).
 * Narrow rows (bfloat16, float16): sum / mean / sqrtn without clipping widen each row
 * where the pooling loop reads it (combine_narrow.h: F16C / AVX-512 where the CPU has
 * them); max / min, clipping, and CPUs without F16C widen a few bags at a time into a
 * float32 buffer (loadRows) that the float32 kernel then reduces. Either way the order
 * and the float64 operations are the float32 kernel's, so the same bits.
 */
void combineBagRows(const BagSpan& s);

}  // namespace embedstack
