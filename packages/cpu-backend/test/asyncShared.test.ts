import { createTable } from '@embedstack/core';
import { ASYNC_MIN_WORK, cpuBackend, loadAddon } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * A Promise call copies the typed arrays it reads and writes (they may be detached while its
 * job runs). Its outputs over a SharedArrayBuffer, which can never be detached, transferred or
 * shrunk, it writes in place; its inputs there it copies too (another thread may rewrite them
 * while the job runs: sharedRace.test.ts). info().asyncCopies counts both kinds.
 */
const DIM = 4;
const N = ASYNC_MIN_WORK / 8; // n * max(dim, 8) = ASYNC_MIN_WORK: the pool's path
const value = (k: number, j: number): number => (k % 1021) * 0.25 + j; // exact in float32

/** A typed array of `length` elements over a SharedArrayBuffer (or a plain ArrayBuffer). */
function over<T>(make: new (b: ArrayBufferLike) => T, bytesPer: number, length: number, shared: boolean): T {
  return new make(shared ? new SharedArrayBuffer(length * bytesPer) : new ArrayBuffer(length * bytesPer));
}

const copies = (): { arrays: number; bytes: number; shared: number } => ({ ...loadAddon().binding.info().asyncCopies });

describe('cpu backend: Promise calls and SharedArrayBuffer memory', () => {
  it.each([false, true])('find and upsert with every array over a SharedArrayBuffer: %s (copies counted, values exact)', async (shared) => {
    const t = createTable({ dim: DIM, initCapacity: 2 * N }, { backend: cpuBackend });
    const keys = over(BigInt64Array, 8, N, shared);
    for (let i = 0; i < N; i++) keys[i] = BigInt(3 * i - 5000);
    const rows = over(Float32Array, 4, N * DIM, shared);
    for (let i = 0; i < N; i++) for (let j = 0; j < DIM; j++) rows[i * DIM + j] = value(i, j);

    const before = copies();
    await t.upsert(keys, rows);
    const afterUpsert = copies();
    // upsert reads keys (8 B each) and values (DIM floats each): copied, shared or not
    expect(afterUpsert.arrays - before.arrays).toBe(2);
    expect(afterUpsert.bytes - before.bytes).toBe(N * 8 + N * DIM * 4);
    expect(afterUpsert.shared - before.shared).toBe(0);

    const out = { values: over(Float32Array, 4, N * DIM, shared), exists: over(Uint8Array, 1, N, shared) };
    await t.find(keys, { out });
    const afterFind = copies();
    // find reads keys (copied) and writes out.values and out.exists (in place when shared)
    expect(afterFind.arrays - afterUpsert.arrays).toBe(shared ? 1 : 3);
    expect(afterFind.bytes - afterUpsert.bytes).toBe(shared ? N * 8 : N * 8 + N * DIM * 4 + N);
    expect(afterFind.shared - afterUpsert.shared).toBe(shared ? 2 : 0);
    for (let i = 0; i < N; i++) {
      expect(out.exists[i]).toBe(1);
      for (let j = 0; j < DIM; j++) if (out.values[i * DIM + j] !== value(i, j)) expect([i, j, out.values[i * DIM + j]]).toEqual([i, j, value(i, j)]);
    }
    t.dispose();
  });

  it('keys over a growable SharedArrayBuffer grown while the call runs: the call reads its copy, right', async () => {
    const t = createTable({ dim: DIM, initCapacity: 2 * N }, { backend: cpuBackend });
    const sab = new SharedArrayBuffer(N * 8, { maxByteLength: 4 * N * 8 });
    const keys = new BigInt64Array(sab, 0, N);
    for (let i = 0; i < N; i++) keys[i] = BigInt(i);
    const rows = new Float32Array(N * DIM).map((_, x) => value(Math.floor(x / DIM), x % DIM));
    t.upsertSync(keys, rows);
    const before = copies();
    const pending = t.find(keys);
    sab.grow(4 * N * 8); // only grows, in place
    const got = await pending;
    expect([copies().arrays - before.arrays, copies().bytes - before.bytes, copies().shared - before.shared]).toEqual([1, N * 8, 0]);
    expect(Array.from(got.exists).every((e) => e === 1)).toBe(true);
    expect(Array.from(got.values.subarray(0, 2 * DIM))).toEqual([value(0, 0), value(0, 1), value(0, 2), value(0, 3), value(1, 0), value(1, 1), value(1, 2), value(1, 3)]);
    t.dispose();
  });
});

