import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { optimizers } from '../optimizers.js';
import { referenceBackend } from '../reference/index.js';
import { createTable } from '../table.js';
import type { TableOptions } from '../tableOptions.js';
import { loadTable, readCheckpointBatches, readTableManifest, saveTable } from './index.js';
import { crcBitwise, f32Value, type Row, rowsOf, withTempDir } from '../../test/checkpoint/testUtil.js';

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const EXTREME = [INT64_MIN, INT64_MAX, -1n, 0n, 1n << 40n];

const make = (o: TableOptions) => createTable(o, { backend: referenceBackend });

/** Expected rows built by the test: values f32Value(key, col), slots and scores from the key's index. */
function expectedRows(keys: bigint[], dim: number, slotWidths: number[], gen = 0): Map<bigint, Row> {
  const m = new Map<bigint, Row>();
  keys.forEach((k, i) => {
    m.set(k, {
      values: Array.from({ length: dim }, (_, c) => f32Value(k, c, gen)),
      slots: slotWidths.map((w, j) => Array.from({ length: w }, (_, c) => 0.5 + i + j * 100 + c * 0.125)),
      score: BigInt(1000 + i * 7),
    });
  });
  return m;
}

function flatten(rows: Map<bigint, Row>, keys: bigint[], dim: number, widths: number[]) {
  const values = new Float32Array(keys.length * dim);
  const slots = widths.map((w) => new Float32Array(keys.length * w));
  const scores = new BigUint64Array(keys.length);
  keys.forEach((k, i) => {
    const r = rows.get(k)!;
    values.set(r.values, i * dim);
    r.slots.forEach((s, j) => slots[j]!.set(s, i * widths[j]!));
    scores[i] = r.score;
  });
  return { values, slots, scores };
}

const manyKeys = (n: number): bigint[] => [...EXTREME, ...Array.from({ length: n }, (_, i) => BigInt(i * 7919 - 50_000) * 1_000_003n)];

