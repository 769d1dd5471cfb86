// Every public function and constructor of core that takes an options object (or another object of
// named fields: an initializer spec, a shard plan, a bag, a shard entry, a find output) refuses a
// misspelt name with INVALID_ARGUMENT naming it, changes nothing then, and takes all its names at once.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  checkKnownKeys,
  createCache,
  createOptimizer,
  createTable,
  type EmbeddingTable,
  exportHugeCTR,
  importHugeCTR,
  initializers,
  inspectHugeCTRModel,
  loadDefaultBackend,
  loadTable,
  lookupCombinedShardsSync,
  optimizers,
  RaggedTensor,
  readHugeCTRModel,
  referenceBackend,
  resolveCacheOptions,
  saveTable,
  SparseTensor,
  Tensor,
} from '@embedstack/core';
import { bundleChild, describeOptionNames, misspellings, onFresh, type OptionNamesCase } from '@embedstack/core/testing';
import { list } from './util.js';

const dirs: string[] = [];
const tempDir = async (): Promise<string> => {
  const d = await mkdtemp(join(tmpdir(), 'embedstack-opts-'));
  dirs.push(d);
  return d;
};
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const DIM = 2;
/** A table holding key 1 -> [1, 2] and key 2 -> [3, 4] (adagrad slots, customised scores 5 and 6). */
function table(): EmbeddingTable {
  const t = createTable({ dim: DIM, optimizer: optimizers.adagrad(), scorePolicy: 'customized' }, { backend: referenceBackend });
  t.upsertSync([1n, 2n], Float32Array.from([1, 2, 3, 4]), { scores: [5n, 6n] });
  return t;
}
/** Keys, values, slots and scores, sorted by key. */
function state(t: EmbeddingTable): unknown {
  const b = t.exportSync();
  const order = list(b.keys).map((k, i) => [k, i] as const).sort((x, y) => (x[0] < y[0] ? -1 : 1));
  return order.map(([k, i]) => [k, list(b.values.subarray(i * DIM, (i + 1) * DIM)), b.slots.map((s) => list(s.subarray(i * DIM, (i + 1) * DIM))), b.scores[i]]);
}
const expectValues = (got: unknown, want: number[]) => expect(list(got as Float32Array)).toEqual(want);

/** A case on one table: `call(t, obj)`, the state checked on the same table. */
function onTable(label: string, argument: string, names: string[], full: () => Record<string, unknown>, call: (t: EmbeddingTable, o: Record<string, unknown>) => unknown, check: (r: unknown, t: EmbeddingTable) => void, required?: string[]): OptionNamesCase {
  return onFresh({ label, argument, names, required, full, make: table, call, check, state });
}
/** Key `k`'s [values, score]. */
const row = (t: EmbeddingTable, k: bigint) => (state(t) as [bigint, number[], unknown, bigint][]).filter((r) => r[0] === k).map((r) => [r[1], r[3]])[0];

const bag = () => ({ rowSplits: Int32Array.from([0, 2]), keys: BigInt64Array.from([1n, 2n]), weights: Float32Array.from([1, 2]) });
const mod = () => ({ placement: 'mod', numShards: 1, shard: 0 });

