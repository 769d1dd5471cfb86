// The cache contract's key placement, written plainly (BigInt arithmetic) as a test oracle:
// independent of the backends' implementations (reference, native), which the tests check against it.

const M64 = 0xffffffffffffffffn;

/**
 * The set that `createCache`'s contract places `key` in, for a cache of `sets` sets:
 * `((fmix64(key) >> 32) * sets) >> 32`, fmix64 being MurmurHash3's 64-bit finalizer.
 * For tests (the conformance suite's cache section, HPS's L1 model).
 */
export function cacheSetOf(key: bigint, sets: number): number {
  let h = key & M64;
  h = ((h ^ (h >> 33n)) * 0xff51afd7ed558ccdn) & M64;
  h = ((h ^ (h >> 33n)) * 0xc4ceb9fe1a85ec53n) & M64;
  h ^= h >> 33n;
  return Number(((h >> 32n) * BigInt(sets)) >> 32n);
}
