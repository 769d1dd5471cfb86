import {
  type Bag,
  DisposedError,
  isCombiner,
  type LookupCombiner,
  type EmbeddingTable,
  type FindOutput,
  type FindResult,
  type Keys,
  type OptimizerSpec,
  type ShardPlan,
  UnsupportedError,
} from '@embedstack/core';
import { storageDtype } from './keys.js';
import type { ShardTableSpec } from './kvCreators.js';
import { defaultPartitionFn, type Partition, partitionKeys, scatterRows } from './partition.js';
import type { RestrictPolicy } from './restrictPolicy.js';
import type { ShadowVariable } from './shadow.js';
import { type ShardStore, tableStore } from './stores.js';
import type { ResolvedVariableOptions } from './variableOptions.js';

/** How an optimizer is attached to a Variable (made on its first training step). */
export interface Binding {
  readonly owner: object;
  readonly spec: OptimizerSpec;
  /** Slots beside the variable's own rows, one fused update per row. */
  readonly fused: boolean;
  readonly bpV2: boolean;
  /** Not fused: per shard, an in-memory table holding a copy of the row and the slots. */
  readonly stateTables: EmbeddingTable[] | null;
  /** Names of the slot views (`<variable>/<optimizer>/<slot>`), in slot order. */
  readonly slotViewNames: readonly string[];
}

/** What a view Variable (a slot) is built from. */
export interface ViewSource {
  stores: ShardStore[];
  tables: () => EmbeddingTable[];
}

const states = new WeakMap<object, VariableState>();

/** The internal object of a Variable (or undefined for anything else). */
export function stateOf(v: unknown): VariableState | undefined {
  return typeof v === 'object' && v !== null ? states.get(v) : undefined;
}

/**
 * The internal object of a de.Variable: its shard tables and stores, the optimizer
 * binding, the trainables its lookups registered, and the shard operations the
 * other modules of this package share (lookups, training, restrict policies,
 * checkpoints receive it; it is not part of the public API). One per Variable.
 */
export class VariableState {
  readonly cfg: ResolvedVariableOptions;
  readonly shardNum: number;
  tables: EmbeddingTable[];
  readonly stores: ShardStore[];
  /** Non-null for slot views: the tables and stores of the primary variable's slots. */
  readonly view: ViewSource | null;
  readonly trainables = new Map<string, ShadowVariable>();
  binding: Binding | null = null;
  bindingPending: Promise<Binding> | null = null;
  restrictPolicy: RestrictPolicy | null = null;
  disposed = false;
  /** Run once by dispose (e.g. forgetting the variable in getVariable's registry). */
  readonly onDispose: (() => void)[] = [];
  /**
   * Trainables whose last lookup's rows (v0) were not copied yet: nothing wrote this
   * variable since that lookup, so the current rows are v0. The first write copies them.
   */
  readonly pending = new Set<ShadowVariable>();

  /** Creates the shard tables (none for views). @throws the creator's errors (tables made so far are disposed) */
  constructor(owner: object, cfg: ResolvedVariableOptions, view: ViewSource | null) {
    this.cfg = cfg;
    this.shardNum = cfg.devices.length;
    this.view = view;
    if (view) {
      this.tables = [];
      this.stores = view.stores;
    } else {
      const tables: EmbeddingTable[] = [];
      try {
        for (let i = 0; i < this.shardNum; i++) tables.push(cfg.kvCreator.create(this.shardSpec(i, null)));
      } catch (e) {
        for (const t of tables) t.dispose();
        throw e;
      }
      this.tables = tables;
      this.stores = tables.map((_, i) => tableStore(() => this.table(i), cfg.kvCreator));
    }
    states.set(owner, this);
  }

  get name(): string {
    return this.cfg.name;
  }

  get dim(): number {
    return this.cfg.dim;
  }

  shardSpec(i: number, optimizer: OptimizerSpec | null): ShardTableSpec {
    const c = this.cfg;
    return {
      variableName: c.name,
      tableName: `${c.name.replaceAll('/', '_')}_mht_${i + 1}of${this.shardNum}`,
      shardIndex: i,
      shardNum: this.shardNum,
      dim: c.dim,
      keyDtype: storageDtype(c.keyDtype),
      storageDtype: c.valueDtype,
      initializer: c.coreInitializer,
      seed: c.seed,
      stream: c.stream,
      initSize: Math.max(1, Math.floor(c.initSize / this.shardNum)),
      optimizer,
    };
  }

  checkAlive(): void {
    if (this.disposed) throw new DisposedError(`Variable "${this.name}" was disposed`);
  }

