#include "planned_ops.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "combine_plan.h"
#include "memory.h"
#include "thread_pool.h"

namespace embedstack {

namespace {

/**
 * Per-thread scratch that keeps its memory between calls (page faults and zero fills
 * of a fresh multi-megabyte buffer cost more than the work on it). Buffers above
 * kKeepBytes are freed after the call. Contents are undefined on return.
 */
class Scratch {
 public:
  enum Slot { kRows = 0, kFound = 1, kSlots = 2 };
  static float* floats(Slot slot, size_t n) { return static_cast<float*>(bytes(slot, checkedMul(n, sizeof(float), "scratch"))); }
  /** Frees the slots grown past kKeepBytes (called when a call ends). */
  struct Trim {
    ~Trim() {
      for (Buffer& b : buffers()) {
        if (b.size > kKeepBytes) b = Buffer{};
      }
    }
  };

 private:
  static constexpr size_t kKeepBytes = size_t{32} << 20;
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  static std::array<Buffer, kSlots>& buffers() {
    thread_local std::array<Buffer, kSlots> b;
    return b;
  }
  static void* bytes(Slot slot, size_t n) {
    Buffer& b = buffers()[slot];
    if (b.size < n) {
      b.data.reset(new char[n]);
      b.size = n;
    }
    return b.data.get();
  }
};

/** The entries a shard owns: positions in the batch (ascending) and local keys. */
struct Owned {
  HostArray<uint32_t> positions;
  HostArray<int64_t> local;
  size_t n = 0;

