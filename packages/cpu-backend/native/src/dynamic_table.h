// Dynamic table: a hash table from int64 keys to rows.
//
// Memory (host), all dense over rows 0..size-1 and indexed by the same row:
//  - the arena: `capacity` records of [value[dim] as storageDtype, padded to 4
//    bytes][float slots[slotFloats]], row-major, so one access brings a row and its
//    optimizer slots (a float32 row of dim 64 is exactly 4 cache lines, as in a
//    plain [rows, dim] array; bfloat16/float16 halve it);
//  - meta [capacity] {int64 key, uint32 score} packed in 12 bytes per row ("narrow")
//    while every score the table holds fits 32 bits, {int64 key, uint64 score} in 16
//    ("wide") from the first call whose scores might not (MetaView, widen()): compact
//    enough to stay in cache for millions of rows, so probing, score updates and
//    eviction scans neither touch nor dirty the values (a find reads 1 index line +
//    1 meta line + the row; 2 narrow records in 16 straddle two lines).
//  Removal moves the last row into the hole, so everything stays dense and export
//  order is arena order (offset/limit is O(1)). Capacity doubles from
//  initCapacity, capped at maxCapacity; untouched capacity is address space, not RSS.
//  - index: KeyIndex (control bytes + a 3-byte row per slot, 16 slots per 64-byte group,
//    while the table holds at most 2^24 rows; a 4-byte row, 12 slots, above), see key_index.h.
// Overhead per key beyond the value bytes: 12 narrow or 16 wide (key, score) + 4.4..4.9 (index,
// up to 2^24 rows) or 5.8..6.4 (more rows).
// The key and score stay out of the row on purpose: a [key, score, values] record
// (tried in Nov 2026) makes a float32 dim-64 row 272 bytes, 5 cache lines and no
// longer line-aligned, where the separate layout reads 4 aligned lines plus a meta
// line shared by 4 keys that stays cached far longer. Interleaved in one process,
// the record layout was slower: dynamic bag 0.43x static (this layout 0.53x), and
// find no faster at 4M or 16M keys.
//
// Semantics follow core's reference dynamic table exactly (scores, the eviction
// rule of capped tables, accum's bp_v2 rule); see the .cc files for each op.
#pragma once

#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "dedupe.h"
#include "hd.h"
#include "key_index.h"
#include "stream_copy.h"
#include "table.h"
#include "thread_pool.h"

