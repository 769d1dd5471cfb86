import { type BagInput, type BagWeights, toOrderedBag } from './bag.js';
import type { Bag, Combiner } from './combiners.js';
import { type LookupCombiner, validateCombiner, validateLookupCombiner, validateMaxNorm } from './combiners.js';
import { type EmbeddingBackend, getBackend } from './backend.js';
import type { KeyDtype, Keys } from './dtypes.js';
import {
  DisposedError,
  InvalidArgumentError,
  InvalidTypeError,
  ErrorCodes,
  invalidParameter,
  ShapeMismatchError,
  UnsupportedError,
} from './errors.js';
import { type KeyInput, keyShape, normalizeKeys } from './keys.js';
import { isOptimizerSpec, type OptimizerSpec, type ResolvedOptimizer, resolveOptimizer, sameSlotLayout } from './optimizers.js';
import { type ExportBatch, type FindResult, inPartOrderPerTable, type RawTable, type RawTableSync, type ShardPart, sumShardPartials } from './rawTable.js';
import { checkOwnedRows, type ResolvedShardPlan, resolveShardPlan, type ShardPlan } from './shardPlan.js';
import { type ScorePolicy, validateScorePolicy } from './scores.js';
import { type ResolvedTableOptions, resolveTableOptions, type TableOptions } from './tableOptions.js';
import type { StorageDtype } from './storageDtype.js';
import { Tensor } from './tensor.js';
import { asTypedArray } from './typed.js';
import { checkInteger, checkRowIndices, errorClassFor, unknownKeys } from './validation.js';
import { type ExistsInput, validateExists, validateValues, type ValuesInput } from './values.js';

export type { ExistsInput, ValuesInput } from './values.js';


/** Options of findOrInsert, upsert, assign and accum. */
export interface WriteOptions {
  /** Scores of the keys, [n]; only for the 'customized' policy. */
  scores?: BigUint64Array | readonly bigint[] | null;
}

/** Caller-owned result arrays of find / findOrInsert (filled and returned, so a serving loop allocates nothing). */
export interface FindOutput {
  /** [n * dim] floats. */
  values: Float32Array;
  /** [n] flags; allocated per call when omitted. */
  exists?: Uint8Array | null;
}

/** Options of find / findOrInsert. */
export interface FindOptions {
  /** Arrays to fill instead of fresh ones. With a plan, only the owned entries are written. */
  out?: FindOutput | null;
  /** Read only the keys this shard owns, under their local keys (shardPlan.ts). Default none. */
  plan?: ShardPlan | null;
}

/** The embedding bag's arguments (core.md "Combiners"). */
export interface CombinerOptions {
  /** Per id (a RaggedTensor / SparseTensor like the ids, or a flat Float32Array); default all 1. */
  weights?: BagWeights;
  /** Default 'mean'. */
  combiner?: Combiner;
  /** Clip each row to this L2 norm before combining. Default none. */
  maxNorm?: number | null;
}

/** Options of lookupCombined: the combiner options, plus insertion and an output array. */
export interface LookupCombinedOptions extends Omit<CombinerOptions, 'combiner'> {
  /** Default 'mean'; also 'max' / 'min' (forward only: no backward op takes them). */
  combiner?: LookupCombiner;
  /** Insert missing keys with their initial value (training). Default false. */
  insertMissing?: boolean;
  /** [nrows * dim] floats to fill (and return) instead of a fresh array. */
  out?: Float32Array | null;
}

/** Options of lookupCombinedPartial (one shard's part of a sharded embedding bag). */
export interface PartialLookupOptions extends CombinerOptions {
  /** This table's shard of the logical table. Required. */
  plan: ShardPlan;
  /** Insert missing owned keys (training). Default false. */
  insertMissing?: boolean;
  /**
   * [nrows * dim] float64 accumulator this shard's part is ADDED to; default a fresh
   * zero array. Calls adding to one array must not overlap in time.
   */
  out?: Float64Array | null;
}

/** One shard of a logical table split over several tables (`lookupCombinedShards`). */
export interface TableShard {
  /** The shard's table (every shard: the same dim and key dtype). */
  table: EmbeddingTable;
  /** Which keys it owns, under which local keys (shardPlan.ts). */
  plan: ShardPlan;
}

/** Options of lookupCombinedShards. */
export interface ShardsLookupOptions extends CombinerOptions {
  /** Insert missing owned keys (training). Default false. */
  insertMissing?: boolean;
  /** [nrows * dim] floats to fill (and return) instead of a fresh array. */
  out?: Float32Array | null;
}

/** Options of lookupCombinedBackward. */
export interface BackwardOptions extends CombinerOptions {
  /** Only the entries this shard owns (their rows of `out`; others are left as they are). Default none (every entry). */
  plan?: ShardPlan | null;
  /** [nnz * dim] floats to fill (and return); default a fresh zero array. */
  out?: Float32Array | null;
}

/** Options of applyCombinedGradients. */
export interface CombinedGradientsOptions extends CombinerOptions {
  /** Only the entries this shard owns, under their local keys. Default none. */
  plan?: ShardPlan | null;
}

/** Options of applyGradients. */
export interface ApplyGradientsOptions {
  /** Only the entries this shard owns, under their local keys. Default none. */
  plan?: ShardPlan | null;
}

const names = (...n: string[]): ReadonlySet<string> => Object.freeze(new Set(n));
const COMBINER = ['weights', 'combiner', 'maxNorm'];
/** Each method's option names: any other name is refused (a typo would otherwise fall back to the default, silently). */
const OPTION_NAMES = Object.freeze({
  find: names('out', 'plan'),
  findOrInsert: names('out', 'plan', 'scores'),
  findOut: names('values', 'exists'),
  write: names('scores'),
  range: names('offset', 'limit'),
  lookupCombined: names(...COMBINER, 'insertMissing', 'out'),
  lookupCombinedPartial: names(...COMBINER, 'plan', 'insertMissing', 'out'),
  lookupCombinedBackward: names(...COMBINER, 'plan', 'out'),
  applyCombinedGradients: names(...COMBINER, 'plan'),
  applyGradients: names('plan'),
  lookupCombinedShards: names(...COMBINER, 'insertMissing', 'out'),
  applyCombinedGradientsShards: names(...COMBINER),
  createTable: names('backend'),
});

/** The fields of a TableShard (lookupCombinedShards, applyCombinedGradientsShards). */
const SHARD_FIELDS: readonly string[] = Object.freeze(['table', 'plan']);
/** The argument names of the first shards and their plans (made once, not per call). */
const SHARD_ARGS: readonly string[] = Object.freeze(Array.from({ length: 8 }, (_, d) => `shards[${d}]`));
const SHARD_PLAN_ARGS: readonly string[] = Object.freeze(SHARD_ARGS.map((a) => `${a}.plan`));

