// Dynamic table read path: find and lookupCombined without insertMissing, under
// the shared lock. Large batches are split over the thread pool; each chunk runs
// the prefetching probe pipeline. Read-policy scores are updated with relaxed
// atomics (see scores.h). Missing keys read their initial value; nothing is inserted.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "dynamic_table.h"
#include "hd.h"
#include "stream_copy.h"
#include "thread_pool.h"

namespace embedstack {

void DynamicTable::findInto(const int64_t* keys, size_t n, float* out, uint8_t* exists) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const ScoreClock t = lockRead(lock);
  // The stored values' lines (a float32 dim-64 row: 4), prefetched with the candidate's meta line.
  const bool passes = findInPasses();
  withRowLines(valueLines(), [&](auto prefetch) {
    if (passes) {
      findPasses(keys, n, out, exists, t, prefetch);
    } else {
      findRows(keys, n, out, exists, t, prefetch);
    }
  });
}

std::atomic<size_t> DynamicTable::findPassesFrom{DynamicTable::kFindPassesFrom};

size_t DynamicTable::readFootprint() const { return index_.bytes() + size_ * (metaStride_ + valueLines() * 64); }

bool DynamicTable::readsInPasses(size_t scale) const {
  return readFootprint() / scale >= findPassesFrom.load(std::memory_order_relaxed);
}

bool DynamicTable::bagInPasses(DynamicTable* const* tables, size_t parts) {
  size_t footprint = 0;
  for (size_t d = 0; d < parts; ++d) footprint += tables[d]->readFootprint();
  return footprint / kBagPassesScale >= findPassesFrom.load(std::memory_order_relaxed);
}

// find on a large table, chunk by chunk (kChunk keys), in passes that each wait on one kind
// of line, prefetched far ahead of its use:
//   A  the keys hashed and their home index groups asked for kIndexAhead keys ahead; each
//      group's first fragment match is the key's candidate row. A key with no match in a full
//      home group (it overflowed, or is absent; ~3.5% of hits in a presized narrow index, ~6%
//      wide: key_index.h) has its next group asked for, and that group's first match becomes
//      its candidate once the pass is done (A2).
//   B  the candidate's key/score line (and its values, for C) asked for kMetaAhead keys ahead;
//      at the key, its key is compared and its score touched. A key whose candidate is not it
//      (~4%) is set aside with the key/score lines of its home group's other matches and its
//      next group asked for, and probed in full after the pass (B2).
//   C  the rows copied into the output (absent keys: their initial values), the values asked
//      for kRowAhead keys ahead.
// PassResolver runs A to B2 (find's and the bag's: poolBagPasses); findPasses adds C.
// The probe pipeline (findRows) keeps all three kinds of lines in flight at once, 8-16 keys
// ahead, and stalls on every key whose first candidate is wrong. On this project's VM (AMD
// EPYC, 2 vCPU, guest memory in host 4 KiB pages: MEASUREMENTS.md "find at 16M keys") the passes
// measured 1.2-1.7x less CPU per key from 32K keys (dim 64) up to 16M keys (MEASUREMENTS.md "find in
// passes on large tables"); below ~8 MiB of table (everything in cache) the extra loops cost
// more than they save (0.8-0.9x at 16K keys), hence findPassesFrom. Same results and scores as
// findRows: each key's row is the one the full probe finds, and each occurrence of a resident
// key touches its score once (every occurrence of a key takes the same path, so its touches
// keep their order; different keys' scores are independent).
template <class Prefetch>
struct DynamicTable::PassResolver {
  static constexpr size_t kChunk = 1024;
  static constexpr size_t kIndexAhead = 64;
  static constexpr size_t kMetaAhead = 32;

  /** One chunk's scratch (the caller's, on its stack). */
  struct Scratch {
    ProbeSlot slot[kChunk];
    uint32_t later[kChunk];  // keys of the chunk left to A2 / B2
  };

  KeyIndex::View idx;
  MetaView rowMeta;
  const char* records;
  size_t stride;
  size_t rows;
  ReadTouch touchRead;
  Prefetch prefetchRow;

  PassResolver(const DynamicTable& table, const ScoreClock& clock, Prefetch prefetch)
      : idx(table.index_.view()), rowMeta(table.meta()), records(table.arena()), stride(table.rowBytes()),
        rows(table.size_), touchRead(table.config_.scorePolicy, clock), prefetchRow(prefetch) {}

