// review32c #6: OptimizerWrapper.applyGradients checks a tape gradient against the variable it is
// paired with before it binds slots, stamps rows or counts the step.
import { Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, initDevices, rowsByKey, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});
afterAll(() => sok.shutdown());

const sorted = (m: Map<bigint, number[]>) => [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));

async function observe(vars: sok.SokVariable[], opt: sok.OptimizerWrapper) {
  return {
    rows: await Promise.all(vars.map(async (v) => sorted(await rowsByKey(v)))),
    sizes: await Promise.all(vars.map((v) => v.size())),
    bound: vars.map((v) => v.boundOptimizer ?? null),
    slots: vars.map((v) => [...v.slotLayout.names]),
    iterations: opt.iterations,
    score: sok.currentScore(),
  };
}

/** A tape gradient of `v` for ids 0 and 1 (one id per row), every gradient value 1. */
async function tapeGradient(v: sok.SokVariable) {
  const tape = new sok.GradientTape();
  await sok.embeddingLookup(v, v.kind === 'static' ? [0, 1] : [0n, 1n], { tape });
  const pairs = tape.gradient([new Tensor(new Float32Array(2 * v.dimension).fill(1), [2, v.dimension])]);
  return pairs[0]![0];
}

describe('OptimizerWrapper.applyGradients with a tape gradient of another variable', () => {
  for (const devices of [1, 2]) {
    it(`refuses one of another dimension naming gradsAndVars[i][0], changing nothing (${devices} device(s))`, async () => {
      await initDevices(devices);
      const v = new sok.DynamicVariable({ dimension: 3, initializer: '1', name: 'v3' });
      const w = new sok.DynamicVariable({ dimension: 2, initializer: '1', name: 'w2' });
      const u = new sok.DynamicVariable({ dimension: 2, initializer: '1', name: 'u2' });
      await sok.assign(w, [0n, 1n], Float32Array.of(5, 5, 6, 6));
      const g = await tapeGradient(v);
      const gu = await tapeGradient(u);
      const opt = new sok.OptimizerWrapper(new sok.optimizers.Adagrad({ learningRate: 1 }));
      const before = await observe([v, w, u], opt);
      await expectError(opt.applyGradients([[gu, u], [g, w]]), 'SHAPE_MISMATCH', 'gradsAndVars[1][0]', '[n, 2]', '[2, 3]');
      expect(await observe([v, w, u], opt)).toEqual(before);
      // w was never bound: another optimizer may train it
      const sgd = new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: 1 }));
      await sgd.applyGradients([[new sok.IndexedSlices(Float32Array.of(1, 1), [0n]), w]]);
      expect((await rowsByKey(w)).get(0n)).toEqual([4, 4]);
    });
  }

  it('applies one of the same dimension to the variable it is paired with, at its ids', async () => {
    await initDevices(2);
    const v = new sok.DynamicVariable({ dimension: 2, initializer: '1', name: 'src' });
    const x = new sok.Variable({ shape: [4, 2], initializer: '0', name: 'dst' });
    const g = await tapeGradient(v);
    const opt = new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: 0.5 }));
    await opt.applyGradients([[g, x]]);
    // rows 0 and 1 of x: 0 - 0.5 * 1; rows 2 and 3 untouched; v untouched.
    expect(sorted(await rowsByKey(x))).toEqual([
      [0n, [-0.5, -0.5]],
      [1n, [-0.5, -0.5]],
      [2n, [0, 0]],
      [3n, [0, 0]],
    ]);
    expect(sorted(await rowsByKey(v))).toEqual([
      [0n, [1, 1]],
      [1n, [1, 1]],
    ]);
    expect(opt.iterations).toBe(1);
  });
});
