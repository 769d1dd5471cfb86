import type { Bag, Combiner, LookupCombiner } from '../combiners.js';
import type { Keys } from '../dtypes.js';
import { FailedPreconditionError } from '../errors.js';
import { initialRow } from '../initializers.js';
import { makeKeys } from '../keys.js';
import type { ResolvedOptimizer } from '../optimizers.js';
import type { ExportBatch, FindResult, RawTableSync } from '../rawTable.js';
import type { ResolvedTableOptions } from '../tableOptions.js';
import { roundStored, STORAGE_BYTES } from '../storageDtype.js';
import { applyOptimizerRow, combineBag, dedupeGradients } from './kernels.js';
import { applyCombined, backward, partialLookup, type PlainOps, plannedGradients, plannedRead } from './plannedOps.js';
import type { ResolvedShardPlan } from '../shardPlan.js';

/**
 * Reference static table: rows 0..vocabularySize-1 in one Float32Array
 * [vocabularySize * dim], each slot in its own Float32Array [vocabularySize * width].
 * Every row exists: find reports exists = 1, findOrInsert is find, size() and
 * capacity() are vocabularySize, remove resets rows (value and slots) to their
 * initial values and returns the number of distinct keys, clear resets every row.
 * Scores are always 0; there is no eviction, restrict removes nothing.
 * Export order: row index order. Keys are trusted to be in range.
 */
/** A Float32Array of n floats, or FAILED_PRECONDITION (out of memory) when the engine cannot make one (as the CPU backend's tables). */
function floatsOrFail(n: number): Float32Array {
  try {
    return new Float32Array(n);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    throw new FailedPreconditionError(`Out of memory: could not allocate ${n * 4} bytes for the static table`, { cause: e });
  }
}

export class ReferenceStaticTable implements RawTableSync {
  readonly #o: ResolvedTableOptions;
  readonly #widths: number[];
  readonly #rows: number;
  #values: Float32Array;
  #slots: Float32Array[];
  /** The plain (plan-less) reads and update the planned operations are built from. */
  readonly #plain: PlainOps;

  constructor(options: ResolvedTableOptions) {
    this.#o = options;
    this.#rows = options.vocabularySize;
    this.#widths = options.slots.widths.map((w) => (w === 'dim' ? options.dim : 1));
    this.#values = floatsOrFail(this.#rows * options.dim);
    this.#slots = this.#widths.map((w) => floatsOrFail(this.#rows * w));
    this.#plain = {
      dim: options.dim,
      find: (keys) => this.#find(keys),
      findOrInsert: (keys) => this.#find(keys),
      applyGradients: (keys, grads, optimizer) => this.#applyGradients(keys, grads, optimizer),
    };
    for (let r = 0; r < this.#rows; r++) this.#reset(r);
  }

  /** Row r back to its initial value (`array` initializers use the row index) and its slots to their initial values. */
  #reset(r: number): void {
    const o = this.#o;
    initialRow(o.initializer, o.seed, o.stream, r, o.dim, this.#values, r * o.dim, r);
    this.#store(r);
    this.#slots.forEach((s, j) => s.fill(o.slots.initial[j]!, r * this.#widths[j]!, (r + 1) * this.#widths[j]!));
  }

  /** Rounds row r's value to the storage dtype (after every write). */
  #store(r: number): void {
    roundStored(this.#o.storageDtype, this.#values, r * this.#o.dim, (r + 1) * this.#o.dim);
  }

