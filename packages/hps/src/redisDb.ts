import type { EmbeddingTable, ScorePolicy } from '@embedstack/core';
import { RedisStore } from '@embedstack/store-redis';
import type { VolatileDbConfig } from './config.js';
import { PartitionedDb } from './volatileDb.js';

/** The Redis hosts of a `host:port` list. */
export function redisHosts(addresses: readonly string[]): { host: string; port: number }[] {
  return addresses.map((a) => {
    const i = a.lastIndexOf(':');
    return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
  });
}

/**
 * HugeCTR's `redis_cluster` L2 through `@embedstack/store-redis`: each of a table's
 * `num_partitions` partitions is a store-redis table (TFRA's bucket layout, `hps` model
 * tag; named `<model>.<table>.p<i>`, or `<model>.<table>` with one partition) spread over
 * the cluster's masters, so several HPS processes pointing at the same cluster share one
 * L2. One address means a single (non-cluster) Redis server. `overflow_margin` and the
 * overflow policies apply per partition as in-process ({@link PartitionedDb}): the
 * partition's scores live in Redis beside its rows, and any server sharing the table may
 * cut it back. Only `<model>.<table>.v<seq>` tables that no live server uses are deleted
 * (`deleteTable`, through SharedL2Control's bookkeeping); stable names stay (others read them).
 */
export class RedisVolatileDb extends PartitionedDb {
  readonly kind = 'redis_cluster';
  readonly shared = true;
  protected readonly concurrent = true;

  private constructor(
    config: VolatileDbConfig,
    readonly store: RedisStore,
  ) {
    super(config);
  }

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
    return new RedisVolatileDb(config, store);
  }

  protected async openPart(name: string, index: number, dim: number, scorePolicy: ScorePolicy): Promise<EmbeddingTable> {
    const part = this.config.numPartitions === 1 ? name : `${name}.p${index}`;
    return this.store.openTable({ kind: 'dynamic', name: part, dim, keyDtype: 'int64', scorePolicy, initializer: { kind: 'zeros' } }, { modelTag: 'hps' });
  }

  override async close(): Promise<void> {
    await super.close();
    await this.store.close();
  }
}
