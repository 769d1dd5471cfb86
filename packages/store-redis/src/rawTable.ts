import {
  type Bag,
  type Combiner,
  DisposedError,
  type ExportBatch,
  type FindResult,
  initialRow,
  type Keys,
  type RawTable,
  type RawTableAsync,
  type ResolvedOptimizer,
  type ResolvedTableOptions,
  referenceKernels,
  slotFloatsPerRow,
  UnsupportedError,
} from '@embedstack/core';
import { Batch, type BatchContext } from './batch.js';
import type { RedisConnection } from './connection.js';
import { exportRows, type ExportCursor, fetchCompanions, rankAll } from './exporter.js';
import { KeyPlan } from './keyPlan.js';
import { TableKeyspace } from './keyspace.js';
import { addHdel, addHlen, addHmget, addHset, addScript, decodeRow, describeField, type KvContext, mainHash, rowBytes, scoresHash, slotHash } from './kv.js';
import type { ResolvedRedisTableLayout } from './options.js';
import { addTouch, needsClock, type ScoreState, touchesOn } from './scoring.js';
import { RwLock } from './rwLock.js';

export interface RedisRawTableInit {
  conn: RedisConnection;
  /** Close the connection when the table is disposed. */
  ownsConnection: boolean;
  options: ResolvedTableOptions;
  layout: ResolvedRedisTableLayout;
}

/**
 * core's RawTable over Redis (async only: `sync` is null). Layout: `naming.ts`.
 * Memory: rows live in Redis; a call holds its keys, values and replies on the JS heap.
 *
 * Semantics are core's (rawTable.ts) with these Redis-specific points:
 * - Atomicity: every command and script is atomic on its node; a call spans several
 *   (one per bucket per keysSendingSize keys, on several nodes) and is NOT atomic as
 *   a whole. `accum` is atomic per key (a server-side script adds the float32
 *   vectors); `applyGradients` and `restrict` are read-modify-write from this client
 *   (as TFRA does with Redis): concurrent trainers on other processes may lose
 *   updates of the same rows. Calls on one table object are ordered by a per-object
 *   reader-writer lock.
 * - Failures reject with STORE_UNAVAILABLE naming the keys and buckets whose state
 *   is unknown; a read never substitutes initial values for rows it could not read.
 * - `size()` is synchronous, so it returns a cache: per-bucket HLEN values refreshed
 *   by every call (for the buckets the call touched) and loaded in full by the first
 *   call and by {@link sizeAsync}. Writes by other clients show up only then.
 * - Capped tables (maxCapacity) and static tables are UNSUPPORTED; the epochLfu
 *   policy is UNSUPPORTED while scores are tracked (see scoring.ts).
 */
export class RedisRawTable implements RawTable {
  readonly sync = null;
  readonly async: RawTableAsync;
  readonly options: ResolvedTableOptions;
  readonly layout: ResolvedRedisTableLayout;
  readonly keyspace: TableKeyspace;
  readonly #conn: RedisConnection;
  readonly #owns: boolean;
  readonly #lock = new RwLock();
  readonly #widths: number[];
  readonly #sizes: Float64Array;
  #sizesLoaded = false;
  #epoch = 0;
  #disposed = false;
  #cursor: ExportCursor | null = null;

  /** @throws UnsupportedError for static, capped or epochLfu tables */
  constructor(init: RedisRawTableInit) {
    const o = init.options;
    if (o.kind !== 'dynamic') {
      throw new UnsupportedError(`Redis tables are dynamic (hash) tables; table "${o.name}" is ${o.kind}: use an in-memory backend`);
    }
    if (o.maxCapacity !== Infinity) {
      throw new UnsupportedError(
        `Expected maxCapacity to be unset (Infinity) for a Redis table but received ${o.maxCapacity}: capped tables with eviction are not supported on Redis`,
        { argument: 'maxCapacity' },
      );
    }
    if (init.layout.trackScores && o.scorePolicy === 'epochLfu') {
      throw new UnsupportedError(
        `The 'epochLfu' score policy is not supported on Redis (table "${o.name}"); use 'lfu', or layout.trackScores = false`,
        { argument: 'scorePolicy' },
      );
    }
    this.#conn = init.conn;
    this.#owns = init.ownsConnection;
    this.options = o;
    this.layout = init.layout;
    this.#widths = o.slots.widths.map((w) => (w === 'dim' ? o.dim : 1));
    this.#sizes = new Float64Array(init.layout.storageSlice);
    this.keyspace = new TableKeyspace(init.conn, init.layout, o.slots.names);
    this.async = {
      find: (k) => this.#read(() => this.#find(k, 'find')),
      findOrInsert: (k, s) => this.#write(() => this.#findOrInsert(k, s, 'findOrInsert')),
      upsert: (k, v, s) => this.#write(() => this.#upsert(k, v, s)),
      assign: (k, v, s) => this.#write(() => this.#assign(k, v, s)),
      accum: (k, d, e, s) => this.#write(() => this.#accum(k, d, e, s)),
      remove: (k) => this.#write(() => this.#remove(k, 'remove')),
      clear: () => this.#write(() => this.#clear()),
      exportBatch: (offset, limit) => this.#read(() => this.#export(offset, limit)),
      importRows: (k, v, sl, sc) => this.#write(() => this.#import(k, v, sl, sc)),
      lookupCombined: (bag, c, m, ins) => this.#lookupCombined(bag, c, m, ins),
      applyGradients: (k, g, opt) => this.#write(() => this.#applyGradients(k, g, opt)),
      restrict: (n) => this.#write(() => this.#restrict(n)),
    };
  }

