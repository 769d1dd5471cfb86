// One (then a second) optimizer step of each of the seven optimizers against a float64
// reimplementation of its TF/Keras update written here, through lookupSparse + tape.
import { RaggedTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, firstMismatch, initDevices, rowsByKey, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});
afterAll(() => sok.shutdown());

const DIM = 4;
const KEYS = [5n, -3n, 2n ** 40n, 7n, 11n];
const IDS = [[5n, -3n, 5n], [2n ** 40n], [], [7n, -3n]];
const WEIGHTS = [[0.5, 2, 1.5], [3], [], [1, 0.25]];

/** Deterministic pseudo-random floats in [-1, 1) (float32). */
function floats(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32) * 2 - 1;
  }
  return out;
}

/** Per-key summed gradient (float64) of pooled grads `g` [rows * DIM] through `combiner` with WEIGHTS. */
function keyGrads(g: Float32Array, combiner: 'sum' | 'mean'): Map<bigint, number[]> {
  const out = new Map<bigint, number[]>();
  IDS.forEach((row, r) => {
    const denom = combiner === 'sum' ? 1 : WEIGHTS[r]!.reduce((a, b) => a + Math.fround(b), 0);
    row.forEach((k, j) => {
      const acc = out.get(k) ?? Array(DIM).fill(0);
      for (let c = 0; c < DIM; c++) acc[c] += (Math.fround(WEIGHTS[r]![j]!) / denom) * g[r * DIM + c]!;
      out.set(k, acc);
    });
  });
  return out;
}

type Slots = number[][];
interface Case {
  name: string;
  make: () => sok.SokOptimizer;
  slots: number[];
  /** float64 update of one element: returns the new w, mutating s (the element's slots) */
  update: (w: number, g: number, s: number[], t: number) => number;
}

const lr = 0.1;
const CASES: Case[] = [
  { name: 'SGD', make: () => new sok.optimizers.SGD({ learningRate: lr }), slots: [], update: (w, g) => w - lr * g },
  {
    name: 'Momentum',
    make: () => new sok.optimizers.Momentum({ learningRate: lr, momentum: 0.9 }),
    slots: [0],
    update: (w, g, s) => {
      s[0] = 0.9 * s[0]! + g;
      return w - lr * s[0]!;
    },
  },
  {
    name: 'Adagrad',
    make: () => new sok.optimizers.Adagrad({ learningRate: lr, initialAccumulatorValue: 0.1 }),
    slots: [0.1],
    update: (w, g, s) => {
      s[0] = s[0]! + g * g;
      return w - (lr * g) / Math.sqrt(s[0]!);
    },
  },
  {
    name: 'Adam',
    make: () => new sok.optimizers.Adam({ learningRate: lr, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 }),
    slots: [0, 0],
    update: (w, g, s, t) => {
      s[0] = 0.9 * s[0]! + 0.1 * g;
      s[1] = 0.999 * s[1]! + 0.001 * g * g;
      const lrT = (lr * Math.sqrt(1 - 0.999 ** t)) / (1 - 0.9 ** t);
      return w - (lrT * s[0]!) / (Math.sqrt(s[1]!) + 1e-7);
    },
  },
  {
    name: 'Adamax',
    make: () => new sok.optimizers.Adamax({ learningRate: lr }),
    slots: [0, 0],
    update: (w, g, s, t) => {
      s[0] = 0.9 * s[0]! + 0.1 * g;
      s[1] = Math.max(0.999 * s[1]!, Math.abs(g));
      return w - ((lr / (1 - 0.9 ** t)) * s[0]!) / (s[1]! + 1e-7);
    },
  },
  {
    name: 'Adadelta',
    make: () => new sok.optimizers.Adadelta({ learningRate: 1.0, rho: 0.95, epsilon: 1e-6 }),
    slots: [0, 0],
    update: (w, g, s) => {
      s[0] = 0.95 * s[0]! + 0.05 * g * g;
      const d = (Math.sqrt(s[1]! + 1e-6) / Math.sqrt(s[0]! + 1e-6)) * g;
      s[1] = 0.95 * s[1]! + 0.05 * d * d;
      return w - 1.0 * d;
    },
  },
  {
    name: 'Ftrl',
    make: () => new sok.optimizers.Ftrl({ learningRate: lr, l1RegularizationStrength: 0.001, l2RegularizationStrength: 0.01, beta: 0.1 }),
    slots: [0.1, 0],
    update: (w, g, s) => {
      const acc = s[0]!;
      const accNew = acc + g * g;
      const sigma = (Math.sqrt(accNew) - Math.sqrt(acc)) / lr;
      s[1] = s[1]! + g - sigma * w;
      const l = s[1]!;
      const quad = Math.sqrt(accNew) / lr + 0.1 / lr + 2 * 0.01;
      s[0] = accNew;
      return Math.abs(l) <= 0.001 ? 0 : -(l - Math.sign(l) * 0.001) / quad;
    },
  },
];