  size_t count() const { return n; }
};

/**
 * The owned entries of keys [n]. Branch-free: every entry is written at the cursor,
 * which advances only for owned ones (ownership by key is a coin toss per entry, a
 * branch on it mispredicts half the time).
 */
Owned ownedEntries(const int64_t* keys, size_t n, const ShardPlan& plan) {
  Owned o;
  o.positions.allocate(n);
  o.local.allocate(n);
  uint32_t* pos = o.positions.data();
  int64_t* local = o.local.data();
  size_t m = 0;
  const int64_t shards = plan.numShards;
  if (plan.kind == ShardPlan::kMod && shards > 0 && (shards & (shards - 1)) == 0) {
    // A power of two: floorMod is the low bits, floor(k / N) an arithmetic shift (ShardPlan::owns).
    const int64_t mask = shards - 1;
    const int shift = __builtin_ctzll(static_cast<unsigned long long>(shards));
    for (size_t i = 0; i < n; ++i) {
      const int64_t k = keys[i];
      pos[m] = static_cast<uint32_t>(i);
      local[m] = plan.roundRobin ? (k >> shift) : k;
      m += (k & mask) == plan.shard ? 1 : 0;
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      int64_t l = 0;
      const bool own = plan.owns(keys[i], &l);
      pos[m] = static_cast<uint32_t>(i);
      local[m] = l;
      m += own ? 1 : 0;
    }
  }
  o.n = m;
  return o;
}

/** The owned entries' keys and positions for a bag: the bag itself (no copy, no positions) when the plan owns everything. */
struct BagOwnership {
  Owned owned;
  const int64_t* local;
  size_t count;
  const uint32_t* positions;
};

BagOwnership bagOwnership(const BagInput& bag, const ShardPlan& plan) {
  BagOwnership b;
  if (plan.all()) {
    b.local = bag.keys;
    b.count = bag.n;
    b.positions = nullptr;
    return b;
  }
  b.owned = ownedEntries(bag.keys, bag.n, plan);
  b.local = b.owned.local.data();
  b.count = b.owned.count();
  b.positions = b.owned.positions.data();
  return b;
}

std::vector<double> denominators(const BagInput& bag, Combiner c) {
  std::vector<double> d(bag.rows);
  bagDenominators(bag.rowSplits, bag.weights, 0, bag.rows, c, d.data());
  return d;
}

/** The owned entries' rows (find, or findOrInsert when `insert`) into this thread's row scratch [count * dim]. */
const float* readRows(Table& t, const int64_t* local, size_t count, bool insert) {
  const size_t dim = t.config().dim;
  float* rows = Scratch::floats(Scratch::kRows, checkedMul(count, dim, "the rows of a planned lookup"));
  std::vector<uint8_t> exists(count);
  if (insert) {
    t.findOrInsertInto(local, count, nullptr, rows, exists.data());
  } else {
    t.findInto(local, count, rows, exists.data());
  }
  return rows;
}

PlanSpan spanOf(const BagInput& bag, const BagOwnership& b, const float* rows, const double* denom, double maxNorm,
                size_t dim, size_t r0, size_t r1) {
  return PlanSpan{bag.rowSplits, r0, r1, bag.weights, b.positions, b.count, rows, denom, maxNorm, dim};
}

}  // namespace

void plannedFind(Table& t, const int64_t* keys, size_t n, const ShardPlan& plan, bool insert, const uint64_t* scores,
                 float* values, uint8_t* exists) {
  if (auto* own = dynamic_cast<PlannedOps*>(&t)) return own->plannedFind(keys, n, plan, insert, scores, values, exists);
  const size_t dim = t.config().dim;
  if (plan.all()) {
    if (insert) {
      t.findOrInsertInto(keys, n, scores, values, exists);
    } else {
      t.findInto(keys, n, values, exists);
    }
    return;
  }
  ScratchRelease release(n);
  Scratch::Trim trim;
  Owned o = ownedEntries(keys, n, plan);
  const size_t m = o.count();
  float* v = Scratch::floats(Scratch::kFound, checkedMul(m, dim, "find values"));
  std::vector<uint8_t> e(m);
  if (insert) {
    std::vector<uint64_t> s;
    if (scores) {
      s.resize(m);
      for (size_t i = 0; i < m; ++i) s[i] = scores[o.positions[i]];
    }
    t.findOrInsertInto(o.local.data(), m, scores ? s.data() : nullptr, v, e.data());
  } else {
    t.findInto(o.local.data(), m, v, e.data());
  }
  for (size_t i = 0; i < m; ++i) {
    std::memcpy(values + static_cast<size_t>(o.positions[i]) * dim, v + i * dim, dim * sizeof(float));
    exists[o.positions[i]] = e[i];
  }
}

void lookupCombinedPartial(Table& t, const BagInput& bag, Combiner c, double maxNorm, bool insert,
                           const ShardPlan& plan, double* out) {
  if (auto* own = dynamic_cast<PlannedOps*>(&t)) return own->lookupCombinedPartial(bag, c, maxNorm, insert, plan, out);
  const size_t dim = t.config().dim;
  ScratchRelease release(bag.n);
  Scratch::Trim trim;
  const std::vector<double> denom = denominators(bag, c);
  const BagOwnership b = bagOwnership(bag, plan);
  const auto pool = [&](const float* rows, const float* const* lent) {
    forEachBagRange(bag, [&](size_t r0, size_t r1) {
      std::vector<double> acc(dim);
      PlanSpan s = spanOf(bag, b, rows, denom.data(), maxNorm, dim, r0, r1);
      s.rowPtrs = lent;
      s.lent = lent ? b.count : 0;
      combinePartialRows(s, out, acc.data());
    });
  };
  // Without inserts (a static table's findOrInsert is find), pool straight from the table's
  // rows when it lends them (no copy).
  const bool reads = !insert || t.config().isStatic;
  if (reads && t.withRows(b.local, b.count, [&](const float* const* lent) { pool(nullptr, lent); })) return;
  pool(readRows(t, b.local, b.count, insert), nullptr);
}

namespace {

/** Bags this small run on the calling thread (waking a helper costs more). */
constexpr size_t kShardsParallelMin = 4096;
/** Entries per chunk of bag rows that one thread pools over every shard, at most. */
constexpr size_t kShardsChunkMax = 8192;
/** Entries a bag-order chunk lends and pools at a time (rows of dim 64 float32: 128 KiB, well inside L2). */
constexpr size_t kLentSpanEntries = 512;
/** Per-thread chunk buffers above this size are freed after the call. */
constexpr size_t kShardsKeepBytes = size_t{8} << 20;

/**
 * Owning shard of every key when the plans split keys by floorMod over one N (each
 * residue owned by at most one part, none by two): part[floorMod(k, N)] = the part
 * owning k, or `parts` (no part). Then one pass over a chunk's keys sorts its entries
 * by owner. Any other set of plans: each part scans the chunk with its own plan.
 */
struct ModOwners {
  bool ok = false;
  int64_t n = 1;
  bool roundRobin = false;
  /** Every residue has an owner: each key of any bag has exactly one owning part. */
  bool complete = false;
  std::vector<uint32_t> part;

