// The native table contract (core's RawTableSync, in C++). Keys arrive as int64
// (int32 keys sign-extended by the binding), except an embedding bag's int32 ids for a
// table that readsInt32Bags() (BagInput::keys32, read in place). Lengths are validated by the caller
// (the N-API layer): values [n * dim], exists [n], scores [n] or null. Range checks
// that depend on table state (static row indices, optimizer slot layout) are made
// here, before any change: a call that throws changed nothing.
//
// Thread safety: every method may be called from any thread. Each table has a
// reader-writer lock: find, lookupCombined without insertMissing, exportBatch and
// the size queries share it (their score updates are relaxed atomics); every
// other method holds it exclusively. After markDisposed() every method throws
// DISPOSED; memory is released when the last owner drops the table.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "combine.h"
#include "errors.h"
#include "initializer.h"
#include "memory.h"
#include "optimizer.h"
#include "scores.h"
#include "shard_plan.h"
#include "storage.h"
#include "thread_pool.h"

namespace embedstack {

struct TableConfig {
  bool isStatic = false;
  size_t dim = 1;
  bool int32Keys = false;
  /** static: rows */
  size_t vocabularySize = 0;
  /** dynamic: rows reserved up front, and the cap (SIZE_MAX = uncapped) */
  size_t initCapacity = 1024;
  size_t maxCapacity = SIZE_MAX;
  Initializer initializer;
  ScorePolicy scorePolicy = ScorePolicy::kLru;
  /** per slot: floats per row (dim or 1) */
  std::vector<uint32_t> slotWidths;
  /** per slot: initial value */
  std::vector<float> slotInitial;
  /** how values are stored (slots are always float32) */
  StorageDtype storage = StorageDtype::kFloat32;

  size_t slotFloats() const {
    size_t s = 0;
    for (uint32_t w : slotWidths) s += w;
    return s;
  }
};

struct FindResult {
  HostArray<float> values;    // [n * dim]
  HostArray<uint8_t> exists;  // [n]
};

struct ExportResult {
  HostArray<int64_t> keys;              // [n]
  HostArray<float> values;              // [n * dim]
  std::vector<HostArray<float>> slots;  // per slot [n * width]
  HostArray<uint64_t> scores;           // [n]
};

/** A ragged bag: row r holds keys[rowSplits[r] .. rowSplits[r+1]). */
struct BagInput {
  const int32_t* rowSplits = nullptr;  // [rows + 1], validated: 0, non-decreasing, ends at n
  size_t rows = 0;
  const int64_t* keys = nullptr;  // [n]; null when keys32 holds them
  size_t n = 0;
  const float* weights = nullptr;  // [n] or null (all ones)
  /** int32 keys as the caller gave them (no widened copy): only for a table whose readsInt32Bags(). */
  const int32_t* keys32 = nullptr;
};

/** Runs fn over ranges of bag rows: split over the thread pool when the bag has many keys. */
void forEachBagRange(const BagInput& bag, RangeFn fn);

/**
 * Splits bag rows [rb, re) into consecutive spans of about `entries` keys (a row is
 * never split) and calls fn(r0, r1) for each, in order.
 */
template <class Fn>
void forEachBagSpan(const BagInput& bag, size_t rb, size_t re, size_t entries, Fn&& fn) {
  size_t r0 = rb;
  while (r0 < re) {
    size_t r1 = r0 + 1;
    const size_t start = static_cast<size_t>(bag.rowSplits[r0]);
    while (r1 < re && static_cast<size_t>(bag.rowSplits[r1 + 1]) - start <= entries) ++r1;
    fn(r0, r1);
    r0 = r1;
  }
}

/** A table's read lock and read clock held for one read call (Table::leaseRows). */
class RowLease {
 public:
  virtual ~RowLease() = default;
  /**
   * rows[i] -> keys[i]'s float32 values [dim]: the stored row, or for a missing key its
   * initial value written into `initial` (resized here: the pointers into it stay valid
   * until it is next changed). Nothing is inserted; read-policy scores are touched with
   * the lease's clock. May run on several threads at once. Throws as findInto would
   * (a static table: OUT_OF_RANGE for a key that is not a row index, before any touch).
   * `prefetchRows`: also ask for the rows' values (into L2, where a table must look up its
   * keys), for a caller that reads them right after, a few hundred at a time.
   */
  virtual void lend(const int64_t* keys, size_t n, const float** rows, std::vector<float>& initial, bool prefetchRows) = 0;
  /**
   * Takes the lease's read clock: once, after every lease the call needs is in hand and before
   * the first lend, so a call that gives up its leases (a table that does not lend) has spent
   * no table's clock before it reads another way.
   */
  virtual void begin() {}
};

/**
 * One read call of bags whose keys are split over several tables (Table::leaseBag): every
 * table's read lock and read clock, held until the lease is destroyed.
 */
class BagLease {
 public:
  virtual ~BagLease() = default;
  /**
   * out rows [r0, r1) of the bag (every element written), each entry's row from its owning
   * table under its local key: exactly one table's lookupCombinedInto without inserts on
   * a table holding every row (each row's entries in bag order, one float64 sum, rounded
   * once), a missing key's value its owner's initial value, and each table's read-policy
   * scores touched as its own read of its keys would. May run on several threads at once
   * (other rows).
   */
  virtual void pool(const BagInput& bag, size_t r0, size_t r1, Combiner combiner, double maxNorm, float* out) const = 0;
};

/**
 * The gradients of an applyGradients call given by a function rather than an array
 * (applyGradientSums): a fused op computes each key's gradient where the update needs
 * it, so no per-entry gradient array is built.
 */
class GradientSums {
 public:
  virtual ~GradientSums() = default;
  /**
   * sum [dim] = the summed gradient of one key whose occurrences (indices into the
   * call's keys, ascending) are occurrences[0..count), count >= 1: the float32 sum, in
   * that order from 0, of each occurrence's float32 gradient (as sumGradientRows adds an array).
   * `scratch` holds dim doubles. Called from several threads at once (other keys).
   */
  virtual void sum(const uint32_t* occurrences, size_t count, float* sum, double* scratch) const = 0;
  /**
   * Updates row w [dim] and its slots with that key's summed gradient (`sum` [dim] and
   * `scratch` [dim] are the caller's buffers): sum(), then applyOptimizerRow.
   */
  virtual void update(const OptimizerParams& opt, float* w, float* slots, const uint32_t* occurrences, size_t count,
                      size_t dim, float* sum, double* scratch) const;
  /** A hint that sum(occurrences, count) comes soon (prefetch its inputs). */
  virtual void prefetch(const uint32_t* /*occurrences*/, size_t /*count*/) const {}
};

/**
 * GradientSums of a gradient array: entry i's gradient is row i of grads (applyGradients'
 * own), or row rowIndex[i] when rowIndex is given (a shard's entries of a larger batch).
 */
class ArrayGradientSums final : public GradientSums {
 public:
  ArrayGradientSums(const float* grads, size_t dim, const uint32_t* rowIndex = nullptr)
      : grads_(grads), dim_(dim), rowIndex_(rowIndex) {}
  void sum(const uint32_t* occurrences, size_t count, float* sum, double* scratch) const override;
  /** The sum and the update in one multiversioned call (applyGradientRow). */
  void update(const OptimizerParams& opt, float* w, float* slots, const uint32_t* occurrences, size_t count, size_t dim,
              float* sum, double* scratch) const override;
  void prefetch(const uint32_t* occurrences, size_t count) const override;
  const float* grads() const { return grads_; }
  /** Null when entry i's gradient is row i. */
  const uint32_t* rowIndex() const { return rowIndex_; }

