import type { ScorePolicy } from '../scores.js';

/**
 * Score arithmetic and the eviction rule of `scores.ts`, as pure functions (the
 * reference tables use them; other table implementations may too).
 *
 * Precise rules the reference backend follows (native backends match them):
 * - Every scored call (find, findOrInsert, upsert, assign, accum, applyGradients,
 *   lookupCombined, importRows) first advances the clock by one; remove, clear,
 *   restrict, export and setEpoch do not, and clear keeps the clock and the epoch.
 * - Reads are find and lookupCombined without insertMissing; every other scored call
 *   is a write (lookupCombined with insertMissing behaves exactly as findOrInsert).
 * - After the call, every distinct key of the call that is resident gets
 *   `nextScore(...)` when the policy updates on this kind of call (read policies: lru,
 *   lfu, epochLru, epochLfu on reads and writes; timestamp, frequency, customized on
 *   writes only). `occurrences` counts every occurrence of the key in the call
 *   (duplicates included, whether or not the op changed the row); `given` is the
 *   caller's score at the key's LAST occurrence. importRows with explicit scores sets
 *   them verbatim whatever the policy.
 * - A new key is scored as if its old score were absent (lfu: occurrences;
 *   frequency: 1; customized without scores: 0).
 */

const U64 = (1n << 64n) - 1n;
const LOW32 = 0xffffffffn;

/** Per-table state the score policies read (reference backend). */
export interface ScoreClock {
  /** Advanced once per scored call, starts at 0 (so the first call sees 1). */
  clock: number;
  /** setEpoch's value. */
  epoch: number;
  /** Wall-clock seconds for the timestamp policy: Math.floor(Date.now() / 1000), read once per call. */
  now: bigint;
}

/** The score a row touched by a call gets (`old` undefined for a new row). */
export function nextScore(
  policy: ScorePolicy,
  old: bigint | undefined,
  occurrences: number,
  given: bigint | undefined,
  t: ScoreClock,
): bigint {
  switch (policy) {
    case 'lru':
      return BigInt(t.clock);
    case 'lfu': {
      const s = (old ?? 0n) + BigInt(occurrences);
      return s > U64 ? U64 : s;
    }
    case 'epochLru':
      return (BigInt(t.epoch) << 32n) | (BigInt(t.clock) & LOW32);
    case 'epochLfu': {
      const e = BigInt(t.epoch);
      let count = old !== undefined && old >> 32n === e ? (old & LOW32) + BigInt(occurrences) : BigInt(occurrences);
      if (count > LOW32) count = LOW32;
      return (e << 32n) | count;
    }
    case 'timestamp':
      return t.now;
    case 'frequency': {
      const s = (old ?? 0n) + 1n;
      return s > U64 ? U64 : s;
    }
    case 'customized':
      return given ?? old ?? 0n;
  }
}

/** A row competing for room in a full capped table (see {@link evictionLosers}). */
export interface EvictionCandidate<K> {
  /** The row's key. */
  key: K;
  /** Its score (uint64). */
  score: bigint;
  /** True for a row already in the table, false for a key the call would insert. */
  resident: boolean;
}

/**
 * The eviction rule (scores.ts): among `candidates` (resident rows not touched by
 * the call and the call's new keys), keep the `room` best by score descending;
 * ties keep new keys first (a new key that ties the lowest resident replaces it,
 * as HierarchicalKV does), then smaller signed keys. Returns the losers (residents
 * to evict and new keys to refuse).
 */
export function evictionLosers<K extends bigint | number>(candidates: EvictionCandidate<K>[], room: number): EvictionCandidate<K>[] {
  const sorted = candidates.slice().sort(compareKeepFirst);
  return sorted.slice(Math.max(0, room));
}

/** Order of preference: higher score, then new key, then smaller key. */
export function compareKeepFirst<K extends bigint | number>(a: EvictionCandidate<K>, b: EvictionCandidate<K>): number {
  if (a.score !== b.score) return a.score > b.score ? -1 : 1;
  if (a.resident !== b.resident) return a.resident ? 1 : -1;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/** Wall-clock seconds used by the timestamp policy. */
export function nowSeconds(): bigint {
  return BigInt(Math.floor(Date.now() / 1000));
}
