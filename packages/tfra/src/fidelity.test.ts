// Fidelity to TFRA (found by trying it as a new user would), and shard placement checked
// against placements computed here. Expected values are computed in the test.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectError, rowsOf, sortedKeys, uniqueName, useTestBackend } from '../test/setup.js';
import * as de from './index.js';

beforeAll(async () => {
  await useTestBackend();
});

/** TF's floor modulo, written out: the shard of key k among n. */
const shardOf = (k: bigint, n: number): number => Number(((k % BigInt(n)) + BigInt(n)) % BigInt(n));

describe('keys of the other dtype are a TypeError (INVALID_TYPE), as in TFRA', () => {
  it('an int64 variable refuses an Int32Array; an int32 variable refuses a BigInt64Array; nothing changes', async () => {
    const v64 = new de.Variable({ dim: 1, name: uniqueName() });
    const v32 = new de.Variable({ keyDtype: 'int32', dim: 1, name: uniqueName() });
    await v64.upsert([1n], [1]);
    await v32.upsert([1], [1]);
    await expectError(v64.upsert(new Int32Array([2]), [2]), 'INVALID_TYPE', 'keys', 'int32');
    await expectError(v64.lookup(new Int32Array([1])), 'INVALID_TYPE', 'keys');
    await expectError(v64.remove(new Int32Array([1])), 'INVALID_TYPE', 'keys');
    await expectError(v32.upsert(new BigInt64Array([2n]), [2]), 'INVALID_TYPE', 'keys', 'int64');
    await expectError(v32.accum(new BigInt64Array([1n]), [1], [2], [true]), 'INVALID_TYPE', 'keys');
    await expectError(v32.lookup(new de.Tensor(new BigInt64Array([1n]), [1])), 'INVALID_TYPE', 'keys');
    expect([await v64.size(), await v32.size()]).toEqual([1, 1]);
    // plain arrays carry no dtype and are converted
    expect(Array.from((await v32.lookup([1])).data)).toEqual([1]);
    // export is typed by key dtype
    const [k32]: [Int32Array, de.Tensor<Float32Array>] = await v32.export();
    const [k64]: [BigInt64Array, de.Tensor<Float32Array>] = await v64.export();
    expect([k32, k64].map((k) => k.constructor.name)).toEqual(['Int32Array', 'BigInt64Array']);
  });
});

describe('TFRA properties and options', () => {
  const saved = process.env.TF_HASHTABLE_INIT_SIZE;
  afterEach(() => {
    if (saved === undefined) delete process.env.TF_HASHTABLE_INIT_SIZE;
    else process.env.TF_HASHTABLE_INIT_SIZE = saved;
  });

  it('tables (one per device) and trainableStore (name -> trainable) are public', async () => {
    const v = new de.Variable({ dim: 2, name: uniqueName(), devices: ['a', 'b', 'c'] });
    expect(v.tables.length).toBe(3);
    expect(v.tables.every((t) => t.dim === 2)).toBe(true);
    expect(v.trainableStore.size).toBe(0);
    const [, t] = await de.embeddingLookup(v, [1n], { name: 'emb', returnTrainable: true });
    expect([...v.trainableStore.keys()]).toEqual(['emb']);
    expect(v.trainableStore.get('emb')).toBe(t);
  });

  it('the default initSize is TF_HASHTABLE_INIT_SIZE, else 8192, split over the shards', () => {
    delete process.env.TF_HASHTABLE_INIT_SIZE;
    const a = new de.Variable({ dim: 1, name: uniqueName(), devices: ['a', 'b'] });
    expect(a.initSize).toBe(8192);
    expect(a.tables.map((t) => t.capacity())).toEqual([4096, 4096]);
    process.env.TF_HASHTABLE_INIT_SIZE = '3000';
    const b = new de.Variable({ dim: 1, name: uniqueName() });
    expect(b.initSize).toBe(3000);
    expect(b.tables[0]!.capacity()).toBe(3000);
    const c = new de.Variable({ dim: 1, name: uniqueName(), initSize: 100 });
    expect(c.initSize).toBe(100);
  });

  it('checkpoint: false leaves the variable out of saves', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tfra-ckpt-'));
    try {
      const kept = new de.Variable({ dim: 1, name: uniqueName('kept') });
      const skipped = new de.Variable({ dim: 1, name: uniqueName('skipped'), checkpoint: false });
      await kept.upsert([1n], [1]);
      await skipped.upsert([1n], [1]);
      await kept.saveToFileSystem(dir);
      await skipped.saveToFileSystem(dir);
      expect(await readdir(dir)).toEqual([kept.name]);
      expect(skipped.checkpoint).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('default partitioner: each key on shard floorMod(key, N) (negative keys included)', () => {
  for (const [keyDtype, keys] of [
    ['int32', [-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -2147483648, 2147483647]],
    ['int64', [-7n, -5n, -4n, -3n, -1n, 0n, 2n, 5n, -(1n << 62n) - 1n, (1n << 62n) + 3n, -(1n << 63n), (1n << 63n) - 1n]],
  ] as const) {
    for (const n of [3, 4, 5]) {
      it(`${keyDtype} keys over ${n} shards`, async () => {
        const v = new de.Variable({ keyDtype, dim: 1, name: uniqueName(), devices: Array.from({ length: n }, (_, i) => `d${i}`) });
        const ks = keys as readonly (number | bigint)[];
        await v.upsert(ks as never, ks.map((_, i) => i));
        for (let s = 0; s < n; s++) {
          const want = ks.filter((k) => shardOf(BigInt(k), n) === s).map((k) => BigInt(k));
          const b = v.tables[s]!.exportSync();
          expect(sortedKeys(b.keys as ArrayLike<bigint | number>), `shard ${s}`).toEqual(sortedKeys(want));
          expect(await v.size(s)).toBe(want.length);
        }
        // reads and training route every key to its shard too
        expect(rowsOf((await v.lookup(ks as never)).data, 1)).toEqual(ks.map((_, i) => [i]));
        const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
        const [, t] = await de.embeddingLookup(v, ks as never, { name: 'e', returnTrainable: true });
        await opt.applyGradients([[ks.map(() => 1), t]]);
        expect(rowsOf((await v.lookup(ks as never)).data, 1)).toEqual(ks.map((_, i) => [i - 1]));
        for (let s = 0; s < n; s++) expect(await v.size(s)).toBe(ks.filter((k) => shardOf(BigInt(k), n) === s).length);
      });
    }
  }
});
