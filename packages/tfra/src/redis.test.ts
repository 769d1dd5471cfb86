import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EmbeddingTable } from '@embedstack/core';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RedisRawTable, RedisStore } from '@embedstack/store-redis';
import { type RedisClusterHandle, redisAvailable, type RedisServerHandle, startRedisCluster, startRedisServer } from '@embedstack/store-redis/testing';
import * as de from './index.js';
import { describeBehaviours } from '../test/behaviours.js';
import { expectError, rowsOf, uniqueName, useTestBackend } from '../test/setup.js';

const available = redisAvailable();
if (!available) console.warn('[tfra] redis.test.ts skipped: redis-server is not installed (apt-get install -y redis-server)');

let standalone: RedisServerHandle | null = null;
let cluster: RedisClusterHandle | null = null;
const creators: de.RedisTableCreator[] = [];

beforeAll(async () => {
  await useTestBackend();
  if (!available) return;
  [standalone, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
});

afterAll(async () => {
  for (const c of creators) await c.close();
  await Promise.all([standalone?.stop(), cluster?.stop()]);
});

function standaloneCreator(extra: de.RedisTableConfigFields = {}): de.RedisTableCreator {
  const c = new de.RedisTableCreator(
    new de.RedisTableConfig({ redis_connection_mode: 2, redis_host_ip: ['127.0.0.1'], redis_host_port: [standalone!.port], storage_slice: 2, ...extra }),
  );
  creators.push(c);
  return c;
}

function clusterCreator(): de.RedisTableCreator {
  const c = new de.RedisTableCreator(
    new de.RedisTableConfig({
      redis_connection_mode: 0,
      redis_host_ip: cluster!.hosts.map((h) => h.host),
      redis_host_port: cluster!.hosts.map((h) => h.port),
      storage_slice: 3,
      keys_sending_size: 4,
    }),
  );
  creators.push(c);
  return c;
}

describe.skipIf(!available)('redis', () => {
  describeBehaviours('RedisTableCreator (standalone)', () => standaloneCreator());
  describeBehaviours('RedisTableCreator (cluster, 3 masters)', () => clusterCreator());

  it("stores rows in TFRA's layout: one hash per bucket (key & 0xffffffff) % storage_slice, field = key LE bytes, value = dim float32", async () => {
    const name = uniqueName('layout');
    const v = new de.Variable({ dim: 2, name, kvCreator: standaloneCreator({ model_tag_runtime: 'lay' }) });
    const keys = [1n, 2n, 5n, -3n, (1n << 32n) + 2n, -(1n << 40n)];
    await v.upsert(keys, keys.flatMap((k) => [Number(k % 1000n), 7]));
    const buckets = await (v.tables[0]!.raw as RedisRawTable).bucketNames();
    expect(buckets.length).toBe(2);
    const probe = new RedisStore({ hosts: [{ host: '127.0.0.1', port: standalone!.port }] });
    await probe.ping();
    try {
      const client = probe.connection.client;
      expect((await client.keys(`lay:${name}*`)).sort()).toEqual(buckets.map((b) => b.toString()).sort());
      for (const k of keys) {
        // TFRA: the bucket of an 8-byte key is its low 32 bits (unsigned) modulo storage_slice
        const bucket = Number(BigInt.asUintN(32, k) % 2n);
        const field = Buffer.alloc(8);
        field.writeBigInt64LE(k);
        const raw = await client.hgetBuffer(buckets[bucket]!, field);
        expect(raw, `key ${k} in bucket ${bucket}`).not.toBeNull();
        expect(await client.hgetBuffer(buckets[1 - bucket]!, field), `key ${k} not in bucket ${1 - bucket}`).toBeNull();
        expect(Array.from(new Float32Array(raw!.buffer.slice(raw!.byteOffset, raw!.byteOffset + 8)))).toEqual([Number(k % 1000n), 7]);
      }
      // 2, 2^32 + 2 and -2^40 (low word 0) in bucket 0; 1, 5 and -3 (low word 0xfffffffd) in bucket 1
      expect(await Promise.all(buckets.map((b) => client.hlen(b)))).toEqual([3, 3]);
    } finally {
      await probe.close();
    }
    v.dispose();
  });

  it('a second variable of the same name and model tag sees the rows (they live in Redis)', async () => {
    const name = uniqueName('persist');
    const creator = standaloneCreator({ model_tag_runtime: 'persist' });
    const a = new de.Variable({ dim: 1, name, kvCreator: creator });
    await a.upsert([3n, 4n], [30, 40]);
    const b = new de.Variable({ dim: 1, name, kvCreator: creator });
    expect(await b.size()).toBe(2);
    await expectError(() => b.lookupSync([4n]), 'UNSUPPORTED', 'Promise form');
    expect(Array.from((await b.lookup([4n, 3n, 9n])).data)).toEqual([40, 30, 0]);
  });

  it('imports model_tag_import into an empty model_tag_runtime (rehashing buckets) and expires the old tag', async () => {
    const name = uniqueName('import');
    const old = new de.Variable({ dim: 2, name, kvCreator: standaloneCreator({ model_tag_runtime: 'v1', storage_slice: 3 }) });
    await old.upsert([1n, 2n, 3n, 4n], [1, 1, 2, 2, 3, 3, 4, 4]);
    const next = new de.Variable({
      dim: 2,
      name,
      kvCreator: standaloneCreator({ model_tag_import: 'v1', storage_slice_import: 3, model_tag_runtime: 'v2', storage_slice: 2, expire_model_tag_in_seconds: 1000 }),
    });
    expect(rowsOf((await next.lookup([4n, 1n, 3n, 2n])).data, 2)).toEqual([[4, 4], [1, 1], [3, 3], [2, 2]]);
    expect(await next.size()).toBe(4);
    const probe = new RedisStore({ hosts: [{ host: '127.0.0.1', port: standalone!.port }] });
    await probe.ping();
    try {
      const oldKeys = await probe.connection.client.keys(`v1:${name}*`);
      expect(oldKeys.length).toBe(3);
      for (const k of oldKeys) {
        const ttl = await probe.connection.client.ttl(k);
        expect(ttl).toBeGreaterThan(900);
        expect(ttl).toBeLessThanOrEqual(1000);
      }
      expect((await probe.connection.client.keys(`v2:${name}*`)).length).toBe(2);
    } finally {
      await probe.close();
    }
  });

  it('an import interrupted part-way (a crash) is run again in full by the next process, not skipped as non-empty', async () => {
    const name = uniqueName('resume');
    const keys = [1n, 2n, 3n, 4n, 5n, 6n];
    const old = new de.Variable({ dim: 2, name, kvCreator: standaloneCreator({ model_tag_runtime: 'r1' }) });
    await old.upsert(keys, keys.flatMap((k) => [Number(k), -Number(k)]));
    const config = { model_tag_import: 'r1', model_tag_runtime: 'r2' };
    // The first process imports 3 of the 6 rows, then dies.
    const real = EmbeddingTable.prototype.importRows;
    const spy = vi.spyOn(EmbeddingTable.prototype, 'importRows').mockImplementationOnce(async function (this: EmbeddingTable, k, v) {
      await real.call(this, (k as BigInt64Array).subarray(0, 3), (v as Float32Array).subarray(0, 6));
      throw new Error('killed');
    });
    try {
      const first = new de.Variable({ dim: 2, name, kvCreator: standaloneCreator(config) });
      await expect(first.size()).rejects.toThrow('killed');
    } finally {
      spy.mockRestore();
    }
    const probe = new RedisStore({ hosts: [{ host: '127.0.0.1', port: standalone!.port }] });
    await probe.ping();
    try {
      const client = probe.connection.client;
      const buckets = (await client.keys(`r2:${name}{*}`)).filter((k) => k.endsWith('}'));
      const rows = await Promise.all(buckets.map((b) => client.hlen(b)));
      expect(rows.reduce((a, b) => a + b, 0)).toBe(3); // the runtime tag holds part of the model
    } finally {
      await probe.close();
    }
    const next = new de.Variable({ dim: 2, name, kvCreator: standaloneCreator(config) });
    expect(await next.size()).toBe(6);
    expect(rowsOf((await next.lookup(keys)).data, 2)).toEqual(keys.map((k) => [Number(k), -Number(k)]));
    // a finished import is not run again: rows trained since stay
    await next.upsert([1n], [9, 9]);
    const again = new de.Variable({ dim: 2, name, kvCreator: standaloneCreator(config) });
    expect(rowsOf((await again.lookup([1n])).data, 2)).toEqual([[9, 9]]);
  });

  it('table_store_mode 2 keeps rows in Redis only: nothing is saved, loading changes nothing', async () => {
    const name = uniqueName('mode2');
    const dir = mkdtempSync(join(tmpdir(), 'tfra-mode2-'));
    try {
      const v = new de.Variable({ dim: 1, name, kvCreator: standaloneCreator({ table_store_mode: 2, model_tag_runtime: 'm2' }) });
      await v.upsert([1n], [1]);
      await v.saveToFileSystem(dir);
      await v.loadFromFileSystem(dir);
      expect(await v.size()).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('RedisTableConfig', () => {
  it('accepts TFRA field names as-is (object or JSON file), with TFRA defaults', () => {
    const c = new de.RedisTableConfig({ redis_connection_mode: 0, redis_host_ip: ['10.0.0.1', '10.0.0.2'], redis_host_port: [7000, 7001], storage_slice: 4 });
    expect(c.redis_connection_mode).toBe(0);
    expect(c.storage_slice).toBe(4);
    expect(c.keys_sending_size).toBe(1024);
    expect(c.model_tag_runtime).toBe('test');
    expect(c.expire_model_tag_in_seconds).toBe(604800);
    expect(c.table_store_mode).toBe(1);
    expect(c.storeOptions()).toEqual({
      mode: 'cluster',
      hosts: [{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }],
      keysSendingSize: 1024,
    });
    const dir = mkdtempSync(join(tmpdir(), 'tfra-cfg-'));
    try {
      const path = join(dir, 'redis.json');
      writeFileSync(path, JSON.stringify({ redis_connection_mode: 2, redis_host_port: 6390, redis_password: 'pw', redis_db: 3, model_tag_runtime: 'm' }));
      for (const cfg of [new de.RedisTableConfig(path), new de.RedisTableConfig({ redis_config_abs_dir: path })]) {
        expect(cfg.redis_host_port).toEqual([6390]);
        expect(cfg.redis_config_abs_dir).toBe(path);
        expect(cfg.storeOptions()).toEqual({ mode: 'standalone', hosts: [{ host: '127.0.0.1', port: 6390 }], keysSendingSize: 1024, password: 'pw', db: 3 });
        expect(cfg.layout('emb')).toMatchObject({ embeddingName: 'emb', modelTag: 'm', storageSlice: 1 });
      }
      process.env.TFRA_TEST_REDIS_CFG = path;
      expect(new de.RedisTableConfig({ redis_config_abs_dir_env: 'TFRA_TEST_REDIS_CFG' }).redis_db).toBe(3);
      writeFileSync(path, JSON.stringify({ redis_conection_mode: 0 }));
      expect(() => new de.RedisTableConfig(path)).toThrowError(/unknown field "redis_conection_mode"/);
    } finally {
      delete process.env.TFRA_TEST_REDIS_CFG; // the worker runs other files after this one
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reports unknown and bad fields, sentinel mode and missing files', async () => {
    await expectError(() => new de.RedisTableConfig({ redis_hots_ip: ['x'] } as de.RedisTableConfigFields), 'INVALID_ARGUMENT', 'redis_hots_ip');
    await expectError(() => new de.RedisTableConfig({ storage_slice: 0 }), 'INVALID_ARGUMENT', 'storage_slice');
    await expectError(() => new de.RedisTableConfig({ redis_host_port: ['6379'] as unknown as number[] }), 'INVALID_ARGUMENT', 'redis_host_port');
    await expectError(() => new de.RedisTableConfig({ using_hash_storage_slice: true }), 'UNSUPPORTED', 'using_hash_storage_slice');
    await expectError(() => new de.RedisTableCreator(new de.RedisTableConfig({ redis_connection_mode: 1 })), 'UNSUPPORTED', 'redis_connection_mode');
    await expectError(() => new de.RedisTableConfig('/nonexistent/redis.json'), 'IO_ERROR', 'redis_config_abs_dir'.slice(0, 0) + '/nonexistent/redis.json');
    await expectError(() => new de.RedisTableCreator({} as de.RedisTableConfig), 'INVALID_TYPE', 'config');
  });

  it('a float16 / bfloat16 valueDtype is refused with UNSUPPORTED when the Variable is made (Redis stores float32 only), and nothing is created', async () => {
    for (const valueDtype of ['float16', 'bfloat16'] as const) {
      const name = uniqueName();
      await expectError(
        () => new de.Variable({ dim: 2, valueDtype, name, kvCreator: new de.RedisTableCreator(new de.RedisTableConfig({ redis_host_ip: ['127.0.0.1'], redis_host_port: [1] })) }),
        'UNSUPPORTED',
        `valueDtype '${valueDtype}'`,
        'float32 values only',
      );
      // the name stays free: a float32 Variable of that name can be made afterwards
      expect(new de.Variable({ dim: 2, name }).valueDtype).toBe('float32');
    }
  });

  it('redis_host_ip and redis_host_port lists of different lengths are refused naming both; one port number serves every host (fix33b #6)', async () => {
    const e = await expectError(
      () => new de.RedisTableConfig({ redis_connection_mode: 0, redis_host_ip: ['10.0.0.1', '10.0.0.2', '10.0.0.3'], redis_host_port: [7000, 7001] }),
      'INVALID_ARGUMENT',
      'redis_host_ip',
      'redis_host_port',
      '3 hosts [10.0.0.1, 10.0.0.2, 10.0.0.3]',
      '2 ports [7000, 7001]',
    );
    expect((e as { argument?: string }).argument).toBe('redis_host_port');
    await expectError(() => new de.RedisTableConfig({ redis_host_ip: ['10.0.0.1'], redis_host_port: [7000, 7001] }), 'INVALID_ARGUMENT', '1 hosts', '2 ports');
    const one = new de.RedisTableConfig({ redis_connection_mode: 0, redis_host_ip: ['10.0.0.1', '10.0.0.2'], redis_host_port: 7000 });
    expect(one.redis_host_port).toEqual([7000, 7000]);
    expect(one.storeOptions().hosts).toEqual([{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7000 }]);
    const byDefault = new de.RedisTableConfig({ redis_connection_mode: 0, redis_host_ip: ['10.0.0.1', '10.0.0.2'] });
    expect(byDefault.storeOptions().hosts).toEqual([{ host: '10.0.0.1', port: 6379 }, { host: '10.0.0.2', port: 6379 }]);
  });
});
