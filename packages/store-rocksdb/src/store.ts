import { constants as fsConstants } from 'node:fs';
import { access, mkdir, readdir, readFile, realpath, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import RocksDB from 'rocksdb-native';
import {
  checkInteger,
  checkKnownKeys,
  checkName,
  CheckpointCorruptError,
  DisposedError,
  EmbeddingError,
  FailedPreconditionError,
  invalidParameter,
  IOError,
  normalizeKeys,
  NotFoundError,
  ShapeMismatchError,
  InvalidTypeError,
  type KeyInput,
} from '@embedstack/core';
import { resolveRocksStoreOptions, type ResolvedRocksStoreOptions, type RocksStoreOptions } from './options.js';

/** Result of {@link RocksStore.multiGet}: host memory, `values` `[n, dim]` row-major (zeros where missing). */
export interface RocksGetResult {
  /** [n * dim] floats, zeros where the key is missing. */
  values: Float32Array;
  /** 1 where the key was found. */
  found: Uint8Array;
  /** Number of keys found. */
  hits: number;
}

/** One batch for {@link RocksStore.bulkLoad}: `values` `[keys.length, dim]`. */
export interface RocksRows {
  /** The keys (any key input; stored as int64). */
  keys: KeyInput;
  /** [keys.length * dim] floats, row-major. */
  values: Float32Array;
}

const KEY_BYTES = 8;
const OPEN_TOKEN = Symbol('RocksStore.open');

/**
 * The folders (real paths) this process's stores hold open for writing: a second writable open of
 * one is refused, whatever path names it. On globalThis, as core's registries: every copy
 * of this module in the process (its ESM and CommonJS builds) sees the same folders.
 */
const WRITERS_KEY = Symbol.for('@embedstack/store-rocksdb.writers.v1');
const writers: Set<string> = ((globalThis as Record<symbol, Set<string> | undefined>)[WRITERS_KEY] ??= new Set());

/** The folder's real path: links resolved in its nearest existing ancestor, the rest as given. */
async function folderKey(path: string): Promise<string> {
  let head = resolve(path);
  const rest: string[] = [];
  for (;;) {
    try {
      return join(await realpath(head), ...rest);
    } catch {
      const up = dirname(head);
      if (up === head) return resolve(path);
      rest.unshift(basename(head));
      head = up;
    }
  }
}

/**
 * A batched KV store of embedding rows on RocksDB (`rocksdb-native`, real RocksDB):
 * one column family per table, keys stored as 8 little-endian bytes (int64; uint32
 * keys are widened), values as `dim` little-endian float32. Reads and writes are
 * split into batches of `maxBatchSize` keys and run on RocksDB's own threads, off
 * the event loop. Safe for concurrent calls; one process may open a path once.
 */
export class RocksStore {
  /** The resolved options the store was opened with. */
  readonly options: Readonly<ResolvedRocksStoreOptions>;
  #db: RocksDB;
  #tables = new Map<string, RocksDB>();
  #closed = false;
  /** The reopen of a running addTables: calls wait for it (the old handles are closed meanwhile). */
  #reopening: Promise<void> | null = null;
  /** Iterators of open scans: close() ends them (RocksDB's close waits for every open iterator). */
  readonly #scans = new Set<{ destroy(): void }>();

  /** Use {@link RocksStore.open}. @throws FailedPreconditionError when called directly */
  constructor(token: unknown, db: unknown, options: unknown) {
    if (token !== OPEN_TOKEN) throw new FailedPreconditionError('RocksStore is created by RocksStore.open(options), not by new');
    this.#db = db as RocksDB;
    this.options = options as ResolvedRocksStoreOptions;
    for (const t of this.options.tables) this.#tables.set(t, this.#db.columnFamily(t));
  }

  /**
   * Opens (creates unless `readOnly`) the database at `options.path` with a column
   * family per table in `options.tables`.
   * The options are checked at run time too (a JS caller may pass anything).
   * @throws InvalidArgumentError / InvalidTypeError for bad options, IOError when the path cannot be opened
   */
  static async open(options: RocksStoreOptions): Promise<RocksStore> {
    const o = resolveRocksStoreOptions(options);
    // RocksDB opens a database for writing only with every column family it holds: the tables
    // a previous process created are opened too (and listed by tables())
    if (!o.readOnly) o.tables = [...new Set([...o.tables, ...(await existingTables(o.path))])];
    // One writer per folder in this process too, whatever path names it: RocksDB's own lock refuses
    // a second open by the same name only (through a link, a second writer of one folder opened).
    const key = o.readOnly ? null : await folderKey(o.path);
    if (key !== null) {
      if (writers.has(key)) {
        throw new IOError(
          `Could not open RocksDB at ${JSON.stringify(o.path)} for writing: this process has the folder open for writing already (another RocksStore: an HPS server's persistent_db, say), and RocksDB takes one writer per folder: close that store first, open this one read-only, or use another folder`,
          { argument: 'options.path' },
        );
      }
      writers.add(key); // taken before the open's next await: a concurrent open of the folder sees it
    }
    let db: RocksDB;
    try {
      db = await openDb(o, o.tables);
    } catch (e) {
      if (key !== null) writers.delete(key);
      throw e;
    }
    const store = new RocksStore(OPEN_TOKEN, db, o);
    store.#writerKey = key;
    return store;
  }

  /** The folder this store counts in `writers` while open (null: read-only, or released). */
  #writerKey: string | null = null;

  #releaseWriter(): void {
    if (this.#writerKey !== null) writers.delete(this.#writerKey);
    this.#writerKey = null;
  }

  /** The tables (column families) open now. */
  tables(): string[] {
    return [...this.#tables.keys()];
  }

  /** True once the store is closed. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Adds tables (column families). RocksDB opens column families with the database,
   * so this closes and reopens it: calls made meanwhile wait for the reopen, calls in
   * flight finish first. When the reopen fails the store goes on with its old tables
   * (reopened), or is closed if even that fails.
   * @throws DisposedError after close, FailedPreconditionError while a scan is open (finish it or
   * `return()` it first), IOError when the reopen fails
   */
  async addTables(names: readonly string[]): Promise<void> {
    this.#checkOpen();
    if (!Array.isArray(names)) throw invalidParameter('names', 'an array of table names', names, InvalidTypeError);
    const checked = names.map((n, i) => checkName(n, `names[${i}]`));
    // Calls made from now on wait for this (set before any await, so that none slips in between).
    const previous = this.#reopening;
    const run = (async () => {
      if (previous) await previous.catch(() => {});
      this.#checkOpen();
      const fresh = checked.filter((n) => !this.#tables.has(n));
      if (fresh.length === 0) return;
      if (this.#scans.size > 0) {
        throw new FailedPreconditionError(`RocksStore at '${this.options.path}' has ${this.#scans.size} open scan(s): addTables reopens the database, so finish them (or call return() on them) first`);
      }
      const old = [...this.#tables.keys()];
      await this.#reopen(old, [...old, ...new Set(fresh)]);
    })();
    this.#reopening = run;
    try {
      await run;
    } finally {
      if (this.#reopening === run) this.#reopening = null;
    }
  }

  async #reopen(old: string[], all: string[]): Promise<void> {
    await this.#db.close();
    let db: RocksDB;
    try {
      db = await openDb(this.options, all);
    } catch (e) {
      try {
        this.#use(await openDb(this.options, old), old);
      } catch (again) {
        this.#closed = true;
        this.#releaseWriter();
        throw new IOError(`RocksStore at '${this.options.path}' could not add tables (${(e as Error).message}) nor reopen its own (${(again as Error).message}): the store is closed`, { cause: e });
      }
      throw e;
    }
    this.#use(db, all);
  }

  #use(db: RocksDB, tables: string[]): void {
    this.#db = db;
    this.#tables.clear();
    for (const t of tables) this.#tables.set(t, db.columnFamily(t));
    (this.options as ResolvedRocksStoreOptions).tables = tables;
  }

  /**
   * Reads `keys` of `table` in batches of `maxBatchSize`.
   * @returns rows `[n, dim]` (zeros for missing keys) and a found mask
   * @throws NotFoundError (unknown table), CheckpointCorruptError (a stored row is not `dim` floats), DisposedError
   */
  async multiGet(table: string, keys: KeyInput, dim: number): Promise<RocksGetResult> {
    if (this.#reopening) await this.#settled();
    const cf = this.#table(table);
    checkInteger(dim, 'dim', { min: 1, max: 1 << 20 });
    const k = normalizeKeys(keys, 'int64');
    const n = k.length;
    const values = new Float32Array(n * dim);
    const found = new Uint8Array(n);
    const bytes = new Uint8Array(k.buffer, k.byteOffset, n * KEY_BYTES);
    const rowBytes = dim * 4;
    const out = new Uint8Array(values.buffer);
    let hits = 0;
    const step = this.options.maxBatchSize;
    const batches: Promise<void>[] = [];
    for (let start = 0; start < n; start += step) {
      const end = Math.min(n, start + step);
      const gets: Promise<Buffer | null>[] = [];
      let batch: ReturnType<RocksDB['read']>;
      try {
        batch = cf.read({ capacity: end - start });
        for (let i = start; i < end; i++) gets.push(batch.get(bytes.subarray(i * KEY_BYTES, (i + 1) * KEY_BYTES)));
      } catch (e) {
        for (const g of gets) g.catch(() => {});
        batches.push(Promise.reject(e));
        break;
      }
      // flush() and the failed gets reject alike (a checksum mismatch in a table file): wait for all
      // of them together, so that no rejection is left unhandled (that would end the process).
      batches.push(
        Promise.all([batch.flush(), Promise.all(gets)]).finally(() => batch.destroy()).then(([, got]) => {
          for (let j = 0; j < got.length; j++) {
            const v = got[j];
            if (!v) continue;
            if (v.length !== rowBytes) {
              throw new CheckpointCorruptError(`RocksDB table '${table}' holds a row of ${v.length} bytes for key ${k[start + j]}, expected dim ${dim} * 4 = ${rowBytes}`);
            }
            out.set(v, (start + j) * rowBytes);
            found[start + j] = 1;
            hits++;
          }
        }),
      );
    }
    await Promise.all(batches).catch((e: unknown) => {
      throw asStoreError(e, `reading table '${table}'`);
    });
    return { values, found, hits };
  }

  /**
   * Inserts or overwrites rows: `values` `[keys.length, dim]` with dim = values.length / keys.length.
   * @throws ShapeMismatchError, NotFoundError, FailedPreconditionError (read-only), DisposedError, IOError
   */
  async put(table: string, keys: KeyInput, values: Float32Array): Promise<void> {
    if (this.#reopening) await this.#settled();
    const cf = this.#writable(table);
    const k = normalizeKeys(keys, 'int64');
    if (!(values instanceof Float32Array)) throw invalidParameter('values', 'a Float32Array', values, InvalidTypeError);
    const n = k.length;
    if (n === 0) {
      if (values.length !== 0) throw new ShapeMismatchError(`Expected values to be empty for 0 keys but received ${values.length} floats`, { argument: 'values' });
      return;
    }
    if (values.length % n !== 0 || values.length === 0) {
      throw new ShapeMismatchError(`Expected values to hold keys.length (${n}) * dim floats but received ${values.length}`, { argument: 'values' });
    }
    const rowBytes = (values.length / n) * 4;
    const kb = new Uint8Array(k.buffer, k.byteOffset, n * KEY_BYTES);
    const vb = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    const step = this.options.maxBatchSize;
    const flushes: Promise<void>[] = [];
    for (let start = 0; start < n; start += step) {
      const end = Math.min(n, start + step);
      try {
        const batch = cf.write({ capacity: end - start });
        for (let i = start; i < end; i++) {
          batch.tryPut(kb.subarray(i * KEY_BYTES, (i + 1) * KEY_BYTES), vb.subarray(i * rowBytes, (i + 1) * rowBytes));
        }
        flushes.push(batch.flush().finally(() => batch.destroy()));
      } catch (e) {
        flushes.push(Promise.reject(e));
        break;
      }
    }
    await Promise.all(flushes).catch((e: unknown) => {
      throw asStoreError(e, `writing table '${table}'`);
    });
  }

  /**
   * Deletes keys (missing keys are ignored).
   * @throws NotFoundError, FailedPreconditionError (read-only), DisposedError, IOError
   */
  async remove(table: string, keys: KeyInput): Promise<void> {
    if (this.#reopening) await this.#settled();
    const cf = this.#writable(table);
    const k = normalizeKeys(keys, 'int64');
    const kb = new Uint8Array(k.buffer, k.byteOffset, k.length * KEY_BYTES);
    const step = this.options.maxBatchSize;
    for (let start = 0; start < k.length; start += step) {
      const end = Math.min(k.length, start + step);
      await writeBatch(cf, end - start, (batch) => {
        for (let i = start; i < end; i++) batch.tryDelete(kb.subarray(i * KEY_BYTES, (i + 1) * KEY_BYTES));
      }).catch((e: unknown) => {
        throw asStoreError(e, `deleting from table '${table}'`);
      });
    }
  }

  /**
   * Deletes every row of `table` (one range deletion: RocksDB drops the data at its next
   * compaction). The table itself stays.
   * @throws NotFoundError, FailedPreconditionError (read-only), DisposedError, IOError
   */
  async clear(table: string): Promise<void> {
    if (this.#reopening) await this.#settled();
    const cf = this.#writable(table);
    // keys are 8 bytes: [] sorts before every key and 9 x 0xff after every key
    await writeBatch(cf, 1, (batch) => batch.tryDeleteRange(new Uint8Array(0), new Uint8Array(KEY_BYTES + 1).fill(0xff))).catch((e: unknown) => {
      throw asStoreError(e, `clearing table '${table}'`);
    });
  }

  /**
   * Compacts `table` over its whole key range down to the last level (RocksDB's CompactRange,
   * bottommost level forced; the table's memtable is flushed first): the disk space of rows that
   * `remove` or `clear` deleted is given back once it resolves, as their table files are rewritten
   * or deleted. The write-ahead log is shared by all tables and is freed when every table has been
   * flushed (at the latest at `close`). The table itself stays: rocksdb-native cannot drop a
   * column family, so an emptied table is an empty column family.
   * @throws NotFoundError, FailedPreconditionError (read-only), DisposedError, IOError
   */
  async compact(table: string): Promise<void> {
    if (this.#reopening) await this.#settled();
    const cf = this.#writable(table);
    await cf.compactRange(new Uint8Array(0), new Uint8Array(KEY_BYTES + 1).fill(0xff), { bottommostLevelCompaction: RocksDB.constants.bottommostLevelCompaction.FORCE }).catch((e: unknown) => {
      throw asStoreError(e, `compacting table '${table}'`);
    });
  }

  /**
   * Streams batches of rows into `table` (a model file read in chunks): memory stays
   * bounded by one batch.
   * @returns the number of rows written
   */
  async bulkLoad(table: string, batches: AsyncIterable<RocksRows> | Iterable<RocksRows>): Promise<number> {
    this.#writable(table);
    if (batches === null || typeof batches !== 'object' || !(Symbol.asyncIterator in batches || Symbol.iterator in batches)) {
      throw invalidParameter('batches', 'an iterable of { keys, values }', batches, InvalidTypeError);
    }
    let rows = 0;
    for await (const b of batches) {
      if (b === null || typeof b !== 'object') throw invalidParameter('batches[i]', 'an object { keys, values }', b, InvalidTypeError);
      checkKnownKeys(b, ['keys', 'values'], 'batches[i]', 'fields'); // { keys, values, scores }: scores would be dropped, silently
      await this.put(table, b.keys, b.values);
      rows += normalizeKeys(b.keys, 'int64').length;
    }
    return rows;
  }

  /**
   * Iterates over every row of `table` in key-byte order, `batchSize` rows at a time.
   * @throws CheckpointCorruptError when a row is not `dim` floats
   */
  async *scan(table: string, dim: number, batchSize = 65536): AsyncGenerator<{
    /** [n] keys of the batch. */
    keys: BigInt64Array;
    /** [n * dim] floats, row-major. */
    values: Float32Array;
  }> {
    if (this.#reopening) await this.#settled();
    const cf = this.#table(table);
    checkInteger(dim, 'dim', { min: 1, max: 1 << 20 });
    checkInteger(batchSize, 'batchSize', { min: 1, max: 1 << 24 });
    let keys = new BigInt64Array(batchSize);
    let values = new Float32Array(batchSize * dim);
    let n = 0;
    const kb = new Uint8Array(keys.buffer);
    const vb = new Uint8Array(values.buffer);
    const iterator = cf.iterator();
    this.#scans.add(iterator);
    try {
      try {
        for await (const { key, value } of iterator) {
          if (key.length !== KEY_BYTES || value.length !== dim * 4) {
            throw new CheckpointCorruptError(`RocksDB table '${table}' holds an entry of ${key.length}/${value.length} key/value bytes, expected 8/${dim * 4}`);
          }
          kb.set(key, n * KEY_BYTES);
          vb.set(value, n * dim * 4);
          if (++n === batchSize) {
            yield { keys: keys.slice(), values: values.slice() };
            n = 0;
            this.#checkOpen(); // close() ended the scan while the caller held this batch
          }
        }
      } catch (e) {
        this.#checkOpen();
        throw asStoreError(e, `scanning table '${table}'`);
      }
      this.#checkOpen(); // an iterator that close() destroyed ends early: never report a short table as whole
      if (n > 0) yield { keys: keys.slice(0, n), values: values.slice(0, n * dim) };
    } finally {
      this.#scans.delete(iterator);
      iterator.destroy();
      keys = new BigInt64Array(0);
      values = new Float32Array(0);
    }
  }

  /**
   * Closes the database; later calls are DISPOSED. Calls in flight finish first; open scans
   * end (their next step rejects with DISPOSED). A writable store first flushes every
   * table's memtable, so the rows live in checksummed table files rather than only in the
   * write-ahead log (RocksDB's recovery silently drops the log after a damaged record).
   * Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#settled();
      for (const it of this.#scans) it.destroy();
      if (!this.options.readOnly) {
        // best effort: a flush that fails (e.g. a full disk) leaves the rows in the log, as before
        await Promise.all([...this.#tables.values()].map((cf) => cf.flush().catch(() => {})));
      }
      await this.#db.close();
    } finally {
      this.#releaseWriter(); // once the folder's lock is gone
    }
  }

  #checkOpen(): void {
    if (this.#closed) throw new DisposedError(`RocksStore at '${this.options.path}' is closed`);
  }

  #table(table: unknown): RocksDB {
    this.#checkOpen();
    const name = checkName(table, 'table');
    const cf = this.#tables.get(name);
    if (!cf) throw new NotFoundError(`Expected table to be one of the store's tables (${this.tables().join(', ') || 'none'}) but received ${JSON.stringify(name)}`, { argument: 'table' });
    return cf;
  }

  #writable(table: unknown): RocksDB {
    const cf = this.#table(table);
    if (this.options.readOnly) throw new FailedPreconditionError(`RocksStore at '${this.options.path}' is open read-only: cannot write table ${JSON.stringify(table)}`);
    return cf;
  }

  /** Resolves once no addTables is reopening the database (its old handles are closed meanwhile). */
  async #settled(): Promise<void> {
    while (this.#reopening) await this.#reopening.catch(() => {});
  }
}

/**
 * Column families (but `default`) of the RocksDB database at `path`, read from its newest
 * OPTIONS file (RocksDB writes one per open, with a `[CFOptions "<name>"]` section per
 * column family). [] when there is no database there yet.
 */
async function existingTables(path: string): Promise<string[]> {
  let newest = '';
  try {
    for (const f of await readdir(path)) if (/^OPTIONS-\d+$/.test(f) && (f.length > newest.length || (f.length === newest.length && f > newest))) newest = f;
    if (!newest) return [];
    const text = await readFile(join(path, newest), 'utf8');
    return [...text.matchAll(/^\[CFOptions "(.*)"\]\s*$/gm)].map((m) => m[1]!).filter((n) => n !== 'default');
  } catch {
    return []; // no folder (yet): openDb reports what is wrong with the path
  }
}

/**
 * Opens RocksDB after checking the path ourselves: rocksdb-native's `ready()` never
 * settles on some open failures, so a bad path would hang instead of throwing.
 */
async function openDb(o: ResolvedRocksStoreOptions, tables: readonly string[]): Promise<RocksDB> {
  try {
    if (o.readOnly) {
      await access(join(o.path, 'CURRENT'), fsConstants.R_OK);
    } else {
      await mkdir(o.path, { recursive: true });
      const s = await stat(o.path);
      if (!s.isDirectory()) throw new Error('not a directory');
      await access(o.path, fsConstants.W_OK | fsConstants.R_OK);
    }
  } catch (e) {
    const why = o.readOnly ? 'an existing RocksDB folder (read-only open)' : 'a writable folder';
    throw new IOError(`Expected options.path to be ${why} but received ${JSON.stringify(o.path)}: ${(e as Error).message}`, { argument: 'options.path', cause: e });
  }
  const db = new RocksDB(o.path, {
    columnFamilies: [...tables],
    readOnly: o.readOnly,
    createIfMissing: !o.readOnly,
    createMissingColumnFamilies: !o.readOnly,
    maxBackgroundJobs: o.numThreads,
  });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer after ${o.openTimeoutMs} ms (is the folder locked by another process?)`)), o.openTimeoutMs);
  });
  try {
    await Promise.race([db.ready(), timeout]);
  } catch (e) {
    throw new IOError(`Could not open RocksDB at ${JSON.stringify(o.path)}: ${(e as Error).message}`, { argument: 'options.path', cause: e });
  } finally {
    clearTimeout(timer);
  }
  return db;
}

/** Fills one write batch and commits it (atomically); the batch is destroyed either way. */
async function writeBatch(cf: RocksDB, capacity: number, fill: (batch: ReturnType<RocksDB['write']>) => void): Promise<void> {
  const batch = cf.write({ capacity });
  try {
    fill(batch);
    await batch.flush();
  } finally {
    batch.destroy();
  }
}

/** The messages of an error and its causes ("Batch was not applied" alone hides a full disk). */
function describeError(e: unknown): string {
  const parts: string[] = [];
  let disk = false;
  const next = (x: unknown): unknown => (x as { cause?: unknown }).cause ?? (x instanceof AggregateError ? x.errors.find((y) => y) : undefined);
  for (let x: unknown = e, depth = 0; x !== undefined && x !== null && depth < 5; x = next(x), depth++) {
    const m = x instanceof Error ? x.message : String(x);
    if (m && !parts.includes(m)) parts.push(m);
    if ((x as { code?: unknown }).code === 'ENOSPC') disk = true;
  }
  return parts.join(': ') + (disk ? ' (ENOSPC: the disk is full)' : '');
}

function asStoreError(e: unknown, what: string): Error {
  if (e instanceof EmbeddingError) return e;
  return new IOError(`RocksDB failed ${what}: ${describeError(e)}`, { cause: e });
}
