import { invalidParameter, argName } from './errors.js';
import { errorClassFor } from './validation.js';

/**
 * How a dynamic table scores its rows (a 64-bit unsigned score per row). The score
 * decides eviction when a capped table is full and which rows `restrict` keeps.
 *
 * Every scored call (find, findOrInsert, upsert, assign, accum, applyGradients,
 * lookupCombined) first advances the table's clock by one.
 * | policy     | a touched row's score becomes                          | updated by      |
 * | lru        | the clock                                              | reads and writes |
 * | lfu        | score + occurrences of the key in the call             | reads and writes |
 * | epochLru   | epoch * 2^32 + (clock mod 2^32)                        | reads and writes |
 * | epochLfu   | epoch * 2^32 + count in this epoch (reset on a new epoch)| reads and writes |
 * | timestamp  | wall-clock seconds                                     | writes only     |
 * | frequency  | score + 1 per call in which the key appears            | writes only     |
 * | customized | the caller's score (`scores` option); else unchanged (new rows 0) | writes  |
 * Writes are findOrInsert, upsert, assign, accum, applyGradients and importRows.
 *
 * Eviction (capped tables): when a call would insert more new keys than there are
 * free rows, the table keeps, among its resident rows not touched by this call and
 * the new keys, those with the highest scores; ties keep new keys first, then
 * smaller (signed) keys. New keys that lose are refused: findOrInsert returns their
 * initial value with exists = false, upsert/accum/applyGradients drop them. So, as in
 * HierarchicalKV, a new key whose score is below every resident key's is refused and
 * one that ties the lowest resident replaces it; with the clock policies a new key
 * always wins over older rows.
 * HPS overflow policies map: evict_least_used -> lfu, evict_oldest -> lru,
 * evict_random -> lru with random scores given as customized.
 */
export type ScorePolicy = 'lru' | 'lfu' | 'epochLru' | 'epochLfu' | 'timestamp' | 'frequency' | 'customized';

/** Every {@link ScorePolicy}, in declaration order. */
export const SCORE_POLICIES: readonly ScorePolicy[] = [
  'lru',
  'lfu',
  'epochLru',
  'epochLfu',
  'timestamp',
  'frequency',
  'customized',
];

/**
 * Returns `value` as a {@link ScorePolicy}.
 * @throws InvalidArgumentError naming `argument` (default 'scorePolicy') unless it is one of {@link SCORE_POLICIES}
 */
export function validateScorePolicy(value: unknown, argument = 'scorePolicy'): ScorePolicy {
  argument = argName(argument, 'scorePolicy');
  if (!SCORE_POLICIES.includes(value as ScorePolicy)) {
    throw invalidParameter(argument, `one of ${SCORE_POLICIES.map((p) => `'${p}'`).join(', ')}`, value, errorClassFor(value, 'string'));
  }
  return value as ScorePolicy;
}

/** True for policies whose scores change on reads too. */
export function scoresOnRead(policy: ScorePolicy): boolean {
  return policy === 'lru' || policy === 'lfu' || policy === 'epochLru' || policy === 'epochLfu';
}
