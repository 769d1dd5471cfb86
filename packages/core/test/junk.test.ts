// Junk input at every public function, constructor and table method of core.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll } from 'vitest';
import * as core from '@embedstack/core';
import { describeJunkSuite, junkTarget } from '@embedstack/core/testing';

// Calls that get a junk string as a directory write relative to the working directory: keep that in a scratch dir.
const cwd = process.cwd();
process.chdir(mkdtempSync(`${tmpdir()}/embedstack-junk-`));
afterAll(() => process.chdir(cwd)); // the worker runs other files after this one

const snapshot = async (t: core.EmbeddingTable) => {
  const b = await t.export();
  return { size: t.size(), keys: Array.from(b.keys as ArrayLike<bigint | number>, String), values: Array.from(b.values), slots: b.slots.map((s) => Array.from(s)), scores: Array.from(b.scores, String) };
};

const bag = core.RaggedTensor.fromNestedArray([[1n, 2n], [3n]]);
const grads = new Float32Array(4);
const adagrad = core.optimizers.adagrad({ learningRate: 0.1 });
/** Valid calls of the table methods (mutated with junk by the harness). */
const tableExamples = {
  find: [[[1n, 2n], { out: { values: new Float32Array(4) } }], [[1n], { plan: { placement: 'mod', numShards: 2, shard: 1 } }]],
  findSync: [[[1n, 2n], { out: { values: new Float32Array(4), exists: new Uint8Array(2) } }]],
  upsert: [[[1n], [5, 6]]],
  upsertSync: [[[1n], [5, 6]]],
  accum: [[[1n], [1, 1], [true]]],
  lookupCombined: [[bag, { combiner: 'sum', out: new Float32Array(4) }]],
  lookupCombinedSync: [[bag, { combiner: 'mean', maxNorm: 1 }]],
  lookupCombinedPartial: [[bag, { plan: { placement: 'mod', numShards: 2, shard: 0 } }]],
  lookupCombinedBackward: [[bag, grads, { combiner: 'sqrtn' }]],
  applyCombinedGradients: [[bag, grads, adagrad, 1, { combiner: 'sum' }]],
  applyCombinedGradientsSync: [[bag, grads, adagrad, 1]],
  applyGradients: [[[1n, 2n], grads, adagrad, 1]],
  importRows: [[[1n], [1, 2]]],
  export: [[{ offset: 0, limit: 2 }]],
  remove: [[[1n]]],
  restrict: [[1]],
};

describeJunkSuite({
  name: '@embedstack/core',
  exports: core,
  namespaces: ['initializers', 'optimizers'],
  runs: Number(process.env.JUNK_RUNS ?? 50),
  examples: {
    Tensor: [[new Float32Array(4), [2, 2]]],
    'Tensor.fromNestedArray': [[[[1, 2], [3, 4]], { dtype: 'float32' }]],
    SparseTensor: [[[[0, 0], [1, 1]], new BigInt64Array([1n, 2n]), [2, 2]]],
    'SparseTensor.fromNestedArray': [[[[1n], [2n, 3n]]]],
    RaggedTensor: [],
    'RaggedTensor.fromRowSplits': [[new BigInt64Array([1n, 2n]), [0, 1, 2]]],
    'RaggedTensor.fromNestedArray': [[[[1n], []], { dtype: 'int64' }]],
    createTable: [[{ dim: 2 }, { backend: core.referenceBackend }], [{ kind: 'static', vocabularySize: 3, dim: 1 }, { backend: 'reference' }]],
    toBag: [[core.RaggedTensor.fromNestedArray([[1n], [2n, 3n]]), null, 'int64']],
    normalizeKeys: [[[1n, 2n], 'int64'], [[1, 2], 'int32']],
    validateValues: [[new Float32Array(2), [1], 2]],
    validateExists: [[[true, false], 2]],
    resolveShardPlan: [[{ placement: 'mod', numShards: 2, shard: 0 }, { kind: 'dynamic', vocabularySize: 0 }]],
    resolveTableOptions: [[{ dim: 2, optimizer: core.optimizers.adam() }]],
    createOptimizer: [['adagrad', { learningRate: 0.1 }]],
    loadDefaultBackend: [[{ backend: 'reference' }]],
    createCache: [[{ capacity: 8, dim: 2, ways: 4 }, { backend: core.referenceBackend }]],
    resolveCacheOptions: [[{ capacity: 8, dim: 2, ways: 4, name: 'c' }]],
  },
  skip: [
    // backend registry mutators: junk would (un)register or re-default backends for the rest of this process
    'registerBackend',
    'unregisterBackend',
    'setDefaultBackend',
    // write where they are told: junk such as ('x', () => 1) would create files in the working directory
    // (their argument checks are covered by tfra's checkpoint tests)
    'saveVersionedDir',
    'writeDurableFile',
    // the reference backend's internals and pure kernels trust their (validated) input by contract
    'ReferenceDynamicTable',
    'ReferenceStaticTable',
    'rawTableFromSync',
    'EmbeddingTable',
    'ReferenceCache',
    'EmbeddingCache',
  ],
  targets: [
    junkTarget({
      name: 'EmbeddingTable (dynamic, reference backend)',
      make: async () => {
        const t = core.createTable({ dim: 2, optimizer: core.optimizers.adagrad({ learningRate: 0.1 }) }, { backend: core.referenceBackend });
        await t.upsert([1n, 2n, -3n], [1, 2, 3, 4, 5, 6]);
        return t;
      },
      state: snapshot,
      skip: ['dispose', 'clear', 'clearSync'],
      examples: tableExamples,
      dispose: (t) => t.dispose(),
    }),
    junkTarget({
      name: 'EmbeddingTable (static, reference backend)',
      make: () => core.createTable({ kind: 'static', vocabularySize: 4, dim: 2 }, { backend: core.referenceBackend }),
      state: snapshot,
      examples: tableExamples,
      skip: ['dispose', 'clear', 'clearSync'],
      dispose: (t) => t.dispose(),
    }),
    junkTarget({
      name: 'EmbeddingCache (reference backend)',
      make: () => {
        const c = core.createCache({ capacity: 8, dim: 2, ways: 4 }, { backend: core.referenceBackend });
        c.insert(new BigInt64Array([1n, 2n, -3n]), new Float32Array([1, 2, 3, 4, 5, 6]));
        return c;
      },
      state: (c) => ({ size: c.size(), keys: [...c.keys()].map(String).sort() }),
      examples: {
        query: [[new BigInt64Array([1n, 5n]), { out: { values: new Float32Array(4), exists: new Uint8Array(2) } }]],
        insert: [[new BigInt64Array([7n]), new Float32Array(2)]],
        update: [[new BigInt64Array([1n]), new Float32Array(2)]],
        remove: [[new BigInt64Array([2n])]],
      },
      skip: ['dispose', 'clear'],
      dispose: (c) => c.dispose(),
    }),
  ],
});
