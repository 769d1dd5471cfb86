// Cases the shards bag in passes (PartsLease -> poolBagPasses over PassParts) is not
// tested on in test_shards_bag.cc. Every expected value is written out here (a plain loop over
// the values the test stored), never computed by the code under test; each case runs by the
// pipeline (findPassesFrom = SIZE_MAX) and in passes (findPassesFrom = 0).
//   1. parts of the same dim and storage but different row layouts (optimizer slots on one
//      part only): leaseBag accepts them; the passes must use each part's own row stride.
//   2. 64 parts (the most the passes take: 64 buckets, the last one's last slot), 65 parts
//      (back to the pipeline), and 64 / 8 parts given in a permuted order (a power of two
//      that is not the identity: the owner() branch with mask >= 0).
//   3. a piece whose entries all belong to one part (its bucket filled to its 1024th slot).
//   4. capped parts (maxCapacity: keys refused at insert) and lfu scores counted per entry.
//   5. two threads pooling the same parts at once (lfu: every read counted once).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "memory.h"
#include "pass_table.h"
#include "planned_ops.h"
#include "shard_plan.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::differingBits;
using estest::Draw;
using estest::DrawnBag;
using estest::dynamicConfig;
using estest::PassesFrom;
using estest::residue;

namespace {

/** Stored value of key k, column c: a multiple of 1/16 (exact in every storage type). */
float valueOf(int64_t k, size_t c) {
  const uint64_t h = (static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull) ^ ((c + 3) * 0xBF58476D1CE4E5B9ull);
  return static_cast<float>(static_cast<int64_t>((h >> 37) % 255) - 127) / 16.0f;
}

/** Part d's constant initial value (tells owners apart). */
float initialOf(int64_t d) { return -1.25f + 0.125f * static_cast<float>(d % 23); }

struct PartSpec {
  size_t dim = 8;
  StorageDtype storage = StorageDtype::kFloat32;
  ScorePolicy policy = ScorePolicy::kLfu;
  size_t maxCap = SIZE_MAX;
  bool slots = false;  // two optimizer slots beside each row (dim and 1 floats)
};

/** Part d of n: the stored keys of residue d (upserted in order; a capped part refuses some). */
std::shared_ptr<Table> makePart(int64_t n, int64_t d, const std::vector<int64_t>& stored, const PartSpec& s) {
  TableConfig c = dynamicConfig(s.dim, 64, s.maxCap, s.policy);
  c.storage = s.storage;
  c.initializer.kind = InitKind::kConstant;
  c.initializer.a = initialOf(d);
  if (s.slots) {
    c.slotWidths = {static_cast<uint32_t>(s.dim), 1};
    c.slotInitial = {0.5f, -0.25f};
  }
  auto t = createTable(c);
  estest::upsertResidue(*t, n, d, stored, s.dim, valueOf);
  return t;
}

/** The keys each part holds (read from its export: a capped part may have refused some). */
std::set<int64_t> residentKeys(const std::vector<std::shared_ptr<Table>>& parts) {
  std::set<int64_t> out;
  for (const auto& t : parts) {
    const ExportResult e = t->exportBatch(0, SIZE_MAX);
    out.insert(e.keys.data(), e.keys.data() + e.keys.size());
  }
  return out;
}

/** Every part's scores by key. */
std::map<int64_t, uint64_t> scoresOf(const std::vector<std::shared_ptr<Table>>& parts) {
  std::map<int64_t, uint64_t> out;
  for (const auto& t : parts) {
    for (const auto& [k, sc] : estest::snapshot(*t).scores) out[k] = sc;
  }
  return out;
}

/** Resident keys whose lfu score is not its score in `before` plus `per` for each occurrence in the bag. */
size_t scoresOff(const std::vector<std::shared_ptr<Table>>& parts, const std::map<int64_t, uint64_t>& before, const BagInput& bag,
                 uint64_t per) {
  std::map<int64_t, uint64_t> count;
  for (size_t j = 0; j < bag.n; ++j) count[bag.keys[j]] += per;
  size_t bad = 0;
  for (const auto& t : parts) {
    for (const auto& [k, sc] : estest::snapshot(*t).scores) {
      const auto it = count.find(k);
      bad += sc != before.at(k) + (it == count.end() ? 0 : it->second) ? 1 : 0;
    }
  }
  return bad;
}

/** The parts of residues 0..n-1 and their plans, in identity order or reversed with the halves swapped (part[r] != r for every r but maybe one). */
struct OrderedParts {
  std::vector<Table*> raw;
  std::vector<ShardPlan> plans;
};

OrderedParts orderedParts(const std::vector<std::shared_ptr<Table>>& byResidue, bool permuted) {
  const size_t n = byResidue.size();
  const std::vector<ShardPlan> plans = estest::floorModPlans(static_cast<int64_t>(n));
  OrderedParts o;
  for (size_t i = 0; i < n; ++i) {
    const size_t at = permuted ? (n - 1 - i + n / 2) % n : i;
    o.raw.push_back(byResidue[at].get());
    o.plans.push_back(plans[at]);
  }
  return o;
}

/** The bag written out: stored value or the owning part's initial value, weighted, float64 in bag order, divided, rounded once. */
std::vector<float> plainSum(const BagInput& bag, Combiner c, size_t dim, int64_t n, const std::set<int64_t>& resident) {
  std::vector<float> out(bag.rows * dim);
  // The key's residency looked up once per entry, not per column, and raw pointers in the loops
  // (-O0, the sanitizer build: a std::set walk per column was about 5% of the binary's time).
  std::vector<double> accRow(dim);
  double* const acc = accRow.data();
  for (size_t r = 0; r < bag.rows; ++r) {
    for (size_t col = 0; col < dim; ++col) acc[col] = 0.0;
    double wsum = 0;
    for (int32_t j = bag.rowSplits[r]; j < bag.rowSplits[r + 1]; ++j) {
      const int64_t k = bag.keys[j];
      const double w = bag.weights ? static_cast<double>(bag.weights[j]) : 1.0;
      wsum += w;
      const bool isResident = resident.count(k) != 0;
      for (size_t col = 0; col < dim; ++col) {
        const double e = isResident ? valueOf(k, col) : initialOf(residue(k, n));
        acc[col] = acc[col] + w * e;
      }
    }
    const double div = c == Combiner::kMean ? wsum : 1.0;
    float* const o = out.data() + r * dim;
    for (size_t col = 0; col < dim; ++col) o[col] = div == 0 ? 0.0f : static_cast<float>(acc[col] / div);
  }
  return out;
}

std::vector<int64_t> someKeys(Draw& r, size_t count) {
  std::vector<int64_t> k{INT64_MIN, INT64_MAX, -1, 0, 1, -64, 63, 64, -65, INT64_MIN + 63, INT64_MAX - 64};
  while (k.size() < count) k.push_back(r.next() % 3 == 0 ? static_cast<int64_t>(r.next()) : static_cast<int64_t>(r.next() % 60000) - 30000);
  std::set<int64_t> seen;
  std::vector<int64_t> out;
  for (int64_t x : k) {
    if (seen.insert(x).second) out.push_back(x);
  }
  return out;
}

DrawnBag drawIt(Draw& r, size_t rows, const std::vector<int64_t>& stored) {
  DrawnBag b;
  for (size_t row = 0; row < rows; ++row) {
    const size_t len = row % 7 == 2 ? 0 : r.below(40);
    for (size_t j = 0; j < len; ++j) {
      const uint64_t p = r.next() % 10;
      int64_t k = p < 7 ? stored[r.below(stored.size())] : p < 9 ? static_cast<int64_t>(r.next() % 100000) - 50000
                                                                   : (r.next() % 2 ? INT64_MIN + 1 : INT64_MAX - 1);
      b.keys.push_back(k);
      b.weights.push_back(static_cast<float>(static_cast<int>(r.below(9)) - 3) / 2.0f);
    }
    b.splits.push_back(static_cast<int32_t>(b.keys.size()));
  }
  return b;
}

std::vector<Table*> raws(const std::vector<std::shared_ptr<Table>>& t) {
  std::vector<Table*> out;
  for (const auto& x : t) out.push_back(x.get());
  return out;
}

constexpr size_t kModes[] = {SIZE_MAX, 0};

}  // namespace

