import { describe, expect, it } from 'vitest';
import {
  createOptimizer,
  ErrorCodes,
  isOptimizerSpec,
  optimizers,
  type OptimizerKind,
  resolveOptimizer,
  sameSlotLayout,
  slotFloatsPerRow,
  slotLayoutOf,
} from '@embedstack/core';
import { throwsCode } from './util.js';

const KINDS: OptimizerKind[] = ['sgd', 'adagrad', 'adagradMomentum', 'adam', 'ftrl', 'rowWiseAdagrad', 'momentum', 'adamax', 'adadelta'];

describe('optimizer specs: defaults', () => {
  it('default learning rates per kind', () => {
    const lr = Object.fromEntries(KINDS.map((k) => [k, optimizers[k]().learningRate]));
    expect(lr).toEqual({
      sgd: 0.01,
      adagrad: 0.001,
      adagradMomentum: 0.001,
      adam: 0.001,
      ftrl: 0.001,
      rowWiseAdagrad: 0.01,
      momentum: 0.01,
      adamax: 0.001,
      adadelta: 0.001,
    });
  });

  it('default hyper-parameters and common options', () => {
    const a = optimizers.adam();
    expect(a.hyper).toMatchObject({ beta1: 0.9, beta2: 0.999, epsilon: 1e-7, sumInsideSqrt: true, lazyAdam: true });
    expect(optimizers.ftrl().hyper).toMatchObject({ initialAccumulatorValue: 0.1, l1: 0, l2: 0, beta: 0, learningRatePower: -0.5 });
    expect(optimizers.adagradMomentum().hyper).toMatchObject({ epsilon: 1e-10, beta2: 1, exponent: 2, momentum: 0, useNesterov: false });
    expect(optimizers.rowWiseAdagrad().hyper).toMatchObject({ epsilon: 1e-8, initialAccumulatorValue: 0 });
    expect(optimizers.adadelta().hyper).toMatchObject({ rho: 0.95, epsilon: 1e-7 });
    expect(a.clipWeightMin).toBe(-Infinity);
    expect(a.clipWeightMax).toBe(Infinity);
    expect(a.clipGradMin).toBe(-Infinity);
    expect(a.clipGradMax).toBe(Infinity);
    expect(a.weightDecayFactor).toBe(0);
    expect(a.multiplyWeightDecayFactorByLearningRate).toBe(false);
    expect(a.useGradientAccumulation).toBe(true);
    expect(Object.isFrozen(a)).toBe(true);
    expect(Object.isFrozen(a.hyper)).toBe(true);
  });

  it('slot layouts: names, widths and initial values', () => {
    const layout = (k: OptimizerKind) => {
      const s = optimizers[k]().slots;
      return [s.names, s.widths, s.initial];
    };
    expect(layout('sgd')).toEqual([[], [], []]);
    expect(layout('adagrad')).toEqual([['accumulators'], ['dim'], [0.1]]);
    expect(layout('adagradMomentum')).toEqual([['accumulators', 'momenta'], ['dim', 'dim'], [0, 0]]);
    expect(layout('adam')).toEqual([['momenta', 'velocities'], ['dim', 'dim'], [0, 0]]);
    expect(layout('ftrl')).toEqual([['accumulators', 'linears'], ['dim', 'dim'], [0.1, 0]]);
    expect(layout('rowWiseAdagrad')).toEqual([['accumulators'], [1], [0]]);
    expect(layout('momentum')).toEqual([['momenta'], ['dim'], [0]]);
    expect(layout('adamax')).toEqual([['momenta', 'norms'], ['dim', 'dim'], [0, 0]]);
    expect(layout('adadelta')).toEqual([['accumulators', 'accumulatorUpdates'], ['dim', 'dim'], [0, 0]]);
    expect(optimizers.adagrad({ initialAccumulatorValue: 0.5 }).slots.initial).toEqual([0.5]);
    expect(slotFloatsPerRow(optimizers.ftrl().slots, 8)).toBe(16);
    expect(slotFloatsPerRow(optimizers.rowWiseAdagrad().slots, 8)).toBe(1);
    expect(slotLayoutOf('momentum', optimizers.momentum().hyper).names).toEqual(['momenta']);
    expect(sameSlotLayout(optimizers.adagrad().slots, optimizers.adagrad({ initialAccumulatorValue: 3 }).slots)).toBe(true);
    expect(sameSlotLayout(optimizers.adagrad().slots, optimizers.rowWiseAdagrad().slots)).toBe(false);
    expect(sameSlotLayout(optimizers.adam().slots, optimizers.adamax().slots)).toBe(false);
  });

  it('options are taken; null means the default', () => {
    const o = optimizers.adam({ learningRate: 0.5, beta1: 0.5, epsilon: null as never, clipvalue: [null, 2], clipWeightMin: null, weightDecayFactor: null });
    expect(o.learningRate).toBe(0.5);
    expect(o.hyper.beta1).toBe(0.5);
    expect(o.hyper.epsilon).toBe(1e-7);
    expect(o.clipGradMin).toBe(-Infinity);
    expect(o.clipGradMax).toBe(2);
    expect(o.clipWeightMin).toBe(-Infinity);
    const c = optimizers.sgd({ clipvalue: 3 });
    expect([c.clipGradMin, c.clipGradMax]).toEqual([-3, 3]);
    const fn = (s: number) => 1 / s;
    expect(optimizers.sgd({ learningRate: fn }).learningRate).toBe(fn);
    expect(isOptimizerSpec(o)).toBe(true);
    expect(isOptimizerSpec({ kind: 'sgd' })).toBe(false);
    expect(isOptimizerSpec({ kind: 'nope', slots: {} })).toBe(false);
    expect(isOptimizerSpec(null)).toBe(false);
  });
});

