import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../errors.js';
import { referenceBackend } from '../reference/index.js';
import { createTable } from '../table.js';
import type { TableOptions } from '../tableOptions.js';
import { exportHugeCTR, importHugeCTR, inspectHugeCTRModel, readHugeCTRModel } from './index.js';
import { rejection, rowsOf, withTempDir } from '../../test/checkpoint/testUtil.js';

const make = (o: TableOptions) => createTable(o, { backend: referenceBackend });

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const DIM = 3;
/** Rows written by hand: key -> vector (float32-exact numbers, -0 and extremes included). */
const HAND: [bigint, number[]][] = [
  [42n, [1.5, -2.25, 3]],
  [INT64_MIN, [-0, Math.fround(1e-45), 3.4028234663852886e38]],
  [-1n, [0.1, 0.2, 0.3].map((x) => Math.fround(x))],
  [1n << 40n, [-Infinity, Infinity, 7]],
  [INT64_MAX, [9, 8, 7]],
  [0n, [0, 0, 1]],
];

/** Raw HugeCTR files from rows, with Buffer writes only (no library code). */
function handFiles(rows: [bigint, number[]][], dim = DIM): { key: Buffer; vec: Buffer } {
  const key = Buffer.alloc(rows.length * 8);
  const vec = Buffer.alloc(rows.length * dim * 4);
  rows.forEach(([k, v], i) => {
    key.writeBigInt64LE(k, i * 8);
    v.forEach((x, c) => vec.writeFloatLE(x, (i * dim + c) * 4));
  });
  return { key, vec };
}

async function writeFolder(dir: string, key: Buffer, vec: Buffer): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'key'), key);
  await writeFile(join(dir, 'emb_vector'), vec);
}

/** Parses a HugeCTR folder's bytes into (key, 4*dim vector bytes) records sorted by key, re-serialised. */
function sortedRecords(key: Buffer, vec: Buffer, dim = DIM): Buffer {
  const n = key.length / 8;
  const recs = Array.from({ length: n }, (_, i) => ({
    k: key.readBigInt64LE(i * 8),
    kb: key.subarray(i * 8, i * 8 + 8),
    vb: vec.subarray(i * dim * 4, (i + 1) * dim * 4),
  }));
  recs.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0));
  return Buffer.concat([...recs.map((r) => r.kb), ...recs.map((r) => r.vb)]);
}

describe('HugeCTR sparse model layout', () => {
  it('a hand-written folder imports: every key gets its own vector', async () => {
    await withTempDir(async (dir) => {
      const { key, vec } = handFiles(HAND);
      await writeFolder(join(dir, 'sparse_embedding0.model'), key, vec);
      const t = make({ dim: DIM });
      expect(await importHugeCTR(join(dir, 'sparse_embedding0.model'), t, { batchSize: 4 })).toBe(HAND.length);
      const rows = await rowsOf(t);
      expect(rows.size).toBe(HAND.length);
      for (const [k, v] of HAND) expect(rows.get(k)!.values, `key ${k}`).toEqual(v);
    });
  });

  it('export of the imported table, and export after re-import into a fresh table, are byte-identical to the hand files (rows compared sorted by key)', async () => {
    await withTempDir(async (dir) => {
      const { key, vec } = handFiles(HAND);
      await writeFolder(join(dir, 'hand'), key, vec);
      const a = make({ dim: DIM });
      await importHugeCTR(join(dir, 'hand'), a);
      await exportHugeCTR(a, join(dir, 'out1'));
      const k1 = await readFile(join(dir, 'out1', 'key'));
      const v1 = await readFile(join(dir, 'out1', 'emb_vector'));
      expect([k1.length, v1.length]).toEqual([key.length, vec.length]);
      expect(sortedRecords(k1, v1).equals(sortedRecords(key, vec))).toBe(true);
      const b = make({ dim: DIM });
      await importHugeCTR(join(dir, 'out1'), b);
      await exportHugeCTR(b, join(dir, 'out2'));
      const k2 = await readFile(join(dir, 'out2', 'key'));
      const v2 = await readFile(join(dir, 'out2', 'emb_vector'));
      expect(sortedRecords(k2, v2).equals(sortedRecords(key, vec))).toBe(true);
      expect((await readdir(dir)).sort()).toEqual(['hand', 'out1', 'out2']); // no temp or lock leftovers
    });
  });

  it('readHugeCTRModel streams batches in file order; inspectHugeCTRModel reports the row count', async () => {
    await withTempDir(async (dir) => {
      const { key, vec } = handFiles(HAND);
      await writeFolder(dir, key, vec);
      expect(await inspectHugeCTRModel(dir, DIM)).toEqual({ folder: dir, rows: 6, keyBytes: 48, vectorBytes: 72 });
      const sizes: number[] = [];
      const keys: bigint[] = [];
      const values: number[] = [];
      for await (const b of readHugeCTRModel(dir, DIM, { batchSize: 4 })) {
        sizes.push(b.keys.length);
        keys.push(...b.keys);
        values.push(...b.values);
      }
      expect(sizes).toEqual([4, 2]);
      expect(keys).toEqual(HAND.map(([k]) => k));
      expect(values).toEqual(HAND.flatMap(([, v]) => v));
    });
  });

  it('uint32 keys (supportlonglong: false) are read and written 4 bytes wide', async () => {
    await withTempDir(async (dir) => {
      const key = Buffer.alloc(12);
      [0, 4294967295, 7].forEach((k, i) => key.writeUInt32LE(k, i * 4));
      const vec = Buffer.alloc(12);
      [1, 2, 3].forEach((x, i) => vec.writeFloatLE(x, i * 4));
      await writeFolder(join(dir, 'in'), key, vec);
      const t = make({ dim: 1 });
      expect(await importHugeCTR(join(dir, 'in'), t, { keyFormat: 'uint32' })).toBe(3);
      expect((await rowsOf(t)).get(4294967295n)!.values).toEqual([2]);
      await exportHugeCTR(t, join(dir, 'out'), { keyFormat: 'uint32' });
      expect((await readFile(join(dir, 'out', 'key'))).equals(key)).toBe(true);
      await t.upsert([-5n], [1]);
      const e = await rejection(exportHugeCTR(t, join(dir, 'out'), { keyFormat: 'uint32' }));
      expect([e.code, e.argument]).toEqual([ErrorCodes.OUT_OF_RANGE, 'keyFormat']);
      expect((await readFile(join(dir, 'out', 'key'))).equals(key)).toBe(true); // the old folder is intact
    });
  });

  it('filter imports only the keys it accepts and returns their count', async () => {
    await withTempDir(async (dir) => {
      const { key, vec } = handFiles(HAND);
      await writeFolder(dir, key, vec);
      const t = make({ dim: DIM });
      expect(await importHugeCTR(dir, t, { filter: (k) => k >= 0n, batchSize: 2 })).toBe(4);
      expect([...(await rowsOf(t)).keys()].sort()).toEqual([0n, 42n, 1n << 40n, INT64_MAX].sort());
    });
  });
});

