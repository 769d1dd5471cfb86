// Every public function and constructor of sok that takes an options object refuses a misspelt
// name (INVALID_ARGUMENT naming `options.<name>`), changes nothing then, and takes all its
// documented names at once.
import { RaggedTensor, referenceBackend, SparseTensor, Tensor } from '@embedstack/core';
import { describeOptionNames, onFresh, type OptionNamesCase } from '@embedstack/core/testing';
import * as sok from '@embedstack/sok';
import { afterAll, beforeAll, expect } from 'vitest';
import { initDevices, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
  await initDevices(2);
});
afterAll(() => sok.shutdown());

let n = 0;
const name = () => `opts_${++n}`;
/** A dynamic variable (2 devices) holding 1 -> [1, 2], 2 -> [3, 4]. */
async function filled(): Promise<sok.DynamicVariable> {
  const v = new sok.DynamicVariable({ dimension: 2, name: name(), varType: 'hybrid', maxCapacity: 64, evictStrategy: 'customized' });
  await sok.assign(v, [1n, 2n], Float32Array.from([1, 2, 3, 4]), { scores: [1n, 1n] });
  return v;
}
const rows = async (v: sok.SokVariable) => {
  const [keys, values] = await sok.exportVariable(v);
  return Array.from(keys as ArrayLike<bigint>, (k, i) => [k, Array.from(values.data.subarray(2 * i, 2 * i + 2))]).sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
};
/** A fresh filled variable per call (reset), its rows the state. */
function onVariable(label: string, names: string[], full: () => Record<string, unknown>, call: (v: sok.DynamicVariable, o: Record<string, unknown>) => unknown, check: (r: unknown, v: sok.DynamicVariable) => unknown): OptionNamesCase {
  return onFresh({ label, argument: 'options', names, full, make: filled, call, check: (r, v) => check(r, v) as void, state: rows });
}

const optimizerCases: [string, new (o: never) => sok.SokOptimizer, Record<string, unknown>][] = [
  ['SGD', sok.SGD, { learningRate: 0.5, momentum: 0.25, nesterov: true }],
  ['Momentum', sok.Momentum, { learningRate: 0.5, momentum: 0.25, useNesterov: true }],
  ['Adagrad', sok.Adagrad, { learningRate: 0.5, initialAccumulatorValue: 0.25 }],
  ['Adam', sok.Adam, { learningRate: 0.5, beta1: 0.5, beta2: 0.75, epsilon: 1e-6 }],
  ['Adamax', sok.Adamax, { learningRate: 0.5, beta1: 0.5, beta2: 0.75, epsilon: 1e-6 }],
  ['Adadelta', sok.Adadelta, { learningRate: 0.5, rho: 0.5, epsilon: 1e-6 }],
  ['Ftrl', sok.Ftrl, { learningRate: 0.5, learningRatePower: -0.25, initialAccumulatorValue: 0.25, l1RegularizationStrength: 0.1, l2RegularizationStrength: 0.2, beta: 0.3 }],
];

const dynamicFull = () => ({ dimension: 2, initializer: 'ones', varType: 'hybrid', keyType: 'int64', dtype: 'float32', initCapacity: 4, maxCapacity: 64, evictStrategy: 'lru', filterRatio: 1, name: name(), mode: 'distributed' });
const layerCall = () => ({ tape: new sok.GradientTape(), training: true });

