import { describe, expect, it } from 'vitest';
import { initializers } from '../../initializers.js';
import { type OptimizerSpec, optimizers } from '../../optimizers.js';
import type { TableOptions } from '../../tableOptions.js';
import { expectClose, INT64_MAX, INT64_MIN, opsFor, snapshot, type SuiteContext } from '../harness.js';
import { type ModelOptimizer, type ModelRow, modelStep } from '../model.js';

interface OptimizerCase {
  title: string;
  spec: () => OptimizerSpec;
  model: ModelOptimizer;
  /** Initial slot values as the model sees them (one number per slot). */
  slotInit: number[];
  /** Slot widths: 'dim' or 1. */
  widths?: ('dim' | 1)[];
  slotInitialValues?: number[];
}

const CASES: OptimizerCase[] = [
  { title: 'sgd', spec: () => optimizers.sgd({ learningRate: 0.1 }), model: { kind: 'sgd', lr: 0.1 }, slotInit: [] },
  {
    title: 'adagrad',
    spec: () => optimizers.adagrad({ learningRate: 0.1, initialAccumulatorValue: 0.1 }),
    model: { kind: 'adagrad', lr: 0.1 },
    slotInit: [0.1],
  },
  {
    title: 'adagrad with slotInitialValues',
    spec: () => optimizers.adagrad({ learningRate: 0.2 }),
    model: { kind: 'adagrad', lr: 0.2 },
    slotInit: [0.5],
    slotInitialValues: [0.5],
  },
  {
    title: 'adagradMomentum',
    spec: () => optimizers.adagradMomentum({ learningRate: 0.1, momentum: 0.9, epsilon: 1e-10, exponent: 2, beta2: 1 }),
    model: { kind: 'adagradMomentum', lr: 0.1, momentum: 0.9, epsilon: 1e-10, exponent: 2, beta2: 1 },
    slotInit: [0, 0],
  },
  {
    title: 'adagradMomentum nesterov, beta2 < 1, exponent 3',
    spec: () => optimizers.adagradMomentum({ learningRate: 0.05, momentum: 0.8, useNesterov: true, beta2: 0.9, exponent: 3, epsilon: 1e-6 }),
    model: { kind: 'adagradMomentum', lr: 0.05, momentum: 0.8, nesterov: true, beta2: 0.9, exponent: 3, epsilon: 1e-6 },
    slotInit: [0, 0],
  },
  {
    title: 'adam (sumInsideSqrt)',
    spec: () => optimizers.adam({ learningRate: 0.01, beta1: 0.9, beta2: 0.999, epsilon: 1e-7, sumInsideSqrt: true }),
    model: { kind: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, epsilon: 1e-7, sumInsideSqrt: true },
    slotInit: [0, 0],
  },
  {
    title: 'adam sumInsideSqrt false',
    spec: () => optimizers.adam({ learningRate: 0.02, beta1: 0.8, beta2: 0.99, epsilon: 1e-3, sumInsideSqrt: false }),
    model: { kind: 'adam', lr: 0.02, beta1: 0.8, beta2: 0.99, epsilon: 1e-3, sumInsideSqrt: false },
    slotInit: [0, 0],
  },
  {
    title: 'ftrl',
    spec: () => optimizers.ftrl({ learningRate: 0.5, initialAccumulatorValue: 0.1 }),
    model: { kind: 'ftrl', lr: 0.5 },
    slotInit: [0.1, 0],
  },
  {
    title: 'ftrl with l1, l2, beta and learningRatePower',
    spec: () => optimizers.ftrl({ learningRate: 0.3, initialAccumulatorValue: 0.2, l1: 0.05, l2: 0.1, beta: 0.2, learningRatePower: -0.7 }),
    model: { kind: 'ftrl', lr: 0.3, l1: 0.05, l2: 0.1, beta: 0.2, lrPower: -0.7 },
    slotInit: [0.2, 0],
  },
  {
    title: 'ftrl with a large l1 (weights become 0)',
    spec: () => optimizers.ftrl({ learningRate: 0.3, l1: 100 }),
    model: { kind: 'ftrl', lr: 0.3, l1: 100 },
    slotInit: [0.1, 0],
  },
  {
    title: 'rowWiseAdagrad',
    spec: () => optimizers.rowWiseAdagrad({ learningRate: 0.1, epsilon: 1e-8, initialAccumulatorValue: 0 }),
    model: { kind: 'rowWiseAdagrad', lr: 0.1, epsilon: 1e-8 },
    slotInit: [0],
    widths: [1],
  },
  {
    title: 'momentum',
    spec: () => optimizers.momentum({ learningRate: 0.1, momentum: 0.9 }),
    model: { kind: 'momentum', lr: 0.1, momentum: 0.9 },
    slotInit: [0],
  },
  {
    title: 'momentum nesterov',
    spec: () => optimizers.momentum({ learningRate: 0.1, momentum: 0.7, useNesterov: true }),
    model: { kind: 'momentum', lr: 0.1, momentum: 0.7, nesterov: true },
    slotInit: [0],
  },
  {
    title: 'adamax',
    spec: () => optimizers.adamax({ learningRate: 0.05, beta1: 0.8, beta2: 0.95, epsilon: 1e-7 }),
    model: { kind: 'adamax', lr: 0.05, beta1: 0.8, beta2: 0.95, epsilon: 1e-7 },
    slotInit: [0, 0],
  },
  {
    title: 'adadelta',
    spec: () => optimizers.adadelta({ learningRate: 1, rho: 0.9, epsilon: 1e-6 }),
    model: { kind: 'adadelta', lr: 1, rho: 0.9, epsilon: 1e-6 },
    slotInit: [0, 0],
  },
  {
    title: 'sgd with clipvalue',
    spec: () => optimizers.sgd({ learningRate: 0.1, clipvalue: 0.5 }),
    model: { kind: 'sgd', lr: 0.1, clipGrad: [-0.5, 0.5] },
    slotInit: [],
  },
  {
    title: 'adagrad with a one-sided clipvalue [-0.2, null]',
    spec: () => optimizers.adagrad({ learningRate: 0.1, clipvalue: [-0.2, null] }),
    model: { kind: 'adagrad', lr: 0.1, clipGrad: [-0.2, Infinity] },
    slotInit: [0.1],
  },
  {
    title: 'sgd with weight decay',
    spec: () => optimizers.sgd({ learningRate: 0.1, weightDecayFactor: 0.3 }),
    model: { kind: 'sgd', lr: 0.1, weightDecay: 0.3 },
    slotInit: [],
  },
  {
    title: 'adagrad with weight decay multiplied by the learning rate',
    spec: () => optimizers.adagrad({ learningRate: 0.5, weightDecayFactor: 0.3, multiplyWeightDecayFactorByLearningRate: true }),
    model: { kind: 'adagrad', lr: 0.5, weightDecay: 0.3, decayTimesLr: true },
    slotInit: [0.1],
  },
  {
    title: 'sgd with clipWeightMin/Max',
    spec: () => optimizers.sgd({ learningRate: 0.5, clipWeightMin: -0.3, clipWeightMax: 0.4 }),
    model: { kind: 'sgd', lr: 0.5, clipWeight: [-0.3, 0.4] },
    slotInit: [],
  },
  {
    title: 'clip, decay and weight clip together (momentum)',
    spec: () => optimizers.momentum({ learningRate: 0.2, momentum: 0.5, clipvalue: [-0.4, 0.3], weightDecayFactor: 0.1, clipWeightMin: -0.6, clipWeightMax: 0.9 }),
    model: { kind: 'momentum', lr: 0.2, momentum: 0.5, clipGrad: [-0.4, 0.3], weightDecay: 0.1, clipWeight: [-0.6, 0.9] },
    slotInit: [0],
  },
  {
    title: 'sgd with a learning-rate function',
    spec: () => optimizers.sgd({ learningRate: (step) => 0.3 / step }),
    model: { kind: 'sgd', lr: (step) => 0.3 / step },
    slotInit: [],
  },
  {
    title: 'adam with a learning-rate function (bias correction)',
    spec: () => optimizers.adam({ learningRate: (t) => (0.01 * Math.sqrt(1 - 0.999 ** t)) / (1 - 0.9 ** t), epsilon: 1e-7 }),
    model: { kind: 'adam', lr: (t) => (0.01 * Math.sqrt(1 - 0.999 ** t)) / (1 - 0.9 ** t), epsilon: 1e-7 },
    slotInit: [0, 0],
  },
];