  /** rowOf[j] = ck[j]'s row or kNoRow, j < m <= kChunk; resident keys' scores touched. */
  ES_ALWAYS_INLINE void resolve(const int64_t* ck, size_t m, uint32_t* rowOf, Scratch& scratch) const {
    withFixedStride(rowMeta, [&](auto meta) ES_ALWAYS_INLINE { resolveWith(meta, ck, m, rowOf, scratch); });
  }
  /** resolve over the records as they are laid out (their size a constant). */
  template <class Meta>
  ES_ALWAYS_INLINE void resolveWith(const Meta rowMeta, const int64_t* ck, size_t m, uint32_t* rowOf,
                                    Scratch& scratch) const {
    // Locals: kept in registers whatever the loops store.
    const KeyIndex::View idx = this->idx;
    const char* const records = this->records;
    const size_t stride = this->stride;
    const size_t rows = this->rows;
    const ReadTouch touchRead = this->touchRead;
    const bool touch = touchRead.touch;
    const Prefetch prefetchRow = this->prefetchRow;
    ProbeSlot* const slot = scratch.slot;
    uint32_t* const later = scratch.later;
    const auto keyAt = [rowMeta](uint32_t row) { return rowMeta.key(row); };
    const auto nextGroup = [&idx](size_t g) { return g + 1 == idx.groups ? 0 : g + 1; };
    const auto touchScore = [&](uint32_t row) ES_ALWAYS_INLINE { touchRead(rowMeta, row); };
    // A: index groups, candidates.
    const auto hash = [&](size_t j) ES_ALWAYS_INLINE {
      const uint64_t h = hashKey(ck[j]);
      slot[j].group = idx.homeGroup(h);
      slot[j].fragment = hashFragment(h);
      __builtin_prefetch(idx.group(slot[j].group), 0, 3);
    };
    size_t nLater = 0;
    for (size_t j = 0; j < kIndexAhead && j < m; ++j) hash(j);
    for (size_t j = 0; j < m; ++j) {
      if (j + kIndexAhead < m) hash(j + kIndexAhead);
      ProbeSlot& s = slot[j];
      const uint8_t* ctrl = idx.group(s.group);
      const Group group(ctrl);
      const BitMask match = group.match(s.fragment);
      s.candidate = idx.firstRow(ctrl, match);
      if (!match && !group.matchEmpty()) {
        __builtin_prefetch(idx.group(nextGroup(s.group)), 0, 3);
        later[nLater++] = static_cast<uint32_t>(j);
      }
    }
    // A2: an overflowed key's candidate from its next group (a hint: B compares its key).
    for (size_t o = 0; o < nLater; ++o) {
      ProbeSlot& s = slot[later[o]];
      const uint8_t* ctrl = idx.group(nextGroup(s.group));
      s.candidate = idx.firstRow(ctrl, Group(ctrl).match(s.fragment));
    }
    // B: keys compared, scores touched.
    const auto askRecord = [&](size_t j) ES_ALWAYS_INLINE {
      const uint32_t c = slot[j].candidate;
      if (c < rows) {
        rowMeta.prefetch(prefetchRow, c, touch);
        prefetchRow(records + static_cast<size_t>(c) * stride);
      }
    };
    nLater = 0;
    for (size_t j = 0; j < kMetaAhead && j < m; ++j) askRecord(j);
    for (size_t j = 0; j < m; ++j) {
      if (j + kMetaAhead < m) askRecord(j + kMetaAhead);
      const ProbeSlot& s = slot[j];
      const uint32_t c = s.candidate;
      if (c < rows && rowMeta.key(c) == ck[j]) {
        rowOf[j] = c;
        touchScore(c);
        continue;
      }
      // Not the candidate: the home group's other matches and the next group, for B2.
      const uint8_t* ctrl = idx.group(s.group);
      const Group group(ctrl);
      for (BitMask mm = group.match(s.fragment); mm; mm.dropLowest()) {
        const uint32_t x = idx.row(ctrl, mm.lowest());
        if (x < rows) rowMeta.prefetch(NoRowPrefetch{}, x, false);
      }
      if (!group.matchEmpty()) __builtin_prefetch(idx.group(nextGroup(s.group)), 0, 3);
      later[nLater++] = static_cast<uint32_t>(j);
    }
    // B2: the full probe of the keys set aside.
    for (size_t o = 0; o < nLater; ++o) {
      const size_t j = later[o];
      const ProbeSlot& s = slot[j];
      const uint32_t row = idx.findRow(ck[j], s.fragment, s.group, keyAt);
      rowOf[j] = row;
      if (row != KeyIndex::kNoRow) touchScore(row);
    }
  }
};

/** One table's part in a bag's read in passes: its resolver (over its layout, with the call's clock), dim, storage and initializer. */
template <class Prefetch>
struct DynamicTable::PassPart {
  PassResolver<Prefetch> resolver;
  const Initializer* init;
  size_t dim;
  StorageDtype storage;

  PassPart(const DynamicTable& t, const ScoreClock& clock, Prefetch prefetch)
      : resolver(t, clock, prefetch), init(&t.config_.initializer), dim(t.dim_), storage(t.storage_) {}
};

