// The layer's life cycle as tfjs drives it: several uses in one backward, a lookup the layer rejects
// after the facade ran, dispose during a lookup, a layer shared by two models.
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { EmbeddingError } from '@embedstack/core';
import * as de from '@embedstack/tfra';
import { FeatureConfig, SGD, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { beforeAll, describe, expect, it } from 'vitest';
import { TfraEmbeddingLayer, TPUEmbeddingLayer } from '../src/index.js';
import { expectCoded, maxRelDiff, useCpu } from './helpers.js';

beforeAll(useCpu);

let uid = 0;
const LR = 0.5;
const VOCAB = 10;

/** Row k = [k, 10k] for keys 0..9. */
function initialRows(): Float32Array {
  return Float32Array.from({ length: 2 * VOCAB }, (_, i) => (i % 2 === 0 ? i / 2 : 5 * i - 5));
}

async function tfraFixture() {
  const variable = new de.Variable({ keyDtype: 'int64', dim: 2, name: `tfjs_lifecycle_${uid++}` });
  const keys = BigInt64Array.from({ length: VOCAB }, (_, i) => BigInt(i));
  await variable.upsert(keys, initialRows());
  const optimizer = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: LR }));
  const layer = new TfraEmbeddingLayer({ variable, optimizer });
  const rows = async () => Array.from((await variable.lookup(keys)).data);
  return { variable, layer, rows };
}

async function rejection(p: Promise<unknown>): Promise<EmbeddingError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EmbeddingError);
  return err as EmbeddingError;
}

/**
 * The reference: the same loss over a dense tfjs table [VOCAB, 2] (tf.gather per use), differentiated
 * by tfjs (tf.grads; gather's gradient sums duplicate rows), then one SGD step by hand.
 */
function denseStep(ids: number[], loss: (rows: (positions: number[]) => tf.Tensor) => tf.Scalar): number[] {
  return tf.tidy(() => {
    const table = tf.tensor2d(initialRows(), [VOCAB, 2]);
    const [g] = tf.grads((t: tf.Tensor) => loss((positions) => tf.gather(t, tf.tensor1d(positions.map((p) => ids[p]!), 'int32'))))([table]);
    return Array.from(tf.sub(table, tf.mul(g!, LR)).dataSync());
  });
}

