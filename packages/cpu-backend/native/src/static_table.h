// Static table: rows 0..vocabularySize-1, every row exists. One Block holds
// [rows] records of [dim values as storageDtype, padded to 4 bytes][slotFloats
// floats] (a row and its slots together). Keys are row
// indices checked against [0, vocabularySize) before any change (OUT_OF_RANGE).
// Semantics as core's reference static table: exists is always 1, findOrInsert is
// find, remove/clear reset rows (value and slots) to their initial values, scores
// are 0, restrict removes nothing, export is in row order.
#pragma once

#include "table.h"
#include "thread_pool.h"

namespace embedstack {

class StaticTable final : public Table {
 public:
  explicit StaticTable(TableConfig config);

  void findInto(const int64_t* keys, size_t n, float* values, uint8_t* exists) override;
  bool findSplits(size_t n) const override { return n >= kParallelThreshold; }
  void findOrInsertInto(const int64_t* keys, size_t n, const uint64_t* scores, float* values, uint8_t* exists) override;
  void upsert(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) override;
  void assign(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) override;
  void accum(const int64_t* keys, size_t n, const float* deltas, const uint8_t* exists,
             const uint64_t* scores) override;
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
  bool readsInt32Bags() const override { return true; }
  void applyGradients(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) override;
  void applyGradientSums(const int64_t* keys, size_t n, const GradientSums& sums, const OptimizerParams& opt) override;
  /** Lends float32 rows (every key is a row: nothing is missing); null for narrower storage. */
  std::unique_ptr<RowLease> leaseRows() override;
  size_t restrict(size_t numReserved) override;
  void setEpoch(uint32_t epoch) override;

 private:
  class Lease;
  /**
   * r, or 0 past the end. Keys are checked before any op, but an async caller may write into
   * its key array while the job reads it: such an index then reads row 0 (a wrong result for
   * a racing caller, never an access outside the arena; rows_ >= 1).
   */
  size_t clampRow(size_t r) const { return r < rows_ ? r : 0; }
  char* record(size_t r) const { return static_cast<char*>(arena_.data()) + clampRow(r) * rowBytes_; }
  /** Row r's stored values (float32 only when storage is float32). */
  void* row(size_t r) const { return record(r); }
  float* slotsOf(size_t r) const { return reinterpret_cast<float*>(record(r) + valueBytes_); }
  /** Resets row r; `wide` is scratch of dim floats. */
  void resetRow(size_t r, float* wide);
  void resetAll();
  /** Throws OUT_OF_RANGE naming `argument`[i] when a key is not a row index. */
  template <class K>
  void checkKeys(const K* keys, size_t n, const char* argument) const;
  /**
   * Calls fn(i) for every i in [0, n) such that each row's occurrences run in order
   * (large batches: thread t owns the rows r with r % threads == t).
   */
  void forEachInRowOrder(const int64_t* keys, size_t n, const std::function<void(size_t)>& fn);

  size_t dim_;
  size_t slotFloats_;
  StorageDtype storage_;
  size_t valueBytes_;  // dim values as stored, padded to 4 bytes
  size_t rowBytes_;    // valueBytes + slotFloats * 4
  size_t rows_;
  Block arena_;
};

}  // namespace embedstack
