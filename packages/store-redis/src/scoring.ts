import type { ScorePolicy } from '@embedstack/core';
import { scoresOnRead } from '@embedstack/core';
import type { Batch } from './batch.js';
import type { RedisArg } from './connection.js';
import type { KeyPlan } from './keyPlan.js';
import { addScript, type KvContext } from './kv.js';

/**
 * Scores on Redis follow core's rules (scores.ts, reference/scoring.ts) with the
 * clock kept in Redis (`<bucket 0>:clock`, INCR once per scored call of the
 * clock policies), so several clients share it:
 *
 * | policy     | stored score of a touched key        | Redis command            |
 * | lru        | the clock                            | HSET (script 'all')      |
 * | epochLru   | epoch * 2^32 + (clock mod 2^32)      | HSET (script 'all')      |
 * | lfu        | + occurrences in the call            | HINCRBY                  |
 * | timestamp  | wall-clock seconds of this client    | HSET (script 'all')      |
 * | frequency  | + 1 per call                         | HINCRBY                  |
 * | epochLfu   | epoch * 2^32 + count in this epoch   | script 'elfu'            |
 * | customized | the caller's score (last occurrence) | HSET                     |
 *
 * Only keys present after the call's writes are touched (the touch script checks
 * HEXISTS on the bucket, atomically per bucket chunk). Scores are decimal strings
 * in `<bucket>:scores`; an absent score reads as 0. epochLfu
 * (epoch * 2^32 + count in this epoch) is computed by the touch script with exact
 * 32-bit halves. The epoch (setEpoch) is per RedisRawTable object, not shared.
 */

const LOW32 = 0xffffffffn;

export interface ScoreState {
  policy: ScorePolicy;
  epoch: number;
}

/** True when the policy needs the shared clock. */
export function needsClock(policy: ScorePolicy): boolean {
  return policy === 'lru' || policy === 'epochLru';
}

/** True when a call of this kind (read or write) updates scores under `policy`. */
export function touchesOn(policy: ScorePolicy, write: boolean): boolean {
  return write || scoresOnRead(policy);
}

/**
 * Adds the score update of `ids` (distinct ids of `plan`) to `batch`. `c` holds the
 * call's clock value (clock policies) and wall-clock seconds (timestamp); `given` the
 * caller's scores ([n]) or null; `explicit` sets `given` verbatim whatever the
 * policy (importRows).
 */
export function addTouch(
  batch: Batch,
  ctx: KvContext,
  plan: KeyPlan,
  ids: readonly number[],
  s: ScoreState,
  c: { clock: bigint; now: bigint },
  given: BigUint64Array | null,
  explicit = false,
): void {
  if (ids.length === 0) return;
  const d = plan.distinct;
  const firsts = ids.map((id) => d.first[id]!);
  const keys = (b: { main: Buffer; scores: Buffer }) => [b.main, b.scores];
  const run = (mode: string, head: RedisArg[], per: (i: number) => RedisArg[], which = firsts) =>
    addScript(batch, ctx, plan, 'embedstackTouch', keys, which, [mode, ...head], per);
  const givenAt = (i: number) => given![d.last[d.of[i]!]!]!.toString();
  if (explicit && given) return void run('set', [], (i) => [plan.field(i), givenAt(i)]);
  switch (s.policy) {
    case 'lru':
      return void run('all', [c.clock.toString()], (i) => [plan.field(i)]);
    case 'epochLru':
      return void run('all', [((BigInt(s.epoch) << 32n) | (c.clock & LOW32)).toString()], (i) => [plan.field(i)]);
    case 'timestamp':
      return void run('all', [c.now.toString()], (i) => [plan.field(i)]);
    case 'lfu':
      return void run('incr', [], (i) => [plan.field(i), String(d.count[d.of[i]!]!)]);
    case 'frequency':
      return void run('incr', [], (i) => [plan.field(i), '1']);
    case 'customized':
      if (given) run('set', [], (i) => [plan.field(i), givenAt(i)]);
      return;
    case 'epochLfu':
      return void run('elfu', [String(s.epoch)], (i) => [plan.field(i), String(d.count[d.of[i]!]!)]);
  }
}
