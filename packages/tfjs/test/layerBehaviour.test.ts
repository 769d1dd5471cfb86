import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { EmbeddingError, RaggedTensor, SparseTensor } from '@embedstack/core';
import * as de from '@embedstack/tfra';
import { FeatureConfig, SGD, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { beforeAll, describe, expect, it } from 'vitest';
import { TfraEmbeddingLayer, TPUEmbeddingLayer, toTf } from '../src/index.js';
import { expectCoded, maxRelDiff, useCpu } from './helpers.js';

beforeAll(useCpu);

let uid = 0;
const LR = 0.5;

/** A tfra int64 variable with row k = [k, 10k] for keys 0..9, an SGD layer over it (one row per id). */
async function tfraFixture(options: Partial<ConstructorParameters<typeof TfraEmbeddingLayer>[0]> = {}) {
  const variable = new de.Variable({ keyDtype: 'int64', dim: 2, name: `tfjs_behaviour_${uid++}` });
  const keys = BigInt64Array.from({ length: 10 }, (_, i) => BigInt(i));
  await variable.upsert(keys, Float32Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? i / 2 : 5 * i - 5)));
  const optimizer = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: LR }));
  const layer = new TfraEmbeddingLayer({ variable, optimizer, ...options });
  const rows = async () => Array.from((await variable.lookup(keys)).data);
  return { variable, optimizer, layer, rows };
}

async function rejects(p: Promise<unknown>, code: string, argument?: string): Promise<EmbeddingError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EmbeddingError);
  expect((err as EmbeddingError).code).toBe(code);
  if (argument !== undefined) {
    expect((err as EmbeddingError).argument).toBe(argument);
    expect((err as Error).message).toContain(argument);
  }
  return err as EmbeddingError;
}