namespace embedstack {

/**
 * A probe's prefetch of a candidate's key/score line into L1 (for writing when `forWrite`),
 * and of no row (probes reading only index and meta lines: the writes', a lease's).
 */
struct NoRowPrefetch {
  /** A record's key/score line(s): `last` is its last byte (a narrow record may straddle two lines). */
  ES_ALWAYS_INLINE void meta(const char* first, const char* last, bool forWrite) const {
    if (forWrite) {
      __builtin_prefetch(first, 1);
      __builtin_prefetch(last, 1);
    } else {
      __builtin_prefetch(first);
      __builtin_prefetch(last);
    }
  }
  ES_ALWAYS_INLINE void operator()(const char*) const {}
};

/**
 * find's prefetch: the candidate's key/score line and its record's first lines, into L2
 * (`prefetcht1`): kLines of them unrolled at compile time, or (kLines = 0) `lines` counted
 * at run time. Into L2 rather than L1: a dim-64 find keeps ~6 random lines per key in
 * flight, more than L1's miss buffers hold, and prefetching them into L1 measured 1.3-1.4x
 * slower (MEASUREMENTS.md, Nov 28 2026); the row copy and the key compare then read L2.
 * The run-time loop measured 5-10% slower than the unrolled lines.
 */
template <size_t kLines>
struct RowLines {
  size_t lines = kLines;
  // Always inlined: with find's two loops (findRows, findPasses) instantiating them, GCC called
  // them out of line from the probe, which made the pipeline 1.7x slower. The same attribute
  // keeps the bag's prefetches: without it GCC 12 inlines them late into the bag over several
  // tables (poolBag<ResidueParts>) and deletes them as dead stores (9 prefetch instructions
  // left of 24, Nov 29 2026; -fno-tree-dse kept them; one table's poolBag keeps 6-7 of 21).
  ES_ALWAYS_INLINE void meta(const char* first, const char* last, bool) const {
    __builtin_prefetch(first, 0, 2);
    __builtin_prefetch(last, 0, 2);
  }
  ES_ALWAYS_INLINE void operator()(const char* record) const {
    const size_t count = kLines > 0 ? kLines : lines;
    for (size_t l = 0; l < count; ++l) __builtin_prefetch(record + 64 * l, 0, 2);
  }
};

/**
 * Calls f(RowLines<k>{...}) for records whose stored values span `lines` cache lines: 1, 2,
 * 4 or 8 unrolled at compile time, any other count in a loop.
 */
template <class F>
void withRowLines(size_t lines, F&& f) {
  switch (lines) {
    case 1:
      return f(RowLines<1>{});
    case 2:
      return f(RowLines<2>{});
    case 4:
      return f(RowLines<4>{});
    case 8:
      return f(RowLines<8>{});
    default:
      return f(RowLines<0>{lines});
  }
}

/** dst [dim] = the values a record starts with, widened (streaming stores when `stream` and float32). */
inline void readRecordValues(StorageDtype storage, const void* record, float* dst, size_t dim, bool stream) {
  if (storage == StorageDtype::kFloat32) {
    copyFloats(dst, static_cast<const float*>(record), dim, stream);
  } else {
    loadValues(storage, record, dst, dim);
  }
}

/**
 * A dynamic table's key/score records, one per row, as laid out now: {int64 key, uint32 score}
 * packed in 12 bytes (narrow) or {int64 key, uint64 score} in 16 (wide). Keys are read
 * unaligned (odd narrow rows' keys are 4-byte aligned; fine on x86-64 and aarch64); scores are
 * always aligned to their width, so the read path's relaxed atomics work on either. A
 * snapshot for hot loops (kept in registers), valid until the table changes under its lock.
 * kFixed: the record size fixed at compile time (12 or 16; withFixedStride), or 0: read from `runtimeStride`.
 */
template <size_t kFixed = 0>
struct MetaRecords {
  static constexpr size_t kNarrow = 12;
  static constexpr size_t kWide = 16;
  char* base;
  size_t runtimeStride;  // kNarrow or kWide (unused when kFixed)

  size_t stride() const { return kFixed != 0 ? kFixed : runtimeStride; }
  bool narrow() const { return stride() == kNarrow; }
  char* at(size_t row) const { return base + row * stride(); }
  int64_t key(size_t row) const {
    int64_t k;
    std::memcpy(&k, at(row), sizeof k);
    return k;
  }
  uint32_t* narrowScore(size_t row) const { return reinterpret_cast<uint32_t*>(at(row) + 8); }
  uint64_t* wideScore(size_t row) const { return reinterpret_cast<uint64_t*>(at(row) + 8); }
  /** A row's score (a relaxed atomic load: reads may be touching it). */
  uint64_t score(size_t row) const {
    return narrow() ? __atomic_load_n(narrowScore(row), __ATOMIC_RELAXED) : __atomic_load_n(wideScore(row), __ATOMIC_RELAXED);
  }
  /** Sets a row's score (under the exclusive lock; narrow: `s` fits, the caller checked). */
  void setScore(size_t row, uint64_t s) const {
    if (narrow()) {
      *narrowScore(row) = static_cast<uint32_t>(s);
    } else {
      *wideScore(row) = s;
    }
  }
  void set(size_t row, int64_t key, uint64_t s) const {
    std::memcpy(at(row), &key, sizeof key);
    setScore(row, s);
  }
  /** Prefetches a row's record (both lines of a narrow record that straddles two). */
  template <class Prefetch>
  ES_ALWAYS_INLINE void prefetch(const Prefetch& p, size_t row, bool forWrite) const {
    const char* r = at(row);
    p.meta(r, r + stride() - 1, forWrite);
  }
};
using MetaView = MetaRecords<>;

/**
 * f(the records as MetaRecords<12> or MetaRecords<16>): the hot loops of find and the bag in
 * passes with the record size a constant (measured: the run-time size cost them 4-7%).
 */
template <class F>
ES_ALWAYS_INLINE inline void withFixedStride(const MetaView& m, F&& f) {
  if (m.narrow()) {
    f(MetaRecords<MetaView::kNarrow>{m.base, MetaView::kNarrow});
  } else {
    f(MetaRecords<MetaView::kWide>{m.base, MetaView::kWide});
  }
}

/**
 * How one read call touches the scores of the rows it finds (read policies: scores.h), fixed
 * for the call: lru / epochLru (the default) store the call's one score, lfu / epochLfu count.
 */
struct ReadTouch {
  ScorePolicy policy;
  ScoreClock t;
  bool touch;
  bool clockScore;
  uint64_t readScore;

