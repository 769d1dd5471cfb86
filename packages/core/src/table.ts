import { type BagInput, type BagWeights, toBag } from './bag.js';
import type { Bag, Combiner } from './combiners.js';
import { validateCombiner, validateMaxNorm } from './combiners.js';
import { type EmbeddingBackend, getBackend } from './backend.js';
import type { KeyDtype, Keys } from './dtypes.js';
import {
  DisposedError,
  InvalidTypeError,
  invalidParameter,
  OutOfRangeError,
  ShapeMismatchError,
  UnsupportedError,
} from './errors.js';
import { type KeyInput, keyShape, normalizeKeys } from './keys.js';
import { isOptimizerSpec, type OptimizerSpec, type ResolvedOptimizer, resolveOptimizer, sameSlotLayout } from './optimizers.js';
import type { ExportBatch, FindResult, RawTable, RawTableSync } from './rawTable.js';
import { type ResolvedTableOptions, resolveTableOptions, type TableOptions } from './tableOptions.js';
import { Tensor } from './tensor.js';
import { type ExistsInput, validateExists, validateValues, type ValuesInput } from './values.js';

export type { ExistsInput, ValuesInput } from './values.js';


export interface WriteOptions {
  /** Scores of the keys, [n]; only for the 'customized' policy. */
  scores?: BigUint64Array | readonly bigint[] | null;
}

export interface LookupCombinedOptions {
  weights?: BagWeights;
  /** Default 'mean'. */
  combiner?: Combiner;
  /** Clip each row to this L2 norm before combining. Default none. */
  maxNorm?: number | null;
  /** Insert missing keys with their initial value (training). Default false. */
  insertMissing?: boolean;
}

const finalizer = new FinalizationRegistry<RawTable>((raw) => raw.dispose());

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Index of the first key outside [0, n), or -1. Hot path of every static-table call:
 * reads int64 keys as two uint32 words (no BigInt per key; a negative key has a
 * high word >= 2^31 and fails the bound).
 */
function firstOutOfRange(keys: Keys, n: number): number {
  if (keys instanceof Int32Array) {
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (k < 0 || k >= n) return i;
    }
    return -1;
  }
  if (!LITTLE_ENDIAN) {
    const limit = BigInt(n);
    for (let i = 0; i < keys.length; i++) if (keys[i]! < 0n || keys[i]! >= limit) return i;
    return -1;
  }
  const words = new Uint32Array(keys.buffer, keys.byteOffset, keys.length * 2);
  for (let i = 0; i < keys.length; i++) {
    const hi = words[2 * i + 1]!;
    const lo = words[2 * i]!;
    if (hi === 0 ? lo >= n : hi >= 0x200000 || hi * 4294967296 + lo >= n) return i;
  }
  return -1;
}

/**
 * A table: validates and normalises every argument once, then calls the backend.
 * Keys: any {@link KeyInput}. Values: flat Float32Array [n*dim] (or a Tensor of shape
 * keys.shape + [dim]). Every op has a Promise form and a `...Sync` form (the latter
 * throws UNSUPPORTED on async-only backends). A rejected call changes nothing.
 */
export class EmbeddingTable {
  readonly options: ResolvedTableOptions;
  readonly backendName: string;
  #raw: RawTable | null;

  constructor(raw: RawTable, options: ResolvedTableOptions, backendName = 'custom') {
    this.#raw = raw;
    this.options = options;
    this.backendName = backendName;
    finalizer.register(this, raw, this);
  }

  get name(): string {
    return this.options.name;
  }
  get dim(): number {
    return this.options.dim;
  }
  get kind(): 'dynamic' | 'static' {
    return this.options.kind;
  }
  get keyDtype(): KeyDtype {
    return this.options.keyDtype;
  }
  get slotNames(): readonly string[] {
    return this.options.slots.names;
  }
  /** Width in floats of each slot. */
  get slotWidths(): number[] {
    return this.options.slots.widths.map((w) => (w === 'dim' ? this.dim : 1));
  }

