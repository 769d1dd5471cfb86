import { ErrorCodes, initializers, RaggedTensor, referenceBackend, SparseTensor, Tensor } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { FeatureConfig, TableConfig } from './config.js';
import { Adagrad, AdagradMomentum, Adam, FTRL, SGD } from './optimizers.js';
import { ReplicaStrategy } from './strategy.js';
import { expectError, FAVORITED, fixture, FRIENDS, ragged, raggedWeights, sparse, sparseWeights, WATCHED } from '../test/testUtil.js';
import { TPUEmbedding } from './tpuEmbedding.js';

const backend = referenceBackend;

const video = () => new TableConfig({ vocabularySize: 8, dim: 4, name: 'video' });

describe('TableConfig and FeatureConfig validation', () => {
  // a number of the wrong value is INVALID_ARGUMENT; another JS type (or a missing number) INVALID_TYPE
  it.each([0, -1, 1.5, '8', null, undefined, Number.NaN])('rejects vocabularySize %s', async (v) => {
    const code = typeof v === 'number' ? ErrorCodes.INVALID_ARGUMENT : ErrorCodes.INVALID_TYPE;
    await expectError(() => new TableConfig({ vocabularySize: v as number, dim: 4 }), code, 'vocabularySize');
  });

  it.each([0, 2.5, '4', undefined])('rejects dim %s', async (v) => {
    const code = typeof v === 'number' ? ErrorCodes.INVALID_ARGUMENT : ErrorCodes.INVALID_TYPE;
    await expectError(() => new TableConfig({ vocabularySize: 8, dim: v as number }), code, 'dim');
  });

  it('rejects an initializer that is neither callable nor known', async () => {
    await expectError(() => new TableConfig({ vocabularySize: 8, dim: 4, initializer: 3 as never }), ErrorCodes.INVALID_ARGUMENT, 'initializer');
    await expectError(() => new TableConfig({ vocabularySize: 8, dim: 4, initializer: { kind: 'magic' } as never }), ErrorCodes.INVALID_ARGUMENT, 'initializer');
    expect(new TableConfig({ vocabularySize: 8, dim: 4, initializer: initializers.zeros() }).initializer).toEqual({ kind: 'zeros' });
  });

  it('rejects an unknown combiner', async () => {
    await expectError(() => new TableConfig({ vocabularySize: 8, dim: 4, combiner: 'max' as never }), ErrorCodes.INVALID_ARGUMENT, 'combiner');
  });

  it('rejects unknown options, a bad name and a non-object', async () => {
    await expectError(() => new TableConfig({ vocabularySize: 8, dim: 4, vocabulary_size: 3 } as never), ErrorCodes.INVALID_ARGUMENT, 'vocabulary_size');
    await expectError(() => new TableConfig({ vocabularySize: 8, dim: 4, name: 7 as never }), ErrorCodes.INVALID_TYPE, 'name');
    await expectError(() => new TableConfig(8 as never), ErrorCodes.INVALID_TYPE, 'options');
  });

  it('rejects a FeatureConfig whose table is not a TableConfig', async () => {
    await expectError(() => new FeatureConfig({ table: { vocabularySize: 8, dim: 4 } as never }), ErrorCodes.INVALID_TYPE, 'table');
  });

  it.each([-1, 1.5, '2'])('rejects maxSequenceLength %s', async (v) => {
    const code = typeof v === 'number' ? ErrorCodes.INVALID_ARGUMENT : ErrorCodes.INVALID_TYPE;
    await expectError(() => new FeatureConfig({ table: video(), maxSequenceLength: v as number }), code, 'maxSequenceLength');
  });

  it('rejects a bad outputShape', async () => {
    await expectError(() => new FeatureConfig({ table: video(), outputShape: [0] }), ErrorCodes.INVALID_ARGUMENT, 'outputShape');
    await expectError(() => new FeatureConfig({ table: video(), maxSequenceLength: 2, outputShape: [2, 2] }), ErrorCodes.INVALID_ARGUMENT, 'outputShape');
  });

  it('rejects a bad ReplicaStrategy', async () => {
    await expectError(() => new ReplicaStrategy({ numReplicas: 0 }), ErrorCodes.INVALID_ARGUMENT, 'numReplicas');
    await expectError(() => new ReplicaStrategy({ numHosts: 1.5 }), ErrorCodes.INVALID_ARGUMENT, 'numHosts');
  });
});

