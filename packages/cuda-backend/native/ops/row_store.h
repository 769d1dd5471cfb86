// The row store of a table (kernels/rows.cuh RowsView): `capacity` rows of `stride`
// floats. The first hbmRows rows are in device memory (HBM); with a budget for
// values in HBM smaller than the table, the rows past it live in pinned host
// memory mapped into the device's address space (HierarchicalKV's hybrid mode):
// slower to reach, but the table is not limited by HBM. Host mode keeps both parts
// in host memory and reports them the same way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "buffer.h"
#include "rows.cuh"

namespace embedstack {
namespace cuda {

class RowStore {
 public:
  /** hbmBudget: bytes of rows allowed in HBM (SIZE_MAX: all). */
  RowStore(Exec& ex, uint32_t dim, uint32_t stride, size_t hbmBudget);

  /** Grows to at least `rows` rows (never shrinks), keeping rows [0, keep). Throws, unchanged, on failure. */
  void reserve(size_t rows, size_t keep);
  /** The arrays of a larger store, allocated (prepare) before anything changes, then taken (commit). */
  struct Growth {
    size_t rows = 0;  // 0: no growth
    size_t hbmRows = 0;
    DeviceArray<float> hbm;
    DeviceArray<float> spill;
  };
  /** Allocates room for `rows` rows (nothing when they fit); throws on failure, the store unchanged. */
  Growth prepare(size_t rows);
  /** Copies rows [0, keep) into the growth's arrays and takes them (allocates nothing). */
  void commit(Growth&& g, size_t keep);

  RowsView view() const { return {hbm_.data(), spill_.data(), hbmRows_, stride_, dim_}; }
  size_t capacity() const { return capacity_; }
  size_t hbmBytes() const { return hbm_.bytes(); }
  size_t pinnedBytes() const { return spill_.bytes(); }

 private:
  Exec& ex_;
  uint32_t dim_;
  uint32_t stride_;
  size_t budgetRows_;
  size_t capacity_ = 0;
  size_t hbmRows_ = 0;
  DeviceArray<float> hbm_;
  DeviceArray<float> spill_;
};

}  // namespace cuda
}  // namespace embedstack
