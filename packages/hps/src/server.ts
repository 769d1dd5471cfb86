import {
  checkBoolean,
  checkInteger,
  checkOptions,
  DisposedError,
  InvalidArgumentError,
  invalidParameter,
  InvalidTypeError,
  loadDefaultBackend,
  normalizeKeys,
  NotFoundError,
  OutOfRangeError,
  StoreUnavailableError,
  Tensor,
  UnsupportedError,
  type EmbeddingBackend,
  type KeyInput,
} from '@embedstack/core';
import { RocksStore } from '@embedstack/store-rocksdb';
import { loadPsConfig, resolveModelConfig, type PsConfig } from './config.js';
import { ModelState, type HpsContext, type LoadProgress, type TableState } from './model.js';
import { SharedL2Control, type PublishedVersion, type SharedL2Options, type VersionTable } from './sharedL2.js';
import type { HpsStats } from './stats.js';
import { HashMapDb, type VolatileDb } from './volatileDb.js';
import { RedisVolatileDb } from './redisDb.js';
import { rowShare } from './rowShare.js';
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
  /**
   * Servers sharing a Redis L2 (`volatile_db.type: redis_cluster`): how this one follows the
   * versions others load and keeps its lease (README "Servers sharing a Redis L2"). Default
   * `{ pollIntervalMs: 1000, leaseMs: 15000, followReloads: true }`; ignored without a Redis L2.
   */
  sharedL2?: SharedL2Options | null;
}

/** A model's version in a shared L2 ({@link HPS.modelInfo}). */
export interface SharedL2Info {
  /** Global load number of the version served (0: the stable tables, no version published then). */
  seq: number;
  /** Suffix of its L2 table names: '' (HugeCTR's stable `<model>.<table>`) or `.v<seq>`. */
  suffix: string;
  /** True when this server wrote it into L2 (and published it); false when it attached to it. */
  loadedHere: boolean;
  /**
   * Why the last published version could not be followed, or this one published; else what
   * happened after this server's lease lapsed; else why the last renewal of its lease failed
   * (null: none of these).
   */
  error: string | null;
}