describe('optimizer validation', () => {
  it('rejects clipvalue without gradient accumulation', async () => {
    await expectError(() => new SGD({ clipvalue: 1, useGradientAccumulation: false }), ErrorCodes.INVALID_ARGUMENT, 'clipvalue');
    await expectError(() => new Adagrad({ clipvalue: [null, 1], useGradientAccumulation: false }), ErrorCodes.INVALID_ARGUMENT, 'clipvalue');
  });

  it('rejects Adagrad initialAccumulatorValue <= 0', async () => {
    await expectError(() => new Adagrad({ initialAccumulatorValue: 0 }), ErrorCodes.INVALID_ARGUMENT, 'initialAccumulatorValue');
    await expectError(() => new Adagrad({ initialAccumulatorValue: -1 }), ErrorCodes.INVALID_ARGUMENT, 'initialAccumulatorValue');
  });

  it('rejects Adam betas outside [0, 1), epsilon <= 0 and non-lazy Adam without accumulation', async () => {
    for (const b of [1, -0.1, 1.5]) {
      await expectError(() => new Adam({ beta1: b }), ErrorCodes.INVALID_ARGUMENT, 'beta1');
      await expectError(() => new Adam({ beta2: b }), ErrorCodes.INVALID_ARGUMENT, 'beta2');
    }
    await expectError(() => new Adam({ epsilon: 0 }), ErrorCodes.INVALID_ARGUMENT, 'epsilon');
    await expectError(() => new Adam({ epsilon: -1e-8 }), ErrorCodes.INVALID_ARGUMENT, 'epsilon');
    await expectError(() => new Adam({ lazyAdam: false, useGradientAccumulation: false }), ErrorCodes.INVALID_ARGUMENT, 'lazyAdam');
    expect(new Adam({ lazyAdam: false }).lazyAdam).toBe(false);
    expect(new Adam({ useGradientAccumulation: false }).useGradientAccumulation).toBe(false);
  });

  it('rejects bad AdagradMomentum and FTRL hyper-parameters', async () => {
    await expectError(() => new AdagradMomentum({ epsilon: 0 }), ErrorCodes.INVALID_ARGUMENT, 'epsilon');
    await expectError(() => new AdagradMomentum({ exponent: 0 }), ErrorCodes.INVALID_ARGUMENT, 'exponent');
    await expectError(() => new FTRL({ initialAccumulatorValue: 0 }), ErrorCodes.INVALID_ARGUMENT, 'initialAccumulatorValue');
    await expectError(() => new FTRL({ l1RegularizationStrength: -1 }), ErrorCodes.INVALID_ARGUMENT, 'l1RegularizationStrength');
    await expectError(() => new FTRL({ l1: 0.1, l1RegularizationStrength: 0.2 }), ErrorCodes.INVALID_ARGUMENT, 'l1');
    await expectError(() => new FTRL({ learningRatePower: 0.5 }), ErrorCodes.INVALID_ARGUMENT, 'learningRatePower');
    await expectError(() => new FTRL({ multiplyLinearByLearningRate: true }), ErrorCodes.UNSUPPORTED, 'multiplyLinearByLearningRate');
  });

  it('rejects a bad learning rate, slot function and unknown options', async () => {
    await expectError(() => new SGD({ learningRate: '0.1' as never }), ErrorCodes.INVALID_TYPE, 'learningRate');
    await expectError(() => new SGD({ learningRate: -1 }), ErrorCodes.INVALID_ARGUMENT, 'learningRate');
    await expectError(() => new Adagrad({ slotVariableCreationFn: 1 as never }), ErrorCodes.INVALID_TYPE, 'slotVariableCreationFn');
    // a boolean of another JS type is a type error, like every other boolean option of the package
    await expectError(() => new Adam({ lazyAdam: 'true' as never }), ErrorCodes.INVALID_TYPE, 'lazyAdam');
    await expectError(() => new Adam({ useGradientAccumulation: 1 as never }), ErrorCodes.INVALID_TYPE, 'useGradientAccumulation');
    await expectError(() => new AdagradMomentum({ useNesterov: 'false' as never }), ErrorCodes.INVALID_TYPE, 'useNesterov');
    await expectError(() => new SGD({ learning_rate: 0.1 } as never), ErrorCodes.INVALID_ARGUMENT, 'learning_rate');
    await expectError(() => new SGD({ clipWeightMin: 1, clipWeightMax: 0 }), ErrorCodes.INVALID_ARGUMENT, 'clipWeightMax');
    await expectError(() => new SGD({ weightDecayFactor: Number.NaN }), ErrorCodes.INVALID_ARGUMENT, 'weightDecayFactor');
  });
});

