// The tables that find's and the bag's passes are tested on (test_find_passes.cc,
// test_bag_passes.cc): crowded index groups, extreme keys, absent keys sharing a crowded
// key's group and fragment, and a map of what was stored.
#pragma once

#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "scores.h"
#include "table_helpers.h"
#include "test.h"

namespace estest {

/** Sets DynamicTable::findPassesFrom for a scope (0: every table reads in passes). */
struct PassesFrom {
  size_t saved;
  explicit PassesFrom(size_t bytes) : saved(embedstack::DynamicTable::findPassesFrom.load()) {
    embedstack::DynamicTable::findPassesFrom = bytes;
  }
  ~PassesFrom() { embedstack::DynamicTable::findPassesFrom = saved; }
};

/** v as the storage type keeps it. */
inline float storedAs(embedstack::StorageDtype d, float v) {
  using embedstack::StorageDtype;
  if (d == StorageDtype::kFloat16) return embedstack::halfToFloat(embedstack::floatToHalf(v));
  if (d == StorageDtype::kBfloat16) return embedstack::bf16ToFloat(embedstack::floatToBf16(v));
  return v;
}

struct PassTable {
  std::shared_ptr<embedstack::Table> table;
  embedstack::Initializer init;  // uniform [-2, 3): absent keys' values
  std::vector<int64_t> keys;     // 3000 stored: the extremes, 60 crowded into home group 5, random
  std::vector<int64_t> crowded;
  std::vector<int64_t> absent;  // extremes, `sharing` sharing a crowded key's group and fragment, random
  std::map<int64_t, std::vector<float>> want;  // each key's values as stored (not whole numbers, some far from 1)
};

/** A 3000-key table (its index not rebuilt: the crowded keys share group 5) and `absents` absent keys. */
inline PassTable passTable(embedstack::StorageDtype storage, size_t dim, embedstack::ScorePolicy policy,
                           std::mt19937_64& rng, size_t sharing, size_t absents) {
  using namespace embedstack;
  PassTable p;
  TableConfig config = dynamicConfig(dim, 4096, SIZE_MAX, policy);
  config.storage = storage;
  config.initializer.kind = InitKind::kUniform;
  config.initializer.a = -2;
  config.initializer.b = 3;
  config.initializer.seed = 5;
  p.init = config.initializer;
  p.table = createTable(config);
  auto* d = dynamic_cast<DynamicTable*>(p.table.get());
  ASSERT_TRUE(d != nullptr);
  const size_t groups = d->indexGroups();
  auto home = [&](int64_t k) { return hashGroup(hashKey(k), groups); };
  p.keys = {INT64_MIN, INT64_MAX, 0, -1, 1};
  while (p.crowded.size() < 60) {
    const int64_t k = static_cast<int64_t>(rng());
    if (home(k) == 5) p.crowded.push_back(k);
  }
  p.keys.insert(p.keys.end(), p.crowded.begin(), p.crowded.end());
  while (p.keys.size() < 3000) p.keys.push_back(static_cast<int64_t>(rng()));
  p.absent = {INT64_MIN + 1, INT64_MAX - 1, 2, -2};
  while (p.absent.size() < 4 + sharing) {
    const int64_t k = static_cast<int64_t>(rng());
    if (home(k) != 5) continue;
    for (int64_t c : p.crowded) {
      if (hashFragment(hashKey(c)) == hashFragment(hashKey(k)) && c != k) {
        p.absent.push_back(k);
        break;
      }
    }
  }
  while (p.absent.size() < absents) p.absent.push_back(static_cast<int64_t>(rng()));
  std::vector<float> vals;
  for (size_t i = 0; i < p.keys.size(); ++i) {
    std::vector<float> row(dim);
    for (size_t c = 0; c < dim; ++c) {
      row[c] = static_cast<float>((static_cast<double>(i % 97) - 48.3) * std::pow(10.0, static_cast<double>((i + c) % 9) - 4));
    }
    vals.insert(vals.end(), row.begin(), row.end());
    for (float& v : row) v = storedAs(storage, v);
    p.want[p.keys[i]] = row;
  }
  p.table->upsert(p.keys.data(), p.keys.size(), vals.data(), nullptr);
  ASSERT_TRUE(d->indexGroups() == groups);
  return p;
}

/**
 * Checks the scores a read left: lru sets every key read to the call's clock; lfu adds its
 * reads. `reads`: the resident keys read, with their counts. Returns the keys scored wrong.
 */
inline size_t wrongScores(const Snapshot& before, const Snapshot& after, const std::map<int64_t, uint64_t>& reads,
                          embedstack::ScorePolicy policy, uint64_t clock) {
  ASSERT_TRUE(policy == embedstack::ScorePolicy::kLru || policy == embedstack::ScorePolicy::kLfu);  // the two it models
  size_t bad = 0;
  for (const auto& [k, s] : after.scores) {
    const auto n = reads.find(k);
    const uint64_t old = before.scores.at(k);
    if (policy == embedstack::ScorePolicy::kLru) {
      bad += s != (n != reads.end() ? clock : old);
    } else {
      bad += s != old + (n != reads.end() ? n->second : 0);
    }
  }
  return bad;
}

/**
 * A table for the differential test: the extreme keys, 30 keys whose home group is the last
 * one (their probes wrap around to group 0) and 15 in group 0, random keys, then a third
 * removed, a quarter of those put back and a third of those removed again (tombstones, rows
 * moved into holes). Returns the keys it was given plus absent ones, for queries.
 */
inline std::vector<int64_t> fillCrowded(embedstack::Table& t, uint64_t seed, size_t nKeys) {
  const size_t dim = t.config().dim;
  const size_t groups = dynamic_cast<embedstack::DynamicTable&>(t).indexGroups();
  std::mt19937_64 rng(seed);
  std::vector<int64_t> keys = {INT64_MIN, INT64_MAX, 0, -1, 1};
  size_t inLast = 0;
  size_t inFirst = 0;
  while (inLast < 30 || inFirst < 15) {
    const int64_t k = static_cast<int64_t>(rng());
    const size_t g = embedstack::hashGroup(embedstack::hashKey(k), groups);
    if (g == groups - 1 && inLast < 30) {
      keys.push_back(k);
      ++inLast;
    } else if (g == 0 && inFirst < 15) {
      keys.push_back(k);
      ++inFirst;
    }
  }
  while (keys.size() < nKeys) keys.push_back(static_cast<int64_t>(rng() % 4 == 0 ? rng() % 5000 : rng()));
  std::vector<float> vals(keys.size() * dim);
  for (float& v : vals) v = static_cast<float>(static_cast<int64_t>(rng() % 20001) - 10000) * 0.0137f;
  std::vector<uint64_t> scores(keys.size());
  for (uint64_t& s : scores) s = rng() % 1000;
  t.upsert(keys.data(), keys.size(), vals.data(), t.config().scorePolicy == embedstack::ScorePolicy::kCustomized ? scores.data() : nullptr);
  std::vector<int64_t> removed;
  for (int64_t k : keys) {
    if (rng() % 3 == 0) removed.push_back(k);
  }
  t.remove(removed.data(), removed.size());
  std::vector<int64_t> back;
  for (size_t i = 0; i < removed.size(); i += 4) back.push_back(removed[i]);
  std::vector<float> backValues(back.size() * dim, 1.5f);
  t.upsert(back.data(), back.size(), backValues.data(), nullptr);
  std::vector<int64_t> again;
  for (size_t i = 0; i < back.size(); i += 3) again.push_back(back[i]);
  t.remove(again.data(), again.size());
  ASSERT_TRUE(dynamic_cast<embedstack::DynamicTable&>(t).indexGroups() == groups);  // no rebuild: the crowding stays
  std::vector<int64_t> pool = keys;
  for (int i = 0; i < 200; ++i) pool.push_back(static_cast<int64_t>(rng()));
  pool.insert(pool.end(), {INT64_MIN + 1, INT64_MAX - 1, -2});
  return pool;
}

/**
 * Runs `reads` (one read of each twin table) again until it starts and ends within one wall-clock
 * second, when `policy` scores reads by the second (kTimestamp): reads that straddle a second
 * boundary touch different scores, and sameTables would differ for no fault of the code (seen once
 * under ASan). A retry touches both twins alike, so their scores agree again.
 */
template <class Reads>
void withinOneSecond(embedstack::ScorePolicy policy, Reads&& reads) {
  for (;;) {
    const uint64_t second = embedstack::nowSeconds();
    reads();
    if (policy != embedstack::ScorePolicy::kTimestamp || embedstack::nowSeconds() == second) return;
  }
}

/** Both tables' rows, keys, scores, values and optimizer slots, in arena order, are the same bits. */
inline bool sameTables(embedstack::Table& a, embedstack::Table& b) {
  const embedstack::ExportResult ea = a.exportBatch(0, SIZE_MAX);
  const embedstack::ExportResult eb = b.exportBatch(0, SIZE_MAX);
  const size_t n = ea.keys.size();
  bool same = n == eb.keys.size() && std::memcmp(ea.keys.data(), eb.keys.data(), n * sizeof(int64_t)) == 0 &&
         std::memcmp(ea.scores.data(), eb.scores.data(), n * sizeof(uint64_t)) == 0 &&
         std::memcmp(ea.values.data(), eb.values.data(), n * a.config().dim * sizeof(float)) == 0;
  for (size_t s = 0; same && s < ea.slots.size(); ++s) {
    same = ea.slots[s].size() == eb.slots[s].size() && std::memcmp(ea.slots[s].data(), eb.slots[s].data(), ea.slots[s].size() * sizeof(float)) == 0;
  }
  return same;
}


/** Two identical tables filled by fillCrowded (one to read through each path), and the keys to query. */
struct TwinTables {
  std::shared_ptr<embedstack::Table> pipeline;
  std::shared_ptr<embedstack::Table> passes;
  std::vector<int64_t> pool;
};

/**
 * Twin tables of one storage type, dim and policy (epoch 3 for the epoch policies), rows with
 * two optimizer slots when `slots`, a uniform initializer in [-1, initMax) seeded by `seed`.
 */
inline TwinTables twinTables(embedstack::StorageDtype storage, size_t dim, embedstack::ScorePolicy policy, bool slots,
                             uint64_t seed, size_t nKeys, float initMax) {
  using embedstack::ScorePolicy;
  embedstack::TableConfig c = dynamicConfig(dim, 2048, SIZE_MAX, policy);
  c.storage = storage;
  c.initializer.kind = embedstack::InitKind::kUniform;
  c.initializer.a = -1;
  c.initializer.b = initMax;
  c.initializer.seed = static_cast<uint32_t>(seed);
  if (slots) {
    c.slotWidths = {static_cast<uint32_t>(dim), 1};
    c.slotInitial = {0.1f, 0.2f};
  }
  // kTimestamp scores writes by the second: twins filled across a second boundary differ in
  // their scores from the start (every later sameTables of them failed, seen under ASan at a
  // load of 25-40), so they are filled again until both fills fall within one second.
  TwinTables t;
  for (;;) {
    const uint64_t second = embedstack::nowSeconds();
    t = TwinTables{embedstack::createTable(c), embedstack::createTable(c), {}};
    t.pool = fillCrowded(*t.pipeline, seed, nKeys);
    fillCrowded(*t.passes, seed, nKeys);
    if (policy != ScorePolicy::kTimestamp || embedstack::nowSeconds() == second) break;
  }
  if (policy == ScorePolicy::kEpochLru || policy == ScorePolicy::kEpochLfu) {
    t.pipeline->setEpoch(3);
    t.passes->setEpoch(3);
  }
  return t;
}

}  // namespace estest