describeOptionNames('sok: option names', [
  {
    label: 'init(options)',
    argument: 'options',
    names: ['numDevices', 'backend', 'communicator'],
    full: () => ({ numDevices: 2, backend: referenceBackend, communicator: new sok.InProcessCommunicator(2) }),
    reset: () => sok.shutdown(),
    state: () => sok.isInitialized(),
    call: (o) => sok.init(o as never),
    check: () => expect([sok.isInitialized(), sok.numDevices()]).toEqual([true, 2]),
  },
  { label: 'new DynamicVariable(options)', argument: 'options', names: Object.keys(dynamicFull()), full: dynamicFull, call: (o) => new sok.DynamicVariable(o as never), check: async (v) => expect(Array.from((await sok.embeddingLookup(v as sok.DynamicVariable, [7n])).data)).toEqual([1, 1]) },
  {
    label: 'new Variable(options)',
    argument: 'options',
    names: ['shape', 'initializer', 'mode', 'name'],
    full: () => ({ shape: [4, 2], initializer: 'ones', mode: 'localized:1', name: name() }),
    call: (o) => new sok.Variable(o as never),
    check: async (v) => expect(Array.from((await sok.embeddingLookup(v as sok.Variable, [3])).data)).toEqual([1, 1]),
  },
  onVariable('assign(v, indices, values, options)', ['scores'], () => ({ scores: [9n] }), (v, o) => sok.assign(v, [1n], Float32Array.from([5, 6]), o), async (_, v) => expect(await rows(v)).toEqual([[1n, [5, 6]], [2n, [3, 4]]])),
  onVariable('embeddingLookup(param, ids, options)', ['tape', 'training'], layerCall, (v, o) => sok.embeddingLookup(v, [2n], o), (r) => expect(Array.from((r as Tensor<Float32Array>).data)).toEqual([3, 4])),
  onVariable(
    'lookupSparse(params, spIds, options)',
    ['spWeights', 'combiners', 'tape', 'training', 'out'],
    () => ({ spWeights: [RaggedTensor.fromNestedArray([[1, 2]], { dtype: 'float32' })], combiners: 'sum', ...layerCall(), out: [new Float32Array(2)] }),
    (v, o) => sok.lookupSparse([v], [RaggedTensor.fromNestedArray([[1n, 2n]])], o),
    (r) => expect(Array.from((r as Tensor<Float32Array>[])[0]!.data)).toEqual([7, 10]),
  ),
  ...optimizerCases.map(([cls, Cls, full]): OptionNamesCase => ({ label: `new ${cls}(options)`, argument: 'options', names: Object.keys(full), full: () => ({ ...full }), call: (o) => new Cls(o as never), check: (r) => expect(r).toBeInstanceOf(Cls) })),
  {
    label: 'new All2AllDenseEmbedding(options)',
    argument: 'options',
    names: ['maxVocabularySizePerGpu', 'embeddingVecSize', 'slotNum', 'nnzPerSlot', 'dynamicInput', 'useHashtable', 'keyDtype', 'embeddingInitializer', 'name'],
    full: () => ({ maxVocabularySizePerGpu: 16, embeddingVecSize: 2, slotNum: 1, nnzPerSlot: 1, dynamicInput: true, useHashtable: true, keyDtype: 'int64', embeddingInitializer: 'ones', name: name() }),
    call: (o) => new sok.All2AllDenseEmbedding(o as never),
    check: async (l) => expect(Array.from((await (l as sok.All2AllDenseEmbedding).call([5n], { training: true })).data)).toEqual([1, 1]),
  },
  {
    label: 'new DistributedEmbedding(options)',
    argument: 'options',
    names: ['combiner', 'maxVocabularySizePerGpu', 'embeddingVecSize', 'slotNum', 'maxNnz', 'maxFeatureNum', 'useHashtable', 'embeddingInitializer', 'name'],
    full: () => ({ combiner: 'sum', maxVocabularySizePerGpu: 16, embeddingVecSize: 2, slotNum: 1, maxNnz: 2, maxFeatureNum: 2, useHashtable: false, embeddingInitializer: 'ones', name: name() }),
    call: (o) => new sok.DistributedEmbedding(o as never),
    check: (l) => expect((l as sok.DistributedEmbedding).combiner).toBe('sum'),
  },
  ...(['All2AllDenseEmbedding', 'DistributedEmbedding'] as const).map((cls): OptionNamesCase => {
    let layer: sok.All2AllDenseEmbedding | sok.DistributedEmbedding;
    return {
      label: `${cls}.call(ids, options)`,
      argument: 'options',
      names: ['tape', 'training'],
      full: layerCall,
      reset: () => {
        layer =
          cls === 'All2AllDenseEmbedding'
            ? new sok.All2AllDenseEmbedding({ maxVocabularySizePerGpu: 16, embeddingVecSize: 2, slotNum: 1, nnzPerSlot: 1, dynamicInput: true, embeddingInitializer: 'ones' })
            : new sok.DistributedEmbedding({ combiner: 'sum', maxVocabularySizePerGpu: 8, embeddingVecSize: 2, slotNum: 1, maxNnz: 2, embeddingInitializer: 'ones' });
      },
      state: async () => (await sok.exportVariable(layer.variable))[0].length,
      call: (o) =>
        cls === 'All2AllDenseEmbedding'
          ? (layer as sok.All2AllDenseEmbedding).call([5n], o)
          : (layer as sok.DistributedEmbedding).call(SparseTensor.fromNestedArray([[1n, 2n]]), o),
      check: (r) => expect(Array.from((r as Tensor<Float32Array>).data)).toEqual(cls === 'All2AllDenseEmbedding' ? [1, 1] : [2, 2]),
    };
  }),
]);