const DIM = 3;
/** Steps: (row indices, gradient of entry j column c). Repeated rows test deduplication. */
const STEPS: number[][] = [[1, 3, 1], [3, 0], [1, 1, 1, 2], [0, 3]];
const grad = (step: number, j: number, c: number) => (((step * 7 + j * 3 + c * 5) % 11) - 5) / 4;
const staticInit = Array.from({ length: 4 * DIM }, (_, i) => (i % 7) / 4 - 0.5);
const dynInit = [0.3, -0.2, 0.1];
const DYN_KEYS = [INT64_MIN, 7n, -1n, INT64_MAX];

function modelRows(c: OptimizerCase, init: (r: number) => number[]): ModelRow[] {
  const widths = c.widths ?? c.slotInit.map(() => 'dim' as const);
  return [0, 1, 2, 3].map((r) => ({ w: init(r), slots: c.slotInit.map((v, i) => new Array(widths[i] === 1 ? 1 : DIM).fill(v)) }));
}

function runModel(c: OptimizerCase, rows: ModelRow[]): void {
  STEPS.forEach((idx, s) => {
    const sums = new Map<number, number[]>();
    idx.forEach((r, j) => {
      const g = sums.get(r) ?? new Array(DIM).fill(0);
      for (let col = 0; col < DIM; col++) g[col] += grad(s + 1, j, col);
      sums.set(r, g);
    });
    for (const [r, g] of sums) modelStep(c.model, rows[r]!, g, s + 1);
  });
}

