// The embedding bag's host driver, shared by both table kinds.
#pragma once

#include "bag.cuh"
#include "buffer.h"
#include "table.h"

namespace embedstack {
namespace cuda {

/**
 * Combines each bag row into out [rows * dim] (host memory, every element written):
 * `keys` and `entryRow` (per entry its row, or kNoRow for the initial value) are in
 * the table's memory already; row splits and weights are staged here.
 */
void combineBag(Stage& st, const BagInput& bag, const int64_t* keys, const uint32_t* entryRow, const RowsView& rows,
                const InitView& init, Combiner combiner, double maxNorm, float* out);

}  // namespace cuda
}  // namespace embedstack