  /** The owners as a view of `part` (valid while this lives; `ok` only). */
  ResidueOwners view() const { return ResidueOwners(part.data(), n, roundRobin); }
};

ModOwners modOwners(const ShardPlan* plans, size_t parts) {
  ModOwners m;
  constexpr int64_t kMaxResidues = 4096;
  const int64_t n = plans[0].numShards;
  if (plans[0].kind != ShardPlan::kMod || n < 1 || n > kMaxResidues) return m;
  m.part.assign(static_cast<size_t>(n), static_cast<uint32_t>(parts));
  for (size_t d = 0; d < parts; ++d) {
    const ShardPlan& p = plans[d];
    if (p.kind != ShardPlan::kMod || p.numShards != n || p.roundRobin != plans[0].roundRobin) return m;
    if (p.shard < 0 || p.shard >= n) continue;  // owns nothing
    uint32_t& owner = m.part[static_cast<size_t>(p.shard)];
    if (owner != parts) return m;  // two parts own the same keys
    owner = static_cast<uint32_t>(d);
  }
  m.ok = true;
  m.n = n;
  m.roundRobin = plans[0].roundRobin;
  m.complete = std::find(m.part.begin(), m.part.end(), static_cast<uint32_t>(parts)) == m.part.end();
  return m;
}

/**
 * Whether each key of `bag` has an owning part (mod.ok): always when every residue has
 * one, else one pass over the keys (int64: the shards' bags are widened, as ownChunk
 * reads them). Residues without a part: sok's static variables of fewer rows than
 * devices (a device of no rows holds no table), whose valid rows all fall on owned residues.
 */
bool ownsEveryKey(const ModOwners& mod, const BagInput& bag, size_t parts) {
  if (mod.complete) return true;
  const ResidueOwners owners = mod.view();
  int64_t local;
  for (size_t i = 0; i < bag.n; ++i) {
    if (owners.owner(bag.keys[i], &local) == parts) return false;
  }
  return true;
}

/** One chunk's entries sorted by owning part: part d's are [begin[d], begin[d] + count[d]) of positions / local. */
struct ChunkOwnership {
  std::vector<uint32_t> positions;
  std::vector<int64_t> local;
  std::vector<size_t> begin;
  std::vector<size_t> count;
};

/** Entries [e0, e1) of keys by owning part (ascending positions within each part). */
void ownChunk(const int64_t* keys, size_t e0, size_t e1, const ShardPlan* plans, size_t parts, const ModOwners& mod,
              ChunkOwnership& o) {
  const size_t m = e1 - e0;
  o.begin.assign(parts + 1, 0);
  o.count.assign(parts + 1, 0);
  if (mod.ok) {
    // One pass: each entry lands at its owner's cursor (part `parts` collects the unowned).
    o.positions.resize((parts + 1) * m);
    o.local.resize((parts + 1) * m);
    for (size_t d = 0; d <= parts; ++d) o.begin[d] = d * m;
    size_t* count = o.count.data();
    uint32_t* pos = o.positions.data();
    int64_t* local = o.local.data();
    const ResidueOwners owners = mod.view();
    for (size_t i = e0; i < e1; ++i) {
      int64_t l = 0;
      const size_t d = owners.owner(keys[i], &l);
      const size_t at = d * m + count[d]++;
      pos[at] = static_cast<uint32_t>(i);
      local[at] = l;
    }
    return;
  }
  // Each part's own scan (branch-free, as ownedEntries).
  o.positions.resize(parts * m);
  o.local.resize(parts * m);
  for (size_t d = 0; d < parts; ++d) {
    o.begin[d] = d * m;
    uint32_t* pos = o.positions.data() + d * m;
    int64_t* local = o.local.data() + d * m;
    size_t c = 0;
    for (size_t i = e0; i < e1; ++i) {
      int64_t l = 0;
      const bool own = plans[d].owns(keys[i], &l);
      pos[c] = static_cast<uint32_t>(i);
      local[c] = l;
      c += own ? 1 : 0;
    }
    o.count[d] = c;
  }
}

/** A thread's buffers for its chunks (kept between calls up to kShardsKeepBytes). */
struct ChunkScratch {
  ChunkOwnership own;
  std::vector<const float*> rows;
  std::vector<float> initial;
  std::vector<double> sum;
  std::vector<double> acc;
  std::vector<const void*> byEntry;           // the bag-order path: the chunk's entries' rows in bag order
  std::vector<std::vector<float>> initials;   // ... and each part's missing keys' initial values

