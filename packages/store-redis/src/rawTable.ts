import {
  type Bag,
  type Combiner,
  type LookupCombiner,
  checkBoolean,
  checkedRawOps,
  checkInteger,
  checkOptions,
  DisposedError,
  InvalidTypeError,
  invalidParameter,
  type FindResult,
  type Keys,
  type RawTable,
  type RawTableAsync,
  type ResolvedOptimizer,
  type ResolvedShardPlan,
  type ResolvedTableOptions,
  referenceKernels,
  slotFloatsPerRow,
  UnsupportedError,
} from '@embedstack/core';
import { RedisConnection } from './connection.js';
import type { ExportCursor } from './exporter.js';
import type { TableKeyspace } from './keyspace.js';
import { type ResolvedRedisStoreOptions, type ResolvedRedisTableLayout, resolveTableLayout } from './options.js';
import { find, findOrInsert } from './readOps.js';
import { RwLock } from './rwLock.js';
import { exportBatch, restrict } from './scanOps.js';
import { TableCore } from './tableCore.js';
import { applyGradients } from './trainOps.js';
import { accum, assign, clear, importRows, remove, upsert } from './writeOps.js';

/** What a {@link RedisRawTable} is built from (RedisStore.createRawTable fills it). */
export interface RedisRawTableInit {
  /** The connection its commands go through. */
  conn: RedisConnection;
  /** Close the connection when the table is disposed. */
  ownsConnection: boolean;
  /** The table's resolved core options. */
  options: ResolvedTableOptions;
  /** Where the table lives in Redis. */
  layout: ResolvedRedisTableLayout;
}

/**
 * core's RawTable over Redis (async only: `sync` is null). Layout: `naming.ts`.
 * Memory: rows live in Redis; a call holds its keys, values and replies on the JS heap.
 *
 * Semantics are core's (rawTable.ts, scores.ts), with these Redis-specific points:
 * - Atomicity: every command and script is atomic on its node; a call spans several
 *   (one per bucket per keysSendingSize keys, on several nodes) and is not atomic as
 *   a whole. `accum` is atomic per key (a server-side script adds the float32
 *   vectors); `applyGradients`, `restrict` and capped-table admission are
 *   read-modify-write from this client (as TFRA does with Redis). Calls on one table
 *   object are ordered by a reader-writer lock (finds share it, writes are alone).
 * - Failures reject with STORE_UNAVAILABLE naming the keys and buckets whose state
 *   is unknown; a read never substitutes initial values for rows it could not read.
 * - `size()` is synchronous, so it returns a cache: per-bucket HLEN values refreshed
 *   by every call (for the buckets it touched) and loaded in full by the first call
 *   and by {@link sizeAsync}. Writes by other clients show up only then.
 * - Static tables store only rows that were written (an absent row holds its
 *   initial value). Capped tables: see admission.ts. Scores: see scoring.ts;
 *   `layout.trackScores = false` drops them (restrict and capped tables are then
 *   UNSUPPORTED).
 */
export class RedisRawTable implements RawTable {
  readonly sync = null;
  readonly async: RawTableAsync;
  readonly #core: TableCore;
  readonly #owns: boolean;
  readonly #lock = new RwLock();
  readonly #export: { cursor: ExportCursor | null } = { cursor: null };
  #disposed = false;

