import {
  AlreadyExistsError,
  type EmbeddingTable,
  FailedPreconditionError,
  type FindResult,
  fnv1a32,
  type InitializerSpec,
  InvalidTypeError,
  invalidParameter,
  type Keys,
  OutOfRangeError,
  type OptimizerSpec,
  Tensor,
  UnsupportedError,
  validateExists,
  validateValues,
} from '@embedstack/core';
import { loadVariable, type LoadOptions, type SaveOptions, saveVariable } from './checkpoint.js';
import { INTERNAL } from './internal.js';
import { type VariableInitializer, toCoreInitializer } from './initializer.js';
import { storageDtype, type TfraKeyDtype, toKeys, uniqueKeys, type VariableKeys } from './keys.js';
import { CuckooHashTableCreator, KVCreator, type ShardTableSpec } from './kvCreators.js';
import {
  defaultPartitionFn,
  gatherFlags,
  gatherRows,
  type Partition,
  partitionKeys,
  type Partitioner,
  scatterRows,
} from './partition.js';
import { isRestrictPolicyClass, type RestrictOptions, type RestrictPolicy, type RestrictPolicyClass } from './restrictPolicy.js';
import type { ShadowVariable } from './shadow.js';
import { type ShardStore, slotStore, tableStore } from './stores.js';
import { checkBoolean, checkOptionsObject, type VariableValues } from './values.js';

/** Options of `new de.Variable(...)` (TFRA's keyword arguments, camelCase). */
export interface VariableOptions {
  /** 'int64' (default), 'int32', or 'string' (hashed to int64 with `hashString64`). */
  keyDtype?: TfraKeyDtype;
  /** Only 'float32'. */
  valueDtype?: 'float32';
  /** Floats per key. Default 1. */
  dim?: number;
  /** One shard (table) per entry; labels only, every shard lives on the active backend. Default ['cpu:0']. */
  devices?: readonly string[] | string;
  /** Places keys on shards. Default `defaultPartitionFn` (non-negative `key % N`). */
  partitioner?: Partitioner;
  /** Accepted for parity; unused. */
  sharedName?: string;
  /** Default 'DynamicEmbedding_Variable' (TFRA). */
  name?: string;
  /** Value of keys not in the table; see `toCoreInitializer`. Default zeros. */
  initializer?: VariableInitializer;
  /** Trained by optimizers. Default true. */
  trainable?: boolean;
  /** Saved by checkpoints. Default true. */
  checkpoint?: boolean;
  /** Rows reserved up front, split evenly over the shards. Default 0 (the creator's default). */
  initSize?: number;
  /** Where the tables live. Default `new CuckooHashTableCreator()`. */
  kvCreator?: KVCreator;
  /** A restrict policy class (TimestampRestrictPolicy, FrequencyRestrictPolicy). Default none. */
  restrictPolicy?: RestrictPolicyClass | null;
  /** Train by adding deltas (accum) instead of setting values. Default false. */
  bpV2?: boolean;
  /** Seed of random initializers (uint32). Default 0. An embedstack extension. */
  seed?: number;
}

const KNOWN_OPTIONS = [
  'keyDtype',
  'valueDtype',
  'dim',
  'devices',
  'partitioner',
  'sharedName',
  'name',
  'initializer',
  'trainable',
  'checkpoint',
  'initSize',
  'kvCreator',
  'restrictPolicy',
  'bpV2',
  'seed',
];

/** How an optimizer is attached to a Variable (made on its first training step). */
export interface Binding {
  readonly owner: object;
  readonly spec: OptimizerSpec;
  /** Slots beside the variable's own rows, one fused update per row. */
  readonly fused: boolean;
  readonly bpV2: boolean;
  /** Not fused: per shard, an in-memory table holding a copy of the row and the slots. */
  readonly stateTables: EmbeddingTable[] | null;
  readonly views: Variable[];
}

/** What a view Variable (a slot) is built from. */
interface ViewSource {
  stores: ShardStore[];
  tables: () => EmbeddingTable[];
}

export interface LookupOptions {
  /** Also return, per key, whether it was in the table. Default false. */
  returnExists?: boolean | null;
}

export interface LookupWithExists {
  values: Tensor<Float32Array>;
  exists: boolean[];
}

const registry = new Map<string, Variable>();