const tableCases: OptionNamesCase[] = [
  onTable('find(keys, options)', 'options', ['out', 'plan'], () => ({ out: { values: new Float32Array(4), exists: new Uint8Array(2) }, plan: { placement: 'mod', numShards: 2, shard: 1 } }), (t, o) => t.findSync([1n, 2n], o), (r) => {
    const f = r as { values: Float32Array; exists: Uint8Array };
    expect([list(f.values), list(f.exists)]).toEqual([[1, 2, 0, 0], [1, 0]]); // key 2 is shard 0's
  }),
  onTable('find(keys, { out })', 'out', ['values', 'exists'], () => ({ values: new Float32Array(4), exists: new Uint8Array(2) }), (t, o) => t.findSync([2n, 9n], { out: o as never }), (r) => {
    const f = r as { values: Float32Array; exists: Uint8Array };
    expect([list(f.values), list(f.exists)]).toEqual([[3, 4, 0, 0], [1, 0]]);
  }),
  onTable('findOrInsert(keys, options)', 'options', ['out', 'plan', 'scores'], () => ({ out: { values: new Float32Array(2) }, plan: mod(), scores: [9n] }), (t, o) => t.findOrInsertSync([7n], o), (r, t) => {
    expectValues((r as { values: Float32Array }).values, [0, 0]);
    expect(t.exportSync().scores.at(-1)).toBe(9n);
  }),
  ...(['upsert', 'assign'] as const).map((m) =>
    onTable(`${m}(keys, values, options)`, 'options', ['scores'], () => ({ scores: [8n] }), (t, o) => t[`${m}Sync`]([1n], Float32Array.from([7, 7]), o), (_, t) => expect(row(t, 1n)).toEqual([[7, 7], 8n])),
  ),
  onTable('accum(keys, deltas, exists, options)', 'options', ['scores'], () => ({ scores: [8n] }), (t, o) => t.accumSync([1n], Float32Array.from([1, 1]), [true], o), (_, t) => expect(row(t, 1n)).toEqual([[2, 3], 8n])),
  onTable('export(options)', 'options', ['offset', 'limit'], () => ({ offset: 1, limit: 5 }), (t, o) => t.exportSync(o), (r) => expect((r as { keys: BigInt64Array }).keys.length).toBe(1)),
  onTable('lookupCombined(ids, options)', 'options', ['weights', 'combiner', 'maxNorm', 'insertMissing', 'out'], () => ({ weights: Float32Array.from([1, 2]), combiner: 'sum', maxNorm: 100, insertMissing: true, out: new Float32Array(2) }), (t, o) => t.lookupCombinedSync({ rowSplits: Int32Array.from([0, 2]), keys: BigInt64Array.from([1n, 2n]), weights: null }, o), (r) => expectValues(r, [7, 10])),
  onTable('lookupCombinedPartial(ids, options)', 'options', ['weights', 'combiner', 'maxNorm', 'plan', 'insertMissing', 'out'], () => ({ weights: Float32Array.from([1, 2]), combiner: 'sum', maxNorm: 100, plan: { placement: 'mod', numShards: 2, shard: 0 }, insertMissing: false, out: new Float64Array(2) }), (t, o) => t.lookupCombinedPartialSync({ rowSplits: Int32Array.from([0, 2]), keys: BigInt64Array.from([1n, 2n]), weights: null }, o as never), (r) => expect(list(r as Float64Array)).toEqual([6, 8])),
  onTable('lookupCombinedBackward(ids, grads, options)', 'options', ['weights', 'combiner', 'maxNorm', 'plan', 'out'], () => ({ weights: Float32Array.from([1, 2]), combiner: 'sum', maxNorm: 100, plan: mod(), out: new Float32Array(4) }), (t, o) => t.lookupCombinedBackwardSync({ rowSplits: Int32Array.from([0, 2]), keys: BigInt64Array.from([1n, 2n]), weights: null }, Float32Array.from([1, 1]), o), (r) => expectValues(r, [1, 1, 2, 2])),
  onTable('applyCombinedGradients(ids, grads, optimizer, step, options)', 'options', ['weights', 'combiner', 'maxNorm', 'plan'], () => ({ weights: Float32Array.from([1, 2]), combiner: 'sum', maxNorm: 100, plan: mod() }), (t, o) => t.applyCombinedGradientsSync({ rowSplits: Int32Array.from([0, 2]), keys: BigInt64Array.from([1n, 2n]), weights: null }, Float32Array.from([1, 1]), optimizers.adagrad({ learningRate: 0 }), 1, o), (_, t) => expect((state(t) as unknown[][])[1]![2]).toEqual([[4.1, 4.1].map((v) => Math.fround(v))])),
  onTable('applyGradients(keys, grads, optimizer, step, options)', 'options', ['plan'], () => ({ plan: mod() }), (t, o) => t.applyGradientsSync([1n], Float32Array.from([2, 2]), optimizers.adagrad({ learningRate: 0 }), 1, o), (_, t) => expect((state(t) as unknown[][])[0]![2]).toEqual([[4.1, 4.1].map((v) => Math.fround(v))])),
  onTable('a Bag given as a plain object (lookupCombined ids)', 'ids', ['weights'], bag, (t, o) => t.lookupCombinedSync(o as never, { combiner: 'sum' }), (r) => expectValues(r, [7, 10]), ['rowSplits', 'keys']),
  onTable('a shard plan, placement mod (find options.plan)', 'plan', ['numShards', 'shard'], () => ({ placement: 'mod', numShards: 2, shard: 0 }), (t, o) => t.findSync([1n, 2n], { plan: o as never }), (r) => expect(list((r as { exists: Uint8Array }).exists)).toEqual([0, 1])),
  onTable('a shard plan, placement range (find options.plan)', 'plan', ['start', 'end'], () => ({ placement: 'range', start: 1, end: 3 }), (t, o) => t.findSync([2n, 5n], { plan: o as never }), (r) => expectValues((r as { values: Float32Array }).values, [1, 2, 0, 0])), // global 2 -> local 1
  onTable('a shard entry of lookupCombinedShards (shards[0])', 'shards[0]', ['plan'], () => ({ table: table(), plan: mod() }), (_, o) => lookupCombinedShardsSync([o as never], bag(), { combiner: 'sum' }), (r) => expectValues(r, [7, 10]), ['table']),
  onTable('lookupCombinedShards(shards, ids, options)', 'options', ['weights', 'combiner', 'maxNorm', 'insertMissing', 'out'], () => ({ weights: Float32Array.from([1, 2]), combiner: 'sum', maxNorm: 100, insertMissing: false, out: new Float32Array(2) }), (t, o) => lookupCombinedShardsSync([{ table: t, plan: mod() as never }], { ...bag(), weights: null }, o), (r) => expectValues(r, [7, 10])),
];

