// The embedding bag's host driver, shared by both table kinds.
#pragma once

#include "bag.cuh"
#include "buffer.h"
#include "table.h"

namespace embedstack {
namespace cuda {

/** A bag's arrays in the table's memory and its output's place: staged before the call changes anything. */
struct StagedBag {
  size_t n;                  // entries
  size_t rows;               // bag rows
  const int32_t* rowSplits;  // [rows + 1]
  const float* weights;      // [n] or null
  double* scales;            // [n] when maxNorm > 0, else null
  float* out;                // [rows * dim], copied to the caller's array at the Stage's finish()
};
StagedBag stageBag(Stage& st, const BagInput& bag, uint32_t dim, double maxNorm, float* out);

/**
 * Combines each bag row into the staged output (every element written): `keys` and
 * `entryRow` (per entry its row, or kNoRow for the initial value) are in the table's
 * memory.
 */
void combineBag(Exec& ex, const StagedBag& bag, const int64_t* keys, const uint32_t* entryRow, const RowsView& rows,
                const InitView& init, Combiner combiner, double maxNorm);

}  // namespace cuda
}  // namespace embedstack
