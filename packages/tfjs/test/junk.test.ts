import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { describeJunkSuite, junkTarget } from '@embedstack/core/testing';
import * as sok from '@embedstack/sok';
import * as de from '@embedstack/tfra';
import { FeatureConfig, SGD, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { afterAll, beforeAll } from 'vitest';
import * as pkg from '../src/index.js';
import { useCpu } from './helpers.js';

beforeAll(async () => {
  await useCpu();
  await sok.init({ numDevices: 2 });
});
afterAll(() => sok.shutdown());

// tfjs's own Layer methods (getWeights, setWeights, addLoss, ...) are tfjs's API with tfjs's errors: junk goes to ours only.
const OURS = ['lookup', 'flush', 'release', 'call', 'computeOutputShape', 'dispose'];
// install / partShapes: protected, called by the subclasses with their own arguments.
const tfjsMethods: string[] = ['install', 'partShapes'];
for (let p = tfl.layers.Layer.prototype as object | null; p && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
  for (const n of Object.getOwnPropertyNames(p)) if (!OURS.includes(n)) tfjsMethods.push(n);
}
let uid = 0;

async function tfraLayer(): Promise<pkg.TfraEmbeddingLayer> {
  const variable = new de.Variable({ keyDtype: 'int64', dim: 2, name: `tfjs_junk_${uid++}` });
  await variable.upsert([1n, 2n], new Float32Array([1, 2, 3, 4]));
  const layer = new pkg.TfraEmbeddingLayer({ variable, optimizer: de.DynamicEmbeddingOptimizer(new de.optimizers.SGD()), combiner: 'sum' });
  await layer.lookup(de.RaggedTensor.fromNestedArray([[1n], [1n, 2n]]));
  return layer;
}

async function sokLayer(): Promise<pkg.SokEmbeddingLayer> {
  const v = new sok.DynamicVariable({ dimension: 2, initializer: '1', name: `tfjs_junk_sok_${uid++}` });
  const layer = new pkg.SokEmbeddingLayer({ variables: [v, v], optimizer: new sok.OptimizerWrapper(new sok.optimizers.SGD()), combiners: ['sum', 'mean'] });
  await layer.lookup([[[1n], [2n]], [[3n], [4n, 5n]]]);
  return layer;
}

function tpuLayer() {
  const table = new TableConfig({ vocabularySize: 4, dim: 2, name: 't' });
  return new pkg.TPUEmbeddingLayer({ embedding: new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table }) }, optimizer: new SGD() }) });
}

describeJunkSuite({
  name: '@embedstack/tfjs',
  exports: pkg as unknown as Record<string, unknown>,
  runs: 15,
  targets: [
    junkTarget({
      name: 'TfraEmbeddingLayer',
      make: tfraLayer,
      // a rejected call neither changes the variable nor leaks tfjs tensors
      state: async (l) => [await l.variable.size(), Array.from((await l.variable.lookup([1n, 2n])).data), tf.memory().numTensors],
      skip: tfjsMethods,
      examples: { lookup: [[de.RaggedTensor.fromNestedArray([[2n]])], [[[1, 2]], { weights: [[0.5, 1]] }]] },
      dispose: (l) => {
        l.dispose();
        l.variable.dispose();
      },
    }),
    junkTarget({
      name: 'SokEmbeddingLayer',
      make: sokLayer,
      // a rejected call neither inserts keys nor leaks tfjs tensors
      state: async (l) => [await l.variables[0]!.size(), tf.memory().numTensors],
      skip: tfjsMethods,
      examples: { lookup: [[[[[1n]], [[2n, 3n]]]], [[[[1, 2]], [[3]]], { weights: [[[0.5, 1]], null] }]] },
      dispose: (l) => l.dispose(),
    }),
    junkTarget({
      name: 'TPUEmbeddingLayer',
      make: tpuLayer,
      state: (l) => [l.embedding.step, tf.memory().numTensors],
      skip: tfjsMethods,
      examples: { lookup: [[{ a: Int32Array.of(1, 2) }], [{ a: Int32Array.of(3) }, { training: false }]] },
      dispose: (l) => {
        l.dispose();
        l.embedding.dispose();
      },
    }),
  ],
});
