import { type EmbeddingBackend, getBackend } from './backend.js';
import { DisposedError, FailedPreconditionError, InvalidTypeError, invalidParameter, ShapeMismatchError, UnsupportedError } from './errors.js';
import { type KeyInput, normalizeKeys } from './keys.js';
import { checkInteger, checkName, checkOptions } from './validation.js';

/**
 * The embedding cache contract: a set-associative LRU cache of rows (HugeCTR HPS's
 * L1 "GPU embedding cache"), run by the backend (cpu-backend: native code, host memory).
 *
 * - Layout: `sets` sets of `ways` slots; `ways' = min(ways, max(capacity, 1))`,
 *   `sets = ceil(capacity / ways')`, so it holds `sets * ways'` rows (the capacity
 *   rounded up to whole sets; 0 for capacity 0: nothing is ever cached).
 * - A key lives only in its set: `set = ((fmix64(key) >> 32) * sets) >> 32`, where
 *   fmix64 is MurmurHash3's 64-bit finalizer of the key read as uint64
 *   (`k ^= k >> 33; k *= 0xff51afd7ed558ccd; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53; k ^= k >> 33`).
 * - A clock ticks once per key access (a query hit or an insert), in batch order, and the
 *   accessed slot takes the new tick. `insert` overwrites a present key; else it takes the
 *   set's first empty slot (lowest index); else it evicts the set's least recently used
 *   slot (smallest tick). Duplicate keys in one batch apply in order (the last row wins).
 * - `update` overwrites present keys only and does not count as a use; `remove` empties slots.
 */

/** Options of {@link createCache}. */
export interface CacheOptions {
  /** Rows the cache holds (integer >= 0; rounded up to whole sets). Required. */
  capacity: number;
  /** Floats per row (integer >= 1). Required. */
  dim: number;
  /** Slots per set: a power of two in [1, 64]. Default 16. */
  ways?: number;
  /** For messages. Default 'cache'. */
  name?: string;
}

/** Options after validation and defaults (what a backend receives). */
export interface ResolvedCacheOptions {
  /** Rows asked for (integer >= 0; the backend rounds up to whole sets). */
  capacity: number;
  /** Floats per row, >= 1. */
  dim: number;
  /** Slots per set: a power of two in [1, 64] (default 16). */
  ways: number;
  /** For messages (default 'cache'). */
  name: string;
}

/** The default slots per set. */
export const CACHE_DEFAULT_WAYS = 16;
const MAX_WAYS = 64;
/** Largest capacity (rows). */
const MAX_CAPACITY = 2 ** 36;

/**
 * The backend side of a cache: synchronous, called on the JS thread only. Core has
 * validated every argument (keys a BigInt64Array, values [n * dim], out arrays of the
 * right lengths), so a backend trusts its input; a rejected call changes nothing.
 */
export interface RawCache {
  /** Writes every row of outValues: a hit's row (and outExists[i] = 1), zeros for a miss (outExists[i] = 0); returns the hits. */
  query(keys: BigInt64Array, outValues: Float32Array, outExists: Uint8Array): number;
  /** Returns how many resident rows were evicted. */
  insert(keys: BigInt64Array, values: Float32Array): number;
  /** Returns how many keys were present (and overwritten). */
  update(keys: BigInt64Array, values: Float32Array): number;
  /** Returns how many keys were present (and removed). */
  remove(keys: BigInt64Array): number;
  /** The resident keys (any order). */
  keys(): BigInt64Array;
  /** Rows resident now. */
  size(): number;
  /** Slots: sets * ways. */
  capacity(): number;
  /** Number of sets. */
  sets(): number;
  /** Slots per set (the option, or the capacity when smaller). */
  ways(): number;
  /** Empties every slot (memory stays allocated). */
  clear(): void;
  /** Frees the memory; idempotent. */
  dispose(): void;
}

/** What {@link EmbeddingCache.query} returns. */
export interface CacheQueryResult {
  /** `[n * dim]`: rows of the hits; zeros for misses. */
  values: Float32Array;
  /** `[n]`: 1 where the key was cached. */
  exists: Uint8Array;
  /** Number of hits. */
  hits: number;
}