  size_t bytes() const {
    size_t b = own.positions.capacity() * sizeof(uint32_t) + own.local.capacity() * sizeof(int64_t) +
               rows.capacity() * sizeof(const float*) + initial.capacity() * sizeof(float) + sum.capacity() * sizeof(double) +
               byEntry.capacity() * sizeof(const void*);
    for (const std::vector<float>& v : initials) b += v.capacity() * sizeof(float);
    return b;
  }
  static ChunkScratch& mine() {
    thread_local ChunkScratch s;
    return s;
  }
  struct Trim {
    ~Trim() {
      ChunkScratch& s = mine();
      if (s.bytes() > kShardsKeepBytes) s = ChunkScratch{};
    }
  };
};

/** Part d's rows read before the chunks (a table that does not lend, or inserting): positions in the bag and rows. */
struct ReadPart {
  BagOwnership owned;
  HostArray<float> rows;  // [owned.count * dim]
};

/**
 * Bag rows [r0, r1) when every entry has exactly one owner: the entries' rows gathered in
 * bag order (lent by each part's lease for the entries the span sorted to it, or the part's
 * rows read before), then pooled by one table's own kernel (combineBagRows): each row's
 * entries summed in float64 in bag order, divided and rounded once, one table's arithmetic
 * bit for bit (signed zeros included), whatever the number of parts. Lent rows go a span
 * of about kLentSpanEntries at a time: each lease asks for its rows' lines into L2 as it
 * resolves them, and the span is pooled while they are still there; rows read before, the
 * whole chunk at once.
 */
void bagOrderChunk(const ShardPlan* plans, size_t parts, const BagInput& bag, size_t r0, size_t r1, Combiner c,
                   double maxNorm, size_t dim, const ModOwners& mod,
                   const std::vector<std::unique_ptr<RowLease>>& leases, const ReadPart* read, ChunkScratch& sc, float* out) {
  const bool lent = !leases.empty();
  forEachBagSpan(bag, r0, r1, lent ? kLentSpanEntries : SIZE_MAX, [&](size_t s0, size_t s1) {
    const size_t f0 = static_cast<size_t>(bag.rowSplits[s0]);
    const size_t f1 = static_cast<size_t>(bag.rowSplits[s1]);
    sc.byEntry.resize(f1 - f0);
    const void** byEntry = sc.byEntry.data();
    if (lent) {
      ownChunk(bag.keys, f0, f1, plans, parts, mod, sc.own);
      sc.rows.resize(f1 - f0);
      if (sc.initials.size() < parts) sc.initials.resize(parts);
      for (size_t d = 0; d < parts; ++d) {
        const size_t b = sc.own.begin[d];
        const size_t n = sc.own.count[d];
        // Each part its own initial-value buffer: the pointers into it must outlive the other parts' lends.
        leases[d]->lend(sc.own.local.data() + b, n, sc.rows.data(), sc.initials[d], true);
        const uint32_t* pos = sc.own.positions.data() + b;
        for (size_t i = 0; i < n; ++i) byEntry[pos[i] - f0] = sc.rows[i];
      }
    } else {
      for (size_t d = 0; d < parts; ++d) {
        const BagOwnership& o = read[d].owned;
        const uint32_t* pos = o.positions;
        const float* rows = read[d].rows.data();
        const size_t lo = static_cast<size_t>(std::lower_bound(pos, pos + o.count, static_cast<uint32_t>(f0)) - pos);
        for (size_t i = lo; i < o.count && pos[i] < f1; ++i) byEntry[pos[i] - f0] = rows + i * dim;
      }
    }
    sc.acc.resize(dim);
    combineBagRows({bag.rowSplits, s0, s1, byEntry, f0, bag.weights, c, maxNorm, dim, out, sc.acc.data(), StorageDtype::kFloat32});
  });
}

/** Whether a bag over distinct CPU tables is split over the pool (lookupCombinedShardsSplits). */
bool shardBagSplits(const BagInput& bag) { return bag.n >= kShardsParallelMin && bag.rows > 1; }

/**
 * Calls fn(r0, r1) for chunks of the bag's rows: one chunk for a small bag, else chunks of
 * 1024 to kShardsChunkMax entries (about four per thread) run in parallel on the pool. Four
 * rather than two (until Nov 29 2026, stop 30): the threads claim chunks as they go, so the
 * last chunk running alone at the end of a call is shorter; with both vCPUs free, 2 shards'
 * Promise calls of 13,312 ids took 0.955x the wall time (median of 41 windows, faster in 35;
 * eight per thread 0.946x), about 10 us of a 225 us call (cpu-backend MEASUREMENTS.md "The shards bag
 * in passes on large tables").
 */
template <class Fn>
void forEachShardChunk(const BagInput& bag, const Fn& fn) {
  const bool parallel = shardBagSplits(bag);
  std::vector<std::pair<size_t, size_t>> chunks;
  const size_t threads = ThreadPool::shared().threads();
  const size_t target = parallel ? std::min(kShardsChunkMax, std::max<size_t>(1024, bag.n / (4 * threads))) : bag.n;
  forEachBagSpan(bag, 0, bag.rows, target, [&](size_t r0, size_t r1) { chunks.emplace_back(r0, r1); });
  const auto run = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) fn(chunks[i].first, chunks[i].second);
  };
  if (parallel && chunks.size() > 1) {
    ThreadPool::shared().parallelFor(chunks.size(), 1, run);
  } else {
    run(0, chunks.size());
  }
}

