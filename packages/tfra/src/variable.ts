import {
  checkBoolean,
  checkOptions,
  type EmbeddingTable,
  type FindOutput,
  type FindResult,
  InvalidTypeError,
  invalidParameter,
  type Keys,
  OutOfRangeError,
  ShapeMismatchError,
  Tensor,
  UnsupportedError,
  validateExists,
  validateValues,
} from '@embedstack/core';
import { loadVariable, type LoadOptions, type SaveOptions, saveVariable } from './checkpoint.js';
import type { VariableInitializer } from './initializer.js';
import { storageDtype, type TfraKeyDtype, toKeys, type VariableKeys } from './keys.js';
import { type KVCreator, shardScores } from './kvCreators.js';
import type { Optimizer } from './optimizers.js';
import { gatherFlags, gatherRows, type Partition, type Partitioner } from './partition.js';
import { checkRestrictArguments, type RestrictOptions, type RestrictPolicy } from './restrictPolicy.js';
import type { ShadowVariable } from './shadow.js';
import { slotStore } from './stores.js';
import type { VariableValues } from './values.js';
import { resolveVariableOptions, type ResolvedVariableOptions, type TfraValueDtype, type VariableOptions } from './variableOptions.js';
import { stateOf, VariableState, type ViewSource } from './variableState.js';

export type { VariableOptions } from './variableOptions.js';

/** The keys array of a variable of key dtype D: Int32Array for 'int32', BigInt64Array otherwise (strings are stored hashed). */
export type StoredKeys<D extends TfraKeyDtype> = D extends 'int32' ? Int32Array : BigInt64Array;

/** A Variable of any key dtype (what functions taking any variable accept). */
export type AnyVariable = Variable<TfraKeyDtype>;

/** Options of {@link Variable.lookup} / `lookupSync` (TFRA's `lookup(keys, return_exists)`). */
export interface LookupOptions {
  /** Also return, per key, whether it was in the table. Default false. */
  returnExists?: boolean | null;
  /**
   * Float32Array [n * dim] the rows are written to (and the result Tensor is over), so a
   * serving loop allocates no value array per call. An embedstack extension. Default: a fresh array.
   */
  out?: Float32Array | null;
}

/** What `lookup` resolves to with `returnExists: true`. */
export interface LookupWithExists {
  /** The rows, shape keys.shape + [dim] float32 (missing keys get the initializer's value). */
  values: Tensor<Float32Array>;
  /** Per key (flattened), whether it was in the table. */
  exists: boolean[];
}

/**
 * TFRA's `dynamic_embedding.Variable`: a distributed hash table from keys to
 * `dim` float32 values, one shard (core table) per device. Tables live where the
 * kv creator puts them (memory of the active backend by default, or Redis).
 * Keys of the variable's dtype (typed arrays of the other dtype are an
 * InvalidTypeError, as TFRA's TypeError; plain arrays are converted). A rejected
 * call changes nothing: every argument is validated before any shard is written (a
 * remote store failing mid-call is the one exception; the error says so). With the
 * default partitioner, reads and training route keys to shards in the backend.
 */
export class Variable<D extends TfraKeyDtype = 'int64'> {
  /** Variable name (`options.name`, default 'DynamicEmbedding_Variable'). */
  declare readonly name: string;
  /** Key dtype: 'int64', 'int32' or 'string' (stored as int64 hashes). */
  declare readonly keyDtype: D;
  /** 'float32', or a half type stored in 2 bytes (values still read and written as float32). */
  declare readonly valueDtype: TfraValueDtype;
  /** Floats per key. */
  declare readonly dim: number;
  /** Shard labels, one shard per entry. */
  declare readonly devices: readonly string[];
  /** Number of shards (devices.length). */
  declare readonly shardNum: number;
  /** Places keys on shards. */
  declare readonly partitioner: Partitioner;
  /** Accepted for parity; unused. */
  declare readonly sharedName: string;
  /** Value of keys not in the table. */
  declare readonly initializer: VariableInitializer;
  /** Trained by optimizers. */
  declare readonly trainable: boolean;
  /** Saved by `saveToFileSystem`. */
  declare readonly checkpoint: boolean;
  /** Rows reserved up front over all shards (TF_HASHTABLE_INIT_SIZE or 8192 when not given). */
  declare readonly initSize: number;
  /** Where the shard tables live. */
  declare readonly kvCreator: KVCreator;
  /** Trained by adding deltas (accum) instead of setting values. */
  declare readonly bpV2: boolean;
  /** Seed of random initializers (uint32). */
  declare readonly seed: number;
  /** The policy instance (constructed from the `restrictPolicy` class), or null. */
  declare readonly restrictPolicy: RestrictPolicy | null;

