// Dynamic table write path, under the exclusive lock. Every write call:
//   1. advances the clock, dedupes its keys and probes each distinct key once;
//   2. admits its new keys (the eviction rule when the cap is reached, see
//      dynamic_admit.cc), reserving all memory before the first change: everything after
//      reserve() allocates nothing (the narrow rows' buffer is sized in startWrite, a step's
//      per-thread row buffers before admit(), the pool's jobs live on the caller's stack),
//      so a write rejected for memory changes nothing;
//   3. applies the op (the last occurrence of a key wins for upsert/assign/import;
//      accum runs in order; applyGradients sums duplicates in order, in float);
//   4. scores every distinct key resident at the end (nextScore with its count).
// Per-unique work (value copies, optimizer updates, scores) runs on the thread pool.
#include <algorithm>
#include <mutex>
#include <thread>

#include "column_blocks.h"
#include "dynamic_table.h"
#include "stream_copy.h"
#include "thread_pool.h"

namespace embedstack {

namespace {

/**
 * Stores true to a flag when it goes out of scope, however the scope ends (a throw too), so that
 * the threads waiting on it go on.
 */
class SetOnExit {
 public:
  explicit SetOnExit(std::atomic<bool>& flag) : flag_(flag) {}
  ~SetOnExit() { flag_.store(true, std::memory_order_release); }
  SetOnExit(const SetOnExit&) = delete;
  SetOnExit& operator=(const SetOnExit&) = delete;

 private:
  std::atomic<bool>& flag_;
};

}  // namespace

// startWrite's dedupe and probe of a batch that splits: the probe starts while the dedupe runs.
// Item 0 of one parallelFor builds the dedupe, publishing its uniques as it finds them
// (BatchDedupe::build); the pool's other threads probe the published uniques in ranges meanwhile,
// and the builder joins them once it ends. The same rows as a probe after the dedupe: each unique is
// probed once, by one thread. rows / present have room for every key distinct (sized first),
// then are cut to the uniques.
void DynamicTable::dedupeAndProbe(WriteBatch& wb, const int64_t* keys, size_t n, RangeFn probeRange) {
  wb.rows.assign(n, KeyIndex::kNoRow);
  wb.present.assign(n, 0);
  std::atomic<size_t> published{0};
  std::atomic<size_t> claimed{0};
  std::atomic<bool> built{false};
  constexpr size_t kRange = BatchDedupe::kPublishEvery;
  ThreadPool& pool = ThreadPool::shared();
  pool.parallelFor(pool.threads(), 1, [&](size_t b, size_t e) {
    for (size_t item = b; item < e; ++item) {
      if (item == 0) {
        const SetOnExit ends(built);  // however the build ends, so that the probing threads stop
        wb.dedupe.build(keys, n, &published);
      }
      // then (item 0 too, once built) probe ranges until every unique is claimed
      for (;;) {
        const bool last = built.load(std::memory_order_acquire);
        const size_t ready = published.load(std::memory_order_acquire);
        size_t from = claimed.load(std::memory_order_relaxed);
        if (from < ready && (ready - from >= kRange || last)) {
          const size_t to = ready - from > kRange ? from + kRange : ready;
          if (claimed.compare_exchange_weak(from, to, std::memory_order_relaxed)) probeRange(from, to);
          continue;
        }
        if (last) break;  // every unique claimed (a build that threw published no more)
        std::this_thread::yield();
      }
    }
  });
  const size_t u = wb.dedupe.uniqueCount();
  wb.rows.resize(u);
  wb.present.resize(u);
}

void DynamicTable::startWrite(WriteBatch& wb, const int64_t* keys, size_t n, const uint64_t* scores,
                              bool explicitScores, bool readsFirst) {
  // float16 / bfloat16 storage: the buffer insertRow and accum widen a row into (this thread's),
  // sized now, so that they allocate nothing once rows change; and the pool (created on first
  // use) made now when a later loop over the call's n entries splits (rev39 FX7).
  if (!wide()) rowScratch(dim_);
  if (n >= kParallelThreshold) ThreadPool::shared();
  const auto probeRange = [&](size_t b, size_t e) {
    probe(wb.dedupe.keys(), b, e, false, NoRowPrefetch{}, [&](size_t j, uint32_t row) {
      wb.rows[j] = row;
      wb.present[j] = row != KeyIndex::kNoRow;
    });
  };
  wb.scores = scores;
  if (n >= kParallelThreshold && ThreadPool::shared().threads() >= 2) {
    dedupeAndProbe(wb, keys, n, probeRange);
  } else {
    wb.dedupe.build(keys, n);
    const size_t u = wb.dedupe.uniqueCount();
    wb.rows.assign(u, KeyIndex::kNoRow);
    wb.present.assign(u, 0);
    forEachRange(u, probeRange);
  }
  wb.refused.assign(wb.dedupe.uniqueCount(), 0);
  // The clock advances only once the call cannot fail for lack of scratch memory; a failure
  // before reserve() commits puts it back (~WriteBatch).
  wb.clockOf = &clock_;
  if (readsFirst) {
    wb.readClock = beginCall();
    wb.clocks = 1;
  }
  wb.clock = beginCall();
  if (readsFirst) wb.clock.epoch = wb.readClock.epoch;  // one epoch for both (planWiden checks it)
  ++wb.clocks;
  planWiden(wb, scores, n, explicitScores);
}

void DynamicTable::insertAdmitted(WriteBatch& wb, const ScratchVector<uint32_t>& admitted, bool fillValues) {
  for (size_t k = 0; k < admitted.size(); ++k) {
    if (k + 8 < admitted.size()) index_.prefetch(hashKey(wb.dedupe.key(admitted[k + 8])));
    const uint32_t u = admitted[k];
    wb.rows[u] = insertRow(wb.dedupe.key(u), fillValues);
  }
}

void DynamicTable::touchWritten(WriteBatch& wb, bool explicitScores) {
  forEachRange(wb.dedupe.uniqueCount(), [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) touchUnique(wb, u, explicitScores);
  });
}

