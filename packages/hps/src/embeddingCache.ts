import { createTable, type EmbeddingBackend, type EmbeddingTable, type FindResult } from '@embedstack/core';

/** Batches at most this many keys run synchronously (an in-memory native call is faster than a thread hop). */
const SYNC_KEYS = 4096;

/**
 * HPS's L1 embedding cache of one table on one device, built from core table ops:
 * a capped core dynamic table (`maxCapacity` = capacity rows) with the `lru` score
 * policy, so lookups, inserts and eviction (the least recently used row goes when the
 * cache is full) run in the backend's native code (cpu-backend: host memory). A
 * static cache (`embedding_cache_type: static`) is uncapped and holds the whole table.
 * Safe for concurrent calls (the backend's per-table lock).
 */
export class EmbeddingCache {
  readonly table: EmbeddingTable;
  /** Batches up to this many keys are answered synchronously by `query`. */
  readonly syncKeys = SYNC_KEYS;

  constructor(
    name: string,
    readonly dim: number,
    /** Rows the cache holds; Infinity for a static cache. */
    readonly capacity: number,
    backend: EmbeddingBackend,
  ) {
    const capped = Number.isFinite(capacity);
    this.table = createTable(
      {
        kind: 'dynamic',
        name,
        dim,
        keyDtype: 'int64',
        scorePolicy: 'lru',
        initializer: { kind: 'zeros' },
        initCapacity: Math.max(16, Math.min(capped ? capacity : 1 << 20, 1 << 20)),
        ...(capped ? { maxCapacity: Math.max(1, capacity) } : {}),
      },
      { backend },
    );
  }

  /** Looks up `keys`: rows `[n, dim]` (into `out` when given; undefined content where !exists) and the hit mask; small batches answer synchronously. */
  query(keys: BigInt64Array, out?: Float32Array | null): FindResult | Promise<FindResult> {
    const opts = out ? { out: { values: out } } : undefined;
    return keys.length <= SYNC_KEYS ? this.table.findSync(keys, opts) : this.table.find(keys, opts);
  }

  /** Inserts rows (evicting least recently used rows when full). */
  async insert(keys: BigInt64Array, values: Float32Array): Promise<void> {
    if (keys.length === 0 || this.capacity === 0) return;
    if (keys.length <= SYNC_KEYS) this.table.upsertSync(keys, values);
    else await this.table.upsert(keys, values);
  }

  /** Overwrites the rows of keys already cached (online updates); others are ignored. */
  async refreshRows(keys: BigInt64Array, values: Float32Array): Promise<void> {
    if (keys.length === 0) return;
    await this.table.assign(keys, values);
  }

  /** Every cached key, in batches. */
  async *keys(batchSize = 65536): AsyncGenerator<BigInt64Array> {
    for await (const b of this.table.exportBatches(batchSize)) yield b.keys as BigInt64Array;
  }

  size(): number {
    return this.table.size();
  }

  dispose(): void {
    this.table.dispose();
  }
}