  ReadTouch(ScorePolicy p, const ScoreClock& clock)
      : policy(p), t(clock), touch(scoresOnRead(p)), clockScore(readScoreIsClock(p)),
        readScore(clockScore ? nextScore(p, 0, 1, false, 0, clock) : 0) {}

  template <class Meta>
  ES_ALWAYS_INLINE void operator()(const Meta& m, uint32_t row) const {
    if (clockScore) {
      if (m.narrow()) {
        storeReadScore(m.narrowScore(row), readScore);
      } else {
        storeReadScore(m.wideScore(row), readScore);
      }
    } else if (touch) {
      if (m.narrow()) {
        touchOnReadAtomic(m.narrowScore(row), policy, t);
      } else {
        touchOnReadAtomic(m.wideScore(row), policy, t);
      }
    }
  }
};

class DynamicTable final : public Table {
 public:
  /** Largest number of rows (row indices are uint32, one value is the "no row" marker). */
  static constexpr size_t kMaxRows = UINT32_MAX - 1;

  explicit DynamicTable(TableConfig config);

  void findInto(const int64_t* keys, size_t n, float* values, uint8_t* exists) override;
  bool findSplits(size_t n) const override { return n >= kParallelThreshold; }
  void findOrInsertInto(const int64_t* keys, size_t n, const uint64_t* scores, float* values, uint8_t* exists) override;
  void upsert(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) override;
  void assign(const int64_t* keys, size_t n, const float* values, const uint64_t* scores) override;
  void accum(const int64_t* keys, size_t n, const float* deltas, const uint8_t* exists,
             const uint64_t* scores) override;
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
  void applyGradientSums(const int64_t* keys, size_t n, const GradientSums& sums, const OptimizerParams& opt) override;
  /**
   * findInto then applyGradientSums in one call under the write lock: the rows are read once
   * every allocation of the call is done (its scratch and row buffers, admission, growth,
   * widening; nothing after that allocates, the pool's parallelFor included), so a call rejected
   * for memory (std::bad_alloc or FAILED_PRECONDITION) changes no row, score, clock or size, and
   * no other write comes between the read and the step.
   */
  void applyGradientSumsAfterFind(const int64_t* keys, size_t n, float* rows, const GradientSums& sums,
                                  const OptimizerParams& opt) override;
  size_t restrict(size_t numReserved) override;
  void setEpoch(uint32_t epoch) override;
  /** Lends float32 rows (null for float16 / bfloat16 storage). */
  std::unique_ptr<RowLease> leaseRows() override;
  /** Pools bags over dynamic tables of one dim and storage (any storage; each part's own row layout, slots or none); null for any other table. */
  std::unique_ptr<BagLease> leaseBag(Table* const* tables, size_t parts, const ResidueOwners& owners) override;

  /**
   * find runs in passes (findPasses) on tables whose index, key/score lines and stored values
   * together take at least this many bytes (the bag: kBagPassesScale times it), and through the
   * probe pipeline below it. Tests lower it to run the passes on small tables.
   */
  static constexpr size_t kFindPassesFrom = size_t{8} << 20;
  static std::atomic<size_t> findPassesFrom;
  /**
   * The index is narrow (3-byte rows, 16 slots a group) while the table's rows fit this many
   * (KeyIndex::kNarrowRows = 2^24, at most), wide above. Tests lower it to cross the switch on
   * small tables.
   */
  static std::atomic<size_t> narrowIndexRows;