void DynamicTable::findOrInsertLocked(WriteBatch& wb, const int64_t* keys, size_t n, const uint64_t* scores) {
  startWrite(wb, keys, n, scores);
  ScratchVector<uint32_t> admitted = admit(wb, nullptr, false);
  insertAdmitted(wb, admitted, true);
  touchWritten(wb, false);
}

void DynamicTable::findOrInsertInto(const int64_t* keys, size_t n, const uint64_t* scores, float* out,
                                    uint8_t* exists) {
  ScratchRelease release(n);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  WriteBatch wb;
  findOrInsertLocked(wb, keys, n, scores);
  const bool stream = n * dim_ * sizeof(float) >= kStreamingBytes;
  forEachRange(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      if (i + 8 < e) {
        uint32_t ahead = wb.rows[wb.dedupe.uniqueOf(i + 8)];
        if (ahead != KeyIndex::kNoRow) prefetchRow(ahead, valueBytes_);
      }
      const size_t u = wb.dedupe.uniqueOf(i);
      const uint32_t row = wb.rows[u];
      exists[i] = wb.present[u];
      if (row != KeyIndex::kNoRow) {
        readValues(row, out + i * dim_, stream);
      } else {
        initialValue(keys[i], out + i * dim_);
      }
    }
    if (stream) streamFence();
  });
}

void DynamicTable::writeLastValues(WriteBatch& wb, const float* values) {
  forEachRange(wb.dedupe.uniqueCount(), [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) {
      const uint32_t row = wb.rows[u];
      if (row == KeyIndex::kNoRow) continue;
      writeValues(row, values + wb.dedupe.lastOccurrence(u) * dim_);
      touchUnique(wb, u, false);
    }
  });
}

void DynamicTable::upsert(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) {
  ScratchRelease release(n);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  WriteBatch wb;
  startWrite(wb, keys, n, scores);
  ScratchVector<uint32_t> admitted = admit(wb, nullptr, false);
  insertAdmitted(wb, admitted, false);  // every admitted row gets its value below
  writeLastValues(wb, values);
}