TEST(shards_passes_parts_with_different_row_layouts) {
  // Same dim and storage (leaseBag accepts them), one part with optimizer slots: its rows are
  // dim + dim + 1 floats apart, the other's dim. Both orders (the part with slots first, last).
  Draw r{301};
  const std::vector<int64_t> stored = someKeys(r, 3000);
  const DrawnBag b = drawIt(r, 300, stored);
  const BagInput bag{b.splits.data(), 300, b.keys.data(), b.keys.size(), b.weights.data()};
  for (bool slotsFirst : {true, false}) {
    for (const size_t from : kModes) {
      const PassesFrom mode(from);
      PartSpec withSlots;
      withSlots.slots = true;
      PartSpec plain;
      std::vector<std::shared_ptr<Table>> parts{makePart(2, 0, stored, slotsFirst ? withSlots : plain),
                                                makePart(2, 1, stored, slotsFirst ? plain : withSlots)};
      const std::vector<ShardPlan> plans = estest::floorModPlans(2);
      std::vector<Table*> raw = raws(parts);
      std::vector<float> got(300 * 8, 9.0f);
      lookupCombinedShards(raw.data(), plans.data(), 2, bag, Combiner::kSum, 0.0, false, got.data());
      const size_t wrong = differingBits(got, plainSum(bag, Combiner::kSum, 8, 2, residentKeys(parts)));
      if (wrong != 0) {
        std::cerr << "  (slots on part " << (slotsFirst ? 0 : 1) << ", findPassesFrom " << from << "): " << wrong
                  << " of " << got.size() << " floats differ\n";
      }
      EXPECT_EQ(wrong, size_t{0});
    }
  }
}

