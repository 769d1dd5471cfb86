import { InvalidTypeError, invalidParameter, type RawCache, type ResolvedCacheOptions } from '@embedstack/core';
import { call } from './errors.js';

/** An opaque cache handle (a tagged External). Freed by cacheDispose() or the GC. */
export interface NativeCacheHandle {
  /** Type brand only: no such property exists at run time. */
  readonly __embedstackNativeCache: never;
}

/**
 * The addon's set-associative cache functions (native/binding/cache_api.cc; core's
 * cache contract). All synchronous, on the calling thread. Each validates what it
 * receives and throws a coded Error for anything wrong, changing nothing; no input
 * crashes the process.
 */
export interface NativeCacheFunctions {
  /** Creates a cache of `capacity` rows (rounded up to whole sets) of `dim` floats, `ways` slots per set, in native host memory. */
  createCache(capacity: number, dim: number, ways: number): NativeCacheHandle;
  /** Fills outValues [n*dim] (zeros for misses) / outExists [n]; returns the hits. */
  cacheQuery(c: NativeCacheHandle, keys: BigInt64Array, outValues: Float32Array, outExists: Uint8Array): number;
  /** Returns the rows evicted. */
  cacheInsert(c: NativeCacheHandle, keys: BigInt64Array, values: Float32Array): number;
  /** Returns the keys present (overwritten). */
  cacheUpdate(c: NativeCacheHandle, keys: BigInt64Array, values: Float32Array): number;
  /** Removes keys; returns how many were present. */
  cacheRemove(c: NativeCacheHandle, keys: BigInt64Array): number;
  /** The resident keys (a fresh array, any order). */
  cacheKeys(c: NativeCacheHandle): BigInt64Array;
  /** [size, capacity, sets, ways, dim] */
  cacheInfo(c: NativeCacheHandle): Float64Array;
  /** Empties every slot. */
  cacheClear(c: NativeCacheHandle): void;
  /** Idempotent; later calls on the handle throw DISPOSED. */
  cacheDispose(c: NativeCacheHandle): void;
  /** Whether cacheDispose() ran on the handle. */
  cacheIsDisposed(c: NativeCacheHandle): boolean;
}

/** Whether an addon offers the cache functions (an older or foreign build may not). */
export function hasCacheFunctions(binding: unknown): binding is NativeCacheFunctions {
  return typeof binding === 'object' && binding !== null && typeof (binding as Partial<NativeCacheFunctions>).createCache === 'function';
}

/**
 * The RawCache of the CPU backend: a native set-associative LRU cache (host memory,
 * native/src/set_cache.h) behind a handle; every call runs on the calling thread.
 */
export class CpuRawCache implements RawCache {
  readonly #b: NativeCacheFunctions;
  readonly #h: NativeCacheHandle;

  /** @throws InvalidTypeError for a binding without the cache functions or options that are not an object; the addon's coded errors for values it refuses */
  constructor(binding: NativeCacheFunctions, options: ResolvedCacheOptions) {
    if (!hasCacheFunctions(binding)) throw invalidParameter('binding', "the addon's cache functions (NativeCacheFunctions)", binding, InvalidTypeError);
    if (typeof options !== 'object' || options === null) throw invalidParameter('options', 'resolved cache options (resolveCacheOptions)', options, InvalidTypeError);
    this.#b = binding;
    this.#h = call(() => binding.createCache(options.capacity, options.dim, options.ways));
  }

  query(keys: BigInt64Array, outValues: Float32Array, outExists: Uint8Array): number {
    return call(() => this.#b.cacheQuery(this.#h, keys, outValues, outExists));
  }
  insert(keys: BigInt64Array, values: Float32Array): number {
    return call(() => this.#b.cacheInsert(this.#h, keys, values));
  }
  update(keys: BigInt64Array, values: Float32Array): number {
    return call(() => this.#b.cacheUpdate(this.#h, keys, values));
  }
  remove(keys: BigInt64Array): number {
    return call(() => this.#b.cacheRemove(this.#h, keys));
  }
  keys(): BigInt64Array {
    return call(() => this.#b.cacheKeys(this.#h));
  }
  #info(i: number): number {
    return call(() => this.#b.cacheInfo(this.#h))[i]!;
  }
  size(): number {
    return this.#info(0);
  }
  capacity(): number {
    return this.#info(1);
  }
  sets(): number {
    return this.#info(2);
  }
  ways(): number {
    return this.#info(3);
  }
  clear(): void {
    call(() => this.#b.cacheClear(this.#h));
  }
  dispose(): void {
    call(() => this.#b.cacheDispose(this.#h));
  }
}
