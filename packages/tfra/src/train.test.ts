import { beforeAll, describe, expect, it } from 'vitest';
import * as de from './index.js';
import { BATCHES, DIM, expectClose, gradOf, INIT, type Kind, optimizerFor, PlainModel } from '../test/plainModel.js';
import { expectError, rowsOf, uniqueName, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});

describe('training matches a plain-array reimplementation', () => {
  for (const kind of ['sgd', 'adagrad', 'adam'] as Kind[]) {
    for (const bpV2 of [false, true]) {
      for (const via of bpV2 ? (['variable', 'optimizer'] as const) : (['none'] as const)) {
        it(`${kind}${bpV2 ? ` with bpV2 set on the ${via}` : ''}`, async () => {
          const lr = kind === 'sgd' ? 0.1 : 0.05;
          const v = new de.Variable({ dim: DIM, initializer: INIT, name: uniqueName(kind), devices: ['a', 'b'], bpV2: via === 'variable' });
          await v.upsert([100n], [5, 5, 5]); // never trained: must stay as is
          const opt = de.DynamicEmbeddingOptimizer(optimizerFor(kind, lr), { bpV2: via === 'optimizer' });
          const ref = new PlainModel(kind, lr);
          for (const ids of BATCHES) {
            const e = await de.embeddingLookup(v, ids, { name: 'emb' });
            const got = rowsOf(e.data, DIM);
            expectClose(got, ref.lookup(ids), 1e-6, 'lookup');
            const grads = gradOf(ids, got);
            await opt.applyGradients([[Float32Array.from(grads.flat()), v.getTrainableByName('emb') as de.ShadowVariable]]);
            ref.apply(ids, gradOf(ids, ref.lookup(ids)));
          }
          expect(opt.iterations).toBe(BATCHES.length);
          const [keys, values] = await v.export();
          const exported = new Map(Array.from(keys as BigInt64Array, (k, i) => [k, rowsOf(values.data, DIM)[i]!]));
          expect([...exported.keys()].sort()).toEqual([...ref.rows.keys(), 100n].sort());
          expect(exported.get(100n)).toEqual([5, 5, 5]);
          for (const [k, r] of ref.rows) expectClose([exported.get(k)!], [r.w], 1e-6, `row ${k}`);
          const slots = v.getSlotVariables(opt);
          expect(slots.length).toBe(kind === 'sgd' ? 0 : kind === 'adagrad' ? 1 : 2);
          slots.forEach((slot, j) => {
            expect(slot).toBeInstanceOf(de.Variable);
            expect(slot.name).toBe(`${v.name}/${opt.name}/${opt.slotNames[j]}`);
          });
          for (const [j, slot] of slots.entries()) {
            const ids = [...ref.rows.keys()];
            const got = rowsOf((await slot.lookup(ids)).data, DIM);
            expectClose(got, ids.map((k) => ref.rows.get(k)!.s[j]!), 1e-6, `slot ${slot.name}`);
          }
        });
      }
    }
  }

  it('a Tensor gradient of the lookup shape works; a wrong shape is refused and nothing changes', async () => {
    const v = new de.Variable({ dim: 2, name: uniqueName(), initializer: 1 });
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 0.5 }));
    const ids = new de.Tensor(new BigInt64Array([1n, 2n, 1n, 3n]), [2, 2]);
    const [, tw] = await de.embeddingLookup(v, ids, { name: 't', returnTrainable: true });
    await expectError(opt.applyGradients([[new de.Tensor(new Float32Array(8), [4, 2]), tw]]), 'SHAPE_MISMATCH', 'Expected shape', '[2, 2, 2]');
    await expectError(opt.applyGradients([[new Float32Array(6), tw]]), 'SHAPE_MISMATCH', 'gradsAndVars[0][0]');
    await expectError(opt.applyGradients([[new Float32Array(8), v as unknown as de.ShadowVariable]]), 'INVALID_TYPE', 'gradsAndVars[0][1]');
    expect(await v.size()).toBe(0);
    expect(opt.iterations).toBe(0);
    const g = new de.Tensor(Float32Array.from([1, 1, 2, 2, 1, 1, 4, 4]), [2, 2, 2]);
    await opt.applyGradients([[g, tw]]);
    // key 1 appears twice: grads summed (2), w = 1 - 0.5 * 2 = 0
    expect(rowsOf((await v.lookup([1n, 2n, 3n])).data, 2)).toEqual([[0, 0], [0, 0], [-1, -1]]);
  });

  it('applyGradients([]) is INVALID_ARGUMENT "No gradients provided for any variable" (Keras): no step counted, nothing changes', async () => {
    const v = new de.Variable({ dim: 2, name: uniqueName(), initializer: 1 });
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam({ learningRate: 0.5 }));
    const [, tw] = await de.embeddingLookup(v, [1n], { name: 'e', returnTrainable: true });
    await opt.applyGradients([[[1, 1], tw]]);
    expect(opt.iterations).toBe(1);
    const rows = rowsOf((await v.lookup([1n])).data, 2);
    await expectError(opt.applyGradients([]), 'INVALID_ARGUMENT', 'No gradients provided for any variable', 'gradsAndVars');
    expect(opt.iterations).toBe(1);
    expect(rowsOf((await v.lookup([1n])).data, 2)).toEqual(rows);
    // The next step is step 2 (Adam's bias correction sees t = 2), as if the empty call never happened.
    await opt.applyGradients([[[1, 1], tw]]);
    expect(opt.iterations).toBe(2);
  });

  it('bpV2 adds deltas to the current row; without it the looked-up row is updated and set', async () => {
    for (const bpV2 of [false, true]) {
      const v = new de.Variable({ dim: 1, name: uniqueName(), bpV2 });
      await v.upsert([1n], [10]);
      const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
      const [, tw] = await de.embeddingLookup(v, [1n, 2n], { name: 'x', returnTrainable: true });
      // another writer changes key 1 and inserts key 2 between lookup and update
      await v.upsert([1n, 2n], [100, 50]);
      await opt.applyGradients([[[1, 2], tw]]);
      const out = Array.from((await v.lookup([1n, 2n])).data);
      // bpV2: 1 existed -> 100 + (9 - 10); 2 did not exist but is present now -> untouched
      // set: 1 -> f(10) = 9; 2 -> f(0) = -2
      expect(out).toEqual(bpV2 ? [99, 50] : [9, -2]);
    }
  });

  it('refuses to train unwrapped, in inference mode, without a lookup, and with a second optimizer', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName() });
    const [, tw] = await de.embeddingLookup(v, [1n], { name: 'x', returnTrainable: true });
    await expectError(new de.optimizers.SGD().applyGradients([[[1], tw]]), 'FAILED_PRECONDITION', 'DynamicEmbeddingOptimizer');
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam());
    de.enableInferenceMode();
    try {
      expect(de.getModelMode()).toBe('inference');
      await expectError(opt.applyGradients([[[1], tw]]), 'FAILED_PRECONDITION', 'inference');
      // lookups are read-only: nothing recorded on the trainable
      await de.embeddingLookup(v, [7n, 8n], { name: 'x' });
      expect(Array.from(tw.ids as BigInt64Array)).toEqual([1n]);
    } finally {
      de.enableTrainMode();
    }
    const fresh = new de.ShadowVariable(v, 'never');
    expect(() => new de.ShadowVariable({} as de.AnyVariable, 'x')).toThrowError(/Expected params to be a de.Variable/);
    expect(() => new de.ShadowVariable(v, '')).toThrowError(/Expected name to be a non-empty string/);
    await expectError(opt.applyGradients([[[1], fresh]]), 'FAILED_PRECONDITION', 'no recorded lookup');
    await opt.applyGradients([[[1], tw]]);
    const other = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam());
    await expectError(other.applyGradients([[[1], tw]]), 'FAILED_PRECONDITION', 'one optimizer');
    expect(() => de.DynamicEmbeddingOptimizer({} as de.Optimizer)).toThrowError(/optimizer/);
  });

  it('a pair whose variable is bound to another optimizer rejects the whole call: nothing changes', async () => {
    const a = new de.Variable({ dim: 1, name: uniqueName(), initializer: 1 });
    const b = new de.Variable({ dim: 1, name: uniqueName(), initializer: 1 });
    const other = de.DynamicEmbeddingOptimizer(new de.optimizers.Adagrad());
    const [, tb] = await de.embeddingLookup(b, [5n], { name: 'b', returnTrainable: true });
    await other.applyGradients([[[1], tb]]);
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
    const [, ta] = await de.embeddingLookup(a, [1n, 2n], { name: 'a', returnTrainable: true });
    await de.embeddingLookup(b, [5n], { name: 'b' });
    await expectError(opt.applyGradients([[[1, 1], ta], [[1], tb]]), 'FAILED_PRECONDITION', 'one optimizer');
    expect(await a.size()).toBe(0); // a was not trained either
    expect(opt.iterations).toBe(0);
    await opt.applyGradients([[[1, 1], ta]]);
    expect(Array.from((await a.lookup([1n, 2n])).data)).toEqual([0, 0]);
  });

  it('a variable with trainable: false is not updated', async () => {
    const v = new de.Variable({ dim: 1, name: uniqueName(), trainable: false });
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD());
    const [, tw] = await de.embeddingLookup(v, [1n], { name: 'x', returnTrainable: true });
    await opt.applyGradients([[[1], tw]]);
    expect(await v.size()).toBe(0);
  });
});