void DynamicTable::assign(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) {
  ScratchRelease release(n);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  WriteBatch wb;
  startWrite(wb, keys, n, scores);
  reserve(wb, size_, 0);  // no new row: the records' widening only
  writeLastValues(wb, values);
}

void DynamicTable::accum(const int64_t* keys, size_t n, const float* deltas, const uint8_t* exists,
                         const uint64_t* scores) {
  ScratchRelease release(n);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  WriteBatch wb;
  startWrite(wb, keys, n, scores);
  // A key can be inserted only by an occurrence with exists = 0.
  ScratchVector<uint8_t> wants(wb.dedupe.uniqueCount(), 0);
  for (size_t i = 0; i < n; ++i) {
    if (!exists[i]) wants[wb.dedupe.uniqueOf(i)] = 1;
  }
  admit(wb, &wants, false);
  for (size_t i = 0; i < n; ++i) {
    const size_t u = wb.dedupe.uniqueOf(i);
    if (wb.refused[u]) continue;
    const float* d = deltas + i * dim_;
    uint32_t row = wb.rows[u];
    if (row != KeyIndex::kNoRow && exists[i]) {
      float* v = wide() ? static_cast<float*>(valuesOf(row)) : rowScratch(dim_);
      if (!wide()) loadValues(storage_, valuesOf(row), v, dim_);
      for (size_t c = 0; c < dim_; ++c) v[c] = v[c] + d[c];
      if (!wide()) writeValues(row, v);
    } else if (row == KeyIndex::kNoRow && !exists[i]) {
      row = insertRow(wb.dedupe.key(u), false);
      writeValues(row, d);
      wb.rows[u] = row;
    }
  }
  touchWritten(wb, false);
}

void DynamicTable::importRows(const int64_t* keys, size_t n, const float* values, const float* const* slots,
                              const uint64_t* scores) {
  ScratchRelease release(n);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const bool explicitScores = scores != nullptr;
  WriteBatch wb;
  startWrite(wb, keys, n, scores, explicitScores);
  ScratchVector<uint32_t> admitted = admit(wb, nullptr, explicitScores);
  insertAdmitted(wb, admitted, false);
  forEachRange(wb.dedupe.uniqueCount(), [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) {
      const uint32_t row = wb.rows[u];
      if (row == KeyIndex::kNoRow) continue;
      const size_t last = wb.dedupe.lastOccurrence(u);
      writeValues(row, values + last * dim_);
      importSlots(slotsOf(row), slots, last);
      touchUnique(wb, u, explicitScores);
    }
  });
}

namespace {

// n Ts, uninitialised, 64-byte aligned, from the scratch cache (scratchAllocate).
template <class T = float>
class ScratchLines {
 public:
  explicit ScratchLines(size_t n) : bytes_(n * sizeof(T) + 64), block_(scratchAllocate(bytes_)) {}
  ~ScratchLines() { scratchFree(block_, bytes_); }
  ScratchLines(const ScratchLines&) = delete;
  ScratchLines& operator=(const ScratchLines&) = delete;
  T* data() const { return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(block_) + 63) & ~uintptr_t{63}); }

 private:
  size_t bytes_;
  void* block_;
};

}  // namespace

// A step's row buffers for its per-key loop (train, updateFromSums): each thread's sum [dim]
// floats, scratch [dim] doubles and (float16 / bfloat16 storage) the widened row [dim] floats.
// One set per thread that can run a range of the loop at once (the pool's threads when the loop
// splits, else one), allocated before the call's first change, so the loop allocates nothing
// (it allocated three vectors per range after rows had changed). A range takes a free set for
// its keys and gives it back. Sets start on 64-byte boundaries (no line shared between threads).
class DynamicTable::StepBuffers {
 public:
  StepBuffers(size_t uniques, size_t dim, bool widens)
      : sets_(uniques >= kParallelThreshold ? ThreadPool::shared().threads() : 1),
        doubleStride_((dim + 7) & ~size_t{7}),
        floatStride_(((widens ? 2 * dim : dim) + 15) & ~size_t{15}),
        doubles_(sets_ * doubleStride_),
        floats_(sets_ * floatStride_),
        busy_(std::make_unique<std::atomic<bool>[]>(sets_)),
        dim_(dim) {}