describe('HugeCTR size checks and refusals (table unchanged)', () => {
  async function refused(dir: string, o: TableOptions, code: string, ...parts: string[]): Promise<void> {
    const t = make(o);
    await t.upsert([1n], new Float32Array(o.dim).fill(5));
    const before = await rowsOf(t);
    const e = await rejection(importHugeCTR(dir, t));
    expect(e.code).toBe(code);
    for (const p of parts) expect(e.message).toContain(p);
    expect(await rowsOf(t)).toEqual(before);
  }

  it('key size not a multiple of 8 -> CHECKPOINT_CORRUPT naming key and its size', async () => {
    await withTempDir(async (dir) => {
      const { key, vec } = handFiles(HAND);
      await writeFolder(dir, key.subarray(0, 44), vec);
      await refused(dir, { dim: DIM }, ErrorCodes.CHECKPOINT_CORRUPT, join(dir, 'key'), '44 bytes', 'multiple of 8');
    });
  });

  it('emb_vector size != n * dim * 4 -> CHECKPOINT_CORRUPT naming emb_vector and both sizes', async () => {
    await withTempDir(async (dir) => {
      const { key, vec } = handFiles(HAND);
      await writeFolder(dir, key, vec.subarray(0, 68));
      await refused(dir, { dim: DIM }, ErrorCodes.CHECKPOINT_CORRUPT, join(dir, 'emb_vector'), 'has 68 bytes, expected 72', '6 keys');
      await writeFolder(dir, key, vec);
      await refused(dir, { dim: 4 }, ErrorCodes.CHECKPOINT_CORRUPT, 'has 72 bytes, expected 96', 'dim 4');
    });
  });

  it('missing emb_vector -> CHECKPOINT_CORRUPT; missing folder -> NOT_FOUND; empty files with allowEmpty false -> CHECKPOINT_CORRUPT', async () => {
    await withTempDir(async (dir) => {
      const { key } = handFiles(HAND);
      await mkdir(join(dir, 'm'));
      await writeFile(join(dir, 'm', 'key'), key);
      await refused(join(dir, 'm'), { dim: DIM }, ErrorCodes.CHECKPOINT_CORRUPT, join(dir, 'm', 'emb_vector'), 'missing');
      await refused(join(dir, 'none'), { dim: DIM }, ErrorCodes.NOT_FOUND, join(dir, 'none'));
      await writeFolder(join(dir, 'e'), Buffer.alloc(0), Buffer.alloc(0));
      expect((await inspectHugeCTRModel(join(dir, 'e'), DIM)).rows).toBe(0);
      const e = await rejection(inspectHugeCTRModel(join(dir, 'e'), DIM, { allowEmpty: false }));
      expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      expect(e.message).toContain('is empty');
    });
  });

  it('keys outside an int32 table or a static table -> OUT_OF_RANGE before anything is loaded', async () => {
    await withTempDir(async (dir) => {
      const rows: [bigint, number[]][] = [
        [1n, [1]],
        [2n, [2]],
        [1n << 31n, [3]],
      ];
      const { key, vec } = handFiles(rows, 1);
      await writeFolder(dir, key, vec);
      await refused(dir, { dim: 1, keyDtype: 'int32' }, ErrorCodes.OUT_OF_RANGE, 'key 2147483648 (row 2)');
      await refused(dir, { dim: 1, kind: 'static', vocabularySize: 3 }, ErrorCodes.OUT_OF_RANGE, 'key 2147483648', '[0, 2]');
      const t = make({ dim: 1, keyDtype: 'int32' });
      expect(await importHugeCTR(dir, t, { filter: (k) => k < 100n })).toBe(2);
      expect((await rowsOf(t)).get(2n)!.values).toEqual([2]);
    });
  });

  it('exportHugeCTR refuses to replace a folder holding other files, or a file', async () => {
    await withTempDir(async (dir) => {
      const t = make({ dim: 1 });
      await t.upsert([1n], [1]);
      await mkdir(join(dir, 'mine'));
      await writeFile(join(dir, 'mine', 'thesis.tex'), 'precious');
      const e = await rejection(exportHugeCTR(t, join(dir, 'mine')));
      expect([e.code, e.argument]).toEqual([ErrorCodes.INVALID_ARGUMENT, 'dir']);
      expect(e.message).toContain('thesis.tex');
      expect(await readdir(join(dir, 'mine'))).toEqual(['thesis.tex']);
      await writeFile(join(dir, 'afile'), 'x');
      expect((await rejection(exportHugeCTR(t, join(dir, 'afile')))).code).toBe(ErrorCodes.INVALID_ARGUMENT);
      expect(await readFile(join(dir, 'afile'), 'utf8')).toBe('x');
      expect((await readdir(dir)).sort()).toEqual(['afile', 'mine']);
    });
  });
});