describe('TPUEmbedding constructor', () => {
  it('rejects duplicate table names ("Multiple tables with name ...")', async () => {
    const a = new TableConfig({ vocabularySize: 8, dim: 4, name: 'same' });
    const b = new TableConfig({ vocabularySize: 4, dim: 2, name: 'same' });
    const featureConfig = { x: new FeatureConfig({ table: a }), y: new FeatureConfig({ table: b }) };
    await expectError(() => new TPUEmbedding({ featureConfig, optimizer: new SGD(), backend }), ErrorCodes.INVALID_ARGUMENT, 'Multiple tables with name "same"');
    // an explicit name clashing with a default one
    const c = new TableConfig({ vocabularySize: 8, dim: 4 });
    const d = new TableConfig({ vocabularySize: 8, dim: 4, name: 'table_0' });
    await expectError(
      () => new TPUEmbedding({ featureConfig: [new FeatureConfig({ table: c }), new FeatureConfig({ table: d })], backend }),
      ErrorCodes.INVALID_ARGUMENT,
      'Multiple tables with name "table_0"',
    );
  });

  it('rejects an optimizer that is not one of this package (global or per table)', async () => {
    const featureConfig = { x: new FeatureConfig({ table: video() }) };
    await expectError(() => new TPUEmbedding({ featureConfig, optimizer: { learningRate: 0.1 } as never, backend }), ErrorCodes.INVALID_TYPE, 'optimizer');
    const own = new TableConfig({ vocabularySize: 8, dim: 4, optimizer: 'sgd' as never });
    await expectError(
      () => new TPUEmbedding({ featureConfig: { x: new FeatureConfig({ table: own }) }, optimizer: new SGD(), backend }),
      ErrorCodes.INVALID_TYPE,
      'featureConfig.x.table.optimizer',
    );
  });

  it('rejects a feature config that is not FeatureConfigs, and bad options', async () => {
    await expectError(() => new TPUEmbedding({ featureConfig: { x: video() as never }, backend }), ErrorCodes.INVALID_TYPE, 'featureConfig.x');
    await expectError(() => new TPUEmbedding({ featureConfig: {}, backend }), ErrorCodes.INVALID_ARGUMENT, 'featureConfig');
    const featureConfig = { x: new FeatureConfig({ table: video() }) };
    await expectError(() => new TPUEmbedding({ featureConfig, strategy: { numReplicas: 2 } as never }), ErrorCodes.INVALID_TYPE, 'strategy');
    await expectError(() => new TPUEmbedding({ featureConfig, feature_config: 1 } as never), ErrorCodes.INVALID_ARGUMENT, 'feature_config');
    await expectError(() => new TPUEmbedding({ featureConfig, pipelineExecutionWithTensorCore: 1 as never }), ErrorCodes.INVALID_TYPE, 'pipelineExecutionWithTensorCore');
  });

  it('rejects a conflicting build batch size', async () => {
    const { emb } = fixture({ backend });
    emb.build(2);
    await expectError(() => emb.build(3), ErrorCodes.INVALID_ARGUMENT, 'perReplicaBatchSize');
    await expectError(() => emb.build(0), ErrorCodes.INVALID_ARGUMENT, 'perReplicaBatchSize');
    emb.build();
    emb.build(2);
    expect(emb.perReplicaBatchSize).toBe(2);
  });
});

