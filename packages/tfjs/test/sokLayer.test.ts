import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { RaggedTensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SokEmbeddingLayer } from '../src/index.js';
import { logLoss, maxRelDiff, pooledReference, raggedRows, rng, useCpu } from './helpers.js';

beforeAll(async () => {
  await useCpu();
  await sok.init({ numDevices: 2 });
});
afterAll(() => sok.shutdown());

const A = { vocab: 11, dim: 3 }; // DynamicVariable, combiner 'mean'
const B = { vocab: 7, dim: 2 }; // static Variable, combiner 'sum'
const BATCH = 5;
const STEPS = 4;
const LR = 0.25;
const ACC0 = 0.1;
let uid = 0;

function initial(seed: number, n: number): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: n }, () => r() - 0.5);
}

interface Step {
  a: number[][];
  b: number[][];
  labels: Float32Array;
}

function steps(): Step[] {
  const r = rng(3);
  return Array.from({ length: STEPS }, () => ({
    a: raggedRows(r, BATCH, A.vocab, 4),
    b: raggedRows(r, BATCH, B.vocab, 3),
    labels: Float32Array.from({ length: BATCH }, () => (r() < 0.5 ? 1 : 0)),
  }));
}

type Kind = 'sgd' | 'adagrad';

async function trainEmbedstack(kind: Kind, keyType: 'int32' | 'int64', data: Step[]) {
  const va = new sok.DynamicVariable({ dimension: A.dim, keyType, initializer: 'zeros', name: `tfjs_sok_a${uid++}` });
  const keysA = keyType === 'int64' ? BigInt64Array.from({ length: A.vocab }, (_, i) => BigInt(i)) : Int32Array.from({ length: A.vocab }, (_, i) => i);
  await sok.assign(va, keysA, initial(1, A.vocab * A.dim));
  const vb = new sok.Variable({ shape: [B.vocab, B.dim], initializer: 'zeros', name: `tfjs_sok_b${uid++}` });
  await sok.assign(vb, Array.from({ length: B.vocab }, (_, i) => i), initial(2, B.vocab * B.dim));
  const optimizer = new sok.OptimizerWrapper(kind === 'sgd' ? new sok.optimizers.SGD({ learningRate: LR }) : new sok.optimizers.Adagrad({ learningRate: LR, initialAccumulatorValue: ACC0 }));
  const layer = new SokEmbeddingLayer({ variables: [va, vb], optimizer, combiners: ['mean', 'sum'] });
  const input = tfl.input({ shape: [], dtype: 'int32' });
  const dense = tfl.layers.dense({ units: 1 });
  const model = tfl.model({ inputs: input, outputs: dense.apply(layer.apply(input)) as tfl.SymbolicTensor });
  const start = dense.getWeights().map((w) => Float32Array.from(w.dataSync()));
  const opt = kind === 'sgd' ? tf.train.sgd(LR) : tf.train.adagrad(LR, ACC0);
  for (const s of data) {
    const ids = keyType === 'int64' ? RaggedTensor.fromNestedArray(s.a) : RaggedTensor.fromNestedArray(s.a, { dtype: 'int32' });
    const x = await layer.lookup([ids, s.b]);
    const labels = tf.tensor2d(s.labels, [BATCH, 1]);
    opt.minimize(() => logLoss(model.apply(x) as tf.Tensor, labels));
    await layer.flush();
    labels.dispose();
  }
  const [ka, ta] = await sok.exportVariable(va);
  const rowsA = new Float32Array(A.vocab * A.dim);
  Array.from(ka as ArrayLike<number | bigint>).forEach((k, i) => rowsA.set(ta.data.subarray(i * A.dim, (i + 1) * A.dim), Number(k) * A.dim));
  const [kb, tb] = await sok.exportVariable(vb);
  const rowsB = new Float32Array(B.vocab * B.dim);
  Array.from(kb as ArrayLike<number | bigint>).forEach((k, i) => rowsB.set(tb.data.subarray(i * B.dim, (i + 1) * B.dim), Number(k) * B.dim));
  return {
    a: rowsA,
    b: rowsB,
    sizeA: ka.length,
    head: dense.getWeights().map((w) => Float32Array.from(w.dataSync())),
    start,
    dispose: () => {
      model.dispose();
      opt.dispose();
    },
  };
}

