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
  const ScorePolicy policy = config_.scorePolicy;
  const bool touch = scoresOnRead(policy);
  const size_t bytes = dim_ * storageBytes(storage_);
  const bool stream = n * dim_ * sizeof(float) >= kStreamingBytes;
  forEachRange(n, [&](size_t b, size_t e) {
    probe(keys, b, e, bytes, touch, [&](size_t i, uint32_t row) {
      float* dst = out + i * dim_;
      if (row != KeyIndex::kNoRow) {
        readValues(row, dst, stream);
        exists[i] = 1;
        if (touch) touchOnReadAtomic(scoreOf(row), policy, t);
      } else {
        initialValue(keys[i], dst);
        exists[i] = 0;
      }
    });
    if (stream) streamFence();
  });
}

bool DynamicTable::withRows(const int64_t* keys, size_t n, const std::function<void(const float* const* rows)>& fn) {
  if (!wide()) return false;
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const ScoreClock t = beginCall();
  const ScorePolicy policy = config_.scorePolicy;
  const bool touch = scoresOnRead(policy);
  std::vector<const float*> rows(n);
  std::vector<size_t> missing;
  // Only the key/score lines are prefetched here: the reader prefetches the values it pools.
  probe(keys, 0, n, 0, touch, [&](size_t i, uint32_t row) {
    if (row != KeyIndex::kNoRow) {
      rows[i] = static_cast<const float*>(valuesOf(row));
      if (touch) touchOnReadAtomic(scoreOf(row), policy, t);
    } else {
      missing.push_back(i);
    }
  });
  std::vector<float> initial(missing.size() * dim_);
  for (size_t k = 0; k < missing.size(); ++k) {
    initialValue(keys[missing[k]], initial.data() + k * dim_);
    rows[missing[k]] = initial.data() + k * dim_;
  }
  fn(rows.data());
  return true;
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
      probe(bag.keys, eb, ee, 0, touch, [&](size_t i, uint32_t row) {
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
