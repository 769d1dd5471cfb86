import { StoreUnavailableError } from '@embedstack/core';
import type { RedisConnection } from './connection.js';
import { braceTag, type BucketKeys, bucketKeys, keysPrefix, parseClusterNodes, sequentialHashTags } from './naming.js';
import type { ResolvedRedisTableLayout } from './options.js';

/**
 * The Redis key names of one table (see `naming.ts`). Computed on first use because
 * TFRA's default cluster tags depend on the masters' slot ranges (CLUSTER NODES),
 * which needs a connection. Names never change afterwards: with computed cluster
 * tags, every client must see the same masters, so pin `hashTags` in production.
 */
export class TableKeyspace {
  readonly layout: ResolvedRedisTableLayout;
  readonly prefix: Buffer;
  readonly #conn: RedisConnection;
  readonly #slotNames: readonly string[];
  #buckets: BucketKeys[] | null = null;
  #pending: Promise<BucketKeys[]> | null = null;

  constructor(conn: RedisConnection, layout: ResolvedRedisTableLayout, slotNames: readonly string[]) {
    this.#conn = conn;
    this.layout = layout;
    this.#slotNames = slotNames;
    this.prefix = keysPrefix(layout.modelTag, layout.embeddingName, layout.usingMd5PrefixName);
  }

  /** Resolves the bucket names (once; a failed attempt is retried by the next call). */
  async init(): Promise<BucketKeys[]> {
    if (this.#buckets) return this.#buckets;
    this.#pending ??= this.#compute().finally(() => {
      this.#pending = null;
    });
    return this.#pending;
  }

  /** Bucket names; only after `init()` resolved. */
  get buckets(): BucketKeys[] {
    if (!this.#buckets) throw new Error('TableKeyspace.buckets read before init()');
    return this.#buckets;
  }

  /** The table's score clock (a counter in bucket 0's slot). */
  get clock(): Buffer {
    return Buffer.concat([this.buckets[0]!.main, Buffer.from(':clock')]);
  }

  async #compute(): Promise<BucketKeys[]> {
    const l = this.layout;
    let tags: string[];
    if (l.hashTags) tags = l.hashTags.map(braceTag);
    else {
      let ranges: ReturnType<typeof parseClusterNodes> = [];
      if (this.#conn.isCluster && !l.hashTagsHypodispersion) {
        await this.#conn.ready();
        try {
          ranges = parseClusterNodes(String(await this.#conn.client.call('CLUSTER', 'NODES')));
        } catch (e) {
          throw new StoreUnavailableError(
            `Could not read CLUSTER NODES from ${this.#conn.address} to name the buckets of "${l.embeddingName}": ${(e as Error).message}`,
            { cause: e },
          );
        }
      }
      tags = sequentialHashTags(l.storageSlice, ranges).map((t) => `{${t}}`);
    }
    this.#buckets = tags.map((t) => bucketKeys(this.prefix, t, this.#slotNames));
    return this.#buckets;
  }
}