const staticFull = () => ({
  kind: 'static',
  dim: DIM,
  name: 's',
  keyDtype: 'int32',
  vocabularySize: 3,
  initializer: initializers.fromArray([1, 2, 3, 4, 5, 6]),
  optimizer: optimizers.adagrad(),
  slotInitialValues: [0.5],
  scorePolicy: 'lru',
  seed: 1,
  stream: 2,
  storageDtype: 'bfloat16',
});
const staticNames = Object.keys(staticFull());
const dynamicFull = () => ({ ...staticFull(), kind: 'dynamic', keyDtype: 'int64', vocabularySize: undefined, initCapacity: 4, maxCapacity: 8, initializer: initializers.constant(0.5) });

/** A case on createTable's initializer (a plain-object spec of each kind). */
function initializerCase(kind: string, fields: Record<string, unknown>, want: number[], options: Record<string, unknown> = { dim: DIM }): OptionNamesCase {
  return {
    label: `a plain-object initializer spec, kind ${kind}`,
    argument: 'initializer',
    names: Object.keys(fields),
    full: () => ({ kind, ...fields }),
    call: (o) => createTable({ ...options, initializer: o } as never, { backend: referenceBackend }),
    check: (t) => expectValues((t as EmbeddingTable).findOrInsertSync([0]).values, want),
  };
}