  // Introspection for tests and benchmarks.
  /** Whether find runs in passes on this table (footprint >= findPassesFrom). */
  bool findInPasses() const { return readsInPasses(1); }
  /** Whether the bag (lookupCombined without insertMissing) runs in passes (footprint >= 4x findPassesFrom). */
  bool bagInPasses() const { return readsInPasses(kBagPassesScale); }
  size_t indexGroups() const { return index_.groups(); }
  size_t indexTombstones() const { return index_.tombstones(); }
  /** Whether the index holds 3-byte rows (16 slots a group) or 4-byte rows (12 slots). */
  bool indexNarrow() const { return index_.narrow(); }
  /** Whether the key/score records are narrow (12 bytes: every score fits 32 bits) or wide (16). */
  bool narrowScores() const { return meta().narrow(); }
  /** Sets the clock (the last call's; the next call gets clock + 1): tests reach 2^32 with it. */
  void setClockForTests(uint64_t clock) { clock_.store(clock, std::memory_order_relaxed); }

 private:
  class Lease;
  /**
   * State of one write call: its clock, distinct keys, and their rows. A call that fails before
   * its reserve() committed (scratch, admission, growth or widening out of memory) gives its
   * clocks back when it unwinds (under the exclusive lock, so no other call took one since).
   */
  struct WriteBatch {
    WriteBatch() = default;
    WriteBatch(const WriteBatch&) = delete;
    WriteBatch& operator=(const WriteBatch&) = delete;
    ~WriteBatch() {
      if (clocks != 0 && !committed && std::uncaught_exceptions() > uncaught) clockOf->fetch_sub(clocks, std::memory_order_relaxed);
    }
    ScoreClock clock;
    /** A read that comes first in the same call (applyGradientSumsAfterFind): its clock, one before `clock`. */
    ScoreClock readClock;
    /** Clocks the call took (1, or 2 with the read); put back on failure before `committed`. */
    uint64_t clocks = 0;
    std::atomic<uint64_t>* clockOf = nullptr;
    int uncaught = std::uncaught_exceptions();
    /** Set by reserve() once the call's memory is in place: from then on the call keeps its clocks. */
    bool committed = false;
    /** The records must widen (16-byte scores) before the call stores a score: done by reserve(). */
    bool widen = false;
    /** The frequency policy's bound once the call succeeds (frequencyBound_). */
    uint64_t frequencyBound = 0;
    BatchDedupe dedupe;
    const uint64_t* scores = nullptr;  // caller's scores [n] or null
    ScratchVector<uint32_t> rows;      // per unique: row, or KeyIndex::kNoRow
    ScratchVector<uint8_t> present;    // per unique: resident before the call
    ScratchVector<uint8_t> refused;    // per unique: a new key the eviction rule refused
    bool hasGiven(size_t u) const { return scores != nullptr; }
    uint64_t given(size_t u) const { return scores ? scores[dedupe.lastOccurrence(u)] : 0; }
  };

  // ---- layout -----------------------------------------------------------------
  char* arena() const { return static_cast<char*>(arena_.data()); }
  MetaView meta() const { return MetaView{static_cast<char*>(meta_.data()), metaStride_}; }
  int64_t keyOf(size_t row) const { return meta().key(row); }
  /** A row's stored values ([dim] of storage_; float32 only when storage_ is float32). */
  void* valuesOf(size_t row) const { return arena() + row * rowBytes_; }
  float* slotsOf(size_t row) const { return reinterpret_cast<float*>(arena() + row * rowBytes_ + valueBytes_); }
  size_t rowBytes() const { return rowBytes_; }
  bool wide() const { return storage_ == StorageDtype::kFloat32; }
  /** Cache lines of a row's stored values (a float32 dim-64 row: 4). */
  size_t valueLines() const { return (dim_ * storageBytes(storage_) + 63) / 64; }
  /** dst [dim] = a row's values widened (streaming stores when `stream` and float32). */
  void readValues(uint32_t row, float* dst, bool stream) const {
    readRecordValues(storage_, valuesOf(row), dst, dim_, stream);
  }
  void writeValues(uint32_t row, const float* src) { storeValues(storage_, src, valuesOf(row), dim_); }
  /** dst [dim] = key's initial value as the table would store it (rounded). */
  void initialValue(int64_t key, float* dst) const {
    config_.initializer.fill(key, 0, dim_, dst);
    roundValues(storage_, dst, dim_);
  }