/**
 * The bag over parts whose tables are CPU tables, by chunks of bag rows. When every
 * entry has exactly one owner (bagOrderChunk): each row's entries in bag order, by one
 * table's kernel; the cost does not grow with the parts (one pooling pass per chunk). Otherwise
 * each chunk sorts its entries by owner once, then for each part in order pools the part's
 * entries of each row and adds the result to the chunk's running float64 sum
 * (combineShardStep), the last part rounding to float32 into out. The values are the
 * partials' shard-order sum exactly, without a partial array per part. Rows come from
 * one lease per part (the read path: every part's table lends) or from one
 * find / findOrInsert per part done first (`read`, parts in parallel).
 */
void shardsByChunks(Table* const* tables, const ShardPlan* plans, size_t parts, const BagInput& bag, Combiner c,
                    double maxNorm, const std::vector<std::unique_ptr<RowLease>>& leases, const ReadPart* read,
                    float* out) {
  const size_t dim = tables[0]->config().dim;
  const ModOwners mod = modOwners(plans, parts);
  // Every entry has exactly one owner (floorMod plans over one N, each entry's residue
  // owned: sok's placement): each chunk pools its rows in one pass over its entries in bag
  // order, each entry's row from its owner, as one table holding every row would (not in
  // shard order).
  const bool bagOrder = mod.ok && ownsEveryKey(mod, bag, parts);
  const std::vector<double> denom = bagOrder ? std::vector<double>{} : denominators(bag, c);
  forEachShardChunk(bag, [&](size_t r0, size_t r1) {
    ChunkScratch::Trim trim;
    ChunkScratch& sc = ChunkScratch::mine();
    const size_t e0 = static_cast<size_t>(bag.rowSplits[r0]);
    const size_t e1 = static_cast<size_t>(bag.rowSplits[r1]);
    if (bagOrder) {
      bagOrderChunk(plans, parts, bag, r0, r1, c, maxNorm, dim, mod, leases, read, sc, out);
      return;
    }
    if (!leases.empty()) {
      ownChunk(bag.keys, e0, e1, plans, parts, mod, sc.own);
      sc.rows.resize(e1 - e0);
    }
    sc.sum.resize(checkedMul(r1 - r0, dim, "the shards' sums"));
    sc.acc.resize(dim);
    for (size_t d = 0; d < parts; ++d) {
      PlanSpan s{bag.rowSplits, r0, r1, bag.weights, nullptr, 0, nullptr, denom.data(), maxNorm, dim};
      if (!leases.empty()) {
        const size_t b = sc.own.begin[d];
        const size_t n = sc.own.count[d];
        leases[d]->lend(sc.own.local.data() + b, n, sc.rows.data(), sc.initial, false);
        s.positions = sc.own.positions.data() + b;
        s.owned = n;
        s.rowPtrs = sc.rows.data();
        s.lent = n;
      } else {
        const BagOwnership& o = read[d].owned;
        s.positions = o.positions;
        s.owned = o.count;
        s.rows = read[d].rows.data();
      }
      combineShardStep(s, d == 0, d + 1 == parts, sc.sum.data(), sc.acc.data(), out);
    }
  });
}