  #row(r: number): Float32Array {
    return this.#values.subarray(r * this.#o.dim, (r + 1) * this.#o.dim);
  }

  find(keys: Keys, out: FindResult | null = null, plan: ResolvedShardPlan | null = null): FindResult {
    return plannedRead(this.#plain, keys, null, false, out, plan);
  }

  findOrInsert(keys: Keys, _scores: BigUint64Array | null = null, out: FindResult | null = null, plan: ResolvedShardPlan | null = null): FindResult {
    return plannedRead(this.#plain, keys, null, false, out, plan);
  }

  #find(keys: Keys): FindResult {
    const dim = this.#o.dim;
    const values = new Float32Array(keys.length * dim);
    for (let i = 0; i < keys.length; i++) values.set(this.#row(Number(keys[i])), i * dim);
    return { values, exists: new Uint8Array(keys.length).fill(1) };
  }

  upsert(keys: Keys, values: Float32Array): void {
    const dim = this.#o.dim;
    for (let i = 0; i < keys.length; i++) {
      this.#row(Number(keys[i])).set(values.subarray(i * dim, (i + 1) * dim));
      this.#store(Number(keys[i]));
    }
  }

  assign(keys: Keys, values: Float32Array): void {
    this.upsert(keys, values);
  }

  /** Every row is present: exists -> add delta; !exists -> no-op. */
  accum(keys: Keys, deltas: Float32Array, exists: Uint8Array): void {
    const dim = this.#o.dim;
    for (let i = 0; i < keys.length; i++) {
      if (!exists[i]) continue;
      const row = this.#row(Number(keys[i]));
      for (let c = 0; c < dim; c++) row[c] = row[c]! + deltas[i * dim + c]!;
      this.#store(Number(keys[i]));
    }
  }

  remove(keys: Keys): number {
    const distinct = new Set<number>();
    for (let i = 0; i < keys.length; i++) distinct.add(Number(keys[i]));
    for (const r of distinct) this.#reset(r);
    return distinct.size;
  }

  clear(): void {
    for (let r = 0; r < this.#rows; r++) this.#reset(r);
  }

  size(): number {
    return this.#rows;
  }

  capacity(): number {
    return this.#rows;
  }

  memoryUsage(): number {
    return (this.#values.length * STORAGE_BYTES[this.#o.storageDtype]) + this.#slots.reduce((a, s) => a + s.byteLength, 0);
  }

  exportBatch(offset: number, limit: number): ExportBatch {
    const dim = this.#o.dim;
    const start = Math.min(offset, this.#rows);
    const end = Math.min(this.#rows, start + Math.min(limit, this.#rows));
    const n = end - start;
    const keys = makeKeys(this.#o.keyDtype, n, (i) => start + i);
    return {
      keys,
      values: this.#values.slice(start * dim, end * dim),
      slots: this.#slots.map((s, j) => s.slice(start * this.#widths[j]!, end * this.#widths[j]!)),
      scores: new BigUint64Array(n),
    };
  }

  /** Sets rows; `slots` null resets the imported rows' slots to their initial values. Scores are ignored. */
  importRows(keys: Keys, values: Float32Array, slots: Float32Array[] | null): void {
    const dim = this.#o.dim;
    for (let i = 0; i < keys.length; i++) {
      const r = Number(keys[i]);
      this.#row(r).set(values.subarray(i * dim, (i + 1) * dim));
      this.#store(r);
      this.#slots.forEach((s, j) => {
        const w = this.#widths[j]!;
        if (slots) s.set(slots[j]!.subarray(i * w, (i + 1) * w), r * w);
        else s.fill(this.#o.slots.initial[j]!, r * w, (r + 1) * w);
      });
    }
  }

  lookupCombined(bag: Bag<Keys>, combiner: LookupCombiner, maxNorm: number, _insert = false, out: Float32Array | null = null): Float32Array {
    const r = combineBag((j) => this.#row(Number(bag.keys[j])), bag, this.#o.dim, combiner, maxNorm);
    if (!out) return r;
    out.set(r);
    return out;
  }

  lookupCombinedPartial(bag: Bag<Keys>, combiner: Combiner, maxNorm: number, insert: boolean, plan: ResolvedShardPlan, out: Float64Array): Float64Array {
    return partialLookup(this.#plain, bag, combiner, maxNorm, insert, plan, out);
  }

  lookupCombinedBackward(bag: Bag<Keys>, grads: Float32Array, combiner: Combiner, maxNorm: number, plan: ResolvedShardPlan | null, out: Float32Array): Float32Array {
    return backward(this.#plain, bag, grads, combiner, maxNorm, plan, out);
  }

  applyCombinedGradients(bag: Bag<Keys>, grads: Float32Array, combiner: Combiner, maxNorm: number, plan: ResolvedShardPlan | null, optimizer: ResolvedOptimizer): void {
    applyCombined(this.#plain, bag, grads, combiner, maxNorm, plan, optimizer);
  }

  applyGradients(keys: Keys, grads: Float32Array, optimizer: ResolvedOptimizer, plan: ResolvedShardPlan | null = null): void {
    const p = plannedGradients(keys, grads, this.#o.dim, plan);
    this.#applyGradients(p.keys, p.grads, optimizer);
  }

  #applyGradients(keys: Keys, grads: Float32Array, optimizer: ResolvedOptimizer): void {
    const dim = this.#o.dim;
    const { unique, sums } = dedupeGradients(keys, grads, dim);
    unique.forEach((k, u) => {
      const r = Number(k);
      const slots = this.#slots.map((s, j) => s.subarray(r * this.#widths[j]!, (r + 1) * this.#widths[j]!));
      applyOptimizerRow(optimizer, this.#row(r), slots, sums.subarray(u * dim, (u + 1) * dim));
      this.#store(r);
    });
  }

  restrict(): number {
    return 0;
  }

  setEpoch(): void {}

  dispose(): void {
    this.#values = new Float32Array(0);
    this.#slots = [];
  }
}