describe('the forward and backward contract', () => {
  it('apply gives the looked-up rows; tf.variableGrads applies the sparse step (duplicates summed) and gives the anchor a zero gradient', async () => {
    const { layer, rows, variable } = await tfraFixture();
    const x = await layer.lookup(BigInt64Array.of(3n, 1n, 3n));
    const before = await rows();
    const { value, grads } = tf.variableGrads(() => {
      const e = layer.apply(x) as tf.Tensor;
      expect(Array.from(e.dataSync())).toEqual([3, 30, 1, 10, 3, 30]); // rows 3, 1, 3 as upserted
      return tf.sum(e) as tf.Scalar; // d loss / d e = 1 everywhere
    });
    // keyed by the variable's unique name (tfjs numbers a repeated name: sparse_anchor_1, ...)
    expect(Object.keys(grads)).toEqual([layer.trainableWeights[0]!.name]);
    expect(Array.from(Object.values(grads)[0]!.dataSync())).toEqual([0]);
    await layer.flush();
    const after = await rows();
    // SGD by hand: row 3 seen twice -> -2 * lr per element, row 1 once -> -lr, others unchanged
    const expected = before.map((v, i) => v - LR * (Math.floor(i / 2) === 3 ? 2 : Math.floor(i / 2) === 1 ? 1 : 0));
    expect(after).toEqual(expected);
    tf.dispose([value, ...Object.values(grads)]);
    layer.dispose();
    variable.dispose();
  });

  it('sliced positions select those examples; the others get a zero gradient', async () => {
    const { layer, rows, variable } = await tfraFixture();
    const x = await layer.lookup(tf.tensor1d([2, 4, 6, 8], 'int32')); // int32 ids widened to the int64 variable
    const before = await rows();
    const part = tf.slice(x, [1], [2]); // examples 1 and 2: ids 4 and 6
    const { value, grads } = tf.variableGrads(() => {
      const e = layer.apply(part) as tf.Tensor;
      expect(e.shape).toEqual([2, 2]);
      expect(Array.from(e.dataSync())).toEqual([4, 40, 6, 60]);
      return tf.sum(tf.mul(e, tf.tensor2d([[1, 2], [3, 4]]))) as tf.Scalar;
    });
    await layer.flush();
    const after = await rows();
    const step: Record<number, number> = { 8: 1, 9: 2, 12: 3, 13: 4 }; // row 4 gets [1, 2], row 6 gets [3, 4]
    const expected = before.map((v, i) => v - LR * (step[i] ?? 0));
    expect(after).toEqual(expected);
    tf.dispose([value, part, ...Object.values(grads)]);
    layer.dispose();
    variable.dispose();
  });

  it('a layer can start a tf.sequential model (inputShape [1]); fit trains the rows', async () => {
    const { variable, optimizer, rows } = await tfraFixture();
    const layer = new TfraEmbeddingLayer({ variable, optimizer, inputShape: [1] });
    const model = tfl.sequential({ layers: [layer, tfl.layers.dense({ units: 1, kernelInitializer: 'ones', biasInitializer: 'zeros' })] });
    expect(model.outputs[0]!.shape).toEqual([null, 1]);
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
    const x = await layer.lookup(BigInt64Array.of(2n));
    const y = tf.tensor2d([[0]]);
    await model.fit(x, y, { epochs: 1, verbose: 0 });
    await layer.flush();
    // loss (w·e + b - 0)^2 with w = [1, 1], e = [2, 20], b = 0: d/de = 2 * 22 * [1, 1]; SGD lr 0.5 on the row
    expect((await rows()).slice(4, 6)).toEqual([2 - 0.5 * 44, 20 - 0.5 * 44]);
    // the dense layer took tfjs's SGD step (lr 0.1) on the same loss: w = [1, 1] - 0.1 * 44 * e, b = -0.1 * 44
    const served = await layer.lookup(BigInt64Array.of(2n), { training: false });
    const p = model.predict(served) as tf.Tensor;
    const e = [2 - 0.5 * 44, 20 - 0.5 * 44];
    expect(p.dataSync()[0]).toBeCloseTo((1 - 0.1 * 44 * 2) * e[0]! + (1 - 0.1 * 44 * 20) * e[1]! - 0.1 * 44, 3);
    tf.dispose([p, served]);
    expectCoded(() => new TfraEmbeddingLayer({ variable, optimizer, inputShape: [2] as never }), 'INVALID_ARGUMENT', 'options.inputShape');
    y.dispose();
    model.dispose();
    variable.dispose();
  });

  it('training: false reads without recording or inserting; its backward is FAILED_PRECONDITION', async () => {
    const { layer, rows, variable } = await tfraFixture();
    const x = await layer.lookup(BigInt64Array.of(2n, 42n), { training: false }); // 42 is not in the variable
    const y = layer.apply(x) as tf.Tensor;
    expect(Array.from(y.dataSync())).toEqual([2, 20, 0, 0]); // missing key: the initializer's zeros
    expectCoded(() => tf.variableGrads(() => tf.sum(layer.apply(x) as tf.Tensor) as tf.Scalar), 'FAILED_PRECONDITION', 'training');
    expect(await variable.size()).toBe(10);
    const pooled = new TfraEmbeddingLayer({ variable, optimizer: layer.optimizer, combiner: 'mean' });
    const z = pooled.apply(await pooled.lookup(RaggedTensor.fromNestedArray([[1n, 3n, 42n]]), { training: false })) as tf.Tensor;
    expect(Array.from(z.dataSync())).toEqual([4 / 3, 40 / 3].map(Math.fround));
    expect(await variable.size()).toBe(10);
    expect((await rows()).slice(0, 4)).toEqual([0, 0, 1, 10]);
    tf.dispose([y, z]);
    layer.dispose();
    pooled.dispose();
    variable.dispose();
  });

  it('model.predict on the positions returns the activations (forward only, nothing trained)', async () => {
    const { layer, rows, variable } = await tfraFixture();
    const input = tfl.input({ shape: [1], dtype: 'int32' }); // predict feeds [n] as [n, 1]
    const model = tfl.model({ inputs: input, outputs: layer.apply(input) as tfl.SymbolicTensor });
    const x = await layer.lookup(BigInt64Array.of(9n, 0n));
    const before = await rows();
    const y = model.predict(x, { batchSize: 1 }) as tf.Tensor; // predict slices the batch into size-1 batches
    expect(Array.from(y.dataSync())).toEqual([9, 90, 0, 0]);
    await layer.flush();
    expect(await rows()).toEqual(before);
    y.dispose();
    model.dispose();
    variable.dispose();
  });

  it('model.fit (shuffled, one batch of the lookup per epoch) trains the same rows as a minimize step', async () => {
    const ids = BigInt64Array.of(3n, 1n, 3n, 7n);
    const labels = tf.tensor2d([1, 0, 1, 0], [4, 1]);
    const run = async (fit: boolean) => {
      const { layer, rows, variable } = await tfraFixture();
      const input = tfl.input({ shape: [1], dtype: 'int32' });
      const model = tfl.model({ inputs: input, outputs: tfl.layers.dense({ units: 1, kernelInitializer: 'ones', biasInitializer: 'zeros' }).apply(layer.apply(input)) as tfl.SymbolicTensor });
      const opt = tf.train.sgd(0.1);
      const x = await layer.lookup(ids);
      if (fit) {
        model.compile({ optimizer: opt, loss: 'meanSquaredError' });
        await model.fit(x, labels, { batchSize: 4, epochs: 1, shuffle: true, verbose: 0 });
      } else opt.minimize(() => tf.losses.meanSquaredError(labels, model.apply(x) as tf.Tensor) as tf.Scalar);
      await layer.flush();
      const out = await rows();
      model.dispose();
      opt.dispose();
      variable.dispose();
      return out;
    };
    const byFit = await run(true);
    const byMinimize = await run(false);
    expect(maxRelDiff(byFit, byMinimize)).toBeLessThan(1e-6); // the same sums, in another order
    expect(byFit[6]).not.toBe(3); // row 3 moved
    labels.dispose();
  });

  it("output: 'list' returns one tensor per feature (a sequence feature keeps [batch, L, dim])", async () => {
    const t1 = new TableConfig({ vocabularySize: 4, dim: 2, combiner: 'sum', name: 'a', initializer: (s) => Float32Array.from({ length: s[0] * s[1] }, (_, i) => i) });
    const t2 = new TableConfig({ vocabularySize: 3, dim: 1, name: 'b', initializer: (s) => Float32Array.from({ length: s[0] * s[1] }, (_, i) => 10 + i) });
    const emb = new TPUEmbedding({
      featureConfig: { a: new FeatureConfig({ table: t1 }), b: new FeatureConfig({ table: t2, maxSequenceLength: 2 }) },
      optimizer: new SGD({ learningRate: 1 }),
    });
    const layer = new TPUEmbeddingLayer({ embedding: emb, output: 'list' });
    const input = tfl.input({ shape: [], dtype: 'int32' });
    const outs = layer.apply(input) as tfl.SymbolicTensor[];
    expect(outs.map((o) => o.shape)).toEqual([[null, 2], [null, 2, 1]]);
    const x = await layer.lookup({ a: RaggedTensor.fromNestedArray([[0, 1], [3]], { dtype: 'int32' }), b: RaggedTensor.fromNestedArray([[2], [0, 1, 2]], { dtype: 'int32' }) });
    const [a, b] = layer.apply(x) as tf.Tensor[];
    expect(a!.shape).toEqual([2, 2]);
    expect(Array.from(a!.dataSync())).toEqual([0 + 2, 1 + 3, 6, 7]);
    expect(b!.shape).toEqual([2, 2, 1]);
    expect(Array.from(b!.dataSync())).toEqual([12, 0, 10, 11]); // zero padded; the third id dropped
    tf.dispose([a!, b!]);
    layer.dispose();
    emb.dispose();
  });

  it("concat with a sequence or outputShape feature beside another: INVALID_ARGUMENT naming options.output at construction ('list' takes them)", async () => {
    const t = new TableConfig({ vocabularySize: 4, dim: 2, name: 't' });
    const seq = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table: t }), s: new FeatureConfig({ table: t, maxSequenceLength: 2 }) }, optimizer: new SGD({ learningRate: 1 }) });
    expectCoded(() => new TPUEmbeddingLayer({ embedding: seq }), 'INVALID_ARGUMENT', 'options.output');
    expectCoded(() => new TPUEmbeddingLayer({ embedding: seq, output: 'concat' }), 'INVALID_ARGUMENT', 'options.output');
    const shaped = new TPUEmbedding({ featureConfig: [new FeatureConfig({ table: t, outputShape: [2, 3] }), new FeatureConfig({ table: t })], optimizer: new SGD({ learningRate: 1 }) });
    expectCoded(() => new TPUEmbeddingLayer({ embedding: shaped }), 'INVALID_ARGUMENT', 'options.output');
    new TPUEmbeddingLayer({ embedding: seq, output: 'list' }).dispose();
    // one feature alone is returned as it is, whatever its rank
    const one = new TPUEmbedding({ featureConfig: { s: new FeatureConfig({ table: t, maxSequenceLength: 2 }) }, optimizer: new SGD({ learningRate: 1 }) });
    const layer = new TPUEmbeddingLayer({ embedding: one });
    const y = layer.apply(await layer.lookup({ s: RaggedTensor.fromNestedArray([[1], [2, 3]], { dtype: 'int32' }) })) as tf.Tensor;
    expect(y.shape).toEqual([2, 2, 2]);
    y.dispose();
    layer.dispose();
    for (const e of [seq, shaped, one]) e.dispose();
  });
});

