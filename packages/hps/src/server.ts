import {
  checkOptions,
  DisposedError,
  InvalidArgumentError,
  invalidParameter,
  InvalidTypeError,
  loadDefaultBackend,
  normalizeKeys,
  NotFoundError,
  OutOfRangeError,
  Tensor,
  UnsupportedError,
  type EmbeddingBackend,
  type KeyInput,
} from '@embedstack/core';
import { RocksStore } from '@embedstack/store-rocksdb';
import { loadPsConfig, resolveModelConfig, type PsConfig } from './config.js';
import { ModelState, type HpsContext, type LoadProgress, type TableState } from './model.js';
import type { HpsStats } from './stats.js';
import { HashMapDb, type VolatileDb } from './volatileDb.js';
import { createRedisVolatileDb } from './redisDb.js';
import { startUpdateSource, type UpdateSource } from './updateSource.js';

/** Options of {@link HPS.create}: exactly one of `psConfigFile` / `psConfig`. */
export interface HpsOptions {
  /** Path of HugeCTR's ps.json (`//` comments allowed). */
  psConfigFile?: string;
  /** The same JSON as an object. */
  psConfig?: Record<string, unknown>;
  /** Called after each streamed batch of a table's model files. Default none. */
  onProgress?: ((p: LoadProgress) => void) | null;
  /** Backend of the L1 caches and the in-process L2 (a name or a backend). Default: core's default backend. */
  backend?: string | EmbeddingBackend | null;
  /** Rows per streamed batch when loading model files. Default 65536. */
  loadBatchSize?: number;
}

/** Options of {@link HPS.lookup}. */
/** The L1 cache of a table (modelInfo): each deployed device holds one. */
export interface CacheInfo {
  /** `embedding_cache_type`. */
  type: 'dynamic' | 'static' | 'uvm';
  /** Rows one L1 holds at most: dynamic: sets * 64 (gpucacheper * rows rounded up to whole sets); static / uvm: the whole table. */
  rows: number;
  /** uvm: HugeCTR's split of the table between GPU memory (gpucacheper * rows) and host memory (the rest); one memory on a CPU backend. */
  deviceRows?: number;
  /** uvm: rows of the host-memory part (rows - deviceRows). */
  hostRows?: number;
}

/** One table of {@link HPS.modelInfo}. */
export interface TableInfo {
  /** Table name (`embedding_table_names`). */
  name: string;
  /** Floats per row (`embedding_vecsize_per_table`). */
  dim: number;
  /** Rows read from the table's model files. */
  rows: number;
  /** Most keys one lookup may carry: max_batch_size * maxnum_catfeature_query_per_table_per_sample. */
  maxKeys: number;
  /** null with gpucache false. */
  cache: CacheInfo | null;
}

/** Options of {@link HPS.lookup}. */
export interface LookupOptions {
  /** Device whose L1 replica serves the lookup; must be in `deployed_device_list`. Default: the first deployed device. */
  deviceId?: number;
}

const KNOWN = ['psConfigFile', 'psConfig', 'onProgress', 'backend', 'loadBatchSize'] as const;
const CREATE_TOKEN = Symbol('HPS.create');

/**
 * HugeCTR's Hierarchical Parameter Server: per table an L1 cache (per device) over an
 * L2 volatile DB (in-process hash map or Redis Cluster) over an L3 persistent DB
 * (RocksDB), filled from HugeCTR's model files and updated online. Many concurrent
 * `lookup` calls are safe; large batches run off the event loop.
 */
export class HPS {
  /** The resolved ps config. */
  readonly config: PsConfig;
  #ctx: HpsContext;
  #models = new Map<string, ModelState>();
  #versions = new Map<string, number>();
  #updates: UpdateSource | null = null;
  #closed = false;
  #loadBatchSize: number;
  #onProgress: ((p: LoadProgress) => void) | null;

