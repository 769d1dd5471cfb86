import { referenceBackend, Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { FeatureConfig, TableConfig } from './config.js';
import { Adagrad, AdagradMomentum, Adam, FTRL, SGD } from './optimizers.js';
import { ReplicaStrategy } from './strategy.js';
import { iota, rows } from '../test/testUtil.js';
import { TPUEmbedding } from './tpuEmbedding.js';

describe('config objects expose their options as read-only properties', () => {
  it('TableConfig: values and defaults', () => {
    const t = new TableConfig({ vocabularySize: 10, dim: 16 });
    expect([t.vocabularySize, t.dim, t.combiner, t.name, t.optimizer]).toEqual([10, 16, 'mean', undefined, undefined]);
    expect(t.initializer).toEqual({ kind: 'truncatedNormal', mean: 0, std: 0.25 });
    const opt = new SGD();
    const n = new TableConfig({ vocabularySize: 3, dim: 2, combiner: 'sqrtn', name: 'n', optimizer: opt, initializer: iota });
    expect([n.combiner, n.name, n.optimizer, n.initializer]).toEqual(['sqrtn', 'n', opt, iota]);
    expect(() => {
      (n as { dim: number }).dim = 3;
    }).toThrow(TypeError);
  });

  it('FeatureConfig and ReplicaStrategy: values and defaults', () => {
    const t = new TableConfig({ vocabularySize: 10, dim: 2 });
    const f = new FeatureConfig({ table: t });
    expect([f.table, f.maxSequenceLength, f.outputShape, f.name]).toEqual([t, 0, undefined, undefined]);
    const g = new FeatureConfig({ table: t, maxSequenceLength: 5, outputShape: [3], name: 'g' });
    expect([g.maxSequenceLength, g.outputShape, g.name]).toEqual([5, [3], 'g']);
    expect([new ReplicaStrategy().numReplicas, new ReplicaStrategy().numHosts]).toEqual([1, 1]);
    const s = new ReplicaStrategy({ numReplicas: 4, numHosts: 3 });
    expect([s.numReplicas, s.numHosts]).toEqual([4, 3]);
  });

  it('optimizers: the defaults of the spec', () => {
    const sgd = new SGD();
    expect([sgd.learningRate, sgd.useGradientAccumulation, sgd.clipWeightMin, sgd.clipWeightMax, sgd.weightDecayFactor, sgd.clipvalue, sgd.slotVariableCreationFn]).toEqual([
      0.01,
      true,
      null,
      null,
      null,
      null,
      null,
    ]);
    expect(sgd.multiplyWeightDecayFactorByLearningRate).toBe(false);
    expect(sgd.slotNames).toEqual([]);
    const ada = new Adagrad();
    expect([ada.learningRate, ada.initialAccumulatorValue, ada.slotNames]).toEqual([0.001, 0.1, ['accumulators']]);
    const adam = new Adam();
    expect([adam.learningRate, adam.beta1, adam.beta2, adam.epsilon, adam.lazyAdam, adam.sumInsideSqrt, adam.slotNames]).toEqual([
      0.001,
      0.9,
      0.999,
      1e-7,
      true,
      true,
      ['momenta', 'velocities'],
    ]);
    const ftrl = new FTRL();
    expect([ftrl.learningRate, ftrl.learningRatePower, ftrl.l1RegularizationStrength, ftrl.l2RegularizationStrength, ftrl.beta, ftrl.initialAccumulatorValue]).toEqual([
      0.001,
      -0.5,
      0,
      0,
      0,
      0.1,
    ]);
    expect(ftrl.slotNames).toEqual(['accumulators', 'linears']);
    const am = new AdagradMomentum();
    expect([am.learningRate, am.momentum, am.useNesterov, am.exponent, am.beta2, am.epsilon, am.slotNames]).toEqual([
      0.001,
      0,
      false,
      2,
      1,
      1e-10,
      ['accumulators', 'momenta'],
    ]);
  });

  it('optimizers: given options are kept and mapped onto the core spec', () => {
    const lr = () => 0.3;
    const o = new Adagrad({ learningRate: lr, clipvalue: [null, 2], clipWeightMin: -1, weightDecayFactor: 0.5, multiplyWeightDecayFactorByLearningRate: true });
    expect(o.learningRate).toBe(lr);
    expect(o.clipvalue).toEqual([null, 2]);
    expect(o.learningRateAt(1)).toBe(0.3);
    expect([o.spec.kind, o.spec.clipGradMin, o.spec.clipGradMax, o.spec.clipWeightMin, o.spec.clipWeightMax, o.spec.weightDecayFactor]).toEqual([
      'adagrad',
      -Infinity,
      2,
      -1,
      Infinity,
      0.5,
    ]);
    const s = new SGD({ clipvalue: 3 });
    expect([s.clipvalue, s.spec.clipGradMin, s.spec.clipGradMax]).toEqual([3, -3, 3]);
    expect(new FTRL({ l1: 0.2, l2: 0.3 }).l1RegularizationStrength).toBe(0.2);
  });
});

describe('TPUEmbedding configuration', () => {
  it('draws the default initializer from a truncated normal with std 1/sqrt(dim)', () => {
    const t = new TableConfig({ vocabularySize: 2000, dim: 16 });
    const emb = new TPUEmbedding({ featureConfig: new FeatureConfig({ table: t }), backend: referenceBackend });
    const v = emb.embeddingTables.get(t)!.data as Float32Array;
    const mean = v.reduce((a, b) => a + b, 0) / v.length;
    const std = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length);
    expect(Math.abs(mean)).toBeLessThan(0.01);
    // a normal truncated at 2 std keeps ~88% of the std
    expect(std).toBeGreaterThan(0.25 * 0.8);
    expect(std).toBeLessThan(0.25 * 0.95);
    expect(Math.max(...v.map(Math.abs))).toBeLessThanOrEqual(0.5 + 1e-6);
    expect(emb.tableNames).toEqual(['table_0']);
  });

  it('uses outputShape for the batch size and the activation shape', async () => {
    const t = new TableConfig({ vocabularySize: 10, dim: 2, initializer: iota, combiner: 'sum' });
    const fc = { a: new FeatureConfig({ table: t, outputShape: [1, 2] }), b: new FeatureConfig({ table: t, outputShape: [1, 2] }) };
    const emb = new TPUEmbedding({ featureConfig: fc, optimizer: new SGD({ learningRate: 1 }), strategy: new ReplicaStrategy({ numReplicas: 2 }), backend: referenceBackend });
    emb.build();
    expect(emb.perReplicaBatchSize).toBe(1);
    // dense ids must have the leading shape [numReplicas * 1, 2]; ragged rows are reshaped to it
    const { RaggedTensor } = await import('@embedstack/core');
    await expect(emb.enqueue({ a: [[1, 2, 3, 4]], b: RaggedTensor.fromNestedArray([[1], [2], [3], [4]]) })).rejects.toMatchObject({
      code: 'SHAPE_MISMATCH',
      message: expect.stringContaining('features.a') as unknown,
    });
    await emb.enqueue({ a: [[1, 2], [3, 4]], b: RaggedTensor.fromNestedArray([[1], [2, 3], [], [9]]) });
    const acts = await emb.dequeue();
    expect(acts.a!.shape).toEqual([2, 2, 2]);
    expect(acts.b!.shape).toEqual([2, 2, 2]);
    expect(rows(acts.b!)).toEqual([[2, 3], [10, 12], [0, 0], [18, 19]]);
    await emb.applyGradients({ a: null, b: new Tensor(new Float32Array(8).fill(1), [2, 2, 2]) });
    expect(rows(emb.embeddingTables.get(t)!).slice(1, 4)).toEqual([[1, 2], [3, 4], [5, 6]]);
  });
});
