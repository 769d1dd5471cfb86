// Runs core's conformance suite on a Redis backend backed by servers started for it.
import { runConformanceSuite } from '@embedstack/core/testing';
import { afterAll } from 'vitest';
import { createRedisBackend, type RedisBackend, type RedisStoreOptions, type RedisTableLayout } from '../index.js';
import type { RedisServerHandle } from '../testing/index.js';

export function redisConformance(
  name: string,
  start: () => Promise<RedisServerHandle & { hosts?: { host: string; port: number }[] }>,
  store: Omit<RedisStoreOptions, 'hosts'>,
  layout: RedisTableLayout,
  propertyRuns?: number,
): void {
  let server: RedisServerHandle | undefined;
  let backend: RedisBackend | undefined;
  let tables = 0;
  runConformanceSuite({
    name,
    sync: false,
    ...(propertyRuns === undefined ? {} : { propertyRuns }),
    backend: async () => {
      const s = await start();
      server = s;
      backend = createRedisBackend({
        store: { ...store, hosts: s.hosts ?? [{ host: s.host, port: s.port }] },
        // A fresh key space per table: the suite reuses table names.
        layout: () => ({ ...layout, modelTag: `conformance${tables++}` }),
      });
      return backend;
    },
  });
  afterAll(async () => {
    await backend?.close();
    await server?.stop();
  });
}
