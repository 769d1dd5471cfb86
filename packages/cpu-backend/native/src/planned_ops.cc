#include "planned_ops.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
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
  enum Slot { kRows = 0, kGrads = 1, kFound = 2, kSlots = 3 };
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

/** Bags this small run their shards one after another (waking a helper costs more). */
constexpr size_t kShardsParallelMin = 4096;
/** Outputs this large ([rows * dim] values) are summed by the pool; smaller ones on the calling thread. */
constexpr size_t kShardsSumParallelMin = 65536;
/** Partials arrays kept between calls up to this size (fresh ones cost page faults and zero fills). */
constexpr size_t kKeepPartialsBytes = size_t{32} << 20;

/**
 * Float64 arrays for the shards' partials, kept between calls (process-wide, so
 * consecutive calls reuse the same memory whichever pool thread runs them; at most two
 * kept, for concurrent calls).
 */
class PartialsPool {
 public:
  struct Lease {
    std::unique_ptr<double[]> data;
    size_t size = 0;
  };
  static Lease take(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mutex());
      auto& kept = free();
      for (size_t i = 0; i < kept.size(); ++i) {
        if (kept[i].size >= n) {
          Lease l = std::move(kept[i]);
          kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
          return l;
        }
      }
    }
    Lease l;
    l.data.reset(new double[n]);
    l.size = n;
    return l;
  }
  static void give(Lease&& l) {
    if (l.size * sizeof(double) > kKeepPartialsBytes) return;
    std::lock_guard<std::mutex> lock(mutex());
    auto& kept = free();
    kept.push_back(std::move(l));
    if (kept.size() > 2) kept.erase(kept.begin());
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<Lease>& free() {
    static std::vector<Lease>* v = new std::vector<Lease>();  // never destroyed: pool threads may outlive statics
    return *v;
  }
};

}  // namespace

void lookupCombinedShards(Table* const* tables, const ShardPlan* plans, size_t parts, const BagInput& bag, Combiner c,
                          double maxNorm, bool insert, float* out) {
  if (parts == 0) return;
  const size_t n = checkedMul(bag.rows, tables[0]->config().dim, "out");
  struct Held {
    PartialsPool::Lease lease;
    ~Held() { PartialsPool::give(std::move(lease)); }
  } held{PartialsPool::take(checkedMul(parts, n, "the shards' partials"))};
  double* partials = held.lease.data.get();
  const auto run = [&](size_t b, size_t e) {
    for (size_t d = b; d < e; ++d) {
      double* p = partials + d * n;
      std::fill(p, p + n, 0.0);
      lookupCombinedPartial(*tables[d], bag, c, maxNorm, insert, plans[d], p);
    }
  };
  if (parts > 1 && bag.n >= kShardsParallelMin) {
    ThreadPool::shared().parallelFor(parts, 1, run);
  } else {
    run(0, parts);
  }
  // Σ in shard order, rounded once (as core's sumShardPartials): per block of values,
  // ((p_0 + p_1) + p_2) + ... in a local accumulator (loops the compiler vectorizes).
  const auto sum = [&](size_t b, size_t e) {
    constexpr size_t kBlock = 512;
    double acc[kBlock];
    for (size_t i0 = b; i0 < e; i0 += kBlock) {
      const size_t m = std::min(kBlock, e - i0);
      const double* p0 = partials + i0;
      for (size_t j = 0; j < m; ++j) acc[j] = p0[j];
      for (size_t d = 1; d < parts; ++d) {
        const double* pd = partials + d * n + i0;
        for (size_t j = 0; j < m; ++j) acc[j] += pd[j];
      }
      float* o = out + i0;
      for (size_t j = 0; j < m; ++j) o[j] = static_cast<float>(acc[j]);
    }
  };
  if (n >= kShardsSumParallelMin) {
    forEachRange(n, sum, kShardsSumParallelMin / 2);
  } else {
    sum(0, n);
  }
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

void applyCombinedGradients(Table& t, const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                            const ShardPlan& plan, const OptimizerParams& opt) {
  if (auto* own = dynamic_cast<PlannedOps*>(&t)) return own->applyCombinedGradients(bag, grads, c, maxNorm, plan, opt);
  t.validateOptimizer(opt);  // before the row read below changes any read score
  const size_t dim = t.config().dim;
  ScratchRelease release(bag.n);
  Scratch::Trim trim;
  const std::vector<double> denom = denominators(bag, c);
  BagOwnership b = bagOwnership(bag, plan);
  const float* rows = maxNorm > 0 ? readRows(t, b.local, b.count, false) : nullptr;
  float* g = Scratch::floats(Scratch::kGrads, checkedMul(b.count, dim, "the per-entry gradients"));
  forEachBagRange(bag, [&](size_t r0, size_t r1) {
    std::vector<double> dy(dim);
    combineBackwardRows(spanOf(bag, b, rows, denom.data(), maxNorm, dim, r0, r1), grads, g, true, dy.data());
  });
  t.applyGradients(b.local, b.count, g, opt);
}

void plannedApplyGradients(Table& t, const int64_t* keys, size_t n, const float* grads, const ShardPlan& plan,
                           const OptimizerParams& opt) {
  if (auto* own = dynamic_cast<PlannedOps*>(&t)) return own->plannedApplyGradients(keys, n, grads, plan, opt);
  if (plan.all()) {
    t.applyGradients(keys, n, grads, opt);
    return;
  }
  const size_t dim = t.config().dim;
  ScratchRelease release(n);
  Scratch::Trim trim;
  Owned o = ownedEntries(keys, n, plan);
  float* g = Scratch::floats(Scratch::kGrads, checkedMul(o.count(), dim, "the owned gradients"));
  for (size_t i = 0; i < o.count(); ++i) {
    std::memcpy(g + i * dim, grads + static_cast<size_t>(o.positions[i]) * dim, dim * sizeof(float));
  }
  t.applyGradients(o.local.data(), o.count(), g, opt);
}

}  // namespace embedstack