describe('several uses of the layer in one backward', () => {
  it('two slices of one lookup in one loss: their gradients add up to one sparse step (tf.grads of tf.gather as reference)', async () => {
    const { layer, rows, variable } = await tfraFixture();
    const ids = [3, 1, 3, 7];
    const x = await layer.lookup(BigInt64Array.from(ids, BigInt));
    const before = tf.memory().numTensors;
    const w1 = tf.tensor2d([[1, 2], [3, 4], [5, 6], [7, 8]]);
    const w2 = tf.tensor2d([[-1, 0.5], [2, 2]]);
    // loss = Σ w1 * e(all examples) + Σ w2 * e(examples 1, 3)
    const f = (use: (positions: number[]) => tf.Tensor) => tf.add(tf.sum(tf.mul(use([0, 1, 2, 3]), w1)), tf.sum(tf.mul(use([1, 3]), w2))) as tf.Scalar;
    const expected = denseStep(ids, f);
    const { value, grads } = tf.variableGrads(() =>
      f((positions) => {
        const p = tf.tensor1d(positions, 'int32');
        return layer.apply(positions.length === ids.length ? x : tf.gather(x, p)) as tf.Tensor;
      }),
    );
    tf.dispose([value, ...Object.values(grads)]);
    await layer.flush();
    const after = await rows();
    expect(maxRelDiff(after, expected)).toBe(0);
    // by hand: row 1 gets [3, 4] + [-1, 0.5]; row 7 gets [7, 8] + [2, 2]; row 3 gets [1, 2] + [5, 6]
    expect(after.slice(2, 4)).toEqual([1 - LR * 2, 10 - LR * 4.5]);
    expect(after.slice(14, 16)).toEqual([7 - LR * 9, 70 - LR * 10]);
    expect(after.slice(6, 8)).toEqual([3 - LR * 6, 30 - LR * 8]);
    tf.dispose([w1, w2]);
    expect(tf.memory().numTensors).toBe(before); // the positions gathered inside the step were tidied
    // a later backward on the same batch is a second step: refused, nothing changes
    expectCoded(() => tf.variableGrads(() => tf.sum(layer.apply(x) as tf.Tensor) as tf.Scalar), 'FAILED_PRECONDITION', 'lookup');
    await layer.flush();
    expect(await rows()).toEqual(after);
    layer.dispose();
    variable.dispose();
  });

  it('the facade gets the step inside the backward when every use has its gradient, else right after it', async () => {
    const { variable, rows } = await tfraFixture();
    const real = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: LR }));
    let calls = 0;
    let done = 0;
    // a facade step that takes a while: flush() must wait for it however it was handed over
    const slow = (g: Parameters<typeof real.applyGradients>[0]) =>
      real
        .applyGradients(g)
        .then(() => new Promise((resolve) => setTimeout(resolve, 20)))
        .then(() => void done++);
    const optimizer = { applyGradients: (g: Parameters<typeof real.applyGradients>[0]) => (calls++, slow(g)) };
    const layer = new TfraEmbeddingLayer({ variable, optimizer: optimizer as never });
    const step = async (loss: () => tf.Scalar) => {
      calls = 0;
      done = 0;
      const { value, grads } = tf.variableGrads(loss);
      tf.dispose([value, ...Object.values(grads)]);
      const atReturn = calls; // before any await: a step started in the backward
      await layer.flush();
      expect(done).toBe(1);
      return [atReturn, calls];
    };
    let x = await layer.lookup(BigInt64Array.of(1n));
    expect(await step(() => tf.sum(layer.apply(x) as tf.Tensor) as tf.Scalar)).toEqual([1, 1]); // one use
    x = await layer.lookup(BigInt64Array.of(2n));
    expect(await step(() => tf.add(tf.sum(layer.apply(x) as tf.Tensor), tf.sum(layer.apply(x) as tf.Tensor)) as tf.Scalar)).toEqual([1, 1]); // two uses, summed
    x = await layer.lookup(BigInt64Array.of(3n));
    // two uses, one not on the loss: its gradient never comes, the step goes right after the backward
    expect(
      await step(() => {
        layer.apply(x);
        return tf.sum(layer.apply(x) as tf.Tensor) as tf.Scalar;
      }),
    ).toEqual([0, 1]);
    // by hand, SGD: row 1 -= lr, row 2 -= 2 lr, row 3 -= lr
    const expected = Array.from(initialRows()).map((v, i) => v - LR * ([0, 1, 2, 1][Math.floor(i / 2)] ?? 0));
    expect(await rows()).toEqual(expected);
    layer.dispose();
    variable.dispose();
  });

  it('a layer shared by two inputs of one functional model, trained by model.fit with Adam', async () => {
    const { layer, rows, variable } = await tfraFixture();
    const users = tfl.input({ shape: [1], dtype: 'int32' });
    const items = tfl.input({ shape: [1], dtype: 'int32' });
    const dot = tfl.layers.dot({ axes: 1 }).apply([layer.apply(users) as tfl.SymbolicTensor, layer.apply(items) as tfl.SymbolicTensor]) as tfl.SymbolicTensor;
    const model = tfl.model({ inputs: [users, items], outputs: dot });
    model.compile({ optimizer: tf.train.adam(0.1), loss: 'meanSquaredError' });
    // one lookup holds both towers' ids: examples 0, 1 are users, 2, 3 their items
    const ids = [2, 5, 4, 2];
    const x = await layer.lookup(BigInt64Array.from(ids, BigInt));
    const u = tf.tensor1d([0, 1], 'int32');
    const i = tf.tensor1d([2, 3], 'int32');
    const y = tf.tensor2d([[1], [0]]);
    const h = await model.fit([tf.gather(x, u), tf.gather(x, i)], y, { batchSize: 2, epochs: 1, verbose: 0 });
    await layer.flush();
    // loss = mean over 2 examples of (e_u . e_i - y)^2; d/de_u = (2 / 2) (e_u . e_i - y) e_i, and the same for e_i
    const expected = denseStep(ids, (use) => {
      const s = tf.sum(tf.mul(use([0, 1]), use([2, 3])), 1, true);
      return tf.mean(tf.square(tf.sub(s, tf.tensor2d([[1], [0]])))) as tf.Scalar;
    });
    expect(h.history.loss![0]).toBeCloseTo(((2 * 4 + 20 * 40 - 1) ** 2 + (5 * 2 + 50 * 20) ** 2) / 2, -2);
    expect(maxRelDiff(await rows(), expected)).toBeLessThan(1e-6);
    tf.dispose([u, i, y]);
    model.dispose();
    variable.dispose();
  });
});