  // ---- RawTable (sync part) --------------------------------------------------

  /** Cached row count (see the class comment); exact after {@link sizeAsync}. */
  size(): number {
    let s = 0;
    for (const v of this.#sizes) s += v;
    return s;
  }

  /** Redis has no fixed capacity: max(initCapacity, size). */
  capacity(): number {
    return Math.max(this.options.initCapacity, this.size());
  }

  /** Estimate of the bytes Redis holds for the table: per row key, values, slots, score and ~64 bytes of hash overhead. */
  memoryUsage(): number {
    const o = this.options;
    const floats = o.dim + slotFloatsPerRow(o.slots, o.dim);
    const width = o.keyDtype === 'int64' ? 8 : 4;
    return this.size() * (floats * 4 + width * (1 + this.#widths.length) + 64);
  }

  setEpoch(epoch: number): void {
    this.#epoch = epoch;
  }

  /** Marks the table disposed and closes the connection when the table owns it. Data stays in Redis. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#owns) void this.#conn.close();
  }

  // ---- extras ----------------------------------------------------------------------

  /** Resolves the bucket names and loads the row count. */
  async ready(): Promise<void> {
    await this.#ctx();
  }

  /** Exact row count: HLEN of every bucket (also refreshes the cache of `size()`). */
  async sizeAsync(): Promise<number> {
    return this.#read(async () => {
      await this.#loadSizes(await this.#ctx());
      return this.size();
    });
  }

  /** The Redis key names of the table's buckets (TFRA's layout), after `ready()`. */
  async bucketNames(): Promise<Buffer[]> {
    return (await this.keyspace.init()).map((b) => b.main);
  }

  // ---- plumbing ------------------------------------------------------------------

  #check(): void {
    if (this.#disposed) throw new DisposedError(`Table "${this.options.name}" was disposed`);
  }

  #read<T>(fn: () => Promise<T>): Promise<T> {
    this.#check();
    return this.#lock.read(fn);
  }