/** Caller-owned result arrays of {@link EmbeddingCache.query}. */
export interface CacheQueryOptions {
  /** Arrays to fill and return instead of fresh ones: values [n * dim], exists [n] (each optional). */
  out?: {
    /** [n * dim] floats: hit rows, zeros for misses. */
    values?: Float32Array;
    /** [n] flags: 1 for a hit. */
    exists?: Uint8Array;
  } | null;
}

/** A Float32Array whose every element the backend writes: large ones skip the zero fill. */
function uninitialised(n: number): Float32Array {
  try {
    if (n * 4 < 65536 || typeof Buffer === 'undefined') return new Float32Array(n);
    try {
      return new Float32Array(Buffer.allocUnsafeSlow(n * 4).buffer, 0, n);
    } catch {
      return new Float32Array(n); // past Buffer's largest (4 GiB on Node 20): zero-filled, its pages mapped as written
    }
  } catch (e) {
    // a RangeError: more floats than one Float32Array holds, or memory the engine could not get
    throw new FailedPreconditionError(`Expected a query result one Float32Array can hold but it needs ${n} floats (${String((e as Error)?.message)}); nothing was read`, { cause: e });
  }
}

/** Resolves and validates cache options. @throws InvalidArgumentError / InvalidTypeError naming the option */
export function resolveCacheOptions(options: CacheOptions): ResolvedCacheOptions {
  const o = checkOptions<CacheOptions>(options, ['capacity', 'dim', 'ways', 'name'], 'options', { required: true, expected: 'cache options ({ capacity, dim, ways?, name? })' });
  const capacity = checkInteger(o.capacity, 'options.capacity', { min: 0, max: MAX_CAPACITY });
  const dim = checkInteger(o.dim, 'options.dim', { min: 1, max: 1 << 20 });
  const ways = checkInteger(o.ways, 'options.ways', { min: 1, max: MAX_WAYS, fallback: CACHE_DEFAULT_WAYS });
  if ((ways & (ways - 1)) !== 0) throw invalidParameter('options.ways', `a power of two in [1, ${MAX_WAYS}]`, ways);
  return { capacity, dim, ways, name: checkName(o.name, 'options.name', 'cache') };
}

/**
 * A set-associative LRU cache of embedding rows on a backend (see the contract above).
 * Every method is synchronous and validates its arguments first: bad input throws a coded
 * EmbeddingError and changes nothing. After `dispose()` every method throws DISPOSED.
 */
export class EmbeddingCache {
  readonly #raw: RawCache;
  #disposed = false;

  constructor(
    raw: RawCache,
    /** The resolved options (capacity, dim, ways, name). */
    readonly options: ResolvedCacheOptions,
    /** The backend's name. */
    readonly backend: string,
  ) {
    this.#raw = raw;
  }

  /** Floats per row. */
  get dim(): number {
    return this.options.dim;
  }
  /** The cache's name (for messages). */
  get name(): string {
    return this.options.name;
  }
  /** True once dispose() has run. */
  get disposed(): boolean {
    return this.#disposed;
  }

  #live(): RawCache {
    if (this.#disposed) throw new DisposedError(`Cache ${JSON.stringify(this.options.name)} was disposed`);
    return this.#raw;
  }