 private:
  const float* grads_;
  size_t dim_;
  const uint32_t* rowIndex_;
};

class Table {
 public:
  explicit Table(TableConfig config);
  virtual ~Table() = default;
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  const TableConfig& config() const { return config_; }

  /** Reads rows into values [n * dim] and exists [n] (caller memory, every element written). */
  virtual void findInto(const int64_t* keys, size_t n, float* values, uint8_t* exists) = 0;
  /**
   * Whether findInto of n keys splits over the shared thread pool as soon as it starts (an
   * async find then wakes the pool's helpers together with its driver, ThreadPool::post).
   */
  virtual bool findSplits(size_t /*n*/) const { return false; }
  virtual void findOrInsertInto(const int64_t* keys, size_t n, const uint64_t* scores, float* values,
                                uint8_t* exists) = 0;
  /** The same into fresh buffers. */
  FindResult find(const int64_t* keys, size_t n);
  FindResult findOrInsert(const int64_t* keys, size_t n, const uint64_t* scores);
  virtual void upsert(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) = 0;
  virtual void assign(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) = 0;
  virtual void accum(const int64_t* keys, size_t n, const float* deltas, const uint8_t* exists,
                     const uint64_t* scores) = 0;
  virtual size_t remove(const int64_t* keys, size_t n) = 0;
  virtual void clear() = 0;
  virtual size_t size() const = 0;
  virtual size_t capacity() const = 0;
  virtual size_t memoryUsage() const = 0;
  virtual ExportResult exportBatch(size_t offset, size_t limit) = 0;
  /** `slots`: null, or one pointer per slot to [n * width] floats. */
  virtual void importRows(const int64_t* keys, size_t n, const float* values, const float* const* slots,
                          const uint64_t* scores) = 0;
  /** Combines each bag row into out [rows * dim] (caller memory, every element written). */
  virtual void lookupCombinedInto(const BagInput& bag, Combiner combiner, double maxNorm, bool insertMissing,
                                  float* out) = 0;
  HostArray<float> lookupCombined(const BagInput& bag, Combiner combiner, double maxNorm, bool insertMissing);
  /** True when lookupCombinedInto takes a bag whose keys are in keys32 (else the caller widens them to keys). */
  virtual bool readsInt32Bags() const { return false; }
  virtual void applyGradients(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) = 0;
  /**
   * applyGradients with each key's summed gradient from `sums` (called once per key
   * updated, under the write lock). The base version builds the per-entry array and
   * calls applyGradients; the CPU tables sum straight into their update.
   */
  virtual void applyGradientSums(const int64_t* keys, size_t n, const GradientSums& sums, const OptimizerParams& opt);
  /**
   * findInto(keys, n, rows) then applyGradientSums(keys, n, sums, opt), for sums that read
   * `rows` [n * dim] (applyCombinedGradients' maxNorm clipping): the same rows, scores and
   * clock as those two calls. The base version makes the two calls; a dynamic table makes one,
   * reading the rows only once the step can no longer fail, so a rejected call changes nothing.
   */
  virtual void applyGradientSumsAfterFind(const int64_t* keys, size_t n, float* rows, const GradientSums& sums,
                                          const OptimizerParams& opt);
  virtual size_t restrict(size_t numReserved) = 0;
  virtual void setEpoch(uint32_t epoch) = 0;
  /**
   * Lends the rows of keys [n] without copying them: calls fn(rows) once, under the
   * table's read lock, with rows[i] -> keys[i]'s float32 values [dim] (a missing key:
   * its initial value in a temporary buffer; nothing is inserted; read-policy scores
   * are touched as findInto touches them). The pointers are valid only inside fn.
   * Returns false, calling nothing, when the table does not lend rows (then copy them
   * with findInto). One lease (leaseRows) lending every key.
   */
  bool withRows(const int64_t* keys, size_t n, const std::function<void(const float* const* rows)>& fn);