template <class Prefetch>
void DynamicTable::findPasses(const int64_t* keys, size_t n, float* out, uint8_t* exists, const ScoreClock& clock,
                              Prefetch prefetch) const {
  using Resolver = PassResolver<Prefetch>;
  constexpr size_t kChunk = Resolver::kChunk;
  constexpr size_t kRowAhead = 16;
  const bool callStream = n * dim_ * sizeof(float) >= kStreamingBytes;
  const Resolver resolver(*this, clock, prefetch);
  forEachRange(n, [&](size_t b, size_t e) {
    // Locals, as in findRows: kept in registers whatever the loops store.
    const bool stream = callStream;
    const Prefetch prefetchRow = prefetch;
    const size_t dim = dim_;
    const StorageDtype storage = storage_;
    const char* const records = arena();
    const size_t stride = rowBytes();
    typename Resolver::Scratch scratch;
    uint32_t rowOf[kChunk];
    for (size_t c0 = b; c0 < e; c0 += kChunk) {
      const size_t m = std::min(kChunk, e - c0);
      const int64_t* const ck = keys + c0;
      resolver.resolve(ck, m, rowOf, scratch);
      // C: rows copied.
      const auto askRow = [&](size_t j) ES_ALWAYS_INLINE {
        if (rowOf[j] != KeyIndex::kNoRow) prefetchRow(records + static_cast<size_t>(rowOf[j]) * stride);
      };
      for (size_t j = 0; j < kRowAhead && j < m; ++j) askRow(j);
      for (size_t j = 0; j < m; ++j) {
        if (j + kRowAhead < m) askRow(j + kRowAhead);
        float* dst = out + (c0 + j) * dim;
        const uint32_t row = rowOf[j];
        if (row != KeyIndex::kNoRow) {
          readRecordValues(storage, records + static_cast<size_t>(row) * stride, dst, dim, stream);
          exists[c0 + j] = 1;
        } else {
          initialValue(ck[j], dst);
          exists[c0 + j] = 0;
        }
      }
    }
    if (stream) streamFence();
  });
}

template <class Prefetch>
void DynamicTable::findRows(const int64_t* keys, size_t n, float* out, uint8_t* exists, const ScoreClock& clock,
                            Prefetch prefetch) const {
  const ScorePolicy callPolicy = config_.scorePolicy;
  const bool callStream = n * dim_ * sizeof(float) >= kStreamingBytes;
  forEachRange(n, [&](size_t b, size_t e) {
    // Everything the per-key body reads, as locals of this range: members and captured
    // references would be reloaded after every row copy (it may write any memory, as far as
    // the compiler knows). Measured: 4-8% of a dim-64 find (MEASUREMENTS.md, Nov 28 2026).
    // lru / epochLru (the default): the call's score, worked out once.
    const ReadTouch touchRead(callPolicy, clock);
    const bool touch = touchRead.touch;
    const bool stream = callStream;
    const Prefetch prefetchRow = prefetch;
    const size_t dim = dim_;
    const StorageDtype storage = storage_;
    const char* const records = arena();
    const size_t stride = rowBytes();
    const MetaView rowMeta = meta();
    probe(keys, b, e, touch, prefetchRow, [&](size_t i, uint32_t row) {
      float* dst = out + i * dim;
      if (row != KeyIndex::kNoRow) {
        readRecordValues(storage, records + static_cast<size_t>(row) * stride, dst, dim, stream);
        exists[i] = 1;
        touchRead(rowMeta, row);
      } else {
        initialValue(keys[i], dst);
        exists[i] = 0;
      }
    });
    if (stream) streamFence();
  });
}

/**
 * Shared lock and one call's clock; lend probes a batch and touches what it finds. A lease never
 * widens the records: its caller may hold other tables' leases (lookupCombinedShards takes one per
 * part, in part order), and waiting for an exclusive lock then could deadlock against a call
 * taking the same tables in another order. When they would have to widen, it does not lend
 * (lends() false, the lock let go) and the caller reads through findInto. Its clock is taken by
 * begin(), once every part's lease is in hand (a call that falls back spends no clock twice).
 */
class DynamicTable::Lease final : public RowLease {
 public:
  explicit Lease(DynamicTable& t) : t_(t), lock_(t.mutex_), touchRead_(t.config_.scorePolicy, {}) {
    t.checkAlive();
    lends_ = t.readFits(&epoch_);
    if (!lends_) lock_.unlock();
  }
  bool lends() const { return lends_; }
  void begin() override {
    touchRead_ = ReadTouch(t_.config_.scorePolicy, t_.beginRead(epoch_));
    touch_ = touchRead_.touch;
  }

