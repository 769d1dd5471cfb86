// The layers inside tfjs-layers models over many steps: memory, serialization, trainable flags.
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { RaggedTensor } from '@embedstack/core';
import * as de from '@embedstack/tfra';
import { Adagrad, FeatureConfig, SGD, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { beforeAll, describe, expect, it } from 'vitest';
import { TfraEmbeddingLayer, TPUEmbeddingLayer } from '../src/index.js';
import { expectCoded, maxRelDiff, useCpu } from './helpers.js';

beforeAll(useCpu);

let uid = 0;

describe('memory over a long run', () => {
  it('200 steps (Adam head, Adagrad tables) with a predict each, a rejected lookup and a bad apply among them: tfjs tensors stay flat, 0 after dispose', async () => {
    const start = tf.memory().numTensors;
    const t = new TableConfig({ vocabularySize: 50, dim: 4, combiner: 'mean', name: 't' });
    const emb = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table: t }), b: new FeatureConfig({ table: t }) }, optimizer: new Adagrad({ learningRate: 0.1 }) });
    const layer = new TPUEmbeddingLayer({ embedding: emb });
    const input = tfl.input({ shape: [1], dtype: 'int32' });
    const model = tfl.model({ inputs: input, outputs: tfl.layers.dense({ units: 1 }).apply(layer.apply(input)) as tfl.SymbolicTensor });
    const opt = tf.train.adam(0.01);
    const labels = tf.tensor2d([1, 0, 1, 0], [4, 1]);
    const counts: number[] = [];
    for (let s = 0; s < 200; s++) {
      const x = await layer.lookup({ a: RaggedTensor.fromNestedArray([[1, 2], [3], [], [4, 5, 6]], { dtype: 'int32' }), b: Int32Array.of(1, 2, 3, 4) });
      tf.dispose(opt.minimize(() => tf.losses.sigmoidCrossEntropy(labels, model.apply(x) as tf.Tensor) as tf.Scalar, true)!);
      await layer.flush();
      if (s === 100) {
        // errors mid-run: a lookup the facade rejects (id outside the table), an apply on bad positions
        await expect(layer.lookup({ a: RaggedTensor.fromNestedArray([[99], [], [], []], { dtype: 'int32' }), b: Int32Array.of(1, 2, 3, 4) })).rejects.toThrow(/features\.a/);
        const bad = tf.tensor1d([7], 'int32');
        expectCoded(() => tf.tidy(() => model.apply(bad) as tf.Tensor), 'OUT_OF_RANGE', 'inputs');
        bad.dispose();
      }
      const p = model.predict(await layer.lookup({ a: RaggedTensor.fromNestedArray([[1], [], [2], [3]], { dtype: 'int32' }), b: Int32Array.of(1, 2, 3, 4) }, { training: false })) as tf.Tensor;
      p.dispose();
      if (s % 50 === 0 || s === 199) counts.push(tf.memory().numTensors);
    }
    expect(emb.step).toBe(200);
    expect(new Set(counts).size).toBe(1); // flat from the first step on (Adam's slots made at step 0)
    labels.dispose();
    model.dispose();
    opt.dispose();
    emb.dispose();
    expect(tf.memory().numTensors).toBe(start);
  });
});

