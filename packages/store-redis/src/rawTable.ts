import {
  type Bag,
  type Combiner,
  DisposedError,
  type FindResult,
  type Keys,
  type RawTable,
  type RawTableAsync,
  type ResolvedTableOptions,
  referenceKernels,
  slotFloatsPerRow,
  UnsupportedError,
} from '@embedstack/core';
import type { RedisConnection } from './connection.js';
import type { ExportCursor } from './exporter.js';
import type { TableKeyspace } from './keyspace.js';
import type { ResolvedRedisTableLayout } from './options.js';
import { find, findOrInsert } from './readOps.js';
import { RwLock } from './rwLock.js';
import { exportBatch, restrict } from './scanOps.js';
import { TableCore } from './tableCore.js';
import { applyGradients } from './trainOps.js';
import { accum, assign, clear, importRows, remove, upsert } from './writeOps.js';

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

  /** @throws UnsupportedError for a capped table without scores */
  constructor(init: RedisRawTableInit) {
    const o = init.options;
    if (o.maxCapacity !== Infinity && !init.layout.trackScores) {
      throw new UnsupportedError(
        `Expected layout.trackScores to be true for the capped table "${o.name}" (maxCapacity ${o.maxCapacity}) but received false: eviction ranks rows by score`,
        { argument: 'layout.trackScores' },
      );
    }
    this.#core = new TableCore(init.conn, o, init.layout);
    this.#owns = init.ownsConnection;
    const c = this.#core;
    this.async = {
      find: (k) => this.#read(() => find(c, k, 'find')),
      findOrInsert: (k, s) => this.#write(() => findOrInsert(c, k, s, 'findOrInsert')),
      upsert: (k, v, s) => this.#write(() => upsert(c, k, v, s)),
      assign: (k, v, s) => this.#write(() => assign(c, k, v, s)),
      accum: (k, d, e, s) => this.#write(() => accum(c, k, d, e, s)),
      remove: (k) => this.#write(() => remove(c, k)),
      clear: () => this.#write(() => clear(c)),
      exportBatch: (offset, limit) => this.#read(() => exportBatch(c, this.#export, offset, limit)),
      importRows: (k, v, sl, sc) => this.#write(() => importRows(c, k, v, sl, sc)),
      lookupCombined: (bag, cb, m, ins) => this.#lookupCombined(bag, cb, m, ins),
      applyGradients: (k, g, opt) => this.#write(() => applyGradients(c, k, g, opt)),
      restrict: (n) => this.#write(() => restrict(c, n)),
    };
  }

  get options(): ResolvedTableOptions {
    return this.#core.options;
  }

  get layout(): ResolvedRedisTableLayout {
    return this.#core.layout;
  }

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
    this.#core.epoch = epoch;
  }

  /** Marks the table disposed and closes the connection when the table owns it. The data stays in Redis. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#owns) void this.#core.conn.close();
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

  async #lookupCombined(bag: Bag<Keys>, combiner: Combiner, maxNorm: number, insertMissing: boolean): Promise<Float32Array> {
    const c = this.#core;
    const r: FindResult = insertMissing
      ? await this.#write(() => findOrInsert(c, bag.keys, null, 'lookupCombined'))
      : await this.#read(() => find(c, bag.keys, 'lookupCombined'));
    const dim = c.options.dim;
    return referenceKernels.combineBag((j) => r.values.subarray(j * dim, (j + 1) * dim), bag, dim, combiner, maxNorm);
  }
}