TEST(shards_passes_at_64_and_65_parts_and_permuted_powers_of_two) {
  Draw r{64};
  const std::vector<int64_t> stored = someKeys(r, 4000);
  const DrawnBag b = drawIt(r, 700, stored);  // ~13k entries: the parallel chunks
  const BagInput bag{b.splits.data(), 700, b.keys.data(), b.keys.size(), b.weights.data()};
  PartSpec s;
  s.dim = 5;
  for (int64_t n : {8, 63, 64, 65}) {
    for (bool permuted : {false, true}) {
      for (const size_t from : kModes) {
        const PassesFrom mode(from);
        std::vector<std::shared_ptr<Table>> byResidue;
        for (int64_t d = 0; d < n; ++d) byResidue.push_back(makePart(n, d, stored, s));
        const OrderedParts o = orderedParts(byResidue, permuted);
        const std::map<int64_t, uint64_t> before = scoresOf(byResidue);
        std::vector<float> got(700 * s.dim, 9.0f);
        lookupCombinedShards(o.raw.data(), o.plans.data(), o.plans.size(), bag, Combiner::kMean, 0.0, false, got.data());
        EXPECT_EQ(differingBits(got, plainSum(bag, Combiner::kMean, s.dim, n, residentKeys(byResidue))), size_t{0});
        // lfu: each resident key's score grew by its occurrences in the bag, nothing else moved.
        EXPECT_EQ(scoresOff(byResidue, before, bag, 1), size_t{0});
      }
    }
  }
}

TEST(shards_passes_one_part_fills_a_whole_piece) {
  // 4 parts; a bag row of 3000 entries all of residue 3 (part 3's bucket gets all 1024 slots of
  // each piece: grouped[4095] is written), then rows all of residue 0, then mixed rows.
  Draw r{3};
  std::vector<int64_t> stored = someKeys(r, 3000);
  PartSpec s;
  s.dim = 16;
  s.storage = StorageDtype::kBfloat16;
  DrawnBag b;
  for (size_t j = 0; j < 3000; ++j) {
    const int64_t base = j % 5 == 0 ? static_cast<int64_t>(r.next() % 200000) - 100000 : stored[r.below(stored.size())];
    b.keys.push_back(base - residue(base, 4) + 3);  // residue 3 (no overflow: base - r is a multiple of 4)
    b.weights.push_back(1.0f);
  }
  b.splits.push_back(3000);
  for (size_t row = 0; row < 5; ++row) {
    for (size_t j = 0; j < 1100; ++j) {
      const int64_t base = stored[r.below(stored.size())];
      b.keys.push_back(base - residue(base, 4));  // residue 0 (may be absent)
      b.weights.push_back(0.5f);
    }
    b.splits.push_back(static_cast<int32_t>(b.keys.size()));
  }
  const DrawnBag tail = drawIt(r, 50, stored);
  for (size_t i = 1; i < tail.splits.size(); ++i) {
    b.splits.push_back(b.splits.back() + (tail.splits[i] - tail.splits[i - 1]));
  }
  b.keys.insert(b.keys.end(), tail.keys.begin(), tail.keys.end());
  b.weights.insert(b.weights.end(), tail.weights.begin(), tail.weights.end());
  for (size_t j = 0; j < 3000; ++j) ASSERT_TRUE(residue(b.keys[j], 4) == 3);
  const size_t rows = b.splits.size() - 1;
  ASSERT_TRUE(static_cast<size_t>(b.splits.back()) == b.keys.size());
  const BagInput bag{b.splits.data(), rows, b.keys.data(), b.keys.size(), b.weights.data()};
  for (const size_t from : kModes) {
    const PassesFrom mode(from);
    std::vector<std::shared_ptr<Table>> parts;
    for (int64_t d = 0; d < 4; ++d) parts.push_back(makePart(4, d, stored, s));
    const std::vector<ShardPlan> plans = estest::floorModPlans(4);
    std::vector<Table*> raw = raws(parts);
    for (Combiner c : {Combiner::kSum, Combiner::kMean}) {
      std::vector<float> got(rows * s.dim, 9.0f);
      lookupCombinedShards(raw.data(), plans.data(), 4, bag, c, 0.0, false, got.data());
      EXPECT_EQ(differingBits(got, plainSum(bag, c, s.dim, 4, residentKeys(parts))), size_t{0});
    }
  }
}