describe('optimizer specs: every validation error names the option', () => {
  const cases: [string, () => unknown, string, string?][] = [
    ['unknown kind', () => createOptimizer('rmsprop' as never), 'kind'],
    ['options not an object', () => createOptimizer('sgd', 5 as never), 'options', ErrorCodes.INVALID_TYPE],
    ['negative learning rate', () => optimizers.sgd({ learningRate: -1 }), 'learningRate'],
    ['NaN learning rate', () => optimizers.sgd({ learningRate: NaN }), 'learningRate'],
    ['string learning rate', () => optimizers.sgd({ learningRate: '1' as never }), 'learningRate', ErrorCodes.INVALID_TYPE],
    ['useNesterov', () => optimizers.momentum({ useNesterov: 1 as never }), 'useNesterov', ErrorCodes.INVALID_TYPE],
    ['sumInsideSqrt', () => optimizers.adam({ sumInsideSqrt: 'no' as never }), 'sumInsideSqrt', ErrorCodes.INVALID_TYPE],
    ['lazyAdam', () => optimizers.adam({ lazyAdam: 0 as never }), 'lazyAdam', ErrorCodes.INVALID_TYPE],
    ['adagrad initialAccumulatorValue', () => optimizers.adagrad({ initialAccumulatorValue: 0 }), 'initialAccumulatorValue'],
    ['ftrl initialAccumulatorValue', () => optimizers.ftrl({ initialAccumulatorValue: -1 }), 'initialAccumulatorValue'],
    ['rowWiseAdagrad initialAccumulatorValue', () => optimizers.rowWiseAdagrad({ initialAccumulatorValue: -0.1 }), 'initialAccumulatorValue'],
    ['rowWiseAdagrad epsilon', () => optimizers.rowWiseAdagrad({ epsilon: 0 }), 'epsilon'],
    ['adam beta1', () => optimizers.adam({ beta1: 1 }), 'beta1'],
    ['adam beta2', () => optimizers.adam({ beta2: -0.1 }), 'beta2'],
    ['adam epsilon', () => optimizers.adam({ epsilon: 0 }), 'epsilon'],
    ['adamax beta1', () => optimizers.adamax({ beta1: 1.5 }), 'beta1'],
    ['adamax epsilon', () => optimizers.adamax({ epsilon: -1 }), 'epsilon'],
    ['adagradMomentum momentum', () => optimizers.adagradMomentum({ momentum: -1 }), 'momentum'],
    ['adagradMomentum exponent', () => optimizers.adagradMomentum({ exponent: 0 }), 'exponent'],
    ['adagradMomentum beta2', () => optimizers.adagradMomentum({ beta2: 0 }), 'beta2'],
    ['adagradMomentum epsilon', () => optimizers.adagradMomentum({ epsilon: -1 }), 'epsilon'],
    ['momentum momentum', () => optimizers.momentum({ momentum: -0.5 }), 'momentum'],
    ['adadelta rho', () => optimizers.adadelta({ rho: 1.5 }), 'rho'],
    ['adadelta epsilon', () => optimizers.adadelta({ epsilon: 0 }), 'epsilon'],
    ['ftrl l1', () => optimizers.ftrl({ l1: -1 }), 'l1'],
    ['ftrl l2', () => optimizers.ftrl({ l2: -1 }), 'l2'],
    ['ftrl beta', () => optimizers.ftrl({ beta: -1 }), 'beta'],
    ['ftrl learningRatePower', () => optimizers.ftrl({ learningRatePower: 0.5 }), 'learningRatePower'],
    ['ftrl zero learning rate (it divides by lr)', () => optimizers.ftrl({ learningRate: 0 }), 'learningRate'],
    ['useGradientAccumulation', () => optimizers.sgd({ useGradientAccumulation: 'yes' as never }), 'useGradientAccumulation', ErrorCodes.INVALID_TYPE],
    ['clipvalue without accumulation', () => optimizers.sgd({ clipvalue: 1, useGradientAccumulation: false }), 'clipvalue'],
    ['negative clipvalue', () => optimizers.sgd({ clipvalue: -1 }), 'clipvalue'],
    ['clipvalue[0]', () => optimizers.sgd({ clipvalue: [NaN, 1] }), 'clipvalue[0]'],
    ['clipvalue[1]', () => optimizers.sgd({ clipvalue: [0, 'x' as never] }), 'clipvalue[1]', ErrorCodes.INVALID_TYPE],
    ['clipvalue min > max', () => optimizers.sgd({ clipvalue: [2, 1] }), 'clipvalue'],
    ['clipvalue of three', () => optimizers.sgd({ clipvalue: [1, 2, 3] as never }), 'clipvalue'],
    ['clipvalue string', () => optimizers.sgd({ clipvalue: '1' as never }), 'clipvalue', ErrorCodes.INVALID_TYPE],
    ['clipWeightMin', () => optimizers.sgd({ clipWeightMin: NaN }), 'clipWeightMin'],
    ['clipWeightMax', () => optimizers.sgd({ clipWeightMax: '1' as never }), 'clipWeightMax', ErrorCodes.INVALID_TYPE],
    ['clipWeightMin > clipWeightMax', () => optimizers.sgd({ clipWeightMin: 1, clipWeightMax: 0 }), 'clipWeightMax'],
    ['weightDecayFactor', () => optimizers.sgd({ weightDecayFactor: Infinity }), 'weightDecayFactor'],
    ['multiplyWeightDecayFactorByLearningRate', () => optimizers.sgd({ multiplyWeightDecayFactorByLearningRate: 1 as never }), 'multiplyWeightDecayFactorByLearningRate', ErrorCodes.INVALID_TYPE],
  ];
  for (const [title, fn, argument, code] of cases) {
    it(title, () => {
      const e = throwsCode(fn, (code ?? ErrorCodes.INVALID_ARGUMENT) as never, argument);
      expect(e.message).toMatch(new RegExp(`^Expected ${argument.replace(/[[\]]/g, '\\$&')} to be `));
    });
  }
});

