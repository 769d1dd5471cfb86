// Junk input at every public function, constructor and method of tfra.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describeJunkSuite, junkTarget } from '@embedstack/core/testing';
import { afterAll, beforeAll } from 'vitest';
import { uniqueName, useTestBackend } from '../test/setup.js';
import * as de from './index.js';

const cwd = process.cwd();
process.chdir(mkdtempSync(`${tmpdir()}/tfra-junk-`));
afterAll(() => process.chdir(cwd)); // the worker runs other files after this one
beforeAll(async () => {
  await useTestBackend();
});

const contents = async (v: de.AnyVariable) => {
  const [k, val] = await v.export();
  return { keys: Array.from(k as ArrayLike<bigint | number>, String).sort(), values: Array.from(val.data), sizes: [await v.size(0), await v.size(1)] };
};

const v = new de.Variable({ dim: 2, name: uniqueName('junkex') });
const sp = new de.SparseTensor([[0, 0], [1, 0]], new BigInt64Array([1n, 2n]), [2, 2]);

describeJunkSuite({
  name: '@embedstack/tfra',
  examples: {
    Variable: [[{ dim: 2, name: 'jx', devices: ['a', 'b'], initializer: [1, 2] }]],
    getVariable: [['jv', { dim: 2, reuse: true }]],
    embeddingLookup: [[v, [1n, 2n], { name: 'e', maxNorm: 1 }]],
    embeddingLookupUnique: [[v, [1n, 2n]]],
    embeddingLookupSparse: [[v, sp, null, { combiner: 'sum' }]],
    safeEmbeddingLookupSparse: [[v, sp, null, { combiner: 'mean', defaultId: 3n }]],
    HkvHashTableCreator: [[{ initCapacity: 4, maxCapacity: 8, evictStrategy: 'lfu' }]],
    DynamicEmbeddingOptimizer: [[new de.optimizers.SGD(), { bpV2: true }]],
    ShadowVariable: [[v, 'shadow', 1]],
    hashString64: [['abc']],
    defaultPartitionFn: [[new BigInt64Array([1n, -2n]), 3]],
  },
  exports: de,
  namespaces: ['optimizers', 'layers'],
  runs: Number(process.env.JUNK_RUNS ?? 40),
  skip: [
    // switch the process-wide model mode (no arguments to reject)
    'enableInferenceMode',
    'enableTrainMode',
  ],
  targets: [
    junkTarget({
      name: 'Variable (2 shards)',
      make: async () => {
        const v = new de.Variable({ dim: 2, name: uniqueName('junk'), devices: ['a', 'b'] });
        await v.upsert([1n, 2n, -3n], [1, 2, 3, 4, 5, 6]);
        return v;
      },
      state: contents,
      examples: {
        lookup: [[[1n, 5n], { returnExists: true, out: new Float32Array(4) }]],
        lookupSync: [[[1n], { out: new Float32Array(2) }]],
        upsert: [[[7n], [1, 2]]],
        upsertSync: [[[7n], [1, 2]]],
        accum: [[[1n], [1, 2], [2, 3], [true]]],
        remove: [[[1n]]],
        size: [[1]],
        getSlotVariables: [[new de.optimizers.Adam()]],
        getTrainableByName: [['x']],
      },
      // dispose / clear succeed without arguments; the file-system ones are tested elsewhere
      skip: ['dispose', 'clear', 'clearSync', 'saveToFileSystem', 'loadFromFileSystem', 'restrict'],
      dispose: (v) => v.dispose(),
    }),
    junkTarget({
      name: 'SquashedEmbedding layer',
      make: () => new de.layers.SquashedEmbedding({ embeddingSize: 2, combiner: 'mean', name: uniqueName('junklayer') }),
      state: async (l) => {
        const [k, val] = await l.params.export();
        return { keys: Array.from(k as ArrayLike<bigint | number>, String).sort(), values: Array.from(val.data) };
      },
      dispose: (l) => l.params.dispose(),
    }),
    junkTarget({
      name: 'DynamicEmbeddingOptimizer(Adam)',
      make: () => de.DynamicEmbeddingOptimizer(new de.optimizers.Adam()),
      state: (o) => o.iterations,
    }),
  ],
});
