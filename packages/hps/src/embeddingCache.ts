import { type CacheQueryResult, createCache, createTable, type EmbeddingBackend, type EmbeddingCache, type EmbeddingTable, loadDefaultBackend } from '@embedstack/core';

/** Slots per set of the L1 cache: HugeCTR's GPU embedding cache sets (2 slabs of 32 slots); a cache of fewer rows is one set of them (core: ways = min(ways, capacity)). */
export const L1_WAYS = 64;

/** Rows per batch of `keys()`. */
const KEY_BATCH = 65536;

/**
 * HPS's L1 embedding cache of one table on one device, run by the backend's native code
 * (cpu-backend: host memory):
 * - dynamic (`embedding_cache_type: dynamic`, the default): core's set-associative LRU
 *   cache (`createCache`), `capacity` rows in sets of min({@link L1_WAYS}, capacity) slots chosen by a
 *   hash of the key, the least recently used row of a full set evicted (on a backend
 *   without a cache, such as cuda, on the CPU backend's);
 * - static: an uncapped core dynamic table holding the whole table (never evicts).
 * Every call is synchronous (small and in memory: a thread hop would cost more).
 */
export class L1Cache {
  readonly #cache: EmbeddingCache | null;
  readonly #table: EmbeddingTable | null;

  constructor(
    name: string,
    readonly dim: number,
    /** Rows the cache holds; Infinity for a static cache. */
    readonly capacity: number,
    backend: EmbeddingBackend,
  ) {
    if (Number.isFinite(capacity)) {
      // a backend without a cache (cuda) keeps its L1 in host memory on the CPU backend's native cache
      const on = typeof backend.createCache === 'function' ? backend : loadDefaultBackend({ backend: 'cpu', from: import.meta.url });
      this.#cache = createCache({ name, dim, capacity, ways: L1_WAYS }, { backend: on });
      this.#table = null;
    } else {
      this.#cache = null;
      this.#table = createTable({ kind: 'dynamic', name, dim, keyDtype: 'int64', initializer: { kind: 'zeros' }, initCapacity: 1 << 16 }, { backend });
    }
  }

  /** Rows of `keys` `[n, dim]` (into `out` when given; zeros where !exists), the hit mask and the hits; hits count as uses. */
  query(keys: BigInt64Array, out?: Float32Array | null): CacheQueryResult {
    const opts = out ? { out: { values: out } } : undefined;
    if (this.#cache) return this.#cache.query(keys, opts);
    const r = this.#table!.findSync(keys, opts);
    let hits = 0;
    for (let i = 0; i < keys.length; i++) hits += r.exists[i]!;
    return { values: r.values, exists: r.exists, hits };
  }

  /** Inserts rows (a full set evicts its least recently used row). */
  insert(keys: BigInt64Array, values: Float32Array): void {
    if (keys.length === 0) return;
    if (this.#cache) this.#cache.insert(keys, values);
    else this.#table!.upsertSync(keys, values);
  }

  /** Overwrites the rows of keys already cached (online updates); others are ignored. */
  refreshRows(keys: BigInt64Array, values: Float32Array): void {
    if (keys.length === 0) return;
    if (this.#cache) this.#cache.update(keys, values);
    else this.#table!.assignSync(keys, values);
  }

  /** Every cached key, in batches. */
  async *keys(): AsyncGenerator<BigInt64Array> {
    if (this.#cache) {
      const all = this.#cache.keys();
      for (let s = 0; s < all.length; s += KEY_BATCH) yield all.subarray(s, s + KEY_BATCH);
      return;
    }
    for await (const b of this.#table!.exportBatches(KEY_BATCH)) yield b.keys as BigInt64Array;
  }

  /** Rows the cache holds at most: sets * ways (the capacity rounded up to whole sets), or Infinity for a static cache. */
  slots(): number {
    return this.#cache ? this.#cache.capacity() : Infinity;
  }

  size(): number {
    return this.#cache ? this.#cache.size() : this.#table!.size();
  }

  dispose(): void {
    this.#cache?.dispose();
    this.#table?.dispose();
  }
}