/**
 * Refuses an options object with a name `known` lacks (undefined, null and non-objects pass: the
 * callers' type checks refuse those). Per call of the hot paths: no allocation unless it throws.
 * @throws InvalidArgumentError naming `options.<name>` and `method`, listing the known names
 */
function checkOptionNames(o: unknown, known: ReadonlySet<string>, method: string, argument = 'options'): void {
  if (typeof o !== 'object' || o === null) return;
  for (const k in o) {
    if (!known.has(k)) throw invalidParameter(`${argument}.${k}`, `one of ${method}'s options (${[...known].join(', ')})`, k);
  }
}

/** A caller's float32 output array of exactly `n` floats, or null when none was given. */
function floatOut(v: unknown, n: number, argument: string): Float32Array | null {
  if (v === undefined || v === null) return null;
  const out = asTypedArray(v, Float32Array, argument);
  if (!out) throw invalidParameter(argument, 'a Float32Array', v, InvalidTypeError);
  if (out.length !== n) throw new ShapeMismatchError(`Expected ${argument} to hold ${n} floats but received ${out.length}`, { argument });
  return out;
}

const finalizer = new FinalizationRegistry<RawTable>((raw) => raw.dispose());

/** `n` uint64 scores given as a BigUint64Array or a bigint[] (upsert's option, importRows' argument). */
function scoreArray(s: unknown, n: number): BigUint64Array {
  const typed = asTypedArray(s, BigUint64Array, 'scores');
  if (!typed && !Array.isArray(s)) throw invalidParameter('scores', 'a BigUint64Array or bigint[] of uint64', s, InvalidTypeError);
  const length = typed ? typed.length : (s as unknown[]).length;
  if (length !== n) throw new ShapeMismatchError(`Expected scores to be of length ${n} (one per key) but received ${length}`, { argument: 'scores' });
  if (typed) return typed;
  const list = s as unknown[];
  for (let i = 0; i < n; i++) {
    const x = list[i];
    if (!(i in list) || typeof x !== 'bigint' || x < 0n || x >= 1n << 64n) throw invalidParameter(`scores[${i}]`, 'a uint64 bigint', x, i in list ? errorClassFor(x, 'bigint') : InvalidTypeError);
  }
  return BigUint64Array.from(list as bigint[]);
}

/**
 * A table: validates and normalises every argument once, then calls the backend.
 * Keys: any {@link KeyInput}. Values: flat Float32Array [n*dim] (or a Tensor of shape
 * keys.shape + [dim]). Every op has a Promise form and a `...Sync` form (the latter
 * throws UNSUPPORTED on async-only backends). A rejected call changes nothing.
 */
export class EmbeddingTable {
  /** The table's resolved options (plain data, as the backend received them). */
  readonly options: ResolvedTableOptions;
  /** Name of the backend the table lives on ('custom' when built directly from a RawTable). */
  readonly backendName: string;
  #raw: RawTable | null;

  /** Wraps a backend's table. Prefer {@link createTable}, which resolves the options and picks the backend; the table's memory is freed by dispose() or, failing that, when the object is garbage-collected. */
  constructor(raw: RawTable, options: ResolvedTableOptions, backendName = 'custom') {
    this.#raw = raw;
    this.options = options;
    this.backendName = backendName;
    finalizer.register(this, raw, this);
  }

  /** The table's name. */
  get name(): string {
    return this.options.name;
  }
  /** Floats per row. */
  get dim(): number {
    return this.options.dim;
  }
  /** 'dynamic' (hash table) or 'static' (rows 0..vocabularySize-1). */
  get kind(): 'dynamic' | 'static' {
    return this.options.kind;
  }
  /** Key type: keys are normalised to it. */
  get keyDtype(): KeyDtype {
    return this.options.keyDtype;
  }
  /** How values are stored (they are read and written as float32); see {@link StorageDtype}. */
  get storageDtype(): StorageDtype {
    return this.options.storageDtype;
  }
  /** Names of the optimizer slots stored beside each row (empty without an optimizer). */
  get slotNames(): readonly string[] {
    return this.options.slots.names;
  }
  /** Width in floats of each slot. */
  get slotWidths(): number[] {
    return this.options.slots.widths.map((w) => (w === 'dim' ? this.dim : 1));
  }

  /**
   * The backend's table.
   * @throws DisposedError after dispose()
   */
  get raw(): RawTable {
    if (!this.#raw) throw new DisposedError(`Table "${this.name}" was disposed`);
    return this.#raw;
  }

  get #syncOps(): RawTableSync {
    const s = this.raw.sync;
    if (!s) throw new UnsupportedError(`Backend "${this.backendName}" offers no synchronous operations; use the Promise form`);
    return s;
  }

  // ---- write tracking (writeState) ----------------------------------------------