  #write<T>(fn: () => Promise<T>): Promise<T> {
    this.#check();
    this.#cursor = null;
    return this.#lock.write(fn);
  }

  async #ctx(): Promise<KvContext> {
    const buckets = await this.keyspace.init();
    const ctx = { buckets, chunk: this.layout.keysSendingSize, table: this.options.name };
    if (!this.#sizesLoaded) await this.#loadSizes(ctx);
    return ctx;
  }

  async #loadSizes(ctx: KvContext): Promise<void> {
    const b = new Batch();
    const read = addHlen(b, ctx, ctx.buckets.keys());
    const replies = await b.run(this.#conn, { op: 'size', table: this.options.name, write: false });
    for (const [bucket, n] of read(replies)) this.#sizes[bucket] = n;
    this.#sizesLoaded = true;
  }

  #run(batch: Batch, op: string, plan: KeyPlan | undefined, write: boolean): Promise<unknown[]> {
    const c: BatchContext = { op, table: this.options.name, write };
    if (plan) c.plan = plan;
    return batch.run(this.#conn, c);
  }

  /** Appends HLEN of the plan's buckets; call the result with the replies to refresh the cache. */
  #sizesOf(batch: Batch, ctx: KvContext, plan: KeyPlan): (replies: readonly unknown[]) => void {
    const read = addHlen(batch, ctx, new Set(plan.bucket));
    return (replies) => {
      for (const [b, n] of read(replies)) this.#sizes[b] = n;
    };
  }

  get #scores(): ScoreState {
    return { policy: this.options.scorePolicy, epoch: this.#epoch };
  }

  #tracks(write: boolean): boolean {
    return this.layout.trackScores && touchesOn(this.options.scorePolicy, write);
  }

  /** The shared clock's next value (INCR) when the policy needs it, else 0. */
  async #clock(op: string, write: boolean): Promise<bigint> {
    if (!this.#tracks(write) || !needsClock(this.options.scorePolicy)) return 0n;
    const key = this.keyspace.clock;
    const b = new Batch();
    b.add(0, { route: key, name: 'INCR', args: [key] });
    const [v] = await this.#run(b, op, undefined, true);
    return BigInt(Number(v));
  }

  #touch(batch: Batch, ctx: KvContext, plan: KeyPlan, ids: readonly number[], clock: bigint, write: boolean, given: BigUint64Array | null, explicit = false): void {
    if (!this.layout.trackScores) return;
    if (!explicit && !this.#tracks(write)) return;
    addTouch(batch, ctx, plan, ids, this.#scores, clock, given, explicit);
  }

  #initial(key: bigint | number, out: Float32Array, offset: number): void {
    const o = this.options;
    initialRow(o.initializer, o.seed, o.stream, key, o.dim, out, offset);
  }

  #plan(keys: Keys): KeyPlan {
    return new KeyPlan(keys, this.layout.storageSlice);
  }

  // ---- operations ------------------------------------------------------------------

  async #find(keys: Keys, op: string): Promise<FindResult> {
    const ctx = await this.#ctx();
    const plan = this.#plan(keys);
    const d = plan.distinct;
    const clock = await this.#clock(op, false);
    const batch = new Batch();
    const read = addHmget(batch, ctx, plan, mainHash, d.first);
    this.#touch(batch, ctx, plan, d.first.map((_, id) => id), clock, false, null);
    const sizes = this.#sizesOf(batch, ctx, plan);
    const replies = await this.#run(batch, op, plan, false);
    sizes(replies);
    const rows = read(replies);
    const dim = this.options.dim;
    const values = new Float32Array(plan.n * dim);
    const exists = new Uint8Array(plan.n);
    for (let i = 0; i < plan.n; i++) {
      const buf = rows[d.first[d.of[i]!]!];
      if (buf) {
        decodeRow(buf, values, i * dim, dim, () => describeField(ctx, plan, i));
        exists[i] = 1;
      } else this.#initial(plan.key(i), values, i * dim);
    }
    return { values, exists };
  }

  async #findOrInsert(keys: Keys, scores: BigUint64Array | null, op: string): Promise<FindResult> {
    const ctx = await this.#ctx();
    const plan = this.#plan(keys);
    const d = plan.distinct;
    const dim = this.options.dim;
    const clock = await this.#clock(op, true);
    const batch = new Batch();
    const read = addHmget(batch, ctx, plan, mainHash, d.first);
    this.#touch(batch, ctx, plan, d.first.map((_, id) => id), clock, true, scores);
    const rows = read(await this.#run(batch, op, plan, false));
    const values = new Float32Array(plan.n * dim);
    const exists = new Uint8Array(plan.n);
    const missing: number[] = [];
    d.first.forEach((i, id) => {
      const buf = rows[i];
      if (buf) decodeRow(buf, values, i * dim, dim, () => describeField(ctx, plan, i));
      else missing.push(id);
    });
    const present = new Uint8Array(d.first.length).fill(1);
    if (missing.length > 0) {
      // Insert what is still absent (HSETNX in a script) and read back what is stored:
      // a concurrent writer may have inserted the key in between.
      const init = new Float32Array(dim);
      const b2 = new Batch();
      const ins = addScript(b2, ctx, plan, 'embedstackInsertMissing', (b) => [b.main], missing.map((id) => d.first[id]!), [], (i) => {
        this.#initial(plan.key(i), init, 0);
        return [plan.field(i), Buffer.from(rowBytes(init, 0, dim))];
      });
      this.#touch(b2, ctx, plan, missing, clock, true, scores);
      const sizes = this.#sizesOf(b2, ctx, plan);
      const replies = await this.#run(b2, op, plan, true);
      sizes(replies);
      for (const [reply, idx] of ins(replies)) {
        const flat = reply as Buffer[];
        idx.forEach((i, j) => {
          if (String(flat[2 * j]) === '1') present[d.of[i]!] = 0;
          decodeRow(flat[2 * j + 1]!, values, i * dim, dim, () => describeField(ctx, plan, i));
        });
      }
    }
    for (let i = 0; i < plan.n; i++) {
      const id = d.of[i]!;
      exists[i] = present[id]!;
      if (i !== d.first[id]) values.copyWithin(i * dim, d.first[id]! * dim, (d.first[id]! + 1) * dim);
    }
    return { values, exists };
  }

  async #upsert(keys: Keys, values: Float32Array, scores: BigUint64Array | null): Promise<void> {
    const ctx = await this.#ctx();
    const plan = this.#plan(keys);
    const d = plan.distinct;
    const clock = await this.#clock('upsert', true);
    const batch = new Batch();
    const dim = this.options.dim;
    addHset(batch, ctx, plan, mainHash, d.last, (i) => rowBytes(values, i, dim));
    this.#touch(batch, ctx, plan, d.first.map((_, id) => id), clock, true, scores);
    const sizes = this.#sizesOf(batch, ctx, plan);
    sizes(await this.#run(batch, 'upsert', plan, true));
  }

  async #assign(keys: Keys, values: Float32Array, scores: BigUint64Array | null): Promise<void> {
    const ctx = await this.#ctx();
    const plan = this.#plan(keys);
    const d = plan.distinct;
    const clock = await this.#clock('assign', true);
    const batch = new Batch();
    const dim = this.options.dim;
    addScript(batch, ctx, plan, 'embedstackAssign', (b) => [b.main], d.last, [], (i) => [plan.field(i), rowBytes(values, i, dim)]);
    this.#touch(batch, ctx, plan, d.first.map((_, id) => id), clock, true, scores);
    await this.#run(batch, 'assign', plan, true);
  }

  async #accum(keys: Keys, deltas: Float32Array, exists: Uint8Array, scores: BigUint64Array | null): Promise<void> {
    const ctx = await this.#ctx();
    const plan = this.#plan(keys);
    const d = plan.distinct;
    const dim = this.options.dim;
    const clock = await this.#clock('accum', true);
    const batch = new Batch();
    addScript(batch, ctx, plan, 'embedstackAccum', (b) => [b.main], plan.all(), [String(dim)], (i) => [
      plan.field(i),
      rowBytes(deltas, i, dim),
      exists[i] ? '1' : '0',
    ]);
    this.#touch(batch, ctx, plan, d.first.map((_, id) => id), clock, true, scores);
    const sizes = this.#sizesOf(batch, ctx, plan);
    sizes(await this.#run(batch, 'accum', plan, true));
  }

  async #remove(keys: Keys, op: string): Promise<number> {
    const ctx = await this.#ctx();
    const plan = this.#plan(keys);
    const d = plan.distinct;
    const batch = new Batch();
    const removed = addHdel(batch, ctx, plan, mainHash, d.first);
    this.#widths.forEach((_, s) => addHdel(batch, ctx, plan, slotHash(s), d.first));
    if (this.layout.trackScores) addHdel(batch, ctx, plan, scoresHash, d.first);
    const sizes = this.#sizesOf(batch, ctx, plan);
    const replies = await this.#run(batch, op, plan, true);
    sizes(replies);
    return removed(replies);
  }

  async #clear(): Promise<void> {
    const ctx = await this.#ctx();
    const batch = new Batch();
    ctx.buckets.forEach((b, i) => batch.add(i, { route: b.main, name: 'UNLINK', args: [b.main, ...b.slots, b.scores] }));
    await this.#run(batch, 'clear', undefined, true);
    this.#sizes.fill(0);
  }

  async #import(keys: Keys, values: Float32Array, slots: Float32Array[] | null, scores: BigUint64Array | null): Promise<void> {
    const ctx = await this.#ctx();
    const plan = this.#plan(keys);
    const d = plan.distinct;
    const dim = this.options.dim;
    const explicit = scores !== null;
    const clock = explicit ? 0n : await this.#clock('importRows', true);
    const batch = new Batch();
    addHset(batch, ctx, plan, mainHash, d.last, (i) => rowBytes(values, i, dim));
    this.#widths.forEach((w, s) => {
      if (slots) addHset(batch, ctx, plan, slotHash(s), d.last, (i) => rowBytes(slots[s]!, i, w));
      else addHdel(batch, ctx, plan, slotHash(s), d.first);
    });
    this.#touch(batch, ctx, plan, d.first.map((_, id) => id), clock, true, scores, explicit);
    const sizes = this.#sizesOf(batch, ctx, plan);
    sizes(await this.#run(batch, 'importRows', plan, true));
  }

  async #lookupCombined(bag: Bag<Keys>, combiner: Combiner, maxNorm: number, insertMissing: boolean): Promise<Float32Array> {
    const r = insertMissing
      ? await this.#write(() => this.#findOrInsert(bag.keys, null, 'lookupCombined'))
      : await this.#read(() => this.#find(bag.keys, 'lookupCombined'));
    const dim = this.options.dim;
    return referenceKernels.combineBag((j) => r.values.subarray(j * dim, (j + 1) * dim), bag, dim, combiner, maxNorm);
  }

  /**
   * Read-modify-write: one round trip reads the distinct rows and their slots, the
   * optimizer runs here (core's reference kernel), a second round trip writes rows,
   * slots and scores back. Not atomic against other processes training the same rows.
   */
  async #applyGradients(keys: Keys, grads: Float32Array, opt: ResolvedOptimizer): Promise<void> {
    const ctx = await this.#ctx();
    const plan = this.#plan(keys);
    const d = plan.distinct;
    const dim = this.options.dim;
    const widths = this.#widths;
    const { sums } = referenceKernels.dedupeGradients(keys, grads, dim);
    const clock = await this.#clock('applyGradients', true);
    const rb = new Batch();
    const readRows = addHmget(rb, ctx, plan, mainHash, d.first);
    const readSlots = widths.map((_, s) => addHmget(rb, ctx, plan, slotHash(s), d.first));
    const replies = await this.#run(rb, 'applyGradients', plan, false);
    const rows = readRows(replies);
    const slotRows = readSlots.map((r) => r(replies));
    const u = d.first.length;
    const w = new Float32Array(u * dim);
    const slots = widths.map((sw) => new Float32Array(u * sw));
    d.first.forEach((i, id) => {
      const buf = rows[i];
      if (buf) decodeRow(buf, w, id * dim, dim, () => describeField(ctx, plan, i));
      else this.#initial(plan.key(i), w, id * dim);
      widths.forEach((sw, s) => {
        const sb = slotRows[s]![i];
        if (buf && sb) decodeRow(sb, slots[s]!, id * sw, sw, () => describeField(ctx, plan, i, slotHash(s)));
        else slots[s]!.fill(this.options.slots.initial[s]!, id * sw, (id + 1) * sw);
      });
      referenceKernels.applyOptimizerRow(
        opt,
        w.subarray(id * dim, (id + 1) * dim),
        widths.map((sw, s) => slots[s]!.subarray(id * sw, (id + 1) * sw)),
        sums.subarray(id * dim, (id + 1) * dim),
      );
    });
    const wb = new Batch();
    addHset(wb, ctx, plan, mainHash, d.first, (i) => rowBytes(w, d.of[i]!, dim));
    widths.forEach((sw, s) => addHset(wb, ctx, plan, slotHash(s), d.first, (i) => rowBytes(slots[s]!, d.of[i]!, sw)));
    this.#touch(wb, ctx, plan, d.first.map((_, id) => id), clock, true, null);
    const sizes = this.#sizesOf(wb, ctx, plan);
    sizes(await this.#run(wb, 'applyGradients', plan, true));
  }

  async #export(offset: number, limit: number): Promise<ExportBatch> {
    const ctx = await this.#ctx();
    const cursor = offset === this.#cursor?.offset ? this.#cursor : null;
    const run = (b: Batch, op: string) => this.#run(b, op, undefined, false);
    const { fields, values, next } = await exportRows(ctx, run, cursor, offset, limit, this.options.dim);
    this.#cursor = next;
    const keys = decodeKeys(fields, this.options.keyDtype);
    const plan = this.#plan(keys);
    const { slots, scores } = await fetchCompanions(ctx, (b) => this.#run(b, 'exportBatch', plan, false), plan, this.#widths, this.options.slots.initial, this.layout.trackScores);
    return { keys, values, slots, scores };
  }

  async #restrict(numReserved: number): Promise<number> {
    if (!this.layout.trackScores) {
      throw new UnsupportedError(`restrict needs scores, but table "${this.options.name}" was created with layout.trackScores = false`);
    }
    const ctx = await this.#ctx();
    const ranked = await rankAll(ctx, (b) => this.#run(b, 'restrict', undefined, false), this.options.keyDtype);
    if (ranked.length <= numReserved) return 0;
    const losers = ranked.slice(numReserved).map((r) => r.key);
    const keys = this.options.keyDtype === 'int64' ? BigInt64Array.from(losers as bigint[]) : Int32Array.from(losers as number[]);
    return this.#remove(keys, 'restrict');
  }
}

/** Field bytes back to keys. */
export function decodeKeys(fields: readonly Buffer[], dtype: 'int64' | 'int32'): Keys {
  if (dtype === 'int64') return BigInt64Array.from(fields, (f) => f.readBigInt64LE(0));
  return Int32Array.from(fields, (f) => f.readInt32LE(0));
}