  void lend(const int64_t* keys, size_t n, const float** rows, std::vector<float>& initial, bool prefetchRows) override {
    std::vector<size_t> missing;
    const MetaView meta = t_.meta();
    const auto found = [&](size_t i, uint32_t row) {
      if (row != KeyIndex::kNoRow) {
        rows[i] = static_cast<const float*>(t_.valuesOf(row));
        touchRead_(meta, row);
      } else {
        missing.push_back(i);
      }
    };
    if (prefetchRows) {
      // As the bag's resolver (poolBag): index groups 48 keys ahead, the candidate's
      // key/score line and its values 24 ahead, all into L2.
      withRowLines(t_.valueLines(), [&](auto prefetch) { t_.probe<48, 24, 2>(keys, 0, n, touch_, prefetch, found); });
    } else {
      t_.probe(keys, 0, n, touch_, NoRowPrefetch{}, found);  // key/score lines only: the reader prefetches the rows
    }
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
  ReadTouch touchRead_;
  bool touch_ = false;
  bool lends_ = false;
  uint64_t epoch_ = 0;  // the epoch readFits checked (begin's clock)
};

std::unique_ptr<RowLease> DynamicTable::leaseRows() {
  if (!wide()) return nullptr;
  auto lease = std::make_unique<Lease>(*this);
  if (!lease->lends()) return nullptr;  // the records must widen first: the caller reads through findInto
  return lease;
}

namespace {

// Entry rows of one span of a bag (rows[j - eb] is entry j's), plus the initial values of
// its missing keys (stored as the table stores values, so every row of the span has one type).
struct SpanRows {
  std::vector<const void*> rows;
  std::vector<size_t> missing;  // entries whose key is absent (or refused), in order
  std::vector<float> initial;   // [missing * dim] (float32: 4 bytes per value is room for any storage type)

  /**
   * Gives the missing entries before `limit` their initial values (fill(key, wide [dim]):
   * the value of the entry's key, stored rounded to `storage`); later ones stay listed.
   */
  template <class Fill>
  void fillMissing(const BagInput& bag, size_t eb, size_t dim, StorageDtype storage, const Fill& fill,
                   size_t limit = SIZE_MAX) {
    size_t count = 0;
    while (count < missing.size() && missing[count] < limit) ++count;
    if (count == 0) return;
    initial.resize(count * dim);
    std::vector<float> wide(dim);
    const size_t stride = dim * storageBytes(storage);
    char* base = reinterpret_cast<char*>(initial.data());
    for (size_t k = 0; k < count; ++k) {
      fill(bag.keys[missing[k]], wide.data());
      storeValues(storage, wide.data(), base + k * stride, dim);
      rows[missing[k] - eb] = base + k * stride;
    }
    missing.erase(missing.begin(), missing.begin() + static_cast<std::ptrdiff_t>(count));
  }
};

constexpr size_t kBagSpanEntries = 2048;

}  // namespace

void DynamicTable::lookupCombinedInto(const BagInput& bag, Combiner combiner, double maxNorm, bool insertMissing,
                                      float* out) {
  if (insertMissing) {
    // Exactly findOrInsert on the bag's keys, then the reduction over their rows. Not all or
    // nothing for memory: the reduction's buffers (acc, SpanRows, the narrow kernel's widened
    // rows) are allocated after the insert, so a std::bad_alloc there leaves the keys inserted.
    ScratchRelease release(bag.n);
    std::unique_lock<std::shared_mutex> lock(mutex_);
    checkAlive();
    WriteBatch wb;
    findOrInsertLocked(wb, bag.keys, bag.n, nullptr);
    const auto fill = [&](int64_t key, float* wide) { config_.initializer.fill(key, 0, dim_, wide); };
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
        span.fillMissing(bag, eb, dim_, storage_, fill);
        combineBagRows({bag.rowSplits, r0, r1, span.rows.data(), eb, bag.weights, combiner, maxNorm, dim_, out,
                        acc.data(), storage_});
      });
    });
    return;
  }

  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  const ScoreClock t = lockRead(lock);
  const bool passes = bagInPasses();
  withRowLines(valueLines(), [&](auto prefetch) {
    if (passes) {
      const PassPart<decltype(prefetch)> part(*this, t, prefetch);
      forEachBagRange(bag, [&](size_t rb, size_t re) { poolBagPasses(&part, nullptr, bag, rb, re, combiner, maxNorm, out); });
    } else {
      const OnePart<decltype(prefetch)> part{{*this, t, prefetch}};
      forEachBagRange(bag, [&](size_t rb, size_t re) { poolBag(part, bag, rb, re, combiner, maxNorm, out); });
    }
  });
}

/**
 * One table's state in a bag's read, fixed for the call (the table's read lock held): its
 * probe stages over its layout, its read-score policy and the call's score, its dim,
 * storage and initializer.
 */
template <class Prefetch>
struct DynamicTable::BagPart {
  ProbeStages<2, Prefetch> stage;
  const Initializer* init;
  size_t dim;
  StorageDtype storage;
  ReadTouch touchRead;

  BagPart(const DynamicTable& t, const ScoreClock& c, Prefetch prefetch)
      : stage(t, prefetch, scoresOnRead(t.config_.scorePolicy)), init(&t.config_.initializer), dim(t.dim_),
        storage(t.storage_), touchRead(t.config_.scorePolicy, c) {}