  /** A set of buffers held by one range (RAII). */
  class Set {
   public:
    explicit Set(const StepBuffers& b) : b_(b), i_(b.claim()) {}
    ~Set() { b_.busy_[i_].store(false, std::memory_order_release); }
    Set(const Set&) = delete;
    Set& operator=(const Set&) = delete;
    float* sum() const { return b_.floats_.data() + i_ * b_.floatStride_; }
    float* widened() const { return sum() + b_.dim_; }
    double* scratch() const { return b_.doubles_.data() + i_ * b_.doubleStride_; }

   private:
    const StepBuffers& b_;
    size_t i_;
  };

 private:
  /** A free set (at most sets_ ranges run at once: one finds one on its first pass). */
  size_t claim() const {
    for (;;) {
      for (size_t i = 0; i < sets_; ++i) {
        if (!busy_[i].load(std::memory_order_relaxed) && !busy_[i].exchange(true, std::memory_order_acquire)) return i;
      }
      std::this_thread::yield();
    }
  }

  size_t sets_;
  size_t doubleStride_;
  size_t floatStride_;
  ScratchLines<double> doubles_;
  ScratchLines<float> floats_;
  std::unique_ptr<std::atomic<bool>[]> busy_;
  size_t dim_;
};

// applyGradients' sums in input order: for a gradient array (`array`, else null: never on;
// float32 or narrow storage: the sums are float32 either way) and a batch in which a quarter or
// more of the entries repeat a key, whose hot keys' gradient rows lie scattered over the whole
// array (the key-by-key loop reads them key by key), the keys of two or more occurrences are
// summed in one pass over the batch, front to back (sumRowsInOrder: each key's additions in the
// same order from 0, the same bits). It reads only the batch's dedupe and the gradients, so it
// runs while the pool's other threads update the keys of one occurrence (updateFromSums).
// prepare() allocates its scratch, before the call's first change.
class DynamicTable::InOrderSums final {
 public:
  InOrderSums(const ArrayGradientSums* array, size_t n, size_t dim) : array_(array), n_(n), dim_(dim) {}
  bool prepare(const BatchDedupe& d) {
    const size_t uniques = d.uniqueCount();
    if (array_ == nullptr || (n_ - uniques) * 4 < n_) return false;
    dedupe_ = &d;
    running_.resize(uniques);
    order_.resize(uniques);
    uint32_t multi = 0;
    for (size_t u = 0; u < uniques; ++u) running_[u] = d.count(u) > 1 ? multi++ : kNoRunningRow;
    // the keys of one occurrence first, then the others, each in order of first appearance
    singles_ = uniques - multi;
    size_t s = 0, m = singles_;
    for (size_t u = 0; u < uniques; ++u) order_[running_[u] == kNoRunningRow ? s++ : m++] = static_cast<uint32_t>(u);
    summed_ = std::make_unique<ScratchLines<>>(static_cast<size_t>(multi) * dim_);
    return true;
  }
  void run() {
    sumRowsInOrder(n_, dedupe_->uniqueIds(), running_.data(), dedupe_->firstOccurrences(), array_->grads(),
                   array_->rowIndex(), dim_, summed_->data());
  }
  bool on() const { return dedupe_ != nullptr; }
  size_t n() const { return n_; }
  const ArrayGradientSums* array() const { return array_; }
  const uint32_t* running() const { return running_.data(); }
  const float* summed() const { return summed_->data(); }
  /** The uniques, those of one occurrence first ([0, singles())), then those of two or more. */
  const uint32_t* order() const { return order_.data(); }
  size_t singles() const { return singles_; }
  size_t uniques() const { return order_.size(); }

 private:
  const ArrayGradientSums* array_;
  size_t n_;
  size_t dim_;
  const BatchDedupe* dedupe_ = nullptr;
  ScratchVector<uint32_t> running_;
  ScratchVector<uint32_t> order_;
  size_t singles_ = 0;
  std::unique_ptr<ScratchLines<>> summed_;
};

