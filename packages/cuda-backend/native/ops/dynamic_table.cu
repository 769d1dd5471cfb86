// Dynamic table: construction, the index and row store growth, the read path
// (find, lookupCombined without inserts, export) and the removals (remove,
// restrict, clear, compaction). The write path is dynamic_write.cu.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <shared_mutex>

#include "bag_ops.h"
#include "dynamic_table.h"
#include "table_kernels.cuh"

namespace embedstack {
namespace cuda {

namespace {
size_t bucketsFor(size_t rows) {
  size_t b = 1;
  while (b * (kBucketSlots / 2) < rows) b *= 2;
  return b;
}
}  // namespace

DynamicTable::DynamicTable(TableConfig config, std::shared_ptr<Exec> ex, const Placement& placement)
    : DeviceTable(std::move(config), std::move(ex), placement) {
  capped_ = config_.maxCapacity <= kMaxRows;
  cap_ = capped_ ? config_.maxCapacity : kMaxRows;
  const size_t initial = std::min(std::max<size_t>(config_.initCapacity, 1), cap_);
  reserve(initial, std::min<size_t>(initial, size_t{1} << 26));
  ex_->sync();
}

IndexView DynamicTable::index() const {
  return {slotRow_.data(), digests_.data(), occupied_.data(), overflow_.data(), static_cast<uint64_t>(buckets_ - 1)};
}

ScoreView DynamicTable::scoreView(const ScoreClock& t) const {
  return {config_.scorePolicy, t, static_cast<uint8_t>(scoresOnRead(config_.scorePolicy) ? 1 : 0)};
}

ScoreClock DynamicTable::beginCall() {
  ScoreClock t;
  t.clock = clock_.fetch_add(1, std::memory_order_relaxed) + 1;
  t.epoch = epoch_.load(std::memory_order_relaxed);
  t.now = config_.scorePolicy == ScorePolicy::kTimestamp ? nowSeconds() : 0;
  return t;
}

ScoreClock DynamicTable::peekCall() const {
  ScoreClock t;
  t.clock = clock_.load(std::memory_order_relaxed) + 1;
  t.epoch = epoch_.load(std::memory_order_relaxed);
  t.now = config_.scorePolicy == ScorePolicy::kTimestamp ? nowSeconds() : 0;
  return t;
}

void DynamicTable::reserve(size_t rows, size_t indexRows) {
  ES_CHECK(rows <= cap_, kFailedPrecondition,
           "Expected the table to hold at most " << cap_ << " rows but the call needs " << rows);
  // The row store's new arrays and its meta (keys and scores).
  RowStore::Growth grown;
  DeviceArray<RowMeta> meta;
  if (rows > store_.capacity()) {
    size_t next = store_.capacity() == 0 ? rows : store_.capacity();  // initCapacity exactly, then doubling
    while (next < rows) next = next > cap_ / 2 ? cap_ : std::min(next * 2, cap_);
    meta.reset(*ex_, next, "the keys and scores");
    grown = store_.prepare(next);
  }
  // The index's new arrays, rebuilt from the rows as they are (the new meta is a copy of them).
  const size_t wanted = bucketsFor(indexRows);
  DeviceArray<uint32_t> slotRow, occupied, overflow;
  DeviceArray<uint8_t> digests;
  if (wanted > buckets_) {
    const size_t slots = checkedMul(wanted, kBucketSlots, "the key index");
    slotRow.reset(*ex_, slots, "the key index");
    digests.reset(*ex_, slots, "the key index");
    occupied.reset(*ex_, wanted * kOccupancyWords, "the key index");
    overflow.reset(*ex_, wanted + 1, "the key index");  // + the insert failure flag
    ex_->zero(occupied.data(), occupied.bytes());
    ex_->zero(overflow.data(), overflow.bytes());
    const IndexView fresh{slotRow.data(), digests.data(), occupied.data(), overflow.data(),
                          static_cast<uint64_t>(wanted - 1)};
    uint32_t* failed = overflow.data() + wanted;
    launchGroups<IndexInsert>(*ex_, size_, {fresh, nullptr, meta_.data(), nullptr, 0, failed});
    ES_CHECK(readBack(*ex_, failed) == 0, kInternal, "The key index ran out of room while rebuilding");
  }
  // Nothing below allocates or fails.
  if (meta.data()) {
    ex_->copy(meta.data(), meta_.data(), size_ * sizeof(RowMeta));
    store_.commit(std::move(grown), size_);
    meta_ = std::move(meta);
  }
  if (slotRow.data()) {
    slotRow_ = std::move(slotRow);
    digests_ = std::move(digests);
    occupied_ = std::move(occupied);
    overflow_ = std::move(overflow);
    buckets_ = wanted;
  }
}

void DynamicTable::readRows(const int64_t* keys, size_t n, bool insert, const uint64_t* scores, float* out,
                            uint8_t* exists) {
  if (insert) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    checkAlive();
    Write w(*ex_);
    findOrInsertLocked(w, keys, n, scores);
    launchGroups<GatherOccurrences>(*ex_, n,
                                    {store_.view(), initView(), keys, w.d.uniqueOf, w.rowOf, w.present, out, exists});
    w.st.finish();
    return;
  }
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const ScoreClock t = beginCall();
  launchGroups<FindRows>(*ex_, n, {index(), meta_.data(), store_.view(), initView(), scoreView(t), keys, out, exists});
  ex_->sync();
}

void DynamicTable::findInto(const int64_t* keys, size_t n, float* out, uint8_t* exists) {
  Stage st(*ex_);
  readRows(st.in(keys, n, "keys"), n, false, nullptr, st.out(out, n * config_.dim, "found values"),
           st.out(exists, n, "exists flags"));
  st.finish();
}

void DynamicTable::findOrInsertInto(const int64_t* keys, size_t n, const uint64_t* scores, float* out,
                                    uint8_t* exists) {
  Stage st(*ex_);
  readRows(st.in(keys, n, "keys"), n, true, st.in(scores, n, "scores"), st.out(out, n * config_.dim, "values"),
           st.out(exists, n, "exists flags"));
  st.finish();
}

double DynamicTable::findKernelSeconds(const int64_t* keys, size_t n, int iterations) {
  // Exclusive: the kernel scores its reads as find does (its cost is part of the figure), and
  // the keys' scores are put back afterwards, so that a measurement leaves the table as it was
  // (scores and clock: a later eviction keeps the same rows).
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  uint32_t* rows = st.scratch<uint32_t>(n, "rows of the keys");
  uint64_t* saved = st.scratch<uint64_t>(n, "the keys' scores, kept during the measurement");
  const FindRows::Args args{index(),
                            meta_.data(),
                            store_.view(),
                            initView(),
                            scoreView(peekCall()),  // not counted
                            st.in(keys, n, "keys"),
                            st.scratch<float>(n * config_.dim, "found values"),
                            st.scratch<uint8_t>(n, "exists flags")};
  launchGroups<LookupRows>(*ex_, n, {index(), meta_.data(), args.keys, rows, ScoreView{}, 0});
  launchThreads<CopyScores>(*ex_, n, {meta_.data(), rows, saved, 0});
  const auto restore = [&] {  // duplicates restore the same score
    launchThreads<CopyScores>(*ex_, n, {meta_.data(), rows, saved, 1});
  };
  std::chrono::duration<double> elapsed{};
  try {
    launchGroups<FindRows>(*ex_, n, args);  // warm-up
    ex_->sync();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) launchGroups<FindRows>(*ex_, n, args);
    ex_->sync();
    elapsed = std::chrono::steady_clock::now() - t0;
  } catch (...) {
    // A launch or a wait that failed after some runs scored: the scores go back all the same
    // (queued after the runs; an error that sticks to the device fails this too, and then
    // every later call of the table fails anyway).
    try {
      restore();
    } catch (...) {
    }
    ex_->syncQuietly();
    throw;
  }
  restore();
  st.finish();
  return elapsed.count() / iterations;
}

