import { createTable, initializers } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * A Promise find of 16K keys or more splits over the pool as soon as it starts, brings its
 * helper along and wakes the JS thread while its last chunks still run (README "Thread
 * safety and async calls"). These calls are checked against a plain model of the table: a
 * Map from key to the row the test wrote, and the initializer's value for absent keys.
 */
const DIM = 8;
const ROWS = 300_000;
const BATCH = 65_536;
const INIT = -0.25;

/** A scrambled 64-bit key for index i (distinct for distinct i below 2^32). */
function keyOf(i: number): bigint {
  const x = (BigInt(i) * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  return BigInt.asIntN(64, x ^ (x >> 31n));
}

/** Row j of key index i, as the test writes it. */
const rowValue = (i: number, j: number): number => (i % 4099) * 0.125 + j * 0.5 - 3;

/** Deterministic 32-bit generator (LCG), so a failure reproduces. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
}

interface Model {
  readonly rows: Map<bigint, Float32Array>;
}

function buildModel(): { model: Model; keys: BigInt64Array; values: Float32Array } {
  const keys = new BigInt64Array(ROWS);
  const values = new Float32Array(ROWS * DIM);
  const rows = new Map<bigint, Float32Array>();
  for (let i = 0; i < ROWS; i++) {
    keys[i] = keyOf(i);
    const row = new Float32Array(DIM);
    for (let j = 0; j < DIM; j++) row[j] = rowValue(i, j);
    values.set(row, i * DIM);
    rows.set(keys[i]!, row);
  }
  return { model: { rows }, keys, values };
}

/** 64K query keys: resident ones (some repeated) and about one in eight absent. */
function queryKeys(seed: number): BigInt64Array {
  const next = lcg(seed);
  const q = new BigInt64Array(BATCH);
  for (let i = 0; i < BATCH; i++) {
    const r = next();
    q[i] = r % 8 === 0 ? keyOf(ROWS + (r % 1_000_000)) : keyOf(r % ROWS);
  }
  return q;
}

/** What find must return, from the model alone. */
function expected(model: Model, q: BigInt64Array): { values: Float32Array; exists: Uint8Array } {
  const values = new Float32Array(q.length * DIM);
  const exists = new Uint8Array(q.length);
  for (let i = 0; i < q.length; i++) {
    const row = model.rows.get(q[i]!);
    if (row) {
      values.set(row, i * DIM);
      exists[i] = 1;
    } else {
      values.fill(INIT, i * DIM, (i + 1) * DIM);
    }
  }
  return { values, exists };
}

function expectSame(got: { values: Float32Array; exists: Uint8Array }, want: { values: Float32Array; exists: Uint8Array }): void {
  expect(got.exists.length).toBe(want.exists.length);
  expect(Buffer.compare(Buffer.from(got.exists), Buffer.from(want.exists))).toBe(0);
  // Bit for bit (the rows are exact in float32).
  expect(Buffer.compare(Buffer.from(got.values.buffer, got.values.byteOffset, got.values.byteLength), Buffer.from(want.values.buffer))).toBe(0);
}

describe('cpu backend: Promise finds of 64K keys against a model', () => {
  const { model, keys, values } = buildModel();

  it('a dynamic table: fresh results, a reused out, and calls in flight together', async () => {
    const t = createTable({ dim: DIM, initCapacity: ROWS, initializer: initializers.constant(INIT) }, { backend: cpuBackend });
    t.upsertSync(keys, values);
    expect(t.size()).toBe(ROWS);
    const queries = [1, 2, 3, 4].map(queryKeys);
    const wants = queries.map((q) => expected(model, q));
    // Absent keys are there, and so are repeats.
    expect(wants[0]!.exists.includes(0)).toBe(true);
    expect(new Set(queries[0]).size).toBeLessThan(BATCH);

    expectSame(await t.find(queries[0]!), wants[0]!);
    const out = { values: new Float32Array(BATCH * DIM).fill(99), exists: new Uint8Array(BATCH).fill(7) };
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < queries.length; i++) {
        const r = await t.find(queries[i]!, { out });
        expect(r.values).toBe(out.values);
        expectSame(r, wants[i]!);
      }
    }
    const together = await Promise.all(queries.map((q) => t.find(q)));
    together.forEach((r, i) => expectSame(r, wants[i]!));
    // Nothing was inserted by the finds.
    expect(t.size()).toBe(ROWS);
    t.dispose();
    await expect(t.find(queries[0]!)).rejects.toMatchObject({ code: 'DISPOSED' });
  });

  it('a static table: rows by index, against the same kind of model', async () => {
    const vocab = ROWS;
    const t = createTable({ kind: 'static', dim: DIM, vocabularySize: vocab }, { backend: cpuBackend });
    const ids = new BigInt64Array(vocab).map((_, i) => BigInt(i));
    t.upsertSync(ids, values);
    const next = lcg(11);
    const q = new BigInt64Array(BATCH).map(() => BigInt(next() % vocab));
    const want = { values: new Float32Array(BATCH * DIM), exists: new Uint8Array(BATCH).fill(1) };
    for (let i = 0; i < BATCH; i++) want.values.set(model.rows.get(keyOf(Number(q[i])))!, i * DIM);
    expectSame(await t.find(q), want);
    const outOfRange = q.slice();
    outOfRange[BATCH - 1] = BigInt(vocab);
    await expect(t.find(outOfRange)).rejects.toMatchObject({ code: 'OUT_OF_RANGE' });
    expectSame(await t.find(q), want);
    t.dispose();
  });
});
