// Results must not depend on the device count: for N = 1, 2, 4, 8, plain lookups are
// bit-identical; pooled outputs, gradients and one optimizer step of every optimizer
// agree within 1e-6 relative. Property tests over random tables, ids, weights.
import { RaggedTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstMismatch, initDevices, rowsByKey, useTestBackend } from '../test/setup.js';

let backend = 'reference';
beforeAll(async () => {
  backend = await useTestBackend();
});
afterAll(() => sok.shutdown());

const DEVICES = [1, 2, 4, 8];
const OPTIMIZERS: (() => sok.SokOptimizer)[] = [
  () => new sok.optimizers.SGD({ learningRate: 0.5 }),
  () => new sok.optimizers.Momentum({ learningRate: 0.5, momentum: 0.9 }),
  () => new sok.optimizers.Adagrad({ learningRate: 0.5 }),
  () => new sok.optimizers.Adam({ learningRate: 0.5 }),
  () => new sok.optimizers.Adamax({ learningRate: 0.5 }),
  () => new sok.optimizers.Adadelta({ learningRate: 0.5 }),
  () => new sok.optimizers.Ftrl({ learningRate: 0.5, l1RegularizationStrength: 0.01 }),
];

const int64 = fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n);
const weight = fc.float({ min: Math.fround(0.125), max: 2, noNaN: true });
const grad = fc.float({ min: -1, max: 1, noNaN: true, noDefaultInfinity: true });

/** A random case: a key universe, static rows, ragged ids into both, weights, combiners, output grads, an optimizer. */
const caseArb = fc
  .record({
    dim: fc.integer({ min: 1, max: 5 }),
    keys: fc.uniqueArray(fc.oneof(int64, fc.bigInt(-20n, 20n)), { minLength: 1, maxLength: 12 }),
    rows: fc.integer({ min: 1, max: 20 }),
    nrowsA: fc.integer({ min: 0, max: 6 }),
    nrowsB: fc.integer({ min: 0, max: 6 }),
    combinerA: fc.constantFrom('sum' as const, 'mean' as const),
    combinerB: fc.constantFrom('sum' as const, 'mean' as const),
    optimizer: fc.integer({ min: 0, max: OPTIMIZERS.length - 1 }),
    seed: fc.integer({ min: 0, max: 1000 }),
  })
  .chain((c) =>
    fc.record({
      c: fc.constant(c),
      idsA: fc.array(fc.array(fc.integer({ min: 0, max: c.keys.length - 1 }), { maxLength: 5 }), { minLength: c.nrowsA, maxLength: c.nrowsA }),
      idsB: fc.array(fc.array(fc.integer({ min: 0, max: c.rows - 1 }), { maxLength: 5 }), { minLength: c.nrowsB, maxLength: c.nrowsB }),
      weightsA: fc.array(fc.array(weight, { minLength: 5, maxLength: 5 }), { minLength: c.nrowsA, maxLength: c.nrowsA }),
      gradA: fc.array(grad, { minLength: c.nrowsA * c.dim, maxLength: c.nrowsA * c.dim }),
      gradB: fc.array(grad, { minLength: c.nrowsB * c.dim, maxLength: c.nrowsB * c.dim }),
    }),
  );

interface Outcome {
  plainA: Float32Array;
  plainB: Float32Array;
  pooled: Float32Array[];
  grads: { indices: bigint[]; values: Float32Array }[];
  after: Map<bigint, number[]>[];
}

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

async function runOn(n: number, x: Case): Promise<Outcome> {
  const { c, idsA, idsB, weightsA, gradA, gradB } = x;
  await initDevices(n);
  const a = new sok.DynamicVariable({ dimension: c.dim, initializer: 'uniform', name: `prop_a_${c.seed}` });
  const b = new sok.Variable({ shape: [c.rows, c.dim], initializer: 'normal', name: `prop_b_${c.seed}` });
  try {
    const plainA = (await sok.embeddingLookup(a, c.keys)).data;
    const plainB = (await sok.embeddingLookup(b, Array.from({ length: c.rows }, (_, i) => i))).data;
    const raggedA = RaggedTensor.fromNestedArray(idsA.map((r) => r.map((i) => c.keys[i]!)));
    const wA = RaggedTensor.fromNestedArray(idsA.map((r, ri) => r.map((_, j) => weightsA[ri]![j]!)), { dtype: 'float32' });
    const raggedB = RaggedTensor.fromNestedArray(idsB);
    const tape = new sok.GradientTape();
    const pooled = await sok.lookupSparse([a, b], [raggedA, raggedB], { spWeights: [wA, null], combiners: [c.combinerA, c.combinerB], tape });
    const pairs = tape.gradient([new Tensor(Float32Array.from(gradA), [idsA.length, c.dim]), new Tensor(Float32Array.from(gradB), [idsB.length, c.dim])]);
    const grads = pairs.map(([s]) => ({ indices: Array.from(s.indices as ArrayLike<bigint | number>, (k) => BigInt(k)), values: s.values.data }));
    await new sok.OptimizerWrapper(OPTIMIZERS[c.optimizer]!()).applyGradients(pairs);
    const after = [await rowsByKey(a), await rowsByKey(b)];
    return { plainA, plainB, pooled: pooled.map((t) => t.data), grads, after };
  } finally {
    a.dispose();
    b.dispose();
  }
}