function validateDevices(devices: unknown): string[] {
  if (devices === undefined || devices === null) return ['cpu:0'];
  const list = typeof devices === 'string' ? [devices] : devices;
  if (!Array.isArray(list) || list.length === 0 || list.some((d) => typeof d !== 'string' || d.length === 0)) {
    throw invalidParameter('devices', 'a non-empty array of device names', devices, InvalidTypeError);
  }
  return list.slice();
}

function intOption(v: unknown, argument: string, min: number, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    throw invalidParameter(argument, `an integer in [${min}, ${max}]`, v);
  }
  return v;
}

/**
 * TFRA's `dynamic_embedding.Variable`: a distributed hash table from keys to
 * `dim` float32 values, one shard (core table) per device. Tables live where the
 * kv creator puts them (memory of the active backend by default, or Redis).
 * A rejected call changes nothing: every argument is validated before any shard
 * is written (a remote store failing mid-call is the one exception; the error
 * says so). Not safe for concurrent writes to the same keys from several calls
 * beyond what each shard's backend guarantees.
 */
export class Variable {
  readonly name: string;
  readonly keyDtype: TfraKeyDtype;
  readonly valueDtype = 'float32' as const;
  readonly dim: number;
  readonly devices: readonly string[];
  readonly shardNum: number;
  readonly partitioner: Partitioner;
  readonly sharedName: string;
  readonly initializer: VariableInitializer;
  readonly trainable: boolean;
  readonly checkpoint: boolean;
  readonly initSize: number;
  readonly kvCreator: KVCreator;
  readonly bpV2: boolean;
  readonly seed: number;
  /** The policy instance (constructed from the `restrictPolicy` class), or null. */
  readonly restrictPolicy: RestrictPolicy | null;

  readonly #coreInitializer: InitializerSpec;
  #tables: EmbeddingTable[];
  readonly #stores: ShardStore[];
  readonly #view: ViewSource | null;
  readonly #trainables = new Map<string, ShadowVariable>();
  #binding: Binding | null = null;
  #bindingPending: Promise<Binding> | null = null;
  #disposed = false;

  /**
   * @throws InvalidArgumentError / InvalidTypeError naming the option (restrictPolicy not a policy class: InvalidTypeError)
   */
  constructor(options: VariableOptions = {}, view: ViewSource | null = null) {
    const o = checkOptionsObject(options, 'options', KNOWN_OPTIONS) as VariableOptions;
    const keyDtype = o.keyDtype ?? 'int64';
    if (keyDtype !== 'int64' && keyDtype !== 'int32' && keyDtype !== 'string') {
      throw invalidParameter('keyDtype', "'int64', 'int32' or 'string'", keyDtype, InvalidTypeError);
    }
    if ((o.valueDtype ?? 'float32') !== 'float32') throw invalidParameter('valueDtype', "'float32'", o.valueDtype, InvalidTypeError);
    const dim = intOption(o.dim, 'dim', 1, 1);
    const devices = validateDevices(o.devices);
    const partitioner = o.partitioner ?? defaultPartitionFn;
    if (typeof partitioner !== 'function') throw invalidParameter('partitioner', 'a function (keys, shardNum) => shard indices', partitioner, InvalidTypeError);
    const name = o.name ?? 'DynamicEmbedding_Variable';
    if (typeof name !== 'string' || name.length === 0) throw invalidParameter('name', 'a non-empty string', name);
    const coreInit = toCoreInitializer(o.initializer, dim);
    const trainable = checkBoolean(o.trainable, 'trainable', true);
    const checkpoint = checkBoolean(o.checkpoint, 'checkpoint', true);
    const initSize = intOption(o.initSize, 'initSize', 0, 0);
    const kvCreator = o.kvCreator ?? new CuckooHashTableCreator();
    if (!(kvCreator instanceof KVCreator)) {
      throw invalidParameter('kvCreator', 'a kv creator (CuckooHashTableCreator, HkvHashTableCreator, RedisTableCreator)', kvCreator, InvalidTypeError);
    }
    const policyClass = o.restrictPolicy ?? null;
    if (policyClass !== null && !isRestrictPolicyClass(policyClass)) {
      throw invalidParameter('restrictPolicy', 'a restrict policy class (TimestampRestrictPolicy or FrequencyRestrictPolicy)', policyClass, InvalidTypeError);
    }
    const bpV2 = checkBoolean(o.bpV2, 'bpV2', false);
    const seed = intOption(o.seed, 'seed', 0, 0, 0xffffffff);
    if (o.sharedName !== undefined && typeof o.sharedName !== 'string') throw invalidParameter('sharedName', 'a string', o.sharedName, InvalidTypeError);

    this.name = name;
    this.keyDtype = keyDtype;
    this.dim = dim;
    this.devices = Object.freeze(devices);
    this.shardNum = devices.length;
    this.partitioner = partitioner;
    this.sharedName = o.sharedName ?? `shared_name.${name}`;
    this.initializer = o.initializer;
    this.trainable = trainable;
    this.checkpoint = checkpoint;
    this.initSize = initSize;
    this.kvCreator = kvCreator;
    this.bpV2 = bpV2;
    this.seed = seed;
    this.#coreInitializer = coreInit;
    this.#view = view;
    if (view) {
      this.#tables = [];
      this.#stores = view.stores;
    } else {
      const tables: EmbeddingTable[] = [];
      try {
        for (let i = 0; i < this.shardNum; i++) tables.push(kvCreator.create(this.#shardSpec(i, null)));
      } catch (e) {
        for (const t of tables) t.dispose();
        throw e;
      }
      this.#tables = tables;
      this.#stores = tables.map((_, i) => tableStore(() => this.#table(i), kvCreator));
    }
    this.restrictPolicy = policyClass ? new policyClass(this) : null;
  }

  #shardSpec(i: number, optimizer: OptimizerSpec | null): ShardTableSpec {
    return {
      variableName: this.name,
      tableName: `${this.name.replaceAll('/', '_')}_mht_${i + 1}of${this.shardNum}`,
      shardIndex: i,
      shardNum: this.shardNum,
      dim: this.dim,
      keyDtype: storageDtype(this.keyDtype),
      initializer: this.#coreInitializer,
      seed: this.seed,
      stream: fnv1a32(this.name),
      initSize: this.initSize > 0 ? Math.max(1, Math.floor(this.initSize / this.shardNum)) : 0,
      optimizer,
    };
  }

  #table(i: number): EmbeddingTable {
    this.#checkAlive();
    return this.#tables[i]!;
  }

