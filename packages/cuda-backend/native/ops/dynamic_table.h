// The dynamic table of the CUDA backend: a bucketed key index (kernels/buckets.cuh:
// 128-slot buckets, 8-bit digests, occupancy bits, load <= 1/2) over a dense row
// store (rows 0..size-1: key and score in `meta_`, value and slots in `store_`).
// Semantics are core's reference dynamic table, as the CPU backend's: scores by
// policy, the eviction rule of capped tables (a global radix selection, not HKV's
// per-bucket eviction, so results match every other backend), accum's bp_v2 rule.
//
// Memory: meta 16 B/row and the index 5.1 B/slot (2-4 slots per key) in HBM; rows
// in HBM up to the placement's budget, then pinned host memory. Removal moves the
// last rows into the holes (kernels), so rows stay dense and export is a range.
// Thread safety: cpu-backend's Table lock (reads shared, writes exclusive).
#pragma once

#include <atomic>

#include "device_table.h"
#include "primitives.h"

namespace embedstack {
namespace cuda {

class DynamicTable final : public DeviceTable {
 public:
  /** Rows are uint32 (one value is kNoRow). */
  static constexpr size_t kMaxRows = 0xfffffffeu;

  DynamicTable(TableConfig config, std::shared_ptr<Exec> ex, const Placement& placement);

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
  double findKernelSeconds(const int64_t* keys, size_t n, int iterations) override;

  /** Buckets of the key index (tests). */
  size_t buckets() const { return buckets_; }

 private:
  size_t deviceBytes() const override;
  size_t pinnedBytes() const override;
  void readRows(const int64_t* keys, size_t n, bool insert, const uint64_t* scores, float* out,
                uint8_t* exists) override;
  void trainRows(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) override;
  void readThenTrain(const int64_t* keys, size_t n, float* rows, uint8_t* exists, const std::function<void()>& gradients,
                     const float* grads, const OptimizerParams& opt) override;
  /** One write call: its clock, distinct keys, and per unique its row (kNoRow: absent or refused). */
  struct Write {
    explicit Write(Exec& ex) : st(ex) {}
    Stage st;
    ScoreClock clock;
    Dedupe d;
    const uint64_t* given = nullptr;  // caller scores [n] (table memory) or null
    uint32_t* rowOf = nullptr;        // [u]
    uint8_t* present = nullptr;       // [u] resident before the call
  };

  IndexView index() const;
  ScoreView scoreView(const ScoreClock& t) const;
  /** A read call's clock (readers under the shared lock advance it concurrently). */
  ScoreClock beginCall();
  /**
   * A write call's clock, not yet counted: under the exclusive lock no other call takes one,
   * so endWrite() counts it once the call can no longer fail (a call that runs out of memory
   * leaves the clock, and so later calls' scores, as they were).
   */
  ScoreClock peekCall() const;
  /** Counts the write's clock (the last step before waiting for its kernels), then finish(). */
  void endWrite(Write& w);
  /**
   * Room for `rows` rows in the row store (doubling) and `indexRows` keys in the index at
   * load <= 1/2 (rebuilt when it grows). Everything is allocated, and the index rebuilt into
   * its new arrays, before either replaces the old: a failure changes nothing, capacity and
   * memoryUsage included.
   */
  void reserve(size_t rows, size_t indexRows);

  // write path (dynamic_write.cu); keys and scores are in the table's memory (staged)
  void startWrite(Write& w, const int64_t* keys, size_t n, const uint64_t* scores, bool occurrenceLists);
  /**
   * Admits the call's new keys (those with wants[u], when given): inserts them (rows
   * with initial slots, and initial values when `fill`), evicting by the eviction
   * rule when the cap is reached; refused keys keep rowOf = kNoRow. All memory is
   * reserved before the first change.
   */
  void admit(Write& w, const uint8_t* wants, bool explicitScores, bool fill);
  /** A removal of rows list[0..count) (distinct, < size), planned: the compaction's lists. */
  struct Removal {
    const uint32_t* list = nullptr;
    size_t count = 0;
    uint32_t* holes = nullptr;   // [moved] rows below the new size that the removal empties
    uint32_t* movers = nullptr;  // [moved] rows above it that fill them, in order
    uint32_t moved = 0;
  };
  /** Plans the removal (every allocation it needs; no change). */
  Removal planRemoval(Stage& st, const uint32_t* list, size_t count);
  /** Carries it out (allocates nothing): index erase, then the last rows move into the holes. */
  void removeRows(const Removal& r);
  /** Scores (and with `values`, writes) each resident unique from its last occurrence. */
  void writeUniques(Write& w, const float* values, const float* const* slots, bool explicitScores,
                    bool resetSlots);
  /**
   * applyGradients' body under the exclusive lock: admits the missing keys, steps the rows.
   * With `readFirst` it ends as a find of the same keys, then the step: the read's scores
   * (its own clock, before the step's) are given once nothing can fail. Counts the clock and
   * finishes.
   */
  void trainLocked(Write& w, const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt,
                   bool readFirst);
  /** findOrInsert's body under the exclusive lock (staged keys and scores); counts the clock, the caller finishes. */
  void findOrInsertLocked(Write& w, const int64_t* keys, size_t n, const uint64_t* scores);

  bool capped_;
  size_t cap_;
  size_t size_ = 0;
  DeviceArray<RowMeta> meta_;
  size_t buckets_ = 0;
  DeviceArray<uint32_t> slotRow_;
  DeviceArray<uint8_t> digests_;
  DeviceArray<uint32_t> occupied_;
  DeviceArray<uint32_t> overflow_;
  std::atomic<uint64_t> clock_{0};
  std::atomic<uint64_t> epoch_{0};
};

}  // namespace cuda
}  // namespace embedstack
