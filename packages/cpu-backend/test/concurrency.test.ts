import { createTable, type EmbeddingTable, optimizers, referenceBackend } from '@embedstack/core';
import { expectSameState, snapshot } from '@embedstack/core/testing';
import { ASYNC_MIN_WORK, cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';
import { expectSameFloats } from './fixtures/sameFloats.js';

/**
 * Many overlapping promises on one table, with batches large enough to run on the
 * addon's thread pool as Promise calls. Writers own disjoint key ranges, so their ops
 * commute: the end state must equal the reference backend running each writer's
 * ops in order, one writer after another. Readers run at the same time and check
 * what they can prove: rows never torn (each row is written whole, all elements
 * equal), and a fixed region always reads back exactly.
 */
const DIM = 64;
const BATCH = Math.ceil(ASYNC_MIN_WORK / DIM) + 100; // goes async
const WRITERS = 4;
const ROUNDS = 5;

type Op = (t: EmbeddingTable) => Promise<unknown>;

function writerOps(w: number): Op[] {
  const base = BigInt(w) * 10_000_000n + 1_000_000n;
  const keys = (from: number, n: number) => Array.from({ length: n }, (_, i) => base + BigInt(from + i * 3));
  const ops: Op[] = [];
  const adagrad = optimizers.adagrad({ learningRate: 0.05 });
  for (let r = 0; r < ROUNDS; r++) {
    const k = keys(r * 7, BATCH);
    const constRows = new Float32Array(BATCH * DIM);
    for (let i = 0; i < BATCH; i++) constRows.fill(w * 100 + r + (i % 5), i * DIM, (i + 1) * DIM);
    ops.push((t) => t.upsert(k, constRows));
    const grads = new Float32Array(BATCH * DIM).map((_, i) => ((i % 13) - 6) / 8);
    ops.push((t) => t.applyGradients(k, grads, adagrad, r + 1));
    ops.push((t) => t.findOrInsert(keys(r * 7 + 1, BATCH)));
    ops.push((t) => t.accum(k, grads, new Uint8Array(BATCH).fill(1)));
    ops.push((t) => t.remove(keys(r * 11, BATCH / 4)));
  }
  return ops;
}

describe('cpu backend: concurrent async calls on one table', () => {
  it('disjoint writers + readers end in the reference state', async () => {
    const options = { dim: DIM, initCapacity: 1024, optimizer: optimizers.adagrad({ learningRate: 0.05 }) };
    const t = createTable(options, { backend: cpuBackend });
    const ref = createTable(options, { backend: referenceBackend });

    // a fixed region nobody writes always reads back exactly
    const fixedKeys = Array.from({ length: BATCH }, (_, i) => BigInt(-1 - i));
    const fixedValues = new Float32Array(BATCH * DIM).map((_, i) => Math.floor(i / DIM) % 97);
    await t.upsert(fixedKeys, fixedValues);
    await ref.upsert(fixedKeys, fixedValues);
    let writing = true;
    let reads = 0;
    const reader = async () => {
      while (writing) {
        const r = await t.find(fixedKeys);
        expectSameFloats(r.values, fixedValues);
        reads++;
      }
    };
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      for (const op of writerOps(w)) await op(t);
    });
    const readers = [reader(), reader()];
    await Promise.all(writers);
    writing = false;
    await Promise.all(readers);

    for (let w = 0; w < WRITERS; w++) for (const op of writerOps(w)) await op(ref);

    expect(reads).toBeGreaterThan(0);
    expect(t.size()).toBe(ref.size());
    // lru scores depend on how the calls interleaved: compare keys, values and slots
    expectSameState(await snapshot(t), await snapshot(ref), 'concurrent end state', false);
    t.dispose();
    ref.dispose();
  }, 120_000);

  it('a read overlapping writes never sees a torn row', async () => {
    // every upsert writes each row whole with one value (its version): a find
    // running under the shared lock must see each row all-equal
    const t = createTable({ dim: DIM }, { backend: cpuBackend });
    const keys = new BigInt64Array(BATCH).map((_, i) => BigInt(i * 7));
    let writing = true;
    let torn = 0;
    let reads = 0;
    const writer = async () => {
      for (let v = 1; v <= 30; v++) await t.upsert(keys, new Float32Array(BATCH * DIM).fill(v));
      writing = false;
    };
    const reader = async () => {
      while (writing) {
        const { values } = await t.find(keys);
        for (let i = 0; i < BATCH; i++) {
          const row = values.subarray(i * DIM, (i + 1) * DIM);
          if (row.some((x) => x !== row[0])) torn++;
        }
        reads++;
      }
    };
    await Promise.all([writer(), reader(), reader()]);
    expect(reads).toBeGreaterThan(0);
    expect(torn).toBe(0);
    t.dispose();
  });

  it('dispose while async calls are in flight: they finish, later calls are DISPOSED', async () => {
    const t = createTable({ dim: DIM }, { backend: cpuBackend });
    const keys = new BigInt64Array(BATCH).map((_, i) => BigInt(i));
    const values = new Float32Array(BATCH * DIM).fill(1);
    const pending = [t.raw.async.upsert(keys, values, null), t.raw.async.find(keys)];
    t.raw.dispose();
    const settled = await Promise.allSettled(pending);
    for (const s of settled) {
      if (s.status === 'rejected') expect((s.reason as { code: string }).code).toBe('DISPOSED');
    }
    await expect(t.raw.async.find(keys)).rejects.toMatchObject({ code: 'DISPOSED' });
    expect(() => t.raw.sync!.size()).toThrow(/disposed/);
    t.dispose();
  });
});