  #checkAlive(): void {
    if (this.#disposed) throw new FailedPreconditionError(`Variable "${this.name}" was disposed`);
  }

  #keys(input: unknown, argument = 'keys'): { keys: Keys; shape: number[] } {
    return toKeys(input, this.keyDtype, argument);
  }

  #partition(keys: Keys): Partition {
    return partitionKeys(keys, this.shardNum, this.partitioner);
  }

  /** Runs `fn` on every shard that has keys, concurrently (remote shards overlap their round trips). */
  async #eachShard<T>(p: Partition, fn: (store: ShardStore, s: number) => Promise<T>): Promise<T[]> {
    this.#checkAlive();
    return Promise.all(this.#shards(p).map((s) => fn(this.#stores[s]!, s)));
  }

  /**
   * Inserts or overwrites `keys` with `values` ([n, dim]: flat, or a Tensor of shape keys.shape + [dim]).
   * @throws ShapeMismatchError "Expected shape ..." when values do not match; InvalidTypeError for bad keys
   */
  async upsert(keys: VariableKeys, values: VariableValues): Promise<void> {
    const { p, rows } = this.#upsertPlan(keys, values);
    await this.#eachShard(p, (st, s) => st.upsert(p.keys[s]!, rows(s)));
  }

  /** `upsert` for in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  upsertSync(keys: VariableKeys, values: VariableValues): void {
    const { p, rows } = this.#upsertPlan(keys, values);
    this.#eachTableSync(p, (t, s) => t.upsertSync(p.keys[s]!, rows(s), this.#scores(p.keys[s]!)));
  }

  #upsertPlan(keys: VariableKeys, values: VariableValues) {
    const k = this.#keys(keys);
    const v = validateValues(values, k.shape, this.dim);
    const p = this.#partition(k.keys);
    return { p, rows: (s: number) => gatherRows(v, p.positions[s]!, this.dim) };
  }

  #scores(keys: Keys): { scores: BigUint64Array } | undefined {
    const s = this.kvCreator.scoresFor(keys);
    return s ? { scores: s } : undefined;
  }

  /** Shards that have keys in `p` (or every shard when `p` is null). */
  #shards(p: Partition | null): number[] {
    const all = Array.from({ length: this.shardNum }, (_, s) => s);
    return p === null || this.shardNum === 1 ? all : all.filter((s) => p.keys[s]!.length > 0);
  }

  /** Runs `fn` on the own table of each shard of `p` (null: every shard). @throws UnsupportedError for views */
  #eachTableSync<T>(p: Partition | null, fn: (table: EmbeddingTable, s: number) => T): T[] {
    this.#checkAlive();
    if (this.#view) throw new UnsupportedError(`Slot variable "${this.name}" offers no synchronous operations; use the Promise form`);
    return this.#shards(p).map((s) => fn(this.#tables[s]!, s));
  }

  /**
   * TFRA's accum: per key, delta = newValues - oldValues when `exists` (else
   * newValues); present & exists -> add the delta; absent & !exists -> insert
   * newValues; otherwise nothing (bp_v2).
   */
  async accum(keys: VariableKeys, oldValues: VariableValues, newValues: VariableValues, exists: readonly boolean[] | Uint8Array): Promise<void> {
    const { p, deltas, flags } = this.#accumPlan(keys, oldValues, newValues, exists);
    await this.#eachShard(p, (st, s) => st.accum(p.keys[s]!, deltas(s), flags(s)));
  }

  /** `accum` for in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  accumSync(keys: VariableKeys, oldValues: VariableValues, newValues: VariableValues, exists: readonly boolean[] | Uint8Array): void {
    const { p, deltas, flags } = this.#accumPlan(keys, oldValues, newValues, exists);
    this.#eachTableSync(p, (t, s) => t.accumSync(p.keys[s]!, deltas(s), flags(s), this.#scores(p.keys[s]!)));
  }

  #accumPlan(keys: VariableKeys, oldValues: VariableValues, newValues: VariableValues, exists: readonly boolean[] | Uint8Array) {
    const k = this.#keys(keys);
    const n = k.keys.length;
    const oldV = validateValues(oldValues, k.shape, this.dim, 'oldValues');
    const newV = validateValues(newValues, k.shape, this.dim, 'newValues');
    const e = validateExists(exists, n);
    const d = new Float32Array(n * this.dim);
    for (let i = 0; i < n; i++) {
      for (let c = 0; c < this.dim; c++) {
        const j = i * this.dim + c;
        d[j] = e[i] ? newV[j]! - oldV[j]! : newV[j]!;
      }
    }
    const p = this.#partition(k.keys);
    return { p, deltas: (s: number) => gatherRows(d, p.positions[s]!, this.dim), flags: (s: number) => gatherFlags(e, p.positions[s]!) };
  }

  /**
   * Reads `keys` (never inserts). Missing keys get the initializer's value.
   * Resolves to a Tensor of shape keys.shape + [dim], or `{ values, exists }` with `returnExists`.
   */
  lookup(keys: VariableKeys, options?: { returnExists?: false | null }): Promise<Tensor<Float32Array>>;
  lookup(keys: VariableKeys, options: { returnExists: true }): Promise<LookupWithExists>;
  lookup(keys: VariableKeys, options?: LookupOptions): Promise<Tensor<Float32Array> | LookupWithExists>;
  async lookup(keys: VariableKeys, options: LookupOptions = {}): Promise<Tensor<Float32Array> | LookupWithExists> {
    const [returnExists, k] = this.#lookupArgs(keys, options);
    return this.#lookupResult(await this.#find(k.keys), k.shape, returnExists);
  }

  /** `lookup` for in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  lookupSync(keys: VariableKeys, options?: { returnExists?: false | null }): Tensor<Float32Array>;
  lookupSync(keys: VariableKeys, options: { returnExists: true }): LookupWithExists;
  lookupSync(keys: VariableKeys, options: LookupOptions = {}): Tensor<Float32Array> | LookupWithExists {
    const [returnExists, k] = this.#lookupArgs(keys, options);
    const out = this.#findInto(k.keys);
    this.#eachTableSync(out.p, (t, s) => out.put(s, t.findSync(out.p.keys[s]!)));
    return this.#lookupResult(out, k.shape, returnExists);
  }

  #lookupArgs(keys: VariableKeys, options: LookupOptions): [boolean, { keys: Keys; shape: number[] }] {
    const o = checkOptionsObject(options, 'options', ['returnExists']);
    return [checkBoolean(o.returnExists, 'returnExists', false), this.#keys(keys)];
  }

  #lookupResult(r: { values: Float32Array; exists: Uint8Array }, shape: number[], returnExists: boolean): Tensor<Float32Array> | LookupWithExists {
    const tensor = new Tensor(r.values, [...shape, this.dim]);
    return returnExists ? { values: tensor, exists: Array.from(r.exists, (x) => x === 1) } : tensor;
  }

  /** Output buffers of a partitioned read and how to place one shard's result. */
  #findInto(keys: Keys) {
    const p = this.#partition(keys);
    const values = new Float32Array(keys.length * this.dim);
    const exists = new Uint8Array(keys.length);
    const put = (s: number, r: FindResult) => {
      scatterRows(values, p.positions[s]!, r.values, this.dim);
      p.positions[s]!.forEach((pos, i) => (exists[pos] = r.exists[i]!));
    };
    return { p, values, exists, put };
  }

  async #find(keys: Keys): Promise<{ values: Float32Array; exists: Uint8Array }> {
    const out = this.#findInto(keys);
    await this.#eachShard(out.p, async (st, s) => out.put(s, await st.find(out.p.keys[s]!)));
    return out;
  }

  /** Removes `keys` (missing keys are ignored) from the variable, its slots and its restrict status. Resolves to how many were removed. */
  async remove(keys: VariableKeys): Promise<number> {
    const k = this.#keys(keys);
    const p = this.#partition(k.keys);
    const counts = await this.#eachShard(p, (_, s) => this.#removeFromShard(s, p.keys[s]!));
    return counts.reduce((a, b) => a + b, 0);
  }

  /** `remove` for in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  removeSync(keys: VariableKeys): number {
    const k = this.#keys(keys);
    const p = this.#partition(k.keys);
    const counts = this.#eachTableSync(p, (t, s) => {
      const n = t.removeSync(p.keys[s]!);
      this.#binding?.stateTables?.[s]?.removeSync(p.keys[s]!);
      this.restrictPolicy?.status[INTERNAL].tables[s]!.removeSync(p.keys[s]!);
      return n;
    });
    return counts.reduce((a, b) => a + b, 0);
  }

  async #removeFromShard(s: number, keys: Keys): Promise<number> {
    const n = await this.#stores[s]!.remove(keys);
    const state = this.#binding?.stateTables?.[s];
    if (state) await state.remove(keys);
    const status = this.restrictPolicy?.status;
    if (status) await status[INTERNAL].tables[s]!.remove(keys);
    return n;
  }

  /** Removes every key (also from slots and the restrict status). */
  async clear(): Promise<void> {
    this.#checkAlive();
    for (let s = 0; s < this.shardNum; s++) {
      await this.#stores[s]!.clear();
      const state = this.#binding?.stateTables?.[s];
      if (state) await state.clear();
    }
    const status = this.restrictPolicy?.status;
    if (status) await status.clear();
  }

  /** `clear` of in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  clearSync(): void {
    this.#eachTableSync(null, (t, s) => {
      t.clearSync();
      this.#binding?.stateTables?.[s]?.clearSync();
    });
    this.restrictPolicy?.status.clearSync();
  }

  /** Every key and value of every shard (order undefined): [keys, Tensor [n, dim]]. */
  async export(): Promise<[Keys, Tensor<Float32Array>]> {
    this.#checkAlive();
    const keyParts: Keys[] = [];
    const valueParts: Float32Array[] = [];
    for (const st of this.#stores) {
      for await (const b of st.exportBatches()) {
        keyParts.push(b.keys);
        valueParts.push(b.values);
      }
    }
    return this.#concat(keyParts, valueParts);
  }

  /** `export` of in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  exportSync(): [Keys, Tensor<Float32Array>] {
    const batches = this.#eachTableSync(null, (t) => t.exportSync());
    return this.#concat(batches.map((b) => b.keys), batches.map((b) => b.values));
  }

  #concat(keyParts: Keys[], valueParts: Float32Array[]): [Keys, Tensor<Float32Array>] {
    const n = keyParts.reduce((a, b) => a + b.length, 0);
    const keys = storageDtype(this.keyDtype) === 'int64' ? new BigInt64Array(n) : new Int32Array(n);
    const values = new Float32Array(n * this.dim);
    let at = 0;
    keyParts.forEach((part, i) => {
      (keys as unknown as { set(a: ArrayLike<unknown>, o: number): void }).set(part as ArrayLike<unknown>, at);
      values.set(valueParts[i]!, at * this.dim);
      at += part.length;
    });
    return [keys, new Tensor(values, [n, this.dim])];
  }

  /** Keys in shard `index`, or in every shard when omitted. */
  async size(index?: number | null): Promise<number> {
    const shards = this.#sizeShards(index);
    let total = 0;
    for (const s of shards) total += await this.#stores[s]!.size();
    return total;
  }

  /** `size` of in-memory tables, synchronously. @throws UnsupportedError for slot views */
  sizeSync(index?: number | null): number {
    const shards = this.#sizeShards(index);
    if (this.#view) throw new UnsupportedError(`Slot variable "${this.name}" offers no synchronous operations; use the Promise form`);
    return shards.reduce((a, s) => a + this.#tables[s]!.size(), 0);
  }

  #sizeShards(index: number | null | undefined): number[] {
    this.#checkAlive();
    if (index === undefined || index === null) return Array.from({ length: this.shardNum }, (_, s) => s);
    if (typeof index !== 'number' || !Number.isSafeInteger(index)) {
      throw invalidParameter('index', `a shard index (an integer in [0, ${this.shardNum})), undefined or null`, index, InvalidTypeError);
    }
    if (index < 0 || index >= this.shardNum) throw invalidParameter('index', `a shard index in [0, ${this.shardNum})`, index, OutOfRangeError);
    return [index];
  }

  /**
   * Restricts the size by the restrict policy (keeps `numReserved` keys, runs only
   * when size() > trigger). Without a policy: warns and returns null.
   * Resolves to the number of keys removed.
   */
  restrict(numReserved: number, options: RestrictOptions = {}): Promise<number> | null {
    if (!this.restrictPolicy) {
      console.warn(`[embedstack/tfra] restrict() called on Variable "${this.name}" without a restrict policy; nothing done`);
      return null;
    }
    return this.restrictPolicy.applyRestriction(numReserved, options);
  }

  /**
   * The slot variables of `optimizer` for this variable (views over the slots that
   * live beside the rows), or [] when the optimizer has not trained it.
   * @throws InvalidTypeError when `optimizer` is not an optimizer
   */
  getSlotVariables(optimizer: object): Variable[] {
    if (typeof optimizer !== 'object' || optimizer === null || typeof (optimizer as { applyGradients?: unknown }).applyGradients !== 'function') {
      throw invalidParameter('optimizer', 'a de.optimizers optimizer', optimizer, InvalidTypeError);
    }
    return this.#binding && this.#binding.owner === optimizer ? this.#binding.views.slice() : [];
  }

  /** The trainable view registered by `embeddingLookup(this, ids, { name })`, or null. */
  getTrainableByName(name: string): ShadowVariable | null {
    if (typeof name !== 'string') throw invalidParameter('name', 'a string', name, InvalidTypeError);
    return this.#trainables.get(name) ?? null;
  }

  /**
   * Saves every shard (and its slots) under `dir` via core checkpoints:
   * `dir/<name>/proc_<rank>_of_<size>/shard_<i>_of_<N>`. Several processes of a
   * job save into the same `dir` with their own `procRank`.
   */
  async saveToFileSystem(dir: string, options: SaveOptions = {}): Promise<void> {
    this.#checkAlive();
    await saveVariable(this, dir, options);
  }

  /**
   * Loads what `saveToFileSystem` wrote (every process's files), upserting into
   * this variable (does not clear); keys are re-partitioned onto this variable's
   * shards when the saved shard count differs.
   */
  async loadFromFileSystem(dir: string, options: LoadOptions = {}): Promise<void> {
    this.#checkAlive();
    await loadVariable(this, dir, options);
  }

  /** Frees the tables (and slots and status). Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (registry.get(this.name) === this) registry.delete(this.name);
    if (this.#view) return;
    for (const t of this.#tables) t.dispose();
    for (const t of this.#binding?.stateTables ?? []) t.dispose();
    this.restrictPolicy?.status.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  // ---- package internals (optimizers, lookups, policies, checkpoints) -------

  get [INTERNAL]() {
    const tables = (): EmbeddingTable[] => (this.#view ? this.#view.tables() : this.#tables);
    const binding = (): Binding | null => this.#binding;
    const isView = (): boolean => this.#view !== null;
    return {
      get tables(): EmbeddingTable[] {
        return tables();
      },
      get binding(): Binding | null {
        return binding();
      },
      get isView(): boolean {
        return isView();
      },
      stores: this.#stores,
      trainables: this.#trainables,
      partition: (keys: Keys) => this.#partition(keys),
      find: (keys: Keys) => this.#find(keys),
      removeFromShard: (s: number, keys: Keys) => this.#removeFromShard(s, keys),
      checkBindable: (owner: object) => this.#checkBindable(owner),
      bind: (owner: object, spec: OptimizerSpec, slotNames: readonly string[], optimizerName: string, bpV2: boolean) =>
        this.#bind(owner, spec, slotNames, optimizerName, bpV2),
      trainStep: (binding: Binding, ids: Keys, grads: Float32Array, v0: Float32Array, exists: Uint8Array, step: number, sequential: boolean) =>
        this.#trainStep(binding, ids, grads, v0, exists, step, sequential),
    };
  }

  /** Attaches `owner`'s optimizer on first use: adds its slots beside the rows (or in state tables). */
  /**
   * Throws when `owner` cannot train this variable (disposed, a slot view, or bound
   * to another optimizer), so an optimizer can check every pair before updating any.
   */
  #checkBindable(owner: object): void {
    this.#checkAlive();
    if (this.#view) throw new FailedPreconditionError(`Variable "${this.name}" is a slot view and cannot be trained`);
    const b = this.#binding;
    if (b && b.owner !== owner) {
      throw new FailedPreconditionError(
        `Expected Variable "${this.name}" to be trained by one optimizer but it is already trained by another ${b.spec.kind} optimizer; create one optimizer per variable`,
        { argument: 'optimizer' },
      );
    }
  }

  async #bind(owner: object, spec: OptimizerSpec, slotNames: readonly string[], optimizerName: string, bpV2: boolean): Promise<Binding> {
    this.#checkBindable(owner);
    if (this.#bindingPending) await this.#bindingPending.catch(() => undefined);
    this.#checkBindable(owner);
    const b = this.#binding;
    if (b) return b;
    this.#bindingPending = this.#makeBinding(owner, spec, slotNames, optimizerName, bpV2);
    try {
      this.#binding = await this.#bindingPending;
      return this.#binding;
    } finally {
      this.#bindingPending = null;
    }
  }

  async #makeBinding(owner: object, spec: OptimizerSpec, slotNames: readonly string[], optimizerName: string, bpV2: boolean): Promise<Binding> {
    const fused = this.kvCreator.holdsSlots && !bpV2;
    const hasSlots = spec.slots.names.length > 0;
    let stateTables: EmbeddingTable[] | null = null;
    if (fused && hasSlots) {
      const fresh: EmbeddingTable[] = [];
      try {
        for (let i = 0; i < this.shardNum; i++) {
          const t = this.kvCreator.create(this.#shardSpec(i, spec));
          fresh.push(t);
          await this.#stores[i]!.ready();
          for await (const batch of this.#tables[i]!.exportBatches()) await t.importRows(batch.keys, batch.values, null, batch.scores);
        }
      } catch (e) {
        for (const t of fresh) t.dispose();
        throw e;
      }
      const old = this.#tables;
      this.#tables = fresh;
      for (const t of old) t.dispose();
    } else if (!fused) {
      const memory = new CuckooHashTableCreator();
      stateTables = [];
      for (let i = 0; i < this.shardNum; i++) {
        const s = this.#shardSpec(i, spec);
        stateTables.push(memory.create({ ...s, tableName: `${s.tableName}_slots`, initSize: 0 }));
      }
    }
    const slotTables = (): EmbeddingTable[] => stateTables ?? this.#tables;
    const views = spec.slots.names.map((_, j) => {
      const viewName = `${this.name}/${optimizerName}/${slotNames[j] ?? spec.slots.names[j]}`;
      const stores = Array.from({ length: this.shardNum }, (_, i) => slotStore(() => slotTables()[i]!, j, viewName));
      return new Variable(
        {
          name: viewName,
          keyDtype: this.keyDtype,
          dim: this.dim,
          devices: this.devices,
          partitioner: this.partitioner,
          initializer: spec.slots.initial[j],
          trainable: false,
          checkpoint: this.checkpoint,
          kvCreator: this.kvCreator,
          bpV2,
        },
        { stores, tables: slotTables },
      );
    });
    return { owner, spec, fused, bpV2, stateTables, views };
  }

  /**
   * One optimizer step on the rows of `ids` (duplicates allowed; gradients of a
   * key are summed). Fused: the looked-up rows v0 are written back, then core's
   * applyGradients updates row and slots in one pass (so the row becomes f(v0), as
   * TFRA's upsert of the updated value). Otherwise: the state table computes the new row from the
   * looked-up value v0 and the slots, then the variable is set (upsert) or, with
   * bpV2, accumulated (accum of new - v0 when the key existed at lookup).
   */
  async #trainStep(b: Binding, ids: Keys, grads: Float32Array, v0: Float32Array, exists: Uint8Array, step: number, sequential: boolean): Promise<void> {
    this.#checkAlive();
    const dim = this.dim;
    const epoch = this.kvCreator.epochFor(step);
    if (epoch !== null) for (const t of this.#tables) t.setEpoch(epoch);
    const p = this.#partition(ids);
    const shard = async (s: number): Promise<void> => {
      const keys = p.keys[s]!;
      if (keys.length === 0) return;
      const g = gatherRows(grads, p.positions[s]!, dim);
      const table = (await this.#stores[s]!.ready())!;
      const { unique, index } = uniqueKeys(keys);
      const first = new Int32Array(unique.length).fill(-1);
      for (let i = 0; i < index.length; i++) if (first[index[i]!] === -1) first[index[i]!] = p.positions[s]![i]!;
      const before = gatherRows(v0, first, dim);
      if (b.fused) {
        // TFRA sets f(v0): the row as it was looked up, then the fused update of row and slots.
        const scores = this.kvCreator.scoresFor(unique);
        await table.upsert(unique, before, scores ? { scores } : undefined);
        await table.applyGradients(keys, g, b.spec, step);
        return;
      }
      const state = b.stateTables![s]!;
      const existed = gatherFlags(exists, first);
      await state.upsert(unique, before);
      await state.applyGradients(keys, g, b.spec, step);
      const after = (await state.find(unique)).values;
      const store = this.#stores[s]!;
      if (b.bpV2) {
        const deltas = new Float32Array(after.length);
        for (let i = 0; i < unique.length; i++) {
          for (let c = 0; c < dim; c++) deltas[i * dim + c] = existed[i] ? after[i * dim + c]! - before[i * dim + c]! : after[i * dim + c]!;
        }
        await store.accum(unique, deltas, existed);
      } else {
        await store.upsert(unique, after);
      }
    };
    if (sequential) for (let s = 0; s < this.shardNum; s++) await shard(s);
    else await Promise.all(Array.from({ length: this.shardNum }, (_, s) => shard(s)));
    if (this.restrictPolicy) await this.restrictPolicy.applyUpdate(ids);
  }
}

export interface GetVariableOptions extends VariableOptions {
  /** Return the existing variable of this name instead of failing. Default false. */
  reuse?: boolean | null;
}

/**
 * TFRA's `get_variable`: the variable called `name`, created with `options` when
 * there is none. Names are unique among variables made here (only here: `new
 * Variable` does not check).
 * @throws AlreadyExistsError "Variable <name> already exists" unless `reuse`
 */
export function getVariable(name: string, options: GetVariableOptions = {}): Variable {
  if (typeof name !== 'string' || name.length === 0) throw invalidParameter('name', 'a non-empty string', name, InvalidTypeError);
  const { reuse, ...rest } = checkOptionsObject(options, 'options', [...KNOWN_OPTIONS, 'reuse']) as GetVariableOptions;
  const reuseFlag = checkBoolean(reuse, 'reuse', false);
  const existing = registry.get(name);
  if (existing) {
    if (reuseFlag) return existing;
    throw new AlreadyExistsError(`Variable ${name} already exists, disallowed: expected name to be unused (or reuse: true) but received "${name}"`, {
      argument: 'name',
    });
  }
  const v = new Variable({ ...rest, name });
  registry.set(name, v);
  return v;
}
