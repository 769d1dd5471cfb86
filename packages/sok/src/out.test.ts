// lookupSparse's options.out: results written into the caller's arrays (reused from call to
// call), the values a plain pooling computed here and the bits of a call without `out`, on
// 1, 2 and 4 devices (the in-process path) and through the collectives; bad arrays refused
// before any device works.
import { RaggedTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, initDevices, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});
afterAll(() => sok.shutdown());

/** Row of key k at dim `dim`: element c is (k * (c % 5 - 2)) / 4 + c (exact in float32). */
const rowOf = (k: number, dim: number): number[] => Array.from({ length: dim }, (_, c) => (k * ((c % 5) - 2)) / 4 + c);

/** The pooled rows of `ids` written out in float64 from rowOf (bags of 1, 2, 4 or 8 keys, so a mean is exact). */
function plainPool(ids: number[][], dim: number, combiner: 'sum' | 'mean'): number[] {
  return ids.flatMap((bag) => {
    const acc = new Array<number>(dim).fill(0);
    for (const k of bag) rowOf(k, dim).forEach((x, c) => (acc[c]! += x));
    return acc.map((x) => Math.fround(combiner === 'mean' && bag.length > 0 ? x / bag.length : x) + 0);
  });
}

/** `n` bags of 1, 2, 4 or 8 keys drawn from `keys` by a fixed stride from `seed`. */
const draw = (keys: number[], n: number, seed: number): number[][] =>
  Array.from({ length: n }, (_, r) => Array.from({ length: 1 << ((r + seed) % 4) }, (_, j) => keys[(r * 31 + j * 17 + seed) % keys.length]!));
/** The bags as a RaggedTensor: row split i + 1 is the running count of ids in bags 0..i. */
function ragged(ids: number[][]): RaggedTensor {
  const splits = new Int32Array(ids.length + 1);
  ids.forEach((bag, i) => (splits[i + 1] = splits[i]! + bag.length));
  return RaggedTensor.fromRowSplits(BigInt64Array.from(ids.flat(), BigInt), splits);
}

async function filled(name: string, dim: number, keys: number[]): Promise<sok.DynamicVariable> {
  const v = new sok.DynamicVariable({ dimension: dim, initializer: 'zeros', name });
  await sok.assign(v, BigInt64Array.from(keys, BigInt), Float32Array.from(keys.flatMap((k) => rowOf(k, dim))));
  return v;
}

/** A communicator of the in-process kind that is not the default class: lookups take the collectives. */
class CollectiveCommunicator extends sok.InProcessCommunicator {}

