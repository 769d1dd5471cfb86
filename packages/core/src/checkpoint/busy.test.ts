import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../errors.js';
import { referenceBackend } from '../reference/index.js';
import { RaggedTensor } from '../sparse.js';
import { createTable, type EmbeddingTable } from '../table.js';
import { exportHugeCTR, loadTable, readHugeCTRModel, saveTable } from './index.js';
import { rejection, withTempDir } from '../../test/checkpoint/testUtil.js';

/**
 * A save while the table is written (review32b #11): the export pages through the
 * table, so rows removed and added meanwhile shift it and rows never written are
 * skipped. The save must fail (FAILED_PRECONDITION) and leave the previous one live.
 */

const N = 400;

/** Keys 0..N-1 with values [gen, key]. */
async function table(gen: number): Promise<EmbeddingTable> {
  const t = createTable({ dim: 2, name: 'busy' }, { backend: referenceBackend });
  const keys = Array.from({ length: N }, (_, i) => BigInt(i));
  await t.upsert(keys, Float32Array.from(keys.flatMap((k) => [gen, Number(k)])));
  return t;
}

/** Until `done()`: removes 20 of the oldest keys and adds 20 new ones (size constant), one step per timer tick. */
async function churn(t: EmbeddingTable, done: () => boolean): Promise<number> {
  let step = 0;
  for (; !done(); step++) {
    await t.remove(Array.from({ length: 20 }, (_, i) => BigInt(step * 20 + i)));
    const added = Array.from({ length: 20 }, (_, i) => BigInt(N + step * 20 + i));
    await t.upsert(added, Float32Array.from(added.flatMap((k) => [9, Number(k)])));
    await new Promise((r) => setTimeout(r, 1));
  }
  return step;
}

async function settled<T>(p: Promise<T>): Promise<{ p: Promise<T>; done: () => boolean }> {
  let over = false;
  const q = p.finally(() => (over = true));
  q.catch(() => undefined);
  return { p: q, done: () => over };
}

async function loadedRows(dir: string): Promise<Map<bigint, number[]>> {
  const t = createTable({ dim: 2, name: 'busy' }, { backend: referenceBackend });
  await loadTable(t, dir);
  const b = await t.export();
  return new Map(Array.from({ length: b.keys.length }, (_, i) => [BigInt(b.keys[i]!), Array.from(b.values.subarray(i * 2, i * 2 + 2))]));
}

describe('a save while the table is written', () => {
  it('saveTable fails with FAILED_PRECONDITION and the previous checkpoint stays live and complete', async () => {
    await withTempDir(async (dir) => {
      await saveTable(await table(1), dir);
      const t = await table(2);
      const s = await settled(saveTable(t, dir, { batchSize: 20 }));
      const steps = await churn(t, s.done);
      expect(steps).toBeGreaterThan(0);
      const e = await rejection(s.p);
      expect(e.code).toBe(ErrorCodes.FAILED_PRECONDITION);
      expect(e.message).toContain('table "busy" was written during it');
      expect(e.message).toContain('Await every write');
      expect((await readdir(dir)).sort()).toEqual(['CURRENT', 'ckpt-000000000001']);
      const rows = await loadedRows(dir);
      expect(rows.size).toBe(N);
      for (let i = 0; i < N; i++) expect(rows.get(BigInt(i))).toEqual([1, i]);
      // once the writes are awaited, the save goes through: every row of the table as it is
      await saveTable(t, dir, { batchSize: 20 });
      const now = await loadedRows(dir);
      expect(now.size).toBe(N);
      const keys = [...now.keys()].sort((a, b) => (a < b ? -1 : 1));
      expect(keys[0]).toBe(BigInt(steps * 20));
      expect(keys[N - 1]).toBe(BigInt(N + steps * 20 - 1));
    });
  });

  it('a write still running when the export begins fails the save too', async () => {
    await withTempDir(async (dir) => {
      const t = await table(1);
      const real = t.raw.async.upsert;
      let finish!: () => void;
      const gate = new Promise<void>((r) => (finish = r));
      t.raw.async.upsert = async (k, v, s) => {
        await gate;
        return real(k, v, s);
      };
      const w = t.upsert([5n], new Float32Array([7, 7]));
      expect(t.writeState().inFlight).toBe(1);
      const e = await rejection(saveTable(t, dir));
      expect(e.code).toBe(ErrorCodes.FAILED_PRECONDITION);
      expect(e.message).toContain('1 write(s) still running');
      expect(await readdir(dir)).toEqual([]);
      finish();
      await w;
      expect(t.writeState().inFlight).toBe(0);
      await saveTable(t, dir);
      expect((await loadedRows(dir)).get(5n)).toEqual([7, 7]);
    });
  });

  it('exportHugeCTR fails the same way and leaves the folder as it was', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'model');
      await exportHugeCTR(await table(1), dir);
      const before = await readFile(join(dir, 'emb_vector'));
      const t = await table(2);
      const s = await settled(exportHugeCTR(t, dir, { batchSize: 20 }));
      await churn(t, s.done);
      expect((await rejection(s.p)).code).toBe(ErrorCodes.FAILED_PRECONDITION);
      expect(await readFile(join(dir, 'emb_vector'))).toEqual(before);
      let rows = 0;
      for await (const b of readHugeCTRModel(dir, 2)) rows += b.keys.length;
      expect(rows).toBe(N);
    });
  });

  it('writeState counts writes, not reads', async () => {
    const t = await table(1);
    const s0 = t.writeState();
    await t.find([1n, 2n]);
    await t.lookupCombined(RaggedTensor.fromRowSplits(BigInt64Array.of(1n, 2n), [0, 2]));
    await t.export();
    expect(t.writeState()).toEqual(s0);
    await t.lookupCombined(RaggedTensor.fromRowSplits(BigInt64Array.of(1n, 5000n), [0, 2]), { insertMissing: true });
    t.upsertSync([3n], new Float32Array([0, 0]));
    await t.remove([3n]);
    expect(t.writeState()).toEqual({ started: s0.started + 3, inFlight: 0 });
  });
});
