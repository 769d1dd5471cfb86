#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <utility>
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

/**
 * A map from keys to rows, as one vector sorted by key: std::map's interface as the tests use it
 * (find, count, at, operator[], iteration in key order, ==) with one allocation per table instead
 * of a node per key. The snapshots of every twin-table check were std::maps: in the -O0
 * sanitizer build, their nodes' allocations and tree walks were about a fifth of the test
 * binary's CPU time. Equality is std::map's: the same keys in the same order, each with == values.
 */
template <class V>
struct FlatMap {
  using value_type = std::pair<int64_t, V>;
  std::vector<value_type> rows;  // sorted by key, one entry per key

  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;
  iterator begin() { return rows.begin(); }
  iterator end() { return rows.end(); }
  const_iterator begin() const { return rows.begin(); }
  const_iterator end() const { return rows.end(); }
  size_t size() const { return rows.size(); }
  bool empty() const { return rows.empty(); }
  const_iterator lowerBound(int64_t k) const {
    return std::lower_bound(rows.begin(), rows.end(), k, [](const value_type& e, int64_t key) { return e.first < key; });
  }
  const_iterator find(int64_t k) const {
    const auto it = lowerBound(k);
    return it != rows.end() && it->first == k ? it : rows.end();
  }
  size_t count(int64_t k) const { return find(k) != rows.end() ? 1 : 0; }
  const V& at(int64_t k) const {
    const auto it = find(k);
    if (it == rows.end()) throw std::out_of_range("FlatMap::at: no such key");
    return it->second;
  }
  /** std::map's operator[]: the key's value, a value-initialized one inserted when absent. */
  V& operator[](int64_t k) {
    const auto at = rows.begin() + (lowerBound(k) - rows.cbegin());
    if (at != rows.end() && at->first == k) return at->second;
    return rows.insert(at, value_type(k, V{}))->second;
  }
  bool operator==(const FlatMap& o) const { return rows == o.rows; }
  bool operator!=(const FlatMap& o) const { return !(rows == o.rows); }
  /** Against a std::map (a test's model): the same (key, value) sequence. */
  bool operator==(const std::map<int64_t, V>& m) const {
    return rows.size() == m.size() && std::equal(rows.begin(), rows.end(), m.begin(), [](const value_type& a, const auto& b) {
             return a.first == b.first && a.second == b.second;
           });
  }
  bool operator!=(const std::map<int64_t, V>& m) const { return !(*this == m); }
};

/** Rows as key -> values, score and optimizer slots, from a full export (order-independent: sorted by key). */
struct Snapshot {
  FlatMap<std::vector<float>> values;
  FlatMap<uint64_t> scores;
  FlatMap<std::vector<float>> slots;
};

inline Snapshot snapshot(embedstack::Table& t) {
  Snapshot s;
  auto r = t.exportBatch(0, SIZE_MAX);
  const size_t dim = t.config().dim;
  const size_t n = r.keys.size();
  // The export's rows in key order (a stable sort: a key exported twice stays twice, and two
  // snapshots of it then differ, where a std::map kept its last row only).
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  const int64_t* keys = r.keys.data();
  std::stable_sort(order.begin(), order.end(), [keys](size_t a, size_t b) { return keys[a] < keys[b]; });
  s.values.rows.reserve(n);
  s.scores.rows.reserve(n);
  s.slots.rows.reserve(n);
  const std::vector<uint32_t>& widths = t.config().slotWidths;
  for (const size_t i : order) {
    const float* v = r.values.data() + i * dim;
    s.values.rows.emplace_back(keys[i], std::vector<float>(v, v + dim));
    s.scores.rows.emplace_back(keys[i], r.scores[i]);
    std::vector<float> sl;
    for (size_t j = 0; j < r.slots.size(); ++j) {
      const size_t w = widths[j];
      sl.insert(sl.end(), r.slots[j].data() + i * w, r.slots[j].data() + (i + 1) * w);
    }
    s.slots.rows.emplace_back(keys[i], std::move(sl));
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