  table(i: number): EmbeddingTable {
    this.checkAlive();
    return this.tables[i]!;
  }

  /** Tables of the variable (for views: of the slots they read). */
  ownTables(): EmbeddingTable[] {
    return this.view ? this.view.tables() : this.tables;
  }

  /**
   * Core shard plans when the default partitioner places keys (floor-mod: key k on
   * shard floorMod(k, N) under its own key), so shard routing runs in the backend;
   * null with a custom partitioner (routed in JS) and for views.
   */
  plans(): ShardPlan[] | null {
    if (this.view || this.cfg.partitioner !== defaultPartitionFn) return null;
    if (this.shardNum === 1) return [{ placement: 'localized' }];
    return Array.from({ length: this.shardNum }, (_, d): ShardPlan => ({ placement: 'mod', numShards: this.shardNum, shard: d }));
  }

  partition(keys: Keys): Partition {
    return partitionKeys(keys, this.shardNum, this.cfg.partitioner);
  }

  /** Shards that have keys in `p` (or every shard when `p` is null). */
  shards(p: Partition | null): number[] {
    const all = Array.from({ length: this.shardNum }, (_, s) => s);
    return p === null || this.shardNum === 1 ? all : all.filter((s) => p.keys[s]!.length > 0);
  }

  /** Runs `fn` on every shard that has keys, concurrently (remote shards overlap their round trips). */
  async eachShard<T>(p: Partition, fn: (store: ShardStore, s: number) => Promise<T>): Promise<T[]> {
    this.checkAlive();
    return Promise.all(this.shards(p).map((s) => fn(this.stores[s]!, s)));
  }

  /** Runs `fn` on the own table of each shard of `p` (null: every shard). @throws UnsupportedError for views */
  eachTableSync<T>(p: Partition | null, fn: (table: EmbeddingTable, s: number) => T): T[] {
    this.checkAlive();
    if (this.view) throw new UnsupportedError(`Slot variable "${this.name}" offers no synchronous operations; use the Promise form`);
    return this.shards(p).map((s) => fn(this.tables[s]!, s));
  }

  /**
   * Reads `keys` (never inserts) into `out` (fresh arrays for what it omits). One
   * shard with the default partitioner: the backend gets the caller's keys and
   * arrays as they are (and allocates what `out` omits itself). Several shards with
   * shard plans: every shard's backend writes its own keys' rows straight into one
   * result. A custom partitioner: the keys are partitioned here and scattered back.
   */
  async find(keys: Keys, out?: FindOutput): Promise<FindResult> {
    this.checkAlive();
    const plans = this.plans();
    if (plans && plans.length === 1) return this.stores[0]!.find(keys, out ? { out } : undefined);
    const r = this.#result(keys.length, out);
    if (plans) {
      await Promise.all(this.stores.map((st, s) => st.find(keys, { out: r, plan: plans[s]! })));
      return r;
    }
    const p = this.partition(keys);
    await this.eachShard(p, async (st, s) => this.#place(r, p, s, await st.find(p.keys[s]!)));
    return r;
  }

  /** {@link find} of in-memory tables, synchronously. @throws UnsupportedError for views and remote stores */
  findSync(keys: Keys, out?: FindOutput): FindResult {
    const plans = this.plans();
    if (plans && plans.length === 1) return this.eachTableSync(null, (t) => t.findSync(keys, out ? { out } : undefined))[0]!;
    const r = this.#result(keys.length, out);
    if (plans) {
      this.eachTableSync(null, (t, s) => t.findSync(keys, { out: r, plan: plans[s]! }));
      return r;
    }
    const p = this.partition(keys);
    this.eachTableSync(p, (t, s) => this.#place(r, p, s, t.findSync(p.keys[s]!)));
    return r;
  }

  /** The arrays of a find of n keys: the caller's, fresh ones for what `out` omits. */
  #result(n: number, out: FindOutput | undefined): FindResult {
    return { values: out?.values ?? new Float32Array(n * this.dim), exists: out?.exists ?? new Uint8Array(n) };
  }

  #place(out: FindResult, p: Partition, s: number, r: FindResult): void {
    const positions = p.positions[s]!;
    scatterRows(out.values, positions, r.values, this.dim);
    for (let i = 0; i < positions.length; i++) out.exists[positions[i]!] = r.exists[i]!;
  }

