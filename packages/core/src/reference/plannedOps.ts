import type { Bag, Combiner } from '../combiners.js';
import type { Keys } from '../dtypes.js';
import type { ResolvedOptimizer } from '../optimizers.js';
import type { FindResult } from '../rawTable.js';
import { planEntries, type ResolvedShardPlan } from '../shardPlan.js';
import { bagDenominators, combineBackward, combinePartial, gatherRows, type OwnedEntries, ownedEntries, scatterRows } from './combineOps.js';

/** The plain (plan-less) operations a table offers; the planned ones are built from them. */
export interface PlainOps {
  readonly dim: number;
  find(keys: Keys): FindResult;
  findOrInsert(keys: Keys, scores: BigUint64Array | null): FindResult;
  applyGradients(keys: Keys, grads: Float32Array, optimizer: ResolvedOptimizer): void;
}

/** The keys (and scores) a planned read asks the plain op for, and where their results go (null: everywhere). */
export function planRead(
  keys: Keys,
  scores: BigUint64Array | null,
  plan: ResolvedShardPlan | null,
): {
  /** The keys to read: the owned entries' local keys (all keys without a plan). */
  keys: Keys;
  /** Their scores, or null. */
  scores: BigUint64Array | null;
  /** Input positions of the keys read, or null: every position. */
  positions: Int32Array | null;
} {
  if (!plan) return { keys, scores, positions: null };
  const { positions, local } = planEntries(keys, plan);
  return { keys: local, scores: scores ? BigUint64Array.from(positions, (p) => scores[p]!) : null, positions };
}

/** Copies a plain read's result into the caller's arrays at `positions` (all positions when null); without `out` returns `r`. */
export function placeFound(r: FindResult, out: FindResult | null, positions: Int32Array | null, dim: number): FindResult {
  if (!out) return r;
  if (!positions) {
    out.values.set(r.values);
    out.exists.set(r.exists);
  } else {
    scatterRows(out.values, positions, r.values, dim);
    scatterRows(out.exists, positions, r.exists, 1);
  }
  return out;
}

/** Adds the owned entries' pooled part of every row (rows: [owned.count * dim], the owned local keys' rows) to `out`. */
export function poolPartial(bag: Bag<Keys>, owned: OwnedEntries, rows: Float32Array, dim: number, combiner: Combiner, maxNorm: number, out: Float64Array): Float64Array {
  combinePartial(bag, owned, (i) => rows.subarray(i * dim, (i + 1) * dim), dim, bagDenominators(bag, combiner), maxNorm, out);
  return out;
}

/** Per-entry gradients of the owned entries (rows needed only for maxNorm); at entry rows of `out`, or compact. */
export function entryGradients(
  bag: Bag<Keys>,
  owned: OwnedEntries,
  grads: Float32Array,
  dim: number,
  combiner: Combiner,
  maxNorm: number,
  rows: Float32Array | null,
  out: Float32Array,
  compact: boolean,
): Float32Array {
  const rowOf = rows && maxNorm > 0 ? (i: number) => rows.subarray(i * dim, (i + 1) * dim) : null;
  combineBackward(bag, owned, grads, dim, bagDenominators(bag, combiner), maxNorm, rowOf, out, compact);
  return out;
}

/** find / findOrInsert with `out` and `plan` (rawTable.ts), over the plain op. */
export function plannedRead(
  t: PlainOps,
  keys: Keys,
  scores: BigUint64Array | null,
  insert: boolean,
  out: FindResult | null,
  plan: ResolvedShardPlan | null,
): FindResult {
  const q = planRead(keys, scores, plan);
  return placeFound(insert ? t.findOrInsert(q.keys, q.scores) : t.find(q.keys), out, q.positions, t.dim);
}

/** lookupCombinedPartial (rawTable.ts) over the plain ops. */
export function partialLookup(
  t: PlainOps,
  bag: Bag<Keys>,
  combiner: Combiner,
  maxNorm: number,
  insertMissing: boolean,
  plan: ResolvedShardPlan,
  out: Float64Array,
): Float64Array {
  const owned = ownedEntries(bag, plan);
  const rows = (insertMissing ? t.findOrInsert(owned.local, null) : t.find(owned.local)).values;
  return poolPartial(bag, owned, rows, t.dim, combiner, maxNorm, out);
}

/** lookupCombinedBackward (rawTable.ts) over the plain find. */
export function backward(
  t: PlainOps,
  bag: Bag<Keys>,
  grads: Float32Array,
  combiner: Combiner,
  maxNorm: number,
  plan: ResolvedShardPlan | null,
  out: Float32Array,
): Float32Array {
  const owned = ownedEntries(bag, plan);
  const rows = maxNorm > 0 ? t.find(owned.local).values : null;
  return entryGradients(bag, owned, grads, t.dim, combiner, maxNorm, rows, out, false);
}

/** applyCombinedGradients (rawTable.ts) over the plain ops. */
export function applyCombined(
  t: PlainOps,
  bag: Bag<Keys>,
  grads: Float32Array,
  combiner: Combiner,
  maxNorm: number,
  plan: ResolvedShardPlan | null,
  optimizer: ResolvedOptimizer,
): void {
  const owned = ownedEntries(bag, plan);
  const rows = maxNorm > 0 ? t.find(owned.local).values : null;
  const g = entryGradients(bag, owned, grads, t.dim, combiner, maxNorm, rows, new Float32Array(owned.count * t.dim), true);
  t.applyGradients(owned.local, g, optimizer);
}

/** The owned entries of (keys, grads) under their local keys. */
export function plannedGradients(keys: Keys, grads: Float32Array, dim: number, plan: ResolvedShardPlan | null): {
  /** The owned entries' local keys. */
  keys: Keys;
  /** Their gradients, [keys.length * dim]. */
  grads: Float32Array;
} {
  if (!plan) return { keys, grads };
  const { positions, local } = planEntries(keys, plan);
  return { keys: local, grads: gatherRows(grads, positions, dim) };
}
