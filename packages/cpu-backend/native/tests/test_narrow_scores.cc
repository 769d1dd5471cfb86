// The dynamic table's key/score records start narrow (12 bytes, 32-bit scores) and widen
// to 16 bytes the first time a score a call may store would not fit 32 bits. The widening
// must be invisible: every key, value and score stays exactly what a table that was wide
// all along holds. The expected scores are worked out here from the score rules
// (core's scoring.ts), not by the code under test.
#include <atomic>
#include <map>
#include <thread>

#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::dynamicConfig;
using estest::snapshot;

namespace {

constexpr size_t kDim = 4;
constexpr uint64_t k2p32 = uint64_t{1} << 32;
constexpr uint64_t k2p31 = uint64_t{1} << 31;

/** Key k's values (exact floats, distinct per key and per call `version`). */
std::vector<float> valueOf(int64_t k, int version = 0) {
  std::vector<float> v(kDim);
  for (size_t c = 0; c < kDim; ++c) v[c] = static_cast<float>(k) * 4.0f + static_cast<float>(c) + 1000.0f * version;
  return v;
}

/** The rows a table should hold: key -> (values, score). */
struct Model {
  std::map<int64_t, std::vector<float>> values;
  std::map<int64_t, uint64_t> scores;
};

std::vector<float> valuesFor(const std::vector<int64_t>& keys, int version = 0) {
  std::vector<float> out;
  for (int64_t k : keys) {
    const auto v = valueOf(k, version);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

/** Upserts keys (values of `version`, optional given scores) and records them in the model with `score(k)`. */
template <class Score>
void upsert(Table& t, Model& m, const std::vector<int64_t>& keys, int version, const std::vector<uint64_t>& given,
            const Score& score) {
  const auto v = valuesFor(keys, version);
  t.upsert(keys.data(), keys.size(), v.data(), given.empty() ? nullptr : given.data());
  for (size_t i = 0; i < keys.size(); ++i) {
    m.values[keys[i]] = valueOf(keys[i], version);
    m.scores[keys[i]] = score(keys[i], i);
  }
}

void expectModel(Table& t, const Model& m) {
  const auto s = snapshot(t);
  EXPECT_EQ(s.values.size(), m.values.size());
  for (const auto& [k, v] : m.values) {
    ASSERT_TRUE(s.values.count(k) == 1);
    for (size_t c = 0; c < kDim; ++c) EXPECT_FLOAT_BITS(s.values.at(k)[c], v[c]);
    EXPECT_EQ(s.scores.at(k), m.scores.at(k));
  }
}

/** find of keys (all resident): their values checked against the model. */
void findExpect(Table& t, const Model& m, const std::vector<int64_t>& keys) {
  std::vector<float> out(keys.size() * kDim);
  std::vector<uint8_t> exists(keys.size());
  t.findInto(keys.data(), keys.size(), out.data(), exists.data());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(exists[i], uint8_t{1});
    for (size_t c = 0; c < kDim; ++c) EXPECT_FLOAT_BITS(out[i * kDim + c], m.values.at(keys[i])[c]);
  }
}

DynamicTable& dyn(const std::shared_ptr<Table>& t) { return *dynamic_cast<DynamicTable*>(t.get()); }

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> k;
  for (int64_t i = from; i < to; ++i) k.push_back(i);
  return k;
}

}  // namespace