describe('resolveOptimizer', () => {
  it('evaluates the learning rate for the step and flattens the spec', () => {
    const r = resolveOptimizer(optimizers.adam({ learningRate: (s) => s / 10, beta1: 0.5, clipvalue: 2, clipWeightMax: 3 }), 4);
    expect(r).toMatchObject({ kind: 'adam', lr: 0.4, step: 4, beta1: 0.5, beta2: 0.999, clipGradMin: -2, clipGradMax: 2, clipWeightMin: -Infinity, clipWeightMax: 3, weightDecay: 0 });
  });

  it('weight decay is multiplied by the learning rate only when asked', () => {
    expect(resolveOptimizer(optimizers.sgd({ learningRate: 0.5, weightDecayFactor: 0.2 }), 1).weightDecay).toBe(0.2);
    expect(resolveOptimizer(optimizers.sgd({ learningRate: 0.5, weightDecayFactor: 0.2, multiplyWeightDecayFactorByLearningRate: true }), 1).weightDecay).toBe(0.1);
  });

  it('a learning-rate function must return a finite number', () => {
    throwsCode(() => resolveOptimizer(optimizers.sgd({ learningRate: () => Infinity }), 1), ErrorCodes.INVALID_ARGUMENT, 'learningRate(1)');
    throwsCode(() => resolveOptimizer(optimizers.sgd({ learningRate: () => '1' as never }), 1), ErrorCodes.INVALID_TYPE, 'learningRate(1)');
  });
});
