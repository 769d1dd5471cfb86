// Dynamic table read path: find and lookupCombined without insertMissing, under
// the shared lock. Large batches are split over the thread pool; each chunk runs
// the prefetching probe pipeline. Read-policy scores are updated with relaxed
// atomics (see scores.h). Missing keys read their initial value; nothing is inserted.
#include <mutex>

#include "dynamic_table.h"
#include "stream_copy.h"
#include "thread_pool.h"

namespace embedstack {

void DynamicTable::findInto(const int64_t* keys, size_t n, float* out, uint8_t* exists) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const ScoreClock t = beginCall();
  // The stored values' lines (a float32 dim-64 row: 4), prefetched with the candidate's meta line.
  const size_t lines = (dim_ * storageBytes(storage_) + 63) / 64;
  switch (lines) {
    case 1:
      return findRows(keys, n, out, exists, t, RowLines<1>{});
    case 2:
      return findRows(keys, n, out, exists, t, RowLines<2>{});
    case 4:
      return findRows(keys, n, out, exists, t, RowLines<4>{});
    case 8:
      return findRows(keys, n, out, exists, t, RowLines<8>{});
    default:
      return findRows(keys, n, out, exists, t, RowLines<0>{lines});
  }
}

template <class Prefetch>
void DynamicTable::findRows(const int64_t* keys, size_t n, float* out, uint8_t* exists, const ScoreClock& clock,
                            Prefetch prefetch) const {
  const ScorePolicy callPolicy = config_.scorePolicy;
  const bool callStream = n * dim_ * sizeof(float) >= kStreamingBytes;
  forEachRange(n, [&](size_t b, size_t e) {
    // Everything the per-key body reads, as locals of this range: members and captured
    // references would be reloaded after every row copy (it may write any memory, as far as
    // the compiler knows). Measured: 4-8% of a dim-64 find (README "Measured", Nov 28 2026).
    const ScoreClock t = clock;
    const ScorePolicy policy = callPolicy;
    const bool touch = scoresOnRead(policy);
    // lru / epochLru (the default): the call's score, worked out once.
    const bool clockScore = readScoreIsClock(policy);
    const uint64_t readScore = clockScore ? nextScore(policy, 0, 1, false, 0, t) : 0;
    const bool stream = callStream;
    const Prefetch prefetchRow = prefetch;
    const size_t dim = dim_;
    const StorageDtype storage = storage_;
    const char* const records = arena();
    const size_t stride = rowBytes();
    RowMeta* const rowMeta = meta();
    probe(keys, b, e, touch, prefetchRow, [&](size_t i, uint32_t row) {
      float* dst = out + i * dim;
      if (row != KeyIndex::kNoRow) {
        readRecordValues(storage, records + static_cast<size_t>(row) * stride, dst, dim, stream);
        exists[i] = 1;
        if (clockScore) {
          storeReadScore(&rowMeta[row].score, readScore);
        } else if (touch) {
          touchOnReadAtomic(&rowMeta[row].score, policy, t);
        }
      } else {
        initialValue(keys[i], dst);
        exists[i] = 0;
      }
    });
    if (stream) streamFence();
  });
}

/** Shared lock and one call's clock; lend probes a batch and touches what it finds. */
class DynamicTable::Lease final : public RowLease {
 public:
  explicit Lease(DynamicTable& t) : t_(t), lock_(t.mutex_) {
    t.checkAlive();
    clock_ = t.beginCall();
    policy_ = t.config_.scorePolicy;
    touch_ = scoresOnRead(policy_);
  }

  void lend(const int64_t* keys, size_t n, const float** rows, std::vector<float>& initial) override {
    std::vector<size_t> missing;
    // Only the key/score lines are prefetched here: the reader prefetches the values it pools.
    t_.probe(keys, 0, n, touch_, NoRowPrefetch{}, [&](size_t i, uint32_t row) {
      if (row != KeyIndex::kNoRow) {
        rows[i] = static_cast<const float*>(t_.valuesOf(row));
        if (touch_) touchOnReadAtomic(t_.scoreOf(row), policy_, clock_);
      } else {
        missing.push_back(i);
      }
    });
    const size_t dim = t_.dim_;
    initial.resize(missing.size() * dim);
    for (size_t k = 0; k < missing.size(); ++k) {
      t_.initialValue(keys[missing[k]], initial.data() + k * dim);
      rows[missing[k]] = initial.data() + k * dim;
    }
  }

