// The layers on tfjs's wasm backend, which copies arrays in and out of its heap (the cpu backend shares them):
// the converters and the gradient hand-off must not depend on sharing.
import { createRequire } from 'node:module';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { RaggedTensor, Tensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import * as de from '@embedstack/tfra';
import { FeatureConfig, SGD, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { beforeAll, describe, expect, it } from 'vitest';
import { fromTf, SokEmbeddingLayer, TfraEmbeddingLayer, toTf, TPUEmbeddingLayer } from '../src/index.js';
import { maxRelDiff } from './helpers.js';

beforeAll(async () => {
  setWasmPaths(path.join(path.dirname(createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm/package.json')), 'dist') + path.sep);
  expect(await tf.setBackend('wasm')).toBe(true);
  await tf.ready();
});

describe('on the tfjs wasm backend', () => {
  it('converters round-trip values (copies there)', () => {
    const data = new Float32Array([1.5, -2, 3]);
    const t = toTf(new Tensor(data));
    data[0] = 99; // the wasm heap holds its own copy
    expect(Array.from(t.dataSync())).toEqual([1.5, -2, 3]);
    expect(Array.from(fromTf(t).data as Float32Array)).toEqual([1.5, -2, 3]);
    t.dispose();
  });

  it('a TPUEmbeddingLayer step: forward values and the sparse SGD step by hand', async () => {
    const before = tf.memory().numTensors;
    const table = new TableConfig({ vocabularySize: 5, dim: 2, combiner: 'sum', name: 't', initializer: (s) => Float32Array.from({ length: s[0] * s[1] }, (_, i) => i) });
    const emb = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table }) }, optimizer: new SGD({ learningRate: 0.5 }) });
    const layer = new TPUEmbeddingLayer({ embedding: emb });
    const x = await layer.lookup({ a: RaggedTensor.fromNestedArray([[1, 1], [4]], { dtype: 'int32' }) });
    const { value, grads } = tf.variableGrads(() => {
      const e = layer.apply(x) as tf.Tensor;
      expect(Array.from(e.dataSync())).toEqual([4, 6, 8, 9]); // 2 * row 1 = [4, 6]; row 4 = [8, 9]
      return tf.sum(tf.mul(e, tf.tensor2d([[1, 2], [3, 4]]))) as tf.Scalar;
    });
    tf.dispose([value, ...Object.values(grads)]);
    await layer.flush();
    // row 1 twice with grad [1, 2]: -= 0.5 * 2 * [1, 2]; row 4 with [3, 4]: -= 0.5 * [3, 4]
    expect(Array.from(emb.embeddingTables.get(table)!.data)).toEqual([0, 1, 1, 1, 4, 5, 6, 7, 6.5, 7]);
    layer.dispose();
    emb.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

/**
 * The reference on wasm, where tf.gather has no gradient (no UnsortedSegmentSum kernel): a pooled
 * lookup is M @ table, M[r, id] the combiner's weight of id in bag r (weighted mean: w / Σw; an
 * empty bag a zero row), and tfjs differentiates the matMul.
 */
function pooledMatrix(rows: number[][], weights: number[][], combiner: 'sum' | 'mean', vocab: number): tf.Tensor2D {
  const m = new Float32Array(rows.length * vocab);
  rows.forEach((row, r) => {
    const total = weights[r]!.reduce((a, w) => a + w, 0);
    row.forEach((id, j) => {
      m[r * vocab + id] = m[r * vocab + id]! + (combiner === 'sum' ? weights[r]![j]! : weights[r]![j]! / total);
    });
  });
  return tf.tensor2d(m, [rows.length, vocab]);
}

describe('on the tfjs wasm backend: each layer against tfjs autodiff of the dense model (weighted mean, an empty bag)', () => {
  const VOCAB = 6;
  const DIM = 2;
  const LR = 0.5;
  const rows = [[1, 4, 1], [], [5], [0, 2]];
  const weights = [[1, 2, 0.5], [], [3], [1, 1]];
  const upstream = [[1, -2], [3, 4], [0.5, 1], [-1, 2]]; // d loss / d activation: loss = Σ e * upstream
  const start = Float32Array.from({ length: VOCAB * DIM }, (_, i) => (i * 7) % 5 - 2);

  /** The table after one SGD step of the dense model, and its forward. */
  function reference(): { forward: number[]; after: number[] } {
    return tf.tidy(() => {
      const table = tf.tensor2d(start, [VOCAB, DIM]);
      const m = pooledMatrix(rows, weights, 'mean', VOCAB);
      const f = (t: tf.Tensor) => tf.sum(tf.mul(tf.matMul(m, t as tf.Tensor2D), tf.tensor2d(upstream))) as tf.Scalar;
      const [g] = tf.grads(f)([table]);
      return { forward: Array.from(tf.matMul(m, table).dataSync()), after: Array.from(tf.sub(table, tf.mul(g!, LR)).dataSync()) };
    });
  }

  async function step(layer: { lookup: (...a: never[]) => Promise<tf.Tensor1D>; apply: (x: tf.Tensor) => unknown; flush: () => Promise<void> }, x: tf.Tensor1D): Promise<number[]> {
    let forward: number[] = [];
    const { value, grads } = tf.variableGrads(() => {
      const e = layer.apply(x) as tf.Tensor;
      forward = Array.from(e.dataSync());
      return tf.sum(tf.mul(e, tf.tensor2d(upstream))) as tf.Scalar;
    });
    tf.dispose([value, ...Object.values(grads)]);
    await layer.flush();
    return forward;
  }

  it('TfraEmbeddingLayer', async () => {
    const before = tf.memory().numTensors;
    const ref = reference();
    const variable = new de.Variable({ keyDtype: 'int64', dim: DIM, name: `tfjs_wasm_${Date.now()}` });
    const keys = BigInt64Array.from({ length: VOCAB }, (_, i) => BigInt(i));
    await variable.upsert(keys, start);
    const layer = new TfraEmbeddingLayer({ variable, optimizer: de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: LR })), combiner: 'mean' });
    const forward = await step(layer as never, await layer.lookup(RaggedTensor.fromNestedArray(rows.map((r) => r.map(BigInt))), { weights: RaggedTensor.fromNestedArray(weights, { dtype: 'float32' }) }));
    expect(maxRelDiff(forward, ref.forward)).toBeLessThan(1e-6);
    expect(forward.slice(2, 4)).toEqual([0, 0]); // the empty bag
    expect(maxRelDiff(Array.from((await variable.lookup(keys)).data), ref.after)).toBeLessThan(1e-6);
    layer.dispose();
    variable.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('SokEmbeddingLayer (2 devices)', async () => {
    await sok.init({ numDevices: 2 });
    try {
      const before = tf.memory().numTensors;
      const ref = reference();
      const v = new sok.Variable({ shape: [VOCAB, DIM], initializer: 'zeros', name: `tfjs_wasm_sok` });
      await sok.assign(v, Array.from({ length: VOCAB }, (_, i) => i), start);
      const layer = new SokEmbeddingLayer({ variables: v, optimizer: new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: LR })), combiners: 'mean' });
      const forward = await step(layer as never, await layer.lookup([RaggedTensor.fromNestedArray(rows, { dtype: 'int32' })], { weights: [RaggedTensor.fromNestedArray(weights, { dtype: 'float32' })] }));
      expect(maxRelDiff(forward, ref.forward)).toBeLessThan(1e-6);
      const [k, t] = await sok.exportVariable(v);
      const after = new Array<number>(VOCAB * DIM);
      Array.from(k as ArrayLike<number | bigint>).forEach((key, i) => after.splice(Number(key) * DIM, DIM, ...t.data.subarray(i * DIM, (i + 1) * DIM)));
      expect(maxRelDiff(after, ref.after)).toBeLessThan(1e-6);
      layer.dispose();
      expect(tf.memory().numTensors).toBe(before);
    } finally {
      sok.shutdown();
    }
  });

  it('TPUEmbeddingLayer', async () => {
    const before = tf.memory().numTensors;
    const ref = reference();
    const table = new TableConfig({ vocabularySize: VOCAB, dim: DIM, combiner: 'mean', name: 't', initializer: () => Float32Array.from(start) });
    const emb = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table }) }, optimizer: new SGD({ learningRate: LR }) });
    const layer = new TPUEmbeddingLayer({ embedding: emb });
    const x = await layer.lookup({ a: RaggedTensor.fromNestedArray(rows, { dtype: 'int32' }) }, { weights: { a: RaggedTensor.fromNestedArray(weights, { dtype: 'float32' }) } });
    const forward = await step(layer as never, x);
    expect(maxRelDiff(forward, ref.forward)).toBeLessThan(1e-6);
    expect(maxRelDiff(Array.from(emb.embeddingTables.get(table)!.data), ref.after)).toBeLessThan(1e-6);
    layer.dispose();
    emb.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});