/** Every optimizer and common option against an independent float64 model, on static and dynamic tables. */
export function optimizersSection(ctx: SuiteContext): void {
  for (const form of ctx.forms) {
    const ops = opsFor(form);
    describe(`optimizers, ${form} form`, () => {
      for (const c of CASES) {
        const tableOpts = (spec: OptimizerSpec): Partial<TableOptions> => ({
          optimizer: spec,
          ...(c.slotInitialValues ? { slotInitialValues: c.slotInitialValues } : {}),
        });

        it(`${c.title}: static table, duplicate keys summed, 4 steps`, async () => {
          const spec = c.spec();
          const t = ctx.make({ kind: 'static', dim: DIM, vocabularySize: 4, initializer: initializers.fromArray(staticInit), ...tableOpts(spec) });
          for (let s = 0; s < STEPS.length; s++) {
            const idx = STEPS[s]!;
            const g = idx.flatMap((_, j) => [0, 1, 2].map((col) => grad(s + 1, j, col)));
            await ops.applyGradients(t, idx, g, spec, s + 1);
          }
          const rows = modelRows(c, (r) => staticInit.slice(r * DIM, (r + 1) * DIM));
          runModel(c, rows);
          const state = await snapshot(t);
          rows.forEach((row, r) => {
            const got = state.get(String(r))!;
            expectClose(got.value, row.w, `row ${r} weights`);
            row.slots.forEach((s, i) => expectClose(got.slots[i]!, s, `row ${r} slot ${spec.slots.names[i]}`));
          });
        });

        it(`${c.title}: dynamic table inserts missing keys first`, async () => {
          const spec = c.spec();
          const t = ctx.make({ dim: DIM, initializer: initializers.row(dynInit), ...tableOpts(spec) });
          await ops.upsert(t, [DYN_KEYS[2]!], [1, -1, 0.5]);
          for (let s = 0; s < STEPS.length; s++) {
            const idx = STEPS[s]!;
            const g = idx.flatMap((_, j) => [0, 1, 2].map((col) => grad(s + 1, j, col)));
            await ops.applyGradients(t, idx.map((r) => DYN_KEYS[r]!), g, spec, s + 1);
          }
          const rows = modelRows(c, (r) => (r === 2 ? [1, -1, 0.5] : dynInit.slice()));
          runModel(c, rows);
          const state = await snapshot(t);
          expect(t.size()).toBe(4);
          rows.forEach((row, r) => {
            const got = state.get(String(DYN_KEYS[r]))!;
            expect(got, `key ${DYN_KEYS[r]} present`).toBeDefined();
            expectClose(got.value, row.w, `key ${DYN_KEYS[r]} weights`);
            row.slots.forEach((s, i) => expectClose(got.slots[i]!, s, `key ${DYN_KEYS[r]} slot ${spec.slots.names[i]}`));
          });
        });
      }

      it('the learning-rate function is evaluated once per step with that step', async () => {
        const seen: number[] = [];
        const spec = optimizers.sgd({ learningRate: (step) => (seen.push(step), 0.1) });
        const t = ctx.make({ kind: 'static', dim: 1, vocabularySize: 2 });
        await ops.applyGradients(t, [0, 1, 0], [1, 2, 3], spec, 5);
        await ops.applyGradients(t, [1], [1], spec, 6);
        expect(seen).toEqual([5, 6]);
        expectClose((await ops.find(t, [0, 1])).values, [-0.4, -0.3], 'weights');
      });

      it('an empty gradient batch changes nothing', async () => {
        const spec = optimizers.adagrad({ learningRate: 0.1 });
        const t = ctx.make({ dim: 2, optimizer: spec });
        await ops.upsert(t, [1], [1, 2]);
        const before = await snapshot(t);
        await ops.applyGradients(t, [], [], spec, 1);
        const after = await snapshot(t);
        expect(after.get('1')!.value).toEqual(before.get('1')!.value);
        expect(t.size()).toBe(1);
      });
    });
  }
}