  // ---- primitives (dynamic_table.cc) ----------------------------------------------
  ScoreClock beginCall();
  /**
   * Makes the records wide (16 bytes) if they are narrow; under the exclusive lock. Throws,
   * changing nothing, when the memory is not there.
   */
  void widen();
  /**
   * Whether a write call's records must widen, decided after its clock is taken (wb.widen,
   * wb.frequencyBound): when a score the call may store would not fit 32 bits (its clock,
   * epoch or time, the caller's scores it stores, frequency's count). reserve() widens them.
   */
  void planWiden(WriteBatch& wb, const uint64_t* scores, size_t n, bool explicitScores) const;
  /**
   * Under the shared lock, before a read takes its clock: whether the scores it may store fit the
   * records (wide; or narrow, its epoch 0 for the epoch policies, and for lru the clock below
   * 2^31, so the clocks reads take meanwhile stay below 2^32 unless 2^31 calls start in between).
   * *epoch = the epoch it checked, which the read then uses (beginRead).
   */
  bool readFits(uint64_t* epoch) const;
  /** A read's clock (under the shared lock, after readFits) with the epoch readFits checked. */
  ScoreClock beginRead(uint64_t epoch) {
    ScoreClock t = beginCall();
    t.epoch = epoch;
    return t;
  }
  /**
   * A one-table read's clock under `lock` (shared, held, the table alive; the caller holds no
   * other table's lock): when the records must widen first, lets the lock go, widens under the
   * exclusive lock and takes it again, all before the clock is taken.
   */
  ScoreClock lockRead(std::shared_lock<std::shared_mutex>& lock);
  uint32_t lookup(int64_t key) const;
  /**
   * A write's memory, all or nothing, before its first change: arena and key/score room for
   * `finalSize` rows, index room for `newEntries` more keys, and the records widened when
   * wb.widen. Everything that can fail is allocated first (a fresh index and wide records built
   * aside, the arena then the records grown, the arena shrunk back if the records cannot grow),
   * then published; marks the call committed. Throws, changing no row, score, key or clock, and
   * memoryUsage() only when even the arena's shrink back fails (no memory for the smaller copy
   * that mremap, failing, falls back to): the arena then stays at its grown size, its rows as
   * before. Every write calls it once (admit() does), before any row or score changes, after
   * every other allocation of the call (nothing after it allocates).
   */
  void reserve(WriteBatch& wb, size_t finalSize, size_t newEntries);
  /** Fills `fresh` with an index of `groups` groups of the layout (narrow: 3-byte rows) over the records. */
  void buildIndex(KeyIndex& fresh, size_t groups, bool narrow) const;
  /** Allocates `to` as wide records for `capacity` rows holding the current records' keys and scores. */
  void buildWide(Block& to, size_t capacity) const;
  /** Appends a row (score 0, initial slots; initial value when fillValue). Requires reserve(). */
  uint32_t insertRow(int64_t key, bool fillValue);
  /** Removes `key` if present (moves the last row into its hole). */
  bool removeKey(int64_t key);
  /** Whether an index for a table of `rows` rows (rows 0..rows-1) is narrow (narrowIndexRows). */
  static bool narrowIndexFor(size_t rows);

