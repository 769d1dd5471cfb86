import { InternalError, type EmbeddingTable } from '@embedstack/core';
import { RedisStore } from '@embedstack/store-redis';
import type { VolatileDbConfig } from './config.js';
import type { FetchResult, VolatileDb } from './volatileDb.js';

/** The Redis hosts of a `host:port` list. */
export function redisHosts(addresses: readonly string[]): { host: string; port: number }[] {
  return addresses.map((a) => {
    const i = a.lastIndexOf(':');
    return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
  });
}

/**
 * HugeCTR's `redis_cluster` L2 through `@embedstack/store-redis`: each table is a
 * store-redis table (TFRA's bucket layout, `hps` model tag) spread over the cluster's
 * masters, so several HPS processes pointing at the same cluster share one L2. One
 * address means a single (non-cluster) Redis server. Tables are never dropped from
 * Redis by a server (others may use them); `overflow_margin` is not enforced here
 * (give Redis a `maxmemory` policy instead).
 */
export class RedisVolatileDb implements VolatileDb {
  readonly kind = 'redis_cluster';
  readonly shared = true;
  #tables = new Map<string, EmbeddingTable>();

  private constructor(readonly store: RedisStore) {}

  /** Connects and pings. @throws StoreUnavailableError when Redis cannot be reached */
  static async open(config: VolatileDbConfig): Promise<RedisVolatileDb> {
    const store = new RedisStore({
      mode: config.address.length > 1 ? 'cluster' : 'standalone',
      hosts: redisHosts(config.address),
      username: config.userName === 'default' ? null : config.userName,
      password: config.password === '' ? null : config.password,
      keysSendingSize: Math.min(config.maxBatchSize, 16384),
      connectTimeoutMs: 3000,
      commandTimeoutMs: 5000,
    });
    try {
      await store.ping();
    } catch (e) {
      await store.close().catch(() => undefined);
      throw e;
    }
    return new RedisVolatileDb(store);
  }

  async createTable(name: string, dim: number): Promise<void> {
    if (this.#tables.has(name)) return;
    const t = await this.store.openTable({ kind: 'dynamic', name, dim, keyDtype: 'int64', initializer: { kind: 'zeros' } }, { modelTag: 'hps' });
    this.#tables.set(name, t);
  }

  async dropTable(name: string): Promise<void> {
    this.#tables.get(name)?.dispose();
    this.#tables.delete(name);
  }

  #table(name: string): EmbeddingTable {
    const t = this.#tables.get(name);
    if (!t) throw new InternalError(`L2 table ${name} does not exist (unloaded while in use)`);
    return t;
  }

  async fetch(name: string, keys: BigInt64Array, dim: number): Promise<FetchResult> {
    const r = await this.#table(name).find(keys);
    let hits = 0;
    for (let i = 0; i < keys.length; i++) {
      if (r.exists[i]) hits++;
      else r.values.fill(0, i * dim, (i + 1) * dim);
    }
    return { values: r.values, found: r.exists, hits };
  }

  async insert(name: string, keys: BigInt64Array, values: Float32Array): Promise<void> {
    if (keys.length > 0) await this.#table(name).upsert(keys, values);
  }

  async size(name: string): Promise<number> {
    return this.#table(name).size();
  }

  async close(): Promise<void> {
    for (const name of [...this.#tables.keys()]) await this.dropTable(name);
    await this.store.close();
  }
}

/** Opens the Redis L2. @throws StoreUnavailableError when unreachable */
export async function createRedisVolatileDb(config: VolatileDbConfig): Promise<VolatileDb> {
  return RedisVolatileDb.open(config);
}