/** A trained-once fixture plus a snapshot of its tables, to check that rejected calls change nothing. */
async function trainedFixture(numReplicas = 1) {
  const f = fixture({ backend, optimizer: new Adagrad({ learningRate: 0.1 }), numReplicas });
  await f.emb.enqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) });
  const acts = await f.emb.dequeue();
  await f.emb.applyGradients(acts);
  const snapshot = () => [...f.emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array));
  const before = snapshot();
  const unchanged = async () => {
    expect(snapshot()).toEqual(before);
    expect(f.emb.step).toBe(1);
  };
  return { ...f, acts, unchanged };
}

const good = () => ({ watched: ragged(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) });

describe('enqueue errors (nothing is queued, tables unchanged)', () => {
  async function rejectsEnqueue(features: unknown, options: unknown, code: string, argument: string | RegExp, numReplicas = 1) {
    const f = await trainedFixture(numReplicas);
    await expectError(() => f.emb.enqueue(features as never, options as never), code, argument);
    await expectError(() => f.emb.dequeue(), ErrorCodes.FAILED_PRECONDITION, 'dequeue');
    await f.unchanged();
  }

  it('rejects mixing SparseTensor and RaggedTensor inputs', async () => {
    await rejectsEnqueue({ watched: sparse(WATCHED), favorited: ragged(FAVORITED), friends: ragged(FRIENDS) }, undefined, ErrorCodes.INVALID_ARGUMENT, 'features');
  });

  it('rejects weights for dense ids', async () => {
    await rejectsEnqueue(
      { watched: [0, 1, 2, 3], favorited: [0, 1, 2, 3], friends: [0, 1, 2, 3] },
      { weights: { watched: null, favorited: raggedWeights([[1], [1], [1], [1]]), friends: null } },
      ErrorCodes.INVALID_ARGUMENT,
      'weights.favorited',
    );
  });

  it('rejects weights of another type, dtype or layout than their ids', async () => {
    const w = (x: unknown) => ({ weights: { watched: x, favorited: null, friends: null } });
    await rejectsEnqueue(good(), w(sparseWeights(WATCHED)), ErrorCodes.INVALID_TYPE, 'weights.watched');
    await rejectsEnqueue(good(), w(RaggedTensor.fromNestedArray(WATCHED)), ErrorCodes.INVALID_TYPE, 'weights.watched');
    // WATCHED's row splits are [0, 1, 3, 5, 6]; the message says what was received, where it first differs
    await rejectsEnqueue(good(), w(raggedWeights([[1], [1], [1, 1], [1, 1]])), ErrorCodes.SHAPE_MISMATCH, 'Expected weights.watched to have the row splits of features.watched but received rowSplits[2] = 2 where the ids\' is 3');
    await rejectsEnqueue(good(), w(raggedWeights([[1], [1, 1], [1, 1]])), ErrorCodes.SHAPE_MISMATCH, 'but received 3 rows where the ids have 4');
    const sp = { watched: sparse(WATCHED), favorited: sparse(FAVORITED), friends: sparse(FRIENDS) };
    // the ids' entries are [0, 0], [1, 0], [1, 1], ...; these weights' second is [0, 1]
    await rejectsEnqueue(sp, w(sparseWeights([[1, 1], [1], [1, 1], [1]])), ErrorCodes.SHAPE_MISMATCH, 'Expected weights.watched to have the indices and denseShape of features.watched but received entry 1 at [0, 1] where the ids\' is at [1, 0]');
    await rejectsEnqueue(sp, w(sparseWeights([[1], [1, 1], [1, 1]])), ErrorCodes.SHAPE_MISMATCH, "but received denseShape [3, 2] where the ids' is [4, 2]");
    await rejectsEnqueue(good(), { weights: { watched: null } }, ErrorCodes.INVALID_ARGUMENT, 'weights');
  });

  it('rejects features whose batch sizes differ', async () => {
    await rejectsEnqueue({ ...good(), friends: ragged([[1], [2], [3]]) }, undefined, ErrorCodes.SHAPE_MISMATCH, 'features.friends');
  });

  it('rejects a batch size different from an earlier call', async () => {
    await rejectsEnqueue({ watched: ragged([[1], [2]]), favorited: ragged([[1], [2]]), friends: ragged([[1], [2]]) }, undefined, ErrorCodes.INVALID_ARGUMENT, 'batch size');
  });

  it('rejects a global batch that does not divide over the replicas', async () => {
    const f = fixture({ backend, optimizer: new SGD(), numReplicas: 3 });
    await expectError(() => f.emb.enqueue(good()), ErrorCodes.INVALID_ARGUMENT, 'numReplicas (3)');
    expect(f.emb.perReplicaBatchSize).toBeUndefined();
  });

  it('rejects out-of-range and negative ids, naming the feature and table', async () => {
    await rejectsEnqueue({ ...good(), friends: ragged([[3], [16], [3], [0]]) }, undefined, ErrorCodes.OUT_OF_RANGE, /features\.friends.*\[0, 16\).*"user".*16/);
    await rejectsEnqueue({ ...good(), watched: sparse([[0], [-1], [1], [1]]) }, undefined, ErrorCodes.OUT_OF_RANGE, 'features.watched');
    await rejectsEnqueue({ watched: [0, 1, 8, 2], favorited: [0, 0, 0, 0], friends: [0, 0, 0, 0] }, undefined, ErrorCodes.OUT_OF_RANGE, 'features.watched');
  });

  it('rejects inputs of the wrong kind or dtype, and a structure unlike the feature config', async () => {
    await rejectsEnqueue({ ...good(), watched: new Float32Array(4) }, undefined, ErrorCodes.INVALID_TYPE, 'features.watched');
    await rejectsEnqueue({ ...good(), watched: RaggedTensor.fromNestedArray(WATCHED, { dtype: 'float32' }) }, undefined, ErrorCodes.INVALID_TYPE, 'features.watched');
    await rejectsEnqueue({ ...good(), watched: 'ids' }, undefined, ErrorCodes.INVALID_TYPE, 'features.watched');
    await rejectsEnqueue({ ...good(), watched: [[0, 1], [2]] }, undefined, ErrorCodes.SHAPE_MISMATCH, 'features.watched');
    await rejectsEnqueue({ ...good(), watched: [0.5, 1, 2, 3] }, undefined, ErrorCodes.INVALID_TYPE, 'features.watched');
    await rejectsEnqueue({ watched: ragged(WATCHED), favorited: ragged(FAVORITED) }, undefined, ErrorCodes.INVALID_ARGUMENT, 'features');
    await rejectsEnqueue([ragged(WATCHED)], undefined, ErrorCodes.INVALID_ARGUMENT, 'features');
    await rejectsEnqueue(good(), { training: 'yes' }, ErrorCodes.INVALID_TYPE, 'training');
    await rejectsEnqueue(good(), { weight: null }, ErrorCodes.INVALID_ARGUMENT, 'options.weight');
    await rejectsEnqueue({ ...good(), watched: new SparseTensor([[0]], [1], [4]) }, undefined, ErrorCodes.INVALID_ARGUMENT, 'features.watched');
  });
});