  /**
   * Looks up keys[begin..end) in order, calling fn(i, row) (row = kNoRow when absent).
   * Software-pipelined: hashes and index groups are prefetched 16 keys ahead; 8 keys
   * ahead the home group's first fragment match (the candidate) is noted and its key
   * and score (`prefetchRow.meta`, for writing when `forWrite`) and its record
   * (`prefetchRow(record)`) are prefetched (NoRowPrefetch, or RowLines for find), or,
   * when a full home group has no match, the
   * next group; at the key itself the candidate's key is compared, falling back to a
   * full probe. The distances and where the index groups go (`kIndexTo`: 3 every level,
   * 2 L2 and beyond) may be given: a lease lending rows for a bag asks further ahead,
   * into L2, as the bag's own resolver does (poolBag).
   */
  template <size_t kIndexAhead = 16, size_t kRecordAhead = 8, int kIndexTo = 3, class Prefetch, class Fn>
  void probe(const int64_t* keys, size_t begin, size_t end, bool forWrite, Prefetch prefetchRow, Fn&& fn) const;
  /** The per-key stages of the probe pipelines (probe, poolBag); defined below the class. */
  template <int kIndexTo, class Prefetch>
  struct ProbeStages;
  /**
   * Whether a read runs in passes on this table: its index, key/score lines and stored values
   * take at least `scale` x findPassesFrom bytes (find: 1; the bag: kBagPassesScale).
   */
  bool readsInPasses(size_t scale) const;
  /** The bytes a read walks at random: index, key/score lines and stored values' lines (readsInPasses). */
  size_t readFootprint() const;
  /**
   * The bag reads in passes from 4x find's threshold (32 MiB): below it the pipeline (poolBag)
   * measured as fast (dim 64: 0.94x at 32K keys, 8.7 MiB; 0.98x at 64K; 1.09x at 128K, 34 MiB).
   */
  static constexpr size_t kBagPassesScale = 4;
  /**
   * Passes A, A2, B and B2 of findPasses over one chunk of keys: each key's row (kNoRow when
   * absent), the resident keys' scores touched (see dynamic_read.cc). Used by find and the bag.
   */
  template <class Prefetch>
  struct PassResolver;
  /** findInto's body on a large table: chunks of keys, each in passes (see dynamic_read.cc). */
  template <class Prefetch>
  void findPasses(const int64_t* keys, size_t n, float* out, uint8_t* exists, const ScoreClock& clock,
                  Prefetch prefetch) const;
  /** findInto's body once the row prefetch is chosen (see dynamic_read.cc). */
  template <class Prefetch>
  void findRows(const int64_t* keys, size_t n, float* out, uint8_t* exists, const ScoreClock& clock,
                Prefetch prefetch) const;
  /** One table's part in a bag's read: its probe stages, read scores and initializer (dynamic_read.cc). */
  template <class Prefetch>
  struct BagPart;
  /** The parts of a bag read: one table (OnePart), or tables owning keys by residue (ResidueParts). */
  template <class Prefetch>
  struct OnePart;
  template <class Prefetch>
  struct ResidueParts;
  /** leaseBag's lease: the tables' read locks and their parts. */
  template <class Prefetch>
  class PartsLease;
  /**
   * lookupCombinedInto without insertMissing, bag rows [rb, re), over `parts`: each key
   * resolved to its owner's row a few hundred entries ahead of the pooling kernel, which
   * pools them in chunks (see dynamic_read.cc).
   */
  template <class Parts>
  static void poolBag(const Parts& parts, const BagInput& bag, size_t rb, size_t re, Combiner combiner, double maxNorm,
                      float* out);
  /** One table's part in a bag's read in passes: its PassResolver and initializer (dynamic_read.cc). */
  template <class Prefetch>
  struct PassPart;
  /**
   * lookupCombinedInto without insertMissing on large tables (bagInPasses), bag rows [rb, re):
   * chunks of bag rows resolved by PassResolver, then pooled (see dynamic_read.cc). One table
   * (`owners` null: parts[0]), or tables owning the keys by residue (`owners`: each chunk's keys
   * grouped by owner, each group resolved in its owner's table).
   */
  template <class Prefetch>
  static void poolBagPasses(const PassPart<Prefetch>* parts, const ResidueOwners* owners, const BagInput& bag,
                            size_t rb, size_t re, Combiner combiner, double maxNorm, float* out);
  /**
   * Whether a bag over these tables (their read locks held) reads in passes: their footprints
   * summed, as one table holding all their rows (bagInPasses).
   */
  static bool bagInPasses(DynamicTable* const* tables, size_t parts);
  /** Prefetches the first `bytes` of a row's values and slots. */
  void prefetchRow(uint32_t row, size_t bytes) const;

