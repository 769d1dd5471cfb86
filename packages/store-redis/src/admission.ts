import { type EvictionCandidate, type Keys, referenceKernels } from '@embedstack/core';
import { Batch } from './batch.js';
import { rankAll } from './exporter.js';
import type { KeyPlan } from './keyPlan.js';
import { addHdel, addScript, type KvContext, mainHash, scoresHash, slotHash } from './kv.js';
import { allIds, type CallClock, type TableCore } from './tableCore.js';

/**
 * Capped tables (maxCapacity) on Redis, with core's eviction rule (scores.ts): when
 * a call would insert more new keys than there are free rows, it keeps, among the
 * resident rows it does not touch and its new keys, those with the highest scores
 * (ties: new keys first, then smaller signed keys); losing residents are deleted
 * first, losing new keys are refused.
 *
 * Cost: a call that overflows the cap reads every key and score of the table
 * (HKEYS + HMGET per bucket, O(rows)), as HugeCTR's Redis backend does when a
 * partition overflows; calls that fit pay one extra round trip (presence and
 * exact HLEN). Decisions are made by the calling client from that snapshot: exact
 * for one writer; concurrent writers on other clients may briefly exceed the cap.
 */

/** Presence of each distinct key (1/0 per distinct id), plus exact row counts into the cache. */
export async function probe(core: TableCore, ctx: KvContext, plan: KeyPlan, op: string): Promise<Uint8Array> {
  const d = plan.distinct;
  const b = new Batch();
  const read = addScript(b, ctx, plan, 'embedstackPresent', (bk) => [bk.main], d.first, [], (i) => [plan.field(i)]);
  const sizes = core.sizesOfAll(b, ctx);
  const replies = await core.run(b, op, plan, false);
  sizes(replies);
  const present = new Uint8Array(d.first.length);
  for (const [reply, idx] of read(replies)) idx.forEach((i, j) => (present[d.of[i]!] = Number((reply as unknown[])[j])));
  return present;
}

/**
 * Decides which of `newIds` (distinct ids absent before the call) are admitted,
 * deletes the evicted residents, and returns the refused distinct ids. `given` are
 * the caller's scores ([n], last occurrence counts); `explicit` ranks new keys by
 * them verbatim (importRows). The cache of sizes must be exact (see {@link probe}).
 */
export async function admit(
  core: TableCore,
  ctx: KvContext,
  plan: KeyPlan,
  newIds: readonly number[],
  c: CallClock,
  given: BigUint64Array | null,
  explicit: boolean,
  op: string,
): Promise<Set<number>> {
  const refused = new Set<number>();
  const max = core.options.maxCapacity;
  if (!core.capped || newIds.length === 0 || newIds.length <= max - core.size()) return refused;
  const d = plan.distinct;
  const callKeys = new Set(d.first.map((i) => plan.key(i)));
  const ranked = await rankAll(ctx, (b) => core.run(b, op, undefined, false), core.options.keyDtype);
  const candidates: EvictionCandidate<bigint | number>[] = [];
  let touched = 0;
  for (const r of ranked) {
    if (callKeys.has(r.key)) touched++;
    else candidates.push({ key: r.key, score: r.score, resident: true });
  }
  const clock = core.scoreClock(c);
  const idOf = new Map<bigint | number, number>();
  for (const id of newIds) {
    const key = plan.key(d.first[id]!);
    const g = given ? given[d.last[id]!] : undefined;
    const score = explicit && g !== undefined ? g : referenceKernels.nextScore(core.options.scorePolicy, undefined, d.count[id]!, g, clock);
    candidates.push({ key, score, resident: false });
    idOf.set(key, id);
  }
  const evicted: (bigint | number)[] = [];
  for (const l of referenceKernels.evictionLosers(candidates, max - touched)) {
    if (l.resident) evicted.push(l.key);
    else refused.add(idOf.get(l.key)!);
  }
  if (evicted.length > 0) {
    const keys: Keys = core.options.keyDtype === 'int64' ? BigInt64Array.from(evicted as bigint[]) : Int32Array.from(evicted as number[]);
    await deleteRows(core, ctx, core.plan(keys), op);
  }
  return refused;
}

/** Deletes rows (value, slots, score) of every distinct key of `plan`; returns how many rows existed. */
export async function deleteRows(core: TableCore, ctx: KvContext, plan: KeyPlan, op: string): Promise<number> {
  const first = plan.distinct.first;
  const b = new Batch();
  const removed = addHdel(b, ctx, plan, mainHash, first);
  core.widths.forEach((_, s) => addHdel(b, ctx, plan, slotHash(s), first));
  if (core.scored) addHdel(b, ctx, plan, scoresHash, first);
  const sizes = core.sizesOf(b, ctx, plan);
  const replies = await core.run(b, op, plan, true);
  sizes(replies);
  return core.isStatic ? first.length : removed(replies);
}

/** Distinct ids of `plan` that are not in `refused`. */
export function admitted(plan: KeyPlan, refused: ReadonlySet<number>): number[] {
  return allIds(plan).filter((id) => !refused.has(id));
}
