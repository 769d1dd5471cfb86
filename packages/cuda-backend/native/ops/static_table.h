// The static table of the CUDA backend: `vocabularySize` dense rows (row = key,
// every key must be in [0, rows): OUT_OF_RANGE otherwise, checked by a kernel
// before any change), values and slots in the row store (HBM, or spilled past the
// placement's budget). No scores; remove resets rows to their initial values.
#pragma once

#include "device_table.h"
#include "primitives.h"

namespace embedstack {
namespace cuda {

class StaticTable final : public DeviceTable {
 public:
  StaticTable(TableConfig config, std::shared_ptr<Exec> ex, const Placement& placement);

  void findInto(const int64_t* keys, size_t n, float* values, uint8_t* exists) override;
  void findOrInsertInto(const int64_t* keys, size_t n, const uint64_t* scores, float* values, uint8_t* exists) override;
  void upsert(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) override;
  void assign(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) override;
  void accum(const int64_t* keys, size_t n, const float* deltas, const uint8_t* exists, const uint64_t* scores) override;
  size_t remove(const int64_t* keys, size_t n) override;
  void clear() override;
  size_t size() const override;
  size_t capacity() const override;
  size_t memoryUsage() const override;
  ExportResult exportBatch(size_t offset, size_t limit) override;
  void importRows(const int64_t* keys, size_t n, const float* values, const float* const* slots,
                  const uint64_t* scores) override;
  void lookupCombinedInto(const BagInput& bag, Combiner combiner, double maxNorm, bool insertMissing,
                          float* out) override;
  void applyGradients(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) override;
  size_t restrict(size_t numReserved) override;
  void setEpoch(uint32_t epoch) override;


 private:
  size_t deviceBytes() const override;
  size_t pinnedBytes() const override;
  void readRows(const int64_t* keys, size_t n, bool insert, const uint64_t* scores, float* out,
                uint8_t* exists) override;
  void trainRows(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) override;
  void readThenTrain(const int64_t* keys, size_t n, float* rows, uint8_t* exists, const std::function<void()>& gradients,
                     const float* grads, const OptimizerParams& opt) override;
  /** Throws OUT_OF_RANGE (naming `argument`[i] and its value) unless every staged key is a row. */
  void checkKeys(Stage& st, const int64_t* keys, size_t n, const char* argument);
  /** Stages host keys, then checkKeys. */
  const int64_t* checkedKeys(Stage& st, const int64_t* keys, size_t n, const char* argument);
  /** Rows of the distinct keys (the keys themselves) after a dedupe. */
  uint32_t* uniqueRows(Stage& st, const Dedupe& d);
  /** Last-occurrence writes of values (and slots for imports). */
  void write(const int64_t* keys, size_t n, const float* values, const float* const* slots, bool import);
  void resetRows(Stage& st, const int64_t* keys, const uint32_t* rows, size_t count);

  size_t rows_;
};

}  // namespace cuda
}  // namespace embedstack