  /**
   * The embedding bag of `bag` (core's lookupCombined: maxNorm clip, weights,
   * combiner) into `out` [nrows * dim] (null: a fresh array), never inserting. One
   * shard: the backend pools straight into `out` (or its own result). Several shards
   * with the default partitioner and a linear combiner: each shard adds its part to
   * one float64 sum (core's lookupCombinedPartial), rounded once. Otherwise ('max' /
   * 'min' over shards, a custom partitioner): the rows are read per shard (find) and
   * pooled by core on a scratch table.
   */
  pool(bag: Bag<Keys>, combiner: LookupCombiner, maxNorm: number, out: Float32Array | null): Promise<Float32Array> {
    this.checkAlive();
    const o = { combiner, maxNorm: maxNorm || null, out };
    const plans = this.plans();
    if (plans && plans.length === 1) {
      // a prepared table starts the backend's work before this returns (the caller overlaps its own work with it)
      const table = this.stores[0]!.readyNow();
      return table ? table.lookupCombined(bag, o) : this.stores[0]!.ready().then((t) => t!.lookupCombined(bag, o));
    }
    return this.#poolShards(bag, combiner, maxNorm, out, plans);
  }

  async #poolShards(bag: Bag<Keys>, combiner: LookupCombiner, maxNorm: number, out: Float32Array | null, plans: ShardPlan[] | null): Promise<Float32Array> {
    const o = { combiner, maxNorm: maxNorm || null, out };
    if (plans && isCombiner(combiner)) {
      const sum = new Float64Array((bag.rowSplits.length - 1) * this.dim);
      for (let s = 0; s < this.shardNum; s++) await (await this.stores[s]!.ready())!.lookupCombinedPartial(bag, { ...o, combiner, plan: plans[s]!, out: sum });
      return roundInto(out, sum);
    }
    const rows = (await this.find(bag.keys)).values;
    const scratch = this.cfg.kvCreator.scratchTable(this.shardSpec(0, null), bag.keys.length);
    try {
      await scratch.upsert(bag.keys, rows);
      return await scratch.lookupCombined(bag, o);
    } finally {
      scratch.dispose();
    }
  }

  /** {@link pool} of in-memory tables, synchronously. @throws UnsupportedError for views and remote stores */
  poolSync(bag: Bag<Keys>, combiner: LookupCombiner, maxNorm: number, out: Float32Array | null): Float32Array {
    const o = { combiner, maxNorm: maxNorm || null, out };
    const plans = this.plans();
    if (plans && plans.length === 1) return this.eachTableSync(null, (t) => t.lookupCombinedSync(bag, o))[0]!;
    if (plans && isCombiner(combiner)) {
      const sum = new Float64Array((bag.rowSplits.length - 1) * this.dim);
      this.eachTableSync(null, (t, s) => t.lookupCombinedPartialSync(bag, { ...o, combiner, plan: plans[s]!, out: sum }));
      return roundInto(out, sum);
    }
    const rows = this.findSync(bag.keys).values;
    const scratch = this.cfg.kvCreator.scratchTable(this.shardSpec(0, null), bag.keys.length);
    try {
      scratch.upsertSync(bag.keys, rows);
      return scratch.lookupCombinedSync(bag, o);
    } finally {
      scratch.dispose();
    }
  }

  /** Removes `keys` of shard `s` from the variable, its companion slot table and its restrict status. */
  async removeFromShard(s: number, keys: Keys): Promise<number> {
    const n = await this.stores[s]!.remove(keys);
    const state = this.binding?.stateTables?.[s];
    if (state) await state.remove(keys);
    const status = this.restrictPolicy?.status;
    if (status) await stateOf(status)!.tables[s]!.remove(keys);
    return n;
  }

  /** Copies the rows of every pending trainable's lookup (except `except`): called before any write. */
  async beforeWrite(except: ShadowVariable | null = null): Promise<void> {
    for (const t of [...this.pending]) if (t !== except) await t.capture();
  }

  /** {@link beforeWrite} for in-memory tables, synchronously. */
  beforeWriteSync(): void {
    for (const t of [...this.pending]) t.captureSync();
  }

  /** Frees the tables (and slots and status). Idempotent. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const f of this.onDispose.splice(0)) f();
    this.pending.clear();
    if (this.view) return;
    for (const t of this.tables) t.dispose();
    for (const t of this.binding?.stateTables ?? []) t.dispose();
    this.restrictPolicy?.status.dispose();
  }
}

/** The float64 sums rounded once to float32, into `out` (null: a fresh array). */
function roundInto(out: Float32Array | null, sum: Float64Array): Float32Array {
  const r = out ?? new Float32Array(sum.length);
  r.set(sum);
  return r;
}