  /** @throws InvalidArgumentError / InvalidTypeError naming the option (restrictPolicy not a policy class: InvalidTypeError) */
  constructor(options?: VariableOptions & { keyDtype?: D });
  /** @internal A slot view: the variable over one optimizer slot of a primary variable (made by `getSlotVariables`). */
  constructor(view: SlotViewInit);
  constructor(options: (VariableOptions & { keyDtype?: D }) | SlotViewInit = {}) {
    if (options instanceof SlotViewInit) {
      new VariableState(this, options.cfg, options.source); // registers itself as this view's internal object (stateOf)
      publish(this, options.cfg);
      Object.defineProperty(this, 'restrictPolicy', { value: null, enumerable: true });
      return;
    }
    const cfg = resolveVariableOptions(options);
    const state = new VariableState(this, cfg, null);
    publish(this, cfg);
    try {
      const policy = cfg.restrictPolicy ? new cfg.restrictPolicy(this as Variable<TfraKeyDtype>) : null;
      Object.defineProperty(this, 'restrictPolicy', { value: policy, enumerable: true });
      state.restrictPolicy = policy;
    } catch (e) {
      state.dispose();
      throw e;
    }
  }

  /** The internal object. */
  get #state(): VariableState {
    return stateOf(this)!;
  }

  /** The shard tables (TFRA's `tables`), one per device; empty for slot views. */
  get tables(): readonly EmbeddingTable[] {
    return this.#state.tables.slice();
  }

  /** The trainables registered by lookups, by name (TFRA's `trainable_store`). */
  get trainableStore(): ReadonlyMap<string, ShadowVariable> {
    return new Map(this.#state.trainables);
  }

  #keys(input: unknown, argument = 'keys'): { keys: Keys; shape: number[] } {
    return toKeys(input, this.keyDtype, argument, true);
  }

  /**
   * Writes rows per shard: the caller's arrays as they are on one shard, partitioned
   * otherwise. The creator's scores ('customized') of every shard are computed and
   * checked first, so a bad genScoresFn result writes nothing.
   */
  async #write(
    keys: Keys,
    fn: (s: number, keys: Keys, rows: (a: Float32Array) => Float32Array, flags: (e: Uint8Array) => Uint8Array, scores: BigUint64Array | undefined) => Promise<unknown>,
    scored = true,
  ): Promise<void> {
    const st = this.#state;
    st.checkAlive();
    const p = st.shardNum === 1 ? null : st.partition(keys);
    const scores = this.#scores(p ? p.keys : [keys], scored);
    await st.beforeWrite();
    if (p === null) {
      await fn(0, keys, (a) => a, (e) => e, scores[0]);
      return;
    }
    await st.eachShard(p, (_, s) => fn(s, p.keys[s]!, (a) => gatherRows(a, p.positions[s]!, this.dim), (e) => gatherFlags(e, p.positions[s]!), scores[s]));
  }

  #writeSync(
    keys: Keys,
    fn: (t: EmbeddingTable, keys: Keys, rows: (a: Float32Array) => Float32Array, flags: (e: Uint8Array) => Uint8Array, scores: { scores: BigUint64Array } | undefined) => unknown,
    scored = true,
  ): void {
    const st = this.#state;
    st.checkAlive();
    st.eachTableSync(null, () => undefined); // views and remote stores: UNSUPPORTED before any change
    const p: Partition | null = st.shardNum === 1 ? null : st.partition(keys);
    const scores = this.#scores(p ? p.keys : [keys], scored).map((sc) => sc && { scores: sc });
    st.beforeWriteSync();
    if (p === null) {
      fn(st.tables[0]!, keys, (a) => a, (e) => e, scores[0]);
      return;
    }
    st.eachTableSync(p, (t, s) => fn(t, p.keys[s]!, (a) => gatherRows(a, p.positions[s]!, this.dim), (e) => gatherFlags(e, p.positions[s]!), scores[s]));
  }

  /** The creator's scores of each shard's keys (none for slot views, which keep the primary's scores). */
  #scores(keys: readonly Keys[], scored: boolean): (BigUint64Array | undefined)[] {
    return this.#state.view || !scored ? keys.map(() => undefined) : shardScores(this.kvCreator, keys);
  }

  /**
   * Inserts or overwrites `keys` with `values` ([n, dim]: flat, or a Tensor of shape keys.shape + [dim]).
   * @throws ShapeMismatchError "Expected shape ..." when values do not match; InvalidTypeError for bad keys
   */
  async upsert(keys: VariableKeys, values: VariableValues): Promise<void> {
    const k = this.#keys(keys);
    const v = validateValues(values, k.shape, this.dim);
    await this.#write(k.keys, (s, ks, rows, _flags, scores) => this.#state.stores[s]!.upsert(ks, rows(v), scores));
  }

  /** `upsert` for in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  upsertSync(keys: VariableKeys, values: VariableValues): void {
    const k = this.#keys(keys);
    const v = validateValues(values, k.shape, this.dim);
    this.#writeSync(k.keys, (t, ks, rows, _flags, scores) => t.upsertSync(ks, rows(v), scores));
  }

  /**
   * TFRA's accum: per key, delta = newValues - oldValues when `exists` (else
   * newValues); present & exists -> add the delta; absent & !exists -> insert
   * newValues; otherwise nothing (bp_v2).
   */
  async accum(keys: VariableKeys, oldValues: VariableValues, newValues: VariableValues, exists: readonly boolean[] | Uint8Array): Promise<void> {
    const { k, d, e } = this.#accumArgs(keys, oldValues, newValues, exists);
    await this.#write(k, (s, ks, rows, flags, scores) => this.#state.stores[s]!.accum(ks, rows(d), flags(e), scores));
  }

  /** `accum` for in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  accumSync(keys: VariableKeys, oldValues: VariableValues, newValues: VariableValues, exists: readonly boolean[] | Uint8Array): void {
    const { k, d, e } = this.#accumArgs(keys, oldValues, newValues, exists);
    this.#writeSync(k, (t, ks, rows, flags, scores) => t.accumSync(ks, rows(d), flags(e), scores));
  }

  #accumArgs(keys: VariableKeys, oldValues: VariableValues, newValues: VariableValues, exists: readonly boolean[] | Uint8Array) {
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
    return { k: k.keys, d, e };
  }

  /**
   * Reads `keys` (never inserts). Missing keys get the initializer's value.
   * Resolves to a Tensor of shape keys.shape + [dim], or `{ values, exists }` with `returnExists`.
   */
  lookup(keys: VariableKeys, options?: LookupOptions & { returnExists?: false | null }): Promise<Tensor<Float32Array>>;
  lookup(keys: VariableKeys, options: LookupOptions & { returnExists: true }): Promise<LookupWithExists>;
  lookup(keys: VariableKeys, options?: LookupOptions): Promise<Tensor<Float32Array> | LookupWithExists>;
  async lookup(keys: VariableKeys, options: LookupOptions = {}): Promise<Tensor<Float32Array> | LookupWithExists> {
    const { returnExists, k, out } = this.#lookupArgs(keys, options);
    return this.#lookupResult(await this.#state.find(k.keys, out), k.shape, returnExists);
  }

  /** `lookup` for in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  lookupSync(keys: VariableKeys, options?: LookupOptions & { returnExists?: false | null }): Tensor<Float32Array>;
  lookupSync(keys: VariableKeys, options: LookupOptions & { returnExists: true }): LookupWithExists;
  lookupSync(keys: VariableKeys, options: LookupOptions = {}): Tensor<Float32Array> | LookupWithExists {
    const { returnExists, k, out } = this.#lookupArgs(keys, options);
    return this.#lookupResult(this.#state.findSync(k.keys, out), k.shape, returnExists);
  }

  #lookupArgs(keys: VariableKeys, options: LookupOptions) {
    const o = checkOptions<LookupOptions>(options, ['returnExists', 'out']);
    const returnExists = checkBoolean(o.returnExists, 'returnExists', false);
    const k = this.#keys(keys);
    let out: FindOutput | undefined;
    if (o.out !== undefined && o.out !== null) {
      if (!(o.out instanceof Float32Array)) throw invalidParameter('out', 'a Float32Array', o.out, InvalidTypeError);
      const n = k.keys.length * this.dim;
      if (o.out.length !== n) throw new ShapeMismatchError(`Expected out to hold ${n} floats (keys * dim) but received ${o.out.length}`, { argument: 'out' });
      out = { values: o.out };
    }
    return { returnExists, k, out };
  }

  #lookupResult(r: FindResult, shape: number[], returnExists: boolean): Tensor<Float32Array> | LookupWithExists {
    const tensor = new Tensor(r.values, [...shape, this.dim]);
    return returnExists ? { values: tensor, exists: Array.from(r.exists, (x) => x === 1) } : tensor;
  }

  /** Removes `keys` (missing keys are ignored) from the variable, its slots and its restrict status. Resolves to how many were removed. */
  async remove(keys: VariableKeys): Promise<number> {
    const k = this.#keys(keys);
    const counts: number[] = [];
    await this.#write(k.keys, async (s, ks) => {
      counts[s] = await this.#state.removeFromShard(s, ks);
    }, false);
    return counts.reduce((a, b) => a + (b ?? 0), 0);
  }

  /** `remove` for in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  removeSync(keys: VariableKeys): number {
    const k = this.#keys(keys);
    const st = this.#state;
    let n = 0;
    this.#writeSync(k.keys, (t, ks) => {
      n += t.removeSync(ks);
      const s = st.tables.indexOf(t);
      st.binding?.stateTables?.[s]?.removeSync(ks);
      const status = st.restrictPolicy?.status;
      if (status) stateOf(status)!.tables[s]!.removeSync(ks);
    }, false);
    return n;
  }

  /** Removes every key (also from slots and the restrict status). */
  async clear(): Promise<void> {
    const st = this.#state;
    st.checkAlive();
    await st.beforeWrite();
    for (let s = 0; s < st.shardNum; s++) {
      await st.stores[s]!.clear();
      const state = st.binding?.stateTables?.[s];
      if (state) await state.clear();
    }
    const status = st.restrictPolicy?.status;
    if (status) await status.clear();
  }

  /** `clear` of in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  clearSync(): void {
    const st = this.#state;
    st.eachTableSync(null, () => undefined);
    st.beforeWriteSync();
    st.eachTableSync(null, (t, s) => {
      t.clearSync();
      st.binding?.stateTables?.[s]?.clearSync();
    });
    st.restrictPolicy?.status.clearSync();
  }

  /** Every key and value of every shard (order undefined): [keys, Tensor [n, dim]]. */
  async export(): Promise<[StoredKeys<D>, Tensor<Float32Array>]> {
    const st = this.#state;
    st.checkAlive();
    const keyParts: Keys[] = [];
    const valueParts: Float32Array[] = [];
    for (const store of st.stores) {
      for await (const b of store.exportBatches()) {
        keyParts.push(b.keys);
        valueParts.push(b.values);
      }
    }
    return this.#concat(keyParts, valueParts);
  }

  /** `export` of in-memory tables, synchronously. @throws UnsupportedError for remote stores and slot views */
  exportSync(): [StoredKeys<D>, Tensor<Float32Array>] {
    const batches = this.#state.eachTableSync(null, (t) => t.exportSync());
    return this.#concat(
      batches.map((b) => b.keys),
      batches.map((b) => b.values),
    );
  }

  #concat(keyParts: Keys[], valueParts: Float32Array[]): [StoredKeys<D>, Tensor<Float32Array>] {
    const n = keyParts.reduce((a, b) => a + b.length, 0);
    const int64 = storageDtype(this.keyDtype) === 'int64';
    const keys = int64 ? new BigInt64Array(n) : new Int32Array(n);
    const values = new Float32Array(n * this.dim);
    let at = 0;
    keyParts.forEach((part, i) => {
      if (int64) (keys as BigInt64Array).set(part as BigInt64Array, at);
      else (keys as Int32Array).set(part as Int32Array, at);
      values.set(valueParts[i]!, at * this.dim);
      at += part.length;
    });
    return [keys as StoredKeys<D>, new Tensor(values, [n, this.dim])];
  }

  /** Keys in shard `index`, or in every shard when omitted. */
  async size(index?: number | null): Promise<number> {
    let total = 0;
    for (const s of this.#sizeShards(index)) total += await this.#state.stores[s]!.size();
    return total;
  }

  /** `size` of in-memory tables, synchronously. @throws UnsupportedError for slot views */
  sizeSync(index?: number | null): number {
    const shards = this.#sizeShards(index);
    const st = this.#state;
    if (st.view) throw new UnsupportedError(`Slot variable "${this.name}" offers no synchronous operations; use the Promise form`);
    return shards.reduce((a, s) => a + st.tables[s]!.size(), 0);
  }

  #sizeShards(index: number | null | undefined): number[] {
    this.#state.checkAlive();
    if (index === undefined || index === null) return Array.from({ length: this.shardNum }, (_, s) => s);
    if (typeof index !== 'number' || !Number.isSafeInteger(index)) {
      throw invalidParameter('index', `a shard index (an integer in [0, ${this.shardNum})), undefined or null`, index, InvalidTypeError);
    }
    if (index < 0 || index >= this.shardNum) throw invalidParameter('index', `a shard index in [0, ${this.shardNum})`, index, OutOfRangeError);
    return [index];
  }

  /**
   * Restricts the size by the restrict policy (keeps `numReserved` keys, runs only
   * when size() > trigger). Without a policy: warns and returns null (as TFRA does).
   * Resolves to the number of keys removed.
   * Bad arguments are checked first, with or without a policy: a rejected Promise
   * (InvalidTypeError / InvalidArgumentError naming the argument), and no warning.
   */
  restrict(numReserved: number, options: RestrictOptions = {}): Promise<number> | null {
    try {
      checkRestrictArguments(numReserved, options);
    } catch (e) {
      return Promise.reject(e as Error);
    }
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
  getSlotVariables(optimizer: Optimizer): Variable<D>[] {
    if (typeof optimizer !== 'object' || optimizer === null || typeof optimizer.applyGradients !== 'function') {
      throw invalidParameter('optimizer', 'a de.optimizers optimizer', optimizer, InvalidTypeError);
    }
    const st = this.#state;
    const b = st.binding;
    if (!b || b.owner !== optimizer) return [];
    return b.slotViewNames.map((name, j) => slotView(this, st, name, j));
  }

  /** The trainable view registered by `embeddingLookup(this, ids, { name })`, or null. */
  getTrainableByName(name: string): ShadowVariable | null {
    if (typeof name !== 'string') throw invalidParameter('name', 'a string', name, InvalidTypeError);
    return this.#state.trainables.get(name) ?? null;
  }

  /**
   * Saves every shard (and its slots) under `dir` as one unit (core's versioned
   * directory protocol): `dir/<name>/proc_<rank>_of_<size>/ckpt-N/shard_<i>_of_<N>`,
   * made live by an atomic switch of that folder's CURRENT, so a crash leaves the
   * previous or the new save. Several processes of a job save into the same `dir`
   * with their own `procRank`. A variable made with `checkpoint: false` (and its slot
   * views) is left out: nothing is written.
   * @throws AlreadyExistsError when the folder holds another variable's checkpoint
   *   (names differing only in '/' and '_' share one folder)
   */
  async saveToFileSystem(dir: string, options: SaveOptions = {}): Promise<void> {
    this.#state.checkAlive();
    await saveVariable(this.#state, dir, options);
  }

  /**
   * Loads the newest save `saveToFileSystem` wrote (every process's part of it),
   * upserting into this variable (does not clear); keys are re-partitioned onto this
   * variable's shards when the saved shard count differs. Every file is verified
   * (size, CRC32C) and `options.optimizer` bound before the first row is written: a
   * refused load changes nothing.
   * @throws NotFoundError; InvalidArgumentError (another variable's checkpoint, dim,
   *   key dtype); CheckpointCorruptError; IOError
   */
  async loadFromFileSystem(dir: string, options: LoadOptions = {}): Promise<void> {
    this.#state.checkAlive();
    await this.#state.beforeWrite();
    await loadVariable(this.#state, dir, options);
  }

  /** Frees the tables (and slots and status). Idempotent. */
  dispose(): void {
    this.#state.dispose();
  }

  /** Same as `dispose()`, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Defines the public read-only properties of a Variable from its resolved options. */
function publish(v: Variable<TfraKeyDtype>, cfg: ResolvedVariableOptions): void {
  const props: Record<string, unknown> = {
    name: cfg.name,
    keyDtype: cfg.keyDtype,
    valueDtype: cfg.valueDtype,
    dim: cfg.dim,
    devices: cfg.devices,
    shardNum: cfg.devices.length,
    partitioner: cfg.partitioner,
    sharedName: cfg.sharedName,
    initializer: cfg.initializer,
    trainable: cfg.trainable,
    checkpoint: cfg.checkpoint,
    initSize: cfg.initSize,
    kvCreator: cfg.kvCreator,
    bpV2: cfg.bpV2,
    seed: cfg.seed,
  };
  for (const [k, value] of Object.entries(props)) Object.defineProperty(v, k, { value, enumerable: true });
}

/**
 * What the Variable constructor makes a slot view of (internal: `slotView` passes it
 * as the constructor's argument; not exported by the package, so user options are
 * never mistaken for it).
 */
export class SlotViewInit {
  constructor(
    /** The view's options: the primary's, renamed, float32, not trainable. */
    readonly cfg: ResolvedVariableOptions,
    /** The slot's stores and tables. */
    readonly source: ViewSource,
  ) {}
}

/** Slot views of one primary variable, made once per binding. */
const views = new WeakMap<object, Variable<TfraKeyDtype>[]>();

/** The slot view `j` of `primary` (a Variable over the slot that lives beside the rows, or in the companion tables). */
function slotView<D extends TfraKeyDtype>(primary: Variable<D>, st: VariableState, name: string, j: number): Variable<D> {
  const b = st.binding!;
  let list = views.get(b);
  if (!list) views.set(b, (list = []));
  const cached = list[j];
  if (cached) return cached as Variable<D>;
  const slotTables = (): EmbeddingTable[] => b.stateTables ?? st.tables;
  const cfg: ResolvedVariableOptions = {
    ...st.cfg,
    name,
    valueDtype: 'float32',
    initializer: b.spec.slots.initial[j],
    coreInitializer: { kind: 'constant', value: b.spec.slots.initial[j]! },
    trainable: false,
    restrictPolicy: null,
    bpV2: b.bpV2,
    sharedName: `shared_name.${name}`,
  };
  const stores = Array.from({ length: st.shardNum }, (_, i) => slotStore(() => slotTables()[i]!, j, name));
  const v = new Variable<D>(new SlotViewInit(cfg, { stores, tables: slotTables }));
  st.onDispose.push(() => v.dispose());
  list[j] = v as Variable<TfraKeyDtype>;
  void primary;
  return v;
}
