// applyCombinedGradients (the combiner's backward fused with applyGradients, no
// per-entry gradient array): a key's entries' gradients are added in float in order of
// appearance (values whose float32 sum changes with the order, on a batch large enough
// to split the keys over the thread pool), and every value's bits equal the unfused
// definition: lookupCombinedBackward's per-entry gradients, the owned ones compacted in
// the test, then applyGradients.
#include <cmath>
#include <memory>
#include <vector>

#include "planned_ops.h"
#include "shard_plan.h"
#include "table_helpers.h"
#include "test.h"

ES_TEST_FILE_BEGIN

using namespace embedstack;
using estest::Draw;
using estest::dynamicConfig;
using estest::snapshot;
using estest::staticConfig;

namespace {

ShardPlan modPlan(int64_t n, int64_t shard) {
  ShardPlan p;
  p.kind = ShardPlan::kMod;
  p.numShards = n;
  p.shard = shard;
  return p;
}

}  // namespace

// Each of U keys appears three times, once in each third of the bag (each third lists
// the keys in its own order); bags of 5 ids, combiner sum, so an entry's gradient is
// its bag's. Column 0's gradients in order of appearance are 1, 2^-24, 2^-24: in float
// (1 + 2^-24) + 2^-24 == 1 (each add a tie to even), while any other order, or a float64
// sum, gives 1 + 2^-23. Column 1's are 2^-24, 2^-24, 1: in order 2^-23 + 1 == 1 + 2^-23,
// reversed 1. SGD with lr 1 from zeros then stores exactly minus the float sum.
TEST(apply_combined_gradients_sums_a_keys_entries_in_order_of_appearance) {
  const size_t u = 20000;  // >= 16384 distinct keys: the update runs on the thread pool
  const size_t per = 5;
  const size_t n = 3 * u;
  const float tiny = std::ldexp(1.0f, -24);
  std::vector<int64_t> keys(n);
  Draw draw{7};
  for (size_t pass = 0; pass < 3; ++pass) {
    std::vector<int64_t> order(u);
    for (size_t i = 0; i < u; ++i) order[i] = static_cast<int64_t>(2 * i + 1);  // odd keys: a mod-2 plan's shard 1 owns all
    for (size_t i = u - 1; i > 0; --i) std::swap(order[i], order[draw.below(i + 1)]);
    for (size_t i = 0; i < u; ++i) keys[pass * u + i] = order[i];
  }
  const size_t rows = n / per;
  std::vector<int32_t> splits(rows + 1);
  for (size_t r = 0; r <= rows; ++r) splits[r] = static_cast<int32_t>(r * per);
  std::vector<float> grads(rows * 2);
  for (size_t r = 0; r < rows; ++r) {
    const size_t pass = r * per / u;
    grads[r * 2] = pass == 0 ? 1.0f : tiny;
    grads[r * 2 + 1] = pass == 2 ? 1.0f : tiny;
  }
  const BagInput bag{splits.data(), rows, keys.data(), n, nullptr};
  OptimizerParams sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.lr = 1;
  const float want0 = -1.0f;
  const float want1 = -(1.0f + std::ldexp(1.0f, -23));
  for (bool isStatic : {true, false}) {
    for (bool sharded : {false, true}) {
      auto t = createTable(isStatic ? staticConfig(2 * u + 2, 2) : dynamicConfig(2));
      ShardPlan plan;
      if (sharded) plan = modPlan(2, 1);
      applyCombinedGradients(*t, bag, grads.data(), Combiner::kSum, 0, plan, sgd);
      const auto s = snapshot(*t);
      for (size_t i = 0; i < u; ++i) {
        const std::vector<float>& v = s.values.at(static_cast<int64_t>(2 * i + 1));
        EXPECT_FLOAT_BITS(v[0], want0);
        EXPECT_FLOAT_BITS(v[1], want1);
        if (isStatic) {
          EXPECT_FLOAT_BITS(s.values.at(static_cast<int64_t>(2 * i))[0], 0.0f);  // even keys: in no bag
        }
      }
      if (!isStatic) {
        EXPECT_EQ(t->size(), u);
      }
    }
  }
}

using estest::unfusedStep;