  /**
   * @throws InvalidTypeError / InvalidArgumentError for junk in `init` (every field checked: a caller of
   *   `table.raw`'s class may pass anything); UnsupportedError for a capped table without scores, or a
   *   storageDtype other than 'float32'
   */
  constructor(init: RedisRawTableInit) {
    checkOptions(init, ['conn', 'ownsConnection', 'options', 'layout'], 'init', { required: true, expected: 'a RedisRawTableInit ({ conn, ownsConnection, options, layout })' });
    if (!(init.conn instanceof RedisConnection)) throw invalidParameter('init.conn', 'a RedisConnection', init.conn, InvalidTypeError);
    const owns = checkBoolean(init.ownsConnection, 'init.ownsConnection', false);
    const o = init.options;
    // the options are checked by checkedRawOps below, before anything reads them
    checkedRawOps({}, o, true);
    // a resolved layout resolves to itself: every field checked
    const layout = resolveTableLayout(init.layout, o.name, { keysSendingSize: 1 } as ResolvedRedisStoreOptions);
    if (o.maxCapacity !== Infinity && !layout.trackScores) {
      throw new UnsupportedError(
        `Expected layout.trackScores to be true for the capped table "${o.name}" (maxCapacity ${o.maxCapacity}) but received false: eviction ranks rows by score`,
        { argument: 'layout.trackScores' },
      );
    }
    if ((o.storageDtype ?? 'float32') !== 'float32') {
      throw new UnsupportedError(
        `Expected storageDtype to be 'float32' for the Redis table "${o.name}" but received '${o.storageDtype}': ` +
          'store-redis keeps every value as a float32 (4 bytes)',
        { argument: 'storageDtype' },
      );
    }
    this.#core = new TableCore(init.conn, o, layout);
    this.#owns = owns;
    const c = this.#core;
    // every argument checked (core's rawArgs.ts) before a command is sent: junk is a coded rejection that changes nothing
    const ops: RawTableAsync = {
      find: (k, out, plan) => this.#read(() => this.#plannedRead(k, null, out, plan, (keys) => find(c, keys, 'find'))),
      findOrInsert: (k, s, out, plan) =>
        this.#write(() => this.#plannedRead(k, s, out, plan, (keys, scores) => findOrInsert(c, keys, scores, 'findOrInsert'))),
      upsert: (k, v, s) => this.#write(() => upsert(c, k, v, s)),
      assign: (k, v, s) => this.#write(() => assign(c, k, v, s)),
      accum: (k, d, e, s) => this.#write(() => accum(c, k, d, e, s)),
      remove: (k) => this.#write(() => remove(c, k)),
      clear: () => this.#write(() => clear(c)),
      exportBatch: (offset, limit) => this.#read(() => exportBatch(c, this.#export, offset, limit)),
      importRows: (k, v, sl, sc) => this.#write(() => importRows(c, k, v, sl, sc)),
      lookupCombined: (bag, cb, m, ins, out) => this.#lookupCombined(bag, cb, m, ins, out),
      lookupCombinedPartial: (bag, cb, m, ins, plan, out) => this.#lookupCombinedPartial(bag, cb, m, ins, plan, out),
      lookupCombinedBackward: (bag, g, cb, m, plan, out) => this.#lookupCombinedBackward(bag, g, cb, m, plan, out),
      applyCombinedGradients: (bag, g, cb, m, plan, opt) => this.#applyCombinedGradients(bag, g, cb, m, plan, opt),
      applyGradients: (k, g, opt, plan) => {
        const p = referenceKernels.plannedGradients(k, g, c.options.dim, plan);
        return this.#write(() => applyGradients(c, p.keys, p.grads, opt));
      },
      restrict: (n) => this.#write(() => restrict(c, n)),
    };
    this.async = checkedRawOps(ops, o, true);
  }

  /** The table's resolved core options. */
  get options(): ResolvedTableOptions {
    return this.#core.options;
  }

  /** Where the table lives in Redis. */
  get layout(): ResolvedRedisTableLayout {
    return this.#core.layout;
  }

  /** @internal The table's Redis key names and bucket math (for tfra's Redis creator). */
  get keyspace(): TableKeyspace {
    return this.#core.keyspace;
  }

  /** Cached row count (see the class comment); exact after {@link sizeAsync}. Static: vocabularySize. */
  size(): number {
    return this.#core.size();
  }

  /** Static: vocabularySize. Dynamic: maxCapacity when capped, else max(initCapacity, size) (Redis grows as needed). */
  capacity(): number {
    const o = this.#core.options;
    if (o.kind === 'static') return o.vocabularySize;
    return Math.max(Math.min(o.initCapacity, o.maxCapacity), Math.min(this.size(), o.maxCapacity));
  }

  /** Estimate of the bytes Redis holds: per row key, values, slots, score and ~64 bytes of hash overhead. */
  memoryUsage(): number {
    const o = this.#core.options;
    const floats = o.dim + slotFloatsPerRow(o.slots, o.dim);
    const width = o.keyDtype === 'int64' ? 8 : 4;
    return this.size() * (floats * 4 + width * (2 + this.#core.widths.length) + 64);
  }

  /** Epoch of the epochLru / epochLfu policies, for this table object. */
  setEpoch(epoch: number): void {
    this.#core.epoch = checkInteger(epoch, 'epoch', { min: 0, max: 0xffffffff });
  }

  /** Marks the table disposed and closes the connection when the table owns it. The data stays in Redis. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#owns) void this.#core.conn.close();
  }

  /**
   * Deletes the table from Redis: every key, the score clock included (`clear()` keeps
   * the clock, so that later scores stay above those exported before the clear). For a
   * table that goes away (a deleted model); do not drop a table other clients still
   * write. The object stays usable: its next scored write starts a new clock at 1.
   * @throws DisposedError, StoreUnavailableError
   */
  async drop(): Promise<void> {
    const c = this.#core;
    await this.#write(() => clear(c, true));
  }

  /** Resolves the bucket names and loads the row count. @throws StoreUnavailableError */
  async ready(): Promise<void> {
    this.#check();
    await this.#core.ctx();
  }

  /** Exact row count: HLEN of every bucket (also refreshes the cache of `size()`). */
  async sizeAsync(): Promise<number> {
    return this.#read(async () => {
      const core = this.#core;
      if (!core.isStatic) await core.loadSizes(await core.ctx());
      return core.size();
    });
  }