describe('saveTable / loadTable round trip (reference backend)', () => {
  it('dynamic int64 table with adagrad slots, lru scores and extreme keys: every key, value, slot and score comes back', async () => {
    await withTempDir(async (dir) => {
      const dim = 5;
      const opts: TableOptions = { dim, name: 'emb', optimizer: optimizers.adagrad({ learningRate: 0.1 }), scorePolicy: 'lru' };
      const src = make(opts);
      const keys = manyKeys(60);
      const want = expectedRows(keys, dim, [dim]);
      const f = flatten(want, keys, dim, [dim]);
      await src.importRows(BigInt64Array.from(keys), f.values, f.slots, f.scores);

      const manifest = await saveTable(src, join(dir, 'ckpt'), { batchSize: 7 });
      expect(manifest.rows).toBe(keys.length);
      expect(manifest.keyDtype).toBe('int64');
      expect(manifest.slots).toEqual([{ name: 'accumulators', width: dim, initial: 0.1, file: 'slot-accumulators' }]);

      const dst = make(opts);
      await loadTable(dst, join(dir, 'ckpt'), { batchSize: 11 });
      const got = await rowsOf(dst);
      expect(got.size).toBe(keys.length);
      for (const k of keys) expect(got.get(k), `key ${k}`).toEqual(want.get(k));
    });
  });

  it('rows changed by applyGradients (slots moved off their initial value) load back bit-identical', async () => {
    await withTempDir(async (dir) => {
      const opts: TableOptions = { dim: 3, optimizer: optimizers.adagrad({ learningRate: 0.5 }), initializer: { kind: 'constant', value: 1 } };
      const src = make(opts);
      const keys = [3n, -9n, INT64_MAX];
      await src.applyGradients(keys, new Float32Array([1, 2, 3, -1, -2, -3, 0.5, 0.5, 0.5]), optimizers.adagrad({ learningRate: 0.5 }), 1);
      const before = await rowsOf(src);
      // acc = 0.1 + g^2 for key 3n column 0 (g = 1): the slot really moved
      expect(before.get(3n)!.slots[0]![0]).toBeCloseTo(1.1, 6);
      await saveTable(src, dir);
      const dst = make(opts);
      await loadTable(dst, dir);
      expect(await rowsOf(dst)).toEqual(before);
    });
  });

  it('static table (adam slots): every row comes back and the manifest records the vocabulary', async () => {
    await withTempDir(async (dir) => {
      const opts: TableOptions = { kind: 'static', vocabularySize: 10, dim: 2, optimizer: optimizers.adam({ learningRate: 0.01 }) };
      const src = make(opts);
      const keys = Array.from({ length: 10 }, (_, i) => BigInt(i));
      const want = expectedRows(keys, 2, [2, 2]);
      const f = flatten(want, keys, 2, [2, 2]);
      await src.importRows(BigInt64Array.from(keys), f.values, f.slots);
      const m = await saveTable(src, dir);
      expect([m.kind, m.vocabularySize, m.rows]).toEqual(['static', 10, 10]);
      const dst = make(opts);
      await loadTable(dst, dir);
      const got = await rowsOf(dst);
      for (const k of keys) {
        const { values, slots } = got.get(k)!;
        expect({ values, slots }, `row ${k}`).toEqual({ values: want.get(k)!.values, slots: want.get(k)!.slots });
      }
    });
  });

  it('int32 keys (INT32_MIN, INT32_MAX, -1, 0): keys file is int32 LE and the rows come back', async () => {
    await withTempDir(async (dir) => {
      const opts: TableOptions = { dim: 2, keyDtype: 'int32', scorePolicy: 'customized' };
      const src = make(opts);
      const keys = [-(2 ** 31), 2 ** 31 - 1, -1, 0, 77];
      const values = Float32Array.from(keys.flatMap((k) => [f32Value(BigInt(k), 0), f32Value(BigInt(k), 1)]));
      await src.upsert(Int32Array.from(keys), values, { scores: BigUint64Array.from(keys, (_, i) => BigInt(i + 1) << 40n) });
      const m = await saveTable(src, dir);
      const version = (await readFile(join(dir, 'CURRENT'), 'utf8')).trim();
      const raw = await readFile(join(dir, version, 'keys'));
      expect(raw.length).toBe(4 * keys.length);
      const fileKeys = Array.from({ length: keys.length }, (_, i) => raw.readInt32LE(4 * i));
      expect(fileKeys.sort((a, b) => a - b)).toEqual([...keys].sort((a, b) => a - b));
      expect(m.files.keys).toMatchObject({ dtype: 'int32', bytes: 4 * keys.length, crc32c: crcBitwise(raw) });

      const dst = make(opts);
      await loadTable(dst, dir);
      const got = await rowsOf(dst);
      keys.forEach((k, i) => {
        expect(got.get(BigInt(k))!.values).toEqual([f32Value(BigInt(k), 0), f32Value(BigInt(k), 1)]);
        expect(got.get(BigInt(k))!.score).toBe(BigInt(i + 1) << 40n);
      });
    });
  });

  it('data files are raw little-endian in export order, with the CRC32C the manifest records', async () => {
    await withTempDir(async (dir) => {
      const src = make({ dim: 2, optimizer: optimizers.rowWiseAdagrad({ learningRate: 1 }), scorePolicy: 'customized' });
      const keys = [INT64_MIN, 5n, INT64_MAX];
      await src.importRows(
        BigInt64Array.from(keys),
        new Float32Array([1.5, -2, 3.25, 4, -0, 6]),
        [new Float32Array([7, 8, 9])],
        new BigUint64Array([1n, (1n << 64n) - 1n, 3n]),
      );
      const order = [...(await rowsOf(src)).keys()];
      const m = await saveTable(src, dir);
      const v = join(dir, (await readFile(join(dir, 'CURRENT'), 'utf8')).trim());
      const file = (name: string) => readFile(join(v, name));
      const k = await file('keys');
      expect(Array.from({ length: 3 }, (_, i) => k.readBigInt64LE(8 * i))).toEqual(order);
      const val = await file('values');
      const byKey = new Map<bigint, number[]>([[INT64_MIN, [1.5, -2]], [5n, [3.25, 4]], [INT64_MAX, [-0, 6]]]);
      expect(Array.from({ length: 6 }, (_, i) => val.readFloatLE(4 * i))).toEqual(order.flatMap((key) => byKey.get(key)!));
      const slot = await file('slot-accumulators');
      expect(slot.length).toBe(12); // row-wise: one float per row
      const sc = await file('scores');
      const scoreOf = new Map<bigint, bigint>([[INT64_MIN, 1n], [5n, (1n << 64n) - 1n], [INT64_MAX, 3n]]);
      expect(Array.from({ length: 3 }, (_, i) => sc.readBigUInt64LE(8 * i))).toEqual(order.map((key) => scoreOf.get(key)!));
      for (const name of ['keys', 'values', 'slot-accumulators', 'scores']) {
        const bytes = await file(name);
        expect(m.files[name], name).toMatchObject({ bytes: bytes.length, crc32c: crcBitwise(bytes) });
      }
      const onDisk = JSON.parse(await readFile(join(v, 'manifest.json'), 'utf8'));
      expect(onDisk.format).toBe('embedstack.table-checkpoint');
      expect(onDisk.formatVersion).toBe(1);
      expect(onDisk.byteOrder).toBe('little');
    });
  });

  it('filter loads only the keys it accepts; clear empties the table first', async () => {
    await withTempDir(async (dir) => {
      const src = make({ dim: 1 });
      const keys = Array.from({ length: 20 }, (_, i) => BigInt(i - 10));
      await src.upsert(keys, Float32Array.from(keys, (k) => Number(k) * 2));
      await saveTable(src, dir, { batchSize: 3 });
      const dst = make({ dim: 1 });
      await dst.upsert([1000n], [5]);
      await loadTable(dst, dir, { filter: (k) => k % 2n === 0n, batchSize: 4 });
      const got = await rowsOf(dst);
      expect([...got.keys()].sort((a, b) => Number(a - b))).toEqual([-10n, -8n, -6n, -4n, -2n, 0n, 2n, 4n, 6n, 8n, 1000n]);
      expect(got.get(-4n)!.values).toEqual([-8]);
      await loadTable(dst, dir, { clear: true, filter: (k) => k > 7n });
      expect([...(await rowsOf(dst)).keys()].sort()).toEqual([8n, 9n]);
    });
  });

  it('shard and extra are recorded; readTableManifest and readCheckpointBatches read them back', async () => {
    await withTempDir(async (dir) => {
      const src = make({ dim: 2, name: 'shard3', seed: 42, initializer: { kind: 'uniform', min: -1, max: 1 } });
      const keys = Array.from({ length: 10 }, (_, i) => BigInt(i * 3));
      await src.upsert(keys, Float32Array.from({ length: 20 }, (_, i) => i));
      await saveTable(src, dir, { shard: { index: 3, count: 8 }, extra: { step: 1234, config: { lr: 0.5 } } });
      const m = await readTableManifest(dir);
      expect(m.shard).toEqual({ index: 3, count: 8 });
      expect(m.extra).toEqual({ step: 1234, config: { lr: 0.5 } });
      expect([m.name, m.seed, m.stream, m.initializer]).toEqual(['shard3', 42, src.options.stream, { kind: 'uniform', min: -1, max: 1 }]);
      const seen = new Map<bigint, number[]>();
      let batches = 0;
      for await (const b of readCheckpointBatches(dir, 4)) {
        batches++;
        b.keys.forEach((k, i) => seen.set(BigInt(k), Array.from(b.values.subarray(2 * i, 2 * i + 2))));
      }
      expect(batches).toBe(3);
      keys.forEach((k, i) => expect(seen.get(k)).toEqual([2 * i, 2 * i + 1]));
    });
  });

  it('an empty table saves and loads (zero-length files)', async () => {
    await withTempDir(async (dir) => {
      const m = await saveTable(make({ dim: 4 }), dir);
      expect(m.rows).toBe(0);
      expect(m.files.values).toMatchObject({ bytes: 0, crc32c: 0 });
      const dst = make({ dim: 4 });
      await loadTable(dst, dir);
      expect(dst.size()).toBe(0);
    });
  });

  it('saving again replaces the checkpoint: CURRENT names the new version and the old one is deleted', async () => {
    await withTempDir(async (dir) => {
      const t = make({ dim: 1 });
      await t.upsert([1n], [1]);
      await saveTable(t, dir);
      await t.upsert([1n], [2]);
      await saveTable(t, dir);
      expect((await readdir(dir)).sort()).toEqual(['CURRENT', 'ckpt-000000000002']);
      const dst = make({ dim: 1 });
      await loadTable(dst, dir);
      expect((await rowsOf(dst)).get(1n)!.values).toEqual([2]);
    });
  });

  it('a flat checkpoint (a version directory copied elsewhere, no CURRENT) loads too', async () => {
    await withTempDir(async (dir) => {
      const t = make({ dim: 1 });
      await t.upsert([9n], [4.5]);
      await saveTable(t, join(dir, 'a'));
      const dst = make({ dim: 1 });
      await loadTable(dst, join(dir, 'a', 'ckpt-000000000001'));
      expect((await rowsOf(dst)).get(9n)!.values).toEqual([4.5]);
    });
  });
});
