import { createTable, type ShardPlan } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * Shard plans on bags large enough that the addon splits one call over its thread
 * pool (>= 16K entries): each range of bag rows then starts at its first owned entry
 * (found by position, not at entry 0), which small bags never exercise. Every shard's
 * part is checked against sums and gradients worked out here in float64.
 */
const DIM = 4;
const NROWS = 6000;

/** Row values of key k (as the test writes them). */
const valueOf = (k: bigint, c: number): number => Math.fround(Number(((k % 1009n) + 1009n) % 1009n) * 0.25 - c);

function bagFor(seed: number): { splits: Int32Array; keys: BigInt64Array; weights: Float32Array } {
  let s = seed;
  const rnd = (): number => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  const splits = new Int32Array(NROWS + 1);
  const keys: bigint[] = [];
  const weights: number[] = [];
  for (let r = 0; r < NROWS; r++) {
    const n = r % 11 === 0 ? 0 : 1 + Math.floor(rnd() * 8); // some empty rows
    for (let j = 0; j < n; j++) {
      keys.push(BigInt(Math.floor(rnd() * 4000)) * 7919n - 9_000_000n); // negative keys too
      weights.push(Math.fround(0.25 + rnd()));
    }
    splits[r + 1] = keys.length;
  }
  return { splits, keys: BigInt64Array.from(keys), weights: Float32Array.from(weights) };
}

const floorMod = (k: bigint, n: number): number => Number(((k % BigInt(n)) + BigInt(n)) % BigInt(n));

describe('cpu backend: shard plans on bags split over the pool', () => {
  for (const n of [3, 4]) {
    it(`${n} shards: the partial means add up to the float64 means, and each shard's backward fills exactly its entries`, async () => {
      const { splits, keys, weights } = bagFor(17 + n);
      expect(keys.length).toBeGreaterThan(20_000);
      const bag = { rowSplits: splits, keys, weights };
      // expected mean: sum_j w_j e_j / sum_j w_j, in float64
      const want = new Float64Array(NROWS * DIM);
      for (let r = 0; r < NROWS; r++) {
        let wsum = 0;
        for (let j = splits[r]!; j < splits[r + 1]!; j++) wsum += weights[j]!;
        for (let j = splits[r]!; j < splits[r + 1]!; j++) {
          for (let c = 0; c < DIM; c++) want[r * DIM + c]! += (weights[j]! * valueOf(keys[j]!, c)) / wsum;
        }
      }
      const grads = Float32Array.from({ length: NROWS * DIM }, (_, i) => Math.fround(((i * 37) % 101) / 50 - 1));
      const sums = [new Float64Array(NROWS * DIM), new Float64Array(NROWS * DIM)];
      const backward = new Float32Array(keys.length * DIM).fill(NaN);
      for (let shard = 0; shard < n; shard++) {
        const plan: ShardPlan = { placement: 'mod', numShards: n, shard };
        const t = createTable({ dim: DIM }, { backend: cpuBackend });
        const owned = [...new Set(keys)].filter((k) => floorMod(k, n) === shard);
        t.upsertSync(BigInt64Array.from(owned), Float32Array.from(owned.flatMap((k) => Array.from({ length: DIM }, (_, c) => valueOf(k, c)))));
        t.lookupCombinedPartialSync(bag, { combiner: 'mean', plan, out: sums[0] });
        await t.lookupCombinedPartial(bag, { combiner: 'mean', plan, out: sums[1] });
        t.lookupCombinedBackwardSync(bag, grads, { combiner: 'mean', plan, out: backward });
        t.dispose();
      }
      for (const sum of sums) {
        let worst = 0;
        for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(sum[i]! - want[i]!) / Math.max(1e-30, Math.abs(want[i]!)));
        expect(worst).toBeLessThan(1e-12);
      }
      // backward of mean: entry j of row r gets (w_j / sum_r w) * grads[r] (every entry owned by one shard)
      for (let r = 0; r < NROWS; r++) {
        let wsum = 0;
        for (let j = splits[r]!; j < splits[r + 1]!; j++) wsum += weights[j]!;
        for (let j = splits[r]!; j < splits[r + 1]!; j++) {
          const scale = weights[j]! / wsum;
          for (let c = 0; c < DIM; c++) {
            const got = backward[j * DIM + c]!;
            if (got !== Math.fround(scale * grads[r * DIM + c]!)) expect(`entry ${j} [${c}]: ${got}`).toBe(`entry ${j} [${c}]: ${Math.fround(scale * grads[r * DIM + c]!)}`);
          }
        }
      }
    }, 60_000);
  }
});