void DynamicTable::applyGradients(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) {
  applyGradientSums(keys, n, ArrayGradientSums(grads, dim_), opt);
}

void DynamicTable::applyGradientSums(const int64_t* keys, size_t n, const GradientSums& sums, const OptimizerParams& opt) {
  train(keys, n, sums, opt, nullptr);
}

void DynamicTable::applyGradientSumsAfterFind(const int64_t* keys, size_t n, float* rows, const GradientSums& sums,
                                              const OptimizerParams& opt) {
  train(keys, n, sums, opt, rows);
}

// findInto's part of applyGradientSumsAfterFind, once the step's memory is committed and before
// its new rows are inserted: each entry's row as it was (a key not resident: its initial value)
// and each resident key's read score at the read's clock, per occurrence as findInto touches it.
void DynamicTable::readBeforeStep(const WriteBatch& wb, const int64_t* keys, size_t n, float* rows) {
  forEachRange(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const uint32_t row = wb.rows[wb.dedupe.uniqueOf(i)];
      if (row != KeyIndex::kNoRow) {
        readValues(row, rows + i * dim_, false);
      } else {
        initialValue(keys[i], rows + i * dim_);
      }
    }
  });
  const ScorePolicy p = config_.scorePolicy;
  if (!scoresOnRead(p)) return;
  const MetaView m = meta();
  forEachRange(wb.dedupe.uniqueCount(), [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) {
      if (!wb.present[u]) continue;
      const uint32_t row = wb.rows[u];
      m.setScore(row, nextScore(p, m.score(row), wb.dedupe.count(u), false, 0, wb.readClock));
    }
  });
}

void DynamicTable::train(const int64_t* keys, size_t n, const GradientSums& sums, const OptimizerParams& opt,
                         float* rows) {
  checkOptimizer(opt);
  ScratchRelease release(n);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  WriteBatch wb;
  InOrderSums inOrder(rows == nullptr ? dynamic_cast<const ArrayGradientSums*>(&sums) : nullptr, n, dim_);
  startWrite(wb, keys, n, nullptr, false, rows != nullptr);
  if (!inOrder.prepare(wb.dedupe)) wb.dedupe.buildOccurrenceLists();
  // the update loop's, before any change (updateFromSums splits when the batch does)
  const StepBuffers buffers(inOrder.on() ? n : wb.dedupe.uniqueCount(), dim_, !wide());
  ScratchVector<uint32_t> admitted = admit(wb, nullptr, false);
  if (rows != nullptr) readBeforeStep(wb, keys, n, rows);
  insertAdmitted(wb, admitted, true);
  if (inOrder.on()) return updateFromSums(wb, inOrder, opt, buffers);
  const BatchDedupe& d = wb.dedupe;
  const uint32_t* occ = d.occurrenceList();
  forEachRange(
      d.uniqueCount(),
      [&](size_t b, size_t e) {
        const StepBuffers::Set set(buffers);
        float* const sum = set.sum();
        double* const scratch = set.scratch();
        for (size_t u = b; u < e; ++u) {
          if (u + 4 < e) {
            uint32_t ahead = wb.rows[u + 4];
            if (ahead != KeyIndex::kNoRow) {
              prefetchRow(ahead, rowBytes());
              meta().prefetch(NoRowPrefetch{}, ahead, true);
            }
            sums.prefetch(occ + d.occurrencesBegin(u + 4), d.count(u + 4));
          }
          const uint32_t row = wb.rows[u];
          if (row == KeyIndex::kNoRow) continue;
          const uint32_t* o = occ + d.occurrencesBegin(u);
          if (wide()) {
            sums.update(opt, static_cast<float*>(valuesOf(row)), slotsOf(row), o, d.count(u), dim_, sum, scratch);
          } else {
            float* const widened = set.widened();
            loadValues(storage_, valuesOf(row), widened, dim_);
            sums.update(opt, widened, slotsOf(row), o, d.count(u), dim_, sum, scratch);
            writeValues(row, widened);
          }
          touchUnique(wb, u, false);
        }
      },
      256);
}