  /** Use {@link HPS.create}. @throws FailedPreconditionError-like NOT allowed: called directly it throws INVALID_ARGUMENT */
  constructor(token: unknown, ctx: unknown, loadBatchSize: unknown, onProgress: unknown) {
    if (token !== CREATE_TOKEN) throw new InvalidArgumentError('HPS is created by `await HPS.create({ psConfigFile })`, not by new');
    this.#ctx = ctx as HpsContext;
    this.config = this.#ctx.config;
    this.#loadBatchSize = loadBatchSize as number;
    this.#onProgress = onProgress as ((p: LoadProgress) => void) | null;
  }

  /**
   * Starts a server: reads the config, opens L2 and L3, streams every model's tables
   * into them, fills the caches and starts the update source.
   * @throws coded errors for a bad config, missing/malformed model files, an unopenable
   *   RocksDB path (IO_ERROR), an unreachable Redis (STORE_UNAVAILABLE), kafka (UNSUPPORTED)
   */
  static async create(options: HpsOptions): Promise<HPS> {
    const o = checkOptions<HpsOptions>(options, KNOWN, 'options', { required: true });
    if (o.onProgress !== undefined && o.onProgress !== null && typeof o.onProgress !== 'function') {
      throw invalidParameter('options.onProgress', 'a function', o.onProgress, InvalidTypeError);
    }
    const batch = o.loadBatchSize ?? 65536;
    if (typeof batch !== 'number' || !Number.isSafeInteger(batch) || batch < 1) throw invalidParameter('options.loadBatchSize', 'an integer >= 1', batch);
    const config = await loadPsConfig(o);
    if (config.updateSource.type === 'kafka_message_queue') {
      throw new UnsupportedError("update_source.type 'kafka_message_queue' is not supported here (no Kafka broker can run with this package): use 'redis_stream', which takes HugeCTR's message format from a Redis stream");
    }
    const backend = loadDefaultBackend({ backend: o.backend ?? undefined, from: import.meta.url });
    let volatileDb: VolatileDb | null = null;
    let persistentDb: RocksStore | null = null;
    try {
      const v = config.volatileDb;
      if (v.type === 'hash_map' || v.type === 'parallel_hash_map') volatileDb = new HashMapDb(v, backend);
      else if (v.type === 'redis_cluster') volatileDb = await createRedisVolatileDb(v);
      const p = config.persistentDb;
      if (p.type === 'rocks_db') {
        const tables = config.persistentDb.readOnly ? config.models.flatMap((m) => m.embeddingTableNames.map((t) => `${m.model}.${t}`)) : [];
        persistentDb = await RocksStore.open({ path: p.path, tables, readOnly: p.readOnly, numThreads: p.numThreads, maxBatchSize: p.maxBatchSize });
      }
      const server = new HPS(CREATE_TOKEN, { config, backend, volatileDb, persistentDb }, batch, o.onProgress ?? null);
      try {
        for (const m of config.models) await server.#load(m);
        if (config.updateSource.type === 'redis_stream') server.#updates = await startUpdateSource(config.updateSource, () => server.#tags(), (tag, keys, values) => server.#applyUpdate(tag, keys, values));
      } catch (e) {
        await server.close();
        throw e;
      }
      return server;
    } catch (e) {
      await volatileDb?.close().catch(() => undefined);
      await persistentDb?.close().catch(() => undefined);
      throw e;
    }
  }

