#include "row_store.h"

namespace embedstack {
namespace cuda {

RowStore::RowStore(Exec& ex, uint32_t dim, uint32_t stride, size_t hbmBudget)
    : ex_(ex), dim_(dim), stride_(stride), budgetRows_(hbmBudget / (static_cast<size_t>(stride) * sizeof(float))) {}

void RowStore::reserve(size_t rows, size_t keep) {
  if (rows <= capacity_) return;
  const size_t hbmRows = rows < budgetRows_ ? rows : budgetRows_;
  DeviceArray<float> hbm(ex_, checkedMul(hbmRows, stride_, "the rows in device memory"), "the rows in device memory");
  DeviceArray<float> spill(ex_, checkedMul(rows - hbmRows, stride_, "the rows in pinned host memory"),
                           "the rows in pinned host memory", MemoryKind::kPinned);
  const RowsView to{hbm.data(), spill.data(), hbmRows, stride_, dim_};
  launchGroups<CopyRows>(ex_, keep, {view(), to});
  ex_.sync();  // the old arrays go below
  hbm_ = std::move(hbm);
  spill_ = std::move(spill);
  hbmRows_ = hbmRows;
  capacity_ = rows;
}

}  // namespace cuda
}  // namespace embedstack