describe('results do not depend on the device count (1, 2, 4, 8)', () => {
  it('lookups bit-identical; pooled, gradients and one step of every optimizer within 1e-6', async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, async (x) => {
        const base = await runOn(1, x);
        for (const n of DEVICES.slice(1)) {
          const o = await runOn(n, x);
          expect(Array.from(o.plainA), `plain lookups, ${n} devices`).toEqual(Array.from(base.plainA));
          expect(Array.from(o.plainB), `plain lookups of the Variable, ${n} devices`).toEqual(Array.from(base.plainB));
          o.pooled.forEach((p, i) => expect(firstMismatch(p, base.pooled[i]!), `pooled ${i}, ${n} devices`).toBe(-1));
          o.grads.forEach((g, i) => {
            expect(g.indices).toEqual(base.grads[i]!.indices);
            expect(firstMismatch(g.values, base.grads[i]!.values), `gradient ${i}, ${n} devices`).toBe(-1);
          });
          o.after.forEach((rows, i) => {
            expect([...rows.keys()].sort()).toEqual([...base.after[i]!.keys()].sort());
            for (const [k, row] of rows) expect(firstMismatch(row, base.after[i]!.get(k)!), `table ${i} key ${k} after the step, ${n} devices`).toBe(-1);
          });
        }
      }),
      { numRuns: Number(process.env.SOK_PROPERTY_RUNS ?? 25) },
    );
  });
});

/** A communicator of the in-process kind that is not the default class: lookups take the collectives (allgather, reduce-scatter). */
class CollectiveCommunicator extends sok.InProcessCommunicator {}

describe('the in-process fast path (core lookupCombinedShards) and the collectives agree', () => {
  // The collectives add the devices' float64 partials in device order. The fast path does
  // too where core adds them (the reference backend): bit for bit. The CPU backend pools
  // each row's entries in bag order, as one device's table does: bit for bit with 1 device,
  // within 1e-6 of the collectives.
  it('pooled lookups with the default communicator and through allgather + reduceScatter (2, 3, 4, 8 devices)', async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, async (x) => {
        const { c, idsA, idsB, weightsA } = x;
        const raggedA = RaggedTensor.fromNestedArray(idsA.map((r) => r.map((i) => c.keys[i]!)));
        const wA = RaggedTensor.fromNestedArray(idsA.map((r, ri) => r.map((_, j) => weightsA[ri]![j]!)), { dtype: 'float32' });
        const raggedB = RaggedTensor.fromNestedArray(idsB);
        let one: Float32Array[] = [];
        for (const n of [1, 2, 3, 4, 8]) {
          const results: Float32Array[][] = [];
          for (const communicator of n === 1 ? [undefined] : [undefined, new CollectiveCommunicator(n)]) {
            sok.shutdown();
            await sok.init({ numDevices: n, ...(communicator ? { communicator } : {}) });
            const a = new sok.DynamicVariable({ dimension: c.dim, initializer: 'uniform', name: `fast_a_${c.seed}` });
            const b = new sok.Variable({ shape: [c.rows, c.dim], initializer: 'normal', name: `fast_b_${c.seed}` });
            try {
              const out = await sok.lookupSparse([a, b], [raggedA, raggedB], { spWeights: [wA, null], combiners: [c.combinerA, c.combinerB], training: true });
              results.push(out.map((t) => t.data));
            } finally {
              a.dispose();
              b.dispose();
            }
          }
          if (n === 1) {
            one = results[0]!;
            continue;
          }
          const [fast, collectives] = results as [Float32Array[], Float32Array[]];
          if (backend === 'cpu') {
            fast.forEach((p, i) => expect(Array.from(p), `output ${i}, ${n} devices, fast path vs 1 device`).toEqual(Array.from(one[i]!)));
            collectives.forEach((p, i) => expect(firstMismatch(p, fast[i]!), `output ${i}, ${n} devices, collectives vs fast path`).toBe(-1));
          } else {
            collectives.forEach((p, i) => expect(Array.from(p), `output ${i}, ${n} devices`).toEqual(Array.from(fast[i]!)));
          }
        }
      }),
      { numRuns: Number(process.env.SOK_PROPERTY_RUNS ?? 25) },
    );
  });
});