  get raw(): RawTable {
    if (!this.#raw) throw new DisposedError(`Table "${this.name}" was disposed`);
    return this.#raw;
  }

  private get syncOps(): RawTableSync {
    const s = this.raw.sync;
    if (!s) throw new UnsupportedError(`Backend "${this.backendName}" offers no synchronous operations; use the Promise form`);
    return s;
  }

  // ---- validation helpers -------------------------------------------------

  keys(input: KeyInput | unknown, argument = 'keys'): Keys {
    const keys = normalizeKeys(input, this.keyDtype, argument);
    if (this.kind === 'static') {
      const n = this.options.vocabularySize;
      const bad = firstOutOfRange(keys, n);
      if (bad >= 0) {
        throw new OutOfRangeError(
          `Expected ${argument}[${bad}] to be a row index in [0, ${n}) of table "${this.name}" but received ${keys[bad]}`,
          { argument },
        );
      }
    }
    return keys;
  }

  /** Values for n keys: a Tensor must have shape keys.shape + [dim]; a flat array n * dim floats. */
  values(input: ValuesInput | unknown, keysInput: unknown, n: number, argument = 'values'): Float32Array {
    const shape = input instanceof Tensor ? keyShape(keysInput as KeyInput) : [n];
    return validateValues(input, shape, this.dim, argument);
  }

  private scores(opts: WriteOptions | undefined, n: number): BigUint64Array | null {
    const s = opts?.scores;
    if (s === undefined || s === null) return null;
    if (this.options.scorePolicy !== 'customized') {
      throw invalidParameter('scores', `unset for the '${this.options.scorePolicy}' policy (only 'customized' takes scores)`, s);
    }
    let out: BigUint64Array;
    if (s instanceof BigUint64Array) out = s;
    else if (Array.isArray(s) && s.every((x) => typeof x === 'bigint' && x >= 0n && x < 1n << 64n)) out = BigUint64Array.from(s);
    else throw invalidParameter('scores', 'a BigUint64Array or bigint[] of uint64', s, InvalidTypeError);
    if (out.length !== n) throw new ShapeMismatchError(`Expected ${n} scores but received ${out.length}`, { argument: 'scores' });
    return out;
  }


  private bag(ids: BagInput, o: LookupCombinedOptions): [Bag<Keys>, Combiner, number, boolean] {
    const bag = toBag(ids, o.weights, this.keyDtype);
    if (this.kind === 'static') this.keys(bag.keys, 'ids');
    const combiner = validateCombiner(o.combiner ?? 'mean');
    const maxNorm = validateMaxNorm(o.maxNorm);
    const insert = o.insertMissing ?? false;
    if (typeof insert !== 'boolean') throw invalidParameter('insertMissing', 'a boolean', insert);
    return [bag, combiner, maxNorm, insert];
  }

  private optimizer(optimizer: OptimizerSpec, step: number): ResolvedOptimizer {
    if (!isOptimizerSpec(optimizer)) throw invalidParameter('optimizer', 'an optimizer spec', optimizer, InvalidTypeError);
    if (!sameSlotLayout(optimizer.slots, this.options.slots)) {
      throw invalidParameter(
        'optimizer',
        `an optimizer whose slots are [${this.slotNames.join(', ')}] (the table's layout)`,
        `${optimizer.kind} with slots [${optimizer.slots.names.join(', ')}]`,
      );
    }
    if (typeof step !== 'number' || !Number.isSafeInteger(step) || step < 1) throw invalidParameter('step', 'an integer >= 1', step);
    return resolveOptimizer(optimizer, step);
  }

  private range(opts: { offset?: number; limit?: number } | undefined): [number, number] {
    const offset = opts?.offset ?? 0;
    const limit = opts?.limit ?? Number.MAX_SAFE_INTEGER;
    if (!Number.isSafeInteger(offset) || offset < 0) throw invalidParameter('offset', 'an integer >= 0', offset);
    if (!Number.isSafeInteger(limit) || limit < 0) throw invalidParameter('limit', 'an integer >= 0', limit);
    return [offset, limit];
  }

  private importArgs(
    keysIn: KeyInput,
    valuesIn: ValuesInput,
    slotsIn?: readonly Float32Array[] | null,
    scoresIn?: BigUint64Array | null,
  ): [Keys, Float32Array, Float32Array[] | null, BigUint64Array | null] {
    const keys = this.keys(keysIn);
    const values = this.values(valuesIn, keysIn, keys.length);
    let slots: Float32Array[] | null = null;
    if (slotsIn !== undefined && slotsIn !== null) {
      const widths = this.slotWidths;
      if (!Array.isArray(slotsIn) || slotsIn.length !== widths.length) {
        throw invalidParameter('slots', `${widths.length} Float32Arrays (${this.slotNames.join(', ')})`, slotsIn);
      }
      slots = slotsIn.map((s, i) => {
        if (!(s instanceof Float32Array) || s.length !== keys.length * widths[i]!) {
          throw new ShapeMismatchError(
            `Expected slots[${i}] (${this.slotNames[i]}) to be a Float32Array of ${keys.length * widths[i]!} floats but received ${s instanceof Float32Array ? s.length : typeof s}`,
            { argument: `slots[${i}]` },
          );
        }
        return s;
      });
    }
    let scores: BigUint64Array | null = null;
    if (scoresIn !== undefined && scoresIn !== null) {
      if (!(scoresIn instanceof BigUint64Array) || scoresIn.length !== keys.length) {
        throw invalidParameter('scores', `a BigUint64Array of length ${keys.length}`, scoresIn);
      }
      scores = scoresIn;
    }
    return [keys, values, slots, scores];
  }

  // ---- operations (Promise form) -------------------------------------------

  /** Reads rows; missing keys get their initial value, exists = 0. Never inserts. */
  async find(keys: KeyInput): Promise<FindResult> {
    return this.raw.async.find(this.keys(keys));
  }
  async findOrInsert(keys: KeyInput, opts?: WriteOptions): Promise<FindResult> {
    const k = this.keys(keys);
    return this.raw.async.findOrInsert(k, this.scores(opts, k.length));
  }
  async upsert(keys: KeyInput, values: ValuesInput, opts?: WriteOptions): Promise<void> {
    const k = this.keys(keys);
    const v = this.values(values, keys, k.length);
    return this.raw.async.upsert(k, v, this.scores(opts, k.length));
  }
  async assign(keys: KeyInput, values: ValuesInput, opts?: WriteOptions): Promise<void> {
    const k = this.keys(keys);
    const v = this.values(values, keys, k.length);
    return this.raw.async.assign(k, v, this.scores(opts, k.length));
  }
  async accum(keys: KeyInput, deltas: ValuesInput, exists: ExistsInput, opts?: WriteOptions): Promise<void> {
    const k = this.keys(keys);
    const d = this.values(deltas, keys, k.length, 'deltas');
    return this.raw.async.accum(k, d, validateExists(exists, k.length), this.scores(opts, k.length));
  }
  async remove(keys: KeyInput): Promise<number> {
    return this.raw.async.remove(this.keys(keys));
  }
  async clear(): Promise<void> {
    return this.raw.async.clear();
  }
  size(): number {
    return this.raw.size();
  }
  capacity(): number {
    return this.raw.capacity();
  }
  memoryUsage(): number {
    return this.raw.memoryUsage();
  }
  setEpoch(epoch: number): void {
    if (!Number.isSafeInteger(epoch) || epoch < 0 || epoch > 0xffffffff) throw invalidParameter('epoch', 'an integer in [0, 2^32)', epoch);
    this.raw.setEpoch(epoch);
  }
  /** Rows [offset, offset+limit) of the table's order: keys, values, slots, scores. */
  async export(opts?: { offset?: number; limit?: number }): Promise<ExportBatch> {
    const [o, l] = this.range(opts);
    return this.raw.async.exportBatch(o, l);
  }
  /** All rows in batches of `batchSize`, so a huge table never needs one giant buffer. */
  async *exportBatches(batchSize = 65536): AsyncGenerator<ExportBatch> {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw invalidParameter('batchSize', 'an integer >= 1', batchSize);
    for (let offset = 0; ; offset += batchSize) {
      const b = await this.raw.async.exportBatch(offset, batchSize);
      if (b.keys.length > 0) yield b;
      if (b.keys.length < batchSize) return;
    }
  }
  async importRows(keys: KeyInput, values: ValuesInput, slots?: readonly Float32Array[] | null, scores?: BigUint64Array | null): Promise<void> {
    return this.raw.async.importRows(...this.importArgs(keys, values, slots, scores));
  }
  /** Embedding bag: [nrows * dim]. */
  async lookupCombined(ids: BagInput, opts: LookupCombinedOptions = {}): Promise<Float32Array> {
    return this.raw.async.lookupCombined(...this.bag(ids, opts));
  }
  /** grads: [n * dim]; duplicate keys are summed, then one fused update per row. `step` >= 1. */
  async applyGradients(keys: KeyInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number): Promise<void> {
    const k = this.keys(keys);
    const g = this.values(grads, keys, k.length, 'grads');
    return this.raw.async.applyGradients(k, g, this.optimizer(optimizer, step));
  }
  /** Keeps the `numReserved` highest-score rows. Dynamic tables only. */
  async restrict(numReserved: number): Promise<number> {
    return this.raw.async.restrict(this.restrictArg(numReserved));
  }

  private restrictArg(n: number): number {
    if (this.kind === 'static') throw new UnsupportedError(`restrict is for dynamic tables; "${this.name}" is static`);
    if (!Number.isSafeInteger(n) || n < 0) throw invalidParameter('numReserved', 'an integer >= 0', n);
    return n;
  }

  // ---- operations (sync form) ----------------------------------------------

  findSync(keys: KeyInput): FindResult {
    return this.syncOps.find(this.keys(keys));
  }
  findOrInsertSync(keys: KeyInput, opts?: WriteOptions): FindResult {
    const k = this.keys(keys);
    return this.syncOps.findOrInsert(k, this.scores(opts, k.length));
  }
  upsertSync(keys: KeyInput, values: ValuesInput, opts?: WriteOptions): void {
    const k = this.keys(keys);
    this.syncOps.upsert(k, this.values(values, keys, k.length), this.scores(opts, k.length));
  }
  assignSync(keys: KeyInput, values: ValuesInput, opts?: WriteOptions): void {
    const k = this.keys(keys);
    this.syncOps.assign(k, this.values(values, keys, k.length), this.scores(opts, k.length));
  }
  accumSync(keys: KeyInput, deltas: ValuesInput, exists: ExistsInput, opts?: WriteOptions): void {
    const k = this.keys(keys);
    const d = this.values(deltas, keys, k.length, 'deltas');
    this.syncOps.accum(k, d, validateExists(exists, k.length), this.scores(opts, k.length));
  }
  removeSync(keys: KeyInput): number {
    return this.syncOps.remove(this.keys(keys));
  }
  clearSync(): void {
    this.syncOps.clear();
  }
  exportSync(opts?: { offset?: number; limit?: number }): ExportBatch {
    const [o, l] = this.range(opts);
    return this.syncOps.exportBatch(o, l);
  }
  importRowsSync(keys: KeyInput, values: ValuesInput, slots?: readonly Float32Array[] | null, scores?: BigUint64Array | null): void {
    this.syncOps.importRows(...this.importArgs(keys, values, slots, scores));
  }
  lookupCombinedSync(ids: BagInput, opts: LookupCombinedOptions = {}): Float32Array {
    return this.syncOps.lookupCombined(...this.bag(ids, opts));
  }
  applyGradientsSync(keys: KeyInput, grads: ValuesInput, optimizer: OptimizerSpec, step: number): void {
    const k = this.keys(keys);
    const g = this.values(grads, keys, k.length, 'grads');
    this.syncOps.applyGradients(k, g, this.optimizer(optimizer, step));
  }
  restrictSync(numReserved: number): number {
    return this.syncOps.restrict(this.restrictArg(numReserved));
  }

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

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Creates a table on a backend (by name, object, or the registry's default).
 * @throws InvalidArgumentError for bad options; NotFound/BackendUnavailable for backends
 */
export function createTable(options: TableOptions, opts: { backend?: string | EmbeddingBackend } = {}): EmbeddingTable {
  const resolved = resolveTableOptions(options);
  const backend = typeof opts.backend === 'object' && opts.backend !== null ? opts.backend : getBackend(opts.backend);
  return new EmbeddingTable(backend.createTable(resolved), resolved, backend.name);
}
