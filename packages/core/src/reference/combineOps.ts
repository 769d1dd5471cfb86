import type { Bag, Combiner } from '../combiners.js';
import type { Keys } from '../dtypes.js';
import { planEntries, type ResolvedShardPlan } from '../shardPlan.js';

/**
 * Pure kernels of the planned lookups and of the combiner's backward (core.md
 * "Combiners"), shared by the reference tables and by other table implementations
 * (store-redis). A caller: (1) `ownedEntries` picks the bag entries its shard owns
 * and their local keys; (2) reads those keys' rows with its own find; (3) runs a
 * kernel over them. The native backends follow the same arithmetic exactly.
 *
 * Arithmetic (double, entries in bag order, IEEE operations only):
 * - denom_r (every entry of row r, whatever shard owns it): sum 1; mean Σ w_j;
 *   sqrtn sqrt(Σ w_j²); weights 1 when none.
 * - forward term of entry j: s_j * e_j with s_j = w_j, or (w_j * maxNorm) / ||e_j||
 *   when maxNorm > 0 and ||e_j|| > maxNorm (TF clip_by_norm).
 * - backward of entry j: dy = (w_j / denom_r) * g_r (0 when denom_r is 0); with
 *   maxNorm > 0 and ||e_j|| > maxNorm, the gradient of clip_by_norm at e_j:
 *   de = (maxNorm / ||e_j||) * (dy - e_j * (e_j · dy) / ||e_j||²); else de = dy;
 *   rounded to float32 once.
 */

/** The entries of a bag a shard owns. */
export interface OwnedEntries {
  /** Number of owned entries. */
  count: number;
  /** `[nnz]`: compact index of each entry, -1 when another shard owns it; null when every entry is owned (index = entry). */
  index: Int32Array | null;
  /** Local keys of the owned entries, in entry order ([count]). */
  local: Keys;
}

/** Entries of `bag` owned under `plan` (null: all, local key = key). */
export function ownedEntries(bag: Bag<Keys>, plan: ResolvedShardPlan | null | undefined): OwnedEntries {
  if (!plan) return { count: bag.keys.length, index: null, local: bag.keys }; // null or undefined: no plan (as rawArgs.ts accepts)
  const { positions, local } = planEntries(bag.keys, plan);
  const index = new Int32Array(bag.keys.length).fill(-1);
  for (let i = 0; i < positions.length; i++) index[positions[i]!] = i;
  return { count: positions.length, index, local };
}

/** Per row: 1 (sum), Σ w_j (mean) or sqrt(Σ w_j²) (sqrtn) over every entry of the row, in double. */
export function bagDenominators(bag: Bag<Keys>, combiner: Combiner): Float64Array {
  const nrows = bag.rowSplits.length - 1;
  const out = new Float64Array(nrows);
  for (let r = 0; r < nrows; r++) {
    if (combiner === 'sum') {
      out[r] = 1;
      continue;
    }
    let s = 0;
    for (let j = bag.rowSplits[r]!; j < bag.rowSplits[r + 1]!; j++) {
      const w = bag.weights ? bag.weights[j]! : 1;
      s += combiner === 'mean' ? w : w * w;
    }
    out[r] = combiner === 'mean' ? s : Math.sqrt(s);
  }
  return out;
}

function normOf(e: ArrayLike<number>, dim: number): number {
  let n2 = 0;
  for (let c = 0; c < dim; c++) n2 += e[c]! * e[c]!;
  return Math.sqrt(n2);
}

/**
 * Partial pooling of the owned entries: for each row r, acc = Σ_{owned j in r} s_j e_j
 * (double, in entry order), then out[r * dim + c] += acc[c] / denom_r (rows whose
 * denominator is 0 get nothing added). `rowOf(i)` is the row of the i-th owned entry.
 * Summing the partials of every shard in shard order gives the combiner's output.
 */