  // ---- write path (dynamic_write.cc, dynamic_admit.cc) -------------------------------
  /**
   * Dedupes and probes the call's keys, takes its clock (after a read clock first when
   * `readsFirst`) and decides whether the records must widen (planWiden).
   */
  void startWrite(WriteBatch& wb, const int64_t* keys, size_t n, const uint64_t* scores, bool explicitScores = false,
                  bool readsFirst = false);
  /** startWrite's dedupe of a batch that splits, with the probe of its uniques beside it (dynamic_write.cc). */
  void dedupeAndProbe(WriteBatch& wb, const int64_t* keys, size_t n, RangeFn probeRange);
  /**
   * Decides which absent uniques with wantsNew[u] are admitted (the eviction rule when
   * the cap is reached), reserves room, evicts losing residents and marks refused
   * keys. Returns the admitted uniques in order of first appearance; inserts nothing.
   */
  ScratchVector<uint32_t> admit(WriteBatch& wb, const ScratchVector<uint8_t>* wantsNew, bool explicitScores);
  void insertAdmitted(WriteBatch& wb, const ScratchVector<uint32_t>& admitted, bool fillValues);
  /** Scores every unique resident at the end of the call (write policies). */
  void touchWritten(WriteBatch& wb, bool explicitScores);
  /** applyGradientSums (rows null) or applyGradientSumsAfterFind (rows [n * dim]) under the write lock. */
  void train(const int64_t* keys, size_t n, const GradientSums& sums, const OptimizerParams& opt, float* rows);
  /** applyGradientSumsAfterFind's read: the rows into `rows` and the read scores (dynamic_write.cc). */
  void readBeforeStep(const WriteBatch& wb, const int64_t* keys, size_t n, float* rows);
  /** applyGradientSums' sums in input order, taken beside the update of keys of one occurrence (dynamic_write.cc). */
  class InOrderSums;
  /** A step's per-thread row buffers for its update loop, allocated before its first change (dynamic_write.cc). */
  class StepBuffers;
  /** applyGradientSums' update of every key from InOrderSums (dynamic_write.cc). */
  void updateFromSums(const WriteBatch& wb, InOrderSums& inOrder, const OptimizerParams& opt,
                      const StepBuffers& buffers);
  /** Scores unique u if it is resident (nextScore with its count, or the caller's score). */
  void touchUnique(const WriteBatch& wb, size_t u, bool explicitScores) {
    const uint32_t row = wb.rows[u];
    if (row == KeyIndex::kNoRow) return;
    const MetaView m = meta();
    m.setScore(row, explicitScores ? wb.given(u)
                                   : nextScore(config_.scorePolicy, m.score(row), wb.dedupe.count(u), wb.hasGiven(u),
                                               wb.given(u), wb.clock));
  }
  /** Writes each resident unique's value from its last occurrence, and scores it. */
  void writeLastValues(WriteBatch& wb, const float* values);
  /** findOrInsert's body under the exclusive lock: rows per unique, refused keys left absent. */
  void findOrInsertLocked(WriteBatch& wb, const int64_t* keys, size_t n, const uint64_t* scores);

  size_t dim_;
  size_t slotFloats_;
  StorageDtype storage_;
  size_t valueBytes_;  // dim values as stored, padded to 4 bytes
  size_t rowBytes_;    // valueBytes + slotFloats * 4
  size_t capCeiling_;  // maxCapacity, or kMaxRows when uncapped
  bool capped_;