TEST(narrow_lru_widens_on_the_first_write_past_2_32) {
  auto t = createTable(dynamicConfig(kDim, 4));  // grows from 4 rows: the records move while narrow
  DynamicTable& d = dyn(t);
  Model m;
  uint64_t clock = 0;
  for (int b = 0; b < 5; ++b) {
    ++clock;
    upsert(*t, m, range(b * 10, b * 10 + 10), 0, {}, [&](int64_t, size_t) { return clock; });
  }
  findExpect(*t, m, range(0, 10));  // a read: clock 6 for keys 0..9
  ++clock;
  for (int64_t k = 0; k < 10; ++k) m.scores[k] = clock;
  EXPECT_TRUE(d.narrowScores());
  expectModel(*t, m);
  // The last clock that fits: the write stays narrow.
  d.setClockForTests(k2p32 - 2);
  upsert(*t, m, range(50, 60), 1, {}, [](int64_t, size_t) { return k2p32 - 1; });
  EXPECT_TRUE(d.narrowScores());
  expectModel(*t, m);
  EXPECT_EQ(t->memoryUsage(), t->capacity() * (12 + kDim * 4) + d.indexGroups() * 64);
  // Clock 2^32: the write widens before it stores anything.
  upsert(*t, m, {5, 61, 5}, 2, {}, [](int64_t, size_t) { return k2p32; });
  EXPECT_TRUE(!d.narrowScores());
  EXPECT_EQ(t->memoryUsage(), t->capacity() * (16 + kDim * 4) + d.indexGroups() * 64);
  expectModel(*t, m);
  // Removals move the last (wide) record into the hole; later calls keep counting.
  const int64_t gone[] = {3, 61};
  EXPECT_EQ(t->remove(gone, 2), size_t{2});
  m.values.erase(3), m.scores.erase(3), m.values.erase(61), m.scores.erase(61);
  findExpect(*t, m, {59, 0});
  m.scores[59] = m.scores[0] = k2p32 + 1;
  expectModel(*t, m);
  t->clear();
  EXPECT_TRUE(!d.narrowScores());  // stays wide
  Model empty;
  upsert(*t, empty, {7}, 0, {}, [](int64_t, size_t) { return k2p32 + 2; });
  expectModel(*t, empty);
}

TEST(a_read_widens_before_its_clock_could_leave_32_bits) {
  // find, the bag, a row lease and a bag lease: at clock 2^31 - 1 a read stays narrow; from
  // 2^31 it widens first (half the range kept for reads that start meanwhile), except a row
  // lease, which never widens (its caller may hold other tables' leases): it does not lend
  // then, and changes nothing.
  for (int path = 0; path < 4; ++path) {
    auto t = createTable(dynamicConfig(kDim, 16));
    auto other = createTable(dynamicConfig(kDim, 16));  // the bag lease's second part: odd keys
    DynamicTable& d = dyn(t);
    Model m, mo;
    upsert(*t, m, {0, 2, 4, 6}, 0, {}, [](int64_t, size_t) { return uint64_t{1}; });
    upsert(*other, mo, {1, 3}, 0, {}, [](int64_t, size_t) { return uint64_t{1}; });
    for (uint64_t start : {k2p31 - 2, k2p31}) {
      d.setClockForTests(start);
      dyn(other).setClockForTests(start);
      const std::vector<int64_t> keys{2, 4, 9};  // 9 is absent
      std::vector<float> out(keys.size() * kDim);
      if (path == 0) {
        std::vector<uint8_t> exists(keys.size());
        t->findInto(keys.data(), keys.size(), out.data(), exists.data());
      } else if (path == 1) {
        const std::vector<int32_t> splits{0, 3};
        const BagInput bag{splits.data(), 1, keys.data(), keys.size(), nullptr};
        t->lookupCombinedInto(bag, Combiner::kSum, 0.0, false, out.data());
      } else if (path == 2) {
        const bool lent = t->withRows(keys.data(), keys.size(), [&](const float* const* rows) {
          for (size_t c = 0; c < kDim; ++c) out[c] = rows[0][c];
        });
        EXPECT_EQ(lent, start < k2p31);
        if (!lent) {
          EXPECT_TRUE(d.narrowScores());
          expectModel(*t, m);  // nothing stored, no clock taken
          std::vector<uint8_t> exists(keys.size());
          t->findInto(keys.data(), keys.size(), out.data(), exists.data());  // widens; clock start + 1
        }
      } else {
        Table* parts[] = {t.get(), other.get()};
        const uint32_t owner[] = {0, 1};
        const std::vector<int64_t> mixed{2, 4, 3};
        const std::vector<int32_t> splits{0, 3};
        const BagInput bag{splits.data(), 1, mixed.data(), mixed.size(), nullptr};
        auto lease = t->leaseBag(parts, 2, ResidueOwners(owner, 2, false));
        ASSERT_TRUE(lease != nullptr);
        lease->pool(bag, 0, 1, Combiner::kSum, 0.0, out.data());
        mo.scores[3] = start + 1;
      }
      m.scores[2] = m.scores[4] = start + 1;
      EXPECT_EQ(d.narrowScores(), start < k2p31);
      expectModel(*t, m);
      if (path == 3) {
        EXPECT_EQ(dyn(other).narrowScores(), start < k2p31);
        expectModel(*other, mo);
      }
    }
  }
}

