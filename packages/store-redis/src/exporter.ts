import { FailedPreconditionError, type Keys, referenceKernels } from '@embedstack/core';
import { Batch } from './batch.js';
import { KeyPlan } from './keyPlan.js';
import { addHlen, addHmget, decodeRow, describeField, type KvContext, scoresHash, slotHash } from './kv.js';
import { printableKey } from './naming.js';

/**
 * Export and ranking scans.
 *
 * Export order: the concatenation of the buckets in bucket order, each bucket in
 * HSCAN order (fields seen twice within a bucket are dropped: HSCAN may repeat a
 * field while Redis rehashes the hash). `exportBatch(offset, limit)` pages through
 * it: a call whose offset is where the previous call of this table object ended
 * continues the previous scan (so paging a whole table costs O(rows)); any other
 * offset starts over (HLEN of every bucket to find the bucket, then a scan that
 * skips the rows before `offset` within it). The order is stable while nobody
 * writes the table; a write through this table object resets the continuation.
 * A scan keeps the fields of the current bucket in a Set (memory: one bucket's keys).
 */

export type RunBatch = (b: Batch, op: string) => Promise<unknown[]>;

export interface ExportCursor {
  /** Absolute position of the next row. */
  offset: number;
  bucket: number;
  /** HSCAN cursor of `bucket`; null once the bucket is finished. */
  scan: string | null;
  /** Fields of `bucket` already returned or queued (latin1 strings). */
  seen: Set<string>;
  /** Scanned, not yet returned [field, value] pairs. */
  pending: [Buffer, Buffer][];
}

async function pull(ctx: KvContext, run: RunBatch, c: ExportCursor, count: number): Promise<[Buffer, Buffer][]> {
  const got: [Buffer, Buffer][] = [];
  while (got.length < count) {
    if (c.pending.length > 0) {
      const take = c.pending.splice(0, count - got.length);
      for (const p of take) got.push(p);
      continue;
    }
    if (c.bucket >= ctx.buckets.length) break;
    if (c.scan === null) {
      c.bucket++;
      c.scan = '0';
      c.seen.clear();
      continue;
    }
    const key = ctx.buckets[c.bucket]!.main;
    const b = new Batch();
    b.add(c.bucket, { route: key, name: 'HSCAN', args: [key, c.scan, 'COUNT', Math.max(ctx.chunk, 16)] });
    const [reply] = await run(b, 'exportBatch');
    const [cur, flat] = reply as [Buffer, Buffer[]];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const tag = flat[i]!.toString('latin1');
      if (c.seen.has(tag)) continue;
      c.seen.add(tag);
      c.pending.push([flat[i]!, flat[i + 1]!]);
    }
    c.scan = String(cur) === '0' ? null : String(cur);
  }
  c.offset += got.length;
  return got;
}

/** Rows [offset, offset + limit) of the export order: raw key fields and decoded values [n * dim]. */
export async function exportRows(
  ctx: KvContext,
  run: RunBatch,
  cursor: ExportCursor | null,
  offset: number,
  limit: number,
  dim: number,
): Promise<{ fields: Buffer[]; values: Float32Array; next: ExportCursor }> {
  let c = cursor;
  if (!c) {
    const b = new Batch();
    const counts = addHlen(b, ctx, ctx.buckets.keys())(await run(b, 'exportBatch'));
    let skip = offset;
    let bucket = 0;
    for (; bucket < counts.length; bucket++) {
      const n = counts[bucket]![1];
      if (skip < n) break;
      skip -= n;
    }
    c = { offset: offset - skip, bucket, scan: '0', seen: new Set(), pending: [] };
    if (bucket < counts.length && skip > 0) await pull(ctx, run, c, skip);
    c.offset = offset;
  }
  const rows = limit > 0 ? await pull(ctx, run, c, limit) : [];
  const values = new Float32Array(rows.length * dim);
  rows.forEach(([f, v], i) =>
    decodeRow(v, values, i * dim, dim, () => `field ${f.toString('hex')} of ${printableKey(ctx.buckets[Math.min(c.bucket, ctx.buckets.length - 1)]!.main)}`),
  );
  return { fields: rows.map((r) => r[0]), values, next: c };
}

/** Slots ([n * width] each, absent -> initial value) and scores ([n], absent -> 0) of the plan's keys. */
export async function fetchCompanions(
  ctx: KvContext,
  run: (b: Batch) => Promise<unknown[]>,
  plan: KeyPlan,
  widths: readonly number[],
  initial: readonly number[],
  withScores: boolean,
): Promise<{ slots: Float32Array[]; scores: BigUint64Array }> {
  const slots = widths.map((w) => new Float32Array(plan.n * w));
  const scores = new BigUint64Array(plan.n);
  if (plan.n === 0 || (widths.length === 0 && !withScores)) return { slots, scores };
  const b = new Batch();
  const all = plan.all();
  const readSlots = widths.map((_, s) => addHmget(b, ctx, plan, slotHash(s), all));
  const readScores = withScores ? addHmget(b, ctx, plan, scoresHash, all) : null;
  const replies = await run(b);
  widths.forEach((w, s) => {
    const rows = readSlots[s]!(replies);
    for (let i = 0; i < plan.n; i++) {
      const buf = rows[i];
      if (buf) decodeRow(buf, slots[s]!, i * w, w, () => describeField(ctx, plan, i, slotHash(s)));
      else slots[s]!.fill(initial[s]!, i * w, (i + 1) * w);
    }
  });
  if (readScores) {
    const rows = readScores(replies);
    for (let i = 0; i < plan.n; i++) scores[i] = parseScore(rows[i] ?? null, () => describeField(ctx, plan, i, scoresHash));
  }
  return { slots, scores };
}

function parseScore(buf: Buffer | null, where: () => string): bigint {
  if (!buf) return 0n;
  const s = buf.toString('latin1');
  if (!/^\d{1,20}$/.test(s)) throw new FailedPreconditionError(`Expected a decimal uint64 score for ${where()} but Redis holds "${s.slice(0, 40)}"`);
  return BigInt.asUintN(64, BigInt(s));
}

/** Every key of the table with its score, best first (score descending, then smaller signed key). */
export async function rankAll(ctx: KvContext, run: (b: Batch) => Promise<unknown[]>, dtype: 'int64' | 'int32'): Promise<{ key: bigint | number; score: bigint }[]> {
  const b = new Batch();
  ctx.buckets.forEach((bk, i) => b.add(i, { route: bk.main, name: 'HKEYS', args: [bk.main] }));
  const fields = ((await run(b)) as Buffer[][]).flat();
  const width = dtype === 'int64' ? 8 : 4;
  for (const f of fields) {
    if (f.length !== width) throw new FailedPreconditionError(`Expected ${width}-byte key fields in table "${ctx.table}" but found one of ${f.length} bytes`);
  }
  const keys: Keys = dtype === 'int64' ? BigInt64Array.from(fields, (f) => f.readBigInt64LE(0)) : Int32Array.from(fields, (f) => f.readInt32LE(0));
  const plan = new KeyPlan(keys, ctx.buckets.length);
  const sb = new Batch();
  const read = addHmget(sb, ctx, plan, scoresHash, plan.all());
  const rows = read(await run(sb));
  const ranked = Array.from(keys as ArrayLike<bigint | number>, (key, i) => ({
    key,
    score: parseScore(rows[i] ?? null, () => describeField(ctx, plan, i, scoresHash)),
    resident: true,
  }));
  return ranked.sort(referenceKernels.compareKeepFirst);
}