describe('model.fit over one lookup', () => {
  it('a batchSize below the lookup batch: the first mini-batch trains its rows, the second is FAILED_PRECONDITION saying so', async () => {
    const { layer, rows, variable } = await tfraFixture();
    const input = tfl.input({ shape: [1], dtype: 'int32' });
    const model = tfl.model({ inputs: input, outputs: tfl.layers.dense({ units: 1, kernelInitializer: 'ones', biasInitializer: 'zeros' }).apply(layer.apply(input)) as tfl.SymbolicTensor });
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
    const x = await layer.lookup(BigInt64Array.of(1n, 2n, 3n, 4n));
    const y = tf.tensor2d([[0], [0], [0], [0]]);
    const err = await model.fit(x, y, { batchSize: 2, shuffle: false, epochs: 1, verbose: 0 }).then(
      () => null,
      (e: unknown) => e as EmbeddingError,
    );
    expect(err).toBeInstanceOf(EmbeddingError);
    expect(err!.code).toBe('FAILED_PRECONDITION');
    expect(err!.argument).toBe('lookup');
    expect(err!.message).toContain("batchSize of at least the lookup's 4 examples");
    await layer.flush();
    // mini-batch 1 (keys 1, 2): mean squared error over 2, d/de = (2 / 2) (e . [1, 1]) [1, 1]; SGD lr 0.5 on the rows
    const after = await rows();
    expect(after.slice(2, 6)).toEqual([1 - LR * 11, 10 - LR * 11, 2 - LR * 22, 20 - LR * 22]);
    expect(after.slice(6, 10)).toEqual([3, 30, 4, 40]);
    y.dispose();
    model.dispose();
    variable.dispose();
  });
});

describe('a lookup the layer rejects after the facade looked it up', () => {
  it("TPUEmbedding, output 'concat' with a rank-3 activation: SHAPE_MISMATCH, and the previous batch can no longer train the rejected rows", async () => {
    const table = new TableConfig({ vocabularySize: 6, dim: 1, name: 't', initializer: (s) => Float32Array.from({ length: s[0] * s[1] }, (_, i) => 10 * i) });
    const emb = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table }), b: new FeatureConfig({ table }) }, optimizer: new SGD({ learningRate: 1 }) });
    const layer = new TPUEmbeddingLayer({ embedding: emb });
    const x = await layer.lookup({ a: Int32Array.of(1, 2), b: Int32Array.of(3, 3) });
    // dense ids [2, 1]: activations [2, 1, 1], not [batch, dim]; the TPUEmbedding has dequeued them
    const err = await rejection(layer.lookup({ a: [[4], [5]], b: [[0], [0]] } as never));
    expect(err.code).toBe('SHAPE_MISMATCH');
    expect(err.argument).toBe('output');
    expectCoded(() => tf.variableGrads(() => tf.sum(layer.apply(x) as tf.Tensor) as tf.Scalar), 'FAILED_PRECONDITION', 'inputs');
    await layer.flush();
    expect(Array.from(emb.embeddingTables.get(table)!.data)).toEqual([0, 10, 20, 30, 40, 50]); // nothing trained
    // the next lookup trains its own rows: sum loss, SGD lr 1: rows 1, 2 -1, row 3 (twice) -2
    const x2 = await layer.lookup({ a: Int32Array.of(1, 2), b: Int32Array.of(3, 3) });
    tf.dispose(tf.variableGrads(() => tf.sum(layer.apply(x2) as tf.Tensor) as tf.Scalar).grads);
    await layer.flush();
    expect(Array.from(emb.embeddingTables.get(table)!.data)).toEqual([0, 9, 19, 28, 40, 50]);
    layer.dispose();
    emb.dispose();
  });
});

describe('dispose', () => {
  it('during a lookup: the lookup rejects with DISPOSED and keeps no tensor', async () => {
    const before = tf.memory().numTensors;
    const { layer, variable } = await tfraFixture();
    const pending = layer.lookup(BigInt64Array.of(1n));
    layer.dispose();
    expect((await rejection(pending)).code).toBe('DISPOSED');
    expect(tf.memory().numTensors).toBe(before);
    variable.dispose();
  });

  it('a layer applied in two models lives until the last one is disposed, then frees its weight and batch', async () => {
    const before = tf.memory().numTensors;
    const { layer, variable } = await tfraFixture();
    const in1 = tfl.input({ shape: [1], dtype: 'int32' });
    const train = tfl.model({ inputs: in1, outputs: tfl.layers.dense({ units: 1, kernelInitializer: 'ones' }).apply(layer.apply(in1)) as tfl.SymbolicTensor });
    const in2 = tfl.input({ shape: [1], dtype: 'int32' });
    const embed = tfl.model({ inputs: in2, outputs: layer.apply(in2) as tfl.SymbolicTensor });
    await layer.lookup(BigInt64Array.of(1n));
    train.dispose();
    const y = embed.predict(await layer.lookup(BigInt64Array.of(4n), { training: false })) as tf.Tensor;
    expect(Array.from(y.dataSync())).toEqual([4, 40]);
    y.dispose();
    embed.dispose();
    expect(tf.memory().numTensors).toBe(before);
    expect((await rejection(layer.lookup(BigInt64Array.of(1n)))).code).toBe('DISPOSED');
    expect(layer.dispose().numDisposedVariables).toBe(0); // idempotent
    variable.dispose();
  });
});
