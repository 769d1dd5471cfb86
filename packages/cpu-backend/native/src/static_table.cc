#include "static_table.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

#include "dedupe.h"
#include "stream_copy.h"
#include "thread_pool.h"

namespace embedstack {

StaticTable::StaticTable(TableConfig config) : Table(std::move(config)) {
  const TableConfig& c = config_;
  dim_ = c.dim;
  slotFloats_ = c.slotFloats();
  storage_ = c.storage;
  valueBytes_ = storedValueBytes(storage_, dim_);
  rowBytes_ = checkedAdd(valueBytes_, checkedMul(slotFloats_, sizeof(float), "a row"), "a row");
  rows_ = c.vocabularySize;
  arena_.allocateZeroed(checkedMul(rows_, rowBytes_, "the static table"), "the static table");
  // Fresh pages are zero: an all-zero initial state needs no writes (and no RSS).
  bool allZero = c.initializer.kind == InitKind::kZeros;
  for (float v : slotTemplate_) allZero = allZero && v == 0.0f && !std::signbit(v);
  if (!allZero) resetAll();
}

void StaticTable::resetRow(size_t r, float* wide) {
  r = clampRow(r);  // the initializer reads row r too
  config_.initializer.fill(static_cast<int64_t>(r), r, dim_, wide);
  storeValues(storage_, wide, row(r), dim_);
  if (slotFloats_ > 0) std::memcpy(slotsOf(r), slotTemplate_.data(), slotFloats_ * sizeof(float));
}

void StaticTable::resetAll() {
  forEachRange(rows_, [&](size_t b, size_t e) {
    std::vector<float> wide(dim_);
    for (size_t r = b; r < e; ++r) resetRow(r, wide.data());
  });
}

namespace {

/**
 * Index of the first key outside [0, limit), or n: over the thread pool for large
 * batches, each block's largest key as unsigned (a negative key reads as huge) found by a
 * loop the compiler vectorizes, and a block searched only when that key is out of range.
 */
template <class K>
size_t firstKeyOutside(const K* keys, size_t n, uint64_t limit) {
  using U = std::make_unsigned_t<K>;
  // A negative key reads as at least 2^(bits-1) unsigned: the limit never goes past that, so
  // a negative int32 id fails even on a table of more than 2^31 rows.
  const uint64_t keyEnd = static_cast<uint64_t>(std::numeric_limits<K>::max()) + 1;
  const U lim = static_cast<U>(limit < keyEnd ? limit : keyEnd);
  std::atomic<size_t> first{n};
  const ThreadPool::NotTheLastStep check;  // an async find's wake belongs to its row copy
  forEachRange(
      n,
      [&](size_t b, size_t e) {
        constexpr size_t kBlock = 1024;
        for (size_t i0 = b; i0 < e; i0 += kBlock) {
          const size_t i1 = std::min(e, i0 + kBlock);
          U hi = 0;
          for (size_t i = i0; i < i1; ++i) {
            const U k = static_cast<U>(keys[i]);
            hi = k > hi ? k : hi;
          }
          if (hi < lim) continue;
          // Bounded: an async caller that writes into its keys meanwhile must not send this past the block.
          size_t i = i0;
          while (i < i1 && static_cast<U>(keys[i]) < lim) ++i;
          if (i == i1) continue;
          size_t seen = first.load();
          while (i < seen && !first.compare_exchange_weak(seen, i)) {
          }
          return;
        }
      },
      1 << 16);
  return first.load();
}

}  // namespace

template <class K>
void StaticTable::checkKeys(const K* keys, size_t n, const char* argument) const {
  const size_t i = firstKeyOutside(keys, n, rows_);
  ES_CHECK(i == n, kOutOfRange,
           "Expected " << argument << "[" << i << "] to be a row index in [0, " << rows_
                       << ") of the static table but received " << (i < n ? static_cast<int64_t>(keys[i]) : 0));
}

void StaticTable::forEachInRowOrder(const int64_t* keys, size_t n, const std::function<void(size_t)>& fn) {
  ThreadPool& pool = ThreadPool::shared();
  const size_t t = pool.threads();
  if (n < kParallelThreshold || t == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool.parallelFor(t, 1, [&](size_t b, size_t e) {
    for (size_t owner = b; owner < e; ++owner) {
      for (size_t i = 0; i < n; ++i) {
        if (static_cast<uint64_t>(keys[i]) % t == owner) fn(i);
      }
    }
  });
}

void StaticTable::findInto(const int64_t* keys, size_t n, float* out, uint8_t* exists) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  checkKeys(keys, n, "keys");
  const bool stream = n * dim_ * sizeof(float) >= kStreamingBytes;
  const size_t bytes = dim_ * storageBytes(storage_);
  const bool wide = storage_ == StorageDtype::kFloat32;
  forEachRange(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      if (i + 8 < e) {
        const char* p = static_cast<const char*>(row(static_cast<size_t>(keys[i + 8])));
        for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
      }
      const void* src = row(static_cast<size_t>(keys[i]));
      if (wide) {
        copyFloats(out + i * dim_, static_cast<const float*>(src), dim_, stream);
      } else {
        loadValues(storage_, src, out + i * dim_, dim_);
      }
      exists[i] = 1;
    }
    if (stream) streamFence();
  });
}