describe('errors', () => {
  it('layer options: coded errors naming the option', async () => {
    const { variable, optimizer } = await tfraFixture();
    expectCoded(() => new TfraEmbeddingLayer(null as never), 'INVALID_TYPE', 'options');
    expectCoded(() => new TfraEmbeddingLayer({ variable: {} as never, optimizer }), 'INVALID_TYPE', 'options.variable');
    expectCoded(() => new TfraEmbeddingLayer({ variable, optimizer: {} as never }), 'INVALID_TYPE', 'options.optimizer');
    expectCoded(() => new TfraEmbeddingLayer({ variable, optimizer, combiner: 'max' as never }), 'INVALID_ARGUMENT', 'combiner');
    expectCoded(() => new TfraEmbeddingLayer({ variable, optimizer, maxNorm: -1 }), 'INVALID_ARGUMENT', 'options.maxNorm');
    expectCoded(() => new TfraEmbeddingLayer({ variable, optimizer, inputLength: 0 }), 'INVALID_ARGUMENT', 'options.inputLength');
    expectCoded(() => new TfraEmbeddingLayer({ variable, optimizer, inputLength: 2, combiner: 'sum' }), 'INVALID_ARGUMENT', 'options.inputLength');
    expectCoded(() => new TfraEmbeddingLayer({ variable, optimizer, output: 'list' } as never), 'INVALID_ARGUMENT', 'options.output');
    expectCoded(() => new TPUEmbeddingLayer({ embedding: variable as never }), 'INVALID_TYPE', 'options.embedding');
    expectCoded(() => new TPUEmbeddingLayer({ embedding: new TPUEmbedding({ featureConfig: new FeatureConfig({ table: new TableConfig({ vocabularySize: 2, dim: 1 }) }) }), output: 'both' as never }), 'INVALID_ARGUMENT', 'options.output');
    variable.dispose();
  });

  it('lookup: coded errors naming ids / weights; a rejected lookup keeps the previous batch', async () => {
    const { layer, variable } = await tfraFixture();
    const x = await layer.lookup([1n, 2n]);
    await rejects(layer.lookup(RaggedTensor.fromNestedArray([[1n]])), 'INVALID_TYPE', 'ids');
    await rejects(layer.lookup(tf.tensor2d([[1, 2]], [1, 2], 'int32')), 'SHAPE_MISMATCH', 'ids');
    await rejects(layer.lookup(tf.tensor1d([1.5])), 'INVALID_TYPE', 'ids');
    await rejects(layer.lookup('ids' as never), 'INVALID_TYPE', 'ids');
    await rejects(layer.lookup([1n], { weights: [1] }), 'INVALID_ARGUMENT', 'options.weights');
    await rejects(layer.lookup([1n], { other: 1 } as never), 'INVALID_ARGUMENT', 'options.other');
    const y = layer.apply(x) as tf.Tensor; // still the batch of [1, 2]
    expect(Array.from(y.dataSync())).toEqual([1, 10, 2, 20]);
    y.dispose();
    const int32 = new de.Variable({ keyDtype: 'int32', dim: 2, name: `tfjs_behaviour_${uid++}` });
    const l32 = new TfraEmbeddingLayer({ variable: int32, optimizer: de.DynamicEmbeddingOptimizer(new de.optimizers.SGD()), combiner: 'sum' });
    await rejects(l32.lookup(BigInt64Array.of(1n, 2n ** 33n)), 'OUT_OF_RANGE', 'ids');
    await rejects(l32.lookup(tf.zeros([1, 1, 1], 'int32') as tf.Tensor), 'SHAPE_MISMATCH', 'ids');
    const layoutError = await rejects(l32.lookup(RaggedTensor.fromNestedArray([[1], [2, 3]], { dtype: 'int32' }), { weights: RaggedTensor.fromNestedArray([[1], [2]], { dtype: 'float32' }) }), 'SHAPE_MISMATCH', 'options.weights');
    expect(layoutError.message).toContain("but received denseShape [2, 1] where the ids' is [2, 2]"); // rows of 1 and 2 ids, as sparse [2, 2]
    const sparseIds = new SparseTensor([[0, 0], [1, 0]], Int32Array.of(1, 2), [2, 2]);
    const sparseError = await rejects(l32.lookup(sparseIds, { weights: new SparseTensor([[0, 0], [1, 1]], Float32Array.of(1, 1), [2, 2]) }), 'SHAPE_MISMATCH', 'options.weights');
    expect(sparseError.message).toBe("Expected options.weights to have the layout (rows and positions) of ids but received entry 1 at [1, 1] where the ids' is at [1, 0]");
    // a positions tensor from toTf of int64 keys names the keys registered beside it
    const pos = toTf(new (await import('@embedstack/core')).Tensor(BigInt64Array.of(5n, 6n)));
    const z = l32.apply(await l32.lookup(pos)) as tf.Tensor;
    expect(z.shape).toEqual([2, 2]); // ids [batch] with a combiner: one id per example
    tf.dispose([pos, z]);
    layer.dispose();
    l32.dispose();
    variable.dispose();
    int32.dispose();
  });

  it('apply and backward: FAILED_PRECONDITION before lookup, on a second backward, for training: false; bad positions', async () => {
    const { layer, variable } = await tfraFixture();
    expectCoded(() => layer.apply(tf.tensor1d([0], 'int32')), 'FAILED_PRECONDITION', 'inputs');
    const x = await layer.lookup([1n, 2n]);
    expectCoded(() => layer.apply(tf.tensor1d([0, 2], 'int32')), 'OUT_OF_RANGE', 'inputs');
    expectCoded(() => layer.apply(tf.tensor1d([0, 0.5])), 'OUT_OF_RANGE', 'inputs');
    expectCoded(() => layer.apply(tf.tensor1d([true, false], 'bool')), 'INVALID_TYPE', 'inputs');
    const loss = () => tf.sum(layer.apply(x) as tf.Tensor) as tf.Scalar;
    tf.dispose(tf.variableGrads(loss).grads);
    expectCoded(() => tf.variableGrads(loss), 'FAILED_PRECONDITION', 'lookup');
    await layer.flush();
    layer.dispose();
    await rejects(layer.lookup([1n]), 'DISPOSED');
    variable.dispose();

    const t = new TableConfig({ vocabularySize: 4, dim: 2, name: 't' });
    const emb = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table: t }) }, optimizer: new SGD({ learningRate: 1 }) });
    const tl = new TPUEmbeddingLayer({ embedding: emb });
    const xa = await tl.lookup({ a: Int32Array.of(1, 2) }, { training: false });
    expectCoded(() => tf.variableGrads(() => tf.sum(tl.apply(xa) as tf.Tensor) as tf.Scalar), 'FAILED_PRECONDITION', 'training');
    // the facade's errors pass through, coded and naming the feature
    await rejects(tl.lookup({ a: Int32Array.of(1, 9) }), 'OUT_OF_RANGE', 'features.a');
    tl.dispose();
    emb.dispose();
  });

  it("a failing sparse step surfaces from flush() (the facade's coded error), once", async () => {
    const t = new TableConfig({ vocabularySize: 4, dim: 2, name: 't' });
    const emb = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table: t }) } }); // no optimizer
    const layer = new TPUEmbeddingLayer({ embedding: emb });
    const x = await layer.lookup({ a: Int32Array.of(1, 2) });
    tf.dispose(tf.variableGrads(() => tf.sum(layer.apply(x) as tf.Tensor) as tf.Scalar).grads);
    await rejects(layer.flush(), 'FAILED_PRECONDITION', 'optimizer');
    await layer.flush(); // reported once
    layer.dispose();
    emb.dispose();
  });
});
