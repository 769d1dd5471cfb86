import { createTable, lookupCombinedShards, optimizers, RaggedTensor } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * The shards bag reads in passes once the shard tables together hold 32 MiB of
 * index, key/score lines and values. Shards must only share dim and key dtype (core checks
 * nothing else; the addon's leaseBag also requires one storage type), so one shard may carry an
 * optimizer's slots beside its rows (a longer row stride) and the other none. Expected values
 * are written out here from the rows the test stored.
 */
const DIM = 64;
const PER_SHARD = 80_000; // 2 x 80K keys x (256 B of values + 16 B of key/score + index): over 32 MiB together

const valueOf = (k: number, c: number): number => ((k * 7 + c * 3) % 61) / 8 - 3.75; // exact in float32

describe('the shards bag in passes over shards with different row layouts', () => {
  for (const slotsOn of [0, 1]) {
    it(`pools the stored rows when shard ${slotsOn} has adagrad slots and the other none`, async () => {
      const shards = [0, 1].map((d) => {
        const table = createTable({ dim: DIM, ...(d === slotsOn ? { optimizer: optimizers.adagrad({ learningRate: 0.1 }) } : {}) }, { backend: cpuBackend });
        const keys = new BigInt64Array(PER_SHARD).map((_, i) => BigInt(2 * i + d));
        const vals = new Float32Array(PER_SHARD * DIM);
        for (let i = 0; i < PER_SHARD; i++) for (let c = 0; c < DIM; c++) vals[i * DIM + c] = valueOf(2 * i + d, c);
        for (let b = 0; b < PER_SHARD; b += 16384) table.upsertSync(keys.subarray(b, b + 16384), vals.subarray(b * DIM, Math.min(PER_SHARD, b + 16384) * DIM));
        return { table, plan: { placement: 'mod' as const, numShards: 2, shard: d } };
      });
      try {
        const rows = 600;
        const perRow = 20;
        const ids = new BigInt64Array(rows * perRow).map((_, i) => BigInt((i * 7919) % (2 * PER_SHARD)));
        const splits = Int32Array.from({ length: rows + 1 }, (_, r) => r * perRow);
        const got = await lookupCombinedShards(shards, RaggedTensor.fromRowSplits(ids, splits), { combiner: 'sum' });
        let wrong = 0;
        for (let r = 0; r < rows; r++) {
          for (let c = 0; c < DIM; c++) {
            let acc = 0;
            for (let j = r * perRow; j < (r + 1) * perRow; j++) acc += valueOf(Number(ids[j]), c);
            if (got[r * DIM + c] !== Math.fround(acc)) wrong++;
          }
        }
        expect(wrong).toBe(0);
      } finally {
        for (const s of shards) s.table.dispose();
      }
    });
  }
});