describe.each([1, 2])('optimizers on %i devices vs a float64 reimplementation', (n) => {
  it.each(CASES.map((c) => [c.name, c] as const))('%s: two steps', async (_name, c) => {
    await initDevices(n);
    const v = new sok.DynamicVariable({ dimension: DIM, initializer: 'zeros' });
    const init = floats(KEYS.length * DIM, 7);
    await sok.assign(v, KEYS, init);
    const expected = new Map(KEYS.map((k, i) => [k, Array.from(init.subarray(i * DIM, (i + 1) * DIM))]));
    const slots = new Map<bigint, Slots>(KEYS.map((k) => [k, Array.from({ length: DIM }, () => c.slots.slice())]));
    const opt = new sok.OptimizerWrapper(c.make());
    const ids = RaggedTensor.fromNestedArray(IDS);
    const weights = RaggedTensor.fromNestedArray(WEIGHTS, { dtype: 'float32' });
    for (const [t, combiner] of [[1, 'mean'], [2, 'sum']] as const) {
      const tape = new sok.GradientTape();
      await sok.lookupSparse([v], [ids], { spWeights: [weights], combiners: [combiner], tape });
      const g = floats(IDS.length * DIM, 100 + t);
      await opt.applyGradients(tape.gradient([new Tensor(g, [IDS.length, DIM])]));
      for (const [k, gk] of keyGrads(g, combiner)) {
        const w = expected.get(k)!;
        for (let col = 0; col < DIM; col++) w[col] = c.update(w[col]!, gk[col]!, slots.get(k)![col]!, t);
      }
      expect(opt.iterations).toBe(t);
      const got = await rowsByKey(v);
      expect([...got.keys()].sort()).toEqual([...KEYS].sort());
      for (const k of KEYS) {
        const bad = firstMismatch(got.get(k)!, expected.get(k)!, 1e-5);
        expect(bad, `${c.name} step ${t} key ${k}: ${got.get(k)} vs ${expected.get(k)}`).toBe(-1);
      }
    }
    // Key 11 was never looked up: untouched.
    expect((await rowsByKey(v)).get(11n)).toEqual(Array.from(init.subarray(4 * DIM, 5 * DIM)));
  });
});

describe('applyGradients([])', () => {
  it('is INVALID_ARGUMENT "No gradients provided for any variable" (Keras): no step counted, nothing changes', async () => {
    await initDevices(2);
    const v = new sok.DynamicVariable({ dimension: 2, initializer: '1' });
    const opt = new sok.OptimizerWrapper(new sok.optimizers.Adam({ learningRate: 0.5 }));
    const tape = new sok.GradientTape();
    await sok.embeddingLookup(v, [1n, 2n], { tape });
    await opt.applyGradients(tape.gradient([new Float32Array([1, 1, 1, 1])]));
    expect(opt.iterations).toBe(1);
    const rows = await rowsByKey(v);
    const score = sok.currentScore();
    const e = await opt.applyGradients([]).then(() => null, (x: unknown) => x as { code?: string; message: string });
    expect(e?.code).toBe('INVALID_ARGUMENT');
    expect(e?.message).toContain('No gradients provided for any variable');
    expect(opt.iterations).toBe(1);
    expect(sok.currentScore()).toBe(score);
    expect(await rowsByKey(v)).toEqual(rows);
  });
});

describe('option errors name the option as the user wrote it (not core\'s name for it)', () => {
  it('FTRL l1/l2RegularizationStrength and SGD nesterov', async () => {
    await expectError(() => new sok.optimizers.FTRL({ l1RegularizationStrength: -1 }), 'INVALID_ARGUMENT', 'Expected l1RegularizationStrength to be', 'received -1');
    await expectError(() => new sok.optimizers.Ftrl({ l2RegularizationStrength: Number.NaN }), 'INVALID_ARGUMENT', 'Expected l2RegularizationStrength to be', 'received NaN');
    await expectError(() => new sok.optimizers.SGD({ nesterov: 'x' as never }), 'INVALID_TYPE', 'Expected nesterov to be a boolean', 'received "x"');
    // and the values still reach the update (core's l1, l2, useNesterov)
    const f = new sok.optimizers.FTRL({ l1RegularizationStrength: 0.25, l2RegularizationStrength: 0.5 });
    expect([f.spec.hyper.l1, f.spec.hyper.l2]).toEqual([0.25, 0.5]);
    expect(new sok.optimizers.SGD({ momentum: 0.5, nesterov: true }).spec.hyper.useNesterov).toBe(true);
  });
});