function trainDense(kind: Kind, data: Step[], head: Float32Array[]) {
  const [wa, wb, k, b] = tf.tidy(() => [
    tf.variable(tf.tensor2d(initial(1, A.vocab * A.dim), [A.vocab, A.dim])),
    tf.variable(tf.tensor2d(initial(2, B.vocab * B.dim), [B.vocab, B.dim])),
    tf.variable(tf.tensor2d(head[0]!, [A.dim + B.dim, 1])),
    tf.variable(tf.tensor1d(head[1]!)),
  ]) as [tf.Variable<tf.Rank.R2>, tf.Variable<tf.Rank.R2>, tf.Variable, tf.Variable];
  const opt = kind === 'sgd' ? tf.train.sgd(LR) : tf.train.adagrad(LR, ACC0);
  for (const s of data) {
    const labels = tf.tensor2d(s.labels, [BATCH, 1]);
    opt.minimize(
      () => logLoss(tf.add(tf.matMul(tf.concat([pooledReference(wa, s.a, 'mean'), pooledReference(wb, s.b, 'sum')], 1), k), b), labels),
      false,
      [wa, wb, k, b],
    );
    labels.dispose();
  }
  const out = { a: wa.dataSync().slice(), b: wb.dataSync().slice(), head: [k.dataSync().slice(), b.dataSync().slice()] };
  for (const v of [wa, wb, k, b]) v.dispose();
  opt.dispose();
  return out;
}

describe('SokEmbeddingLayer: forward only', () => {
  it('training: false inserts nothing and refuses a backward', async () => {
    const v = new sok.DynamicVariable({ dimension: 2, initializer: '3', name: `tfjs_sok_serving${uid++}` });
    const layer = new SokEmbeddingLayer({ variables: v, optimizer: new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: 1 })) });
    const x = await layer.lookup(BigInt64Array.of(5n, 2n ** 50n), { training: false });
    const y = layer.apply(x) as tf.Tensor;
    expect(Array.from(y.dataSync())).toEqual([3, 3, 3, 3]);
    expect(await v.size()).toBe(0);
    expect(() => tf.variableGrads(() => tf.sum(layer.apply(x) as tf.Tensor) as tf.Scalar)).toThrow(/training: false/);
    y.dispose();
    layer.dispose();
  });
});

describe('SokEmbeddingLayer: training equals a dense tfjs embedding trained by the same optimizer (2 devices)', () => {
  for (const [kind, keyType] of [['sgd', 'int64'], ['adagrad', 'int32']] as const) {
    it(`${kind}, a DynamicVariable (${keyType} keys, mean) and a static Variable (sum) in one fused lookup`, async () => {
      const before = tf.memory().numTensors;
      const data = steps();
      const got = await trainEmbedstack(kind, keyType, data);
      const ref = trainDense(kind, data, got.start);
      expect(got.sizeA).toBe(A.vocab);
      expect(maxRelDiff(got.a, ref.a)).toBeLessThan(1e-5);
      expect(maxRelDiff(got.b, ref.b)).toBeLessThan(1e-5);
      expect(maxRelDiff(got.head[0]!, ref.head[0]!)).toBeLessThan(1e-5);
      expect(maxRelDiff(got.head[1]!, ref.head[1]!)).toBeLessThan(1e-5);
      expect(maxRelDiff(got.a, initial(1, A.vocab * A.dim))).toBeGreaterThan(1e-3);
      got.dispose();
      expect(tf.memory().numTensors).toBe(before);
    });
  }
});
