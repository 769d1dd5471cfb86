// The tables that find's and the bag's passes are tested on (test_find_passes.cc,
// test_bag_passes.cc): crowded index groups, extreme keys, absent keys sharing a crowded
// key's group and fragment, and a map of what was stored.
#pragma once

#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <vector>

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

}  // namespace estest
