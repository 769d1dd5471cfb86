// Dynamic table read path: find and lookupCombined without insertMissing, under
// the shared lock. Large batches are split over the thread pool; each chunk runs
// the prefetching probe pipeline. Read-policy scores are updated with relaxed
// atomics (see scores.h). Missing keys read their initial value; nothing is inserted.
#include <mutex>

#include "dynamic_table.h"
#include "thread_pool.h"

namespace embedstack {

void DynamicTable::findInto(const int64_t* keys, size_t n, float* out, uint8_t* exists) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const ScoreClock t = beginCall();
  const ScorePolicy policy = config_.scorePolicy;
  const bool touch = scoresOnRead(policy);
  const size_t bytes = 16 + dim_ * sizeof(float);
  forEachRange(n, [&](size_t b, size_t e) {
    probe(keys, b, e, bytes, [&](size_t i, uint32_t row) {
      float* dst = out + i * dim_;
      if (row != KeyIndex::kNoRow) {
        std::memcpy(dst, valuesOf(row), dim_ * sizeof(float));
        exists[i] = 1;
        if (touch) touchOnReadAtomic(scoreOf(row), policy, t);
      } else {
        config_.initializer.fill(keys[i], 0, dim_, dst);
        exists[i] = 0;
      }
    });
  });
}

void DynamicTable::lookupCombinedInto(const BagInput& bag, Combiner combiner, double maxNorm, bool insertMissing,
                                      float* out) {
  if (insertMissing) {
    // Exactly findOrInsert on the bag's keys, then the reduction over their rows.
    std::unique_lock<std::shared_mutex> lock(mutex_);
    checkAlive();
    WriteBatch wb;
    findOrInsertLocked(wb, bag.keys, bag.n, nullptr);
    const BatchDedupe& d = wb.dedupe;
    forEachBagRange(bag, [&](size_t rb, size_t re) {
      std::vector<double> acc(dim_);
      std::vector<float> tmp(dim_);
      RowCombiner rc(combiner, maxNorm, dim_, acc.data());
      for (size_t r = rb; r < re; ++r) {
        rc.begin();
        for (int32_t j = bag.rowSplits[r]; j < bag.rowSplits[r + 1]; ++j) {
          if (static_cast<size_t>(j) + 8 < bag.n) {
            uint32_t ahead = wb.rows[d.uniqueOf(static_cast<size_t>(j) + 8)];
            if (ahead != KeyIndex::kNoRow) __builtin_prefetch(valuesOf(ahead));
          }
          const uint32_t row = wb.rows[d.uniqueOf(static_cast<size_t>(j))];
          const float* e = tmp.data();
          if (row != KeyIndex::kNoRow) {
            e = valuesOf(row);
          } else {
            config_.initializer.fill(bag.keys[j], 0, dim_, tmp.data());
          }
          rc.add(e, bag.weights ? static_cast<double>(bag.weights[j]) : 1.0);
        }
        rc.finish(out + r * dim_);
      }
    });
    return;
  }

  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const ScoreClock t = beginCall();
  const ScorePolicy policy = config_.scorePolicy;
  const bool touch = scoresOnRead(policy);
  const size_t bytes = 16 + dim_ * sizeof(float);
  auto work = [&](size_t rb, size_t re) {
    std::vector<double> acc(dim_);
    std::vector<float> tmp(dim_);
    RowCombiner rc(combiner, maxNorm, dim_, acc.data());
    size_t r = rb;
    rc.begin();
    probe(bag.keys, static_cast<size_t>(bag.rowSplits[rb]), static_cast<size_t>(bag.rowSplits[re]), bytes,
          [&](size_t i, uint32_t row) {
            while (static_cast<size_t>(bag.rowSplits[r + 1]) <= i) {
              rc.finish(out + r * dim_);
              ++r;
              rc.begin();
            }
            const float* e;
            if (row != KeyIndex::kNoRow) {
              e = valuesOf(row);
              if (touch) touchOnReadAtomic(scoreOf(row), policy, t);
            } else {
              config_.initializer.fill(bag.keys[i], 0, dim_, tmp.data());
              e = tmp.data();
            }
            rc.add(e, bag.weights ? static_cast<double>(bag.weights[i]) : 1.0);
          });
    for (; r < re; ++r) {
      rc.finish(out + r * dim_);
      rc.begin();
    }
  };
  forEachBagRange(bag, work);
}

}  // namespace embedstack