TEST(epoch_policies_widen_once_the_epoch_is_set) {
  for (ScorePolicy p : {ScorePolicy::kEpochLru, ScorePolicy::kEpochLfu}) {
    const bool lfu = p == ScorePolicy::kEpochLfu;
    for (bool readFirst : {true, false}) {
      auto t = createTable(dynamicConfig(kDim, 8, SIZE_MAX, p));
      DynamicTable& d = dyn(t);
      Model m;
      // epoch 0: lru scores the clock, lfu counts occurrences (a count saturates at 2^32 - 1: always fits).
      upsert(*t, m, {1, 2, 3, 1}, 0, {}, [&](int64_t k, size_t) { return lfu ? (k == 1 ? 2u : 1u) : uint64_t{1}; });
      findExpect(*t, m, {2, 2, 3});
      m.scores[2] = lfu ? 3 : 2;
      m.scores[3] = lfu ? 2 : 2;
      EXPECT_TRUE(d.narrowScores());
      expectModel(*t, m);
      t->setEpoch(1);
      EXPECT_TRUE(d.narrowScores());  // nothing stored yet
      if (readFirst) {
        findExpect(*t, m, {3, 1, 3});  // clock 3, epoch 1
        m.scores[3] = lfu ? (k2p32 | 2) : (k2p32 | 3);
        m.scores[1] = lfu ? (k2p32 | 1) : (k2p32 | 3);
      } else {
        upsert(*t, m, {3, 4, 3}, 5, {}, [&](int64_t, size_t) { return lfu ? (k2p32 | 2) : (k2p32 | 3); });
        m.scores[4] = lfu ? (k2p32 | 1) : (k2p32 | 3);
      }
      EXPECT_TRUE(!d.narrowScores());
      expectModel(*t, m);
    }
  }
}

TEST(given_scores_past_32_bits_widen_before_the_call_changes_anything) {
  // customized: a caller's score >= 2^32 given to upsert
  {
    auto t = createTable(dynamicConfig(kDim, 8, SIZE_MAX, ScorePolicy::kCustomized));
    DynamicTable& d = dyn(t);
    Model m;
    upsert(*t, m, {1, 2, 3}, 0, {10, k2p32 - 1, 30}, [](int64_t k, size_t) { return k == 2 ? k2p32 - 1 : uint64_t(k * 10); });
    EXPECT_TRUE(d.narrowScores());
    expectModel(*t, m);
    upsert(*t, m, {2, 4}, 1, {k2p32 + 7, 5}, [](int64_t k, size_t) { return k == 2 ? k2p32 + 7 : uint64_t{5}; });
    EXPECT_TRUE(!d.narrowScores());
    expectModel(*t, m);
    // customized without scores keeps a resident's score (new keys: 0)
    upsert(*t, m, {2, 9}, 2, {}, [](int64_t k, size_t) { return k == 2 ? k2p32 + 7 : uint64_t{0}; });
    expectModel(*t, m);
  }
  // a capped table: the widening call evicts by the full scores; later evictions and restrict too
  {
    auto t = createTable(dynamicConfig(kDim, 4, 4, ScorePolicy::kCustomized));
    Model m;
    upsert(*t, m, {1, 2, 3, 4}, 0, {10, 20, 30, 40}, [](int64_t k, size_t) { return uint64_t(k * 10); });
    upsert(*t, m, {5}, 0, {k2p32}, [](int64_t, size_t) { return k2p32; });
    m.values.erase(1), m.scores.erase(1);  // the lowest score leaves
    EXPECT_TRUE(!dyn(t).narrowScores());
    expectModel(*t, m);
    const std::vector<int64_t> six{6};
    const auto v = valuesFor(six);
    const uint64_t fifteen = 15;
    t->upsert(six.data(), 1, v.data(), &fifteen);  // 15 < every resident: refused
    expectModel(*t, m);
    EXPECT_EQ(t->restrict(2), size_t{2});
    for (int64_t k : {2, 3}) m.values.erase(k), m.scores.erase(k);
    expectModel(*t, m);
  }
  // importRows' explicit scores, for policies that would otherwise never leave 32 bits
  for (ScorePolicy p : {ScorePolicy::kLru, ScorePolicy::kTimestamp, ScorePolicy::kEpochLfu}) {
    auto t = createTable(dynamicConfig(kDim, 8, SIZE_MAX, p));
    const std::vector<int64_t> keys{11, 12};
    const auto v = valuesFor(keys);
    const uint64_t fit[] = {k2p32 - 1, 3};
    t->importRows(keys.data(), 2, v.data(), nullptr, fit);
    EXPECT_TRUE(dyn(t).narrowScores());
    const uint64_t big[] = {uint64_t{1} << 40, 4};
    t->importRows(keys.data(), 2, v.data(), nullptr, big);
    EXPECT_TRUE(!dyn(t).narrowScores());
    Model m;
    m.values = {{11, valueOf(11)}, {12, valueOf(12)}};
    m.scores = {{11, uint64_t{1} << 40}, {12, 4}};
    expectModel(*t, m);
  }
}