TEST(shards_passes_over_capped_parts) {
  // maxCapacity 300 per part: most of the 3000 keys are refused; the bag reads the residents
  // and the refused keys' initial values, and only residents' scores count their reads.
  Draw r{300};
  const std::vector<int64_t> stored = someKeys(r, 3000);
  const DrawnBag b = drawIt(r, 400, stored);
  const BagInput bag{b.splits.data(), 400, b.keys.data(), b.keys.size(), b.weights.data()};
  PartSpec s;
  s.maxCap = 300;
  s.dim = 12;
  s.storage = StorageDtype::kFloat16;
  for (int64_t n : {1, 2, 4}) {
    for (const size_t from : kModes) {
      const PassesFrom mode(from);
      std::vector<std::shared_ptr<Table>> parts;
      for (int64_t d = 0; d < n; ++d) parts.push_back(makePart(n, d, stored, s));
      for (const auto& t : parts) ASSERT_TRUE(t->size() <= 300);
      const std::set<int64_t> resident = residentKeys(parts);
      ASSERT_TRUE(resident.size() < stored.size());
      const std::map<int64_t, uint64_t> before = scoresOf(parts);
      const std::vector<ShardPlan> plans = estest::floorModPlans(n);
      std::vector<Table*> raw = raws(parts);
      std::vector<float> got(400 * s.dim, 9.0f);
      lookupCombinedShards(raw.data(), plans.data(), plans.size(), bag, Combiner::kSum, 0.0, false, got.data());
      EXPECT_EQ(differingBits(got, plainSum(bag, Combiner::kSum, s.dim, n, resident)), size_t{0});
      EXPECT_EQ(scoresOff(parts, before, bag, 1), size_t{0});
      EXPECT_EQ(scoresOf(parts).size(), resident.size());  // nothing inserted
    }
  }
}

TEST(shards_passes_two_threads_on_the_same_parts) {
  // Two threads pool the same big bag over the same 4 parts at once (each a parallel-chunk
  // call): the same bits as the plain loop on both, every lfu read counted (2 per occurrence).
  Draw r{2};
  const std::vector<int64_t> stored = someKeys(r, 5000);
  const DrawnBag b = drawIt(r, 1500, stored);
  const BagInput bag{b.splits.data(), 1500, b.keys.data(), b.keys.size(), b.weights.data()};
  PartSpec s;
  s.dim = 32;
  for (const size_t from : kModes) {
    const PassesFrom mode(from);
    std::vector<std::shared_ptr<Table>> parts;
    for (int64_t d = 0; d < 4; ++d) parts.push_back(makePart(4, d, stored, s));
    const std::map<int64_t, uint64_t> before = scoresOf(parts);
    const std::vector<ShardPlan> plans = estest::floorModPlans(4);
    std::vector<Table*> raw = raws(parts);
    std::vector<float> a(1500 * s.dim, 9.0f);
    std::vector<float> c(1500 * s.dim, 9.0f);
    std::thread other([&] { lookupCombinedShards(raw.data(), plans.data(), 4, bag, Combiner::kSum, 0.0, false, c.data()); });
    lookupCombinedShards(raw.data(), plans.data(), 4, bag, Combiner::kSum, 0.0, false, a.data());
    other.join();
    const std::vector<float> want = plainSum(bag, Combiner::kSum, s.dim, 4, residentKeys(parts));
    EXPECT_EQ(differingBits(a, want), size_t{0});
    EXPECT_EQ(differingBits(c, want), size_t{0});
    EXPECT_EQ(scoresOff(parts, before, bag, 2), size_t{0});
  }
}