/** Whether every table is a CPU table (no PlannedOps) and none appears twice. */
bool distinctCpuTables(Table* const* tables, size_t parts) {
  for (size_t d = 0; d < parts; ++d) {
    if (dynamic_cast<PlannedOps*>(tables[d])) return false;
    for (size_t e = 0; e < d; ++e) {
      if (tables[e] == tables[d]) return false;
    }
  }
  return true;
}

}  // namespace

bool lookupCombinedShardsSplits(Table* const* tables, size_t parts, const BagInput& bag) {
  return shardBagSplits(bag) && distinctCpuTables(tables, parts);
}

void lookupCombinedShards(Table* const* tables, const ShardPlan* plans, size_t parts, const BagInput& bag, Combiner c,
                          double maxNorm, bool insert, float* out) {
  if (parts == 0) return;
  const size_t dim = tables[0]->config().dim;
  const size_t n = checkedMul(bag.rows, dim, "out");
  if (!distinctCpuTables(tables, parts)) {
    // Tables that pool in their own kernels, or one table twice: each part's partial
    // (one after another), then the shard-order sum.
    std::vector<double> partials(checkedMul(parts, n, "the shards' partials"), 0.0);
    for (size_t d = 0; d < parts; ++d) lookupCombinedPartial(*tables[d], bag, c, maxNorm, insert, plans[d], partials.data() + d * n);
    for (size_t i = 0; i < n; ++i) {
      double acc = partials[i];
      for (size_t d = 1; d < parts; ++d) acc += partials[d * n + i];
      out[i] = static_cast<float>(acc);
    }
    return;
  }
  ScratchRelease release(bag.n);
  if (!insert) {
    // Every key owned by exactly one part and tables that pool such a bag themselves (the
    // dynamic tables: one probe pipeline over every part's table, sok's placement): their
    // lease takes the read locks in part order, then each chunk pools in one pass.
    const ModOwners mod = modOwners(plans, parts);
    if (mod.ok && mod.complete) {
      if (const std::unique_ptr<BagLease> lease = tables[0]->leaseBag(tables, parts, mod.view())) {
        forEachShardChunk(bag, [&](size_t r0, size_t r1) { lease->pool(bag, r0, r1, c, maxNorm, out); });
        return;
      }
    }
    // The read path: one lease per part, taken in part order (each holds its table's read lock).
    std::vector<std::unique_ptr<RowLease>> leases;
    leases.reserve(parts);
    for (size_t d = 0; d < parts; ++d) {
      std::unique_ptr<RowLease> l = tables[d]->leaseRows();
      if (!l) break;
      leases.push_back(std::move(l));
    }
    if (leases.size() == parts) {
      for (const std::unique_ptr<RowLease>& l : leases) l->begin();  // no clock taken before every part lends
      shardsByChunks(tables, plans, parts, bag, c, maxNorm, leases, nullptr, out);
      return;
    }
    leases.clear();  // a table that does not lend: the locks go before the finds below
  }
  // Each part's rows first (find, or findOrInsert: one call per table, the parts in parallel),
  // then the same chunked sum over them.
  std::vector<ReadPart> read(parts);
  const auto readParts = [&](size_t b, size_t e) {
    for (size_t d = b; d < e; ++d) {
      Table& t = *tables[d];
      ReadPart& r = read[d];
      r.owned = bagOwnership(bag, plans[d]);
      r.rows.allocate(checkedMul(r.owned.count, dim, "the rows of a planned lookup"));
      std::vector<uint8_t> exists(r.owned.count);
      if (insert) {
        t.findOrInsertInto(r.owned.local, r.owned.count, nullptr, r.rows.data(), exists.data());
      } else {
        t.findInto(r.owned.local, r.owned.count, r.rows.data(), exists.data());
      }
    }
  };
  if (parts > 1 && bag.n >= kShardsParallelMin) {
    ThreadPool::shared().parallelFor(parts, 1, readParts);
  } else {
    readParts(0, parts);
  }
  shardsByChunks(tables, plans, parts, bag, c, maxNorm, {}, read.data(), out);
}