  /** The Redis key names of the table's buckets (TFRA's layout). */
  async bucketNames(): Promise<Buffer[]> {
    return (await this.#core.keyspace.init()).map((b) => b.main);
  }

  #check(): void {
    if (this.#disposed) throw new DisposedError(`Table "${this.#core.name}" was disposed`);
  }

  #read<T>(fn: () => Promise<T>): Promise<T> {
    this.#check();
    return this.#lock.read(fn);
  }

  #write<T>(fn: () => Promise<T>): Promise<T> {
    this.#check();
    this.#export.cursor = null;
    return this.#lock.write(fn);
  }

  /** The rows of `keys` as one find (or findOrInsert) call of the bag op `op`. */
  #rows(keys: Keys, insert: boolean, op: string): Promise<FindResult> {
    const c = this.#core;
    return insert ? this.#write(() => findOrInsert(c, keys, null, op)) : this.#read(() => find(c, keys, op));
  }

  /** find / findOrInsert with `out` and a plan: the plain read of the owned local keys, placed at their positions. */
  async #plannedRead(
    keys: Keys,
    scores: BigUint64Array | null,
    out: FindResult | null,
    plan: ResolvedShardPlan | null,
    read: (keys: Keys, scores: BigUint64Array | null) => Promise<FindResult>,
  ): Promise<FindResult> {
    const q = referenceKernels.planRead(keys, scores, plan);
    return referenceKernels.placeFound(await read(q.keys, q.scores), out, q.positions, this.#core.options.dim);
  }

  async #lookupCombined(bag: Bag<Keys>, combiner: LookupCombiner, maxNorm: number, insertMissing: boolean, out: Float32Array | null): Promise<Float32Array> {
    const r = await this.#rows(bag.keys, insertMissing, 'lookupCombined');
    const dim = this.#core.options.dim;
    const pooled = referenceKernels.combineBag((j) => r.values.subarray(j * dim, (j + 1) * dim), bag, dim, combiner, maxNorm);
    if (!out) return pooled;
    out.set(pooled);
    return out;
  }

  async #lookupCombinedPartial(
    bag: Bag<Keys>,
    combiner: Combiner,
    maxNorm: number,
    insertMissing: boolean,
    plan: ResolvedShardPlan,
    out: Float64Array,
  ): Promise<Float64Array> {
    const owned = referenceKernels.ownedEntries(bag, plan);
    const rows = (await this.#rows(owned.local, insertMissing, 'lookupCombinedPartial')).values;
    return referenceKernels.poolPartial(bag, owned, rows, this.#core.options.dim, combiner, maxNorm, out);
  }

  async #lookupCombinedBackward(
    bag: Bag<Keys>,
    grads: Float32Array,
    combiner: Combiner,
    maxNorm: number,
    plan: ResolvedShardPlan | null,
    out: Float32Array,
  ): Promise<Float32Array> {
    const owned = referenceKernels.ownedEntries(bag, plan);
    const rows = maxNorm > 0 ? (await this.#rows(owned.local, false, 'lookupCombinedBackward')).values : null;
    return referenceKernels.entryGradients(bag, owned, grads, this.#core.options.dim, combiner, maxNorm, rows, out, false);
  }

  async #applyCombinedGradients(
    bag: Bag<Keys>,
    grads: Float32Array,
    combiner: Combiner,
    maxNorm: number,
    plan: ResolvedShardPlan | null,
    opt: ResolvedOptimizer,
  ): Promise<void> {
    const c = this.#core;
    const dim = c.options.dim;
    const owned = referenceKernels.ownedEntries(bag, plan);
    const rows = maxNorm > 0 ? (await this.#rows(owned.local, false, 'applyCombinedGradients')).values : null;
    const g = referenceKernels.entryGradients(bag, owned, grads, dim, combiner, maxNorm, rows, new Float32Array(owned.count * dim), true);
    await this.#write(() => applyGradients(c, owned.local, g, opt));
  }
}

