// Dynamic table write path, under the exclusive lock. Every write call:
//   1. advances the clock, dedupes its keys (in order of first appearance) and
//      looks each distinct key up once;
//   2. admits its new keys: when the cap is reached, the eviction rule selects
//      (radix selection over the untouched residents and the new keys) which rows
//      to evict and which new keys to refuse; all memory is reserved first;
//   3. applies the op per distinct key (the last occurrence wins for
//      upsert / assign / importRows; accum walks the occurrences in order;
//      applyGradients sums them in order, in float);
//   4. scores every distinct key resident at the end (nextScore with its count).
// Every allocation a call makes (its staged inputs included: on a device they are
// copies in HBM, the largest allocations of the call) comes before its first change,
// so a call that runs out of memory fails with the table as it was.
#include <mutex>
#include <shared_mutex>

#include "dynamic_table.h"
#include "table_kernels.cuh"

namespace embedstack {
namespace cuda {

void DynamicTable::startWrite(Write& w, const int64_t* keys, size_t n, const uint64_t* scores,
                              bool occurrenceLists) {
  w.d = dedupe(w.st, keys, n, occurrenceLists);
  w.given = scores;
  w.rowOf = w.st.scratch<uint32_t>(w.d.unique, "rows of the keys");
  w.present = w.st.scratch<uint8_t>(w.d.unique, "presence flags");
  const ScoreView none{};
  launchGroups<LookupRows>(*ex_, w.d.unique, {index(), meta_.data(), w.d.uniqueKeys, w.rowOf, none, 0});
  // Counted by endWrite(), once the call can no longer fail for lack of memory.
  w.clock = peekCall();
}

void DynamicTable::admit(Write& w, const uint8_t* wants, bool explicitScores, bool fill) {
  Stage& st = w.st;
  const size_t u = w.d.unique;
  uint8_t* fresh = st.scratch<uint8_t>(u, "new-key flags");
  launchThreads<FreshFlags>(*ex_, u, {w.rowOf, wants, fresh, w.present});
  uint32_t* freshList = st.scratch<uint32_t>(u, "new keys");
  const size_t f = compactIndices(st, fresh, u, freshList);
  if (f == 0) return;
  const uint32_t* admitted = freshList;
  size_t a = f;
  int64_t* newKeys = st.scratch<int64_t>(f, "new keys");  // before the evictions below change the table
  if (f > cap_ - size_) {
    // Eviction: keep, among the residents this call does not touch and the new keys,
    // the cap - touched best (scores.ts); losing residents go, losing new keys are refused.
    uint8_t* touched = st.scratch<uint8_t>(size_, "touched rows");
    ex_->zero(touched, size_);
    uint32_t* presentList = st.scratch<uint32_t>(u, "present keys");
    const size_t p = compactIndices(st, w.present, u, presentList);
    uint32_t* presentRows = st.scratch<uint32_t>(p, "present rows");
    launchThreads<Gather<uint32_t>>(*ex_, p, {presentList, w.rowOf, presentRows});
    launchThreads<MarkListed>(*ex_, p, {presentRows, touched, 1});
    uint8_t* untouched = st.scratch<uint8_t>(size_, "untouched rows");
    launchThreads<RowFlags>(*ex_, size_, {nullptr, touched, untouched});
    uint32_t* residents = st.scratch<uint32_t>(size_, "eviction candidates");
    const size_t r = compactIndices(st, untouched, size_, residents);
    SelectCandidate* c = st.scratch<SelectCandidate>(r + f, "eviction candidates");
    launchThreads<BuildCandidates>(*ex_, r + f,
                                   {meta_.data(), residents, static_cast<uint32_t>(r), freshList, w.d.uniqueKeys,
                                    w.d.countOf, w.d.lastOf, w.given, static_cast<uint8_t>(explicitScores),
                                    scoreView(w.clock), c});
    uint8_t* state = st.scratch<uint8_t>(r + f, "eviction decisions");
    selectKeep(st, c, r + f, cap_ - p, state);
    uint8_t* evict = st.scratch<uint8_t>(size_, "evicted rows");
    uint8_t* keep = st.scratch<uint8_t>(u, "admitted keys");
    ex_->zero(evict, size_);
    ex_->zero(keep, u);
    launchThreads<SplitDecisions>(*ex_, r + f, {c, state, evict, keep});
    uint32_t* evictList = st.scratch<uint32_t>(size_, "evicted rows");
    const size_t e = compactIndices(st, evict, size_, evictList);
    uint32_t* keptList = st.scratch<uint32_t>(u, "admitted keys");
    a = compactIndices(st, keep, u, keptList);
    admitted = keptList;
    const Removal evictions = planRemoval(st, evictList, e);
    reserve(size_ - e + a, size_ - e + a);
    // From here on nothing allocates.
    removeRows(evictions);
    // Evictions moved rows: look the present keys up again.
    const ScoreView none{};
    launchGroups<LookupRows>(*ex_, u, {index(), meta_.data(), w.d.uniqueKeys, w.rowOf, none, 0});
  } else {
    reserve(size_ + f, size_ + f);
  }
  if (a == 0) return;
  const uint32_t base = static_cast<uint32_t>(size_);
  launchThreads<AssignRows>(*ex_, a, {admitted, w.d.uniqueKeys, w.rowOf, newKeys, base});
  launchGroups<InitRows>(*ex_, a,
                         {meta_.data(), store_.view(), initView(), slotTemplateDevice_.data(), newKeys, nullptr, base,
                          static_cast<uint8_t>(fill)});
  uint32_t* failed = overflow_.data() + buckets_;
  launchGroups<IndexInsert>(*ex_, a, {index(), newKeys, meta_.data(), nullptr, base, failed});
  size_ += a;
}

void DynamicTable::writeUniques(Write& w, const float* values, const float* const* slots, bool explicitScores,
                                bool resetSlots) {
  launchGroups<WriteUniques>(*ex_, w.d.unique,
                             {meta_.data(), store_.view(), w.rowOf, w.d.lastOf, w.d.countOf, values, slots,
                              slotWidths(), slotCount(), resetSlots ? slotTemplateDevice_.data() : nullptr, w.given,
                              static_cast<uint8_t>(explicitScores), scoreView(w.clock)});
}

void DynamicTable::findOrInsertLocked(Write& w, const int64_t* keys, size_t n, const uint64_t* scores) {
  startWrite(w, keys, n, scores, false);
  admit(w, nullptr, false, true);
  writeUniques(w, nullptr, nullptr, false, false);
  clock_.store(w.clock.clock, std::memory_order_relaxed);  // the callers' remaining steps allocate nothing
}

void DynamicTable::endWrite(Write& w) {
  clock_.store(w.clock.clock, std::memory_order_relaxed);
  w.st.finish();
}

void DynamicTable::upsert(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Write w(*ex_);
  const int64_t* k = w.st.in(keys, n, "keys");
  const uint64_t* s = w.st.in(scores, n, "scores");
  const float* v = w.st.in(values, n * config_.dim, "values");  // staged before admit() inserts
  startWrite(w, k, n, s, false);
  admit(w, nullptr, false, false);  // every admitted row gets its value below
  writeUniques(w, v, nullptr, false, false);
  endWrite(w);
}

void DynamicTable::assign(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Write w(*ex_);
  const int64_t* k = w.st.in(keys, n, "keys");
  const uint64_t* s = w.st.in(scores, n, "scores");
  const float* v = w.st.in(values, n * config_.dim, "values");
  startWrite(w, k, n, s, false);
  writeUniques(w, v, nullptr, false, false);
  endWrite(w);
}

void DynamicTable::accum(const int64_t* keys, size_t n, const float* deltas, const uint8_t* exists,
                         const uint64_t* scores) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Write w(*ex_);
  const int64_t* k = w.st.in(keys, n, "keys");
  const uint64_t* s = w.st.in(scores, n, "scores");
  const uint8_t* ex = w.st.in(exists, n, "exists flags");
  const float* d = w.st.in(deltas, n * config_.dim, "deltas");  // staged before admit() inserts
  startWrite(w, k, n, s, true);
  // A key can be inserted only by an occurrence with exists = 0.
  uint8_t* wants = w.st.scratch<uint8_t>(w.d.unique, "insert wishes");
  ex_->zero(wants, w.d.unique);
  launchThreads<WantsFromExists>(*ex_, n, {w.d.uniqueOf, ex, wants});
  admit(w, wants, false, false);
  launchGroups<AccumUniques>(*ex_, w.d.unique,
                             {meta_.data(), store_.view(), w.rowOf, w.present, w.d.occOffsets, w.d.occList, d, ex,
                              w.given, scoreView(w.clock)});
  endWrite(w);
}

void DynamicTable::importRows(const int64_t* keys, size_t n, const float* values, const float* const* slots,
                              const uint64_t* scores) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const bool explicitScores = scores != nullptr;
  Write w(*ex_);
  const int64_t* k = w.st.in(keys, n, "keys");
  const uint64_t* s = w.st.in(scores, n, "scores");
  const float* v = w.st.in(values, n * config_.dim, "values");  // staged before admit() inserts
  const float* const* sl = importSlotsFrom(w.st, slots, n);
  startWrite(w, k, n, s, false);
  admit(w, nullptr, explicitScores, false);
  writeUniques(w, v, sl, explicitScores, true);
  endWrite(w);
}

