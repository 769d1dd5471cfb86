// Table operations with a shard plan, and the combiner's backward (core's
// rawTable.ts: find / findOrInsert with a plan, lookupCombinedPartial,
// lookupCombinedBackward, applyCombinedGradients, applyGradients with a plan).
// Built on the Table interface only: the owned entries' local keys are read (or
// updated) by one findInto / findOrInsertInto / applyGradients call on the table,
// so locking, scoring, admission and atomicity are exactly those calls'. Rows go
// through a per-call scratch buffer (host memory, freed at the end of the call).
#pragma once

#include <cstddef>
#include <cstdint>

#include "shard_plan.h"
#include "table.h"

namespace embedstack {

/**
 * A table that runs the planned ops itself (the CUDA backend's tables, in their own
 * kernels): the functions below hand such a table the call unchanged. Same
 * contracts as the functions of the same name.
 */
class PlannedOps {
 public:
  virtual ~PlannedOps() = default;
  virtual void plannedFind(const int64_t* keys, size_t n, const ShardPlan& plan, bool insert, const uint64_t* scores,
                           float* values, uint8_t* exists) = 0;
  virtual void lookupCombinedPartial(const BagInput& bag, Combiner c, double maxNorm, bool insert,
                                     const ShardPlan& plan, double* out) = 0;
  virtual void lookupCombinedBackward(const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                                      const ShardPlan& plan, float* out) = 0;
  virtual void applyCombinedGradients(const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                                      const ShardPlan& plan, const OptimizerParams& opt) = 0;
  virtual void plannedApplyGradients(const int64_t* keys, size_t n, const float* grads, const ShardPlan& plan,
                                     const OptimizerParams& opt) = 0;
};

/**
 * find (insert = false) or findOrInsert of the owned keys, written at their positions
 * of values [n * dim] / exists [n]; other positions are left as they are.
 * `scores` [n] or null (findOrInsert only).
 */
void plannedFind(Table& t, const int64_t* keys, size_t n, const ShardPlan& plan, bool insert, const uint64_t* scores,
                 float* values, uint8_t* exists);

/** lookupCombinedPartial: adds this shard's part of every bag row to out [rows * dim] (float64). */
void lookupCombinedPartial(Table& t, const BagInput& bag, Combiner c, double maxNorm, bool insert,
                           const ShardPlan& plan, double* out);

/**
 * Whether lookupCombinedShards splits `bag` over the thread pool (an async call brings its
 * helpers along): distinct CPU tables and a bag large enough. Other tables add their
 * partials one after another, so no helper is woken for them.
 */
bool lookupCombinedShardsSplits(Table* const* tables, size_t parts, const BagInput& bag);

/**
 * lookupCombinedShards: the whole bag over `parts` shards (tables[d] with plans[d], one
 * dim), rounded once to float32 (out [rows * dim], written whole), bit for bit:
 *  - CPU tables whose plans split keys by floorMod over one N, each residue owned by at
 *    most one part, and every key of the bag owned (each key has exactly one owner;
 *    residues nobody owns are allowed when no key falls on them: sok's static variables
 *    of fewer rows than devices; decided for the whole bag, so one key on an unowned
 *    residue sends every row to the shard-order sum below): each row's entries summed in float64 in bag
 *    order, each entry's row from its owner, divided and rounded once by one table's
 *    own bag kernel (combineBagRows): one table holding every row's lookupCombinedInto,
 *    signed zeros included. Chunks of bag rows run in parallel on the pool. Dynamic
 *    tables of one storage type, every residue owned (Table::leaseBag): each chunk is one table's bag
 *    pipeline over every part's table (each key resolved in its owner's table a few
 *    hundred entries ahead of the pooling, as one table's bag resolves its own; every
 *    part's read lock is held, taken in part order, for the whole call, so a writer to any
 *    shard waits for the whole bag: float16 / bfloat16 parts, which read their rows with
 *    find first before Nov 29 2026, now hold their locks as float32 ones did). Other
 *    tables: each chunk sorts its entries by owner in one pass, gathers their rows in
 *    bag order and pools them in one pass. Either way the cost does not grow with the parts.
 *  - otherwise: the shards' lookupCombinedPartial (each into zeros) added in shard
 *    order. CPU tables: no partial arrays; the same chunks, each carrying one float64
 *    running sum per value through the shards in order (a shard owning nothing of a
 *    row costs nothing there). Without inserts the rows are lent through one RowLease per table (one read
 * call each, read locks held for the whole call); with inserts, or a table that does
 * not lend, each table's find / findOrInsert runs first (one call per table, the tables
 * in parallel). Tables that pool in their own kernels (PlannedOps), or one table given
 * twice: each partial in turn, then the sum.
 */
void lookupCombinedShards(Table* const* tables, const ShardPlan* plans, size_t parts, const BagInput& bag, Combiner c,
                          double maxNorm, bool insert, float* out);

/** lookupCombinedBackward: owned entries' gradients at their rows of out [n * dim]. grads [rows * dim]. */
void lookupCombinedBackward(Table& t, const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                            const ShardPlan& plan, float* out);

/**
 * applyCombinedGradients: applyGradients(owned local keys, their per-entry gradients),
 * bit for bit, without the per-entry array: the table sums each key's entries'
 * gradients (combineBackwardSum, in order of appearance) where it updates the key.
 * With maxNorm > 0 the backward needs each owned entry's row as a findInto of the owned keys
 * returns it just before the step: the table reads it in the step's own call
 * (Table::applyGradientSumsAfterFind, into a scratch allocated here first). A dynamic table
 * reads it under its write lock once every allocation of the step is done (the rows' scratch,
 * dedupe, the update loop's per-thread row buffers, admission, growth, widening; nothing after
 * that allocates, the pool's parallelFor included), so a step rejected for memory changes no
 * row, score, clock or size, no other write comes between the read and the step, and a
 * successful one ends exactly as findInto then applyGradientSums (the read's scores at a clock
 * of its own, one before the step's). Unclipped calls make no such read.
 */
void applyCombinedGradients(Table& t, const BagInput& bag, const float* grads, Combiner c, double maxNorm,
                            const ShardPlan& plan, const OptimizerParams& opt);

/**
 * applyCombinedGradientsShards: applyCombinedGradients of every part (tables[d] with
 * plans[d], one dim) from the same bag and pooled gradients, in one call: every table's
 * optimizer is checked before any row changes, the bag's denominators are computed once,
 * and distinct CPU tables train in parallel on the pool (each exactly its own
 * applyCombinedGradients, bit for bit). Tables that train in their own kernels
 * (PlannedOps), or one table given twice: each part in turn, in part order.
 * Only the optimizer and the arguments checked before the call are all-or-nothing: a
 * part that fails inside (a shard disposed meanwhile, a static shard's key out of range
 * because the caller rewrote its ids meanwhile) throws after the other parts may have
 * trained.
 */
void applyCombinedGradientsShards(Table* const* tables, const ShardPlan* plans, size_t parts, const BagInput& bag,
                                  const float* grads, Combiner c, double maxNorm, const OptimizerParams& opt);

/** Whether applyCombinedGradientsShards splits its parts over the thread pool (an async call brings its helpers along): distinct CPU tables and a bag large enough. */
bool applyCombinedGradientsShardsSplits(Table* const* tables, size_t parts, const BagInput& bag);

/** applyGradients of the owned entries of (keys, grads [n * dim]) under their local keys. */
void plannedApplyGradients(Table& t, const int64_t* keys, size_t n, const float* grads, const ShardPlan& plan,
                           const OptimizerParams& opt);

}  // namespace embedstack