void lookupCombinedBackward(Table& t, const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                            const ShardPlan& plan, float* out) {
  if (auto* own = dynamic_cast<PlannedOps*>(&t)) return own->lookupCombinedBackward(bag, grads, c, maxNorm, plan, out);
  const size_t dim = t.config().dim;
  ScratchRelease release(bag.n);
  Scratch::Trim trim;
  const std::vector<double> denom = denominators(bag, c);
  const BagOwnership b = bagOwnership(bag, plan);
  const float* rows = maxNorm > 0 ? readRows(t, b.local, b.count, false) : nullptr;
  forEachBagRange(bag, [&](size_t r0, size_t r1) {
    std::vector<double> dy(dim);
    combineBackwardRows(spanOf(bag, b, rows, denom.data(), maxNorm, dim, r0, r1), grads, out, false, dy.data());
  });
}

namespace {

/** applyCombinedGradients' gradients: each key's sum made from the pooled gradients where its update needs it. */
class CombinedGradientSums final : public GradientSums {
 public:
  explicit CombinedGradientSums(const BackwardBag& b) : b_(b) {}
  void sum(const uint32_t* occurrences, size_t count, float* sum, double* scratch) const override {
    combineBackwardSum(b_, occurrences, count, sum, scratch);
  }
  void prefetch(const uint32_t* occurrences, size_t) const override {
    __builtin_prefetch(b_.rowOf + occurrences[0]);
    if (b_.weights) __builtin_prefetch(b_.weights + (b_.positions ? b_.positions[occurrences[0]] : occurrences[0]));
  }

 private:
  BackwardBag b_;
};

}  // namespace