describe('a pooled -0', () => {
  // Zero rows (missing keys of a 'zeros' variable, read without inserting) pooled by 'mean'
  // over weights summing below zero: +0 / negative = -0 in one device's table. The CPU
  // backend's fast path gives one table's bits on any device count, signed zeros included.
  it('is -0 on 1 device, and on 2 and 4 devices on the CPU backend', async () => {
    const ids = RaggedTensor.fromNestedArray([[5], [6, 7], [8]]);
    const weights = RaggedTensor.fromNestedArray([[-2], [-1, -0.5], [3]], { dtype: 'float32' });
    for (const n of [1, 2, 4]) {
      await initDevices(n);
      const v = new sok.DynamicVariable({ dimension: 3, initializer: 'zeros', name: 'negative_zero' });
      try {
        const [out] = await sok.lookupSparse([v], [ids], { spWeights: [weights], combiners: ['mean'] });
        const signs = Array.from(out!.data, (x) => (Object.is(x, -0) ? '-0' : Object.is(x, 0) ? '+0' : String(x)));
        if (n === 1 || backend === 'cpu') expect(signs, `${n} devices`).toEqual(['-0', '-0', '-0', '-0', '-0', '-0', '+0', '+0', '+0']);
        else expect(out!.data.every((x) => x === 0), `${n} devices`).toBe(true);
      } finally {
        v.dispose();
      }
    }
  });
});

describe('a variable large enough for the CPU backend to read in passes', () => {
  // 160K keys of dim 64 (over 32 MiB of index, key/score lines and values): one table's bag
  // and the bag over the shard tables both read in passes (the shards grouped by owner per
  // chunk). Pooled lookups are bit-identical on 1, 2 and 4 devices, missing keys included.
  it('pools the same bits on 1, 2 and 4 devices', async ({ skip }) => {
    if (backend !== 'cpu') skip(`the passes are the CPU backend's native path; this run's backend is ${backend}`);
    const dim = 64;
    const count = 160_000;
    const keys = new BigInt64Array(count);
    let s = 0x2545f4914f6cdd1dn;
    const next = (): bigint => {
      s = BigInt.asUintN(64, s * 6364136223846793005n + 1442695040888963407n);
      return BigInt.asIntN(64, s ^ (s >> 29n));
    };
    for (let i = 0; i < count; i++) keys[i] = next();
    const values = new Float32Array(count * dim);
    for (let i = 0; i < values.length; i++) values[i] = ((i * 7919) % 1000) / 256 - 1.95;
    // 700 bags of 0-24 ids: stored keys, and one in ten absent (the initializer's 0.25).
    const splits = [0];
    const ids: bigint[] = [];
    const weights: number[] = [];
    for (let r = 0; r < 700; r++) {
      const len = Number(BigInt.asUintN(64, next()) % 25n);
      for (let j = 0; j < len; j++) {
        const pick = BigInt.asUintN(64, next());
        ids.push(pick % 10n === 0n ? next() : keys[Number(pick % BigInt(count))]!);
        weights.push(0.25 + Number(pick % 7n) / 4);
      }
      splits.push(ids.length);
    }
    const input = RaggedTensor.fromRowSplits(BigInt64Array.from(ids), Int32Array.from(splits));
    const w = RaggedTensor.fromRowSplits(Float32Array.from(weights), Int32Array.from(splits));
    const got: Float32Array[] = [];
    for (const n of [1, 2, 4]) {
      await initDevices(n);
      const v = new sok.DynamicVariable({ dimension: dim, initializer: '0.25', name: 'passes', initCapacity: count });
      try {
        for (let b = 0; b < count; b += 65536) await sok.assign(v, keys.subarray(b, b + 65536), values.subarray(b * dim, Math.min(count, b + 65536) * dim));
        const [sum, mean] = await sok.lookupSparse([v, v], [input, input], { spWeights: [w, w], combiners: ['sum', 'mean'] });
        got.push(new Float32Array([...sum!.data, ...mean!.data]));
      } finally {
        v.dispose();
      }
    }
    const bytes = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    expect(bytes(got[1]!).equals(bytes(got[0]!))).toBe(true);
    expect(bytes(got[2]!).equals(bytes(got[0]!))).toBe(true);
    // Every row's sum and mean written out in float64 from the stored values (0.25 for an absent
    // key; the mean divides by the row's weight sum, an empty row is 0): row 5's sum bit for bit,
    // every element within 1e-6 relative (the native sum may add in another order).
    const index = new Map<bigint, number>();
    keys.forEach((k, i) => index.set(k, i));
    const rows = splits.length - 1;
    let worst = 0;
    for (let r = 0; r < rows; r++) {
      let wsum = 0;
      for (let j = splits[r]!; j < splits[r + 1]!; j++) wsum += Math.fround(weights[j]!);
      for (let c = 0; c < dim; c++) {
        let acc = 0;
        for (let j = splits[r]!; j < splits[r + 1]!; j++) {
          const i = index.get(ids[j]!);
          acc += Math.fround(weights[j]!) * (i === undefined ? 0.25 : values[i * dim + c]!);
        }
        if (r === 5) expect(got[0]![r * dim + c]).toBe(Math.fround(acc));
        const mean = wsum === 0 ? 0 : acc / wsum;
        for (const [have, want] of [[got[0]![r * dim + c]!, acc], [got[0]![(rows + r) * dim + c]!, mean]] as const) {
          worst = Math.max(worst, Math.abs(have - want) / Math.max(1e-3, Math.abs(want)));
        }
      }
    }
    expect(worst).toBeLessThan(1e-6);
  });
});
