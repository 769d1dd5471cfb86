// Dynamic table: construction, the arena and index primitives, and the ops that
// need no batch planning (remove, clear, export, restrict, sizes).
#include "dynamic_table.h"

#include <algorithm>
#include <mutex>

#include "thread_pool.h"

namespace embedstack {

DynamicTable::DynamicTable(TableConfig config) : Table(std::move(config)) {
  const TableConfig& c = config_;
  dim_ = c.dim;
  slotFloats_ = c.slotFloats();
  storage_ = c.storage;
  valueBytes_ = storedValueBytes(storage_, dim_);
  rowBytes_ = checkedAdd(valueBytes_, checkedMul(slotFloats_, sizeof(float), "a row"), "a row");
  capped_ = c.maxCapacity <= kMaxRows;
  capCeiling_ = capped_ ? c.maxCapacity : kMaxRows;
  capacity_ = std::min(std::max<size_t>(c.initCapacity, 1), capCeiling_);
  arena_.allocateZeroed(checkedMul(capacity_, rowBytes(), "the row arena"), "the row arena");
  // lfu scores count every read occurrence, added under the shared lock by reads that cannot
  // widen the records (leases lend rows for many batches under one lock): lfu tables are
  // wide from the start. Every other policy starts narrow (see planWiden, readFits).
  metaStride_ = c.scorePolicy == ScorePolicy::kLfu ? MetaView::kWide : MetaView::kNarrow;
  meta_.allocateZeroed(checkedMul(capacity_, metaStride_, "the keys and scores"), "the keys and scores");
  // The index is sized for initCapacity keys up front (the arena's capacity costs no
  // RSS until used; the index is written now, so it is capped at 2^26 keys' worth), at
  // the density of a rebuilt one (13 keys per 16-slot group, 10 per 12-slot group):
  // presized at the maximum load (11 of 12 then), 1 key in 9 overflowed its home group
  // and a lookup read 0.35 extra groups on average (0.12 at 10), which cost find 13-20%
  // and the bag 5-10% (MEASUREMENTS.md). Narrow (3-byte rows) when initCapacity rows fit
  // 24 bits; a larger presized table starts wide rather than rebuild at 2^24 rows.
  const bool narrow = narrowIndexFor(capacity_);
  index_.reset(KeyIndex::groupsFor(std::min<size_t>(capacity_, size_t{1} << 26), narrow), narrow);
}

std::atomic<size_t> DynamicTable::narrowIndexRows{KeyIndex::kNarrowRows};

bool DynamicTable::narrowIndexFor(size_t rows) {
  return rows <= std::min(narrowIndexRows.load(std::memory_order_relaxed), KeyIndex::kNarrowRows);
}

ScoreClock DynamicTable::beginCall() {
  ScoreClock t;
  t.clock = clock_.fetch_add(1, std::memory_order_relaxed) + 1;
  t.epoch = epoch_.load(std::memory_order_relaxed);
  t.now = config_.scorePolicy == ScorePolicy::kTimestamp ? nowSeconds() : 0;
  return t;
}

void DynamicTable::buildWide(Block& to, size_t capacity) const {
  to.allocateZeroed(checkedMul(capacity, MetaView::kWide, "the keys and scores"), "the keys and scores");
  const MetaView from = meta();
  const MetaView wide{static_cast<char*>(to.data()), MetaView::kWide};
  for (size_t row = 0; row < size_; ++row) wide.set(row, from.key(row), from.score(row));
}

void DynamicTable::widen() {
  if (metaStride_ == MetaView::kWide) return;
  Block wide;
  buildWide(wide, capacity_);
  meta_ = std::move(wide);
  metaStride_ = MetaView::kWide;
}

void DynamicTable::planWiden(WriteBatch& wb, const uint64_t* scores, size_t n, bool explicitScores) const {
  if (metaStride_ == MetaView::kWide) return;
  const ScorePolicy p = config_.scorePolicy;
  const ScoreClock& t = wb.clock;
  uint64_t bound = 0;  // no score the call stores exceeds it
  if (scores != nullptr && (explicitScores || p == ScorePolicy::kCustomized)) {
    for (size_t i = 0; i < n; ++i) bound = std::max(bound, scores[i]);
  }
  switch (p) {
    case ScorePolicy::kLru:
      bound = std::max(bound, t.clock);  // a read clock first (applyGradientSumsAfterFind) is smaller
      break;
    case ScorePolicy::kEpochLru:
    case ScorePolicy::kEpochLfu:  // epoch 0: (clock or a count saturated at 2^32 - 1) fits
      if (t.epoch != 0) bound = UINT64_MAX;
      break;
    case ScorePolicy::kTimestamp:
      bound = std::max(bound, t.now);
      break;
    case ScorePolicy::kFrequency:
      // Rows the call stores given scores for (import) hold them; every other touched row adds 1.
      bound = std::max(bound, explicitScores ? frequencyBound_ : saturatingAdd(frequencyBound_, 1));
      wb.frequencyBound = bound;
      break;
    case ScorePolicy::kLfu:  // wide from the start
    case ScorePolicy::kCustomized:
      break;
  }
  wb.widen = bound > kLow32;
}

bool DynamicTable::readFits(uint64_t* epoch) const {
  *epoch = epoch_.load(std::memory_order_relaxed);
  if (metaStride_ == MetaView::kWide) return true;
  switch (config_.scorePolicy) {
    case ScorePolicy::kLru:
      return clock_.load(std::memory_order_relaxed) < (uint64_t{1} << 31);
    case ScorePolicy::kEpochLru:
    case ScorePolicy::kEpochLfu:
      return *epoch == 0;
    default:  // lfu: wide; the others do not score on read
      return true;
  }
}

ScoreClock DynamicTable::lockRead(std::shared_lock<std::shared_mutex>& lock) {
  uint64_t epoch;
  while (!readFits(&epoch)) {
    lock.unlock();
    {
      std::unique_lock<std::shared_mutex> exclusive(mutex_);
      checkAlive();
      widen();
    }
    lock.lock();
    checkAlive();
  }
  return beginRead(epoch);
}

void DynamicTable::prefetchRow(uint32_t row, size_t bytes) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(valuesOf(row));
  for (uintptr_t a = p & ~uintptr_t{63}; a < p + bytes; a += 64) __builtin_prefetch(reinterpret_cast<const void*>(a));
}

