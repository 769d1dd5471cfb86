// Parsing of the composite arguments several table functions share: a ragged bag
// (rowSplits, keys, weights), an optimizer vector and a shard plan vector. Each
// validates everything (no input can crash the process); a Promise call's job reads
// copies of the arrays (CallCopies), never the JS values themselves.
#pragma once

#include <napi.h>

#include <functional>
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

/**
 * A Promise call's result array made by CallCopies::fresh() when it has no output and its
 * result is below CallCopies::kFreshMaxBytes: its memory, or null (then the job allocates
 * its result from the addon's memory, as a sync call does).
 */
void* freshResult(const Napi::CallbackInfo& info, napi_typedarray_type type, size_t length, size_t elementSize,
                  napi_ref* array);

/** A fresh result array's JS value, at the settlement (its reference is held until the call ends). */
Napi::Value freshValue(Napi::Env env, napi_ref array);

/** Where a bag lookup (lookupCombined, lookupCombinedShards) writes its result of rows * dim floats. */
struct BagOut {
  float* data = nullptr;     // the caller's array (the job's memory for it), a fresh array, or null: the job allocates
  napi_ref fresh = nullptr;  // the fresh array, returned at the settlement
};

/**
 * Argument i: the caller's Float32Array of exactly rows * dim floats, which the job writes
 * whole (Use::kOutput: a Promise call's private buffer is not filled from it first), or
 * undefined / null for a result the call makes: a fresh array (freshResult) for a Promise
 * call, else null data (the job allocates, a sync call or a large result). `what` names
 * the result in an overflow error.
 */
BagOut bagOutArg(const Napi::CallbackInfo& info, size_t i, size_t rows, size_t dim, const char* what);

/** A bag lookup's result: written into the BagOut's array (filled) or allocated by the job (owned). */
struct BagOutcome {
  HostArray<float> owned;
  bool filled = false;
};

/** The call's value: undefined (the caller's array), the fresh array, or the job's own as a Float32Array. */
std::function<Napi::Value(Napi::Env, BagOutcome&)> bagOutcomeToJs(const BagOut& out);

}  // namespace embedstack
