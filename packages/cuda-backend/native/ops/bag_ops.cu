#include "bag_ops.h"

namespace embedstack {
namespace cuda {

void combineBag(Stage& st, const BagInput& bag, const int64_t* keys, const uint32_t* entryRow, const RowsView& rows,
                const InitView& init, Combiner combiner, double maxNorm, float* out) {
  Exec& ex = st.exec();
  const float* weights = st.in(bag.weights, bag.n, "bag weights");
  double* scales = nullptr;
  if (maxNorm > 0) {
    scales = st.scratch<double>(bag.n, "bag entry scales");
    launchThreads<EntryScales>(ex, bag.n, {rows, init, keys, entryRow, weights, maxNorm, scales});
  }
  launchGroups<BagCombine>(ex, bag.rows,
                           {rows, init, st.in(bag.rowSplits, bag.rows + 1, "bag row splits"), keys, entryRow, weights,
                            scales, static_cast<BagCombiner>(static_cast<int>(combiner)),
                            st.out(out, bag.rows * rows.dim, "bag output")});
}

}  // namespace cuda
}  // namespace embedstack
