import { type ExportBatch, FailedPreconditionError, type Keys, UnsupportedError } from '@embedstack/core';
import { deleteRows } from './admission.js';
import { Batch } from './batch.js';
import { type ExportCursor, exportRows, fetchCompanions, rankAll } from './exporter.js';
import { addHmget, decodeRow, describeField, mainHash } from './kv.js';
import type { TableCore } from './tableCore.js';

/** Field bytes back to keys. */
export function decodeKeys(fields: readonly Buffer[], dtype: 'int64' | 'int32'): Keys {
  if (dtype === 'int64') return BigInt64Array.from(fields, (f) => f.readBigInt64LE(0));
  return Int32Array.from(fields, (f) => f.readInt32LE(0));
}

function keysOf(values: readonly (bigint | number)[], dtype: 'int64' | 'int32'): Keys {
  return dtype === 'int64' ? BigInt64Array.from(values, (v) => BigInt(v)) : Int32Array.from(values, (v) => Number(v));
}

/**
 * Rows [offset, offset + limit): dynamic tables in the scan order of exporter.ts
 * (`state.cursor` carries the continuation between calls); static tables in row
 * order 0..vocabularySize-1, absent rows at their initial value, scores 0.
 */
export async function exportBatch(core: TableCore, state: { cursor: ExportCursor | null }, offset: number, limit: number): Promise<ExportBatch> {
  const ctx = await core.ctx();
  const o = core.options;
  const companions = (keys: Keys) => {
    const plan = core.plan(keys);
    return fetchCompanions(ctx, (b) => core.run(b, 'exportBatch', plan, false), plan, core.widths, o.slots.initial, core.scored);
  };
  if (core.isStatic) {
    const start = Math.min(offset, o.vocabularySize);
    const end = Math.min(o.vocabularySize, start + Math.min(limit, o.vocabularySize));
    const keys = keysOf(Array.from({ length: end - start }, (_, i) => start + i), o.keyDtype);
    const plan = core.plan(keys);
    const b = new Batch();
    const read = addHmget(b, ctx, plan, mainHash, plan.all());
    const rows = read(await core.run(b, 'exportBatch', plan, false));
    const values = new Float32Array(plan.n * o.dim);
    for (let i = 0; i < plan.n; i++) {
      const buf = rows[i];
      if (buf) decodeRow(buf, values, i * o.dim, o.dim, () => describeField(ctx, plan, i));
      else core.initial(plan.key(i), values, i * o.dim);
    }
    const { slots, scores } = await companions(keys);
    return { keys, values, slots, scores };
  }
  const cursor = offset === state.cursor?.offset ? state.cursor : null;
  const { fields, values, next } = await exportRows(ctx, (b) => core.run(b, 'exportBatch', undefined, false), cursor, offset, limit, o.dim);
  state.cursor = next;
  const width = o.keyDtype === 'int64' ? 8 : 4;
  const bad = fields.find((f) => f.length !== width);
  if (bad) throw new FailedPreconditionError(`Expected ${width}-byte key fields in table "${o.name}" but found one of ${bad.length} bytes`);
  const keys = decodeKeys(fields, o.keyDtype);
  const { slots, scores } = await companions(keys);
  return { keys, values, slots, scores };
}

/** Keeps the numReserved best-scored rows (ties: smaller signed keys); returns how many were removed. */
export async function restrict(core: TableCore, numReserved: number): Promise<number> {
  if (core.isStatic) return 0;
  if (!core.scored) {
    throw new UnsupportedError(`restrict needs scores, but table "${core.name}" was created with layout.trackScores = false`);
  }
  const ctx = await core.ctx();
  const ranked = await rankAll(ctx, (b) => core.run(b, 'restrict', undefined, false), core.options.keyDtype);
  if (ranked.length <= numReserved) return 0;
  const losers = keysOf(ranked.slice(numReserved).map((r) => r.key), core.options.keyDtype);
  return deleteRows(core, ctx, core.plan(losers), 'restrict');
}