  async #load(cfg: PsConfig['models'][number]): Promise<ModelState> {
    const version = (this.#versions.get(cfg.model) ?? 0) + 1;
    this.#versions.set(cfg.model, version);
    const state = new ModelState(cfg, this.#ctx, version);
    const closed = (cause?: unknown): DisposedError =>
      new DisposedError(`HPS server was closed while model ${JSON.stringify(cfg.model)} was loading: nothing was loaded`, cause === undefined ? undefined : { cause });
    try {
      await state.load(this.#onProgress, this.#loadBatchSize);
    } catch (e) {
      await state.dispose();
      throw this.#closed ? closed(e) : e;
    }
    if (this.#closed) {
      await state.dispose();
      throw closed();
    }
    const old = this.#models.get(cfg.model);
    if (old && old.version > version) {
      // a later loadModel of this model finished first: it stays, this version is discarded as if replaced at once
      await state.dispose();
      return old;
    }
    this.#models.set(cfg.model, state); // atomic: new lookups see the complete new version
    state.startRefresh();
    if (old) await old.dispose(); // waits for the lookups in flight on the old version
    return state;
  }

  #check(): void {
    if (this.#closed) throw new DisposedError('HPS server is closed');
  }

  #model(model: unknown): ModelState {
    this.#check();
    if (typeof model !== 'string') throw invalidParameter('modelName', 'a model name', model, InvalidTypeError);
    const m = this.#models.get(model);
    if (!m) throw new NotFoundError(`Expected modelName to be a loaded model (${[...this.#models.keys()].join(', ') || 'none'}) but received ${JSON.stringify(model)}`, { argument: 'modelName' });
    return m;
  }

  #table(m: ModelState, tableId: unknown): TableState {
    if (typeof tableId !== 'number' || !Number.isSafeInteger(tableId)) throw invalidParameter('tableId', 'an integer table id', tableId, InvalidTypeError);
    const t = m.tables[tableId];
    if (!t) throw new OutOfRangeError(`Expected tableId to be in [0, ${m.tables.length}) for model ${JSON.stringify(m.name)} but received ${tableId}`, { argument: 'tableId' });
    return t;
  }

  /** Names of the loaded models. */
  models(): string[] {
    this.#check();
    return [...this.#models.keys()];
  }

  /** Table names, vector sizes, rows and L1 caches of a model. @throws NotFoundError */
  modelInfo(modelName: string): {
    /** Model name. */
    model: string;
    /** 1 for the first load, + 1 per reload of the model. */
    version: number;
    /** One entry per table, in table-id order. */
    tables: TableInfo[];
  } {
    const m = this.#model(modelName);
    const c = m.config;
    const cacheOf = (t: TableState): CacheInfo | null => {
      const l1 = t.caches.values().next().value;
      if (!l1) return null;
      const rows = Number.isFinite(l1.capacity) ? l1.slots() : t.rows;
      if (c.embeddingCacheType !== 'uvm') return { type: c.embeddingCacheType, rows };
      const deviceRows = Math.min(t.rows, Math.floor(c.gpucacheper * t.rows));
      return { type: 'uvm', rows, deviceRows, hostRows: t.rows - deviceRows };
    };
    return { model: m.name, version: m.version, tables: m.tables.map((t) => ({ name: t.name, dim: t.dim, rows: t.rows, maxKeys: t.maxKeys, cache: cacheOf(t) })) };
  }

  /**
   * Looks up `keys` (int64: BigInt64Array, bigint[], safe-integer number[], Int32Array or
   * an id Tensor; with `supportlonglong: false` keys must be in [0, 2^32)) in table
   * `tableId` of `modelName`.
   * @returns Tensor `[n, dim]` float32 (host memory); keys found at no level get the table's default
   * @throws NotFoundError (model), OutOfRangeError (table id, key range, device), InvalidTypeError (key dtype, a deviceId that is not a number),
   *   InvalidArgumentError (too many keys), DisposedError, STORE_UNAVAILABLE / IO_ERROR when L2 / L3 fail
   */
  async lookup(keys: KeyInput, modelName: string, tableId: number, options?: LookupOptions | null): Promise<Tensor> {
    const m = this.#model(modelName);
    const t = this.#table(m, tableId);
    const o = checkOptions<LookupOptions>(options, ['deviceId'], 'options');
    const devices = m.config.deployedDeviceList;
    const deviceId = o.deviceId ?? devices[0]!;
    if (typeof deviceId !== 'number') throw invalidParameter('options.deviceId', 'a device id (an integer of deployed_device_list)', deviceId, InvalidTypeError);
    if (!devices.includes(deviceId)) throw new OutOfRangeError(`Expected options.deviceId to be one of deployed_device_list (${devices.join(', ')}) but received ${String(deviceId)}`, { argument: 'options.deviceId' });
    const k = this.#keys(keys);
    if (k.length > t.maxKeys) {
      throw new InvalidArgumentError(`Expected at most max_batch_size * maxnum_catfeature_query_per_table_per_sample = ${t.maxKeys} keys for table ${tableId} of ${JSON.stringify(m.name)} but received ${k.length}`, { argument: 'keys' });
    }
    const done = m.enter();
    try {
      const rows = m.lookup(t, k, deviceId);
      return new Tensor(rows instanceof Promise ? await rows : rows, [k.length, t.dim]);
    } finally {
      done();
    }
  }

  #keys(keys: KeyInput): BigInt64Array {
    if (keys instanceof Float32Array || keys instanceof Float64Array) throw invalidParameter('keys', 'int64 or int32 keys', keys, InvalidTypeError);
    const k = normalizeKeys(keys, 'int64', 'keys') as BigInt64Array;
    if (!this.config.supportlonglong) {
      const w = new Uint32Array(k.buffer, k.byteOffset, k.length * 2);
      for (let i = 0; i < k.length; i++) {
        if (w[2 * i + 1] !== 0) throw new OutOfRangeError(`Expected keys to be uint32 (supportlonglong: false) but keys[${i}] is ${k[i]}`, { argument: 'keys' });
      }
    }
    return k;
  }