/** Shared lock; lend checks the keys and points at their rows. */
class StaticTable::Lease final : public RowLease {
 public:
  explicit Lease(const StaticTable& t) : t_(t), lock_(t.mutex_) { t.checkAlive(); }

  void lend(const int64_t* keys, size_t n, const float** rows, std::vector<float>& initial, bool) override {
    t_.checkKeys(keys, n, "keys");
    initial.clear();
    for (size_t i = 0; i < n; ++i) rows[i] = static_cast<const float*>(t_.row(static_cast<size_t>(keys[i])));
  }

 private:
  const StaticTable& t_;
  std::shared_lock<std::shared_mutex> lock_;
};

std::unique_ptr<RowLease> StaticTable::leaseRows() {
  if (storage_ != StorageDtype::kFloat32) return nullptr;
  return std::make_unique<Lease>(*this);
}

void StaticTable::findOrInsertInto(const int64_t* keys, size_t n, const uint64_t*, float* values, uint8_t* exists) {
  findInto(keys, n, values, exists);
}

void StaticTable::upsert(const int64_t* keys, size_t n, const float* values, const uint64_t*) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  checkKeys(keys, n, "keys");
  forEachInRowOrder(keys, n, [&](size_t i) { storeValues(storage_, values + i * dim_, row(static_cast<size_t>(keys[i])), dim_); });
}

void StaticTable::assign(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) {
  upsert(keys, n, values, scores);
}

void StaticTable::accum(const int64_t* keys, size_t n, const float* deltas, const uint8_t* exists, const uint64_t*) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  checkKeys(keys, n, "keys");
  forEachInRowOrder(keys, n, [&](size_t i) {
    if (!exists[i]) return;
    void* stored = row(static_cast<size_t>(keys[i]));
    float* v = storage_ == StorageDtype::kFloat32 ? static_cast<float*>(stored) : rowScratch(dim_);
    if (v != stored) loadValues(storage_, stored, v, dim_);
    const float* d = deltas + i * dim_;
    for (size_t c = 0; c < dim_; ++c) v[c] = v[c] + d[c];
    if (v != stored) storeValues(storage_, v, stored, dim_);
  });
}

size_t StaticTable::remove(const int64_t* keys, size_t n) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  checkKeys(keys, n, "keys");
  BatchDedupe d;
  d.build(keys, n);
  std::vector<float> wide(dim_);
  for (size_t u = 0; u < d.uniqueCount(); ++u) resetRow(static_cast<size_t>(d.key(u)), wide.data());
  return d.uniqueCount();
}

void StaticTable::clear() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  resetAll();
}

size_t StaticTable::size() const {
  checkAlive();
  return rows_;
}

size_t StaticTable::capacity() const {
  checkAlive();
  return rows_;
}

size_t StaticTable::memoryUsage() const {
  checkAlive();
  return rows_ * rowBytes_;
}