describe('dequeue and applyGradients errors', () => {
  it('rejects dequeue before enqueue', async () => {
    const { emb } = fixture({ backend, optimizer: new SGD() });
    await expectError(() => emb.dequeue(), ErrorCodes.FAILED_PRECONDITION, 'dequeue');
  });

  it('rejects gradients whose shape differs from the activations (nothing applied)', async () => {
    const f = await trainedFixture();
    await f.emb.enqueue(good());
    const acts = await f.emb.dequeue();
    const bad = new Tensor(new Float32Array(8), [4, 2]);
    await expectError(() => f.emb.applyGradients({ ...acts, watched: bad }), ErrorCodes.SHAPE_MISMATCH, 'gradients.watched');
    await expectError(() => f.emb.applyGradients({ ...acts, friends: new Float32Array(7) }), ErrorCodes.SHAPE_MISMATCH, 'gradients.friends');
    await expectError(() => f.emb.applyGradients({ ...acts, friends: new Tensor(new Int32Array(8), [4, 2]) as never }), ErrorCodes.INVALID_TYPE, 'gradients.friends');
    await expectError(() => f.emb.applyGradients({ ...acts, friends: [[1, 2]] as never }), ErrorCodes.INVALID_TYPE, 'gradients.friends');
    await expectError(() => f.emb.applyGradients({ watched: acts.watched } as never), ErrorCodes.INVALID_ARGUMENT, 'gradients');
    await f.unchanged();
    // the step is still pending and can be applied afterwards
    await f.emb.applyGradients(acts);
    expect(f.emb.step).toBe(2);
  });

  it('rejects applyGradients for a training: false batch, before dequeue, and twice', async () => {
    const f = await trainedFixture();
    await expectError(() => f.emb.applyGradients(f.acts), ErrorCodes.FAILED_PRECONDITION, 'applyGradients');
    await f.emb.enqueue(good(), { training: false });
    const acts = await f.emb.dequeue();
    await expectError(() => f.emb.applyGradients(acts), ErrorCodes.FAILED_PRECONDITION, 'training: false');
    await f.unchanged();
    const fresh = fixture({ backend, optimizer: new SGD() });
    await expectError(() => fresh.emb.applyGradients(acts), ErrorCodes.FAILED_PRECONDITION, 'before dequeue');
  });

  it('rejects training a table without an optimizer', async () => {
    const f = fixture({ backend });
    await f.emb.enqueue(good());
    const acts = await f.emb.dequeue();
    const before = [...f.emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array));
    await expectError(() => f.emb.applyGradients(acts), ErrorCodes.FAILED_PRECONDITION, 'no optimizer');
    expect([...f.emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array))).toEqual(before);
  });

  it('rejects a learning-rate function returning a bad value (nothing applied)', async () => {
    const f = fixture({ backend, optimizer: new SGD({ learningRate: () => Number.NaN }) });
    await f.emb.enqueue(good());
    const acts = await f.emb.dequeue();
    const before = [...f.emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array));
    await expectError(() => f.emb.applyGradients(acts), ErrorCodes.INVALID_ARGUMENT, 'Expected the value returned by learningRate() to be a finite number >= 0 but received NaN');
    expect([...f.emb.embeddingTables.values()].map((t) => Array.from(t.data as Float32Array))).toEqual(before);
    expect(f.emb.step).toBe(0);
  });

  it('rejects every call after dispose', async () => {
    const { emb } = fixture({ backend, optimizer: new SGD() });
    emb.build();
    emb.dispose();
    await expectError(() => emb.enqueue(good()), ErrorCodes.DISPOSED, 'disposed');
    await expectError(() => emb.embeddingTables, ErrorCodes.DISPOSED, 'disposed');
  });
});
