// The layers on tfjs's wasm backend, which copies arrays in and out of its heap (the cpu backend shares them):
// the converters and the gradient hand-off must not depend on sharing.
import { createRequire } from 'node:module';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { RaggedTensor, Tensor } from '@embedstack/core';
import { FeatureConfig, SGD, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { beforeAll, describe, expect, it } from 'vitest';
import { fromTf, toTf, TPUEmbeddingLayer } from '../src/index.js';

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
