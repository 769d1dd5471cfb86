// The shard-plan ops of both table kinds (cpu-backend planned_ops.h contracts), in
// kernels: the owned entries and their local keys are found and compacted on the
// device, their rows are read (or inserted, or trained) by one readRows / trainRows
// call on the table, so locking, scoring, admission and atomicity are exactly those
// calls'; the partial bag and the combiner's backward run as kernels (plan.cuh).
// Caller arrays whose other entries must stay as they are (find outputs, partial
// sums, backward outputs) are staged in and out whole. Every allocation comes before
// the table call (a read may score, an insert or a step changes rows), so a call that
// runs out of memory changes nothing.
#include "device_table.h"
#include "plan.cuh"
#include "primitives.h"

namespace embedstack {
namespace cuda {

namespace {

/** The entries of a batch a shard owns: positions (ascending) and local keys, in table memory. */
struct Owned {
  uint32_t count = 0;
  uint32_t* at = nullptr;    // [count] entry positions
  int64_t* local = nullptr;  // [count] local keys
  int32_t* index = nullptr;  // [n] compact index of each entry, -1 = not owned (when asked)
};

Owned ownedEntries(Stage& st, const int64_t* keys, size_t n, const ShardPlan& plan, bool wantIndex) {
  Exec& ex = st.exec();
  Owned o;
  uint8_t* flags = st.scratch<uint8_t>(n, "owned-entry flags");
  int64_t* local = st.scratch<int64_t>(n, "local keys");
  launchThreads<OwnedEntries>(ex, n, {plan, keys, flags, local});
  o.at = st.scratch<uint32_t>(n, "owned entries");
  o.count = compactIndices(st, flags, n, o.at);
  o.local = st.scratch<int64_t>(o.count, "owned local keys");
  launchThreads<Gather<int64_t>>(ex, o.count, {o.at, local, o.local});
  if (wantIndex) {
    o.index = st.scratch<int32_t>(n, "owned-entry index");
    launchThreads<Fill<int32_t>>(ex, n, {o.index, -1});
    launchThreads<CompactIndex>(ex, o.count, {o.at, o.index});
  }
  return o;
}

/** A bag under a plan, staged: row splits, weights, per-row denominators, the owned entries and (when read) their rows. */
struct PlannedBag {
  const int32_t* splits;
  const float* weights;
  double* denom;
  Owned owned;
  float* rows = nullptr;  // [owned * dim]
};

/** Stages the bag and finds its owned entries; with `rows`, room for their rows (read by the caller). */
PlannedBag planBag(Stage& st, const BagInput& bag, Combiner c, const ShardPlan& plan, uint32_t dim, bool rows) {
  Exec& ex = st.exec();
  PlannedBag p{st.in(bag.rowSplits, bag.rows + 1, "bag row splits"), st.in(bag.weights, bag.n, "bag weights"),
               st.scratch<double>(bag.rows, "bag denominators"), {}};
  launchThreads<BagDenominators>(ex, bag.rows,
                                 {p.splits, p.weights, static_cast<BagCombiner>(static_cast<int>(c)), p.denom});
  p.owned = ownedEntries(st, st.in(bag.keys, bag.n, "bag keys"), bag.n, plan, true);
  if (rows) p.rows = st.scratch<float>(static_cast<size_t>(p.owned.count) * dim, "owned rows");
  return p;
}

}  // namespace

void DeviceTable::plannedFind(const int64_t* keys, size_t n, const ShardPlan& plan, bool insert,
                              const uint64_t* scores, float* values, uint8_t* exists) {
  Stage st(*ex_);
  const size_t dim = config_.dim;
  if (plan.all()) {
    readRows(st.in(keys, n, "keys"), n, insert, st.in(scores, n, "scores"), st.out(values, n * dim, "values"),
             st.out(exists, n, "exists flags"));
    st.finish();
    return;
  }
  const Owned o = ownedEntries(st, st.in(keys, n, "keys"), n, plan, false);
  const uint64_t* ownedScores = nullptr;
  if (insert && scores) {
    uint64_t* s = st.scratch<uint64_t>(o.count, "owned scores");
    launchThreads<Gather<uint64_t>>(*ex_, o.count, {o.at, st.in(scores, n, "scores"), s});
    ownedScores = s;
  }
  float* found = st.scratch<float>(o.count * dim, "owned rows");
  uint8_t* foundExists = st.scratch<uint8_t>(o.count, "owned exists flags");
  float* out = st.inOut(values, n * dim, "values");
  uint8_t* ex = st.inOut(exists, n, "exists flags");
  readRows(o.local, o.count, insert, ownedScores, found, foundExists);
  launchGroups<MoveCompactRows>(*ex_, o.count, {o.at, out, found, static_cast<uint32_t>(dim), 1});
  launchThreads<ScatterFlags>(*ex_, o.count, {o.at, foundExists, ex});
  st.finish();
}

void DeviceTable::lookupCombinedPartial(const BagInput& bag, Combiner c, double maxNorm, bool insert,
                                        const ShardPlan& plan, double* out) {
  Stage st(*ex_);
  const uint32_t d = dim();
  const PlannedBag p = planBag(st, bag, c, plan, d, true);
  uint8_t* found = st.scratch<uint8_t>(p.owned.count, "owned exists flags");
  double* scales = st.scratch<double>(bag.n, "entry scales");
  double* sums = st.inOut(out, bag.rows * d, "partial sums");
  readRows(p.owned.local, p.owned.count, insert, nullptr, p.rows, found);
  launchThreads<OwnedScales>(*ex_, bag.n, {p.owned.index, p.rows, p.weights, maxNorm, d, scales});
  launchGroups<BagPartial>(*ex_, bag.rows, {p.splits, p.owned.index, p.rows, scales, p.denom, d, sums});
  st.finish();
}

void DeviceTable::lookupCombinedBackward(const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                                         const ShardPlan& plan, float* out) {
  Stage st(*ex_);
  const uint32_t d = dim();
  const PlannedBag p = planBag(st, bag, c, plan, d, maxNorm > 0);
  const float* pooled = st.in(grads, bag.rows * d, "pooled gradients");
  float* entryGrads = st.inOut(out, bag.n * d, "entry gradients");
  if (maxNorm > 0) {
    uint8_t* found = st.scratch<uint8_t>(p.owned.count, "owned exists flags");
    readRows(p.owned.local, p.owned.count, false, nullptr, p.rows, found);
  }
  launchThreads<BagBackward>(*ex_, bag.rows,
                             {p.splits, p.owned.index, p.weights, pooled, p.denom, p.rows, maxNorm, d, 0, entryGrads});
  st.finish();
}

void DeviceTable::applyCombinedGradients(const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                                         const ShardPlan& plan, const OptimizerParams& opt) {
  checkOptimizer(opt);  // before any staging
  Stage st(*ex_);
  const uint32_t d = dim();
  const PlannedBag p = planBag(st, bag, c, plan, d, maxNorm > 0);
  float* entryGrads = st.scratch<float>(static_cast<size_t>(p.owned.count) * d, "owned entry gradients");
  const float* pooled = st.in(grads, bag.rows * d, "pooled gradients");
  const auto backward = [&] {
    launchThreads<BagBackward>(*ex_, bag.rows,
                               {p.splits, p.owned.index, p.weights, pooled, p.denom, p.rows, maxNorm, d, 1, entryGrads});
  };
  if (maxNorm > 0) {
    // Clipping reads the rows: the read and the step are one table call, so a step that
    // fails leaves the read's scores and the clock as they were.
    uint8_t* found = st.scratch<uint8_t>(p.owned.count, "owned exists flags");
    readThenTrain(p.owned.local, p.owned.count, p.rows, found, backward, entryGrads, opt);
  } else {
    backward();
    trainRows(p.owned.local, p.owned.count, entryGrads, opt);
  }
  st.finish();
}

void DeviceTable::plannedApplyGradients(const int64_t* keys, size_t n, const float* grads, const ShardPlan& plan,
                                        const OptimizerParams& opt) {
  Stage st(*ex_);
  const size_t dim = config_.dim;
  if (plan.all()) {
    trainRows(st.in(keys, n, "keys"), n, st.in(grads, n * dim, "gradients"), opt);
    st.finish();
    return;
  }
  const Owned o = ownedEntries(st, st.in(keys, n, "keys"), n, plan, false);
  float* owned = st.scratch<float>(o.count * dim, "owned gradients");
  launchGroups<MoveCompactRows>(*ex_, o.count,
                                {o.at, const_cast<float*>(st.in(grads, n * dim, "gradients")), owned,
                                 static_cast<uint32_t>(dim), 0});
  trainRows(o.local, o.count, owned, opt);
  st.finish();
}

}  // namespace cuda
}  // namespace embedstack