namespace {

/** applyCombinedGradients of a CPU table whose optimizer was validated, with the bag's denominators given. */
void applyCombinedWith(Table& t, const BagInput& bag, const float* grads, const double* denom, double maxNorm,
                       const ShardPlan& plan, const OptimizerParams& opt) {
  const size_t dim = t.config().dim;
  ScratchRelease release(bag.n);
  Scratch::Trim trim;
  BagOwnership b = bagOwnership(bag, plan);
  // With clipping the backward reads each entry's row as a find of the owned keys would, just
  // before the step: the table reads them in the step's own call (applyGradientSumsAfterFind),
  // into this scratch, so every allocation here comes first and a rejected step changes nothing.
  float* rows = maxNorm > 0 ? Scratch::floats(Scratch::kRows, checkedMul(b.count, dim, "the rows of a planned lookup"))
                            : nullptr;
  // No per-entry gradient array: the table sums each key's entries' gradients (in order of
  // appearance, in float) straight from the pooled gradients, one key per thread at a time.
  ScratchVector<uint32_t> rowOf(b.count);
  backwardRowsOfOwned(bag.rowSplits, bag.rows, b.positions, b.count, rowOf.data());
  const CombinedGradientSums sums({grads, bag.weights, b.positions, rowOf.data(), denom, rows, maxNorm, dim});
  if (rows != nullptr) {
    t.applyGradientSumsAfterFind(b.local, b.count, rows, sums, opt);
  } else {
    t.applyGradientSums(b.local, b.count, sums, opt);
  }
}

}  // namespace

void applyCombinedGradients(Table& t, const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                            const ShardPlan& plan, const OptimizerParams& opt) {
  if (auto* own = dynamic_cast<PlannedOps*>(&t)) return own->applyCombinedGradients(bag, grads, c, maxNorm, plan, opt);
  t.validateOptimizer(opt);  // before the row read below changes any read score
  const std::vector<double> denom = denominators(bag, c);
  applyCombinedWith(t, bag, grads, denom.data(), maxNorm, plan, opt);
}

void applyCombinedGradientsShards(Table* const* tables, const ShardPlan* plans, size_t parts, const BagInput& bag,
                                  const float* grads, Combiner c, double maxNorm, const OptimizerParams& opt) {
  if (parts == 0) return;
  if (!distinctCpuTables(tables, parts)) {
    // Tables that train in their own kernels, or one table twice: each part in turn (part order).
    for (size_t d = 0; d < parts; ++d) tables[d]->validateOptimizer(opt);
    for (size_t d = 0; d < parts; ++d) applyCombinedGradients(*tables[d], bag, grads, c, maxNorm, plans[d], opt);
    return;
  }
  // Every table's optimizer first: a refused call changes no table.
  for (size_t d = 0; d < parts; ++d) tables[d]->validateOptimizer(opt);
  const std::vector<double> denom = denominators(bag, c);  // once, for every part
  const auto run = [&](size_t b, size_t e) {
    for (size_t d = b; d < e; ++d) applyCombinedWith(*tables[d], bag, grads, denom.data(), maxNorm, plans[d], opt);
  };
  if (applyCombinedGradientsShardsSplits(tables, parts, bag)) {
    ThreadPool::shared().parallelFor(parts, 1, run);
  } else {
    run(0, parts);
  }
}

bool applyCombinedGradientsShardsSplits(Table* const* tables, size_t parts, const BagInput& bag) {
  return parts > 1 && bag.n >= kShardsParallelMin && distinctCpuTables(tables, parts);
}

void plannedApplyGradients(Table& t, const int64_t* keys, size_t n, const float* grads, const ShardPlan& plan,
                           const OptimizerParams& opt) {
  if (auto* own = dynamic_cast<PlannedOps*>(&t)) return own->plannedApplyGradients(keys, n, grads, plan, opt);
  if (plan.all()) {
    t.applyGradients(keys, n, grads, opt);
    return;
  }
  ScratchRelease release(n);
  Owned o = ownedEntries(keys, n, plan);
  // The owned entries' gradients read in place (row positions[i] of grads): no copy.
  t.applyGradientSums(o.local.data(), o.count(), ArrayGradientSums(grads, t.config().dim, o.positions.data()), opt);
}

}  // namespace embedstack