void DynamicTable::lookupCombinedInto(const BagInput& bag, Combiner combiner, double maxNorm, bool insertMissing,
                                      float* out) {
  if (insertMissing) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    checkAlive();
    Write w(*ex_);
    // the bag's arrays and the entries' rows before the inserts
    const int64_t* keys = w.st.in(bag.keys, bag.n, "bag keys");
    uint32_t* entryRow = w.st.scratch<uint32_t>(bag.n, "bag entry rows");
    const StagedBag b = stageBag(w.st, bag, dim(), maxNorm, out);
    findOrInsertLocked(w, keys, bag.n, nullptr);
    launchThreads<EntryRows>(*ex_, bag.n, {w.d.uniqueOf, w.rowOf, entryRow});
    combineBag(*ex_, b, keys, entryRow, store_.view(), initView(), combiner, maxNorm);
    w.st.finish();
    return;
  }
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  const int64_t* keys = st.in(bag.keys, bag.n, "bag keys");
  uint32_t* entryRow = st.scratch<uint32_t>(bag.n, "bag entry rows");
  const StagedBag b = stageBag(st, bag, dim(), maxNorm, out);
  const ScoreView sv = scoreView(beginCall());  // the clock advances once nothing can fail for lack of memory
  launchGroups<LookupRows>(*ex_, bag.n, {index(), meta_.data(), keys, entryRow, sv, sv.touchReads});
  combineBag(*ex_, b, keys, entryRow, store_.view(), initView(), combiner, maxNorm);
  st.finish();
}