  /** A found row's record, its score touched as a read touches it. */
  ES_ALWAYS_INLINE const void* take(uint32_t row) const {
    touchRead(stage.rowMeta, row);
    return stage.arena + static_cast<size_t>(row) * stage.stride;
  }
  /** A missing key's initial value (float32, before storage rounding). */
  void fill(int64_t key, float* wide) const { init->fill(key, 0, dim, wide); }
};

/** The parts of one table's bag: every key its own, under itself. */
template <class Prefetch>
struct DynamicTable::OnePart {
  using Slot = ProbeSlot;
  BagPart<Prefetch> only;

  const BagPart<Prefetch>& first() const { return only; }
  ES_ALWAYS_INLINE int64_t own(Slot&, int64_t key) const { return key; }
  ES_ALWAYS_INLINE const BagPart<Prefetch>& at(const Slot&) const { return only; }
  ES_ALWAYS_INLINE int64_t local(const Slot&, int64_t key) const { return key; }
  const BagPart<Prefetch>& ownerOf(int64_t key, int64_t* local) const {
    *local = key;
    return only;
  }
};

/** A key in flight in a bag over parts: its probe slot and owning part (a pointer: no multiply at each stage). */
template <class Part>
struct OwnedSlot : ProbeSlot {
  const Part* part;
};

/**
 * The parts of a bag split over tables by residue (ResidueOwners, not round-robin): each
 * key its owner's, under itself.
 */
template <class Prefetch>
struct DynamicTable::ResidueParts {
  using Slot = OwnedSlot<BagPart<Prefetch>>;
  const BagPart<Prefetch>* parts;
  ResidueOwners owners;

  const BagPart<Prefetch>& first() const { return parts[0]; }
  ES_ALWAYS_INLINE int64_t own(Slot& s, int64_t key) const {
    int64_t local;
    s.part = parts + owners.owner(key, &local);
    return key;
  }
  ES_ALWAYS_INLINE const BagPart<Prefetch>& at(const Slot& s) const { return *s.part; }
  ES_ALWAYS_INLINE int64_t local(const Slot&, int64_t key) const { return key; }
  const BagPart<Prefetch>& ownerOf(int64_t key, int64_t* local) const { return parts[owners.owner(key, local)]; }
};

