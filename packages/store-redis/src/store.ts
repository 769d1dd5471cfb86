import { EmbeddingTable, type ResolvedTableOptions, resolveTableOptions, type TableOptions } from '@embedstack/core';
import { Batch } from './batch.js';
import { RedisConnection } from './connection.js';
import { type RedisStoreOptions, type RedisTableLayout, resolveStoreOptions, resolveTableLayout, type ResolvedRedisStoreOptions } from './options.js';
import { RedisRawTable } from './rawTable.js';

/**
 * A connection to Redis (standalone or cluster) that tables are created on. Tables
 * of one store share its connection (ioredis multiplexes; one pipeline per node per
 * call). Connects lazily; `ping()` / `openTable()` connect eagerly.
 *
 * ```ts
 * const store = new RedisStore({ mode: 'cluster', hosts: [{ host: '10.0.0.1', port: 7000 }] });
 * const table = await store.openTable({ dim: 16, name: 'user_emb' }, { storageSlice: 8 });
 * await table.upsert([1n, 2n], new Float32Array(32));
 * await store.close();
 * ```
 */
export class RedisStore {
  /** The resolved store options. */
  readonly options: ResolvedRedisStoreOptions;
  /** The connection every table of the store shares. */
  readonly connection: RedisConnection;

  /** @throws InvalidArgumentError / InvalidTypeError naming the option; UnsupportedError for sentinel */
  constructor(options: RedisStoreOptions = {}) {
    this.options = resolveStoreOptions(options);
    this.connection = new RedisConnection(this.options);
  }

  /** 'standalone' or 'cluster'. */
  get mode(): 'standalone' | 'cluster' {
    return this.options.mode;
  }

  /** The RawTable of resolved options (what a backend's createTable returns). Connects on first use. */
  createRawTable(options: ResolvedTableOptions, layout: RedisTableLayout = {}): RedisRawTable {
    return new RedisRawTable({
      conn: this.connection,
      ownsConnection: false,
      options,
      layout: resolveTableLayout(layout, options.name, this.options),
    });
  }

  /** A validating EmbeddingTable on this store (backend name 'redis'). Connects on first use. */
  createTable(options: TableOptions, layout: RedisTableLayout = {}): EmbeddingTable {
    const resolved = resolveTableOptions(options);
    return new EmbeddingTable(this.createRawTable(resolved, layout), resolved, 'redis');
  }

  /** Like createTable, then connects, names the buckets and loads the row count. @throws StoreUnavailableError */
  async openTable(options: TableOptions, layout: RedisTableLayout = {}): Promise<EmbeddingTable> {
    const table = this.createTable(options, layout);
    try {
      await (table.raw as RedisRawTable).ready();
    } catch (e) {
      table.dispose();
      throw e;
    }
    return table;
  }

  /** Connects (if needed) and round-trips a PING. @throws StoreUnavailableError */
  async ping(): Promise<void> {
    const b = new Batch();
    const key = Buffer.from('embedstack:ping');
    b.add(0, { route: key, name: 'EXISTS', args: [key] });
    await b.run(this.connection, { op: 'ping', table: '(store)', write: false });
  }

  /** Closes the connection. Tables of this store reject afterwards. Idempotent. */
  async close(): Promise<void> {
    await this.connection.close();
  }
}