  /**
   * One read call whose keys come in several batches, possibly from several threads at
   * once (the fused shard lookup): the read lock is taken here and held until the lease
   * is destroyed, and every RowLease::lend scores its reads with this one call's clock,
   * so the reads touch rows exactly as one findInto of all the batches would. Null when
   * the table does not lend rows (the default; then copy them with findInto). Throws
   * DISPOSED on a disposed table.
   */
  virtual std::unique_ptr<RowLease> leaseRows() { return nullptr; }

  /**
   * A read of bags whose keys `owners` split over `parts` distinct tables (this one is
   * tables[0]; every residue owned, part[r] < parts): the tables' read locks taken in part
   * order and held, with each table's call clock, until the lease is destroyed. Null when
   * these tables have no such read (the default; then lease or find each table's rows).
   * Throws DISPOSED when a table is disposed (the locks taken so far released).
   */
  virtual std::unique_ptr<BagLease> leaseBag(Table* const* /*tables*/, size_t /*parts*/, const ResidueOwners& /*owners*/) {
    return nullptr;
  }

  /** Throws INVALID_ARGUMENT unless the optimizer's slots are exactly this table's slots. */
  void validateOptimizer(const OptimizerParams& opt) const { checkOptimizer(opt); }

  /** Makes every later call throw DISPOSED (calls already running finish). Idempotent. */
  void markDisposed() { disposed_.store(true, std::memory_order_release); }
  bool disposed() const { return disposed_.load(std::memory_order_acquire); }

 protected:
  void checkAlive() const { ES_CHECK(!disposed(), kDisposed, "Expected a live table but it was disposed"); }
  /** Throws unless the optimizer's slots are exactly this table's slots. */
  void checkOptimizer(const OptimizerParams& opt) const;
  /**
   * A row's slots (`dst`, [slotFloats]) from import arrays (`slots[j]` is [n * width_j],
   * entry i), or their initial values when `slots` is null.
   */
  void importSlots(float* dst, const float* const* slots, size_t i) const;
  /** Splits a row's slots (`src`) into export arrays at entry i. */
  void exportSlots(const float* src, std::vector<HostArray<float>>& out, size_t i) const;

  TableConfig config_;
  std::vector<float> slotTemplate_;  // [slotFloats] a new row's slots (each slot's initial value)
  mutable std::shared_mutex mutex_;

 private:
  std::atomic<bool> disposed_{false};
};

/**
 * Checks a config (dim, slot layout, initializer, score policy, sizes) and throws
 * INVALID_ARGUMENT / SHAPE_MISMATCH naming the field. Backend-independent: every
 * native backend's factory calls it first.
 */
void validateTableConfig(const TableConfig& config);

/** validateTableConfig, then builds the CPU backend's table (table_factory.cc). */
std::shared_ptr<Table> createTable(TableConfig config);

}  // namespace embedstack