// Duplicates, weights (some zero, so a row's denominator can be 0), every combiner,
// maxNorm off and on (some rows clipped), all keys or one shard of a mod plan, static
// and dynamic tables, Adagrad: two steps each; every stored value and slot bit for bit.
TEST(apply_combined_gradients_equals_the_per_entry_backward_then_apply_gradients) {
  const size_t dim = 7;
  const size_t rows = 900;
  const size_t vocab = 300;
  Draw draw{11};
  std::vector<int32_t> splits(rows + 1, 0);
  for (size_t r = 0; r < rows; ++r) splits[r + 1] = splits[r] + static_cast<int32_t>(draw.below(9));  // some empty rows
  const size_t n = static_cast<size_t>(splits[rows]);
  std::vector<int64_t> keys(n);
  std::vector<float> weights(n);
  for (size_t j = 0; j < n; ++j) {
    keys[j] = static_cast<int64_t>(draw.below(vocab));
    const size_t w = draw.below(8);
    weights[j] = w == 0 ? 0.0f : static_cast<float>(w) * 0.375f - 1.0f;
  }
  std::vector<float> grads(rows * dim);
  for (float& g : grads) g = static_cast<float>(static_cast<int64_t>(draw.below(2001)) - 1000) / 317.0f;
  std::vector<float> initial(vocab * dim);
  for (size_t i = 0; i < initial.size(); ++i) initial[i] = static_cast<float>(static_cast<int64_t>(i * 37 % 101) - 50) / 23.0f;
  OptimizerParams adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.lr = 0.05;
  for (bool isStatic : {true, false}) {
    for (Combiner c : {Combiner::kSum, Combiner::kMean, Combiner::kSqrtn}) {
      for (double maxNorm : {0.0, 2.5}) {
        for (bool sharded : {false, true}) {
          for (bool weighted : {false, true}) {
            TableConfig config = isStatic ? staticConfig(vocab, dim) : dynamicConfig(dim);
            config.slotWidths = {static_cast<uint32_t>(dim)};
            config.slotInitial = {0.1f};
            if (isStatic) {
              config.initializer.kind = InitKind::kArray;
              config.initializer.values = initial;
            }
            auto fused = createTable(config);
            auto twin = createTable(config);
            if (!isStatic) {
              // some keys present (with values), the others inserted by the step
              std::vector<int64_t> present;
              for (size_t k = 0; k < vocab; k += 2) present.push_back(static_cast<int64_t>(k));
              std::vector<float> v(present.size() * dim);
              for (size_t i = 0; i < v.size(); ++i) v[i] = initial[i];
              fused->upsert(present.data(), present.size(), v.data(), nullptr);
              twin->upsert(present.data(), present.size(), v.data(), nullptr);
            }
            ShardPlan plan;
            if (sharded) plan = modPlan(3, 2);
            const BagInput bag{splits.data(), rows, keys.data(), n, weighted ? weights.data() : nullptr};
            for (int step = 1; step <= 2; ++step) {
              adagrad.step = step;
              applyCombinedGradients(*fused, bag, grads.data(), c, maxNorm, plan, adagrad);
              unfusedStep(*twin, bag, grads.data(), c, maxNorm, plan, adagrad);
            }
            const auto a = snapshot(*fused);
            const auto b = snapshot(*twin);
            ASSERT_TRUE(a.values.size() == b.values.size());
            for (const auto& [k, v] : b.values) {
              const std::vector<float>& got = a.values.at(k);
              const std::vector<float>& gotSlots = a.slots.at(k);
              const std::vector<float>& wantSlots = b.slots.at(k);
              for (size_t d = 0; d < dim; ++d) {
                EXPECT_FLOAT_BITS(got[d], v[d]);
                EXPECT_FLOAT_BITS(gotSlots[d], wantSlots[d]);
              }
            }
          }
        }
      }
    }
  }
}

// The sharded applyGradients reads each owned entry's gradient in place (no copy of the
// owned rows): the result equals applyGradients of the owned entries compacted here.
TEST(planned_apply_gradients_equals_apply_gradients_of_the_owned_entries) {
  const size_t dim = 3;
  const int64_t keys[] = {4, 7, -5, 4, 9, 7, 2, 4, 3};
  const size_t n = 9;
  std::vector<float> grads(n * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(static_cast<int64_t>(i * 13 % 17) - 8) / 3.0f;
  OptimizerParams adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.lr = 0.5;
  TableConfig config = dynamicConfig(dim);
  config.slotWidths = {static_cast<uint32_t>(dim)};
  config.slotInitial = {0.1f};
  auto planned = createTable(config);
  auto twin = createTable(config);
  const ShardPlan plan = modPlan(3, 1);  // floorMod 1: 4, 7, -5 (9, 2 and 3 are other shards')
  plannedApplyGradients(*planned, keys, n, grads.data(), plan, adagrad);
  std::vector<int64_t> local;
  std::vector<float> owned;
  for (size_t j = 0; j < n; ++j) {
    int64_t l = 0;
    if (!plan.owns(keys[j], &l)) continue;
    local.push_back(l);
    owned.insert(owned.end(), grads.begin() + j * dim, grads.begin() + (j + 1) * dim);
  }
  EXPECT_EQ(local.size(), size_t{6});
  twin->applyGradients(local.data(), local.size(), owned.data(), adagrad);
  const auto a = snapshot(*planned);
  const auto b = snapshot(*twin);
  EXPECT_EQ(a.values.size(), size_t{3});
  EXPECT_TRUE(a.values == b.values);
  EXPECT_TRUE(a.slots == b.slots);
}

ES_TEST_FILE_END