  Block arena_;  // [capacity * rowFloats] floats
  Block meta_;   // [capacity] key/score records of metaStride_ bytes (MetaView)
  size_t metaStride_ = MetaView::kNarrow;
  uint64_t frequencyBound_ = 0;  // frequency policy: no score exceeds it (each write call adds 1)
  size_t size_ = 0;
  size_t capacity_ = 0;
  KeyIndex index_;
  std::atomic<uint64_t> clock_{0};
  std::atomic<uint64_t> epoch_{0};
};

/** A key in flight in a probe pipeline: its home group, the group's first fragment match (or kNoRow), its fragment. */
struct ProbeSlot {
  size_t group;
  uint32_t candidate;
  uint8_t fragment;
};

/**
 * The three stages every probe pipeline runs per key, over the table's layout copied into
 * members (kept in registers once the stages are inlined, whatever the caller stores):
 * hash (the home group asked for into kIndexTo: 3 every level, 2 L2 and beyond); candidate
 * (the home group's first fragment match, whose key/score line and values are asked for, or
 * the next group when a full home group has none); resolve (the candidate's key compared,
 * else a full probe from the home group: ~1 key in 10).
 */
template <int kIndexTo, class Prefetch>
struct DynamicTable::ProbeStages {
  KeyIndex::View idx;
  MetaView rowMeta;
  const char* arena;
  size_t stride;
  size_t rows;
  Prefetch prefetchRow;
  bool forWrite;

  ProbeStages(const DynamicTable& t, Prefetch prefetch, bool write)
      : idx(t.index_.view()), rowMeta(t.meta()), arena(t.arena()), stride(t.rowBytes()), rows(t.size_),
        prefetchRow(prefetch), forWrite(write) {}

  ES_ALWAYS_INLINE void hash(ProbeSlot& s, int64_t key) const {
    const uint64_t h = hashKey(key);
    s.group = idx.homeGroup(h);
    s.fragment = hashFragment(h);
    __builtin_prefetch(idx.group(s.group), 0, kIndexTo);
  }
  ES_ALWAYS_INLINE void candidate(ProbeSlot& s) const {
    const uint8_t* ctrl = idx.group(s.group);
    const Group group(ctrl);
    const uint32_t cand = idx.firstRow(ctrl, group.match(s.fragment));
    s.candidate = cand;
    if (cand < rows) {
      rowMeta.prefetch(prefetchRow, cand, forWrite);
      prefetchRow(arena + static_cast<size_t>(cand) * stride);
    } else if (!group.matchEmpty()) {
      // No candidate in a full home group: the key overflowed (most often into the next group) or is absent.
      __builtin_prefetch(idx.group(s.group + 1 == idx.groups ? 0 : s.group + 1), 0, kIndexTo);
    }
  }
  ES_ALWAYS_INLINE uint32_t resolve(const ProbeSlot& s, int64_t key) const {
    const MetaView m = rowMeta;
    const uint32_t c = s.candidate;
    return c < rows && m.key(c) == key ? c : idx.findRow(key, s.fragment, s.group, [m](uint32_t row) { return m.key(row); });
  }
};

template <size_t kIndexAhead, size_t kRecordAhead, int kIndexTo, class Prefetch, class Fn>
void DynamicTable::probe(const int64_t* keys, size_t begin, size_t end, bool forWrite, Prefetch prefetchRow,
                         Fn&& fn) const {
  constexpr size_t kRing = kIndexAhead < 32 ? 32 : 64;
  static_assert(kIndexAhead < kRing && kRecordAhead < kIndexAhead, "pipeline stages");
  ProbeSlot ring[kRing];
  const ProbeStages<kIndexTo, Prefetch> stage(*this, prefetchRow, forWrite);
  const size_t n = end - begin;
  for (size_t i = 0; i < n + kIndexAhead; ++i) {
    if (i < n) stage.hash(ring[i % kRing], keys[begin + i]);
    if (i >= kIndexAhead - kRecordAhead) {
      const size_t j = i - (kIndexAhead - kRecordAhead);
      if (j < n) stage.candidate(ring[j % kRing]);
    }
    if (i >= kIndexAhead) {
      const size_t j = i - kIndexAhead;
      fn(begin + j, stage.resolve(ring[j % kRing], keys[begin + j]));
    }
  }
}

}  // namespace embedstack