void DynamicTable::trainLocked(Write& w, const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt,
                               bool readFirst) {
  startWrite(w, keys, n, nullptr, true);
  const ScoreClock read = w.clock;  // a find first counts a clock of its own, the step the next
  if (readFirst) ++w.clock.clock;
  admit(w, nullptr, false, true);
  // Nothing below can fail: the read's scores now (the rows present before the call are
  // exactly those the find found, under this same lock), then the step's on top of them.
  if (readFirst && scoresOnRead(config_.scorePolicy)) {
    launchThreads<TouchReadUniques>(*ex_, w.d.unique, {meta_.data(), w.rowOf, w.present, w.d.countOf, scoreView(read)});
  }
  launchGroups<ApplyOptimizer>(*ex_, w.d.unique,
                               {meta_.data(), store_.view(), w.rowOf, w.d.occOffsets, w.d.occList, grads, opt,
                                scoreView(w.clock)});
  endWrite(w);
}

void DynamicTable::trainRows(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) {
  checkOptimizer(opt);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Write w(*ex_);
  trainLocked(w, keys, n, grads, opt, false);
}

void DynamicTable::readThenTrain(const int64_t* keys, size_t n, float* rows, uint8_t* exists,
                                 const std::function<void()>& gradients, const float* grads,
                                 const OptimizerParams& opt) {
  checkOptimizer(opt);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Write w(*ex_);
  // The find, unscored (trainLocked scores it once the step cannot fail); it changes nothing.
  const ScoreView unscored{config_.scorePolicy, ScoreClock{}, 0};
  launchGroups<FindRows>(*ex_, n, {index(), meta_.data(), store_.view(), initView(), unscored, keys, rows, exists});
  gradients();
  trainLocked(w, keys, n, grads, opt, true);
}

void DynamicTable::applyGradients(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) {
  checkOptimizer(opt);
  Stage st(*ex_);
  trainRows(st.in(keys, n, "keys"), n, st.in(grads, n * config_.dim, "gradients"), opt);
  st.finish();
}

}  // namespace cuda
}  // namespace embedstack
