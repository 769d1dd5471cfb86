// Parsing of the composite arguments several table functions share: a ragged bag
// (rowSplits, keys, weights), an optimizer vector and a shard plan vector. Each
// validates everything (no input can crash the process); a Promise call's job reads
// copies of the arrays (CallCopies), never the JS values themselves.
#pragma once

#include <napi.h>

#include <memory>
#include <vector>

#include "args.h"
#include "optimizer.h"
#include "shard_plan.h"
#include "table.h"

namespace embedstack {

/** A validated bag: `input` points into `keys` (which also owns a copy of the row splits). */
struct BagArg {
  std::shared_ptr<KeysArg> keys;
  BagInput input;
};

/** Arguments i, i+1, i+2: rowSplits (Int32Array [rows + 1], from 0, non-decreasing, ending at n), keys, weights (Float32Array [n] or null). */
BagArg bagArg(const Napi::CallbackInfo& info, size_t i, const TableHolder& h,
              bool keepInt32 = false);

/** A linear combiner id (0 sum, 1 mean, 2 sqrtn): the partial lookup and the backward ops. */
Combiner combinerArg(const Napi::CallbackInfo& info, size_t i);
/** A combiner id of lookupCombined: the linear ones, 3 max, 4 min. */
Combiner lookupCombinerArg(const Napi::CallbackInfo& info, size_t i);
/** maxNorm: a finite number >= 0 (0 = no clipping). */
double maxNormArg(const Napi::CallbackInfo& info, size_t i);

/** The optimizer vector (Float64Array laid out by abi::OptimizerField). */
OptimizerParams optimizerArg(const Napi::CallbackInfo& info, size_t i);

/**
 * A shard plan vector (Float64Array [placement, numShards, shard, start, end], see
 * src/abi.ts PlanField; placement 1 mod, 2 range, 3 localized), or null / undefined
 * for none (every key). 'mod' on a static table maps rows round-robin.
 */
ShardPlan planArg(const Napi::CallbackInfo& info, size_t i, const Table& t);
/** A plan vector's kPlanFields numbers (placement 1-3), validated for table `t`. */
ShardPlan planOf(const double* v, const Table& t);

}  // namespace embedstack