describe('tfjs serialization and flags', () => {
  it('model.save to a custom IOHandler holds the anchor and the dense weights; a model rebuilt in code loads them and predicts the same', async () => {
    const variable = new de.Variable({ keyDtype: 'int64', dim: 2, name: `tfjs_integration_${uid++}` });
    await variable.upsert(BigInt64Array.of(1n, 2n), Float32Array.of(1, 2, 3, 4));
    const optimizer = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 0.1 }));
    const build = () => {
      const layer = new TfraEmbeddingLayer({ variable, optimizer, name: 'emb' });
      const input = tfl.input({ shape: [1], dtype: 'int32', name: 'positions' });
      const model = tfl.model({ inputs: input, outputs: tfl.layers.dense({ units: 1, name: 'head' }).apply(layer.apply(input)) as tfl.SymbolicTensor });
      return { layer, model };
    };
    const a = build();
    expect(a.layer.getConfig()).toMatchObject({ name: 'emb', trainable: true });
    const ax = await a.layer.lookup(BigInt64Array.of(1n, 2n));
    tf.dispose(tf.train.sgd(0.5).minimize(() => tf.sum(a.model.apply(ax) as tf.Tensor) as tf.Scalar, true)!); // the head moves off its initial weights
    await a.layer.flush();
    let saved: tf.io.ModelArtifacts | undefined;
    await a.model.save({
      save: async (artifacts) => {
        saved = artifacts;
        return { modelArtifactsInfo: { dateSaved: new Date(), modelTopologyType: 'JSON' } };
      },
    });
    expect(saved!.weightSpecs!.map((w) => w.name)).toEqual(['emb/sparse_anchor', 'head/kernel', 'head/bias']);
    const weights = tf.io.decodeWeights(saved!.weightData!, saved!.weightSpecs!);
    expect(weights['emb/sparse_anchor']!.dataSync()[0]).toBe(0); // a tfjs optimizer leaves the anchor at 0
    // the layers are not registered: tfjs cannot rebuild them from the topology (README: rebuild in code)
    await expect(tfl.loadLayersModel({ load: async () => saved! })).rejects.toThrow(/Unknown layer: EmbedstackTfraEmbedding/);
    a.model.dispose();
    const b = build();
    b.model.loadWeights(weights);
    const bx = await b.layer.lookup(BigInt64Array.of(1n, 2n), { training: false });
    const got = b.model.predict(bx) as tf.Tensor;
    // by hand: head kernel k, bias c from the saved weights; rows 1, 2 after the sparse step
    const k = weights['head/kernel']!.dataSync();
    const c = weights['head/bias']!.dataSync()[0]!;
    const rows = (await variable.lookup(BigInt64Array.of(1n, 2n))).data;
    expect(maxRelDiff(got.dataSync(), [0, 1].map((i) => rows[2 * i]! * k[0]! + rows[2 * i + 1]! * k[1]! + c))).toBeLessThan(1e-6);
    tf.dispose([got, ...Object.values(weights)]);
    b.model.dispose();
    variable.dispose();
  });

  it('trainable = false freezes the rows (no sparse step) while the head trains; true again trains them', async () => {
    const variable = new de.Variable({ keyDtype: 'int64', dim: 2, name: `tfjs_integration_${uid++}` });
    await variable.upsert(BigInt64Array.of(1n, 2n), Float32Array.of(1, 2, 3, 4));
    const layer = new TfraEmbeddingLayer({ variable, optimizer: de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 })) });
    const input = tfl.input({ shape: [], dtype: 'int32' });
    const head = tfl.layers.dense({ units: 1, kernelInitializer: 'ones', biasInitializer: 'zeros' });
    const model = tfl.model({ inputs: input, outputs: head.apply(layer.apply(input)) as tfl.SymbolicTensor });
    const opt = tf.train.sgd(0.1);
    const loss = (x: tf.Tensor) => () => tf.sum(model.apply(x) as tf.Tensor) as tf.Scalar;
    layer.trainable = false;
    expect(model.trainableWeights.map((w) => w.originalName)).toEqual(head.trainableWeights.map((w) => w.originalName));
    opt.minimize(loss(await layer.lookup(BigInt64Array.of(1n, 2n))));
    await layer.flush();
    expect(Array.from((await variable.lookup(BigInt64Array.of(1n, 2n))).data)).toEqual([1, 2, 3, 4]);
    // d loss / d kernel = Σ rows = [4, 6]: kernel 1 - 0.1 * [4, 6]
    expect(maxRelDiff(head.getWeights()[0]!.dataSync(), [1 - 0.4, 1 - 0.6])).toBeLessThan(1e-6);
    layer.trainable = true;
    opt.minimize(loss(await layer.lookup(BigInt64Array.of(1n, 2n))));
    await layer.flush();
    // d loss / d row = kernel [0.6, 0.4] per example; SGD lr 1
    expect(maxRelDiff((await variable.lookup(BigInt64Array.of(1n, 2n))).data, [1 - 0.6, 2 - 0.4, 3 - 0.6, 4 - 0.4])).toBeLessThan(1e-6);
    model.dispose();
    opt.dispose();
    variable.dispose();
  });
});