  #writesStarted = 0;
  #writesInFlight = 0;
  readonly #settled = (): void => void this.#writesInFlight--;
  // bound once: `then` with these allocates one promise per write (`finally` allocates more)
  readonly #settledOk = <T>(v: T): T => {
    this.#writesInFlight--;
    return v;
  };
  readonly #settledErr = (e: unknown): never => {
    this.#writesInFlight--;
    throw e;
  };

  /** Counts a Promise-form write that has just started; `p` settles as the returned promise does. */
  #written<T>(p: Promise<T>): Promise<T> {
    this.#writesStarted++;
    this.#writesInFlight++;
    return p.then(this.#settledOk, this.#settledErr);
  }

  /** The sync ops, counting the write about to run on them. */
  #writeSync(): RawTableSync {
    const s = this.#syncOps;
    this.#writesStarted++;
    return s;
  }

  /** Counts a write over several tables (the shard forms) that has just started. */
  static #allWritten<T>(tables: readonly EmbeddingTable[], p: Promise<T>): Promise<T> {
    for (const t of tables) {
      t.#writesStarted++;
      t.#writesInFlight++;
    }
    return p.finally(() => tables.forEach((t) => t.#settled()));
  }

  /**
   * How many writes this table has seen: `started` counts every write operation called
   * through this object so far (upsert, assign, accum, remove, clear, findOrInsert,
   * importRows, restrict, the gradient steps, and lookups with insertMissing; sync or
   * Promise form, rejected or not), `inFlight` the Promise-form ones not yet settled.
   * Two snapshots with the same `started` and nothing in flight at the first bracket a
   * span in which the table did not change: a checkpoint save checks this and fails
   * rather than write rows from two states. Writes made through `raw` directly, or by
   * another process to a shared store, are not counted.
   */
  writeState(): {
    /** Writes called through this object so far (sync or Promise form, rejected or not). */
    started: number;
    /** Promise-form writes not yet settled. */
    inFlight: number;
  } {
    return { started: this.#writesStarted, inFlight: this.#writesInFlight };
  }

  // ---- validation of arguments (internal) --------------------------------------

  /** Keys in the table's dtype; static tables: row indices in range (with a plan, the owned keys' local rows). */
  #keys(input: KeyInput | unknown, argument = 'keys', plan: ResolvedShardPlan | null = null): Keys {
    const keys = normalizeKeys(input, this.keyDtype, argument);
    if (this.kind === 'static' && plan !== null) checkOwnedRows(keys, plan, this.options.vocabularySize, this.name, argument);
    else if (this.kind === 'static') checkRowIndices(keys, this.options.vocabularySize, argument, this.name);
    return keys;
  }

  /** Values for n keys: a Tensor must have shape keys.shape + [dim]; a flat array n * dim floats. */
  #values(input: ValuesInput | unknown, keysInput: unknown, n: number, argument = 'values'): Float32Array {
    const shape = input instanceof Tensor ? keyShape(keysInput as KeyInput) : [n];
    return validateValues(input, shape, this.dim, argument);
  }

  /** The scores option; `method` (upsert, assign, accum) also checks the option names (findOrInsert's are checked with its find options). */
  #scores(opts: WriteOptions | null | undefined, n: number, method?: string): BigUint64Array | null {
    if (opts !== undefined && opts !== null && typeof opts !== 'object') throw invalidParameter('options', 'an options object ({ scores })', opts, InvalidTypeError);
    if (method !== undefined) checkOptionNames(opts, OPTION_NAMES.write, method);
    const s = opts?.scores;
    if (s === undefined || s === null) return null;
    if (this.options.scorePolicy !== 'customized') {
      throw invalidParameter('scores', `unset for the '${this.options.scorePolicy}' policy (only 'customized' takes scores)`, s);
    }
    return scoreArray(s, n);
  }


  #plan(plan: unknown): ResolvedShardPlan | null {
    return plan === undefined || plan === null ? null : resolveShardPlan(plan, this.options);
  }

  /** A validated bag (ids, weights, combiner, maxNorm) and the input entry order; static ids checked (owned ones with a plan). */
  #combinerArgs<C extends LookupCombiner = Combiner>(
    ids: BagInput,
    o: CombinerOptions | LookupCombinedOptions,
    plan: ResolvedShardPlan | null,
    checkCombiner: (v: unknown) => C = validateCombiner as (v: unknown) => C,
    rowsCheckedByBackend = false,
  ): { bag: Bag<Keys>; order: Int32Array | null; combiner: C; maxNorm: number } {
    if (typeof o !== 'object' || o === null) throw invalidParameter('options', 'an options object', o, InvalidTypeError);
    const { bag, order } = toOrderedBag(ids, o.weights, this.keyDtype);
    if (this.kind === 'static' && !rowsCheckedByBackend) this.#keys(bag.keys, 'ids', plan);
    return this.#idsFirst(bag, rowsCheckedByBackend, () => ({ bag, order, combiner: checkCombiner(o.combiner ?? 'mean'), maxNorm: validateMaxNorm(o.maxNorm) }));
  }

  /**
   * `check()`, the checks after a bag's ids; when the backend checks the ids itself and a later
   * check fails, core checks the ids first, so a call with a bad id and another bad argument
   * fails on the id, as where core checks ids before everything else.
   */
  #idsFirst<T>(bag: Bag<Keys>, rowsCheckedByBackend: boolean, check: () => T): T {
    try {
      return check();
    } catch (e) {
      if (rowsCheckedByBackend) this.#keys(bag.keys, 'ids');
      throw e;
    }
  }

  #insertArg(v: unknown): boolean {
    const insert = v ?? false;
    if (typeof insert !== 'boolean') throw invalidParameter('insertMissing', 'a boolean', insert, InvalidTypeError);
    return insert;
  }

  #bag(ids: BagInput, o: LookupCombinedOptions | null, method: string): [Bag<Keys>, LookupCombiner, number, boolean, Float32Array | null] {
    o ??= {}; // null: no options (spec: optional arguments may be null)
    checkOptionNames(o, OPTION_NAMES.lookupCombined, method);
    const checked = this.#rowsCheckedByBackend;
    const a = this.#combinerArgs(ids, o, null, validateLookupCombiner, checked);
    return this.#idsFirst(a.bag, checked, () => {
      const out = floatOut(o.out, (a.bag.rowSplits.length - 1) * this.dim, 'out');
      return [a.bag, a.combiner, a.maxNorm, this.#insertArg(o.insertMissing), out];
    });
  }

  /** A static table whose backend checks the bag's row indices itself (RawTable.checksRowIndices): core checks them only when a call fails. */
  get #rowsCheckedByBackend(): boolean {
    return this.kind === 'static' && this.raw.checksRowIndices === true;
  }

  /** A bag lookup's error: when the backend refused a row index, core's own check throws its error for it (same message as when core checks first). */
  #bagError(e: unknown, bag: Bag<Keys>): unknown {
    // by code, not class: a backend bundled with its own copy of core throws that copy's classes
    if ((e as { code?: unknown } | null)?.code === ErrorCodes.OUT_OF_RANGE && this.#rowsCheckedByBackend) this.#keys(bag.keys, 'ids');
    return e;
  }

  #partialArgs(ids: BagInput, o: PartialLookupOptions, method: string): [Bag<Keys>, Combiner, number, boolean, ResolvedShardPlan, Float64Array] {
    if (typeof o !== 'object' || o === null) throw invalidParameter('options', 'an options object with a plan', o, InvalidTypeError);
    checkOptionNames(o, OPTION_NAMES.lookupCombinedPartial, method);
    const plan = resolveShardPlan(o.plan, this.options, 'plan');
    const a = this.#combinerArgs(ids, o, plan);
    const n = (a.bag.rowSplits.length - 1) * this.dim;
    let out: Float64Array;
    const given = asTypedArray(o.out, Float64Array, 'out');
    if (o.out === undefined || o.out === null) out = new Float64Array(n);
    else if (!given) throw invalidParameter('out', 'a Float64Array', o.out, InvalidTypeError);
    else if (given.length !== n) throw new ShapeMismatchError(`Expected out to hold ${n} floats (rows * dim) but received ${given.length}`, { argument: 'out' });
    else out = given;
    return [a.bag, a.combiner, a.maxNorm, this.#insertArg(o.insertMissing), plan, out];
  }

  /** Backward arguments: bag, grads [nrows * dim], plan and the bag-ordered output (with how to put it back in input order). */
  #backwardArgs(ids: BagInput, grads: ValuesInput, o: BackwardOptions | null, method: string) {
    o ??= {}; // null: no options (spec: optional arguments may be null)
    if (typeof o !== 'object') throw invalidParameter('options', 'an options object', o, InvalidTypeError);
    checkOptionNames(o, OPTION_NAMES.lookupCombinedBackward, method);
    const plan = this.#plan(o.plan);
    const a = this.#combinerArgs(ids, o, plan);
    const nrows = a.bag.rowSplits.length - 1;
    const g = validateValues(grads, [nrows], this.dim, 'grads');
    const size = a.bag.keys.length * this.dim;
    const user = floatOut(o.out, size, 'out');
    const out = user ?? new Float32Array(size);
    const order = a.order;
    const dim = this.dim;
    // The backend works in bag order; an unsorted SparseTensor's entries are moved back to input order.
    const work = order ? new Float32Array(size) : out;
    if (order && user) for (let i = 0; i < order.length; i++) work.set(out.subarray(i * dim, (i + 1) * dim), order[i]! * dim);
    const finish = (): Float32Array => {
      if (order) for (let i = 0; i < order.length; i++) out.set(work.subarray(order[i]! * dim, (order[i]! + 1) * dim), i * dim);
      return out;
    };
    return { args: [a.bag, g, a.combiner, a.maxNorm, plan, work] as const, finish };
  }

  #combinedGradientArgs(ids: BagInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, o: CombinedGradientsOptions | null, method: string) {
    o ??= {}; // null: no options (spec: optional arguments may be null)
    if (typeof o !== 'object') throw invalidParameter('options', 'an options object', o, InvalidTypeError);
    checkOptionNames(o, OPTION_NAMES.applyCombinedGradients, method);
    const plan = this.#plan(o.plan);
    const a = this.#combinerArgs(ids, o, plan);
    const g = validateValues(grads, [a.bag.rowSplits.length - 1], this.dim, 'grads');
    return [a.bag, g, a.combiner, a.maxNorm, plan, this.#optimizer(optimizer, step)] as const;
  }

  #findArgs(keysIn: KeyInput, o: FindOptions | null | undefined, method: string, known = OPTION_NAMES.find): [Keys, FindResult | null, ResolvedShardPlan | null] {
    o ??= undefined; // null: no options (spec: optional arguments may be null)
    if (o !== undefined && typeof o !== 'object') throw invalidParameter('options', 'an options object', o, InvalidTypeError);
    checkOptionNames(o, known, method);
    const plan = this.#plan(o?.plan);
    const keys = this.#keys(keysIn, 'keys', plan);
    const n = keys.length;
    const given = o?.out;
    if (given === undefined || given === null) {
      return [keys, plan ? { values: new Float32Array(n * this.dim), exists: new Uint8Array(n) } : null, plan];
    }
    if (typeof given !== 'object') throw invalidParameter('out', 'an object { values, exists? }', given, InvalidTypeError);
    checkOptionNames(given, OPTION_NAMES.findOut, method, 'out'); // a misspelt `exists` would leave the caller's flags unwritten
    const values = floatOut(given.values, n * this.dim, 'out.values')!;
    let exists: Uint8Array;
    const givenExists = asTypedArray(given.exists, Uint8Array, 'out.exists');
    if (given.exists === undefined || given.exists === null) exists = new Uint8Array(n);
    else if (!givenExists) throw invalidParameter('out.exists', 'a Uint8Array', given.exists, InvalidTypeError);
    else if (givenExists.length !== n) throw new ShapeMismatchError(`Expected out.exists to hold ${n} flags but received ${givenExists.length}`, { argument: 'out.exists' });
    else exists = givenExists;
    return [keys, { values, exists }, plan];
  }

  #optimizer(optimizer: OptimizerSpec, step: number): ResolvedOptimizer {
    this.#checkOptimizer(optimizer, step);
    return resolveOptimizer(optimizer, step);
  }

  /** Checks that `optimizer` fits this table's slot layout and `step` (`what` names the table in the message); resolves nothing, so a learning-rate function is not called. */
  #checkOptimizer(optimizer: OptimizerSpec, step: number, what = "the table's"): void {
    if (!isOptimizerSpec(optimizer)) throw invalidParameter('optimizer', 'an optimizer spec', optimizer, InvalidTypeError);
    if (!sameSlotLayout(optimizer.slots, this.options.slots)) {
      throw invalidParameter(
        'optimizer',
        `an optimizer whose slots are [${this.slotNames.join(', ')}] (${what} layout)`,
        `${optimizer.kind} with slots [${optimizer.slots.names.join(', ')}]`,
      );
    }
    checkInteger(step, 'step', { min: 1 });
  }

  #range(opts: { offset?: number; limit?: number } | undefined, method: string): [number, number] {
    if (opts !== undefined && opts !== null && typeof opts !== 'object') throw invalidParameter('options', 'an options object ({ offset, limit })', opts, InvalidTypeError);
    checkOptionNames(opts, OPTION_NAMES.range, method);
    const offset = opts?.offset ?? 0;
    const limit = opts?.limit ?? Number.MAX_SAFE_INTEGER;
    return [checkInteger(offset, 'offset', { min: 0 }), checkInteger(limit, 'limit', { min: 0 })];
  }

  #importArgs(
    keysIn: KeyInput,
    valuesIn: ValuesInput,
    slotsIn?: readonly Float32Array[] | null,
    scoresIn?: BigUint64Array | readonly bigint[] | null,
  ): [Keys, Float32Array, Float32Array[] | null, BigUint64Array | null] {
    const keys = this.#keys(keysIn);
    const values = this.#values(valuesIn, keysIn, keys.length);
    let slots: Float32Array[] | null = null;
    if (slotsIn !== undefined && slotsIn !== null) {
      const widths = this.slotWidths;
      if (!Array.isArray(slotsIn) || slotsIn.length !== widths.length) {
        throw invalidParameter('slots', `${widths.length} Float32Arrays (${this.slotNames.join(', ')})`, slotsIn, Array.isArray(slotsIn) ? InvalidArgumentError : InvalidTypeError);
      }
      slots = slotsIn.map((given, i) => {
        const s = asTypedArray(given, Float32Array, `slots[${i}]`);
        if (!s) throw invalidParameter(`slots[${i}] (${this.slotNames[i]})`, 'a Float32Array', given, InvalidTypeError);
        if (s.length !== keys.length * widths[i]!) {
          throw new ShapeMismatchError(`Expected slots[${i}] (${this.slotNames[i]}) to be a Float32Array of ${keys.length * widths[i]!} floats but received ${s.length}`, {
            argument: `slots[${i}]`,
          });
        }
        return s;
      });
    }
    const scores = scoresIn === undefined || scoresIn === null ? null : scoreArray(scoresIn, keys.length);
    return [keys, values, slots, scores];
  }

  // ---- operations (Promise form) -------------------------------------------

  /**
   * Reads rows ({ values [n * dim], exists [n] }); missing keys get their initial
   * value, exists = 0. Never inserts. `out` arrays are filled and returned; with a
   * plan only the owned entries are read (and written to the result).
   */
  async find(keys: KeyInput, opts?: FindOptions | null): Promise<FindResult> {
    return this.raw.async.find(...this.#findArgs(keys, opts, 'find'));
  }
  /** find, inserting missing keys with their initial value. */
  async findOrInsert(keys: KeyInput, opts?: (WriteOptions & FindOptions) | null): Promise<FindResult> {
    const [k, out, plan] = this.#findArgs(keys, opts, 'findOrInsert', OPTION_NAMES.findOrInsert);
    return this.#written(this.raw.async.findOrInsert(k, this.#scores(opts, k.length), out, plan));
  }
  /** Inserts or overwrites rows: values [n * dim] (or a Tensor of shape keys.shape + [dim]). Duplicate keys: the last row wins. */
  async upsert(keys: KeyInput, values: ValuesInput, opts?: WriteOptions): Promise<void> {
    const k = this.#keys(keys);
    const v = this.#values(values, keys, k.length);
    return this.#written(this.raw.async.upsert(k, v, this.#scores(opts, k.length, 'upsert')));
  }
  /** Overwrites the rows of keys already present; absent keys are ignored. */
  async assign(keys: KeyInput, values: ValuesInput, opts?: WriteOptions): Promise<void> {
    const k = this.#keys(keys);
    const v = this.#values(values, keys, k.length);
    return this.#written(this.raw.async.assign(k, v, this.#scores(opts, k.length, 'assign')));
  }
  /** Accumulates deltas [n * dim], TFRA's accum: a present key with exists[i] adds deltas to its row, an absent key without exists[i] is inserted with the delta as its row, anything else is a no-op. Duplicates apply in order. */
  async accum(keys: KeyInput, deltas: ValuesInput, exists: ExistsInput, opts?: WriteOptions): Promise<void> {
    const k = this.#keys(keys);
    const d = this.#values(deltas, keys, k.length, 'deltas');
    return this.#written(this.raw.async.accum(k, d, validateExists(exists, k.length), this.#scores(opts, k.length, 'accum')));
  }
  /** Removes keys; returns how many were removed. Static tables reset the rows to their initial value instead. */
  async remove(keys: KeyInput): Promise<number> {
    return this.#written(this.raw.async.remove(this.#keys(keys)));
  }
  /** Removes every row (static tables: resets every row to its initial value). */
  async clear(): Promise<void> {
    return this.#written(this.raw.async.clear());
  }
  /** Number of rows held (a cached count on remote stores). */
  size(): number {
    return this.raw.size();
  }
  /** Rows the table can hold before it grows or evicts (static tables: the vocabulary size). */
  capacity(): number {
    return this.raw.capacity();
  }
  /** Bytes of memory the table holds (values, slots, scores, index) on its backend. */
  memoryUsage(): number {
    return this.raw.memoryUsage();
  }
  /**
   * Sets the epoch the epochLru / epochLfu score policies record.
   * @throws InvalidArgumentError unless epoch is an integer in [0, 2^32)
   */
  setEpoch(epoch: number): void {
    if (!Number.isSafeInteger(epoch) || epoch < 0 || epoch > 0xffffffff) throw invalidParameter('epoch', 'an integer in [0, 2^32)', epoch, errorClassFor(epoch, 'number'));
    this.raw.setEpoch(epoch);
  }
  /** Rows [offset, offset+limit) of the table's order: keys, values, slots, scores. */
  async export(opts?: { offset?: number; limit?: number }): Promise<ExportBatch> {
    const [o, l] = this.#range(opts, 'export');
    return this.raw.async.exportBatch(o, l);
  }
  /** All rows in batches of `batchSize`, so a huge table never needs one giant buffer. */
  async *exportBatches(batchSize: number | null = 65536): AsyncGenerator<ExportBatch> {
    batchSize = checkInteger(batchSize, 'batchSize', { min: 1, fallback: 65536 }); // null: the default
    for (let offset = 0; ; offset += batchSize) {
      const b = await this.raw.async.exportBatch(offset, batchSize);
      if (b.keys.length > 0) yield b;
      if (b.keys.length < batchSize) return;
    }
  }
  /**
   * Bulk load (checkpoint restore): upserts values [n * dim] with their optimizer slots (one Float32Array [n * width] per slot, or null for the slots' initial values) and scores ([n], or null for the policy's scores).
   * @throws ShapeMismatchError naming the slot whose length is wrong
   */
  async importRows(keys: KeyInput, values: ValuesInput, slots?: readonly Float32Array[] | null, scores?: BigUint64Array | readonly bigint[] | null): Promise<void> {
    return this.#written(this.raw.async.importRows(...this.#importArgs(keys, values, slots, scores)));
  }
  /** Embedding bag: [nrows * dim] (in `out` when given). */
  async lookupCombined(ids: BagInput, opts: LookupCombinedOptions | null = {}): Promise<Float32Array> {
    const args = this.#bag(ids, opts, 'lookupCombined');
    const p = this.raw.async.lookupCombined(...args);
    return (args[3] ? this.#written(p) : p).catch((e: unknown) => {
      throw this.#bagError(e, args[0]);
    });
  }
  /**
   * This shard's part of an embedding bag over the whole logical batch `ids`: adds,
   * per row, its owned entries' pooled sum divided by the whole row's denominator to
   * `out` (float64 [nrows * dim]). Summing every shard's part (in shard order) and
   * rounding to float32 once (`Float32Array.prototype.set`) gives the combined rows.
   */
  async lookupCombinedPartial(ids: BagInput, opts: PartialLookupOptions): Promise<Float64Array> {
    const args = this.#partialArgs(ids, opts, 'lookupCombinedPartial');
    const p = this.raw.async.lookupCombinedPartial(...args);
    return args[3] ? this.#written(p) : p;
  }
  /**
   * The combiner's backward: per-entry gradients [nnz * dim] (input entry order) from
   * the pooled gradients `grads` `[nrows * dim]`: `w_j / denom_r * grads[r]` (denominator
   * over the whole row; 0 when it is 0), through the gradient of maxNorm's clip_by_norm
   * at the entry's current row when maxNorm is set. With a plan, only owned entries'
   * rows of `out` are written.
   */
  async lookupCombinedBackward(ids: BagInput, grads: ValuesInput, opts: BackwardOptions | null = {}): Promise<Float32Array> {
    const { args, finish } = this.#backwardArgs(ids, grads, opts, 'lookupCombinedBackward');
    await this.raw.async.lookupCombinedBackward(...args);
    return finish();
  }
  /**
   * One fused training step from pooled gradients: exactly applyGradients(the owned
   * entries' local keys, their lookupCombinedBackward gradients), run by the backend
   * in one call (dedupe + float32 sums of duplicates, one fused update per row).
   */
  async applyCombinedGradients(ids: BagInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, opts: CombinedGradientsOptions | null = {}): Promise<void> {
    return this.#written(this.raw.async.applyCombinedGradients(...this.#combinedGradientArgs(ids, grads, optimizer, step, opts, 'applyCombinedGradients')));
  }
  /** grads: [n * dim]; duplicate keys are summed, then one fused update per row. `step` >= 1. With a plan: owned keys only. */
  async applyGradients(keys: KeyInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, opts?: ApplyGradientsOptions | null): Promise<void> {
    return this.#written(this.raw.async.applyGradients(...this.#gradientArgs(keys, grads, optimizer, step, opts, 'applyGradients')));
  }

  #gradientArgs(keys: KeyInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, o: ApplyGradientsOptions | null | undefined, method: string) {
    o ??= undefined; // null: no options (spec: optional arguments may be null)
    if (o !== undefined && typeof o !== 'object') throw invalidParameter('options', 'an options object', o, InvalidTypeError);
    checkOptionNames(o, OPTION_NAMES.applyGradients, method);
    const plan = this.#plan(o?.plan);
    const k = this.#keys(keys, 'keys', plan);
    const g = this.#values(grads, keys, k.length, 'grads');
    return [k, g, this.#optimizer(optimizer, step), plan] as const;
  }
  /**
   * Keeps the `numReserved` highest-score rows. Dynamic tables only. `policy` (core.md's
   * `restrict(numReserved, policy)`) may name the table's own `scorePolicy`, the one its scores
   * follow; another is INVALID_ARGUMENT rather than ignored.
   */
  async restrict(numReserved: number, policy?: ScorePolicy | null): Promise<number> {
    return this.#written(this.raw.async.restrict(this.#restrictArg(numReserved, policy)));
  }

  #restrictArg(n: number, policy: unknown): number {
    if (this.kind === 'static') throw new UnsupportedError(`restrict is for dynamic tables; "${this.name}" is static`);
    const reserved = checkInteger(n, 'numReserved', { min: 0 });
    if (policy !== undefined && policy !== null && validateScorePolicy(policy, 'policy') !== this.options.scorePolicy) {
      throw invalidParameter('policy', `the table's own scorePolicy '${this.options.scorePolicy}' (its scores follow it), or unset`, policy);
    }
    return reserved;
  }

  // ---- operations (sync form) ----------------------------------------------

  /**
   * Sync form of {@link find}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  findSync(keys: KeyInput, opts?: FindOptions | null): FindResult {
    return this.#syncOps.find(...this.#findArgs(keys, opts, 'findSync'));
  }
  /**
   * Sync form of {@link findOrInsert}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  findOrInsertSync(keys: KeyInput, opts?: (WriteOptions & FindOptions) | null): FindResult {
    const [k, out, plan] = this.#findArgs(keys, opts, 'findOrInsertSync', OPTION_NAMES.findOrInsert);
    return this.#writeSync().findOrInsert(k, this.#scores(opts, k.length), out, plan);
  }
  /**
   * Sync form of {@link upsert}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  upsertSync(keys: KeyInput, values: ValuesInput, opts?: WriteOptions): void {
    const k = this.#keys(keys);
    this.#writeSync().upsert(k, this.#values(values, keys, k.length), this.#scores(opts, k.length, 'upsertSync'));
  }
  /**
   * Sync form of {@link assign}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  assignSync(keys: KeyInput, values: ValuesInput, opts?: WriteOptions): void {
    const k = this.#keys(keys);
    this.#writeSync().assign(k, this.#values(values, keys, k.length), this.#scores(opts, k.length, 'assignSync'));
  }
  /**
   * Sync form of {@link accum}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  accumSync(keys: KeyInput, deltas: ValuesInput, exists: ExistsInput, opts?: WriteOptions): void {
    const k = this.#keys(keys);
    const d = this.#values(deltas, keys, k.length, 'deltas');
    this.#writeSync().accum(k, d, validateExists(exists, k.length), this.#scores(opts, k.length, 'accumSync'));
  }
  /**
   * Sync form of {@link remove}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  removeSync(keys: KeyInput): number {
    const k = this.#keys(keys);
    return this.#writeSync().remove(k);
  }
  /**
   * Sync form of {@link clear}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  clearSync(): void {
    this.#writeSync().clear();
  }
  /**
   * Sync form of {@link export}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  exportSync(opts?: { offset?: number; limit?: number }): ExportBatch {
    const [o, l] = this.#range(opts, 'exportSync');
    return this.#syncOps.exportBatch(o, l);
  }
  /**
   * Sync form of {@link importRows}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  importRowsSync(keys: KeyInput, values: ValuesInput, slots?: readonly Float32Array[] | null, scores?: BigUint64Array | readonly bigint[] | null): void {
    const args = this.#importArgs(keys, values, slots, scores);
    this.#writeSync().importRows(...args);
  }
  /**
   * Sync form of {@link lookupCombined}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  lookupCombinedSync(ids: BagInput, opts: LookupCombinedOptions | null = {}): Float32Array {
    const args = this.#bag(ids, opts, 'lookupCombinedSync');
    try {
      return (args[3] ? this.#writeSync() : this.#syncOps).lookupCombined(...args);
    } catch (e) {
      throw this.#bagError(e, args[0]);
    }
  }
  /**
   * Sync form of {@link lookupCombinedPartial}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  lookupCombinedPartialSync(ids: BagInput, opts: PartialLookupOptions): Float64Array {
    const args = this.#partialArgs(ids, opts, 'lookupCombinedPartialSync');
    return (args[3] ? this.#writeSync() : this.#syncOps).lookupCombinedPartial(...args);
  }
  /**
   * Sync form of {@link lookupCombinedBackward}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  lookupCombinedBackwardSync(ids: BagInput, grads: ValuesInput, opts: BackwardOptions | null = {}): Float32Array {
    const { args, finish } = this.#backwardArgs(ids, grads, opts, 'lookupCombinedBackwardSync');
    this.#syncOps.lookupCombinedBackward(...args);
    return finish();
  }
  /**
   * Sync form of {@link applyCombinedGradients}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  applyCombinedGradientsSync(ids: BagInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, opts: CombinedGradientsOptions | null = {}): void {
    const args = this.#combinedGradientArgs(ids, grads, optimizer, step, opts, 'applyCombinedGradientsSync');
    this.#writeSync().applyCombinedGradients(...args);
  }
  /**
   * Sync form of {@link applyGradients}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  applyGradientsSync(keys: KeyInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, opts?: ApplyGradientsOptions | null): void {
    const args = this.#gradientArgs(keys, grads, optimizer, step, opts, 'applyGradientsSync');
    this.#writeSync().applyGradients(...args);
  }
  /**
   * Sync form of {@link restrict}.
   * @throws UnsupportedError on async-only backends (remote stores)
   */
  restrictSync(numReserved: number, policy?: ScorePolicy | null): number {
    const n = this.#restrictArg(numReserved, policy);
    return this.#writeSync().restrict(n);
  }

  /** The shards' tables (one dim and key dtype) and parts, and the bag validated once (static ids checked by every plan). */
  static #shardParts(shards: readonly TableShard[], ids: BagInput, o: CombinerOptions) {
    if (!Array.isArray(shards) || shards.length === 0) throw invalidParameter('shards', 'a non-empty array of { table, plan }', shards, InvalidTypeError);
    // Plain loops (no closure per call: every sharded step runs this). A sparse array's holes
    // read as undefined (refused as tables), as Array.from would visit them.
    const n = shards.length;
    const tables = new Array<EmbeddingTable>(n);
    for (let d = 0; d < n; d++) {
      const s: unknown = shards[d];
      const t = typeof s === 'object' && s !== null ? (s as TableShard).table : undefined;
      if (!(t instanceof EmbeddingTable)) throw invalidParameter(`shards[${d}].table`, 'an EmbeddingTable', t, InvalidTypeError);
      unknownKeys(s as object, SHARD_FIELDS, SHARD_ARGS[d] ?? `shards[${d}]`, 'fields');
      tables[d] = t;
    }
    const first = tables[0]!;
    for (let d = 0; d < n; d++) {
      const t = tables[d]!;
      if (t.dim !== first.dim || t.keyDtype !== first.keyDtype) {
        throw new ShapeMismatchError(
          `Expected shards[${d}].table ("${t.name}") to have dim ${first.dim} and key dtype ${first.keyDtype} like shards[0].table but it has dim ${t.dim} and key dtype ${t.keyDtype}`,
          { argument: `shards[${d}].table` },
        );
      }
    }
    const plans = new Array<ResolvedShardPlan>(n);
    for (let d = 0; d < n; d++) plans[d] = resolveShardPlan(shards[d]!.plan, tables[d]!.options, SHARD_PLAN_ARGS[d] ?? `shards[${d}].plan`);
    const a = first.#combinerArgs(ids, o, plans[0]!);
    for (let d = 1; d < n; d++) {
      const t = tables[d]!;
      if (t.kind === 'static') t.#keys(a.bag.keys, 'ids', plans[d]!);
    }
    const parts = new Array<ShardPart>(n);
    for (let d = 0; d < n; d++) parts[d] = { raw: tables[d]!.raw, plan: plans[d]! };
    return { tables, parts, first, a };
  }

  /** Validated arguments of lookupCombinedShards: the parts, the bag (validated once), combiner, maxNorm, insert, the caller's out or null, the result's size, the tables. */
  static #shardsArgs(shards: readonly TableShard[], ids: BagInput, o: ShardsLookupOptions, method: string): [ShardPart[], Bag<Keys>, Combiner, number, boolean, Float32Array | null, number, EmbeddingTable[]] {
    checkOptionNames(o, OPTION_NAMES.lookupCombinedShards, method);
    const { tables, parts, first, a } = EmbeddingTable.#shardParts(shards, ids, o);
    const n = (a.bag.rowSplits.length - 1) * first.dim;
    return [parts, a.bag, a.combiner, a.maxNorm, first.#insertArg(o.insertMissing), floatOut(o.out, n, 'out'), n, tables];
  }

  /** Validated arguments of applyCombinedGradientsShards: the parts, bag, grads, combiner, maxNorm, the optimizer (every table's slots checked), the tables. */
  static #shardGradientArgs(shards: readonly TableShard[], ids: BagInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, o: CombinerOptions, method: string) {
    if (typeof o !== 'object' || o === null) throw invalidParameter('options', 'an options object', o, InvalidTypeError);
    checkOptionNames(o, OPTION_NAMES.applyCombinedGradientsShards, method);
    const { tables, parts, first, a } = EmbeddingTable.#shardParts(shards, ids, o);
    const g = validateValues(grads, [a.bag.rowSplits.length - 1], first.dim, 'grads');
    // every table's slots first, then the optimizer resolved once (a learning-rate function runs once per step)
    tables.forEach((t, d) => t.#checkOptimizer(optimizer, step, `shards[${d}].table's`));
    const opt = resolveOptimizer(optimizer, step);
    return { parts, bag: a.bag, g, combiner: a.combiner, maxNorm: a.maxNorm, opt, tables };
  }

  /**
   * The whole embedding bag of one logical table split over `shards` (each table with
   * its plan; together the plans own every key once): out[r] = Σ_d of shard d's
   * `lookupCombinedPartial` (float64, added in shard order) rounded once to float32,
   * exactly what adding the partials yourself gives. A backend may run every shard's
   * part in one call (the CPU backend does: one dispatch, the parts in parallel, in
   * native code); otherwise core runs the parts concurrently and adds them. A fused
   * backend may, where every key has one owner (floorMod plans over one N), sum each
   * row's entries in bag order instead, as one table holding every row does (the CPU
   * backend does: bit for bit one table's bag, whatever the number of shards). The two
   * orders add the same float64 terms: the results usually agree or are float32
   * neighbours, but where a row's terms cancel they can differ by more.
   * The bag is validated once; a rejected call changes nothing.
   *
   * @throws InvalidTypeError / ShapeMismatchError naming shards[d], ids, out; DisposedError
   */
  static async lookupCombinedShards(shards: readonly TableShard[], ids: BagInput, opts: ShardsLookupOptions = {}): Promise<Float32Array> {
    const [parts, bag, combiner, maxNorm, insert, out, n, tables] = EmbeddingTable.#shardsArgs(shards, ids, opts, 'lookupCombinedShards');
    const run = EmbeddingTable.#shardsRun(parts, bag, combiner, maxNorm, insert, out, n);
    return insert ? EmbeddingTable.#allWritten(tables, run) : run;
  }

  /** The work of lookupCombinedShards: the backend's fused call, or the parts' partials added in part order. */
  static #shardsRun(parts: ShardPart[], bag: Bag<Keys>, combiner: Combiner, maxNorm: number, insert: boolean, out: Float32Array | null, n: number): Promise<Float32Array> {
    let fused: Promise<Float32Array> | null;
    try {
      // Without out, a fused backend makes the result itself (the CPU backend's Promise call: written in place, no copies).
      fused = parts[0]!.raw.lookupCombinedShards?.(parts, bag, combiner, maxNorm, insert, out) ?? null;
    } catch (e) {
      return Promise.reject(e);
    }
    return fused ?? EmbeddingTable.#shardsByParts(parts, bag, combiner, maxNorm, insert, out, n);
  }

  /** lookupCombinedShards where no backend fuses it: each part's partial (concurrently), added in part order. */
  static async #shardsByParts(parts: ShardPart[], bag: Bag<Keys>, combiner: Combiner, maxNorm: number, insert: boolean, out: Float32Array | null, n: number): Promise<Float32Array> {
    const partials = parts.map(() => new Float64Array(n));
    await Promise.all(parts.map((p, d) => p.raw.async.lookupCombinedPartial(bag, combiner, maxNorm, insert, p.plan, partials[d]!)));
    return sumShardPartials(partials, out ?? new Float32Array(n));
  }

  /**
   * Sync form of {@link EmbeddingTable.lookupCombinedShards} (the shards' parts one after another).
   * It always adds the partials in shard order, so where a fused backend's Promise form pools
   * in bag order (the CPU backend over floorMod plans) the two forms can differ where a row's
   * terms cancel; use one form throughout when runs must agree bit for bit.
   * @throws UnsupportedError on async-only backends
   */
  static lookupCombinedShardsSync(shards: readonly TableShard[], ids: BagInput, opts: ShardsLookupOptions = {}): Float32Array {
    const [parts, bag, combiner, maxNorm, insert, out, n, tables] = EmbeddingTable.#shardsArgs(shards, ids, opts, 'lookupCombinedShardsSync');
    const sync = tables.map((t) => (insert ? t.#writeSync() : t.#syncOps));
    const partials = parts.map((p, d) => sync[d]!.lookupCombinedPartial(bag, combiner, maxNorm, insert, p.plan, new Float64Array(n)));
    return sumShardPartials(partials, out ?? new Float32Array(n));
  }

  /**
   * One fused training step of a logical table split over `shards` (each table with its
   * plan) from the pooled gradients `grads` [nrows * dim] of the bag `ids`: each shard's
   * table ends exactly as after its own `applyCombinedGradients(ids, grads, optimizer,
   * step, { ...opts, plan })`. A backend may run every shard in one call (the CPU backend
   * does: one dispatch, the shards in parallel on its pool); otherwise core calls each
   * shard. The bag is validated once, and every table's optimizer slots are checked
   * before any shard trains: a call rejected on its arguments changes nothing. (A shard
   * disposed while the call is pending, or ids written into meanwhile, which a Promise
   * call does not allow, can reject it after other shards have trained.)
   *
   * @throws InvalidTypeError / ShapeMismatchError naming shards[d], ids, grads; InvalidArgumentError naming
   *   optimizer (slots that do not fit a shard's table), step, shards[d].plan; OutOfRangeError (static ids); DisposedError
   */
  static async applyCombinedGradientsShards(shards: readonly TableShard[], ids: BagInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, opts: CombinerOptions = {}): Promise<void> {
    const { parts, bag, g, combiner, maxNorm, opt, tables } = EmbeddingTable.#shardGradientArgs(shards, ids, grads, optimizer, step, opts, 'applyCombinedGradientsShards');
    const run = async (): Promise<void> => {
      const fused = parts[0]!.raw.applyCombinedGradientsShards?.(parts, bag, g, combiner, maxNorm, opt) ?? null;
      if (fused) return fused;
      await inPartOrderPerTable(parts, (p) => p.raw.async.applyCombinedGradients(bag, g, combiner, maxNorm, p.plan, opt));
    };
    return EmbeddingTable.#allWritten(tables, run());
  }

  /**
   * Sync form of {@link EmbeddingTable.applyCombinedGradientsShards} (the shards one after another).
   * @throws UnsupportedError on async-only backends
   */
  static applyCombinedGradientsShardsSync(shards: readonly TableShard[], ids: BagInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, opts: CombinerOptions = {}): void {
    const { parts, bag, g, combiner, maxNorm, opt, tables } = EmbeddingTable.#shardGradientArgs(shards, ids, grads, optimizer, step, opts, 'applyCombinedGradientsShardsSync');
    const sync = tables.map((t) => t.#writeSync());
    parts.forEach((p, d) => sync[d]!.applyCombinedGradients(bag, g, combiner, maxNorm, p.plan, opt));
  }

  /** True once dispose() has run. */
  get disposed(): boolean {
    return this.#raw === null;
  }

  /** Frees the table's memory. Idempotent; later calls throw DISPOSED. */
  dispose(): void {
    const raw = this.#raw;
    if (!raw) return;
    this.#raw = null;
    finalizer.unregister(this);
    raw.dispose();
  }

  /** dispose(), for `using` declarations. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** {@link EmbeddingTable.lookupCombinedShards}: one embedding bag over the shards of a logical table. */
export function lookupCombinedShards(shards: readonly TableShard[], ids: BagInput, opts: ShardsLookupOptions = {}): Promise<Float32Array> {
  return EmbeddingTable.lookupCombinedShards(shards, ids, opts);
}

/** {@link EmbeddingTable.applyCombinedGradientsShards}: one training step of a logical table over its shards. */
export function applyCombinedGradientsShards(shards: readonly TableShard[], ids: BagInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, opts: CombinerOptions = {}): Promise<void> {
  return EmbeddingTable.applyCombinedGradientsShards(shards, ids, grads, optimizer, step, opts);
}

/** {@link EmbeddingTable.applyCombinedGradientsShardsSync}. */
export function applyCombinedGradientsShardsSync(shards: readonly TableShard[], ids: BagInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number, opts: CombinerOptions = {}): void {
  EmbeddingTable.applyCombinedGradientsShardsSync(shards, ids, grads, optimizer, step, opts);
}

/** {@link EmbeddingTable.lookupCombinedShardsSync}. */
export function lookupCombinedShardsSync(shards: readonly TableShard[], ids: BagInput, opts: ShardsLookupOptions = {}): Float32Array {
  return EmbeddingTable.lookupCombinedShardsSync(shards, ids, opts);
}

/**
 * Creates a table on a backend (by name, object, or the registry's default).
 * @throws InvalidArgumentError for bad options; NotFound/BackendUnavailable for backends
 */
export function createTable(options: TableOptions, opts: { backend?: string | EmbeddingBackend } | null = {}): EmbeddingTable {
  const resolved = resolveTableOptions(options);
  if (opts !== null && opts !== undefined && typeof opts !== 'object') throw invalidParameter('opts', 'an object ({ backend })', opts, InvalidTypeError);
  checkOptionNames(opts, OPTION_NAMES.createTable, 'createTable', 'opts');
  const b = opts?.backend ?? undefined;
  if (typeof b === 'object' && (typeof b.createTable !== 'function' || typeof b.name !== 'string')) throw invalidParameter('opts.backend', 'a backend name or an EmbeddingBackend', b, InvalidTypeError);
  const backend = typeof b === 'object' ? b : getBackend(b);
  if (resolved.storageDtype !== 'float32') {
    const offered = backend.capabilities().storageDtypes ?? ['float32'];
    if (!offered.includes(resolved.storageDtype)) {
      throw new UnsupportedError(
        `Expected storageDtype to be one the backend "${backend.name}" stores (${offered.join(', ')}) but received '${resolved.storageDtype}'`,
      );
    }
  }
  return new EmbeddingTable(backend.createTable(resolved), resolved, backend.name);
}
