import { describe, expect, it } from 'vitest';
import { optimizers, resolveOptimizer } from '../optimizers.js';
import { referenceKernels } from './index.js';

const { applyOptimizerRow, combineBag, dedupeGradients, nextScore, evictionLosers } = referenceKernels;
const f = Math.fround;
const F = (...x: number[]) => Float32Array.from(x);

describe('applyOptimizerRow', () => {
  it('clips the gradient, then adds weight decay, then updates, then clips the weight', () => {
    const opt = resolveOptimizer(optimizers.sgd({ learningRate: 0.1, clipvalue: 1, weightDecayFactor: 0.5 }), 1);
    const w = F(2);
    applyOptimizerRow(opt, w, [], F(5));
    expect(w[0]).toBe(f(2 - 0.1 * (1 + 0.5 * 2))); // 1.8; decay before clipping would give 1.9
    const capped = resolveOptimizer(optimizers.sgd({ learningRate: 0.1, clipvalue: 1, weightDecayFactor: 0.5, clipWeightMax: 1.75 }), 1);
    const w2 = F(2);
    applyOptimizerRow(capped, w2, [], F(5));
    expect(w2[0]).toBe(1.75);
    const floor = resolveOptimizer(optimizers.sgd({ learningRate: 1, clipWeightMin: -0.25 }), 1);
    const w3 = F(0);
    applyOptimizerRow(floor, w3, [], F(3));
    expect(w3[0]).toBe(-0.25);
  });

  it('adagrad: the accumulator is stored as float32 and read back by the weight update', () => {
    const opt = resolveOptimizer(optimizers.adagrad({ learningRate: 0.1 }), 1);
    const w = F(1);
    const acc = F(0.1);
    applyOptimizerRow(opt, w, [acc], F(2));
    expect(acc[0]).toBe(f(f(0.1) + 4));
    expect(w[0]).toBe(f(1 - 0.2 / Math.sqrt(f(f(0.1) + 4))));
  });

  it('rowWiseAdagrad: one accumulator per row, the mean of g²', () => {
    const opt = resolveOptimizer(optimizers.rowWiseAdagrad({ learningRate: 0.5 }), 1);
    const w = F(1, 1);
    const acc = F(0);
    applyOptimizerRow(opt, w, [acc], F(1, 3));
    expect(acc[0]).toBe(5);
    expect(Array.from(w)).toEqual([f(1 - 0.5 / (Math.sqrt(5) + 1e-8)), f(1 - 1.5 / (Math.sqrt(5) + 1e-8))]);
  });

  it('ftrl: hand-computed step with and without l1', () => {
    const step = (l1: number) => {
      const w = F(0);
      const slots = [F(0.1), F(0)];
      applyOptimizerRow(resolveOptimizer(optimizers.ftrl({ learningRate: 1, l1 }), 1), w, slots, F(1));
      return [w[0], slots[0]![0], slots[1]![0]];
    };
    const acc = f(f(0.1) + 1);
    expect(step(0)).toEqual([f(-1 / Math.sqrt(acc)), acc, 1]);
    expect(step(2)).toEqual([0, acc, 1]);
  });

  it('adamax applies the bias correction of the step', () => {
    const w = F(0);
    const slots = [F(0), F(0)];
    applyOptimizerRow(resolveOptimizer(optimizers.adamax({ learningRate: 0.1, beta1: 0.5, beta2: 0.5, epsilon: 1e-7 }), 2), w, slots, F(2));
    // m = 1, u = 2, scale = 0.1 / (1 - 0.25)
    expect(w[0]).toBe(f(-(0.1 / 0.75) * (1 / (2 + 1e-7))));
  });
});

describe('dedupeGradients', () => {
  it('keeps first-appearance order and sums in float32, in order', () => {
    const { unique, sums } = dedupeGradients(BigInt64Array.from([7n, -1n, 7n, 7n]), F(1e8, 5, 1, -1e8), 1);
    expect(unique).toEqual([7n, -1n]);
    // float32: 1e8 + 1 rounds back to 1e8, so the sum is 0 (it would be 1 in double)
    expect(Array.from(sums)).toEqual([0, 5]);
  });
});