describe("gradients through the layers' shape handling", () => {
  it("output 'list' with a sequence feature: each part's gradient reaches its rows (padding and the truncated id get none)", async () => {
    const t1 = new TableConfig({ vocabularySize: 4, dim: 2, combiner: 'sum', name: 'a', initializer: (s) => Float32Array.from({ length: s[0] * s[1] }, (_, i) => i) });
    const t2 = new TableConfig({ vocabularySize: 3, dim: 1, name: 'b', initializer: (s) => Float32Array.from({ length: s[0] * s[1] }, (_, i) => 10 + i) });
    const emb = new TPUEmbedding({ featureConfig: { a: new FeatureConfig({ table: t1 }), b: new FeatureConfig({ table: t2, maxSequenceLength: 2 }) }, optimizer: new SGD({ learningRate: 1 }) });
    const layer = new TPUEmbeddingLayer({ embedding: emb, output: 'list' });
    const x = await layer.lookup({ a: RaggedTensor.fromNestedArray([[0, 1], [3]], { dtype: 'int32' }), b: RaggedTensor.fromNestedArray([[2], [0, 1, 2]], { dtype: 'int32' }) });
    const { value, grads } = tf.variableGrads(() => {
      const [a, b] = layer.apply(x) as tf.Tensor[];
      return tf.add(tf.sum(tf.mul(a!, tf.tensor2d([[1, 2], [3, 4]]))), tf.sum(tf.mul(b!, tf.tensor3d([[[5], [6]], [[7], [8]]])))) as tf.Scalar;
    });
    tf.dispose([value, ...Object.values(grads)]);
    await layer.flush();
    // a (sum): rows 0 and 1 get [1, 2], row 3 gets [3, 4]; b (sequence of 2): example 0 = [2, pad], example 1 = [0, 1] (2 dropped)
    expect(Array.from(emb.embeddingTables.get(t1)!.data)).toEqual([0 - 1, 1 - 2, 2 - 1, 3 - 2, 4, 5, 6 - 3, 7 - 4]);
    expect(Array.from(emb.embeddingTables.get(t2)!.data)).toEqual([10 - 7, 11 - 8, 12 - 5]);
    layer.dispose();
    emb.dispose();
  });

  it('tfra maxNorm: the clipped row trains as tfjs autodiff of v * maxNorm / |v| says', async () => {
    const variable = new de.Variable({ keyDtype: 'int64', dim: 2, name: `tfjs_integration_${uid++}` });
    await variable.upsert(BigInt64Array.of(1n), Float32Array.of(3, 4));
    const layer = new TfraEmbeddingLayer({ variable, optimizer: de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 })), maxNorm: 1 });
    const x = await layer.lookup(BigInt64Array.of(1n));
    const { value, grads } = tf.variableGrads(() => {
      const e = layer.apply(x) as tf.Tensor;
      expect(maxRelDiff(e.dataSync(), [0.6, 0.8])).toBeLessThan(1e-6);
      return tf.sum(tf.mul(e, tf.tensor2d([[1, 2]]))) as tf.Scalar;
    });
    tf.dispose([value, ...Object.values(grads)]);
    await layer.flush();
    const expected = tf.tidy(() => {
      const r = tf.tensor1d([3, 4]);
      const [g] = tf.grads((v: tf.Tensor) => tf.sum(tf.mul(tf.div(v, tf.norm(v)), tf.tensor1d([1, 2]))))([r]);
      return Array.from(tf.sub(r, g!).dataSync());
    });
    expect(maxRelDiff((await variable.lookup(BigInt64Array.of(1n))).data, expected)).toBeLessThan(1e-6);
    layer.dispose();
    variable.dispose();
  });
});

describe("output 'concat' over features of mixed widths", () => {
  it('widths 1, 31, 32 and 40 (both row-copy paths): forward side by side, each gradient back to its own table', async () => {
    const dims = [1, 31, 32, 40];
    const VOCAB = 5;
    const BATCH = 3;
    const tables = dims.map((dim, f) => new TableConfig({ vocabularySize: VOCAB, dim, name: `t${f}`, initializer: (s) => Float32Array.from({ length: s[0] * s[1] }, (_, i) => 1000 * f + i) }));
    // feature names sort as f0..f3: the concatenation order is the table order
    const emb = new TPUEmbedding({ featureConfig: Object.fromEntries(tables.map((t, f) => [`f${f}`, new FeatureConfig({ table: t })])), optimizer: new SGD({ learningRate: 1 }) });
    const layer = new TPUEmbeddingLayer({ embedding: emb });
    const ids = [Int32Array.of(0, 4, 2), Int32Array.of(1, 1, 3), Int32Array.of(4, 0, 0), Int32Array.of(2, 3, 4)];
    const x = await layer.lookup(Object.fromEntries(ids.map((v, f) => [`f${f}`, v])));
    const total = dims.reduce((a, d) => a + d, 0);
    const upstream = Float32Array.from({ length: BATCH * total }, (_, i) => (i % 7) - 3);
    const expectedForward: number[] = [];
    for (let r = 0; r < BATCH; r++) dims.forEach((dim, f) => { for (let j = 0; j < dim; j++) expectedForward.push(1000 * f + ids[f]![r]! * dim + j); });
    const { value, grads } = tf.variableGrads(() => {
      const e = layer.apply(x) as tf.Tensor;
      expect(e.shape).toEqual([BATCH, total]);
      expect(Array.from(e.dataSync())).toEqual(expectedForward);
      return tf.sum(tf.mul(e, tf.tensor2d(upstream, [BATCH, total]))) as tf.Scalar;
    });
    tf.dispose([value, ...Object.values(grads)]);
    await layer.flush();
    dims.forEach((dim, f) => {
      const want = Float32Array.from({ length: VOCAB * dim }, (_, i) => 1000 * f + i);
      const col = dims.slice(0, f).reduce((a, d) => a + d, 0);
      for (let r = 0; r < BATCH; r++) {
        for (let j = 0; j < dim; j++) {
          const k = ids[f]![r]! * dim + j;
          want[k] = want[k]! - upstream[r * total + col + j]!;
        }
      }
      expect(Array.from(emb.embeddingTables.get(tables[f]!)!.data), `table ${f}`).toEqual(Array.from(want));
    });
    layer.dispose();
    emb.dispose();
  });
});
