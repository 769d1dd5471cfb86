#include "row_store.h"

namespace embedstack {
namespace cuda {

RowStore::RowStore(Exec& ex, uint32_t dim, uint32_t stride, size_t hbmBudget)
    : ex_(ex), dim_(dim), stride_(stride), budgetRows_(hbmBudget / (static_cast<size_t>(stride) * sizeof(float))) {}

void RowStore::reserve(size_t rows, size_t keep) {
  commit(prepare(rows), keep);
}

RowStore::Growth RowStore::prepare(size_t rows) {
  Growth g;
  if (rows <= capacity_) return g;
  g.hbmRows = rows < budgetRows_ ? rows : budgetRows_;
  g.hbm.reset(ex_, checkedMul(g.hbmRows, stride_, "the rows in device memory"), "the rows in device memory");
  g.spill.reset(ex_, checkedMul(rows - g.hbmRows, stride_, "the rows in pinned host memory"),
                "the rows in pinned host memory", MemoryKind::kPinned);
  g.rows = rows;
  return g;
}

void RowStore::commit(Growth&& g, size_t keep) {
  if (g.rows == 0) return;
  const RowsView to{g.hbm.data(), g.spill.data(), g.hbmRows, stride_, dim_};
  launchGroups<CopyRows>(ex_, keep, {view(), to});
  ex_.sync();  // the old arrays go below
  hbm_ = std::move(g.hbm);
  spill_ = std::move(g.spill);
  hbmRows_ = g.hbmRows;
  capacity_ = g.rows;
}

}  // namespace cuda
}  // namespace embedstack
