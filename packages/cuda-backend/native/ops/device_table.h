// The common part of the CUDA backend's tables: the Exec (device or host mode), the
// row store, the initializer and slot template in the table's memory, and the
// placement options. Tables implement cpu-backend's Table contract (table.h), so
// the shared N-API layer (cpu-backend native/binding) serves them unchanged; every
// op stages its host arrays into the table's memory (a no-op in host mode), runs
// kernels, and copies results back before returning.
#pragma once

#include <functional>
#include <memory>

#include "buffer.h"
#include "planned_ops.h"
#include "row_store.h"
#include "table.h"

namespace embedstack {
namespace cuda {

/** Where a table lives (the addon's createTable placement vector). */
struct Placement {
  bool device = false;       // false: host mode
  int ordinal = 0;           // CUDA device
  size_t hbmBudget = SIZE_MAX;  // bytes of rows allowed in HBM; the rest spill to pinned host memory
  size_t poolReleaseThreshold = 0;  // device mode: bytes its memory pool keeps cached (SIZE_MAX: all); runtime.h
  bool emulated = false;     // (host mode) an emulated device of the table's own: runtime.h, a test aid
  Emulation emulation;       // its order options
};

class DeviceTable : public Table, public PlannedOps {
 public:
  DeviceTable(TableConfig config, std::shared_ptr<Exec> ex, const Placement& placement);

  bool onDevice() const { return ex_->onDevice(); }
  /** Where the table's memory and kernels are (tests inject allocation failures on an emulated device). */
  Exec& exec() const { return *ex_; }
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

 // Shard plans (planned_ops.h), in kernels: owned entries and local keys, rows moved
  // between entry order and the owned entries' order, the partial bag and the backward.
  void plannedFind(const int64_t* keys, size_t n, const ShardPlan& plan, bool insert, const uint64_t* scores,
                   float* values, uint8_t* exists) override;
  void lookupCombinedPartial(const BagInput& bag, Combiner c, double maxNorm, bool insert, const ShardPlan& plan,
                             double* out) override;
  void lookupCombinedBackward(const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                              const ShardPlan& plan, float* out) override;
  void applyCombinedGradients(const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                              const ShardPlan& plan, const OptimizerParams& opt) override;
  void plannedApplyGradients(const int64_t* keys, size_t n, const float* grads, const ShardPlan& plan,
                             const OptimizerParams& opt) override;

 protected:
  /**
   * find (or findOrInsert with `insert`) of keys already in the table's memory, into
   * out [n * dim] / exists [n] there; scores (with insert) in table memory or null.
   * Takes the table lock. The planned ops and the host-array ops are built on it.
   */
  virtual void readRows(const int64_t* keys, size_t n, bool insert, const uint64_t* scores, float* out,
                        uint8_t* exists) = 0;
  /** applyGradients of keys and grads [n * dim] already in the table's memory. Takes the table lock. */
  virtual void trainRows(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) = 0;
  /**
   * A find of `keys` into rows [n * dim] / exists [n], then `gradients()` (kernels that make
   * grads [n * dim] from those rows), then trainRows(keys, n, grads, opt): one call under one
   * exclusive lock, ending exactly as the three in turn (the find's read scores and its clock
   * included), but the read is scored only once the step can no longer fail, so a step that
   * fails (out of memory) changes nothing. All in the table's memory.
   */
  virtual void readThenTrain(const int64_t* keys, size_t n, float* rows, uint8_t* exists,
                             const std::function<void()>& gradients, const float* grads,
                             const OptimizerParams& opt) = 0;

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
