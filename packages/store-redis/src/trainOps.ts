import { type Keys, type ResolvedOptimizer, referenceKernels } from '@embedstack/core';
import { admit } from './admission.js';
import { Batch } from './batch.js';
import { addHmget, addHset, decodeRow, describeField, mainHash, rowBytes, slotHash } from './kv.js';
import type { TableCore } from './tableCore.js';

/**
 * applyGradients, read-modify-write (as TFRA does with Redis): round trip 1 reads
 * the distinct rows and their slots; duplicate gradients are summed and core's
 * reference kernel updates row and slots here; round trip 2 writes rows, slots and
 * scores back. Missing keys start from their initial value and slots. Not atomic
 * against other processes training the same rows (their updates may be lost);
 * calls on one table object are serialised by its lock.
 */
export async function applyGradients(core: TableCore, keys: Keys, grads: Float32Array, opt: ResolvedOptimizer): Promise<void> {
  const op = 'applyGradients';
  const ctx = await core.ctx();
  const plan = core.plan(keys);
  const d = plan.distinct;
  const dim = core.options.dim;
  const widths = core.widths;
  const { sums } = referenceKernels.dedupeGradients(keys, grads, dim);
  const c = await core.begin(op, true, plan);
  const rb = new Batch();
  const readRows = addHmget(rb, ctx, plan, mainHash, d.first);
  const readSlots = widths.map((_, s) => addHmget(rb, ctx, plan, slotHash(s), d.first));
  const sizes = core.capped ? core.sizesOfAll(rb, ctx) : () => {};
  const replies = await core.run(rb, op, plan, false);
  sizes(replies);
  const rows = readRows(replies);
  const slotRows = readSlots.map((r) => r(replies));
  const missing = core.isStatic ? [] : d.first.map((i, id) => (rows[i] ? -1 : id)).filter((id) => id >= 0);
  const refused = core.capped ? await admit(core, ctx, plan, missing, c, null, false, op) : new Set<number>();
  const ids = d.first.map((_, id) => id).filter((id) => !refused.has(id));
  const u = d.first.length;
  const w = new Float32Array(u * dim);
  const slots = widths.map((sw) => new Float32Array(u * sw));
  for (const id of ids) {
    const i = d.first[id]!;
    const buf = rows[i];
    if (buf) decodeRow(buf, w, id * dim, dim, () => describeField(ctx, plan, i));
    else core.initial(plan.key(i), w, id * dim);
    widths.forEach((sw, s) => {
      // A dynamic row's stale slot fields (row absent) are ignored; a static row's slots stand alone.
      const sb = slotRows[s]![i];
      if (sb && (buf || core.isStatic)) decodeRow(sb, slots[s]!, id * sw, sw, () => describeField(ctx, plan, i, slotHash(s)));
      else slots[s]!.fill(core.options.slots.initial[s]!, id * sw, (id + 1) * sw);
    });
    referenceKernels.applyOptimizerRow(
      opt,
      w.subarray(id * dim, (id + 1) * dim),
      widths.map((sw, s) => slots[s]!.subarray(id * sw, (id + 1) * sw)),
      sums.subarray(id * dim, (id + 1) * dim),
    );
  }
  const firsts = ids.map((id) => d.first[id]!);
  const wb = new Batch();
  addHset(wb, ctx, plan, mainHash, firsts, (i) => rowBytes(w, d.of[i]!, dim));
  widths.forEach((sw, s) => addHset(wb, ctx, plan, slotHash(s), firsts, (i) => rowBytes(slots[s]!, d.of[i]!, sw)));
  core.touch(wb, ctx, plan, ids, c, true, null);
  const sizes2 = core.sizesOf(wb, ctx, plan);
  sizes2(await core.run(wb, op, plan, true));
}