// The read path of a bag. Each entry's key goes through three stages, like find's probe
// (dynamic_table.h), in the table of its owning part (one table: itself): its owner, hash
// and home index group (prefetched), kIndexAhead entries before it is resolved; the group's
// first fragment match, the candidate, whose key/score line and values are prefetched,
// kRecordAhead entries before; then the candidate's key compared (a full probe when it
// differs) and the owner's score touched. The pooling kernel (combineBagRows) runs on
// chunks of about kChunk entries, each once its entries and the next kLead are resolved,
// so the rows it reads were asked for a few hundred entries earlier and are in L2, and its
// own prefetches (rows into L2 6 KiB ahead, into L1 a third of that) find them there. Every
// prefetch of the resolution goes into L2 only: a bag keeps index, key/score and row lines
// in flight at once, more than L1's miss buffers hold. Each row's entries are pooled in bag
// order whatever their owners: one table's bag, bit for bit, over any number of parts.
//
// Before Nov 28 2026 a span of 2048 keys was probed (index and key/score lines into L1),
// then pooled: the probe's misses and the kernel's did not overlap. Measured on a 1M x 64
// float32 table, 2.13M ids in bags of 20: 1.3x less CPU (MEASUREMENTS.md). Before Nov 29
// 2026 a bag over several tables (lookupCombinedShards) sorted each span's keys by owner,
// probed each part's keys in its own pipeline (restarted per span of 512 entries), then
// gathered the rows in bag order: 0.77x one table's bag on the same keys (one part).
template <class Parts>
void DynamicTable::poolBag(const Parts& partsArg, const BagInput& bag, size_t rb, size_t re, Combiner combiner,
                           double maxNorm, float* out) {
  constexpr size_t kIndexAhead = 48;
  constexpr size_t kRecordAhead = 24;
  constexpr size_t kRing = 64;
  constexpr size_t kChunk = 512;
  constexpr size_t kLead = 32;
  static_assert(kRecordAhead < kIndexAhead && kIndexAhead < kRing, "pipeline stages");
  typename Parts::Slot ring[kRing];
  // Locals, so that the loops keep them in registers whatever they store.
  const Parts parts = partsArg;
  const int64_t* const keys = bag.keys;
  const int32_t* const splits = bag.rowSplits;
  const size_t dim = parts.first().dim;
  const StorageDtype storage = parts.first().storage;

  const size_t begin = static_cast<size_t>(splits[rb]);
  const size_t end = static_cast<size_t>(splits[re]);
  SpanRows span;  // span.rows[j - base]: entry j's row, for entries [base, resolved)
  span.rows.resize(kChunk + kLead);
  size_t base = begin;
  const void** window = span.rows.data();

  auto hashStage = [&](size_t j) ES_ALWAYS_INLINE {
    auto& s = ring[j % kRing];
    const int64_t local = parts.own(s, keys[j]);
    parts.at(s).stage.hash(s, local);
  };
  auto candidateStage = [&](size_t j) ES_ALWAYS_INLINE {
    auto& s = ring[j % kRing];
    parts.at(s).stage.candidate(s);
  };
  auto resolveStage = [&](size_t j) ES_ALWAYS_INLINE {
    const auto& s = ring[j % kRing];
    const auto& part = parts.at(s);
    const uint32_t row = part.stage.resolve(s, parts.local(s, keys[j]));
    if (row != KeyIndex::kNoRow) {
      window[j - base] = part.take(row);
    } else {
      window[j - base] = nullptr;
      span.missing.push_back(j);
    }
  };
  const auto fill = [&](int64_t key, float* wide) {
    int64_t local = 0;
    parts.ownerOf(key, &local).fill(local, wide);
  };

  for (size_t j = begin; j < begin + kIndexAhead && j < end; ++j) hashStage(j);
  for (size_t j = begin; j < begin + kRecordAhead && j < end; ++j) candidateStage(j);
  size_t resolved = begin;
  std::vector<double> acc(dim);
  size_t r0 = rb;
  while (r0 < re) {
    // The chunk: bag rows [r0, r1), entries [e0, e1), never a bag row split.
    const size_t e0 = static_cast<size_t>(splits[r0]);
    size_t r1 = r0 + 1;
    while (r1 < re && static_cast<size_t>(splits[r1 + 1]) - e0 <= kChunk) ++r1;
    const size_t e1 = static_cast<size_t>(splits[r1]);
    const size_t upTo = e1 + kLead < end ? e1 + kLead : end;
    if (upTo - base > span.rows.size()) {
      // Slide the window to the chunk (entries before e0 are pooled), grown for a bag row past kChunk.
      std::memmove(span.rows.data(), span.rows.data() + (e0 - base), (resolved - e0) * sizeof(const void*));
      base = e0;
      if (upTo - base > span.rows.size()) span.rows.resize(upTo - base);
      window = span.rows.data();
    }
    // Resolve up to upTo: without bound checks while every stage's entry is in the range.
    const size_t steady = end > kIndexAhead ? std::min(upTo, end - kIndexAhead) : 0;
    for (; resolved < steady; ++resolved) {
      hashStage(resolved + kIndexAhead);
      candidateStage(resolved + kRecordAhead);
      resolveStage(resolved);
    }
    for (; resolved < upTo; ++resolved) {
      if (resolved + kIndexAhead < end) hashStage(resolved + kIndexAhead);
      if (resolved + kRecordAhead < end) candidateStage(resolved + kRecordAhead);
      resolveStage(resolved);
    }
    span.fillMissing(bag, base, dim, storage, fill, e1);
    combineBagRows({splits, r0, r1, span.rows.data(), base, bag.weights, combiner, maxNorm, dim, out, acc.data(),
                    storage});
    r0 = r1;
  }
}

/** leaseBag's lease: each table's read lock, taken in part order, and its part of the read. */
template <class Prefetch>
class DynamicTable::PartsLease final : public BagLease {
 public:
  PartsLease(DynamicTable* const* tables, size_t parts, const ResidueOwners& owners, Prefetch prefetch)
      : owners_(owners) {
    locks_.reserve(parts);
    std::vector<ScoreClock> clocks;
    clocks.reserve(parts);
    // Every lock taken and every table's fit checked before any clock: a table whose records
    // must widen first makes the lease let every lock go, widen it (holding no other lock) and
    // start again, so no clock is spent and no read waits for an exclusive lock while holding one.
    std::vector<uint64_t> epochs(parts);
    for (;;) {
      DynamicTable* widens = nullptr;
      for (size_t d = 0; d < parts && widens == nullptr; ++d) {
        DynamicTable& t = *tables[d];
        locks_.emplace_back(t.mutex_);
        t.checkAlive();
        if (!t.readFits(&epochs[d])) widens = &t;
      }
      if (widens == nullptr) break;
      locks_.clear();
      std::unique_lock<std::shared_mutex> exclusive(widens->mutex_);
      widens->checkAlive();
      widens->widen();
    }
    for (size_t d = 0; d < parts; ++d) clocks.push_back(tables[d]->beginRead(epochs[d]));
    // In passes when the tables together are as large as one table's bag in passes (the
    // bag's lines are random over all of them alike), for up to kMaxPassParts parts (each
    // has a bucket of 1024 keys and rows per chunk).
    if (parts <= kMaxPassParts && bagInPasses(tables, parts)) {
      passParts_.reserve(parts);
      for (size_t d = 0; d < parts; ++d) passParts_.emplace_back(*tables[d], clocks[d], prefetch);
    } else {
      parts_.reserve(parts);
      for (size_t d = 0; d < parts; ++d) parts_.emplace_back(*tables[d], clocks[d], prefetch);
    }
  }

