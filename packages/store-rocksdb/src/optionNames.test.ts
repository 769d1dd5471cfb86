// RocksStore.open's options (and resolveRocksStoreOptions) refuse a misspelt name with INVALID_ARGUMENT
// naming it, create nothing then, and take all their names at once.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describeOptionNames } from '@embedstack/core/testing';
import { afterAll, expect, it } from 'vitest';
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

describeOptionNames('store-rocksdb: the batches of bulkLoad', [
  {
    label: 'RocksStore.bulkLoad(table, [batch])',
    argument: 'batches[i]',
    names: ['keys', 'values'],
    full: () => ({ keys: [4n], values: Float32Array.from([1, 2]) }),
    reset,
    call: async (o) => {
      const store = await RocksStore.open({ path, tables: ['t'] });
      stores.push(store);
      return [store, await store.bulkLoad('t', [o as never])];
    },
    check: async (r) => {
      const [store, rows] = r as [RocksStore, number];
      expect([rows, Array.from((await store.multiGet('t', [4n], 2)).values)]).toEqual([1, [1, 2]]);
    },
  },
]);

it('bulkLoad refuses a batch with a field it would drop ({ keys, values, scores }), writing nothing', async () => {
  reset();
  const store = await RocksStore.open({ path, tables: ['t'] });
  stores.push(store);
  await expect(store.bulkLoad('t', [{ keys: [4n], values: Float32Array.from([1, 2]), scores: [1n] } as never])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'batches[i].scores' });
  expect((await store.multiGet('t', [4n], 2)).hits).toBe(0);
});