describe('HugeCTR crash recovery (states a killed exportHugeCTR can leave)', () => {
  it('target missing but a complete .<name>.new beside it: readers use it; the next export finishes the job and cleans up', async () => {
    await withTempDir(async (dir) => {
      const { key, vec } = handFiles(HAND);
      await writeFolder(join(dir, '.model.new'), key, vec); // crashed between "target -> .old" and ".new -> target"
      await writeFolder(join(dir, '.model.old'), key.subarray(0, 8), vec.subarray(0, 12));
      await mkdir(join(dir, '.model.tmp-1-abc'));
      const t = make({ dim: DIM });
      expect(await importHugeCTR(join(dir, 'model'), t)).toBe(HAND.length);
      expect((await inspectHugeCTRModel(join(dir, 'model'), DIM)).folder).toBe(join(dir, '.model.new'));
      const u = make({ dim: DIM });
      await u.upsert([5n], [1, 2, 3]);
      await exportHugeCTR(u, join(dir, 'model'));
      expect(await readdir(dir)).toEqual(['model']);
      expect((await readFile(join(dir, 'model', 'key'))).readBigInt64LE(0)).toBe(5n);
    });
  });

  it('target present plus a stale .new (crash before the old folder moved): the target wins', async () => {
    await withTempDir(async (dir) => {
      const { key, vec } = handFiles(HAND);
      await writeFolder(join(dir, 'model'), key, vec);
      await writeFolder(join(dir, '.model.new'), key.subarray(0, 8), vec.subarray(0, 12));
      expect((await inspectHugeCTRModel(join(dir, 'model'), DIM)).rows).toBe(6);
      await rm(join(dir, '.model.new'), { recursive: true });
    });
  });

  it('a filter runs once per key before anything is imported: one that throws late leaves the table unchanged (review32a #9)', async () => {
    await withTempDir(async (root) => {
      const rows: [bigint, number[]][] = Array.from({ length: 1000 }, (_, i) => [BigInt(i * 3 - 500), [i, -i, 0.5]]);
      const { key, vec } = handFiles(rows);
      const dir = join(root, 'm');
      await writeFolder(dir, key, vec);
      const t = make({ dim: DIM });
      let seen = 0;
      const boom = new Error('filter failed');
      const filter = (): boolean => {
        if (++seen === 600) throw boom;
        return true;
      };
      await expect(importHugeCTR(dir, t, { batchSize: 100, filter })).rejects.toBe(boom);
      expect(t.size()).toBe(0);
      // a filter that works: called exactly once per key, rows by hand
      const calls: bigint[] = [];
      const n = await importHugeCTR(dir, t, { batchSize: 64, filter: (k) => (calls.push(k), k % 2n === 0n) });
      expect(calls).toEqual(rows.map(([k]) => k));
      const even = rows.filter(([k]) => k % 2n === 0n);
      expect(n).toBe(even.length);
      const got = await rowsOf(t);
      expect(got.size).toBe(even.length);
      for (const [k, v] of even) expect(got.get(k)!.values).toEqual(v);
    });
  });
});
