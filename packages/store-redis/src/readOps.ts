import type { FindResult, Keys } from '@embedstack/core';
import { admit } from './admission.js';
import { Batch } from './batch.js';
import { addHmget, addScript, decodeRow, describeField, mainHash, rowBytes } from './kv.js';
import { allIds, type TableCore } from './tableCore.js';

/**
 * find: one round trip (HMGET of the distinct keys per bucket chunk, plus the score
 * update for read-tracking policies and HLEN of the touched buckets). Missing keys
 * get their initial value and exists = 0 (static tables: every row exists).
 */
export async function find(core: TableCore, keys: Keys, op: string): Promise<FindResult> {
  const ctx = await core.ctx();
  const plan = core.plan(keys);
  const d = plan.distinct;
  const c = await core.begin(op, false, plan);
  const batch = new Batch();
  const read = addHmget(batch, ctx, plan, mainHash, d.first);
  core.touch(batch, ctx, plan, allIds(plan), c, false, null);
  const sizes = core.sizesOf(batch, ctx, plan);
  const replies = await core.run(batch, op, plan, core.tracks(false));
  sizes(replies);
  const rows = read(replies);
  const dim = core.options.dim;
  const values = new Float32Array(plan.n * dim);
  const exists = new Uint8Array(plan.n);
  for (let i = 0; i < plan.n; i++) {
    const buf = rows[d.first[d.of[i]!]!];
    if (buf) {
      decodeRow(buf, values, i * dim, dim, () => describeField(ctx, plan, i));
      exists[i] = 1;
    } else {
      core.initial(plan.key(i), values, i * dim);
      exists[i] = core.isStatic ? 1 : 0;
    }
  }
  return { values, exists };
}

/**
 * findOrInsert: round trip 1 reads the distinct keys (and scores the present ones);
 * if some are missing, round trip 2 inserts them with HSETNX in a script and reads
 * back what is stored (a concurrent writer may have inserted the key meanwhile:
 * its value is returned with exists = 1). Capped tables decide admission in between.
 */
export async function findOrInsert(core: TableCore, keys: Keys, scores: BigUint64Array | null, op: string): Promise<FindResult> {
  if (core.isStatic) return find(core, keys, op);
  const ctx = await core.ctx();
  const plan = core.plan(keys);
  const d = plan.distinct;
  const dim = core.options.dim;
  const c = await core.begin(op, true, plan);
  const b1 = new Batch();
  const read = addHmget(b1, ctx, plan, mainHash, d.first);
  core.touch(b1, ctx, plan, allIds(plan), c, true, scores);
  const sizes1 = core.capped ? core.sizesOfAll(b1, ctx) : () => {};
  const replies1 = await core.run(b1, op, plan, core.scored);
  sizes1(replies1);
  const rows = read(replies1);
  const values = new Float32Array(plan.n * dim);
  const present = new Uint8Array(d.first.length);
  const missing: number[] = [];
  d.first.forEach((i, id) => {
    const buf = rows[i];
    if (buf) {
      decodeRow(buf, values, i * dim, dim, () => describeField(ctx, plan, i));
      present[id] = 1;
    } else missing.push(id);
  });
  const refused = core.capped ? await admit(core, ctx, plan, missing, c, scores, false, op) : new Set<number>();
  const insert = missing.filter((id) => !refused.has(id));
  for (const id of refused) core.initial(plan.key(d.first[id]!), values, d.first[id]! * dim);
  if (insert.length > 0) {
    const init = new Float32Array(dim);
    const b2 = new Batch();
    const ins = addScript(b2, ctx, plan, 'embedstackInsertMissing', (b) => [b.main], insert.map((id) => d.first[id]!), [], (i) => {
      core.initial(plan.key(i), init, 0);
      return [plan.field(i), Buffer.from(rowBytes(init, 0, dim))];
    });
    core.touch(b2, ctx, plan, insert, c, true, scores);
    const sizes2 = core.sizesOf(b2, ctx, plan);
    const replies2 = await core.run(b2, op, plan, true);
    sizes2(replies2);
    for (const [reply, idx] of ins(replies2)) {
      const flat = reply as Buffer[];
      idx.forEach((i, j) => {
        if (String(flat[2 * j]) !== '1') present[d.of[i]!] = 1;
        decodeRow(flat[2 * j + 1]!, values, i * dim, dim, () => describeField(ctx, plan, i));
      });
    }
  }
  const exists = new Uint8Array(plan.n);
  for (let i = 0; i < plan.n; i++) {
    const first = d.first[d.of[i]!]!;
    exists[i] = present[d.of[i]!]!;
    if (i !== first) values.copyWithin(i * dim, first * dim, (first + 1) * dim);
  }
  return { values, exists };
}