  static constexpr size_t kMaxPassParts = 64;

  void pool(const BagInput& bag, size_t r0, size_t r1, Combiner combiner, double maxNorm, float* out) const override {
    const bool one = locks_.size() == 1 && owners_.n == 1;
    if (!passParts_.empty()) {
      poolBagPasses(passParts_.data(), one ? nullptr : &owners_, bag, r0, r1, combiner, maxNorm, out);
    } else if (one) {
      poolBag(OnePart<Prefetch>{parts_[0]}, bag, r0, r1, combiner, maxNorm, out);
    } else {
      poolBag(ResidueParts<Prefetch>{parts_.data(), owners_}, bag, r0, r1, combiner, maxNorm, out);
    }
  }

 private:
  std::vector<std::shared_lock<std::shared_mutex>> locks_;
  ResidueOwners owners_;
  std::vector<BagPart<Prefetch>> parts_;      // the pipeline (poolBag)
  std::vector<PassPart<Prefetch>> passParts_;  // or the passes (poolBagPasses)
};

std::unique_ptr<BagLease> DynamicTable::leaseBag(Table* const* tables, size_t parts, const ResidueOwners& owners) {
  if (owners.roundRobin) return nullptr;  // a dynamic table's keys are its own (round-robin rows are static tables')
  std::vector<DynamicTable*> dynamic(parts);
  for (size_t d = 0; d < parts; ++d) {
    auto* t = dynamic_cast<DynamicTable*>(tables[d]);
    if (t == nullptr || t->dim_ != dim_ || t->storage_ != storage_) return nullptr;
    dynamic[d] = t;
  }
  std::unique_ptr<BagLease> lease;
  withRowLines(valueLines(), [&](auto prefetch) {
    lease = std::make_unique<PartsLease<decltype(prefetch)>>(dynamic.data(), parts, owners, prefetch);
  });
  return lease;
}

