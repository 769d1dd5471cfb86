// RocksStore.open's options (and resolveRocksStoreOptions) refuse a misspelt name with INVALID_ARGUMENT
// naming it, create nothing then, and take all their names at once.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describeOptionNames } from '@embedstack/core/testing';
import { afterAll, expect } from 'vitest';
import { resolveRocksStoreOptions, RocksStore } from './index.js';
import { tempDir } from '../test/tmp.js';

const tmp = tempDir('rocks-opts-');
const stores: RocksStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
  tmp.cleanup();
});

let n = 0;
let path = '';
const full = () => ({ path, tables: ['a', 'b', 'a'], readOnly: false, numThreads: 2, maxBatchSize: 3, openTimeoutMs: 5000 });
const names = ['path', 'tables', 'readOnly', 'numThreads', 'maxBatchSize', 'openTimeoutMs'];
const reset = () => {
  path = join(tmp.dir, `db${n++}`);
};

describeOptionNames('store-rocksdb: option names', [
  {
    label: 'resolveRocksStoreOptions(options)',
    argument: 'options',
    names,
    full,
    reset,
    call: (o) => resolveRocksStoreOptions(o),
    check: (r) => expect(r).toEqual({ path, tables: ['a', 'b'], readOnly: false, numThreads: 2, maxBatchSize: 3, openTimeoutMs: 5000 }),
  },
  {
    label: 'RocksStore.open(options)',
    argument: 'options',
    names,
    full,
    reset,
    state: () => readdirSync(tmp.dir).sort(),
    call: (o) => RocksStore.open(o as never),
    check: async (s) => {
      const store = s as RocksStore;
      stores.push(store);
      await store.put('b', [4n], Float32Array.from([1.5, 2.5]));
      const r = await store.multiGet('b', [4n, 5n], 2);
      expect([store.tables().sort(), Array.from(r.values)]).toEqual([['a', 'b'], [1.5, 2.5, 0, 0]]);
    },
  },
]);
