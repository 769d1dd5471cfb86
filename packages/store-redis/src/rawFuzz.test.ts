// RedisRawTable (what `table.raw` returns for a table of a RedisStore), against a real
// redis-server on a loopback port: junk arguments are refused with coded errors and change
// nothing; random valid call sequences agree with a plain Map (core/testing rawFuzz.ts).
import { resolveTableOptions } from '@embedstack/core';
import { codedOrOk, describeRawTableFuzz, junkArbitrary } from '@embedstack/core/testing';
import * as fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisRawTable, RedisStore, resolveTableLayout } from './index.js';
import { type RedisServerHandle, startRedisServer } from './testing/index.js';

let server: RedisServerHandle;
let store: RedisStore;
beforeAll(async () => {
  server = await startRedisServer();
  store = new RedisStore({ hosts: [{ host: server.host, port: server.port }] });
});
afterAll(async () => {
  await store?.close();
  await server?.stop();
});

let n = 0;
describeRawTableFuzz({
  name: 'store-redis (RedisRawTable)',
  // each table under its own name, dropped after use
  make: (options) => store.createRawTable(options, { embeddingName: `fuzz${n++}`, modelTag: 'rawfuzz' }),
  free: async (raw) => {
    await (raw as RedisRawTable).drop();
    raw.dispose();
  },
  runs: Number(process.env.JUNK_RUNS ?? 25),
  modelRuns: Number(process.env.MODEL_RUNS ?? 20),
  timeout: 600_000,
});

describe('new RedisRawTable(init): junk in any field of init is a coded error', () => {
  it('each field replaced by junk (and junk for the whole init)', async () => {
    const valid = () => ({ conn: store.connection, ownsConnection: false, options: resolveTableOptions({ dim: 2, name: 'init' }), layout: resolveTableLayout({}, 'init', store.options) });
    const r = await fc.check(
      fc.asyncProperty(fc.constantFrom('conn', 'ownsConnection', 'options', 'layout', 'extra', 'whole'), junkArbitrary(), async (field, junk) => {
        const init: Record<string, unknown> = valid();
        if (field === 'whole') {
          await codedOrOk(() => new RedisRawTable(junk as never), 'new RedisRawTable(junk)');
          return;
        }
        init[field] = junk;
        const outcome = await codedOrOk(() => new RedisRawTable(init as never), `new RedisRawTable({ ${field}: junk })`);
        if (field === 'extra') expect(outcome).toBe('rejected'); // an unknown name
      }),
      { numRuns: Number(process.env.JUNK_RUNS ?? 40) * 4 },
    );
    expect(r.failed ? `${String((r.errorInstance as Error | undefined)?.message).split('\n')[0]}` : null).toBeNull();
    expect(new RedisRawTable(valid()).layout.embeddingName).toBe('init');
  });
});
