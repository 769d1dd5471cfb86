import type { RawCache, ResolvedCacheOptions } from '../cache.js';

const MASK64 = (1n << 64n) - 1n;

/** MurmurHash3's 64-bit finalizer of the key read as uint64. */
function fmix64(key: bigint): bigint {
  let k = BigInt.asUintN(64, key);
  k ^= k >> 33n;
  k = (k * 0xff51afd7ed558ccdn) & MASK64;
  k ^= k >> 33n;
  k = (k * 0xc4ceb9fe1a85ec53n) & MASK64;
  k ^= k >> 33n;
  return k;
}

interface Slot {
  key: bigint;
  /** Tick of the last use. */
  used: number;
  row: Float32Array;
}

/**
 * The reference set-associative LRU cache (cache.ts's contract, plainly): each set is
 * an array of at most `ways` slots in slot order; the clock ticks once per use.
 */
export class ReferenceCache implements RawCache {
  readonly #dim: number;
  readonly #ways: number;
  readonly #sets: (Slot | null)[][];
  #clock = 0;
  #size = 0;

  constructor(options: ResolvedCacheOptions) {
    this.#dim = options.dim;
    this.#ways = Math.min(options.ways, Math.max(options.capacity, 1));
    const sets = Math.ceil(options.capacity / this.#ways);
    this.#sets = Array.from({ length: sets }, () => new Array<Slot | null>(this.#ways).fill(null));
  }

  #set(key: bigint): (Slot | null)[] | undefined {
    if (this.#sets.length === 0) return undefined;
    return this.#sets[Number(((fmix64(key) >> 32n) * BigInt(this.#sets.length)) >> 32n)];
  }

  #slot(key: bigint): Slot | undefined {
    return this.#set(key)?.find((s) => s !== null && s.key === key) ?? undefined;
  }

  query(keys: BigInt64Array, outValues: Float32Array, outExists: Uint8Array): number {
    let hits = 0;
    keys.forEach((key, i) => {
      const s = this.#slot(key);
      outExists[i] = s ? 1 : 0;
      if (!s) {
        outValues.fill(0, i * this.#dim, (i + 1) * this.#dim);
        return;
      }
      s.used = ++this.#clock;
      outValues.set(s.row, i * this.#dim);
      hits++;
    });
    return hits;
  }

  insert(keys: BigInt64Array, values: Float32Array): number {
    let evicted = 0;
    keys.forEach((key, i) => {
      const set = this.#set(key);
      if (!set) return;
      const row = values.slice(i * this.#dim, (i + 1) * this.#dim);
      const present = this.#slot(key);
      if (present) {
        present.row = row;
        present.used = ++this.#clock;
        return;
      }
      let at = set.indexOf(null);
      if (at < 0) {
        at = 0;
        for (let w = 1; w < set.length; w++) if (set[w]!.used < set[at]!.used) at = w;
        evicted++;
      } else {
        this.#size++;
      }
      set[at] = { key, used: ++this.#clock, row };
    });
    return evicted;
  }

  update(keys: BigInt64Array, values: Float32Array): number {
    let n = 0;
    keys.forEach((key, i) => {
      const s = this.#slot(key);
      if (!s) return;
      s.row = values.slice(i * this.#dim, (i + 1) * this.#dim);
      n++;
    });
    return n;
  }

  remove(keys: BigInt64Array): number {
    let n = 0;
    for (const key of keys) {
      const set = this.#set(key);
      const at = set ? set.findIndex((s) => s !== null && s.key === key) : -1;
      if (at < 0) continue;
      set![at] = null;
      this.#size--;
      n++;
    }
    return n;
  }

  keys(): BigInt64Array {
    return BigInt64Array.from(this.#sets.flat().filter((s): s is Slot => s !== null), (s) => s.key);
  }

  size(): number {
    return this.#size;
  }

  capacity(): number {
    return this.#sets.length * this.#ways;
  }

  sets(): number {
    return this.#sets.length;
  }

  ways(): number {
    return this.#ways;
  }

  clear(): void {
    for (const set of this.#sets) set.fill(null);
    this.#size = 0;
  }

  dispose(): void {
    this.clear();
  }
}
