// Junk input at every public function of @embedstack/hps and at a running server's methods.
import { afterAll } from 'vitest';
import { join } from 'node:path';
import { SparseTensor } from '@embedstack/core';
import { describeJunkSuite, junkTarget } from '@embedstack/core/testing';
import * as hps from './index.js';
import { psConfig, spreadKeys, tempDir, writeTable } from '../test/fixtures.js';

const t = tempDir('hps-junk-');
afterAll(async () => {
  await hps.shutdown();
  t.cleanup();
});
const folder = writeTable(join(t.dir, 't0'), spreadKeys(50), 4);
const keys = spreadKeys(10);

describeJunkSuite({
  name: '@embedstack/hps',
  exports: hps,
  runs: Number(process.env.JUNK_RUNS ?? 30),
  // exportModel writes folders (covered in layers.test.ts)
  skip: ['exportModel'],
  targets: [
    junkTarget({
      name: 'HPS',
      make: () => hps.HPS.create({ psConfig: psConfig([folder], [4], { hit_rate_threshold: 2 }) }),
      state: async (s) => (s.closed ? 'closed' : Array.from((await s.lookup(keys, 'm', 0)).data as Float32Array)),
      // close ends the target; loadModel/unloadModel change the served model by design (hps.test.ts)
      skip: ['close', 'loadModel', 'unloadModel'],
      examples: {
        lookup: [[keys, 'm', 0, { deviceId: 0 }]],
        stats: [['m', 0]],
        refreshEmbeddingCache: [['m']],
        modelInfo: [['m']],
      },
      dispose: (s) => void s.close(),
    }),
    junkTarget({
      name: 'SparseLookupLayer',
      make: () => new hps.SparseLookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4, psConfig: psConfig([folder], [4]) }),
      state: (l) => [l.modelName, l.tableId, l.embVecSize],
      examples: {
        call: [[new SparseTensor([[0, 0], [1, 0]], BigInt64Array.from([keys[0]!, keys[1]!]), [2, 2]), undefined, { combiner: 'sum' }]],
      },
    }),
    junkTarget({
      name: 'LookupLayer',
      make: () => new hps.LookupLayer({ modelName: 'm', tableId: 0, embVecSize: 4, psConfig: psConfig([folder], [4]) }),
      state: (l) => [l.modelName, l.tableId, l.embVecSize],
      examples: { call: [[keys, { maxNorm: 1 }]] },
    }),
  ],
});
