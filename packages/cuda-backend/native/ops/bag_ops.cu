#include "bag_ops.h"

namespace embedstack {
namespace cuda {

StagedBag stageBag(Stage& st, const BagInput& bag, uint32_t dim, double maxNorm, float* out) {
  StagedBag b;
  b.n = bag.n;
  b.rows = bag.rows;
  b.weights = st.in(bag.weights, bag.n, "bag weights");
  b.scales = maxNorm > 0 ? st.scratch<double>(bag.n, "bag entry scales") : nullptr;
  b.rowSplits = st.in(bag.rowSplits, bag.rows + 1, "bag row splits");
  b.out = st.out(out, bag.rows * dim, "bag output");
  return b;
}

void combineBag(Exec& ex, const StagedBag& b, const int64_t* keys, const uint32_t* entryRow, const RowsView& rows,
                const InitView& init, Combiner combiner, double maxNorm) {
  if (b.scales) launchThreads<EntryScales>(ex, b.n, {rows, init, keys, entryRow, b.weights, maxNorm, b.scales});
  launchGroups<BagCombine>(ex, b.rows,
                           {rows, init, b.rowSplits, keys, entryRow, b.weights, b.scales,
                            static_cast<BagCombiner>(static_cast<int>(combiner)), b.out});
}

}  // namespace cuda
}  // namespace embedstack
