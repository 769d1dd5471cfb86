// Junk input at the public functions of store-rocksdb and at an open store's methods.
import { afterAll } from 'vitest';
import { join } from 'node:path';
import { describeJunkSuite, junkTarget } from '@embedstack/core/testing';
import * as rocks from './index.js';
import { tempDir } from '../test/tmp.js';

const t = tempDir('rocks-junk-');
afterAll(() => t.cleanup());
let n = 0;

describeJunkSuite({
  name: '@embedstack/store-rocksdb',
  exports: rocks,
  runs: Number(process.env.JUNK_RUNS ?? 40),
  targets: [
    junkTarget({
      name: 'RocksStore',
      make: async () => {
        const s = await rocks.RocksStore.open({ path: join(t.dir, `db${n++}`), tables: ['a'] });
        await s.put('a', [1n, 2n], new Float32Array([1, 2, 3, 4]));
        return s;
      },
      state: async (s) => (s.closed ? 'closed' : Array.from((await s.multiGet('a', [1n, 2n, 3n], 2)).values)),
      // close ends the target; addTables reopens the database (covered in store.test.ts)
      skip: ['close', 'addTables'],
      examples: {
        multiGet: [['a', [1n], 2]],
        put: [['a', [3n], new Float32Array([5, 6])]],
        remove: [['a', [9n]]],
        bulkLoad: [['a', [{ keys: [4n], values: new Float32Array([7, 8]) }]]],
      },
      dispose: (s) => void s.close(),
    }),
  ],
});