const otherCases: OptionNamesCase[] = [
  {
    label: 'createTable(options), a dynamic table',
    argument: 'options',
    names: Object.keys(dynamicFull()).filter((k) => k !== 'vocabularySize'),
    full: () => {
      const o: Record<string, unknown> = dynamicFull();
      delete o.vocabularySize;
      return o;
    },
    call: (o) => createTable(o as never, { backend: referenceBackend }),
    check: (t) => {
      const tt = t as EmbeddingTable;
      expect([tt.options.maxCapacity, tt.options.slots.initial, tt.options.stream, tt.storageDtype]).toEqual([8, [0.5], 2, 'bfloat16']);
      expectValues(tt.findOrInsertSync([4n]).values, [0.5, 0.5]);
    },
  },
  {
    label: 'createTable(options), a static table',
    argument: 'options',
    names: staticNames,
    full: staticFull,
    call: (o) => createTable(o as never, { backend: referenceBackend }),
    check: (t) => expectValues((t as EmbeddingTable).findSync(Int32Array.from([2])).values, [5, 6]),
  },
  { label: 'createTable(options, opts)', argument: 'opts', names: ['backend'], full: () => ({ backend: referenceBackend }), call: (o) => createTable({ dim: 1 }, o as never), check: (t) => expect((t as EmbeddingTable).backendName).toBe('reference') },
  {
    label: "createOptimizer('adam', options) (optimizers.adam)",
    argument: 'options',
    names: [],
    full: () => ({}),
    call: () => null,
    check: () => undefined,
  },
  initializerCase('constant', { value: 0.5 }, [0.5, 0.5]),
  initializerCase('row', { values: Float32Array.from([1, 2]) }, [1, 2]),
  initializerCase('uniform', { min: 0.25, max: 0.25 }, [0.25, 0.25]),
  initializerCase('normal', { mean: 0.75, std: 0 }, [0.75, 0.75]),
  initializerCase('truncatedNormal', { mean: -1, std: 0 }, [-1, -1]),
  initializerCase('array', { values: Float32Array.from([3, 4]) }, [3, 4], { kind: 'static', dim: DIM, vocabularySize: 1 }),
  initializerCase('function', { fn: () => [5, 6] }, [5, 6], { kind: 'static', dim: DIM, vocabularySize: 1 }),
  { label: 'resolveCacheOptions(options)', argument: 'options', names: ['capacity', 'dim', 'ways', 'name'], full: () => ({ capacity: 8, dim: 2, ways: 4, name: 'c' }), call: (o) => resolveCacheOptions(o as never), check: (r) => expect(r).toEqual({ capacity: 8, dim: 2, ways: 4, name: 'c' }) },
  { label: 'createCache(options, opts)', argument: 'opts', names: ['backend'], full: () => ({ backend: 'reference' }), call: (o) => createCache({ capacity: 4, dim: 1 }, o as never), check: (c) => expect((c as { backend: string }).backend).toBe('reference') },
  ...(() => {
    let cache = createCache({ capacity: 4, dim: 1 }, { backend: referenceBackend });
    const reset = () => {
      cache = createCache({ capacity: 4, dim: 1 }, { backend: referenceBackend });
      cache.insert(BigInt64Array.from([3n]), Float32Array.from([7]));
    };
    const state = () => [list(cache.keys()), cache.size()];
    return [
      { label: 'EmbeddingCache.query(keys, opts)', argument: 'opts', names: ['out'], full: () => ({ out: { values: new Float32Array(2) } }), reset, state, call: (o: Record<string, unknown>) => cache.query(BigInt64Array.from([3n, 4n]), o as never), check: (r: unknown) => expectValues((r as { values: Float32Array }).values, [7, 0]) },
      { label: 'EmbeddingCache.query(keys, { out })', argument: 'opts.out', names: ['values', 'exists'], full: () => ({ values: new Float32Array(2), exists: new Uint8Array(2) }), reset, state, call: (o: Record<string, unknown>) => cache.query(BigInt64Array.from([3n, 4n]), { out: o as never }), check: (r: unknown) => expect(list((r as { exists: Uint8Array }).exists)).toEqual([1, 0]) },
    ];
  })(),
  { label: 'loadDefaultBackend(options)', argument: 'options', names: ['backend', 'from', 'load'], full: () => ({ backend: referenceBackend, from: import.meta.url, load: () => ({}) }), call: (o) => loadDefaultBackend(o as never), check: (b) => expect(b).toBe(referenceBackend) },
  { label: 'Tensor.fromNestedArray(rows, options)', argument: 'options', names: ['dtype'], full: () => ({ dtype: 'int32' }), call: (o) => Tensor.fromNestedArray([[1, 2]], o as never), check: (t) => expect((t as Tensor).data).toEqual(Int32Array.from([1, 2])) },
  { label: 'SparseTensor.fromNestedArray(rows, options)', argument: 'options', names: ['dtype'], full: () => ({ dtype: 'int32' }), call: (o) => SparseTensor.fromNestedArray([[1, 2]], o as never), check: (t) => expect((t as SparseTensor).values).toEqual(Int32Array.from([1, 2])) },
  { label: 'RaggedTensor.fromNestedArray(rows, options)', argument: 'options', names: ['dtype'], full: () => ({ dtype: 'float32' }), call: (o) => RaggedTensor.fromNestedArray([[1], []], o as never), check: (t) => expect((t as RaggedTensor).values).toEqual(Float32Array.from([1])) },
];

