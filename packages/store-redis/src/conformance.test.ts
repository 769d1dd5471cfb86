import { runConformanceSuite } from '@embedstack/core/testing';
import { afterAll } from 'vitest';
import { createRedisBackend, type RedisBackend } from './index.js';
import { type RedisServerHandle, startRedisServer } from './testing/index.js';

let server: RedisServerHandle | undefined;
let backend: RedisBackend | undefined;
let tables = 0;

// core's conformance suite on the Redis store: a real redis-server, 3 buckets per
// table and 4 keys per command so that every call spans several buckets and chunks.

runConformanceSuite({
  name: 'redis',
  sync: false,
  backend: async () => {
    server = await startRedisServer();
    backend = createRedisBackend({
      store: { hosts: [{ host: server.host, port: server.port }] },
      // A fresh key space per table: the suite reuses table names.
      layout: () => ({ modelTag: `conformance${tables++}`, storageSlice: 3, keysSendingSize: 4 }),
    });
    return backend;
  },
});

afterAll(async () => {
  await backend?.close();
  await server?.stop();
});