uint32_t DynamicTable::lookup(int64_t key) const {
  size_t slot = index_.find(key, hashKey(key), [this](uint32_t row) { return keyOf(row); });
  return slot == KeyIndex::kNoSlot ? KeyIndex::kNoRow : index_.rowAt(slot);
}

void DynamicTable::buildIndex(KeyIndex& fresh, size_t groups, bool narrow) const {
  fresh.reset(groups, narrow);
  // Keys are read in arena order (sequential); their home groups are prefetched
  // 16 rows ahead so the random inserts overlap their cache misses.
  constexpr size_t kAhead = 16;
  constexpr size_t kRing = 32;
  uint64_t hashes[kRing];
  const KeyIndex::View v = fresh.view();
  const MetaView rowMeta = meta();
  for (size_t row = 0; row < size_ + kAhead; ++row) {
    if (row < size_) {
      const uint64_t h = hashKey(rowMeta.key(row));
      hashes[row % kRing] = h;
      __builtin_prefetch(v.group(v.homeGroup(h)), 1);
    }
    if (row >= kAhead) {
      const size_t r = row - kAhead;
      fresh.insert(hashes[r % kRing], static_cast<uint32_t>(r));
    }
  }
}

void DynamicTable::reserve(WriteBatch& wb, size_t finalSize, size_t newEntries) {
  ES_CHECK(finalSize <= capCeiling_, kFailedPrecondition,
           "Expected the table to hold at most " << capCeiling_ << " rows but the call needs " << finalSize);
  // The index's layout: narrow (3-byte rows) while every row the table may hold after the
  // call fits it, so a narrow index is rebuilt wide before the row 2^24 (or the hook's
  // narrowIndexRows) is inserted; a rebuild for room picks narrow again when the rows fit.
  const bool narrow = narrowIndexFor(finalSize);
  size_t cap = capacity_;
  while (cap < finalSize) cap = cap > capCeiling_ / 2 ? capCeiling_ : std::min(cap * 2, capCeiling_);
  const bool widens = wb.widen && metaStride_ == MetaView::kNarrow;
  // Everything that can fail, first, with nothing published: the fresh index and the wide
  // records are built aside; the arena then the records grow (either may move; their contents
  // stay), the arena shrunk back when the records cannot grow.
  KeyIndex fresh;
  const bool rebuild = !index_.fits(newEntries) || (index_.narrow() && !narrow);
  if (rebuild) buildIndex(fresh, KeyIndex::groupsFor(index_.used() + newEntries, narrow), narrow);
  Block wide;
  if (widens) buildWide(wide, cap);
  if (cap > capacity_) {
    const size_t arenaBytes = arena_.bytes();
    arena_.resize(checkedMul(cap, rowBytes(), "the row arena"), "the row arena");
    if (!widens) {
      try {
        meta_.resize(checkedMul(cap, metaStride_, "the keys and scores"), "the keys and scores");
      } catch (...) {
        try {
          arena_.resize(arenaBytes, "the row arena");  // shrinks in place (mremap), or a smaller copy
        } catch (...) {  // no memory even for the smaller copy: the arena stays larger, nothing else changed
        }
        throw;
      }
    }
  }
  // Published: nothing below fails.
  if (rebuild) index_ = std::move(fresh);
  if (widens) {
    meta_ = std::move(wide);
    metaStride_ = MetaView::kWide;
  }
  capacity_ = cap;
  frequencyBound_ = std::max(frequencyBound_, wb.frequencyBound);  // frequency policy (planWiden), else 0
  wb.committed = true;
}

