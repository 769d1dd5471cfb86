// The common part of the CUDA backend's tables: the Exec (device or host mode), the
// row store, the initializer and slot template in the table's memory, and the
// placement options. Tables implement cpu-backend's Table contract (table.h), so
// the shared N-API layer (cpu-backend native/binding) serves them unchanged; every
// op stages its host arrays into the table's memory (a no-op in host mode), runs
// kernels, and copies results back before returning.
#pragma once

#include <memory>

#include "buffer.h"
#include "row_store.h"
#include "table.h"

namespace embedstack {
namespace cuda {

/** Where a table lives (the addon's createTable placement vector). */
struct Placement {
  bool device = false;       // false: host mode
  int ordinal = 0;           // CUDA device
  size_t hbmBudget = SIZE_MAX;  // bytes of rows allowed in HBM; the rest spill to pinned host memory
};

class DeviceTable : public Table {
 public:
  DeviceTable(TableConfig config, std::shared_ptr<Exec> ex, const Placement& placement);

  bool onDevice() const { return ex_->onDevice(); }
  /** memoryUsage() split: bytes in device memory (HBM; host mode: the emulated HBM) and in pinned host memory. */
  struct MemorySplit {
    size_t device;
    size_t pinned;
  };
  MemorySplit memorySplit() const;
  /**
   * Seconds per find kernel over keys[0..n) already in the table's memory (staged once,
   * outputs to scratch), averaged over `iterations` after a warm-up: the kernel rate a
   * caller with device-resident keys and outputs sees. Dynamic tables only.
   */
  virtual double findKernelSeconds(const int64_t* keys, size_t n, int iterations);

 protected:
  /** Under the table lock. */
  virtual size_t deviceBytes() const = 0;
  virtual size_t pinnedBytes() const = 0;

  InitView initView() const;
  uint32_t dim() const { return static_cast<uint32_t>(config_.dim); }
  uint32_t slotFloats() const { return stride_ - dim(); }
  /** Device pointers to the slot widths (for import / export kernels). */
  const uint32_t* slotWidths() const { return widths_.data(); }
  uint32_t slotCount() const { return static_cast<uint32_t>(config_.slotWidths.size()); }
  /** Rows [offset, offset + limit) clamped to `rows` rows, copied out (meta: keys and scores; null for static tables). */
  ExportResult exportRange(size_t offset, size_t limit, size_t rows, const RowMeta* meta);
  /** Per-slot import arrays as a device array of pointers (null when slots is null). */
  const float* const* importSlotsFrom(Stage& st, const float* const* slots, size_t n);

  std::shared_ptr<Exec> ex_;
  uint32_t stride_;
  RowStore store_;
  DeviceArray<float> initValues_;
  DeviceArray<float> slotTemplateDevice_;
  DeviceArray<uint32_t> widths_;
};

}  // namespace cuda
}  // namespace embedstack
