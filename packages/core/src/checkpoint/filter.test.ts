import { describe, expect, it } from 'vitest';
import { referenceBackend } from '../reference/index.js';
import { createTable } from '../table.js';
import { loadTable, saveTable } from './index.js';
import { rowsOf, withTempDir } from '../../test/checkpoint/testUtil.js';

describe('loadTable filter', () => {
  it('runs once per key before anything is loaded: one that throws late leaves the table unchanged', async () => {
    await withTempDir(async (dir) => {
      const keys = Array.from({ length: 1000 }, (_, i) => BigInt(i * 7 - 300));
      const src = createTable({ dim: 2 }, { backend: referenceBackend });
      await src.upsert(keys, Float32Array.from(keys.flatMap((k) => [Number(k), 0.5])));
      await saveTable(src, dir);
      const saved: bigint[] = [];
      for (const b of [await src.export()]) for (const k of b.keys) saved.push(BigInt(k));
      const t = createTable({ dim: 2 }, { backend: referenceBackend });
      await t.upsert([1n], new Float32Array([9, 9]));
      let seen = 0;
      const boom = new Error('filter failed');
      const throwing = (): boolean => {
        if (++seen === 600) throw boom;
        return true;
      };
      await expect(loadTable(t, dir, { batchSize: 100, filter: throwing, clear: true })).rejects.toBe(boom);
      expect([...(await rowsOf(t)).entries()].map(([k, r]) => [k, r.values])).toEqual([[1n, [9, 9]]]);
      // a working filter: called exactly once per key, in the checkpoint's order
      const calls: bigint[] = [];
      await loadTable(t, dir, { batchSize: 64, filter: (k) => (calls.push(k), k % 2n === 0n) });
      expect(calls).toEqual(saved);
      const got = await rowsOf(t);
      const even = keys.filter((k) => k % 2n === 0n);
      expect(got.size).toBe(even.length + 1);
      for (const k of even) expect(got.get(k)!.values).toEqual([Number(k), 0.5]);
    });
  });
});