uint32_t DynamicTable::insertRow(int64_t key, bool fillValue) {
  const uint32_t row = static_cast<uint32_t>(size_);
  meta().set(row, key, 0);
  if (fillValue) {
    if (wide()) {
      config_.initializer.fill(key, 0, dim_, static_cast<float*>(valuesOf(row)));
    } else {
      float* v = rowScratch(dim_);
      config_.initializer.fill(key, 0, dim_, v);
      writeValues(row, v);
    }
  }
  if (slotFloats_ > 0) std::memcpy(slotsOf(row), slotTemplate_.data(), slotFloats_ * sizeof(float));
  index_.insert(hashKey(key), row);
  ++size_;
  return row;
}

bool DynamicTable::removeKey(int64_t key) {
  auto keyAt = [this](uint32_t r) { return keyOf(r); };
  const size_t slot = index_.find(key, hashKey(key), keyAt);
  if (slot == KeyIndex::kNoSlot) return false;
  const uint32_t row = index_.rowAt(slot);
  const uint32_t last = static_cast<uint32_t>(size_ - 1);
  index_.erase(slot);
  if (row != last) {
    const int64_t moved = keyOf(last);
    const size_t movedSlot = index_.find(moved, hashKey(moved), keyAt);
    const MetaView m = meta();
    std::memcpy(m.at(row), m.at(last), m.stride());
    std::memcpy(valuesOf(row), valuesOf(last), rowBytes());
    index_.setRow(movedSlot, row);
  }
  --size_;
  return true;
}

size_t DynamicTable::remove(const int64_t* keys, size_t n) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  size_t removed = 0;
  for (size_t i = 0; i < n; ++i) removed += removeKey(keys[i]) ? 1 : 0;
  return removed;
}

void DynamicTable::clear() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  index_.clear();
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
  return capacity_;
}

size_t DynamicTable::memoryUsage() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  return arena_.bytes() + meta_.bytes() + index_.bytes();
}

void DynamicTable::setEpoch(uint32_t epoch) {
  checkAlive();
  epoch_.store(epoch, std::memory_order_relaxed);
}

ExportResult DynamicTable::exportBatch(size_t offset, size_t limit) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const size_t start = std::min(offset, size_);
  const size_t n = std::min(limit, size_ - start);
  const TableConfig& c = config_;
  ExportResult r;
  r.keys.allocate(n);
  r.values.allocate(checkedMul(n, dim_, "export values"));
  r.scores.allocate(n);
  for (uint32_t w : c.slotWidths) r.slots.emplace_back(checkedMul(n, w, "export slots"));
  forEachRange(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const size_t row = start + i;
      r.keys[i] = keyOf(row);
      r.scores[i] = meta().score(row);
      readValues(static_cast<uint32_t>(row), r.values.data() + i * dim_, false);
      exportSlots(slotsOf(row), r.slots, i);
    }
  });
  return r;
}

size_t DynamicTable::restrict(size_t numReserved) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  if (size_ <= numReserved) return 0;
  struct Ranked {
    uint64_t score;
    int64_t key;
  };
  std::vector<Ranked> ranked(size_);
  const MetaView m = meta();
  for (size_t row = 0; row < size_; ++row) ranked[row] = {m.score(row), m.key(row)};
  // Keep the highest scores, ties keep smaller signed keys (every candidate is resident).
  auto keeps = [](const Ranked& a, const Ranked& b) { return a.score != b.score ? a.score > b.score : a.key < b.key; };
  std::nth_element(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(numReserved), ranked.end(), keeps);
  size_t removed = 0;
  for (size_t i = numReserved; i < ranked.size(); ++i) removed += removeKey(ranked[i].key) ? 1 : 0;
  return removed;
}

}  // namespace embedstack
