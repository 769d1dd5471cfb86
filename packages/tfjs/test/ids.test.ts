// Ids as a tfjs user hands them over: numbers, bigints (beyond 2^53), nested arrays, int64 positions;
// wrong ones rejected naming the very element, and nothing changed by a rejected lookup.
import * as tf from '@tensorflow/tfjs-core';
import { EmbeddingError, Tensor } from '@embedstack/core';
import * as de from '@embedstack/tfra';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SokEmbeddingLayer, TfraEmbeddingLayer, toTf } from '../src/index.js';
import { useCpu } from './helpers.js';

beforeAll(async () => {
  await useCpu();
  await sok.init({ numDevices: 2 });
});
afterAll(() => sok.shutdown());

let uid = 0;
const BIG = 2n ** 53n + 1n; // not a double: 2^53 + 1 as a number is 2^53

async function rejects(p: Promise<unknown>, code: string, argument: string): Promise<void> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EmbeddingError);
  expect((err as EmbeddingError).code).toBe(code);
  expect((err as EmbeddingError).argument).toBe(argument);
  expect((err as Error).message).toContain(argument);
}

describe('int64 ids beyond 2^53', () => {
  it('tfra (sum): bigints, a BigInt64Array and toTf positions reach their own rows, forward and update', async () => {
    const variable = new de.Variable({ keyDtype: 'int64', dim: 1, name: `tfjs_ids_${uid++}` });
    await variable.upsert(BigInt64Array.of(BIG, BIG - 1n, 2n ** 62n), Float32Array.of(5, 7, 11));
    const layer = new TfraEmbeddingLayer({ variable, optimizer: de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 })), combiner: 'sum' });
    const x = await layer.lookup([[BIG], [BIG - 1n, BIG]]);
    const { value, grads } = tf.variableGrads(() => {
      const e = layer.apply(x) as tf.Tensor;
      expect(Array.from(e.dataSync())).toEqual([5, 12]);
      return tf.sum(tf.mul(e, tf.tensor2d([[1], [3]]))) as tf.Scalar;
    });
    tf.dispose([value, ...Object.values(grads)]);
    await layer.flush();
    // SGD lr 1: BIG gets 1 + 3, BIG - 1 gets 3
    expect(Array.from((await variable.lookup(BigInt64Array.of(BIG, BIG - 1n))).data)).toEqual([1, 4]);
    // the same keys as int64 positions beside the graph (toTf's default), dense [batch] without pooling
    const pos = toTf(new Tensor(BigInt64Array.of(2n ** 62n, BIG)));
    const dense = new TfraEmbeddingLayer({ variable, optimizer: layer.optimizer });
    const y = dense.apply(await dense.lookup(pos, { training: false })) as tf.Tensor;
    expect(Array.from(y.dataSync())).toEqual([11, 1]);
    tf.dispose([pos, y]);
    layer.dispose();
    dense.dispose();
    variable.dispose();
  });

  it('sok DynamicVariable (mean): bigints reach their own rows', async () => {
    const v = new sok.DynamicVariable({ dimension: 1, initializer: '0', name: `tfjs_ids_sok${uid++}` });
    await sok.assign(v, BigInt64Array.of(BIG, BIG - 1n), Float32Array.of(5, 7));
    const layer = new SokEmbeddingLayer({ variables: v, optimizer: new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: 1 })), combiners: 'mean' });
    const x = await layer.lookup([[BIG], [BIG - 1n, BIG]]);
    const { value, grads } = tf.variableGrads(() => {
      const e = layer.apply(x) as tf.Tensor;
      expect(Array.from(e.dataSync())).toEqual([5, 6]);
      return tf.sum(tf.mul(e, tf.tensor2d([[1], [4]]))) as tf.Scalar;
    });
    tf.dispose([value, ...Object.values(grads)]);
    await layer.flush();
    const [keys, rows] = await sok.exportVariable(v);
    const got = new Map(Array.from(keys as BigInt64Array, (k, i) => [k, rows.data[i]]));
    // mean over 2 ids: each gets 4 / 2; BIG also 1 from the first example
    expect(got).toEqual(new Map([[BIG, 5 - 1 - 2], [BIG - 1n, 7 - 2]]));
    layer.dispose();
  });
});

describe('ids and weights as arrays: errors name the element', () => {
  it('tfra: unsafe numbers, strings, a row that is not an array, bigints outside int64, non-number weights; nothing inserted', async () => {
    const variable = new de.Variable({ keyDtype: 'int64', dim: 1, name: `tfjs_ids_${uid++}` });
    const layer = new TfraEmbeddingLayer({ variable, optimizer: de.DynamicEmbeddingOptimizer(new de.optimizers.SGD()), combiner: 'sum' });
    await rejects(layer.lookup([[1, 2 ** 53 + 2]]), 'INVALID_TYPE', 'ids[0][1]');
    await rejects(layer.lookup([[1], [2, 0.5]]), 'INVALID_TYPE', 'ids[1][1]');
    await rejects(layer.lookup([1, '2'] as never), 'INVALID_TYPE', 'ids[1]');
    await rejects(layer.lookup([[1n], 3n] as never), 'INVALID_TYPE', 'ids[1]');
    await rejects(layer.lookup([[2n ** 63n]]), 'OUT_OF_RANGE', 'ids[0][0]');
    await rejects(layer.lookup([[1, 2]], { weights: [[1, 'a']] }), 'INVALID_TYPE', 'options.weights[0][1]');
    expect(await variable.size()).toBe(0);
    const v = new sok.Variable({ shape: [4, 1], initializer: 'zeros', name: `tfjs_ids_sokv${uid++}` });
    const two = new SokEmbeddingLayer({ variables: [v, v], optimizer: new sok.OptimizerWrapper(new sok.optimizers.SGD()), combiners: 'sum' });
    await rejects(two.lookup([[[1]], [[2, 1.5]]]), 'INVALID_TYPE', 'ids[1][0][1]');
    await rejects(two.lookup([[[1]], [[2]]], { weights: [null, [[true]]] }), 'INVALID_TYPE', 'options.weights[1][0][0]');
    layer.dispose();
    two.dispose();
    variable.dispose();
  });
});

describe('SokEmbeddingLayer over one variable', () => {
  it('takes its ragged rows alone or in a one-element list (as for several variables)', async () => {
    const v = new sok.Variable({ shape: [4, 1], initializer: 'zeros', name: `tfjs_ids_one${uid++}` });
    await sok.assign(v, [0, 1, 2, 3], Float32Array.of(1, 10, 100, 1000));
    const layer = new SokEmbeddingLayer({ variables: v, optimizer: new sok.OptimizerWrapper(new sok.optimizers.SGD()), combiners: 'sum' });
    for (const ids of [[[1, 2], [3], []], [[[1, 2], [3], []]]]) {
      const y = layer.apply(await layer.lookup(ids, { training: false })) as tf.Tensor;
      expect(Array.from(y.dataSync())).toEqual([110, 1000, 0]);
      y.dispose();
    }
    layer.dispose();
  });
});
