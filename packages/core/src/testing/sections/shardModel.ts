/**
 * The test's own model of sharded tables and of the combiner with its backward,
 * written plainly from core.md and shardPlan.ts (bigint placement arithmetic,
 * float64 sums), sharing no code with core or any backend.
 */
import type { Combiner } from '../../combiners.js';
import type { ShardPlan } from '../../shardPlan.js';

export const DIM = 3;
/** Initial value of keys never written. */
export const INIT = [0.25, -0.5, 1];

/** A row of exactly representable floats for global key k. */
export function rowOf(k: bigint): number[] {
  const m = (n: bigint) => Number(((k % n) + n) % n);
  return [m(13n) - 6, m(7n) * 0.5, 1.25 + m(5n)];
}

export type Placement = 'mod' | 'range' | 'localized';

/** Shard d's plan among n shards of a logical table (range: `starts` [n + 1]). */
export function planFor(placement: Placement, n: number, d: number, starts: number[]): ShardPlan {
  if (placement === 'mod') return { placement: 'mod', numShards: n, shard: d };
  if (placement === 'range') return { placement: 'range', start: starts[d]!, end: starts[d + 1]! };
  return { placement: 'localized' };
}

/** The owning shard of global key k and its local key (`roundRobin`: static 'mod'). */
export function placeKey(k: bigint, placement: Placement, n: number, starts: number[], roundRobin: boolean): { shard: number; local: bigint } {
  if (placement === 'localized') return { shard: 0, local: k };
  if (placement === 'range') {
    for (let d = 0; d < n; d++) if (k >= BigInt(starts[d]!) && k < BigInt(starts[d + 1]!)) return { shard: d, local: k - BigInt(starts[d]!) };
    return { shard: -1, local: k };
  }
  const N = BigInt(n);
  const r = ((k % N) + N) % N;
  return { shard: Number(r), local: roundRobin ? (k - r) / N : k };
}

/** Row r's denominator over all its weights. */
export function denominator(weights: number[], combiner: Combiner): number {
  if (combiner === 'sum') return 1;
  if (combiner === 'mean') return weights.reduce((a, w) => a + w, 0);
  return Math.sqrt(weights.reduce((a, w) => a + w * w, 0));
}

/** TF clip_by_norm. */
export function clip(e: number[], maxNorm: number): number[] {
  const n = Math.hypot(...e);
  return maxNorm > 0 && n > maxNorm ? e.map((x) => (x * maxNorm) / n) : e;
}

/**
 * Expected pooled rows over `bag` (ids and weights per row), counting only entries for
 * which `owned(row, entry)` holds (all by default) but every weight in the denominator.
 * In the bag's documented float64 arithmetic (rawTable.ts, reference/combineOps.ts), so
 * that results can be compared exactly: per row, in bag order from 0, acc[c] += s_j * e_j[c]
 * with s_j = w_j, or (w_j * maxNorm) / ||e_j|| when maxNorm > 0 and ||e_j|| (the squares
 * added in column order, then sqrt) exceeds it (TF clip_by_norm); then acc / the
 * denominator (0: zeros). Not rounded: [rows * DIM].
 */
export function pooled(
  bag: bigint[][],
  weights: number[][] | null,
  combiner: Combiner,
  maxNorm: number,
  row: (k: bigint) => number[],
  owned: (r: number, j: number) => boolean = () => true,
): Float64Array {
  const out = new Float64Array(bag.length * DIM);
  bag.forEach((ids, r) => {
    const w = ids.map((_, j) => (weights ? weights[r]![j]! : 1));
    const d = denominator(w, combiner);
    if (d === 0) return;
    const acc = [0, 0, 0];
    ids.forEach((k, j) => {
      if (!owned(r, j)) return;
      const e = row(k);
      let s = w[j]!;
      if (maxNorm > 0) {
        const norm = Math.sqrt(e.reduce((a, x) => a + x * x, 0));
        if (norm > maxNorm) s = (w[j]! * maxNorm) / norm;
      }
      e.forEach((x, c) => (acc[c] = acc[c]! + s * x));
    });
    acc.forEach((x, c) => (out[r * DIM + c] = x / d));
  });
  return out;
}

/**
 * Expected gradient of one entry: the vector-Jacobian product of
 * e -> (w / d) * clip(e), by central differences (independent of the closed form).
 */
export function entryGradient(e: number[], g: number[], w: number, d: number, maxNorm: number): number[] {
  if (d === 0) return [0, 0, 0];
  const f = (x: number[]) => clip(x, maxNorm).reduce((a, v, c) => a + (w / d) * v * g[c]!, 0);
  if (!(maxNorm > 0)) return g.map((x) => (w / d) * x);
  const h = 1e-6;
  return e.map((_, c) => {
    const up = e.slice();
    const down = e.slice();
    up[c] = up[c]! + h;
    down[c] = down[c]! - h;
    return (f(up) - f(down)) / (2 * h);
  });
}

/** Sums per key (in float32, in order) the per-entry gradients of the listed keys. */
export function summedGradients(keys: bigint[], grads: number[][]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  keys.forEach((k, i) => {
    const s = out.get(String(k)) ?? [0, 0, 0];
    out.set(
      String(k),
      s.map((x, c) => Math.fround(x + Math.fround(grads[i]![c]!))),
    );
  });
  return out;
}
