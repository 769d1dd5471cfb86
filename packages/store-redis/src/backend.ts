import { type BackendCapabilities, checkOptions, type DeviceInfo, type EmbeddingBackend, InvalidTypeError, invalidParameter, type RawTable, type ResolvedTableOptions } from '@embedstack/core';
import type { RedisStoreOptions, RedisTableLayout } from './options.js';
import { RedisStore } from './store.js';

/** Options of {@link createRedisBackend}. */
export interface RedisBackendOptions {
  /** A store to create tables on, or the options of a new one. */
  store: RedisStore | RedisStoreOptions;
  /** Layout of each table (a function gets the table's resolved options). Default {}. */
  layout?: RedisTableLayout | ((options: ResolvedTableOptions) => RedisTableLayout);
  /** Registry name. Default 'redis'. */
  name?: string;
  /** Registry priority. Default -10, so that it is only used when named. */
  priority?: number;
}

/** An EmbeddingBackend over one {@link RedisStore} (from {@link createRedisBackend}), plus its store and close(). */
export interface RedisBackend extends EmbeddingBackend {
  /** The store its tables are created on. */
  readonly store: RedisStore;
  /** Closes the store's connection. */
  close(): Promise<void>;
}

/**
 * An EmbeddingBackend whose tables live in Redis (async only). Not registered on
 * import: pass it to `createTable(options, { backend })` or `registerBackend` it.
 * Static and capped tables are UNSUPPORTED (thrown by createTable).
 */
export function createRedisBackend(options: RedisBackendOptions): RedisBackend {
  checkOptions(options, ['store', 'layout', 'name', 'priority'], 'options', { required: true, expected: 'an options object ({ store, layout, name, priority })' });
  if (options.name !== undefined && typeof options.name !== 'string') throw invalidParameter('options.name', 'a string', options.name, InvalidTypeError);
  if (options.priority !== undefined && (typeof options.priority !== 'number' || !Number.isFinite(options.priority))) throw invalidParameter('options.priority', 'a finite number', options.priority);
  const store = options.store instanceof RedisStore ? options.store : new RedisStore(options.store);
  const layout = options.layout ?? {};
  return {
    name: options.name ?? 'redis',
    priority: options.priority ?? -10,
    store,
    isUsable: () => true,
    capabilities: (): BackendCapabilities => ({ sync: false, threads: 1, device: 'js', storageDtypes: ['float32'] }),
    devices: (): DeviceInfo[] => [{ id: 'redis:0', kind: 'js', name: `Redis ${store.mode} at ${store.connection.address}` }],
    createTable: (o: ResolvedTableOptions): RawTable => store.createRawTable(o, typeof layout === 'function' ? layout(o) : layout),
    unavailableReason: () => undefined,
    close: () => store.close(),
  };
}