describe('cpu backend: outputs over a SharedArrayBuffer are written in place', () => {
  it('two shards find into one shared out at once (Promise, planned): each writes its own rows, neither reverts the other', async () => {
    const n = 2 * N;
    const keys = over(BigInt64Array, 8, n, true);
    for (let i = 0; i < n; i++) keys[i] = BigInt(i);
    const shards = [0, 1].map((shard) => {
      const t = createTable({ dim: DIM, initCapacity: n }, { backend: cpuBackend });
      const mine = BigInt64Array.from({ length: N }, (_, j) => BigInt(2 * j + shard)); // floorMod(k, 2) = shard
      const rows = Float32Array.from({ length: N * DIM }, (_, x) => value(2 * Math.floor(x / DIM) + shard, x % DIM));
      t.upsertSync(mine, rows);
      return { t, plan: { placement: 'mod' as const, numShards: 2, shard } };
    });
    const out = { values: over(Float32Array, 4, n * DIM, true), exists: over(Uint8Array, 1, n, true) };
    const before = copies();
    await Promise.all(shards.map(({ t, plan }) => t.find(keys, { out, plan })));
    let wrong = 0;
    for (let i = 0; i < n; i++) {
      if (out.exists[i] !== 1) wrong++;
      for (let j = 0; j < DIM; j++) if (out.values[i * DIM + j] !== value(i, j)) wrong++;
    }
    expect(wrong).toBe(0);
    expect(copies().shared - before.shared).toBe(4); // each call: out.values and out.exists in place
    for (const { t } of shards) t.dispose();
  });

  it('sync calls: findSync and a cache query fill outputs over a SharedArrayBuffer', () => {
    const t = createTable({ dim: DIM, initCapacity: 64 }, { backend: cpuBackend });
    const keys = BigInt64Array.from([5n, -7n, 11n]);
    t.upsertSync(keys.subarray(0, 2), Float32Array.from({ length: 2 * DIM }, (_, x) => value(Math.floor(x / DIM), x % DIM)));
    const out = { values: over(Float32Array, 4, 3 * DIM, true), exists: over(Uint8Array, 1, 3, true) };
    out.exists[2] = 9;
    t.findSync(keys, { out });
    expect(Array.from(out.exists)).toEqual([1, 1, 0]);
    expect(Array.from(out.values.subarray(0, 2 * DIM))).toEqual([value(0, 0), value(0, 1), value(0, 2), value(0, 3), value(1, 0), value(1, 1), value(1, 2), value(1, 3)]);
    t.dispose();

    const b = loadAddon().binding as unknown as Record<string, (...a: unknown[]) => unknown>;
    const c = b.createCache!(16, DIM, 4);
    b.cacheInsert!(c, BigInt64Array.from([3n]), Float32Array.from([1.5, 2.5, 3.5, 4.5]));
    const values = over(Float32Array, 4, 2 * DIM, true);
    const exists = over(Uint8Array, 1, 2, true);
    expect(b.cacheQuery!(c, BigInt64Array.from([3n, 4n]), values, exists)).toBe(1);
    expect([Array.from(exists), Array.from(values.subarray(0, DIM))]).toEqual([[1, 0], [1.5, 2.5, 3.5, 4.5]]);
    b.cacheDispose!(c);
  });
});
