// The tfjs bridge's options objects (conversions, the layers' constructors and lookups) refuse a
// misspelt name (INVALID_ARGUMENT naming `options.<name>`) and take all their names at once.
import * as tf from '@tensorflow/tfjs-core';
import { RaggedTensor, SparseTensor, Tensor } from '@embedstack/core';
import { describeOptionNames, type OptionNamesCase } from '@embedstack/core/testing';
import * as de from '@embedstack/tfra';
import { beforeAll, expect } from 'vitest';
import { fromTf, fromTfRagged, fromTfSparse, TfraEmbeddingLayer, toTf, toTfRagged, toTfSparse } from '../src/index.js';
import { useCpu } from './helpers.js';

beforeAll(useCpu);

const keys = BigInt64Array.from([5n, 1n << 40n]);
let uid = 0;
/** A tfra variable holding 1 -> [1, 2], 2 -> [3, 4], and its layer options. */
async function layerFull(): Promise<Record<string, unknown>> {
  const variable = new de.Variable({ dim: 2, name: `tfjs_opts_${uid++}` });
  await variable.upsert([1n, 2n], Float32Array.from([1, 2, 3, 4]));
  return { variable, optimizer: de.DynamicEmbeddingOptimizer(new de.SGD()), combiner: 'sum', maxNorm: 100, inputLength: null, trainableName: 'tr', name: `layer_${uid}`, inputShape: [] };
}
const layerNames = ['variable', 'optimizer', 'combiner', 'maxNorm', 'inputLength', 'trainableName', 'name', 'inputShape'];

/** Cases whose full() is built once before (reset) since the layer needs a filled variable. */
function withLayer(label: string, names: string[], full: (l: Record<string, unknown>) => Record<string, unknown>, call: (o: Record<string, unknown>, l: Record<string, unknown>) => unknown, check: (r: unknown) => void | Promise<void>): OptionNamesCase {
  let l: Record<string, unknown> = {};
  return { label, argument: 'options', names, reset: async () => void (l = await layerFull()), full: () => full(l), call: (o) => call(o, l), check };
}

describeOptionNames('tfjs: option names', [
  { label: 'toTf(tensor, options)', argument: 'options', names: ['int64'], full: () => ({ int64: 'positions' }), call: (o) => toTf(new Tensor(keys, [2]), o as never), check: (t) => expect(Array.from((t as tf.Tensor).dataSync())).toEqual([0, 1]) },
  { label: 'fromTf(tensor, options)', argument: 'options', names: ['keys'], full: () => ({ keys }), call: (o) => fromTf(tf.tensor1d([1, 0], 'int32'), o as never), check: (t) => expect(Array.from((t as Tensor<BigInt64Array>).data)).toEqual([1n << 40n, 5n]) },
  { label: 'toTfSparse(sparse, options)', argument: 'options', names: ['int64'], full: () => ({ int64: 'int32' }), call: (o) => toTfSparse(SparseTensor.fromNestedArray([[3n]]), o as never), check: (s) => expect(Array.from((s as { values: tf.Tensor }).values.dataSync())).toEqual([3]) },
  {
    label: 'fromTfSparse(parts, options)',
    argument: 'options',
    names: ['keys'],
    full: () => ({ keys }),
    call: (o) => fromTfSparse({ indices: tf.tensor2d([[0, 0]], [1, 2], 'int32'), values: tf.tensor1d([1], 'int32'), denseShape: [1, 1] }, o as never),
    check: (s) => expect(Array.from((s as SparseTensor<BigInt64Array>).values)).toEqual([1n << 40n]),
  },
  { label: 'toTfRagged(ragged, options)', argument: 'options', names: ['int64'], full: () => ({ int64: 'int32' }), call: (o) => toTfRagged(RaggedTensor.fromNestedArray([[4n], []]), o as never), check: (r) => expect(Array.from((r as { rowSplits: tf.Tensor }).rowSplits.dataSync())).toEqual([0, 1, 1]) },
  { label: 'fromTfRagged(parts, options)', argument: 'options', names: ['keys'], full: () => ({ keys }), call: (o) => fromTfRagged({ values: tf.tensor1d([0], 'int32'), rowSplits: tf.tensor1d([0, 1], 'int32') }, o as never), check: (r) => expect(Array.from((r as RaggedTensor<BigInt64Array>).values)).toEqual([5n]) },
  withLayer('new TfraEmbeddingLayer(options)', layerNames, (l) => ({ ...l }), (o) => new TfraEmbeddingLayer(o as never), async (layer) => {
    const l = layer as TfraEmbeddingLayer;
    const pos = await l.lookup(RaggedTensor.fromNestedArray([[1n, 2n]]), { training: false });
    expect([l.combiner, l.maxNorm, l.trainableName, Array.from(pos.dataSync()).length]).toEqual(['sum', 100, 'tr', 1]);
  }),
  withLayer(
    'TfraEmbeddingLayer.lookup(ids, options)',
    ['weights', 'training'],
    () => ({ weights: RaggedTensor.fromNestedArray([[1, 2]], { dtype: 'float32' }), training: false }),
    (o, l) => new TfraEmbeddingLayer(l as never).lookup(RaggedTensor.fromNestedArray([[1n, 2n]]), o),
    (pos) => expect((pos as tf.Tensor).shape).toEqual([1]),
  ),
]);