export function combinePartial(
  bag: Bag<Keys>,
  owned: OwnedEntries,
  rowOf: (i: number) => ArrayLike<number>,
  dim: number,
  denom: Float64Array,
  maxNorm: number,
  out: Float64Array,
): void {
  const nrows = bag.rowSplits.length - 1;
  const acc = new Float64Array(dim);
  for (let r = 0; r < nrows; r++) {
    acc.fill(0);
    for (let j = bag.rowSplits[r]!; j < bag.rowSplits[r + 1]!; j++) {
      const i = owned.index ? owned.index[j]! : j;
      if (i < 0) continue;
      const e = rowOf(i);
      const w = bag.weights ? bag.weights[j]! : 1;
      let s = w;
      if (maxNorm > 0) {
        const norm = normOf(e, dim);
        if (norm > maxNorm) s = (w * maxNorm) / norm;
      }
      for (let c = 0; c < dim; c++) acc[c] = acc[c]! + s * e[c]!;
    }
    const d = denom[r]!;
    if (d === 0) continue;
    for (let c = 0; c < dim; c++) out[r * dim + c] = out[r * dim + c]! + acc[c]! / d;
  }
}

/**
 * Per-entry gradients of the owned entries from the pooled gradients `grads`
 * [nrows * dim] (see the file comment). Writes entry j's gradient at row j of `out`
 * ([nnz * dim]; rows of entries other shards own are left as they are), or, with
 * `compact`, at row i (the entry's owned index) of `out` ([count * dim]).
 * `rowOf(i)` (the i-th owned entry's row) is read only when maxNorm > 0.
 */
export function combineBackward(
  bag: Bag<Keys>,
  owned: OwnedEntries,
  grads: Float32Array,
  dim: number,
  denom: Float64Array,
  maxNorm: number,
  rowOf: ((i: number) => ArrayLike<number>) | null,
  out: Float32Array,
  compact: boolean,
): void {
  const nrows = bag.rowSplits.length - 1;
  const dy = new Float64Array(dim);
  for (let r = 0; r < nrows; r++) {
    const d = denom[r]!;
    for (let j = bag.rowSplits[r]!; j < bag.rowSplits[r + 1]!; j++) {
      const i = owned.index ? owned.index[j]! : j;
      if (i < 0) continue;
      const w = bag.weights ? bag.weights[j]! : 1;
      const s = d === 0 ? 0 : w / d;
      for (let c = 0; c < dim; c++) dy[c] = s * grads[r * dim + c]!;
      const at = (compact ? i : j) * dim;
      if (maxNorm > 0 && rowOf) {
        const e = rowOf(i);
        let n2 = 0;
        for (let c = 0; c < dim; c++) n2 += e[c]! * e[c]!;
        const norm = Math.sqrt(n2);
        if (norm > maxNorm) {
          let dot = 0;
          for (let c = 0; c < dim; c++) dot += e[c]! * dy[c]!;
          const k = maxNorm / norm;
          for (let c = 0; c < dim; c++) out[at + c] = k * (dy[c]! - (e[c]! * dot) / n2);
          continue;
        }
      }
      for (let c = 0; c < dim; c++) out[at + c] = dy[c]!;
    }
  }
}

/** Rows of `src` ([n * width]) at `positions`, compacted ([positions.length * width]). */
export function gatherRows(src: Float32Array, positions: ArrayLike<number>, width: number): Float32Array {
  const out = new Float32Array(positions.length * width);
  for (let i = 0; i < positions.length; i++) out.set(src.subarray(positions[i]! * width, (positions[i]! + 1) * width), i * width);
  return out;
}

/** dst rows at `positions` = src rows ([positions.length * width]) in order. */
export function scatterRows(dst: Float32Array | Uint8Array, positions: ArrayLike<number>, src: Float32Array | Uint8Array, width: number): void {
  for (let i = 0; i < positions.length; i++) dst.set(src.subarray(i * width, (i + 1) * width), positions[i]! * width);
}