  #keys(keys: unknown): BigInt64Array {
    return normalizeKeys(keys, 'int64') as BigInt64Array;
  }

  #rows(values: unknown, n: number, argument: string): Float32Array {
    if (!(values instanceof Float32Array)) throw invalidParameter(argument, 'a Float32Array', values, InvalidTypeError);
    if (values.length !== n * this.options.dim) {
      throw invalidParameter(argument, `${n * this.options.dim} floats (${n} keys * dim ${this.options.dim})`, `${values.length} floats`, ShapeMismatchError);
    }
    return values;
  }

  /**
   * Looks up `keys` ([n], any key form: BigInt64Array, Int32Array, number[], bigint[], an int Tensor); hits count as uses, misses read as zeros. Returns
   * fresh arrays, or fills `opts.out.values` ([n * dim]) / `opts.out.exists` ([n]) when given.
   */
  query(keys: KeyInput, opts?: CacheQueryOptions | null): CacheQueryResult {
    const raw = this.#live();
    const k = this.#keys(keys);
    const o = checkOptions<CacheQueryOptions>(opts, ['out'], 'opts');
    const out = checkOptions<{ values?: Float32Array; exists?: Uint8Array }>(o.out, ['values', 'exists'], 'opts.out');
    const fresh = out.values === undefined || out.values === null;
    const values = fresh ? uninitialised(k.length * this.options.dim) : this.#rows(out.values, k.length, 'opts.out.values');
    let exists: Uint8Array;
    if (out.exists === undefined || out.exists === null) exists = new Uint8Array(k.length);
    else if (!(out.exists instanceof Uint8Array)) throw invalidParameter('opts.out.exists', 'a Uint8Array', out.exists, InvalidTypeError);
    else if (out.exists.length !== k.length) throw invalidParameter('opts.out.exists', `${k.length} flags (one per key)`, `${out.exists.length} flags`, ShapeMismatchError);
    else exists = out.exists;
    const hits = raw.query(k, values, exists);
    return { values, exists, hits };
  }

  /** Inserts or overwrites rows (`values` [n * dim]); a full set evicts its least recently used row. Returns the rows evicted. */
  insert(keys: KeyInput, values: Float32Array): number {
    const raw = this.#live();
    const k = this.#keys(keys);
    return raw.insert(k, this.#rows(values, k.length, 'values'));
  }

  /** Overwrites the rows of keys already cached (others are ignored; not a use). Returns how many were cached. */
  update(keys: KeyInput, values: Float32Array): number {
    const raw = this.#live();
    const k = this.#keys(keys);
    return raw.update(k, this.#rows(values, k.length, 'values'));
  }

  /** Removes keys; returns how many were cached. */
  remove(keys: KeyInput): number {
    const raw = this.#live();
    return raw.remove(this.#keys(keys));
  }

  /** The cached keys (a fresh array, any order). */
  keys(): BigInt64Array {
    return this.#live().keys();
  }

  /** Rows cached now. */
  size(): number {
    return this.#live().size();
  }

  /** Rows the cache can hold: sets * ways. */
  capacity(): number {
    return this.#live().capacity();
  }

  /** Number of sets. */
  sets(): number {
    return this.#live().sets();
  }

  /** Slots per set (the option, or the capacity when smaller). */
  ways(): number {
    return this.#live().ways();
  }

  /**
   * Empties the cache (its memory stays allocated).
   * @throws DisposedError after dispose()
   */
  clear(): void {
    this.#live().clear();
  }

  /** Frees the cache's memory; idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#raw.dispose();
  }
}

/**
 * Creates a set-associative LRU cache on a backend (by name, object, or the registry's
 * default). Memory lives where the backend keeps it (cpu-backend: native host memory,
 * `capacity * (dim * 4 + 16)` bytes).
 * @throws InvalidArgumentError / InvalidTypeError for bad options; UNSUPPORTED when the
 *   backend has no cache (use 'cpu' or 'reference'); NotFound / BackendUnavailable for backends
 */
export function createCache(options: CacheOptions, opts: { backend?: string | EmbeddingBackend } | null = {}): EmbeddingCache {
  const resolved = resolveCacheOptions(options);
  const b = checkOptions<{ backend?: string | EmbeddingBackend }>(opts, ['backend'], 'opts', { expected: 'an object ({ backend })' }).backend ?? undefined;
  if (typeof b === 'object' && (b === null || typeof b.name !== 'string')) throw invalidParameter('opts.backend', 'a backend name or an EmbeddingBackend', b, InvalidTypeError);
  const backend = typeof b === 'object' ? b : getBackend(b);
  if (typeof backend.createCache !== 'function') {
    throw new UnsupportedError(`Backend "${backend.name}" has no embedding cache (createCache); create the cache on backend "cpu" (native) or "reference"`);
  }
  return new EmbeddingCache(backend.createCache(resolved), resolved, backend.name);
}