describe('combineBag', () => {
  const rows: Record<number, number[]> = { 0: [2, 0], 1: [0, 4], 2: [3, 4] };
  const bag = (keys: number[], splits: number[], weights: number[] | null) => ({
    keys: Int32Array.from(keys),
    rowSplits: Int32Array.from(splits),
    weights: weights ? F(...weights) : null,
  });
  const get = (b: ReturnType<typeof bag>) => (j: number) => rows[b.keys[j]!]!;

  it('sum, mean and sqrtn with weights; empty rows and zero denominators give zeros', () => {
    const b = bag([0, 1, 2], [0, 2, 2, 3], [1, 3, 0]);
    expect(Array.from(combineBag(get(b), b, 2, 'sum', 0))).toEqual([2, 12, 0, 0, 0, 0]);
    expect(Array.from(combineBag(get(b), b, 2, 'mean', 0))).toEqual([0.5, 3, 0, 0, 0, 0]);
    expect(Array.from(combineBag(get(b), b, 2, 'sqrtn', 0))).toEqual([f(2 / Math.sqrt(10)), f(12 / Math.sqrt(10)), 0, 0, 0, 0]);
  });

  it('maxNorm clips each row to that L2 norm before weighting', () => {
    const b = bag([2, 0], [0, 2], [2, 1]);
    // row 2 = [3,4] (norm 5) clipped to norm 2.5 -> [1.5, 2]; row 0 = [2,0] (norm 2) unchanged
    expect(Array.from(combineBag(get(b), b, 2, 'sum', 2.5))).toEqual([2 * 1.5 + 2, 2 * 2]);
  });
});

describe('scores', () => {
  const t = { clock: 7, epoch: 3, now: 1000n };
  it('nextScore per policy', () => {
    expect(nextScore('lru', 5n, 2, undefined, t)).toBe(7n);
    expect(nextScore('lfu', 5n, 2, undefined, t)).toBe(7n);
    expect(nextScore('lfu', undefined, 2, undefined, t)).toBe(2n);
    expect(nextScore('lfu', 2n ** 64n - 1n, 2, undefined, t)).toBe(2n ** 64n - 1n);
    expect(nextScore('epochLru', 1n, 1, undefined, { ...t, clock: 2 ** 32 + 9 })).toBe((3n << 32n) + 9n);
    expect(nextScore('epochLfu', (3n << 32n) + 4n, 2, undefined, t)).toBe((3n << 32n) + 6n);
    expect(nextScore('epochLfu', (2n << 32n) + 4n, 2, undefined, t)).toBe((3n << 32n) + 2n);
    expect(nextScore('timestamp', 1n, 1, undefined, t)).toBe(1000n);
    expect(nextScore('frequency', 4n, 9, undefined, t)).toBe(5n);
    expect(nextScore('frequency', undefined, 9, undefined, t)).toBe(1n);
    expect(nextScore('customized', 4n, 1, 9n, t)).toBe(9n);
    expect(nextScore('customized', 4n, 1, undefined, t)).toBe(4n);
    expect(nextScore('customized', undefined, 1, undefined, t)).toBe(0n);
  });

  it('evictionLosers keeps higher scores, then new keys, then smaller keys', () => {
    const losers = evictionLosers(
      [
        { key: 5n, score: 3n, resident: true },
        { key: 9n, score: 3n, resident: false }, // ties 5 and 2, and is the largest of them: kept because it is new
        { key: 2n, score: 3n, resident: true },
        { key: 1n, score: 1n, resident: true },
        { key: 8n, score: 9n, resident: false },
      ],
      3,
    );
    expect(losers.map((l) => l.key)).toEqual([5n, 1n]);
  });
});