/** Options of {@link HPS.lookup}. */
/** The L1 cache of a table (modelInfo): each deployed device holds one. */
export interface CacheInfo {
  /** `embedding_cache_type`. */
  type: 'dynamic' | 'static' | 'uvm';
  /** Rows one L1 holds at most: dynamic: sets * ways, ways = min(64, capacity), capacity = ceil(gpucacheper * rows) without the decimal's float error (rowShare) (that capacity rounded up to whole sets: below 64 rows one set of exactly them); static / uvm: the whole table. */
  rows: number;
  /** uvm: HugeCTR's split of the table between GPU memory (floor(gpucacheper * rows) without the decimal's float error: rowShare) and host memory (the rest); one memory on a CPU backend. */
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

const KNOWN = ['psConfigFile', 'psConfig', 'onProgress', 'backend', 'loadBatchSize', 'sharedL2'] as const;

/** The resolved `sharedL2` options. */
interface SharedL2Settings {
  pollIntervalMs: number;
  leaseMs: number;
  followReloads: boolean;
}

function resolveSharedL2(options: unknown): SharedL2Settings {
  const o = checkOptions<SharedL2Options>(options, ['pollIntervalMs', 'leaseMs', 'followReloads'], 'options.sharedL2');
  const pollIntervalMs = checkInteger(o.pollIntervalMs, 'options.sharedL2.pollIntervalMs', { min: 1, max: 3_600_000, fallback: 1000 });
  const leaseMs = checkInteger(o.leaseMs, 'options.sharedL2.leaseMs', { min: 2 * pollIntervalMs, max: 86_400_000, fallback: Math.max(15000, 2 * pollIntervalMs) });
  return { pollIntervalMs, leaseMs, followReloads: checkBoolean(o.followReloads, 'options.sharedL2.followReloads', true) };
}

/** The tables of a model entry (name, dim). */
const tablesOf = (cfg: PsConfig['models'][number]): VersionTable[] => cfg.embeddingTableNames.map((name, i) => ({ name, dim: cfg.embeddingVecsizePerTable[i]! }));

/** A published version this server leases and is about to load. */
interface Adoption {
  version: PublishedVersion;
  release: () => void;
  /** The version a running server switches from (null at load): gone by the end of the load = the model was unloaded. */
  replaces?: ModelState | null;
  /** Replace `replaces` even when it is newer (a version of this server that may have been deleted under it). */
  force?: boolean;
  /** The lapses of this server's lease counted once the version was leased and found live (SharedL2Control.lapses). */
  lapseMark: number;
}

/**
 * A published version this server prepared a switch to, whose lease lapsed meanwhile and that is no
 * longer live (another server's collection may have deleted it): discarded; the caller takes the live one.
 */
class AdoptionLapsed extends StoreUnavailableError {}
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
  /** The shared-L2 bookkeeping (a Redis L2 only). */
  #shared: SharedL2Control | null = null;
  #sharedSettings: SharedL2Settings = { pollIntervalMs: 1000, leaseMs: 15000, followReloads: true };
  #sharedTimer: NodeJS.Timeout | null = null;
  #sharedTick: Promise<void> | null = null;
  /** Per model: the switch to a published version running now. */
  #adopting = new Map<string, Promise<void>>();
  /** Per model: the published seq that could not be followed (or this server's version not published), and why. */
  #sharedError = new Map<string, { seq: number; message: string }>();
  /** Per model: what happened after this server's lease lapsed (until the next version it loads). */
  #lapseNote = new Map<string, string>();
  /** Why the last renewal of this server's lease failed (null: it succeeded). */
  #renewError: string | null = null;
  /** When a renewal of this server's lease last succeeded (Date.now()). */
  #renewedAt = Date.now();
  /** Versions loaded here whose publication failed (retried by the timer). */
  #unpublished = new Set<ModelState>();
  /** Versions loaded here: the lapses of this server's lease counted when the version was registered (SharedL2Control.lapses). */
  #lapseMarks = new WeakMap<ModelState, number>();
  /** Versions loaded here: their publications started, and how many of them still run (a `live` read they may race is no proof of a lost one: #readLive). */
  #publications = new WeakMap<ModelState, { started: number; running: number }>();

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
    const shared = resolveSharedL2(o.sharedL2);
    const config = await loadPsConfig({ psConfigFile: o.psConfigFile, psConfig: o.psConfig });
    if (config.updateSource.type === 'kafka_message_queue') {
      throw new UnsupportedError("update_source.type 'kafka_message_queue' is not supported here (no Kafka broker can run with this package): use 'redis_stream', which takes HugeCTR's message format from a Redis stream");
    }
    const backend = loadDefaultBackend({ backend: o.backend ?? undefined, from: import.meta.url });
    let volatileDb: VolatileDb | null = null;
    let persistentDb: RocksStore | null = null;
    try {
      const v = config.volatileDb;
      if (v.type === 'hash_map' || v.type === 'parallel_hash_map') volatileDb = new HashMapDb(v, backend);
      else if (v.type === 'redis_cluster') volatileDb = await RedisVolatileDb.open(v);
      const p = config.persistentDb;
      if (p.type === 'rocks_db') {
        const tables = config.persistentDb.readOnly ? config.models.flatMap((m) => m.embeddingTableNames.map((t) => `${m.model}.${t}`)) : [];
        persistentDb = await RocksStore.open({ path: p.path, tables, readOnly: p.readOnly, numThreads: p.numThreads, maxBatchSize: p.maxBatchSize });
      }
      const server = new HPS(CREATE_TOKEN, { config, backend, volatileDb, persistentDb, tableStats: new Map() }, batch, o.onProgress ?? null);
      if (volatileDb instanceof RedisVolatileDb) {
        server.#shared = new SharedL2Control(volatileDb.store, shared.leaseMs);
        server.#sharedSettings = shared;
      }
      try {
        // the timer renews this server's lease while the models load (a lease taken at the start of a
        // long load would lapse, and the version it names could be deleted under the load)
        server.#startSharedTimer();
        for (const m of config.models) await server.#loadOrAttach(m);
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

  /** True when this server writes its models into L2 at load (else it attaches to what another server wrote). */
  #writesL2(): boolean {
    const v = this.config.volatileDb;
    return v.initializeAfterStartup && v.initialCacheRate > 0;
  }

  /**
   * Loads a model entry. A server that writes L2 loads it from its files; one that attaches to a
   * shared L2 takes the version published there (when it has the entry's tables), else the stable
   * tables.
   */
  async #loadOrAttach(cfg: PsConfig['models'][number]): Promise<ModelState> {
    this.#sharedError.delete(cfg.model); // a load asked for tries again a version that failed before
    this.#lapseNote.delete(cfg.model);
    if (this.#shared && !this.#writesL2()) {
      // a version whose lease lapsed while it was prepared, then replaced: the next live one
      for (let attempt = 0; attempt < 5; attempt++) {
        const adoption = await this.#leaseLive(cfg);
        if (!adoption) break;
        try {
          return await this.#load(cfg, adoption);
        } catch (e) {
          if (this.#closed) throw e;
          if (e instanceof AdoptionLapsed) continue;
          this.#sharedError.set(cfg.model, { seq: adoption.version.seq, message: `could not load published version ${adoption.version.seq}: ${(e as Error).message}` });
          break;
        }
      }
    }
    return this.#load(cfg);
  }

  /**
   * The live version of a shared L2 newer than `newerThan`, leased by this server before it is
   * checked again (so that no server deletes it in between), or null (none, one that failed
   * before, or one without the entry's tables).
   */
  async #leaseLive(cfg: PsConfig['models'][number], newerThan = -1, served: ModelState | null = null): Promise<Adoption | null> {
    const ctl = this.#shared!;
    for (let attempt = 0; attempt < 5; attempt++) {
      const v = await this.#readLive(cfg.model, attempt === 0 ? served : null);
      if (!v || v.seq <= newerThan || v.seq === this.#sharedError.get(cfg.model)?.seq) return null;
      const misfit = this.#misfit(cfg, v);
      if (misfit) {
        this.#sharedError.set(cfg.model, { seq: v.seq, message: `published version ${v.seq} does not fit this server's model entry: ${misfit}` });
        return null;
      }
      const release = ctl.use(cfg.model, v.suffix, v.tables.map((t) => ({ name: t.name, dim: t.dim })));
      try {
        await ctl.renew(cfg.model);
        if ((await ctl.live(cfg.model))?.seq === v.seq) return { version: v, release, lapseMark: ctl.lapses(cfg.model) };
      } catch (e) {
        release();
        throw e;
      }
      release(); // a newer version was published meanwhile: lease that one
    }
    return null;
  }

  /** Reads `live` of model `name`; with `served`, also checks that version for a lost publication against this read (#republishLost). */
  async #readLive(name: string, served: ModelState | null): Promise<PublishedVersion | null> {
    const mark = served ? this.#publishMark(served) : null;
    const v = await this.#shared!.live(name);
    if (served && mark !== null) await this.#republishLost(served, v, mark);
    return v;
  }