describe.each([
  [1, 'default'],
  [2, 'default'],
  [4, 'default'],
  [2, 'collectives'],
  [4, 'collectives'],
] as const)('lookupSparse with options.out on %i devices (%s communicator)', (n, kind) => {
  const init = async (): Promise<void> => {
    sok.shutdown();
    await sok.init(kind === 'default' ? { numDevices: n } : { numDevices: n, communicator: new CollectiveCommunicator(n) });
  };

  it('writes each result into its array, call after call, with the bits of a call without out', async () => {
    await init();
    const keys = Array.from({ length: 200 }, (_, i) => i * 7 - 600);
    const a = await filled(`out_a_${n}_${kind}`, 3, keys);
    const b = await filled(`out_b_${n}_${kind}`, 5, keys);
    try {
      const outA = new Float32Array(9 * 3).fill(Number.NaN);
      const outB = new Float32Array(4 * 5).fill(Number.NaN);
      for (const seed of [1, 2, 3]) {
        const idsA = draw(keys, 9, seed);
        const idsB = draw(keys, 4, seed + 7);
        const [ta, tb] = await sok.lookupSparse([a, b], [ragged(idsA), ragged(idsB)], { combiners: ['sum', 'mean'], training: false, out: [outA, outB] });
        expect(ta!.data).toBe(outA);
        expect(tb!.data).toBe(outB);
        expect(ta!.shape).toEqual([9, 3]);
        expect(tb!.shape).toEqual([4, 5]);
        expect(Array.from(outA), `seed ${seed}, table a`).toEqual(plainPool(idsA, 3, 'sum'));
        expect(Array.from(outB), `seed ${seed}, table b`).toEqual(plainPool(idsB, 5, 'mean'));
        const [fa, fb] = await sok.lookupSparse([a, b], [ragged(idsA), ragged(idsB)], { combiners: ['sum', 'mean'], training: false });
        expect(Buffer.from(fa!.data.buffer).equals(Buffer.from(outA.buffer))).toBe(true);
        expect(Buffer.from(fb!.data.buffer).equals(Buffer.from(outB.buffer))).toBe(true);
      }
      // One table into its array, the other into a new one; a view into a larger buffer.
      const big = new Float32Array(100).fill(-1);
      const view = big.subarray(10, 10 + 9 * 3);
      const idsA = draw(keys, 9, 5);
      const [ta, tb] = await sok.lookupSparse([a, b], [ragged(idsA), ragged(idsA)], { combiners: 'sum', training: false, out: [view, null] });
      expect(ta!.data).toBe(view);
      expect(Array.from(view)).toEqual(plainPool(idsA, 3, 'sum'));
      expect(Array.from(tb!.data)).toEqual(plainPool(idsA, 5, 'sum'));
      expect([...Array.from(big.subarray(0, 10)), ...Array.from(big.subarray(37))].every((x) => x === -1)).toBe(true);
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  it('a training lookup (missing keys inserted) with a tape, into its array', async () => {
    await init();
    const keys = Array.from({ length: 50 }, (_, i) => i * 3 + 1);
    const v = await filled(`out_train_${n}_${kind}`, 4, keys);
    try {
      const out = new Float32Array(3 * 4);
      const tape = new sok.GradientTape();
      const [t] = await sok.lookupSparse([v], [ragged([[keys[2]!, 9999], [keys[4]!], [keys[6]!, keys[8]!]])], { combiners: 'sum', tape, out: [out] });
      expect(t!.data).toBe(out);
      // 9999 is missing: inserted with the 'zeros' initializer, so it adds 0.
      expect(Array.from(out)).toEqual(plainPool([[keys[2]!], [keys[4]!], [keys[6]!, keys[8]!]], 4, 'sum'));
      expect(await v.size()).toBe(keys.length + 1);
      const pairs = tape.gradient([new Tensor(new Float32Array(12).fill(1), [3, 4])]);
      expect(pairs).toHaveLength(1);
    } finally {
      v.dispose();
    }
  });

  it('refuses a bad options.out before any device works (nothing inserted)', async () => {
    await init();
    const v = await filled(`out_bad_${n}_${kind}`, 2, [1, 2, 3]);
    const w = await filled(`out_bad_w_${n}_${kind}`, 2, [1, 2, 3]);
    try {
      // Key 77 is missing: a call that ran would insert it.
      const ids = ragged([[1, 77], [2]]);
      const call = (out: unknown) => sok.lookupSparse([v, w], [ids, ids], { combiners: 'sum', out: out as never });
      await expectError(call([new Float32Array(4)]), 'INVALID_TYPE', 'options.out', 'an array of 2');
      await expectError(call(new Float32Array(8)), 'INVALID_TYPE', 'options.out');
      await expectError(call([new Float32Array(4), new Float64Array(4)]), 'INVALID_TYPE', 'options.out[1]', 'a Float32Array [4]');
      await expectError(call([[0, 0, 0, 0], null]), 'INVALID_TYPE', 'options.out[0]');
      await expectError(call([new Float32Array(5), null]), 'SHAPE_MISMATCH', 'options.out[0]', 'hold 4 floats', 'holds 5');
      await expectError(call([null, new Proxy(new Float32Array(4), {})]), 'INVALID_TYPE', 'options.out[1]');
      const shared = new Float32Array(6);
      await expectError(call([shared.subarray(0, 4), shared.subarray(2, 6)]), 'INVALID_ARGUMENT', 'options.out[1]', 'options.out[0]', 'share memory');
      const same = new Float32Array(4);
      await expectError(call([same, same]), 'INVALID_ARGUMENT', 'options.out[1]', 'share memory');
      expect(await v.size()).toBe(3);
      expect(await w.size()).toBe(3);
      // Adjacent views of one buffer share no memory: accepted (and key 77 inserted, as 0).
      const adjacent = new Float32Array(8);
      const [x, y] = await call([adjacent.subarray(0, 4), adjacent.subarray(4)]);
      expect(Array.from(x!.data)).toEqual(plainPool([[1], [2]], 2, 'sum'));
      expect(Array.from(adjacent)).toEqual([...plainPool([[1], [2]], 2, 'sum'), ...plainPool([[1], [2]], 2, 'sum')]);
      expect(y!.data.byteOffset).toBe(16);
      expect(await v.size()).toBe(4);
    } finally {
      v.dispose();
      w.dispose();
    }
  });

  it('refuses, before any device works, an out on a detached buffer (even for 0 rows) or sharing memory with the call\'s ids, row splits or weights', async () => {
    await init();
    const v = await filled(`out_apart_${n}_${kind}`, 2, [1, 2, 3]);
    const w = await filled(`out_apart_w_${n}_${kind}`, 2, [1, 2, 3]);
    try {
      // Key 77 is missing: a call that ran would insert it into v (and into w where w reads it).
      const ids = ragged([[1, 77], [2]]);
      const empty = RaggedTensor.fromRowSplits(new BigInt64Array(0), Int32Array.from([0]));
      const gone = new Float32Array(0);
      structuredClone(gone.buffer, { transfer: [gone.buffer] });
      await expectError(sok.lookupSparse([v, w], [ids, empty], { combiners: 'sum', out: [null, gone] }), 'INVALID_ARGUMENT', 'options.out[1]', 'detached');
      // Table w's weights are a view of out[0]'s buffer.
      const buf = new Float32Array(4);
      const weights = buf.subarray(0, 3);
      weights.set([1, 2, 3]);
      await expectError(sok.lookupSparse([v, w], [ids, ids], { combiners: 'sum', spWeights: [null, weights], out: [buf, null] }), 'INVALID_ARGUMENT', 'options.out[0]', 'spWeights[1]');
      // out[1] over the memory of table v's ids (BigInt64Array [3]: 24 bytes) or of its row splits.
      const idBytes = new ArrayBuffer(24 + 16);
      const idView = new BigInt64Array(idBytes, 0, 3);
      idView.set([1n, 77n, 2n]);
      const sharedIds = RaggedTensor.fromRowSplits(idView, Int32Array.from([0, 2, 3]));
      await expectError(sok.lookupSparse([v, w], [sharedIds, ids], { combiners: 'sum', out: [null, new Float32Array(idBytes, 8, 4)] }), 'INVALID_ARGUMENT', 'options.out[1]', "spIds[0]'s ids");
      const splitBytes = new ArrayBuffer(12 + 16);
      const splitView = new Int32Array(splitBytes, 0, 3);
      splitView.set([0, 2, 3]);
      const sharedSplits = RaggedTensor.fromRowSplits(BigInt64Array.from([1n, 77n, 2n]), splitView);
      await expectError(sok.lookupSparse([v, w], [ids, sharedSplits], { combiners: 'sum', out: [new Float32Array(splitBytes, 8, 4), null] }), 'INVALID_ARGUMENT', 'options.out[0]', "spIds[1]'s row splits");
      expect(await v.size()).toBe(3);
      expect(await w.size()).toBe(3);
      // Beside the inputs in the same buffer (no byte in common): accepted.
      const [r] = await sok.lookupSparse([v, w], [ids, sharedIds], { combiners: 'sum', out: [new Float32Array(idBytes, 24, 4), null] });
      expect(Array.from(r!.data)).toEqual(plainPool([[1], [2]], 2, 'sum'));
      expect(await v.size()).toBe(4);
    } finally {
      v.dispose();
      w.dispose();
    }
  });

  it('a Float32Array subclass or an array shadowing length: written in its memory, the Tensor a plain view of it (nothing refused after the devices worked)', async () => {
    await init();
    const v = await filled(`out_odd_${n}_${kind}`, 2, [1, 2, 3]);
    const w = await filled(`out_odd_w_${n}_${kind}`, 2, [1, 2, 3]);
    try {
      class Odd extends Float32Array {
        override get length(): number {
          return 3;
        }
      }
      const odd = new Odd(4);
      const own = new Float32Array(4);
      Object.defineProperty(own, 'length', { value: 9 });
      const ids = ragged([[1, 2], [3]]);
      const [a, b] = await sok.lookupSparse([v, w], [ids, ids], { combiners: 'sum', out: [odd, own] });
      const want = plainPool([[1, 2], [3]], 2, 'sum');
      for (const [t, o] of [[a!, odd], [b!, own]] as const) {
        expect(Object.getPrototypeOf(t.data)).toBe(Float32Array.prototype);
        expect(t.data.length).toBe(4);
        expect(t.data.buffer).toBe(new Float32Array(o.buffer).buffer);
        expect(Array.from(new Float32Array(o.buffer))).toEqual(want);
        expect(t.shape).toEqual([2, 2]);
      }
    } finally {
      v.dispose();
      w.dispose();
    }
  });
});

describe.each([1, 2, 4])('a batch on %i devices large enough for the CPU backend\'s pool (a Promise job), into options.out', (n) => {
  it('pools the plain values into the same arrays call after call', async () => {
    await initDevices(n);
    const dim = 16;
    const keys = Array.from({ length: 3000 }, (_, i) => i * 5 - 7000);
    const v = await filled(`out_big_${n}`, dim, keys);
    try {
      // 3000 bags of 1, 2, 4 or 8 keys: 11,250 ids of dim 16 (over the 2^17 ids x dim at which the CPU backend posts a job to its pool).
      const out = new Float32Array(3000 * dim);
      const shared = new Float32Array(new SharedArrayBuffer(3000 * dim * 4));
      for (const seed of [1, 2]) {
        const ids = draw(keys, 3000, seed);
        const [t] = await sok.lookupSparse([v], [ragged(ids)], { combiners: 'mean', training: false, out: [out] });
        expect(t!.data).toBe(out);
        expect(Array.from(out), `seed ${seed}`).toEqual(plainPool(ids, dim, 'mean'));
        const [s] = await sok.lookupSparse([v], [ragged(ids)], { combiners: 'mean', training: false, out: [shared] });
        expect(s!.data).toBe(shared);
        expect(Array.from(shared), `seed ${seed}, shared memory`).toEqual(plainPool(ids, dim, 'mean'));
      }
    } finally {
      v.dispose();
    }
  }, 180_000); // 62-70 s at load 27 on 2 cores (stop 38 review); the default 60 s is too tight there
});