// The read path of a dynamic bag on a large table (bagInPasses): bag rows in chunks of about
// kBagChunk entries (a bag row is never split; one longer than PassResolver::kChunk is resolved
// in pieces), each chunk's keys resolved to rows by find's passes A to B2 (PassResolver: index
// groups, then key/score lines with the rows asked into L2, the resident keys' scores touched),
// then pooled by combineBagRows while its rows are in L2 (1024 float32 dim-64 rows: 256 KiB).
// Missing keys read their initial values, as in poolBag. Same rows, sums and scores as
// poolBag; measured against poolBag 1.13-1.16x less CPU at 256K keys, 1.34-1.40x at 1M,
// 1.46-1.53x at 4M (MEASUREMENTS.md "Dynamic bag in passes on large tables"). Asking only for the
// key/score lines in pass B and leaving the rows to the kernel's own prefetch measured
// 1.05-1.2x slower; chunks of 512 or 2048 entries slightly slower than 1024.
// The bag over several shard tables (leaseBag, PartsLease::pool: sok's forward) takes the same
// path when the tables together are that large: each chunk's keys go to their owner's bucket
// in bag order, each bucket through its owner's resolver (its index, lines and scores), and
// the rows back in bag order, so the pooled values are one table's bag. Measured at 1M keys
// split over 2 / 4 tables: 1.33-1.42x less CPU than their pipeline (poolBag<ResidueParts>), 1.1-1.3x
// of one table's passes (MEASUREMENTS.md "The shards bag in passes on large tables").
template <class Prefetch>
void DynamicTable::poolBagPasses(const PassPart<Prefetch>* parts, const ResidueOwners* owners, const BagInput& bag,
                                 size_t rb, size_t re, Combiner combiner, double maxNorm, float* out) {
  using Resolver = PassResolver<Prefetch>;
  constexpr size_t kChunk = Resolver::kChunk;
  constexpr size_t kBagChunk = 1024;
  constexpr int kPieceShift = 10;
  constexpr size_t kPiece = size_t{1} << kPieceShift;
  const PassPart<Prefetch>& first = parts[0];
  const size_t dim = first.dim;
  const StorageDtype storage = first.storage;
  typename Resolver::Scratch scratch;
  std::vector<uint32_t> rowOf(kBagChunk);
  SpanRows span;
  std::vector<double> acc(dim);
  // Over several tables, a span in pieces of at most kPiece entries (more only for a long bag
  // row): the piece's keys grouped by owner in bag order, part d's in bucket d (grouped[d <<
  // kPieceShift ...), each bucket resolved by its part's passes back to back as one table's
  // keys (bucketRows, bucket by bucket); slotOf[j]: entry j's place in both. Parts 0..n-1 owning
  // residues 0..n-1 (sok's placement) with n a power of two find the owner in the key's low bits.
  // The buckets are not cleared: a piece reads only the slots it wrote (until Nov 29 2026,
  // stop 31, each call zero-filled all of them, 12 KiB a part: 768 KiB at 64 parts).
  std::vector<uint32_t> slotOf;
  std::vector<uint32_t> filled;
  std::vector<const char*> partRecords;
  std::vector<size_t> partStrides;
  bool lowBits = false;
  if (owners != nullptr) {
    size_t count = 0;
    lowBits = owners->mask >= 0;
    for (int64_t r = 0; r < owners->n; ++r) {
      count = std::max<size_t>(count, owners->part[r] + 1);
      lowBits = lowBits && owners->part[r] == static_cast<uint32_t>(r);
    }
    filled.resize(count);
    for (size_t d = 0; d < count; ++d) {
      partRecords.push_back(parts[d].resolver.records);
      partStrides.push_back(parts[d].resolver.stride);
    }
  }
  const size_t count = filled.size();
  const uint64_t mask = lowBits ? static_cast<uint64_t>(owners->mask) : 0;
  ScratchArray<int64_t> grouped(count << kPieceShift);
  ScratchArray<uint32_t> bucketRows(count << kPieceShift);
  if (owners != nullptr) slotOf.resize(kPiece);
  uint32_t* const fillAt = filled.data();
  int64_t* const g = grouped.data();
  uint32_t* const bucketRow = bucketRows.data();
  uint32_t* const slots = slotOf.data();
  const char* const* const records = partRecords.data();
  const size_t stride = first.resolver.stride;
  const auto fill = [&](int64_t key, float* wide) {
    int64_t local = key;
    const PassPart<Prefetch>& p = owners == nullptr ? first : parts[owners->owner(key, &local)];
    p.init->fill(local, 0, dim, wide);
  };
  forEachBagSpan(bag, rb, re, kBagChunk, [&](size_t r0, size_t r1) {
    const size_t e0 = static_cast<size_t>(bag.rowSplits[r0]);
    const size_t m = static_cast<size_t>(bag.rowSplits[r1]) - e0;
    const int64_t* const keys = bag.keys + e0;
    span.rows.resize(m);
    const void** const rows = span.rows.data();
    const auto place = [&](size_t j, const char* base, size_t rowStride, uint32_t row) ES_ALWAYS_INLINE {
      if (row != KeyIndex::kNoRow) {
        rows[j] = base + static_cast<size_t>(row) * rowStride;
      } else {
        rows[j] = nullptr;
        span.missing.push_back(e0 + j);
      }
    };
    if (owners == nullptr) {
      if (rowOf.size() < m) rowOf.resize(m);
      for (size_t c = 0; c < m; c += kChunk) first.resolver.resolve(keys + c, std::min(kChunk, m - c), rowOf.data() + c, scratch);
      const char* const base = first.resolver.records;
      for (size_t j = 0; j < m; ++j) place(j, base, stride, rowOf[j]);
    } else {
      for (size_t p0 = 0; p0 < m; p0 += kPiece) {
        const size_t pm = std::min(kPiece, m - p0);
        const int64_t* const pk = keys + p0;
        std::fill(filled.begin(), filled.end(), 0);
        if (lowBits) {
          for (size_t j = 0; j < pm; ++j) {
            const size_t d = static_cast<uint64_t>(pk[j]) & mask;
            const uint32_t slot = static_cast<uint32_t>((d << kPieceShift) + fillAt[d]++);
            g[slot] = pk[j];
            slots[j] = slot;
          }
        } else {
          for (size_t j = 0; j < pm; ++j) {
            int64_t local;
            const size_t d = owners->owner(pk[j], &local);
            const uint32_t slot = static_cast<uint32_t>((d << kPieceShift) + fillAt[d]++);
            g[slot] = pk[j];
            slots[j] = slot;
          }
        }
        for (size_t d = 0; d < count; ++d) {
          const size_t b = d << kPieceShift;
          for (size_t c = 0; c < fillAt[d]; c += kChunk) {
            parts[d].resolver.resolve(g + b + c, std::min<size_t>(kChunk, fillAt[d] - c), bucketRow + b + c, scratch);
          }
        }
        for (size_t j = 0; j < pm; ++j) {
          const size_t d = slots[j] >> kPieceShift;
          place(p0 + j, records[d], partStrides[d], bucketRow[slots[j]]);
        }
      }
    }
    span.fillMissing(bag, e0, dim, storage, fill);
    combineBagRows({bag.rowSplits, r0, r1, span.rows.data(), e0, bag.weights, combiner, maxNorm, dim, out,
                    acc.data(), storage});
  });
}

}  // namespace embedstack
