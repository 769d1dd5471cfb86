import { stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import {
  type CacheQueryResult,
  CheckpointCorruptError,
  DisposedError,
  EmbeddingError,
  FailedPreconditionError,
  inspectHugeCTRModel,
  liveVersionDir,
  readHugeCTRModel,
  type EmbeddingBackend,
} from '@embedstack/core';
import type { RocksStore } from '@embedstack/store-rocksdb';
import { compileUpdateFilters, updateFilterPasses, type ModelConfig, type PsConfig } from './config.js';
import { L1Cache } from './embeddingCache.js';
import { rowShare } from './rowShare.js';
import { copyRow, countUnique, dedupe, gatherKeys, ownTurn } from './keyOps.js';
import { TableStats } from './stats.js';
import type { FetchResult, VolatileDb } from './volatileDb.js';

/** Progress of a table being streamed from its model files (HPS.create's `onProgress`). */
export interface LoadProgress {
  /** Model name. */
  model: string;
  /** Table name. */
  table: string;
  /** Table index in the model. */
  tableId: number;
  /** Rows streamed so far. */
  rowsLoaded: number;
  /** Rows of the table. */
  rows: number;
}

/** A version another server wrote into the shared L2 (its published table folders and row counts). */
export interface AttachSource {
  files: readonly string[];
  rows: readonly number[];
}

/** What a model's tables share: the backend (L1), L2 and L3. */
export interface HpsContext {
  config: PsConfig;
  backend: EmbeddingBackend;
  volatileDb: VolatileDb | null;
  persistentDb: RocksStore | null;
  /** Each (model, table id)'s counters for the server's life: `stats()` is cumulative since creation, across reloads. */
  tableStats: Map<string, TableStats>;
}

/** The counters of table `id` of `model` (see HpsContext.tableStats). */
function statsOf(ctx: HpsContext, model: string, id: number): TableStats {
  const key = `${model}\u0000${id}`;
  let s = ctx.tableStats.get(key);
  if (!s) ctx.tableStats.set(key, (s = new TableStats()));
  return s;
}

/** One table of a loaded model. */
export interface TableState {
  id: number;
  name: string;
  dim: number;
  defaultValue: number;
  rows: number;
  /** Most keys one lookup may carry: max_batch_size * maxnum_catfeature_query_per_table_per_sample. */
  maxKeys: number;
  l2Name: string;
  l3Name: string;
  /** One L1 per deployed device (independent replicas); empty with gpucache false. */
  caches: Map<number, L1Cache>;
  stats: TableStats;
}

/** Floats per lookup chunk (1 MiB of rows). */
const CHUNK_FLOATS = 1 << 18;

/** Keys per lookup chunk of a table of `dim`. */
const chunkKeys = (dim: number): number => Math.max(1024, Math.floor(CHUNK_FLOATS / dim));

/** Positions i where flags[i] === want (default 0: the misses). */
function missing(flags: Uint8Array, want = 0): Int32Array {
  let n = 0;
  for (let i = 0; i < flags.length; i++) if (flags[i] === want) n++;
  const out = new Int32Array(n);
  if (n === 0) return out;
  for (let i = 0, j = 0; i < flags.length; i++) if (flags[i] === want) out[j++] = i;
  return out;
}

/**
 * The table folders to read for a model's `sparse_files`: a folder whose parent is a
 * versioned directory written by `exportModel` (its `CURRENT` names the live `ckpt-N`)
 * is read from that version, `CURRENT` being read once per parent, so every table of a
 * model comes from one export. Other folders (HugeCTR's own layout) are read as given.
 * @throws CheckpointCorruptError when a parent's CURRENT names a missing version (and the folder does not exist as given)
 */
export async function liveSparseFiles(files: readonly string[]): Promise<string[]> {
  const lives = new Map<string, Promise<string | null>>();
  const liveOf = async (parent: string, file: string): Promise<string | null> => {
    try {
      return await liveVersionDir(parent);
    } catch (e) {
      // a CURRENT that is not exportModel's (another tool's file): the folder as given, when it exists
      if (e instanceof CheckpointCorruptError && (await stat(file).catch(() => null))?.isDirectory()) return null;
      throw e;
    }
  };
  return Promise.all(
    files.map(async (f) => {
      const parent = dirname(f);
      let live = lives.get(parent);
      if (!live) lives.set(parent, (live = liveOf(parent, f)));
      const dir = await live;
      return dir === null ? f : join(dir, basename(f));
    }),
  );
}

/** The L3 column family of a model's table (stable across processes for version 1). */
export function persistentName(model: string, table: string, version: number): string {
  return version === 1 ? `${model}.${table}` : `${model}.${table}.v${version}`;
}

/**
 * A loaded model (one version): its tables' L1 caches, the names of their L2/L3
 * tables, stats, and the lookup path through the hierarchy. Lookups in flight are
 * counted so that a replaced version is disposed only after they finish.
 */
export class ModelState {
  readonly tables: TableState[];
  #inflight = 0;
  #drained: (() => void) | null = null;
  #background = new Set<Promise<void>>();
  #disposed = false;
  #refreshTimer: NodeJS.Timeout | null = null;
  /** L2 / L3 tables this version emptied and filled at load (the ones {@link dispose} may delete). */
  readonly #wrote = { l2: new Set<string>(), l3: new Set<string>() };
  /** L2 tables this version opened (one use each, ended at dispose). */
  readonly #opened = new Set<string>();
  readonly #l2Filters: RegExp[];
  readonly #l3Filters: RegExp[];

  /**
   * Global load number on a shared L2 (the published version this one is, or 0: the stable
   * tables, never published); the local version elsewhere. Of two versions the higher one is newer.
   */
  seq: number;
  /** The table folders this version was read from (null when it read none: attached without files). */
  files: string[] | null = null;
  /** True when this version wrote its rows into L2 at load (a shared L2's loading server; it publishes them). */
  get wroteL2(): boolean {
    return this.#wrote.l2.size > 0;
  }
  /** Checked before each streamed batch of {@link load}: true stops the load (DisposedError). */
  stopped: (() => boolean) | null = null;
  /** Runs at the end of {@link dispose} (the shared L2's bookkeeping: ends this version's lease, collects). */
  onDisposed: (() => Promise<void>) | null = null;

  /**
   * @param l2Suffix suffix of the L2 table names on a shared L2: '' for HugeCTR's stable
   *   `<model>.<table>`, `.v<seq>` for a reload (in-process L2 tables are always `.v<version>`)
   */
  constructor(
    readonly config: ModelConfig,
    readonly ctx: HpsContext,
    readonly version: number,
    readonly l2Suffix = version === 1 ? '' : `.v${version}`,
    seq = version,
  ) {
    this.seq = seq;
    const c = config;
    this.#l2Filters = compileUpdateFilters(ctx.config.volatileDb.updateFilters);
    this.#l3Filters = compileUpdateFilters(ctx.config.persistentDb.updateFilters);
    this.tables = c.embeddingTableNames.map((name, id) => ({
      id,
      name,
      dim: c.embeddingVecsizePerTable[id]!,
      defaultValue: c.defaultValueForEachTable[id]!,
      rows: 0,
      maxKeys: c.maxBatchSize * c.maxnumCatfeatureQueryPerTablePerSample[id]!,
      l2Name: ctx.volatileDb?.shared ? `${c.model}.${name}${l2Suffix}` : `${c.model}.${name}.v${version}`,
      l3Name: persistentName(c.model, name, version),
      caches: new Map(),
      stats: statsOf(ctx, c.model, id),
    }));
  }

  get name(): string {
    return this.config.model;
  }

  /**
   * Whether lookups read L3: a read-only L3 holds only the tables it was opened with (version 1's
   * stable names), so a later version (an attached server following a reload) reads none.
   */
  get #readsL3(): boolean {
    return !this.ctx.config.persistentDb.readOnly || this.version === 1;
  }

  /**
   * Streams every table from its files into L2 and L3 (bounded memory: one batch at a
   * time; an L3 table written at startup is emptied first, so it holds exactly the model's
   * rows), creates the L1 caches, and pre-fills them (static caches: the whole table;
   * `init_ec` with a refresh percentage > 0: that share of the rows).
   * The folders of an `exportModel` export are those of the version its CURRENT names when
   * the load starts; when an export commits meanwhile and deletes them (the read fails with
   * NOT_FOUND / IO_ERROR and CURRENT now names another version), the load starts over from
   * the new version (at most 3 times), emptying what the failed attempt wrote to L2 and L1.
   * @throws NotFoundError / CheckpointCorruptError for missing or malformed files (nothing is served then)
   */
  async load(onProgress: ((p: LoadProgress) => void) | null, batchSize = 65536, attach: AttachSource | null = null): Promise<void> {
    const { volatileDb: l2, persistentDb: l3 } = this.ctx;
    const c = this.config;
    if (!l2 && !l3) {
      throw new FailedPreconditionError(`Model ${JSON.stringify(c.model)}: volatile_db and persistent_db are both disabled, so its tables have nowhere to live; enable one of them`);
    }
    if (attach) return this.#loadFrom(attach.files, onProgress, batchSize, false, attach);
    // one export's folders for every table (exportModel's CURRENT read once per attempt)
    let files = await liveSparseFiles(c.sparseFiles);
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#loadFrom(files, onProgress, batchSize, attempt > 1, null);
        return;
      } catch (e) {
        const moved = e instanceof EmbeddingError && (e.code === 'NOT_FOUND' || e.code === 'IO_ERROR') && attempt < 3 ? await liveSparseFiles(c.sparseFiles).catch(() => null) : null;
        if (!moved || moved.every((f, i) => f === files[i])) throw e;
        files = moved;
        for (const t of this.tables) {
          for (const cache of t.caches.values()) cache.dispose();
          t.caches.clear();
        }
      }
    }
  }

  /**
   * One attempt of {@link load} from `files`; `again`: an earlier attempt may have written L2 rows, which are removed first.
   * `attach`: a version another server wrote into the shared L2: nothing is written to L2, and the files are read
   * only when this server writes L3 or prefills L1 (else the published row counts size the L1 caches).
   */
  async #loadFrom(files: readonly string[], onProgress: ((p: LoadProgress) => void) | null, batchSize: number, again: boolean, attach: AttachSource | null): Promise<void> {
    const { volatileDb: l2, persistentDb: l3, config } = this.ctx;
    const c = this.config;
    const keyFormat = config.supportlonglong ? 'int64' : 'uint32';
    const writeL3 = l3 !== null && !config.persistentDb.readOnly && config.persistentDb.initializeAfterStartup;
    const staticCache = c.embeddingCacheType !== 'dynamic';
    const readFiles = !attach || writeL3 || (c.gpucache && (staticCache || (c.initEc && c.cacheRefreshPercentagePerIteration > 0)));
    // every table's files checked before loading anything
    for (const t of this.tables) {
      t.rows = readFiles ? (await inspectHugeCTRModel(files[t.id]!, t.dim, { keyFormat, allowEmpty: false })).rows : attach!.rows[t.id]!;
    }
    this.files = readFiles ? [...files] : null;
    if (l3 && !config.persistentDb.readOnly) await l3.addTables(this.tables.map((t) => t.l3Name));
    // the model's files are the whole table: rows an earlier run left in L3 (keys this model
    // dropped) would be served as if the model still held them, so L3 starts empty
    if (writeL3) {
      for (const t of this.tables) {
        this.#wrote.l3.add(t.l3Name);
        await l3.clear(t.l3Name);
      }
    }
    for (const t of this.tables) {
      const l2Rows = l2 && !attach && config.volatileDb.initializeAfterStartup ? rowShare(config.volatileDb.initialCacheRate, t.rows, 'round') : 0;
      if (l2 && !this.#opened.has(t.l2Name)) {
        await l2.createTable(t.l2Name, t.dim);
        this.#opened.add(t.l2Name);
      }
      // A shared (Redis) L2 table outlives servers: rows an earlier load of this model wrote (an
      // earlier export's values, keys this one dropped or does not cache) would be served ahead of
      // L3's new rows, so a server that writes the model into L2 empties its tables first, as L3.
      // A server that only attaches (initialize_after_startup false, initial_cache_rate 0) keeps them.
      if (l2 && l2Rows > 0) this.#wrote.l2.add(t.l2Name);
      if (l2 && l2Rows > 0 && (l2.shared || again)) await l2.clear(t.l2Name);
      // static and uvm hold the whole table in L1 (uvm: HugeCTR's split of it between device and host memory is one memory here)
      if (c.gpucache) {
        const cap = staticCache ? Infinity : rowShare(c.gpucacheper, t.rows, 'ceil');
        for (const d of c.deployedDeviceList) t.caches.set(d, new L1Cache(`${c.model}.${t.name}.v${this.version}.l1.d${d}`, t.dim, cap, this.ctx.backend));
      }
      const prefill = staticCache ? t.rows : c.initEc ? Math.min(rowShare(c.gpucacheper, t.rows, 'ceil'), rowShare(c.cacheRefreshPercentagePerIteration, t.rows, 'round')) : 0;
      if (!readFiles) continue;
      let loaded = 0;
      for await (const b of readHugeCTRModel(files[t.id]!, t.dim, { keyFormat, allowEmpty: false, batchSize })) {
        if (this.stopped?.()) throw new DisposedError(`the load of model ${JSON.stringify(c.model)} was stopped (its server is closing)`);
        const n = b.keys.length;
        const jobs: Promise<unknown>[] = [];
        if (l2 && loaded < l2Rows) {
          const take = Math.min(n, l2Rows - loaded);
          jobs.push(l2.insert(t.l2Name, b.keys.subarray(0, take), b.values.subarray(0, take * t.dim)));
        }
        if (writeL3) jobs.push(l3.put(t.l3Name, b.keys, b.values));
        if (loaded < prefill) {
          const take = Math.min(n, prefill - loaded);
          for (const cache of t.caches.values()) cache.insert(b.keys.subarray(0, take), b.values.subarray(0, take * t.dim));
        }
        await Promise.all(jobs);
        loaded += n;
        onProgress?.({ model: c.model, table: t.name, tableId: t.id, rowsLoaded: loaded, rows: t.rows });
      }
    }
  }

  /**
   * Starts HugeCTR's periodic cache refresh: after `refresh_delay` seconds, then every
   * `refresh_interval` seconds (0: off). The timer never keeps the process alive.
   */
  startRefresh(): void {
    const every = this.config.refreshInterval;
    if (every <= 0 || this.#refreshTimer) return;
    const tick = (): void => {
      if (this.#disposed) return;
      const done = this.enter();
      void this.refresh()
        .catch(() => undefined)
        .finally(() => {
          done();
          if (!this.#disposed) this.#refreshTimer = setTimeout(tick, every * 1000).unref();
        });
    };
    this.#refreshTimer = setTimeout(tick, this.config.refreshDelay * 1000).unref();
  }

  /** Counts a lookup in flight; the returned function ends it. */
  enter(): () => void {
    this.#inflight++;
    return () => {
      if (--this.#inflight === 0 && this.#drained) this.#drained();
    };
  }

  /** Resolves once no lookup is in flight (and background fills are done). */
  async drain(): Promise<void> {
    if (this.#inflight > 0) await new Promise<void>((r) => (this.#drained = r));
    await Promise.allSettled([...this.#background]);
  }

  /**
   * Rows of `keys` (validated int64) from table `t` for device `deviceId`: `[n, dim]`.
   * L1 first; below `hit_rate_threshold` the misses are fetched from L2/L3 now and
   * cached; at or above it they get the default now and are fetched in the background.
   */
  lookup(t: TableState, keys: BigInt64Array, deviceId: number): Float32Array | Promise<Float32Array> {
    const start = performance.now();
    const cache = t.caches.get(deviceId);
    let pre: CacheQueryResult | null = null;
    if (cache && keys.length <= chunkKeys(t.dim)) {
      // the L1 hit path: a batch of one chunk found whole in L1 answers without a promise hop
      pre = cache.query(keys);
      if (pre.hits === keys.length) {
        t.stats.count(0, pre.hits, 0);
        t.stats.latency(performance.now() - start);
        return pre.values;
      }
    }
    return this.#lookupAsync(t, keys, deviceId, start, pre);
  }

  async #lookupAsync(t: TableState, keys: BigInt64Array, deviceId: number, start: number, pre: CacheQueryResult | null): Promise<Float32Array> {
    const dim = t.dim;
    // a large batch runs in chunks, each on a turn of the event loop of its own, so that no
    // synchronous part (key checks, output allocation, inline native calls) blocks the loop long
    const chunk = chunkKeys(dim);
    let values: Float32Array;
    if (keys.length <= chunk) values = await this.#lookupChunk(t, keys, deviceId, pre);
    else {
      values = new Float32Array(keys.length * dim);
      for (let s = 0; s < keys.length; s += chunk) {
        await ownTurn();
        const part = keys.subarray(s, s + chunk);
        const into = values.subarray(s * dim, (s + part.length) * dim);
        const got = await this.#lookupChunk(t, part, deviceId, null, into);
        if (got !== into) into.set(got);
      }
    }
    t.stats.latency(performance.now() - start);
    return values;
  }

  /** Rows of one chunk; written into `into` when given (the L1 path), else a fresh array. */
  async #lookupChunk(t: TableState, keys: BigInt64Array, deviceId: number, pre: CacheQueryResult | null, into: Float32Array | null = null): Promise<Float32Array> {
    const dim = t.dim;
    const large = keys.length * dim >= 1 << 16;
    const cache = t.caches.get(deviceId);
    let values: Float32Array;
    if (!cache) {
      const { unique, inverse } = dedupe(keys);
      const r = await this.fetchLower(t, unique);
      values = into ?? new Float32Array(keys.length * dim);
      for (let i = 0; i < keys.length; i++) copyRow(values, i, r.values, inverse[i]!, dim);
    } else {
      const q = pre ?? cache.query(keys, into);
      // a large chunk's query (native, on this thread) and its bookkeeping below run on turns of their own
      if (large && !pre && q.hits < keys.length) await ownTurn();
      values = q.values;
      const missPos = missing(q.exists);
      t.stats.count(0, keys.length - missPos.length, missPos.length);
      if (missPos.length > 0) {
        const { unique, inverse } = dedupe(gatherKeys(keys, missPos));
        // HugeCTR's hit rate: 1 - missing unique keys / unique keys (the batch is deduplicated only
        // when the threshold can go either way: above 1 always fills synchronously, 0 never does)
        const threshold = this.config.hitRateThreshold;
        const sync = threshold > 1 || (threshold > 0 && 1 - unique.length / countUnique(keys) < threshold);
        if (sync) {
          const r = await this.fetchLower(t, unique);
          if (large) await ownTurn();
          for (let j = 0; j < missPos.length; j++) copyRow(values, missPos[j]!, r.values, inverse[j]!, dim);
          this.#cacheFound(cache, unique, r);
        } else {
          for (const p of missPos) values.fill(t.defaultValue, p * dim, (p + 1) * dim);
          const job = this.fetchLower(t, unique)
            .then((r) => this.#cacheFound(cache, unique, r))
            .catch(() => undefined)
            .finally(() => this.#background.delete(job));
          this.#background.add(job);
        }
      }
    }
    return values;
  }

  #cacheFound(cache: L1Cache, keys: BigInt64Array, r: FetchResult): void {
    if (this.#disposed || r.hits === 0) return;
    if (r.hits === keys.length) return cache.insert(keys, r.values);
    const dim = cache.dim;
    const pos = new Int32Array(r.hits);
    for (let i = 0, j = 0; i < keys.length; i++) if (r.found[i]) pos[j++] = i;
    const v = new Float32Array(r.hits * dim);
    for (let j = 0; j < pos.length; j++) copyRow(v, j, r.values, pos[j]!, dim);
    cache.insert(gatherKeys(keys, pos), v);
  }

  /**
   * Rows of unique `keys` from L2, then L3 for what L2 lacks (written back to L2 with
   * `cache_missed_embeddings`); keys found nowhere get the table's default value.
   * `found` marks keys found at some level.
   */
  async fetchLower(t: TableState, keys: BigInt64Array): Promise<FetchResult> {
    const { volatileDb: l2, persistentDb: l3, config } = this.ctx;
    const dim = t.dim;
    const n = keys.length;
    let values: Float32Array = new Float32Array(n * dim);
    let found: Uint8Array = new Uint8Array(n);
    let hits = 0;
    if (l2) {
      const r = await l2.fetch(t.l2Name, keys, dim);
      values = r.values;
      found = r.found;
      hits = r.hits;
      t.stats.count(1, r.hits, n - r.hits);
    }
    if (l3 && this.#readsL3 && hits < n) {
      const pos = missing(found);
      const sub = gatherKeys(keys, pos);
      const r = await l3.multiGet(t.l3Name, sub, dim);
      t.stats.count(2, r.hits, sub.length - r.hits);
      for (let j = 0; j < pos.length; j++) {
        if (!r.found[j]) continue;
        copyRow(values, pos[j]!, r.values, j, dim);
        found[pos[j]!] = 1;
      }
      hits += r.hits;
      if (l2 && r.hits > 0 && config.volatileDb.cacheMissedEmbeddings) {
        const back = missing(r.found, 1);
        const v = new Float32Array(back.length * dim);
        for (let j = 0; j < back.length; j++) copyRow(v, j, r.values, back[j]!, dim);
        await l2.insert(t.l2Name, gatherKeys(sub, back), v);
      }
    }
    if (hits < n) for (let i = 0; i < n; i++) if (!found[i]) values.fill(t.defaultValue, i * dim, (i + 1) * dim);
    return { values, found, hits };
  }

  /** Re-reads every cached key of every table from L2/L3 (HugeCTR's refresh_embedding_cache). */
  async refresh(): Promise<void> {
    for (const t of this.tables) {
      for (const cache of t.caches.values()) {
        for await (const keys of cache.keys()) {
          const r = await this.fetchLower(t, keys);
          this.#cacheFound(cache, keys, r);
        }
      }
    }
  }

  /** An online update of table `name`: written to L2 and L3 (by their update filters), and to L1 where cached. */
  async applyUpdate(t: TableState, keys: BigInt64Array, values: Float32Array): Promise<void> {
    const { volatileDb: l2, persistentDb: l3, config } = this.ctx;
    const pass = (filters: readonly RegExp[]): boolean => updateFilterPasses(filters, this.config.model, t.name);
    const jobs: Promise<unknown>[] = [];
    if (l2 && pass(this.#l2Filters)) jobs.push(l2.insert(t.l2Name, keys, values));
    if (l3 && !config.persistentDb.readOnly && pass(this.#l3Filters)) jobs.push(l3.put(t.l3Name, keys, values));
    await Promise.all(jobs);
    for (const cache of t.caches.values()) cache.refreshRows(keys, values);
  }

  /**
   * Once no lookup, refresh or update is in flight on this version: frees the L1 caches and
   * the in-process L2 tables, and empties and compacts the L3 tables of a reload (version >= 2,
   * named `<model>.<table>.v<N>`) that this version filled (their disk comes back; the empty column
   * family stays: rocksdb-native cannot drop one). On a shared (Redis) L2 the version's
   * tables are only forgotten here: `onDisposed` ends this server's use of them and deletes the
   * registered versions no live server uses (never the published one).
   */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#refreshTimer) clearTimeout(this.#refreshTimer);
    await this.drain();
    const { volatileDb: l2, persistentDb: l3 } = this.ctx;
    const reloaded = this.version > 1;
    const jobs: Promise<void>[] = [];
    for (const t of this.tables) {
      for (const c of t.caches.values()) c.dispose();
      t.caches.clear();
      // in-process: frees the version's tables; shared: forgets them here (onDisposed deletes what no server uses)
      if (l2 && this.#opened.has(t.l2Name)) jobs.push(l2.dropTable(t.l2Name));
      if (l3 && reloaded && this.#wrote.l3.has(t.l3Name)) jobs.push(l3.clear(t.l3Name).then(() => l3.compact(t.l3Name)));
    }
    // concurrently: an unreachable store costs one timeout, not one per table
    await Promise.allSettled(jobs);
    await this.onDisposed?.().catch(() => undefined);
  }
}
