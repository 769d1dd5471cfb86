#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "dynamic_table.h"
#include "planned_ops.h"
#include "shard_plan.h"
#include "table.h"

namespace estest {

inline embedstack::TableConfig dynamicConfig(size_t dim, size_t initCap = 1024, size_t maxCap = SIZE_MAX,
                                             embedstack::ScorePolicy policy = embedstack::ScorePolicy::kLru) {
  embedstack::TableConfig c;
  c.dim = dim;
  c.initCapacity = initCap;
  c.maxCapacity = maxCap;
  c.scorePolicy = policy;
  return c;
}

/** floorMod(k, n) (n > 0), written out in 128-bit arithmetic: the residue sok's placement gives key k. */
inline int64_t residue(int64_t k, int64_t n) {
  __int128 r = static_cast<__int128>(k) % n;
  if (r < 0) r += n;
  return static_cast<int64_t>(r);
}

/**
 * Upserts into `t` the keys of `stored` that floorMod by n gives to part d (in order), row
 * value(k, col) for col < dim: a part of one logical table split as sok places it.
 */
template <class Value>
void upsertResidue(embedstack::Table& t, int64_t n, int64_t d, const std::vector<int64_t>& stored, size_t dim,
                   const Value& value) {
  std::vector<int64_t> keys;
  std::vector<float> values;
  for (int64_t k : stored) {
    if (residue(k, n) != d) continue;
    keys.push_back(k);
    for (size_t col = 0; col < dim; ++col) values.push_back(value(k, col));
  }
  if (!keys.empty()) t.upsert(keys.data(), keys.size(), values.data(), nullptr);
}

/** The floorMod plans of n parts (ShardPlan::kMod), part d owning residue d. */
inline std::vector<embedstack::ShardPlan> floorModPlans(int64_t n) {
  std::vector<embedstack::ShardPlan> plans(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d) {
    plans[static_cast<size_t>(d)].kind = embedstack::ShardPlan::kMod;
    plans[static_cast<size_t>(d)].numShards = n;
    plans[static_cast<size_t>(d)].shard = d;
  }
  return plans;
}

inline embedstack::TableConfig staticConfig(size_t rows, size_t dim) {
  embedstack::TableConfig c;
  c.isStatic = true;
  c.vocabularySize = rows;
  c.dim = dim;
  return c;
}

/** Splitmix64: a test's own deterministic draws. */
struct Draw {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

/** Rows as a key -> (values, score) map, from a full export (order-independent). */
struct Snapshot {
  std::map<int64_t, std::vector<float>> values;
  std::map<int64_t, uint64_t> scores;
  std::map<int64_t, std::vector<float>> slots;
};

inline Snapshot snapshot(embedstack::Table& t) {
  Snapshot s;
  auto r = t.exportBatch(0, SIZE_MAX);
  const size_t dim = t.config().dim;
  for (size_t i = 0; i < r.keys.size(); ++i) {
    s.values[r.keys[i]] = std::vector<float>(r.values.data() + i * dim, r.values.data() + (i + 1) * dim);
    s.scores[r.keys[i]] = r.scores[i];
    std::vector<float> sl;
    for (size_t j = 0; j < r.slots.size(); ++j) {
      size_t w = t.config().slotWidths[j];
      sl.insert(sl.end(), r.slots[j].data() + i * w, r.slots[j].data() + (i + 1) * w);
    }
    s.slots[r.keys[i]] = sl;
  }
  return s;
}

/** A drawn bag: row splits (from 0), keys, and per-entry weights (may be empty). */
struct DrawnBag {
  std::vector<int32_t> splits{0};
  std::vector<int64_t> keys;
  std::vector<float> weights;
};

inline std::vector<float> rowOf(size_t dim, float base) {
  std::vector<float> v(dim);
  for (size_t c = 0; c < dim; ++c) v[c] = base + static_cast<float>(c) * 0.25f;
  return v;
}

/** Values for keys: row i = rowOf(dim, base(key)). */
template <class F>
std::vector<float> valuesFor(const std::vector<int64_t>& keys, size_t dim, F base) {
  std::vector<float> out;
  for (int64_t k : keys) {
    auto r = rowOf(dim, base(k));
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

/**
 * applyCombinedGradients by its definition: lookupCombinedBackward's per-entry gradients (rows
 * of the owned entries at their bag positions; with maxNorm, a scored find of their rows), the
 * owned entries compacted here under their local keys, then applyGradients.
 */
inline void unfusedStep(embedstack::Table& t, const embedstack::BagInput& bag, const float* grads, embedstack::Combiner c,
                        double maxNorm, const embedstack::ShardPlan& plan, const embedstack::OptimizerParams& opt) {
  const size_t dim = t.config().dim;
  std::vector<float> perEntry(bag.n * dim, 0.0f);
  embedstack::lookupCombinedBackward(t, bag, grads, c, maxNorm, plan, perEntry.data());
  std::vector<int64_t> local;
  std::vector<float> owned;
  for (size_t j = 0; j < bag.n; ++j) {
    int64_t l = 0;
    if (!plan.owns(bag.keys[j], &l)) continue;
    local.push_back(l);
    owned.insert(owned.end(), perEntry.begin() + j * dim, perEntry.begin() + (j + 1) * dim);
  }
  t.applyGradients(local.data(), local.size(), owned.data(), opt);
}

}  // namespace estest