  /** The publications of `state` started so far, or null while one runs (a `live` read then may or may not show it). */
  #publishMark(state: ModelState): number | null {
    const p = this.#publications.get(state);
    return p?.running ? null : (p?.started ?? 0);
  }

  /**
   * A version this server loaded and published, served now, that is no longer found in `live` while
   * nothing newer is (`live` read as `v`, when no publication of it ran and none started since: the
   * publications of `state` counted `mark` before the read): its publication was lost (a failover
   * that lost the write, an evicted key). It is published again at the next poll while its tables are
   * still registered. A read that a publication of it may have raced proves nothing (the version was
   * published twice then).
   */
  async #republishLost(served: ModelState, v: PublishedVersion | null, mark: number): Promise<void> {
    const unchanged = (): boolean => this.#publishMark(served) === mark && this.#models.get(served.name) === served;
    if (!served.wroteL2 || (v && v.seq >= served.seq) || this.#unpublished.has(served) || !unchanged()) return;
    if ((await this.#shared!.registered(served.name, served.l2Suffix)) && unchanged()) this.#unpublished.add(served);
  }

  /** Why a published version cannot serve this entry (its table names and dims differ), or ''. */
  #misfit(cfg: PsConfig['models'][number], v: PublishedVersion): string {
    const want = tablesOf(cfg)
      .map((t) => `${t.name}:${t.dim}`)
      .join(',');
    const got = v.tables.map((t) => `${t.name}:${t.dim}`).join(',');
    return want === got ? '' : `its tables (name:dim) are ${got}, this server's ${want}`;
  }

  async #load(cfg: PsConfig['models'][number], adoption: Adoption | null = null): Promise<ModelState> {
    const version = (this.#versions.get(cfg.model) ?? 0) + 1;
    this.#versions.set(cfg.model, version);
    const ctl = this.#shared;
    let state: ModelState;
    let publish = false;
    /** A load that writes L2: the lapses of this server's lease counted once its version was registered. */
    let lapseMark: number | null = null;
    if (!ctl) state = new ModelState(cfg, this.#ctx, version);
    else {
      let release = adoption?.release ?? null;
      let suffix = adoption?.version.suffix ?? '';
      let seq = adoption?.version.seq ?? 0;
      if (!adoption && this.#writesL2()) {
        const live = await ctl.live(cfg.model);
        // a global number (not per process): two servers' loads never share table names
        // above every seq this server knows: a counter that went back (an evicted or lost key) would make this load lose to them
        seq = await ctl.nextSeq(cfg.model, Math.max(this.#models.get(cfg.model)?.seq ?? 0, live?.seq ?? 0));
        publish = true;
        // HugeCTR's stable names only for the first load of the model (nothing published, and no
        // other server loading them): a load then never empties tables another server serves (a
        // restarted loading server loads `.v<seq>` beside the version the others serve)
        const stable = version === 1 && live === null;
        suffix = stable ? '' : `.v${seq}`;
        release = ctl.use(cfg.model, suffix, tablesOf(cfg));
        try {
          await ctl.renew(cfg.model); // leased before it is registered: never collected while it loads
          if (!stable) await ctl.register(cfg.model, suffix, tablesOf(cfg));
          else if (!(await ctl.claim(cfg.model, '', tablesOf(cfg)))) {
            // another server registered the stable tables first (it loads or serves them)
            release();
            suffix = `.v${seq}`;
            release = ctl.use(cfg.model, suffix, tablesOf(cfg));
            await ctl.renew(cfg.model);
            await ctl.register(cfg.model, suffix, tablesOf(cfg));
          }
        } catch (e) {
          release();
          throw e;
        }
        lapseMark = ctl.lapses(cfg.model);
      }
      if (!release) {
        // serving the stable tables, nothing published: leased at once (they may be registered, so collectable)
        release = ctl.use(cfg.model, suffix, tablesOf(cfg));
        try {
          await ctl.renew(cfg.model);
        } catch (e) {
          release();
          throw e;
        }
      }
      state = new ModelState(cfg, this.#ctx, version, suffix, seq);
      const end = release;
      state.onDisposed = () => this.#released(cfg.model, end);
    }
    state.stopped = () => this.#closed; // close() does not wait for the rest of a load
    const closed = (cause?: unknown): DisposedError =>
      new DisposedError(`HPS server was closed while model ${JSON.stringify(cfg.model)} was loading: nothing was loaded`, cause === undefined ? undefined : { cause });
    try {
      const v = adoption?.version;
      await state.load(this.#onProgress, this.#loadBatchSize, v ? { files: v.files, rows: v.tables.map((t) => t.rows) } : null);
    } catch (e) {
      await state.dispose();
      throw this.#closed ? closed(e) : e;
    }
    if (this.#closed) {
      await state.dispose();
      throw closed();
    }
    if (ctl && lapseMark !== null) await this.#checkLease(state, lapseMark);
    if (ctl && adoption) await this.#checkAdoption(state, adoption);
    const old = this.#models.get(cfg.model);
    if (adoption?.replaces && !old) {
      // the model was unloaded while this server prepared the switch: it stays unloaded
      await state.dispose();
      throw new NotFoundError(`Model ${JSON.stringify(cfg.model)} was unloaded while it switched to published version ${state.seq}`);
    }
    if (old && !(adoption?.force && old === adoption.replaces) && (old.seq > state.seq || (old.seq === state.seq && old.version > version))) {
      // a later load of this model (a later loadModel, a newer published version) finished first:
      // it stays, this version is discarded as if replaced at once
      await state.dispose();
      return old;
    }
    this.#models.set(cfg.model, state); // atomic: new lookups see the complete new version
    state.startRefresh();
    if (publish && state.wroteL2 && !(await this.#publish(state))) {
      // the lease was gone when the publication reached Redis (a stall or partition after the last renewal
      // longer than leaseMs): the version served before comes back, this one is discarded as in #checkLease
      if (this.#models.get(cfg.model) === state) {
        if (old) this.#models.set(cfg.model, old);
        else this.#models.delete(cfg.model);
      } else await old?.dispose(); // a later load replaced this one meanwhile (and disposes it)
      await this.#discard(state, `this server's lease lapsed before the version was published (no renewal reached Redis for ${this.#sharedSettings.leaseMs} ms)`);
    }
    if (old) await old.dispose(); // waits for the lookups in flight on the old version
    return state;
  }

  /**
   * Before this server switches to a published version it prepared: when its lease lapsed since the
   * version was leased (a renewal now) and the version is no longer live, another server's collection
   * may have deleted it: it is discarded (AdoptionLapsed; the caller takes the live version).
   */
  async #checkAdoption(state: ModelState, adoption: Adoption): Promise<void> {
    const ctl = this.#shared!;
    try {
      await ctl.renew(state.name);
    } catch {
      return; // Redis unreachable: the switch goes on; a lapse is found by a later renewal (#afterLapse)
    }
    if (ctl.lapses(state.name) === adoption.lapseMark) return;
    const live = await ctl.live(state.name).catch(() => null);
    if (live?.seq === adoption.version.seq) return; // still live: not collected (the live version never is)
    await state.dispose();
    throw new AdoptionLapsed(
      `Model ${JSON.stringify(state.name)}: published version ${state.seq} was not switched to: this server's lease lapsed while it prepared the switch ` +
        `(no renewal reached Redis for ${this.#sharedSettings.leaseMs} ms) and a newer version replaced it (another server may have deleted it)`,
    );
  }

  /**
   * Before a version this server wrote into the shared L2 is served and published: its lease must
   * have run through the load (a renewal now, and no lapse found since the version was registered).
   * Else another server's collection may have deleted the tables while they were written (registered,
   * not live, named by no running lease): the version is discarded (registered again, so that what
   * is left of it is deleted) and the load fails; the version served before stays.
   * @throws StoreUnavailableError
   */
  async #checkLease(state: ModelState, lapseMark: number): Promise<void> {
    const ctl = this.#shared!;
    let cause: unknown;
    try {
      await ctl.renew(state.name);
      if (ctl.lapses(state.name) === lapseMark) {
        this.#lapseMarks.set(state, lapseMark);
        return;
      }
    } catch (e) {
      cause = e;
    }
    const why =
      cause === undefined
        ? `this server's lease lapsed while it loaded (no renewal reached Redis for ${this.#sharedSettings.leaseMs} ms): other servers may have deleted part of it`
        : `its lease could not be renewed at the end of the load (${(cause as Error).message})`;
    await this.#discard(state, why, cause);
  }

  /**
   * Discards version `state` this server wrote into the shared L2 and may have lost: registered again
   * (what is left of it is deleted once no server uses it), disposed; the load fails.
   * @throws StoreUnavailableError
   */
  async #discard(state: ModelState, why: string, cause?: unknown): Promise<never> {
    await this.#shared!.register(state.name, state.l2Suffix, tablesOf(state.config)).catch(() => undefined);
    await state.dispose();
    throw new StoreUnavailableError(`Model ${JSON.stringify(state.name)}: version ${state.seq} (${state.l2Suffix || 'the stable tables'}) was discarded, not served or published: ${why}; load the model again`, cause === undefined ? undefined : { cause });
  }

  /** Whether this server's lease lapsed since version `state`, loaded here, was registered (another server may have deleted it). */
  #lost(state: ModelState): boolean {
    const mark = this.#lapseMarks.get(state);
    return mark !== undefined && this.#shared!.lapses(state.name) !== mark;
  }

  /**
   * Publishes a version this server wrote into the shared L2 (retried by the timer when Redis fails),
   * unless this server's lease lapsed since (#afterLapse then switches it to the live version): checked
   * here (the lapses its renewals found) and by the publishing script (the lease must exist in Redis).
   * @returns false when it was not published for a lapse (never retried), true when it was or will be retried
   */
  async #publish(state: ModelState): Promise<boolean> {
    const p = this.#publications.get(state) ?? { started: 0, running: 0 };
    this.#publications.set(state, p);
    p.started++;
    p.running++;
    let published = !this.#lost(state);
    try {
      if (published) {
        const version = { seq: state.seq, suffix: state.l2Suffix, tables: state.tables.map((t) => ({ name: t.name, dim: t.dim, rows: t.rows })), files: state.files ?? [] };
        published = await this.#shared!.publish(state.name, version, this.#lapseMarks.get(state));
      }
    } catch (e) {
      this.#unpublished.add(state);
      this.#sharedError.set(state.name, { seq: state.seq, message: `could not publish version ${state.seq}: ${(e as Error).message}` });
      return true;
    } finally {
      p.running--;
    }
    this.#unpublished.delete(state);
    if (!published) this.#sharedError.set(state.name, { seq: state.seq, message: `version ${state.seq} was not published: this server's lease lapsed before it was (another server may have deleted it)` });
    return published;
  }

  /** A version's end on a shared L2: its use ends, the lease says so, and versions no server uses are deleted. */
  async #released(model: string, release: () => void): Promise<void> {
    release();
    if (this.#closed) return; // close() collects once for every model
    await this.#shared!.renew(model);
    await this.#collect(model);
  }

  /** Deletes the `.v<seq>` table sets of `model` that no live server uses (SharedL2Control.collect; `leaving`: this server's lease ends first). */
  async #collect(model: string, leaving = false): Promise<string[]> {
    const l2 = this.#ctx.volatileDb!;
    return this.#shared!.collect(model, async (suffix, tables) => {
      await Promise.all(
        tables.map(async (t) => {
          const name = `${model}.${t.name}${suffix}`;
          await l2.createTable(name, t.dim);
          await l2.deleteTable(name);
        }),
      );
    }, leaving);
  }

  /** Starts the shared-L2 timer: renews the lease, follows newer published versions, collects (never holds the process open). */
  #startSharedTimer(): void {
    if (!this.#shared || this.#closed) return;
    const next = (): void => {
      if (this.#closed) return;
      this.#sharedTimer = setTimeout(() => {
        this.#sharedTimer = null;
        this.#sharedTick = this.#tick().finally(() => {
          this.#sharedTick = null;
          next();
        });
      }, this.#sharedSettings.pollIntervalMs).unref();
    };
    next();
  }

  /** One poll of the shared L2 (errors are kept for modelInfo; the next poll tries again). */
  async #tick(): Promise<void> {
    const ctl = this.#shared!;
    try {
      await ctl.renew();
      this.#renewError = null;
      this.#renewedAt = Date.now();
    } catch (e) {
      this.#renewError =
        `renewing this server's lease in Redis failed (${(e as Error).message}): once none succeeds for ` +
        `leaseMs (${this.#sharedSettings.leaseMs} ms), other servers may delete the versions it serves`;
    }
    for (const name of ctl.takeLapsed()) {
      // the versions it used that a collection deleted were registered again by the renewal that found
      // the lapse; the served one is checked once no switch of the model runs (one running is
      // checked at its end: #checkAdoption, #checkLease)
      const again = ctl.takeRegisteredAgain(name);
      if (!this.#closed) this.#adopt(name, () => this.#afterLapse(name, again).catch(() => undefined), true);
    }
    for (const state of [...this.#unpublished]) {
      if (this.#closed) return;
      if (this.#models.get(state.name) === state) await this.#publish(state);
      else this.#unpublished.delete(state);
    }
    for (const [name, m] of [...this.#models]) {
      if (this.#closed) return;
      // a server that found nothing published (the stable tables, seq 0) takes the first version published, whatever followReloads says
      if (this.#sharedSettings.followReloads || (m.seq === 0 && !m.wroteL2)) this.#adopt(name, () => this.#follow(m));
      else if (m.wroteL2) await this.#readLive(name, m).catch(() => undefined);
      await this.#collect(name).catch(() => undefined);
    }
  }

  /**
   * Runs `switchTo` for model `name` in the background unless a switch of it already runs (a
   * switch that streams files into L3 must not stop the lease renewals); `queue`: after that one
   * instead. close() waits for it.
   */
  #adopt(name: string, switchTo: () => Promise<void>, queue = false): void {
    const running = this.#adopting.get(name);
    if (running && !queue) return;
    const p: Promise<void> = (running ? running.catch(() => undefined).then(switchTo) : switchTo()).finally(() => {
      if (this.#adopting.get(name) === p) this.#adopting.delete(name);
    });
    this.#adopting.set(name, p);
  }

  /**
   * After this server's lease lapsed (run once no switch of model `name` runs): another server's
   * collection may have deleted the version it serves (every registered version but the live one can
   * go, the stable tables included; `again`: the suffixes found deleted, registered again by the renewal
   * that found the lapse, so that keys written into them since, by L3 write-backs or updates, are
   * collected once nothing uses them), so unless it serves the live one, it switches to the live version, whatever
   * `followReloads` says. What happened is kept for modelInfo.
   */
  async #afterLapse(name: string, again: readonly string[]): Promise<void> {
    const ctl = this.#shared!;
    const m = this.#models.get(name);
    if (!m || this.#closed) return; // unloaded, or still loading (#checkAdoption / #checkLease check its end)
    const lapse = `this server's lease lapsed (no renewal reached Redis for ${this.#sharedSettings.leaseMs} ms)`;
    const live = await ctl.live(m.name);
    if (live?.suffix === m.l2Suffix) {
      // never collected; other versions it used may have been (a replaced one that lookups in flight still read)
      if (again.length) this.#lapseNote.set(m.name, `${lapse}; another server deleted versions it still used (${again.map((s) => s || 'the stable tables').join(', ')}): registered again, so that what is written into them is deleted once no server uses them`);
      return;
    }
    let kept = !again.includes(m.l2Suffix);
    if (kept && !(await ctl.registered(m.name, m.l2Suffix))) {
      // not named by the lease when the lapse was found, or deleted since
      kept = false;
      await ctl.register(m.name, m.l2Suffix, tablesOf(m.config));
    }
    const what = `while it served version ${m.seq} (${m.l2Suffix || 'the stable tables'}), not the live one${kept ? '' : ', and another server deleted that version'}`;
    const adoption = live ? await this.#leaseLive(m.config) : null;
    if (!adoption) {
      this.#lapseNote.set(m.name, `${lapse} ${what}; no live version to switch to: lookups may return initial values`);
      return;
    }
    this.#lapseNote.set(m.name, `${lapse} ${what}; switching to the live version ${adoption.version.seq}`);
    try {
      const state = await this.#load(m.config, { ...adoption, replaces: m, force: !kept || this.#lost(m) });
      const now = state.seq === adoption.version.seq ? `switched to the live version ${state.seq}` : `a later load (version ${state.seq}) is served`;
      this.#lapseNote.set(m.name, `${lapse} ${what}; ${now}`);
    } catch (e) {
      this.#lapseNote.set(m.name, `${lapse} ${what}; switching to the live version ${adoption.version.seq} failed: ${(e as Error).message}`);
    }
  }

  /** A renewal of this server's lease that has not succeeded for half of leaseMs (Redis slow or unreachable), else null. */
  #renewLate(): string | null {
    const { leaseMs } = this.#sharedSettings;
    const ms = Date.now() - this.#renewedAt;
    if (this.#closed || ms <= leaseMs / 2) return null;
    return `no renewal of this server's lease in Redis has succeeded for ${ms} ms (Redis slow or unreachable): after leaseMs (${leaseMs} ms) other servers may delete the versions it serves`;
  }

  /** Switches model `m` to a newer version published in the shared L2, if any. */
  async #follow(m: ModelState): Promise<void> {
    // a version whose lease lapsed while it was prepared, then replaced: the next live one
    for (let attempt = 0; attempt < 5; attempt++) {
      let adoption: Adoption | null;
      try {
        adoption = await this.#leaseLive(m.config, m.seq, m);
      } catch {
        return; // Redis unreachable: the next poll tries again
      }
      if (!adoption) return;
      if (this.#closed || this.#models.get(m.name) !== m) {
        adoption.release();
        return;
      }
      try {
        await this.#load(m.config, { ...adoption, replaces: m });
        this.#sharedError.delete(m.name);
        this.#lapseNote.delete(m.name);
        return;
      } catch (e) {
        if (e instanceof AdoptionLapsed) continue;
        if (!this.#closed && this.#models.has(m.name)) this.#sharedError.set(m.name, { seq: adoption.version.seq, message: `could not load published version ${adoption.version.seq}: ${(e as Error).message}` });
        return;
      }
    }
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
    /** The version of the shared (Redis) L2 served; null without a Redis L2. */
    sharedL2: SharedL2Info | null;
  } {
    const m = this.#model(modelName);
    const c = m.config;
    const cacheOf = (t: TableState): CacheInfo | null => {
      const l1 = t.caches.values().next().value;
      if (!l1) return null;
      const rows = Number.isFinite(l1.capacity) ? l1.slots() : t.rows;
      if (c.embeddingCacheType !== 'uvm') return { type: c.embeddingCacheType, rows };
      const deviceRows = Math.min(t.rows, rowShare(c.gpucacheper, t.rows, 'floor'));
      return { type: 'uvm', rows, deviceRows, hostRows: t.rows - deviceRows };
    };
    const error = this.#sharedError.get(m.name)?.message ?? this.#lapseNote.get(m.name) ?? this.#renewError ?? this.#renewLate();
    const sharedL2 = this.#shared ? { seq: m.seq, suffix: m.l2Suffix, loadedHere: m.wroteL2, error } : null;
    return { model: m.name, version: m.version, tables: m.tables.map((t) => ({ name: t.name, dim: t.dim, rows: t.rows, maxKeys: t.maxKeys, cache: cacheOf(t) })), sharedL2 };
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
   * since the server was created (reloads and unloads of the model included). @throws NotFoundError, OutOfRangeError
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
    await this.#loadOrAttach(cfg);
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

  /**
   * Stops the update source and the shared-L2 timer, waits for lookups in flight, frees caches,
   * ends this server's lease in a shared L2 (deleting the `.v<seq>` sets no live server uses; the
   * published one stays) and closes L2/L3. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#sharedTimer) clearTimeout(this.#sharedTimer);
    await this.#sharedTick;
    await Promise.allSettled([...this.#adopting.values()]);
    await this.#updates?.stop();
    for (const m of this.#models.values()) await m.dispose();
    const names = [...this.#models.keys()];
    this.#models.clear();
    // concurrently: an unreachable Redis costs one timeout
    // (each collection ends this server's lease of its model first, so what only this server used goes too)
    if (this.#shared) await Promise.allSettled([...names.map((n) => this.#collect(n, true)), this.#shared.close()]);
    await this.#ctx.volatileDb?.close();
    await this.#ctx.persistentDb?.close();
  }

  /** Whether `close()` has been called. */
  get closed(): boolean {
    return this.#closed;
  }
}