// createOptimizer: every common option and hyperparameter (each optimizer reads its own).
const adamFull = () => ({
  learningRate: 0.01,
  clipWeightMin: -1,
  clipWeightMax: 1,
  weightDecayFactor: 0.5,
  multiplyWeightDecayFactorByLearningRate: true,
  clipvalue: 5,
  useGradientAccumulation: true,
  initialAccumulatorValue: 0.2,
  beta1: 0.8,
  beta2: 0.99,
  epsilon: 1e-6,
  momentum: 0.1,
  useNesterov: true,
  exponent: 3,
  l1: 0.1,
  l2: 0.2,
  beta: 0.3,
  learningRatePower: -0.25,
  sumInsideSqrt: false,
  lazyAdam: true,
  rho: 0.9,
});
otherCases[3] = {
  label: "createOptimizer('adam', options) (optimizers.adam)",
  argument: 'options',
  names: Object.keys(adamFull()),
  full: adamFull,
  call: (o) => createOptimizer('adam', o as never),
  check: (s) => {
    const spec = s as ReturnType<typeof createOptimizer>;
    expect([spec.learningRate, spec.hyper.beta1, spec.hyper.sumInsideSqrt, spec.clipGradMax, spec.clipWeightMin]).toEqual([0.01, 0.8, false, 5, -1]);
  },
};

/** Checkpoint functions: a saved table / exported HugeCTR folder in a fresh folder each call; the state is the folder's listing. */
function checkpointCases(): OptionNamesCase[] {
  let dir = '';
  const listing = async () => (await readdir(dir)).sort();
  /** A fresh folder (made ready by `make`) before each call, its listing the state. */
  const withDir = (make: (d: string) => Promise<void>, run: (d: string, o: Record<string, unknown>) => Promise<unknown>) => ({
    reset: async () => {
      dir = await tempDir();
      await make(dir);
    },
    call: (o: Record<string, unknown>) => run(dir, o),
    state: listing,
  });
  const none = async () => undefined;
  const saved = async (d: string) => void (await saveTable(table(), join(d, 'ck')));
  const exported = async (d: string) => exportHugeCTR(table(), join(d, 'hc'));
  const read = async (it: AsyncGenerator<{ keys: BigInt64Array }>) => {
    const keys: bigint[] = [];
    for await (const b of it) keys.push(...b.keys);
    return keys.sort();
  };
  return [
    { label: 'saveTable(table, dir, options)', argument: 'options', names: ['batchSize', 'shard', 'extra'], full: () => ({ batchSize: 1, shard: { index: 1, count: 2 }, extra: { a: 1 } }), ...withDir(none, (d, o) => saveTable(table(), join(d, 'ck'), o)), check: (m) => expect([(m as { rows: number }).rows, (m as { extra: unknown }).extra]).toEqual([2, { a: 1 }]) },
    { label: 'saveTable(table, dir, { shard })', argument: 'shard', names: ['index', 'count'], full: () => ({ index: 0, count: 1 }), ...withDir(none, (d, o) => saveTable(table(), join(d, 'ck'), { shard: o as never })), check: (m) => expect((m as { rows: number }).rows).toBe(2) },
    {
      label: 'loadTable(table, dir, options)',
      argument: 'options',
      names: ['batchSize', 'filter', 'clear'],
      full: () => ({ batchSize: 1, filter: (k: bigint) => k === 2n, clear: true }),
      ...withDir(saved, async (d, o) => {
        const t = table();
        t.upsertSync([9n], Float32Array.from([9, 9]));
        await loadTable(t, join(d, 'ck'), o);
        return t;
      }),
      check: (t) => expect(list((t as EmbeddingTable).exportSync().keys)).toEqual([2n]),
    },
    { label: 'exportHugeCTR(table, dir, options)', argument: 'options', names: ['batchSize', 'keyFormat'], full: () => ({ batchSize: 1, keyFormat: 'uint32' }), ...withDir(none, async (d, o) => (await exportHugeCTR(table(), join(d, 'hc'), o), inspectHugeCTRModel(join(d, 'hc'), DIM, { keyFormat: 'uint32' }))), check: (i) => expect((i as { keyBytes: number }).keyBytes).toBe(8) },
    {
      label: 'importHugeCTR(dir, table, options)',
      argument: 'options',
      names: ['batchSize', 'keyFormat', 'allowEmpty', 'filter'],
      full: () => ({ batchSize: 1, keyFormat: 'int64', allowEmpty: false, filter: (k: bigint) => k === 1n }),
      ...withDir(exported, (d, o) => importHugeCTR(join(d, 'hc'), createTable({ dim: DIM }, { backend: referenceBackend }), o)),
      check: (n) => expect(n).toBe(1),
    },
    { label: 'inspectHugeCTRModel(dir, dim, options)', argument: 'options', names: ['batchSize', 'keyFormat', 'allowEmpty'], full: () => ({ batchSize: 1, keyFormat: 'int64', allowEmpty: false }), ...withDir(exported, (d, o) => inspectHugeCTRModel(join(d, 'hc'), DIM, o)), check: (i) => expect((i as { rows: number }).rows).toBe(2) },
    { label: 'readHugeCTRModel(dir, dim, options)', argument: 'options', names: ['batchSize', 'keyFormat', 'allowEmpty'], full: () => ({ batchSize: 1, keyFormat: 'int64', allowEmpty: false }), ...withDir(exported, (d, o) => read(readHugeCTRModel(join(d, 'hc'), DIM, o))), check: (k) => expect(k).toEqual([1n, 2n]) },
  ];
}