// Every key updated as the key-by-key loop updates it (split by keys over the pool), from its
// sum (InOrderSums, `running[u]`'s row of `summed`) or, a key of one occurrence, from its own
// gradient row: the same bits. The keys of one occurrence need no sum, so the pool's other
// threads update them while the calling thread sums the others in input order (item 0 of one
// parallelFor; whoever is free takes what is left); then the keys of two or more occurrences.
void DynamicTable::updateFromSums(const WriteBatch& wb, InOrderSums& inOrder, const OptimizerParams& opt,
                                  const StepBuffers& buffers) {
  const ArrayGradientSums& sums = *inOrder.array();
  const uint32_t* first = wb.dedupe.firstOccurrences();
  const uint32_t* running = inOrder.running();
  const float* summed = inOrder.summed();
  const uint32_t* order = inOrder.order();
  // rows (values, slots, score) and a key of one occurrence's gradient row this many keys ahead
  constexpr size_t kAhead = 8;
  // order[b, e)'s keys
  const auto update = [&](size_t b, size_t e) {
    const StepBuffers::Set set(buffers);
    float* const sum = set.sum();
    double* const scratch = set.scratch();
    for (size_t k = b; k < e; ++k) {
      if (k + kAhead < e) {
        const uint32_t a = order[k + kAhead];
        const uint32_t ahead = wb.rows[a];
        if (ahead != KeyIndex::kNoRow) {
          prefetchRow(ahead, rowBytes());
          meta().prefetch(NoRowPrefetch{}, ahead, true);
          if (running[a] == kNoRunningRow) {
            sums.prefetch(first + a, 1);
          } else {
            ::embedstack::prefetchRow(summed + static_cast<size_t>(running[a]) * dim_, dim_ * sizeof(float));
          }
        }
      }
      const uint32_t u = order[k];
      const uint32_t row = wb.rows[u];
      if (row == KeyIndex::kNoRow) continue;
      // float16 / bfloat16 storage: the row widened, updated, narrowed back (the key-by-key loop's steps)
      float* w = wide() ? static_cast<float*>(valuesOf(row)) : set.widened();
      if (!wide()) loadValues(storage_, valuesOf(row), w, dim_);
      if (running[u] == kNoRunningRow) {
        sums.update(opt, w, slotsOf(row), first + u, 1, dim_, sum, scratch);
      } else {
        applyOptimizerRow(opt, w, slotsOf(row), summed + static_cast<size_t>(running[u]) * dim_, dim_, scratch);
      }
      if (!wide()) writeValues(row, w);
      touchUnique(wb, u, false);
    }
  };
  const size_t singles = inOrder.singles();
  const size_t multi = inOrder.uniques() - singles;
  if (inOrder.n() < kParallelThreshold || ThreadPool::shared().threads() < 2) {
    inOrder.run();
    update(0, singles + multi);
    return;
  }
  // Items: 0 the sums; then the keys of one occurrence in ranges; then those of two or more, whose
  // ranges wait for the sums (claimed after every earlier item, so item 0 runs by then). Small
  // ranges: the caller comes to them late (after the sums), and the threads end together.
  const size_t threads = ThreadPool::shared().threads();
  const size_t oneGrain = std::max<size_t>(256, singles / (16 * threads) + 1);
  const size_t oneRanges = (singles + oneGrain - 1) / oneGrain;
  const size_t multiGrain = std::max<size_t>(64, multi / (16 * threads) + 1);
  const size_t multiRanges = (multi + multiGrain - 1) / multiGrain;
  std::atomic<bool> summedAll{false};
  ThreadPool::shared().parallelFor(1 + oneRanges + multiRanges, 1, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      if (r == 0) {
        const SetOnExit ends(summedAll);
        inOrder.run();
      } else if (r <= oneRanges) {
        const size_t from = (r - 1) * oneGrain;
        update(from, std::min(from + oneGrain, singles));
      } else {
        while (!summedAll.load(std::memory_order_acquire)) std::this_thread::yield();
        const size_t from = (r - 1 - oneRanges) * multiGrain;
        update(singles + from, singles + std::min(from + multiGrain, multi));
      }
    }
  });
}

}  // namespace embedstack