ExportResult DynamicTable::exportBatch(size_t offset, size_t limit) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  return exportRange(offset, limit, size_, meta_.data());
}

DynamicTable::Removal DynamicTable::planRemoval(Stage& st, const uint32_t* list, size_t count) {
  Removal r;
  r.list = list;
  r.count = count;
  if (count == 0) return r;
  const size_t newSize = size_ - count;
  // The compaction's lists: they need only the removed rows' flags, and making them
  // allocates, so that nothing can fail once the index changes (removeRows).
  uint8_t* dead = st.scratch<uint8_t>(size_, "removed-row flags");
  ex_->zero(dead, size_);
  launchThreads<MarkListed>(*ex_, count, {list, dead, 1});
  // Holes below the new size are filled by the surviving rows above it, in order.
  r.holes = st.scratch<uint32_t>(newSize + 1, "compaction holes");
  r.moved = compactIndices(st, dead, newSize, r.holes);
  if (r.moved > 0) {
    uint8_t* alive = st.scratch<uint8_t>(count, "surviving-row flags");
    launchThreads<RowFlags>(*ex_, count, {nullptr, dead + newSize, alive});
    r.movers = st.scratch<uint32_t>(count, "moved rows");
    compactIndices(st, alive, count, r.movers, static_cast<uint32_t>(newSize));
  }
  return r;
}

void DynamicTable::removeRows(const Removal& r) {
  if (r.count == 0) return;
  launchGroups<IndexErase>(*ex_, r.count, {index(), meta_.data(), r.list});
  if (r.moved > 0) {
    launchGroups<MoveRows>(*ex_, r.moved, {meta_.data(), store_.view(), r.movers, r.holes});
    launchGroups<IndexRelink>(*ex_, r.moved, {index(), meta_.data(), r.holes});
  }
  size_ -= r.count;
}

size_t DynamicTable::remove(const int64_t* keys, size_t n) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  const Dedupe d = dedupe(st, st.in(keys, n, "keys"), n, false);
  uint32_t* rows = st.scratch<uint32_t>(d.unique, "rows");
  const ScoreView none{};
  launchGroups<LookupRows>(*ex_, d.unique, {index(), meta_.data(), d.uniqueKeys, rows, none, 0});
  uint8_t* found = st.scratch<uint8_t>(d.unique, "found flags");
  launchThreads<RowFlags>(*ex_, d.unique, {rows, nullptr, found});
  uint32_t* positions = st.scratch<uint32_t>(d.unique, "found keys");
  const uint32_t count = compactIndices(st, found, d.unique, positions);
  uint32_t* list = st.scratch<uint32_t>(count, "removed rows");
  launchThreads<Gather<uint32_t>>(*ex_, count, {positions, rows, list});
  removeRows(planRemoval(st, list, count));
  st.finish();
  return count;
}

size_t DynamicTable::restrict(size_t numReserved) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  if (size_ <= numReserved) return 0;
  Stage st(*ex_);
  SelectCandidate* c = st.scratch<SelectCandidate>(size_, "restrict candidates");
  launchThreads<RowCandidates>(*ex_, size_, {meta_.data(), c});
  uint8_t* state = st.scratch<uint8_t>(size_, "restrict decisions");
  selectKeep(st, c, size_, numReserved, state);
  uint8_t* drop = st.scratch<uint8_t>(size_, "dropped rows");
  uint8_t* unused = st.scratch<uint8_t>(1, "unused");
  ex_->zero(drop, size_);
  launchThreads<SplitDecisions>(*ex_, size_, {c, state, drop, unused});
  uint32_t* list = st.scratch<uint32_t>(size_, "dropped rows");
  const uint32_t count = compactIndices(st, drop, size_, list);
  removeRows(planRemoval(st, list, count));
  st.finish();
  return count;
}

void DynamicTable::clear() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  ex_->zero(occupied_.data(), occupied_.bytes());
  ex_->zero(overflow_.data(), overflow_.bytes());
  ex_->sync();
  size_ = 0;
}

size_t DynamicTable::size() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  return size_;
}

size_t DynamicTable::capacity() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  return store_.capacity();
}

size_t DynamicTable::deviceBytes() const {
  return store_.hbmBytes() + meta_.bytes() + slotRow_.bytes() + digests_.bytes() + occupied_.bytes() +
         overflow_.bytes() + initValues_.bytes() + slotTemplateDevice_.bytes() + widths_.bytes();
}

size_t DynamicTable::pinnedBytes() const {
  return store_.pinnedBytes();
}

size_t DynamicTable::memoryUsage() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  return deviceBytes() + pinnedBytes();
}

void DynamicTable::setEpoch(uint32_t epoch) {
  checkAlive();
  epoch_.store(epoch, std::memory_order_relaxed);
}

}  // namespace cuda
}  // namespace embedstack