namespace {

/**
 * Every scratch size class a bucket can take (64 KiB .. 8 MiB) handed out and given back full
 * of 32-bit words of 1 (as a row index a valid row of every part, as an int64 key
 * 0x0000000100000001): the buckets come uninitialised from this cache, so a slot read without
 * being written in the call shows as a wrong float (review31a, stop 31).
 */
void poisonScratch() {
  std::vector<std::pair<void*, size_t>> blocks;
  const auto take = [&blocks](size_t bytes) {
    void* p = scratchAllocate(bytes);
    std::fill_n(static_cast<uint32_t*>(p), bytes / 4, 1u);
    blocks.emplace_back(p, bytes);
  };
  for (size_t bytes = kScratchMinBlock; bytes <= kScratchCacheBytes; bytes <<= 1) take(bytes);
  for (size_t bytes = kScratchMinBlock; bytes <= (size_t{1} << 20); bytes <<= 1) {
    take(bytes);
    take(bytes);
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) scratchFree(it->first, it->second);
}

}  // namespace

TEST(shards_passes_with_garbage_in_the_scratch_cache) {
  Draw r{31};
  std::vector<int64_t> stored;
  for (int i = 0; i < 6000; ++i) stored.push_back(static_cast<int64_t>(r.next() % 200000) - 100000);
  PartSpec s;
  s.dim = 4;
  for (int64_t n : {2, 3, 4, 5, 8, 16, 17, 32, 64}) {
    for (bool permuted : {false, true}) {
      // a 5000-entry row (5 pieces), rows all of residue 0 with empty rows between, then short
      // rows with absent keys
      std::vector<int32_t> splits{0};
      std::vector<int64_t> keys;
      for (int j = 0; j < 5000; ++j) keys.push_back(stored[r.below(stored.size())]);
      splits.push_back(static_cast<int32_t>(keys.size()));
      for (int row = 0; row < 3; ++row) {
        for (int j = 0; j < 900; ++j) {
          const int64_t b = stored[r.below(stored.size())];
          keys.push_back(b - residue(b, n));
        }
        splits.push_back(static_cast<int32_t>(keys.size()));
        splits.push_back(static_cast<int32_t>(keys.size()));
      }
      for (int row = 0; row < 400; ++row) {
        const size_t len = r.below(30);
        for (size_t j = 0; j < len; ++j) keys.push_back(r.next() % 4 == 0 ? static_cast<int64_t>(r.next() % 400000) - 200000 : stored[r.below(stored.size())]);
        splits.push_back(static_cast<int32_t>(keys.size()));
      }
      const size_t rows = splits.size() - 1;
      const BagInput bag{splits.data(), rows, keys.data(), keys.size(), nullptr};
      const PassesFrom mode(0);
      std::vector<std::shared_ptr<Table>> byResidue;
      for (int64_t d = 0; d < n; ++d) byResidue.push_back(makePart(n, d, stored, s));
      const OrderedParts o = orderedParts(byResidue, permuted);
      const std::vector<float> want = plainSum(bag, Combiner::kSum, s.dim, n, residentKeys(byResidue));
      for (int rep = 0; rep < 3; ++rep) {
        poisonScratch();
        std::vector<float> got(rows * s.dim, 9.0f);
        lookupCombinedShards(o.raw.data(), o.plans.data(), o.plans.size(), bag, Combiner::kSum, 0.0, false, got.data());
        const size_t wrong = differingBits(got, want);
        if (wrong != 0) std::cerr << "  n " << n << " permuted " << permuted << ": " << wrong << " floats differ\n";
        EXPECT_EQ(wrong, size_t{0});
      }
    }
  }
}

ES_TEST_FILE_END