  /**
   * Hits, misses and hit rate per level and latency percentiles of a table, cumulative
   * since its model was loaded. @throws NotFoundError, OutOfRangeError
   */
  stats(modelName: string, tableId: number): HpsStats {
    const m = this.#model(modelName);
    return this.#table(m, tableId).stats.snapshot();
  }

  /** Re-reads every key cached in L1 from L2/L3 (picks up updates). @throws NotFoundError */
  async refreshEmbeddingCache(modelName: string): Promise<void> {
    const m = this.#model(modelName);
    const done = m.enter();
    try {
      await m.refresh();
    } finally {
      done();
    }
  }

  /**
   * Loads a model (HugeCTR model entry, same keys as in ps.json). A model of the same
   * name is replaced atomically once the new version is fully loaded; lookups in flight
   * finish on the old one. Of several calls for one model running at once, the last one
   * called is served: an earlier one finishing after it is discarded.
   * @throws the config's and model files' coded errors; DisposedError when the server is
   *   closed (also when `close` is called while the model loads: nothing is loaded then)
   */
  async loadModel(config: Record<string, unknown>): Promise<void> {
    this.#check();
    const cfg = resolveModelConfig(config, process.cwd(), 'config');
    if (this.#ctx.config.persistentDb.readOnly && this.#ctx.persistentDb) {
      throw new UnsupportedError('loadModel needs a writable persistent_db (read_only is set): its tables are streamed into RocksDB');
    }
    await this.#load(cfg);
  }

  /** Unloads a model (after its lookups in flight). @throws NotFoundError */
  async unloadModel(modelName: string): Promise<void> {
    const m = this.#model(modelName);
    this.#models.delete(modelName);
    await m.dispose();
  }

  #tags(): string[] {
    return [...this.#models.values()].flatMap((m) => m.tables.map((t) => `hps_et.${m.name}.${t.name}`));
  }

  /** Applies an online update (what the update source calls): tag `hps_et.<model>.<table>`. */
  async #applyUpdate(tag: string, keys: BigInt64Array, values: Float32Array): Promise<void> {
    const parts = tag.split('.');
    if (parts.length !== 3 || parts[0] !== 'hps_et') return;
    const m = this.#models.get(parts[1]!);
    const t = m?.tables.find((x) => x.name === parts[2]);
    if (!m || !t || values.length !== keys.length * t.dim) return;
    // counted as in flight, so that a version replaced meanwhile is deleted only after the update's writes
    const done = m.enter();
    try {
      await m.applyUpdate(t, keys, values);
    } finally {
      done();
    }
  }

  /** Stops the update source, waits for lookups in flight, frees caches and closes L2/L3. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#updates?.stop();
    for (const m of this.#models.values()) await m.dispose();
    this.#models.clear();
    await this.#ctx.volatileDb?.close();
    await this.#ctx.persistentDb?.close();
  }

  /** Whether `close()` has been called. */
  get closed(): boolean {
    return this.#closed;
  }
}