describe('optimizers', () => {
  it('have the Keras defaults and slot names', () => {
    const cases: [de.Optimizer, number, string[]][] = [
      [new de.optimizers.SGD(), 0.01, []],
      [new de.optimizers.SGD({ momentum: 0.9 }), 0.01, ['momentum']],
      [new de.optimizers.Momentum({ momentum: 0.9 }), 0.01, ['momentum']],
      [new de.optimizers.Adagrad(), 0.001, ['accumulator']],
      [new de.optimizers.Adam(), 0.001, ['m', 'v']],
      [new de.optimizers.FTRL(), 0.001, ['accumulator', 'linear']],
      [new de.optimizers.Adamax(), 0.001, ['m', 'v']],
      [new de.optimizers.Adadelta(), 0.001, ['accum_grad', 'accum_var']],
    ];
    for (const [o, lr, slots] of cases) {
      expect(o.learningRate).toBe(lr);
      expect(o.getSlotNames()).toEqual(slots);
      expect(o.dynamicEmbedding).toBe(false);
    }
    const adam = new de.optimizers.Adam();
    expect([adam.beta1, adam.beta2, adam.epsilon]).toEqual([0.9, 0.999, 1e-7]);
    const ftrl = new de.optimizers.FTRL();
    expect([ftrl.learningRatePower, ftrl.initialAccumulatorValue, ftrl.l1RegularizationStrength, ftrl.beta]).toEqual([-0.5, 0.1, 0, 0]);
    expect(new de.optimizers.Adadelta().rho).toBe(0.95);
    const w = de.DynamicEmbeddingOptimizer(adam, { bpV2: true, synchronous: true });
    expect(w).toBe(adam);
    expect([w.dynamicEmbedding, w.bpV2, w.synchronous]).toEqual([true, true, true]);
  });

  it('reject bad options', () => {
    expect(() => new de.optimizers.Adam({ learningRate: -1 })).toThrowError(/learningRate/);
    expect(() => new de.optimizers.Adam({ beta1: 1.5 }).spec).toThrowError(/beta1/);
    expect(() => new de.optimizers.SGD({ lr: 1 } as de.SGDOptions)).toThrowError(/options.lr/);
    expect(() => de.DynamicEmbeddingOptimizer(new de.optimizers.SGD(), { bpV2: 'yes' } as unknown as { bpV2: boolean })).toThrowError(/bpV2/);
  });

  it('reject bad hyperparameters in the constructor, not at the first training step', () => {
    const cases: [() => de.Optimizer, string][] = [
      [() => new de.optimizers.Adam({ beta1: 1.5 }), 'beta1'],
      [() => new de.optimizers.Adam({ beta2: -0.1 }), 'beta2'],
      [() => new de.optimizers.Adam({ epsilon: -1 }), 'epsilon'],
      [() => new de.optimizers.Adamax({ beta1: 1 }), 'beta1'],
      [() => new de.optimizers.Adagrad({ initialAccumulatorValue: -1 }), 'initialAccumulatorValue'],
      [() => new de.optimizers.FTRL({ learningRatePower: 1 }), 'learningRatePower'],
      [() => new de.optimizers.FTRL({ l1RegularizationStrength: -1 }), 'l1'],
      [() => new de.optimizers.FTRL({ initialAccumulatorValue: 0 }), 'initialAccumulatorValue'],
      [() => new de.optimizers.Adadelta({ rho: 2 }), 'rho'],
    ];
    for (const [make, argument] of cases) {
      let err: (Error & { code?: string }) | undefined;
      try {
        make();
      } catch (e) {
        err = e as Error & { code?: string };
      }
      expect(err, argument).toBeInstanceOf(Error);
      expect(err!.code, argument).toBe('INVALID_ARGUMENT');
      expect(err!.message, argument).toContain(argument);
    }
  });

  it('momentum, FTRL, Adamax and Adadelta train one step as their formulas say', async () => {
    const g = 0.5;
    const w0 = 1;
    const lr = 0.1;
    const cases: [de.Optimizer, number][] = [
      // m = g; w -= lr*m
      [new de.optimizers.Momentum({ learningRate: lr, momentum: 0.9 }), w0 - lr * g],
      // acc' = 0.1 + g²; sigma = (sqrt(acc') - sqrt(0.1))/lr; linear = g - sigma*w; w = -linear / (sqrt(acc')/lr)
      [
        new de.optimizers.FTRL({ learningRate: lr }),
        (() => {
          const acc = 0.1 + g * g;
          const sigma = (Math.sqrt(acc) - Math.sqrt(0.1)) / lr;
          const linear = g - sigma * w0;
          return -linear / (Math.sqrt(acc) / lr);
        })(),
      ],
      // m = 0.1 g; u = |g|; w -= lr/(1-0.9) * m/(u+eps)
      [new de.optimizers.Adamax({ learningRate: lr }), w0 - (lr / 0.1) * ((0.1 * g) / (g + 1e-7))],
      // a = 0.05 g²; d = sqrt(0 + eps)/sqrt(a + eps) * g; w -= lr*d
      [new de.optimizers.Adadelta({ learningRate: lr }), w0 - lr * ((Math.sqrt(1e-7) / Math.sqrt(0.05 * g * g + 1e-7)) * g)],
    ];
    for (const [o, expected] of cases) {
      const v = new de.Variable({ dim: 1, name: uniqueName(), initializer: w0 });
      const opt = de.DynamicEmbeddingOptimizer(o);
      const [, tw] = await de.embeddingLookup(v, [3n], { name: 'x', returnTrainable: true });
      await opt.applyGradients([[[g], tw]]);
      expect((await v.lookup([3n])).data[0]!, o.name).toBeCloseTo(expected, 5);
    }
  });
});
