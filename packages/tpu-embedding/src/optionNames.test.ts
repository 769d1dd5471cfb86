// Every public constructor and method of tpu-embedding that takes an options object refuses a
// misspelt name (INVALID_ARGUMENT naming `options.<name>`), changes nothing then, and takes all its
// documented names at once.
import { initializers, referenceBackend, Tensor } from '@embedstack/core';
import { describeOptionNames, onFresh, type OptionNamesCase } from '@embedstack/core/testing';
import { expect } from 'vitest';
import { Adagrad, AdagradMomentum, Adam, type EmbeddingOptimizer, FeatureConfig, FTRL, ReplicaStrategy, SGD, TableConfig, TPUEmbedding } from './index.js';

const common = () => ({
  learningRate: 0.5,
  useGradientAccumulation: true,
  clipWeightMin: -10,
  clipWeightMax: 10,
  weightDecayFactor: 0.1,
  multiplyWeightDecayFactorByLearningRate: true,
  clipvalue: 3,
  slotVariableCreationFn: null,
});
const optimizerCases: [string, new (o: never) => EmbeddingOptimizer, Record<string, unknown>, (o: EmbeddingOptimizer) => unknown, unknown][] = [
  ['SGD', SGD, {}, (o) => o.spec.clipGradMax, 3],
  ['Adagrad', Adagrad, { initialAccumulatorValue: 0.25 }, (o) => o.spec.hyper.initialAccumulatorValue, 0.25],
  ['AdagradMomentum', AdagradMomentum, { momentum: 0.5, useNesterov: true, exponent: 3, beta2: 0.5, epsilon: 1e-6 }, (o) => o.spec.hyper.exponent, 3],
  ['Adam', Adam, { beta1: 0.5, beta2: 0.75, epsilon: 1e-6, lazyAdam: true, sumInsideSqrt: false }, (o) => o.spec.hyper.beta2, 0.75],
  [
    'FTRL',
    FTRL,
    { learningRatePower: -0.25, l1RegularizationStrength: 0.1, l2RegularizationStrength: 0.2, beta: 0.3, initialAccumulatorValue: 0.5, multiplyLinearByLearningRate: false, allowZeroAccumulator: false },
    (o) => o.spec.hyper.l2,
    0.2,
  ],
];

/** A built TPUEmbedding over one 4 x 2 table of ones (feature 'f'), per call; its queue length the state. */
function onEmbedding(label: string, names: string[], full: () => Record<string, unknown>, call: (e: TPUEmbedding<{ f: FeatureConfig }>, o: Record<string, unknown>) => unknown, check: (r: unknown) => void): OptionNamesCase {
  return onFresh({
    label,
    argument: 'options',
    names,
    full,
    make: async () => {
      const table = new TableConfig({ vocabularySize: 4, dim: 2, initializer: initializers.ones(), combiner: 'sum' });
      const e = new TPUEmbedding({ featureConfig: { f: new FeatureConfig({ table }) }, optimizer: new SGD(), backend: referenceBackend });
      e.build(2);
      if (label.startsWith('dequeue')) await e.enqueue({ f: new Tensor(Int32Array.from([1, 2]), [2]) });
      return e;
    },
    call,
    check,
    state: async (e) => {
      // what is queued: a dequeue returns it (and a second one finds nothing)
      const out = await e.dequeue().then((r) => Array.from(r.f.data), (err: { code?: string }) => err.code);
      if (Array.isArray(out)) await e.enqueue({ f: new Tensor(Int32Array.from([1, 2]), [2]) });
      return out;
    },
  });
}

describeOptionNames('tpu-embedding: option names', [
  {
    label: 'new TableConfig(options)',
    argument: 'options',
    names: ['vocabularySize', 'dim', 'initializer', 'optimizer', 'combiner', 'name'],
    full: () => ({ vocabularySize: 3, dim: 2, initializer: initializers.constant(2), optimizer: new SGD(), combiner: 'sum', name: 'tab' }),
    call: (o) => new TableConfig(o as never),
    check: (t) => expect([(t as TableConfig).vocabularySize, (t as TableConfig).combiner, (t as TableConfig).name]).toEqual([3, 'sum', 'tab']),
  },
  {
    label: 'new FeatureConfig(options)',
    argument: 'options',
    names: ['table', 'maxSequenceLength', 'outputShape', 'name'],
    full: () => ({ table: new TableConfig({ vocabularySize: 3, dim: 2 }), maxSequenceLength: 4, outputShape: [2], name: 'feat' }),
    call: (o) => new FeatureConfig(o as never),
    check: (f) => expect([(f as FeatureConfig).maxSequenceLength, (f as FeatureConfig).name]).toEqual([4, 'feat']),
  },
  ...optimizerCases.map(([name, Cls, extra, read, want]): OptionNamesCase => {
    const full = () => ({ ...common(), ...extra });
    return { label: `new ${name}(options)`, argument: 'options', names: Object.keys(full()), full, call: (o) => new Cls(o as never), check: (r) => expect(read(r as EmbeddingOptimizer)).toBe(want) };
  }),
  { label: 'new ReplicaStrategy(options)', argument: 'options', names: ['numReplicas', 'numHosts'], full: () => ({ numReplicas: 2, numHosts: 3 }), call: (o) => new ReplicaStrategy(o as never), check: (s) => expect([(s as ReplicaStrategy).numReplicas, (s as ReplicaStrategy).numHosts]).toEqual([2, 3]) },
  {
    label: 'new TPUEmbedding(options)',
    argument: 'options',
    names: ['featureConfig', 'optimizer', 'strategy', 'pipelineExecutionWithTensorCore', 'backend'],
    full: () => ({
      featureConfig: { f: new FeatureConfig({ table: new TableConfig({ vocabularySize: 4, dim: 2, initializer: initializers.ones(), combiner: 'sum' }) }) },
      optimizer: new SGD(),
      strategy: new ReplicaStrategy({ numReplicas: 1 }),
      pipelineExecutionWithTensorCore: false,
      backend: referenceBackend,
    }),
    call: async (o) => {
      const e = new TPUEmbedding(o as never);
      e.build(2);
      await e.enqueue({ f: new Tensor(Int32Array.from([1, 2]), [2]) });
      return e.dequeue();
    },
    check: (r) => expect(Array.from((r as { f: Tensor<Float32Array> }).f.data)).toEqual([1, 1, 1, 1]),
  },
  onEmbedding('enqueue(features, options)', ['weights', 'training'], () => ({ weights: { f: null }, training: false }), async (e, o) => {
    await e.enqueue({ f: new Tensor(Int32Array.from([0, 3]), [2]) }, o);
    return e.dequeue();
  }, (r) => expect(Array.from((r as { f: Tensor<Float32Array> }).f.data)).toEqual([1, 1, 1, 1])),
  onEmbedding('dequeue(options)', ['out'], () => ({ out: { f: new Float32Array(4) } }), (e, o) => e.dequeue(o), (r) => expect(Array.from((r as { f: Tensor<Float32Array> }).f.data)).toEqual([1, 1, 1, 1])),
]);
