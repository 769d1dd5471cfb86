// store-redis's options objects (store options, their retry block and host entries, table layouts,
// createRedisBackend's options) refuse a misspelt name with INVALID_ARGUMENT naming it and take all
// their names at once. No server: connections are lazy, and a refused call opens none.
import { resolveTableOptions } from '@embedstack/core';
import { describeOptionNames } from '@embedstack/core/testing';
import { afterAll, expect } from 'vitest';
import { createRedisBackend, type RedisRawTable, RedisStore, resolveStoreOptions, resolveTableLayout } from './index.js';

const stores: RedisStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});
const keep = <T extends RedisStore>(s: T): T => (stores.push(s), s);

const retry = () => ({ attempts: 3, delayMs: 7, clusterRedirections: 5 });
const storeFull = () => ({
  mode: 2,
  hosts: [{ host: '127.0.0.1', port: 6390 }],
  username: 'u',
  password: 'p',
  db: 3,
  connectTimeoutMs: 100,
  commandTimeoutMs: 200,
  keysSendingSize: 64,
  retry: retry(),
});
const resolvedStore = { ...storeFull(), mode: 'standalone' };
const layoutFull = () => ({
  embeddingName: 'emb',
  modelTag: 'm',
  storageSlice: 2,
  keysSendingSize: 16,
  hashTags: ['{a}', '{b}'],
  hashTagsHypodispersion: true,
  usingMd5PrefixName: false,
  trackScores: false,
});
const resolvedLayout = { embeddingName: 'emb', modelTag: 'm', storageSlice: 2, keysSendingSize: 16, hashTags: ['{a}', '{b}'], hashTagsHypodispersion: true, usingMd5PrefixName: false, trackScores: false };

describeOptionNames('store-redis: option names', [
  { label: 'resolveStoreOptions(options)', argument: 'options', names: Object.keys(storeFull()), full: storeFull, call: (o) => resolveStoreOptions(o as never), check: (r) => expect(r).toEqual(resolvedStore) },
  { label: 'new RedisStore(options)', argument: 'options', names: Object.keys(storeFull()), full: storeFull, call: (o) => keep(new RedisStore(o as never)), check: (s) => expect((s as RedisStore).options).toEqual(resolvedStore) },
  { label: 'resolveStoreOptions({ retry })', argument: 'retry', names: Object.keys(retry()), full: retry, call: (o) => resolveStoreOptions({ retry: o }), check: (r) => expect((r as { retry: unknown }).retry).toEqual(retry()) },
  {
    label: 'resolveStoreOptions({ hosts: [entry] })',
    argument: 'hosts[1]',
    names: ['host', 'port'],
    full: () => ({ host: '10.0.0.2', port: 7001 }),
    call: (o) => resolveStoreOptions({ mode: 'cluster', hosts: [{ host: '10.0.0.1', port: 7000 }, o as never] }),
    check: (r) => expect((r as { hosts: unknown }).hosts).toEqual([{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }]),
  },
  {
    label: 'resolveTableLayout(layout, tableName, store)',
    argument: 'layout',
    names: Object.keys(layoutFull()),
    full: layoutFull,
    call: (o) => resolveTableLayout(o, 't', resolveStoreOptions({})),
    check: (r) => expect(r).toEqual(resolvedLayout),
  },
  {
    label: 'RedisStore.createTable(options, layout)',
    argument: 'layout',
    names: Object.keys(layoutFull()),
    full: layoutFull,
    call: (o) => keep(new RedisStore()).createTable({ dim: 2, name: 't' }, o),
    check: (t) => expect([(t as { raw: RedisRawTable }).raw.layout, (t as { dim: number }).dim]).toEqual([resolvedLayout, 2]),
  },
  {
    label: 'createRedisBackend(options)',
    argument: 'options',
    names: ['store', 'layout', 'name', 'priority'],
    full: () => ({ store: { hosts: [{ host: '127.0.0.1', port: 6391 }] }, layout: { modelTag: 'x' }, name: 'r2', priority: 3 }),
    call: (o) => createRedisBackend(o as never),
    check: (b) => {
      const backend = b as ReturnType<typeof createRedisBackend>;
      keep(backend.store);
      const raw = backend.createTable(resolveTableOptions({ dim: 1, name: 'q' })) as RedisRawTable;
      expect([backend.name, backend.priority, backend.store.options.hosts[0]!.port, raw.layout.modelTag]).toEqual(['r2', 3, 6391, 'x']);
    },
  },
]);