ExportResult StaticTable::exportBatch(size_t offset, size_t limit) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const size_t start = std::min(offset, rows_);
  const size_t n = std::min(limit, rows_ - start);
  const std::vector<uint32_t>& widths = config_.slotWidths;
  ExportResult r;
  r.keys.allocate(n);
  r.values.allocate(checkedMul(n, dim_, "export values"));
  r.scores.allocate(n);
  for (uint32_t w : widths) r.slots.emplace_back(checkedMul(n, w, "export slots"));
  forEachRange(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      r.keys[i] = static_cast<int64_t>(start + i);
      r.scores[i] = 0;
      loadValues(storage_, row(start + i), r.values.data() + i * dim_, dim_);
      exportSlots(slotsOf(start + i), r.slots, i);
    }
  });
  return r;
}

void StaticTable::importRows(const int64_t* keys, size_t n, const float* values, const float* const* slots,
                             const uint64_t*) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  checkKeys(keys, n, "keys");
  forEachInRowOrder(keys, n, [&](size_t i) {
    const size_t r = static_cast<size_t>(keys[i]);
    storeValues(storage_, values + i * dim_, row(r), dim_);
    importSlots(slotsOf(r), slots, i);
  });
}

void StaticTable::lookupCombinedInto(const BagInput& bag, Combiner combiner, double maxNorm, bool, float* out) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  if (bag.keys32) checkKeys(bag.keys32, bag.n, "ids");
  else checkKeys(bag.keys, bag.n, "ids");
  forEachBagRange(bag, [&](size_t rb, size_t re) {
    std::vector<double> acc(dim_);
    std::vector<const void*> rows;
    forEachBagSpan(bag, rb, re, 4096, [&](size_t r0, size_t r1) {
      const size_t eb = static_cast<size_t>(bag.rowSplits[r0]);
      const size_t ee = static_cast<size_t>(bag.rowSplits[r1]);
      rows.resize(ee - eb);
      if (bag.keys32) {
        for (size_t j = eb; j < ee; ++j) rows[j - eb] = row(static_cast<uint32_t>(bag.keys32[j]));
      } else {
        for (size_t j = eb; j < ee; ++j) rows[j - eb] = row(static_cast<size_t>(bag.keys[j]));
      }
      combineBagRows(
          {bag.rowSplits, r0, r1, rows.data(), eb, bag.weights, combiner, maxNorm, dim_, out, acc.data(), storage_});
    });
  });
}

void StaticTable::applyGradients(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) {
  applyGradientSums(keys, n, ArrayGradientSums(grads, dim_), opt);
}

void StaticTable::applyGradientSums(const int64_t* keys, size_t n, const GradientSums& sums, const OptimizerParams& opt) {
  checkOptimizer(opt);
  ScratchRelease release(n);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  checkKeys(keys, n, "keys");
  BatchDedupe d;
  d.build(keys, n);
  d.buildOccurrenceLists();
  const uint32_t* occ = d.occurrenceList();
  forEachRange(
      d.uniqueCount(),
      [&](size_t b, size_t e) {
        std::vector<float> sum(dim_);
        std::vector<double> scratch(dim_);
        std::vector<float> wide(storage_ == StorageDtype::kFloat32 ? 0 : dim_);
        for (size_t u = b; u < e; ++u) {
          if (u + 4 < e) {
            const char* p = record(static_cast<size_t>(d.key(u + 4)));
            for (size_t off = 0; off < rowBytes_; off += 64) __builtin_prefetch(p + off);
          }
          const size_t r = static_cast<size_t>(d.key(u));
          const uint32_t* o = occ + d.occurrencesBegin(u);
          if (wide.empty()) {
            sums.update(opt, static_cast<float*>(row(r)), slotsOf(r), o, d.count(u), dim_, sum.data(), scratch.data());
          } else {
            loadValues(storage_, row(r), wide.data(), dim_);
            sums.update(opt, wide.data(), slotsOf(r), o, d.count(u), dim_, sum.data(), scratch.data());
            storeValues(storage_, wide.data(), row(r), dim_);
          }
        }
      },
      256);
}

size_t StaticTable::restrict(size_t) {
  checkAlive();
  return 0;
}

void StaticTable::setEpoch(uint32_t) {
  checkAlive();
}

}  // namespace embedstack
