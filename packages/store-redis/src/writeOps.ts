import type { Keys } from '@embedstack/core';
import { admit, admitted, deleteRows, probe } from './admission.js';
import { Batch } from './batch.js';
import type { KeyPlan } from './keyPlan.js';
import { addHdel, addHset, addScript, type KvContext, mainHash, rowBytes, slotHash } from './kv.js';
import { allIds, type CallClock, type TableCore } from './tableCore.js';

/**
 * Writes. Each is one round trip of HSET / script commands per bucket chunk, plus
 * the score update and HLEN of the touched buckets in the same pipeline (capped
 * tables first probe presence and decide admission, see admission.ts). Duplicate
 * keys: the last value wins (upsert, assign, importRows); accum applies every
 * occurrence in order, atomically per key on the server.
 */

/** Admission for an inserting call on a capped table: refused distinct ids (empty when uncapped). */
async function admitNew(
  core: TableCore,
  ctx: KvContext,
  plan: KeyPlan,
  c: CallClock,
  given: BigUint64Array | null,
  explicit: boolean,
  op: string,
  candidate: (i: number) => boolean = () => true,
): Promise<Set<number>> {
  if (!core.capped) return new Set();
  const present = await probe(core, ctx, plan, op);
  const d = plan.distinct;
  const seen = new Set<number>();
  for (let i = 0; i < plan.n; i++) {
    const id = d.of[i]!;
    if (!present[id] && candidate(i)) seen.add(id);
  }
  return admit(core, ctx, plan, [...seen], c, given, explicit, op);
}

const lastOf = (plan: KeyPlan, ids: readonly number[]) => ids.map((id) => plan.distinct.last[id]!);

export async function upsert(core: TableCore, keys: Keys, values: Float32Array, scores: BigUint64Array | null): Promise<void> {
  const ctx = await core.ctx();
  const plan = core.plan(keys);
  const c = await core.begin('upsert', true, plan);
  const ids = admitted(plan, await admitNew(core, ctx, plan, c, scores, false, 'upsert'));
  const batch = new Batch();
  const dim = core.options.dim;
  addHset(batch, ctx, plan, mainHash, lastOf(plan, ids), (i) => rowBytes(values, i, dim));
  core.touch(batch, ctx, plan, ids, c, true, scores);
  const sizes = core.sizesOf(batch, ctx, plan);
  sizes(await core.run(batch, 'upsert', plan, true));
}

export async function assign(core: TableCore, keys: Keys, values: Float32Array, scores: BigUint64Array | null): Promise<void> {
  if (core.isStatic) return upsert(core, keys, values, null);
  const ctx = await core.ctx();
  const plan = core.plan(keys);
  const d = plan.distinct;
  const c = await core.begin('assign', true, plan);
  const batch = new Batch();
  const dim = core.options.dim;
  addScript(batch, ctx, plan, 'embedstackAssign', (b) => [b.main], d.last, [], (i) => [plan.field(i), rowBytes(values, i, dim)]);
  core.touch(batch, ctx, plan, allIds(plan), c, true, scores);
  await core.run(batch, 'assign', plan, true);
}

export async function accum(core: TableCore, keys: Keys, deltas: Float32Array, exists: Uint8Array, scores: BigUint64Array | null): Promise<void> {
  const ctx = await core.ctx();
  const plan = core.plan(keys);
  const dim = core.options.dim;
  const c = await core.begin('accum', true, plan);
  const refused = await admitNew(core, ctx, plan, c, scores, false, 'accum', (i) => exists[i] === 0);
  const batch = new Batch();
  const d = plan.distinct;
  const idx = plan.all().filter((i) => !refused.has(d.of[i]!) && (!core.isStatic || exists[i]));
  if (core.isStatic) {
    const init = new Float32Array(dim);
    addScript(batch, ctx, plan, 'embedstackAccumStatic', (b) => [b.main], idx, [String(dim)], (i) => {
      core.initial(plan.key(i), init, 0);
      return [plan.field(i), rowBytes(deltas, i, dim), Buffer.from(rowBytes(init, 0, dim))];
    });
  } else {
    addScript(batch, ctx, plan, 'embedstackAccum', (b) => [b.main], idx, [String(dim)], (i) => [
      plan.field(i),
      rowBytes(deltas, i, dim),
      exists[i] ? '1' : '0',
    ]);
  }
  core.touch(batch, ctx, plan, admitted(plan, refused), c, true, scores);
  const sizes = core.sizesOf(batch, ctx, plan);
  sizes(await core.run(batch, 'accum', plan, true));
}

/** Removes rows, slots and scores; returns the rows removed (static tables: distinct keys, rows reset). */
export async function remove(core: TableCore, keys: Keys): Promise<number> {
  const ctx = await core.ctx();
  return deleteRows(core, ctx, core.plan(keys), 'remove');
}

/**
 * UNLINK of every key of the table. clear keeps the score clock (`dropClock` false), as
 * the reference's clear does: scores exported before the clear (and rows other clients
 * write meanwhile) stay below every later score. drop (`dropClock` true) unlinks the
 * clock too (it shares bucket 0's slot), for a table that goes away.
 */
export async function clear(core: TableCore, dropClock = false): Promise<void> {
  const ctx = await core.ctx();
  const batch = new Batch();
  ctx.buckets.forEach((b, i) => {
    const args = [b.main, ...b.slots, b.scores];
    if (dropClock && i === 0) args.push(core.keyspace.clock);
    batch.add(i, { route: b.main, name: 'UNLINK', args });
  });
  await core.run(batch, 'clear', undefined, true);
  core.sizes.fill(0);
}

/** Bulk load: values, slots (null resets them to their initial values) and scores (explicit ones are set verbatim). */
export async function importRows(core: TableCore, keys: Keys, values: Float32Array, slots: Float32Array[] | null, scores: BigUint64Array | null): Promise<void> {
  const ctx = await core.ctx();
  const plan = core.plan(keys);
  const dim = core.options.dim;
  const explicit = scores !== null;
  const c = await core.begin('importRows', true, plan);
  const ids = admitted(plan, await admitNew(core, ctx, plan, c, scores, explicit, 'importRows'));
  const last = lastOf(plan, ids);
  const first = ids.map((id) => plan.distinct.first[id]!);
  const batch = new Batch();
  addHset(batch, ctx, plan, mainHash, last, (i) => rowBytes(values, i, dim));
  core.widths.forEach((w, s) => {
    if (slots) addHset(batch, ctx, plan, slotHash(s), last, (i) => rowBytes(slots[s]!, i, w));
    else addHdel(batch, ctx, plan, slotHash(s), first);
  });
  core.touch(batch, ctx, plan, ids, c, true, scores, explicit);
  const sizes = core.sizesOf(batch, ctx, plan);
  sizes(await core.run(batch, 'importRows', plan, true));
}
