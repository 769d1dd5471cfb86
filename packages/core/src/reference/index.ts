// The reference backend (test oracle) and its pure kernels.
import { bagDenominators, combineBackward, combinePartial, gatherRows, ownedEntries, scatterRows } from './combineOps.js';
import { entryGradients, placeFound, plannedGradients, planRead, poolPartial } from './plannedOps.js';
import { applyOptimizerRow, combineBag, dedupeGradients } from './kernels.js';
import { compareKeepFirst, evictionLosers, nextScore, nowSeconds } from './scoring.js';

export { ReferenceBackend, referenceBackend } from './backend.js';
export { ReferenceCache } from './cache.js';
export { ReferenceDynamicTable } from './dynamicTable.js';
export { ReferenceStaticTable } from './staticTable.js';
export type { ScoreClock, EvictionCandidate } from './scoring.js';
export type { OwnedEntries } from './combineOps.js';

/** Pure per-row functions other table implementations reuse (see kernels.ts and scoring.ts for the exact rules). */
export const referenceKernels = Object.freeze({
  /** One row's fused optimizer update, in place (kernels.ts): gradient clip, weight decay, the kind's update of slots and row, weight clip. */
  applyOptimizerRow,
  /** Embedding-bag reduction of one bag into [nrows * dim] floats, computed in double and rounded once (kernels.ts). */
  combineBag,
  /** Sums duplicate keys' gradients: unique keys in order of first appearance and their float32 sums [u * dim]. */
  dedupeGradients,
  /** Entries of a bag owned under a plan (null: all, local key = key). */
  ownedEntries,
  /** Per bag row: 1 (sum), the sum of weights (mean) or the root of the sum of squared weights (sqrtn), in double. */
  bagDenominators,
  /** Adds the owned entries' pooled part of each row, divided by the whole row's denominator, to a float64 accumulator. */
  combinePartial,
  /** Per-entry gradients of the owned entries from pooled gradients [nrows * dim]. */
  combineBackward,
  /** Rows of `src` ([n * width]) at `positions`, compacted. */
  gatherRows,
  /** Writes src rows, in order, at `positions` of dst. */
  scatterRows,
  /** The keys (and scores) a planned read asks the plain op for, and where their results go (null: everywhere). */
  planRead,
  /** Copies a plain read's result into the caller's arrays at `positions` (all positions when null). */
  placeFound,
  /** Adds the owned entries' pooled part of every row to `out`. */
  poolPartial,
  /** Per-entry gradients of the owned entries (rows needed only for maxNorm), at entry rows of `out` or compact. */
  entryGradients,
  /** The owned entries of (keys, grads) under their local keys. */
  plannedGradients,
  /** The score a row touched by a call gets under a policy (`old` undefined for a new row). */
  nextScore,
  /** The eviction rule of capped tables: the candidates that lose (residents to evict, new keys to refuse). */
  evictionLosers,
  /** Order of preference of rows: higher score, then new key, then smaller key. */
  compareKeepFirst,
  /** Wall-clock seconds used by the timestamp policy. */
  nowSeconds,
});