describeOptionNames('core: the methods of EmbeddingTable', tableCases);
describeOptionNames('core: tables, optimizers, initializers, caches, tensors, backends', otherCases);
describeOptionNames('core: checkpoints and HugeCTR folders', checkpointCases(), 30_000);

describe('core: the helpers', () => {
  it('misspellings: the last letter dropped, snake_case, a letter doubled', () => {
    expect(misspellings('maxNorm')).toEqual(['maxNor', 'max_norm', 'maxNormm']);
    expect(misspellings('out')).toEqual(['ou', 'out_', 'outt']);
  });

  it('checkKnownKeys refuses an own key it does not know (INVALID_ARGUMENT naming it), ignores inherited ones, checks its arguments', () => {
    expect(() => checkKnownKeys(Object.create({ inherited: 1 }) as object, ['a'], 'x')).not.toThrow();
    expect(() => checkKnownKeys({ a: 1, b: 2 }, ['a'], 'x', 'fields')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'x.b', message: expect.stringContaining('one of the known fields (a)') }));
    expect(() => checkKnownKeys(null as never, ['a'], 'x')).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'obj' }));
    expect(() => checkKnownKeys({}, [1] as never, 'x')).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'known' }));
  });

  it('a plan of one placement with a field of another is refused (it would be ignored)', () => {
    const t = table();
    expect(() => t.findSync([1n], { plan: { placement: 'localized', numShards: 2, shard: 1 } as never })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'plan.numShards' }));
    expect(() => createTable({ dim: 1, initializer: { kind: 'uniform', min: 0, max: 1, seed: 3 } as never })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'initializer.seed' }));
  });

  it('a non-object options of fromNestedArray is refused, not read as the default dtype', () => {
    expect(() => Tensor.fromNestedArray([[1]], 'int32' as never)).toThrow(expect.objectContaining({ code: 'INVALID_TYPE', argument: 'options' }));
  });
});

describe('core/testing: bundleChild(entry, outDir, options)', () => {
  it('refuses a misspelt option name (INVALID_ARGUMENT naming it) before bundling anything', async () => {
    for (const typo of ['noExternals', 'link']) {
      await expect(bundleChild('x.ts', tmpdir(), { [typo]: [] } as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: `options.${typo}` });
    }
  });
});