TEST(frequency_widens_when_a_count_could_reach_2_32) {
  auto t = createTable(dynamicConfig(kDim, 8, SIZE_MAX, ScorePolicy::kFrequency));
  DynamicTable& d = dyn(t);
  Model m;
  upsert(*t, m, {1, 2}, 0, {}, [](int64_t, size_t) { return uint64_t{1}; });
  upsert(*t, m, {1, 1}, 0, {}, [](int64_t, size_t) { return uint64_t{2}; });  // once per call
  const std::vector<int64_t> keys{3};
  const auto v = valuesFor(keys);
  const uint64_t high = k2p32 - 1;
  t->importRows(keys.data(), 1, v.data(), nullptr, &high);
  m.values[3] = valueOf(3), m.scores[3] = high;
  EXPECT_TRUE(d.narrowScores());
  expectModel(*t, m);
  upsert(*t, m, {3, 2}, 1, {}, [](int64_t k, size_t) { return k == 3 ? k2p32 : uint64_t{2}; });
  EXPECT_TRUE(!d.narrowScores());
  expectModel(*t, m);
}

TEST(lfu_tables_are_wide_from_the_start) {
  auto t = createTable(dynamicConfig(kDim, 8, SIZE_MAX, ScorePolicy::kLfu));
  EXPECT_TRUE(!dyn(t).narrowScores());
  Model m;
  upsert(*t, m, {1, 1, 2}, 0, {}, [](int64_t k, size_t) { return k == 1 ? uint64_t{2} : uint64_t{1}; });
  findExpect(*t, m, {2, 2});
  m.scores[2] = 3;
  expectModel(*t, m);
}

TEST(concurrent_reads_widen_once_and_count_exactly) {
  // epochLfu in epoch 1: every thread's first read races to widen; afterwards the counts of
  // concurrent reads add up exactly (relaxed atomics on the wide scores).
  constexpr int kThreads = 4;
  constexpr int kRounds = 50;
  auto t = createTable(dynamicConfig(kDim, 64, SIZE_MAX, ScorePolicy::kEpochLfu));
  Model m;
  const auto keys = range(0, 100);
  upsert(*t, m, keys, 0, {}, [](int64_t, size_t) { return uint64_t{1}; });
  t->setEpoch(1);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&] {
      std::vector<float> out(keys.size() * kDim);
      std::vector<uint8_t> exists(keys.size());
      for (int r = 0; r < kRounds; ++r) {
        t->findInto(keys.data(), keys.size(), out.data(), exists.data());
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!exists[i] || out[i * kDim + 1] != valueOf(keys[i])[1]) wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(!dyn(t).narrowScores());
  for (int64_t k : keys) m.scores[k] = k2p32 | uint64_t{kThreads * kRounds};
  expectModel(*t, m);
  // lru past 2^32: each score is one of the overlapping calls' clocks.
  auto l = createTable(dynamicConfig(kDim, 64));
  upsert(*l, m, keys, 0, {}, [](int64_t, size_t) { return uint64_t{1}; });
  dyn(l).setClockForTests(k2p32 + 5);
  threads.clear();
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&] {
      std::vector<float> out(keys.size() * kDim);
      std::vector<uint8_t> exists(keys.size());
      for (int r = 0; r < kRounds; ++r) l->findInto(keys.data(), keys.size(), out.data(), exists.data());
    });
  }
  for (auto& th : threads) th.join();
  const auto s = snapshot(*l);
  for (int64_t k : keys) {
    EXPECT_TRUE(s.scores.at(k) > k2p32 + 5 && s.scores.at(k) <= k2p32 + 5 + kThreads * kRounds);
    for (size_t c = 0; c < kDim; ++c) EXPECT_FLOAT_BITS(s.values.at(k)[c], valueOf(k)[c]);
  }
}

ES_TEST_FILE_END