 private:
  DynamicTable& t_;
  std::shared_lock<std::shared_mutex> lock_;
  ScoreClock clock_;
  ScorePolicy policy_;
  bool touch_;
};

std::unique_ptr<RowLease> DynamicTable::leaseRows() {
  if (!wide()) return nullptr;
  return std::make_unique<Lease>(*this);
}

namespace {

// Entry rows of one span of a bag, plus the initial values of its missing keys
// (stored as the table stores values, so every row of the span has one type).
struct SpanRows {
  std::vector<const void*> rows;
  std::vector<size_t> missing;  // entries whose key is absent (or refused)
  std::vector<float> initial;   // [missing * dim] (float32: 4 bytes per value is room for any storage type)

  void fillMissing(const BagInput& bag, size_t eb, size_t dim, const Initializer& init, StorageDtype storage) {
    if (missing.empty()) return;
    initial.resize(missing.size() * dim);
    std::vector<float> wide(dim);
    const size_t stride = dim * storageBytes(storage);
    char* base = reinterpret_cast<char*>(initial.data());
    for (size_t k = 0; k < missing.size(); ++k) {
      init.fill(bag.keys[missing[k]], 0, dim, wide.data());
      storeValues(storage, wide.data(), base + k * stride, dim);
      rows[missing[k] - eb] = base + k * stride;
    }
    missing.clear();
  }
};

constexpr size_t kBagSpanEntries = 2048;

}  // namespace

void DynamicTable::lookupCombinedInto(const BagInput& bag, Combiner combiner, double maxNorm, bool insertMissing,
                                      float* out) {
  if (insertMissing) {
    // Exactly findOrInsert on the bag's keys, then the reduction over their rows.
    ScratchRelease release(bag.n);
    std::unique_lock<std::shared_mutex> lock(mutex_);
    checkAlive();
    WriteBatch wb;
    findOrInsertLocked(wb, bag.keys, bag.n, nullptr);
    forEachBagRange(bag, [&](size_t rb, size_t re) {
      std::vector<double> acc(dim_);
      SpanRows span;
      forEachBagSpan(bag, rb, re, kBagSpanEntries, [&](size_t r0, size_t r1) {
        const size_t eb = static_cast<size_t>(bag.rowSplits[r0]);
        const size_t ee = static_cast<size_t>(bag.rowSplits[r1]);
        span.rows.resize(ee - eb);
        for (size_t j = eb; j < ee; ++j) {
          const uint32_t row = wb.rows[wb.dedupe.uniqueOf(j)];
          if (row != KeyIndex::kNoRow) {
            span.rows[j - eb] = valuesOf(row);
          } else {
            span.missing.push_back(j);  // refused by a full table: its initial value
          }
        }
        span.fillMissing(bag, eb, dim_, config_.initializer, storage_);
        combineBagRows({bag.rowSplits, r0, r1, span.rows.data(), eb, bag.weights, combiner, maxNorm, dim_, out,
                        acc.data(), storage_});
      });
    });
    return;
  }

  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const ScoreClock t = beginCall();
  const ScorePolicy policy = config_.scorePolicy;
  const bool touch = scoresOnRead(policy);
  forEachBagRange(bag, [&](size_t rb, size_t re) {
    std::vector<double> acc(dim_);
    SpanRows span;
    forEachBagSpan(bag, rb, re, kBagSpanEntries, [&](size_t r0, size_t r1) {
      const size_t eb = static_cast<size_t>(bag.rowSplits[r0]);
      const size_t ee = static_cast<size_t>(bag.rowSplits[r1]);
      span.rows.resize(ee - eb);
      // The probe prefetches index and meta lines only: the rows are read after the whole
      // span is probed, by combineBagRows, which prefetches about 6 KiB of rows ahead. Prefetching
      // them here too (a span's rows are ~512 KiB at dim 64) measured 12-15% slower.
      probe(bag.keys, eb, ee, touch, NoRowPrefetch{}, [&](size_t i, uint32_t row) {
        if (row != KeyIndex::kNoRow) {
          span.rows[i - eb] = valuesOf(row);
          if (touch) touchOnReadAtomic(scoreOf(row), policy, t);
        } else {
          span.missing.push_back(i);
        }
      });
      span.fillMissing(bag, eb, dim_, config_.initializer, storage_);
      combineBagRows({bag.rowSplits, r0, r1, span.rows.data(), eb, bag.weights, combiner, maxNorm, dim_, out,
                      acc.data(), storage_});
    });
  });
}

}  // namespace embedstack
