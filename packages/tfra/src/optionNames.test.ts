// Every public function and constructor of tfra that takes an options object refuses a misspelt
// name (INVALID_ARGUMENT naming `options.<name>`, or `config.<name>` for RedisTableConfig), changes
// nothing then, and takes all its documented names at once.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeOptionNames, onFresh, type OptionNamesCase } from '@embedstack/core/testing';
import { afterAll, beforeAll, expect } from 'vitest';
import * as de from './index.js';
import { rowsOf, uniqueName, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});
const dir = mkdtempSync(join(tmpdir(), 'tfra-opts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A variable holding 1 -> [1, 2], 2 -> [3, 4]. */
async function filled(extra: Record<string, unknown> = {}): Promise<de.Variable> {
  const v = new de.Variable({ dim: 2, name: uniqueName(), ...extra });
  await v.upsert([1n, 2n], new Float32Array([1, 2, 3, 4]));
  return v;
}
const rowsIn = async (v: de.AnyVariable) => {
  const [keys, values] = await v.export();
  const rows = rowsOf(values.data, 2);
  return Array.from(keys as ArrayLike<bigint>, (k, i) => [k, rows[i]]).sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
};

const variableFull = () => ({
  keyDtype: 'int64',
  valueDtype: 'float32',
  dim: 2,
  devices: ['cpu:0', 'cpu:1'],
  partitioner: de.defaultPartitionFn,
  sharedName: 'shared',
  name: uniqueName(),
  initializer: [0.5, 0.25],
  trainable: true,
  checkpoint: true,
  initSize: 16,
  kvCreator: new de.CuckooHashTableCreator(),
  restrictPolicy: de.TimestampRestrictPolicy,
  bpV2: false,
  seed: 7,
});
const checkVariable = async (r: unknown) => {
  const v = r as de.Variable;
  const found = await v.lookup([9n]);
  expect([v.dim, v.keyDtype, Array.from(found.data)]).toEqual([2, 'int64', [0.5, 0.25]]);
};

/** A variable per call (reset), its rows the state. */
function onVariable(label: string, names: string[], full: () => Record<string, unknown>, call: (v: de.Variable, o: Record<string, unknown>) => unknown, check: (r: unknown, v: de.Variable) => void | Promise<void>, extra: Record<string, unknown> = {}): OptionNamesCase {
  return onFresh({ label, argument: 'options', names, full, make: () => filled(extra), call, check, state: rowsIn });
}

const sparse = () => de.SparseTensor.fromNestedArray([[1n, 2n]]);
const weights = () => de.SparseTensor.fromNestedArray([[1, 3]], { dtype: 'float32' });
const lookupFull = () => ({ name: 'lk', maxNorm: 100, returnTrainable: true, out: new Float32Array(4) });
const firstOf = (r: unknown) => Array.from((r as [de.Tensor<Float32Array>, unknown])[0].data);

const optimizerCases: [string, new (o: never) => de.Optimizer, Record<string, unknown>, (o: de.Optimizer) => unknown[], unknown[]][] = [
  ['SGD', de.SGD, { learningRate: 0.5, clipvalue: 1, name: 'S', momentum: 0.5, nesterov: true }, (o) => [o.name], ['S']],
  ['Momentum', de.Momentum, { learningRate: 0.5, clipvalue: 1, name: 'M', momentum: 0.25, useNesterov: true }, (o) => [(o as de.Momentum).momentum], [0.25]],
  ['Adagrad', de.Adagrad, { learningRate: 0.5, clipvalue: 1, name: 'A', initialAccumulatorValue: 0.5, epsilon: 1e-5 }, (o) => [(o as de.Adagrad).initialAccumulatorValue], [0.5]],
  ['Adam', de.Adam, { learningRate: 0.5, clipvalue: 1, name: 'Ad', beta1: 0.5, beta2: 0.75, epsilon: 1e-5, amsgrad: false }, (o) => [(o as de.Adam).beta2], [0.75]],
  ['Adamax', de.Adamax, { learningRate: 0.5, clipvalue: 1, name: 'Ax', beta1: 0.5, beta2: 0.75, epsilon: 1e-5 }, (o) => [(o as de.Adamax).beta1], [0.5]],
  ['Adadelta', de.Adadelta, { learningRate: 0.5, clipvalue: 1, name: 'D', rho: 0.5, epsilon: 1e-5 }, (o) => [(o as de.Adadelta).rho], [0.5]],
  [
    'FTRL',
    de.FTRL,
    { learningRate: 0.5, clipvalue: 1, name: 'F', learningRatePower: -0.25, initialAccumulatorValue: 0.5, l1RegularizationStrength: 0.1, l2RegularizationStrength: 0.2, beta: 0.3, l2ShrinkageRegularizationStrength: 0 },
    (o) => [(o as de.FTRL).l2RegularizationStrength],
    [0.2],
  ],
];

const layerFull = () => ({
  embeddingSize: 2,
  keyDtype: 'int64',
  combiner: 'sum',
  initializer: 0.5,
  devices: ['cpu:0'],
  name: uniqueName('layer'),
  withUnique: true,
  trainable: true,
  bpV2: false,
  restrictPolicy: null,
  initCapacity: 16,
  partitioner: de.defaultPartitionFn,
  kvCreator: new de.CuckooHashTableCreator(),
  maxNorm: 100,
  checkpoint: true,
  seed: 3,
});

const redisConfig = new de.RedisTableConfig();
/** Every TFRA field (their defaults), two of them set. */
const redisFull = () => ({ ...Object.fromEntries(Object.entries(redisConfig).filter(([k]) => k !== 'explicitFields' && k !== 'redis_config_abs_dir')), redis_db: 5, storage_slice: 4 });

describeOptionNames('tfra: variables, creators, checkpoints', [
  { label: 'new Variable(options)', argument: 'options', names: Object.keys(variableFull()), full: variableFull, call: (o) => new de.Variable(o), check: checkVariable },
  { label: 'getVariable(options)', argument: 'options', names: [...Object.keys(variableFull()), 'reuse'], full: () => ({ ...variableFull(), reuse: false }), call: (o) => de.getVariable(String(o.name ?? o.nam ?? o.name_ ?? o.namee), o as never), check: checkVariable },
  onVariable('Variable.lookup(keys, options)', ['returnExists', 'out'], () => ({ returnExists: true, out: new Float32Array(4) }), (v, o) => v.lookup([2n, 5n], o), (r) => {
    const x = r as { values: de.Tensor<Float32Array>; exists: boolean[] };
    expect([Array.from(x.values.data), x.exists]).toEqual([[3, 4, 0, 0], [true, false]]);
  }),
  onVariable('Variable.restrict(numReserved, options)', ['trigger'], () => ({ trigger: 1 }), (v, o) => v.restrict(1, o), async (r, v) => expect([await r, await v.size()]).toEqual([1, 1]), { restrictPolicy: de.FrequencyRestrictPolicy }),
  {
    label: 'Variable.saveToFileSystem(dir, options)',
    argument: 'options',
    names: ['procSize', 'procRank'],
    full: () => ({ procSize: 1, procRank: 0 }),
    state: () => readdirSync(dir).sort(),
    call: async (o) => {
      const v = await filled({ name: 'saved' });
      await v.saveToFileSystem(join(dir, 'ck'), o);
      return v;
    },
    check: async () => {
      const back = new de.Variable({ dim: 2, name: 'saved' });
      await back.loadFromFileSystem(join(dir, 'ck'));
      expect(await rowsIn(back)).toEqual([[1n, [1, 2]], [2n, [3, 4]]]);
    },
  },
  onVariable('Variable.loadFromFileSystem(dir, options)', ['optimizer', 'procSize', 'procRank'], () => ({ optimizer: null, procSize: 1, procRank: 0 }), (v, o) => v.loadFromFileSystem(join(dir, 'ck'), o), async (_, v) => expect(await rowsIn(v)).toEqual([[1n, [1, 2]], [2n, [3, 4]]]), { name: 'saved' }),
  {
    label: 'new HkvHashTableCreator(options)',
    argument: 'options',
    names: ['initCapacity', 'maxCapacity', 'maxHbmForValues', 'evictStrategy', 'stepPerEpoch', 'genScoresFn'],
    full: () => ({ initCapacity: 4, maxCapacity: 8, maxHbmForValues: 1024, evictStrategy: 'customized', stepPerEpoch: 2, genScoresFn: (k: ArrayLike<unknown>) => Array.from(k, () => 1n) }),
    call: (o) => new de.HkvHashTableCreator(o as never),
    check: (c) => expect([(c as de.HkvHashTableCreator).maxCapacity, (c as de.HkvHashTableCreator).evictStrategy]).toEqual([8, 'customized']),
  },
  { label: 'new RedisTableConfig(fields)', argument: 'config', names: Object.keys(redisFull()), full: redisFull, call: (o) => new de.RedisTableConfig(o as never), check: (c) => expect([(c as de.RedisTableConfig).redis_db, (c as de.RedisTableConfig).storage_slice]).toEqual([5, 4]) },
]);

describeOptionNames('tfra: lookups', [
  onVariable('embeddingLookup(params, ids, options)', ['name', 'maxNorm', 'returnTrainable', 'out'], lookupFull, (v, o) => de.embeddingLookup(v, [1n, 2n], o as never), (r) => expect(firstOf(r)).toEqual([1, 2, 3, 4])),
  onVariable('embeddingLookupUnique(params, ids, options)', ['name', 'maxNorm', 'returnTrainable', 'out'], lookupFull, (v, o) => de.embeddingLookupUnique(v, [2n, 1n], o as never), (r) => expect(firstOf(r)).toEqual([3, 4, 1, 2])),
  onVariable('embeddingLookupSparse(params, spIds, spWeights, options)', ['name', 'maxNorm', 'returnTrainable', 'out', 'combiner'], () => ({ ...lookupFull(), out: new Float32Array(2), combiner: 'sum' }), (v, o) => de.embeddingLookupSparse(v, sparse(), weights(), o as never), (r) => expect(firstOf(r)).toEqual([10, 14])),
  onVariable('safeEmbeddingLookupSparse(params, ids, weights, options)', ['name', 'maxNorm', 'returnTrainable', 'out', 'combiner', 'defaultId'], () => ({ ...lookupFull(), out: new Float32Array(2), combiner: 'sum', defaultId: 1 }), (v, o) => de.safeEmbeddingLookupSparse(v, sparse(), weights(), o as never), (r) => expect(firstOf(r)).toEqual([10, 14])),
]);

describeOptionNames('tfra: optimizers and layers', [
  ...optimizerCases.map(([name, Cls, full, read, want]): OptionNamesCase => ({ label: `new ${name}(options)`, argument: 'options', names: Object.keys(full), full: () => ({ ...full }), call: (o) => new Cls(o as never), check: (r) => expect(read(r as de.Optimizer)).toEqual(want) })),
  {
    label: 'DynamicEmbeddingOptimizer(optimizer, options)',
    argument: 'options',
    names: ['bpV2', 'synchronous'],
    full: () => ({ bpV2: true, synchronous: true }),
    call: (o) => de.DynamicEmbeddingOptimizer(new de.SGD(), o),
    check: (r) => expect(r).toBeInstanceOf(de.SGD),
  },
  { label: 'new Embedding(options)', argument: 'options', names: Object.keys(layerFull()), full: layerFull, call: (o) => new de.Embedding(o as never), check: async (l) => expect(Array.from((await (l as de.Embedding).call([[1n, 2n]])).data)).toEqual([0.5, 0.5, 0.5, 0.5]) },
  { label: 'new SquashedEmbedding(options)', argument: 'options', names: Object.keys(layerFull()), full: layerFull, call: (o) => new de.SquashedEmbedding(o as never), check: async (l) => expect(Array.from((await (l as de.Embedding).call([[1n, 2n]])).data)).toEqual([1, 1]) },
  {
    label: 'new FieldWiseEmbedding(options)',
    argument: 'options',
    names: Object.keys(layerFull()),
    required: ['nslots', 'slotMapFn'],
    full: () => ({ ...layerFull(), nslots: 2, slotMapFn: (k: bigint) => Number(k % 2n) }),
    call: (o) => new de.FieldWiseEmbedding(o as never),
    check: async (l) => expect((await (l as de.Embedding).call([[1n, 3n]])).shape).toEqual([1, 2, 2]),
  },
]);
