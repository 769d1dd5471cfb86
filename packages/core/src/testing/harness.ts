import { expect } from 'vitest';
import type { EmbeddingBackend } from '../backend.js';
import type { BagInput } from '../bag.js';
import type { Keys } from '../dtypes.js';
import { EmbeddingError, type ErrorCode } from '../errors.js';
import type { KeyInput } from '../keys.js';
import type { OptimizerSpec } from '../optimizers.js';
import type { ExportBatch, FindResult } from '../rawTable.js';
import {
  type ApplyGradientsOptions,
  type BackwardOptions,
  type CombinedGradientsOptions,
  createTable,
  type EmbeddingTable,
  type ExistsInput,
  type FindOptions,
  type LookupCombinedOptions,
  type PartialLookupOptions,
  lookupCombinedShards,
  lookupCombinedShardsSync,
  applyCombinedGradientsShards,
  applyCombinedGradientsShardsSync,
  type CombinerOptions,
  type ShardsLookupOptions,
  type TableShard,
  type ValuesInput,
  type WriteOptions,
} from '../table.js';
import type { TableOptions } from '../tableOptions.js';

/** Which API form a test drives: the Promise methods or the `...Sync` ones. */
export type Form = 'promise' | 'sync';

/** The table operations, always awaited; the 'sync' form calls the `...Sync` methods. */
export interface Ops {
  /** Which form this is. */
  readonly form: Form;
  /** `find` / `findSync`. */
  find(t: EmbeddingTable, keys: KeyInput, o?: FindOptions): Promise<FindResult>;
  /** `findOrInsert` / `findOrInsertSync`. */
  findOrInsert(t: EmbeddingTable, keys: KeyInput, o?: WriteOptions & FindOptions): Promise<FindResult>;
  /** `upsert` / `upsertSync`. */
  upsert(t: EmbeddingTable, keys: KeyInput, values: ValuesInput, o?: WriteOptions): Promise<void>;
  /** `assign` / `assignSync`. */
  assign(t: EmbeddingTable, keys: KeyInput, values: ValuesInput, o?: WriteOptions): Promise<void>;
  /** `accum` / `accumSync`. */
  accum(t: EmbeddingTable, keys: KeyInput, deltas: ValuesInput, exists: ExistsInput, o?: WriteOptions): Promise<void>;
  /** `remove` / `removeSync`: the number of keys removed. */
  remove(t: EmbeddingTable, keys: KeyInput): Promise<number>;
  /** `clear` / `clearSync`. */
  clear(t: EmbeddingTable): Promise<void>;
  /** One `export` page / `exportSync`. */
  export(t: EmbeddingTable, o?: { offset?: number; limit?: number }): Promise<ExportBatch>;
  /** `importRows` / `importRowsSync`. */
  importRows(t: EmbeddingTable, keys: KeyInput, values: ValuesInput, slots?: Float32Array[] | null, scores?: BigUint64Array | readonly bigint[] | null): Promise<void>;
  /** `lookupCombined` / `lookupCombinedSync`. */
  lookupCombined(t: EmbeddingTable, ids: BagInput, o?: LookupCombinedOptions): Promise<Float32Array>;
  /** `lookupCombinedPartial` / `lookupCombinedPartialSync`: float64 partial sums. */
  lookupCombinedPartial(t: EmbeddingTable, ids: BagInput, o: PartialLookupOptions): Promise<Float64Array>;
  /** Core's `lookupCombinedShards` / `lookupCombinedShardsSync`. */
  lookupCombinedShards(shards: readonly TableShard[], ids: BagInput, o?: ShardsLookupOptions): Promise<Float32Array>;
  /** `lookupCombinedBackward` / `lookupCombinedBackwardSync`. */
  lookupCombinedBackward(t: EmbeddingTable, ids: BagInput, grads: ValuesInput, o?: BackwardOptions): Promise<Float32Array>;
  /** `applyCombinedGradients` / `applyCombinedGradientsSync`. */
  applyCombinedGradients(
    t: EmbeddingTable,
    ids: BagInput,
    grads: ValuesInput,
    opt: OptimizerSpec,
    step: number,
    o?: CombinedGradientsOptions,
  ): Promise<void>;
  /** Core's `applyCombinedGradientsShards` / `applyCombinedGradientsShardsSync`. */
  applyCombinedGradientsShards(shards: readonly TableShard[], ids: BagInput, grads: ValuesInput, opt: OptimizerSpec, step: number, o?: CombinerOptions): Promise<void>;
  /** `applyGradients` / `applyGradientsSync`. */
  applyGradients(t: EmbeddingTable, keys: KeyInput, grads: ValuesInput, opt: OptimizerSpec, step: number, o?: ApplyGradientsOptions): Promise<void>;
  /** `restrict` / `restrictSync`: the number of keys removed. */
  restrict(t: EmbeddingTable, n: number): Promise<number>;
}

const promiseOps: Ops = {
  form: 'promise',
  find: (t, k, o) => t.find(k, o),
  findOrInsert: (t, k, o) => t.findOrInsert(k, o),
  upsert: (t, k, v, o) => t.upsert(k, v, o),
  assign: (t, k, v, o) => t.assign(k, v, o),
  accum: (t, k, d, e, o) => t.accum(k, d, e, o),
  remove: (t, k) => t.remove(k),
  clear: (t) => t.clear(),
  export: (t, o) => t.export(o),
  importRows: (t, k, v, s, sc) => t.importRows(k, v, s, sc),
  lookupCombined: (t, ids, o) => t.lookupCombined(ids, o),
  lookupCombinedPartial: (t, ids, o) => t.lookupCombinedPartial(ids, o),
  lookupCombinedShards: (shards, ids, o) => lookupCombinedShards(shards, ids, o),
  lookupCombinedBackward: (t, ids, g, o) => t.lookupCombinedBackward(ids, g, o),
  applyCombinedGradients: (t, ids, g, opt, step, o) => t.applyCombinedGradients(ids, g, opt, step, o),
  applyCombinedGradientsShards: (shards, ids, g, opt, step, o) => applyCombinedGradientsShards(shards, ids, g, opt, step, o),
  applyGradients: (t, k, g, opt, step, o) => t.applyGradients(k, g, opt, step, o),
  restrict: (t, n) => t.restrict(n),
};

const syncOps: Ops = {
  form: 'sync',
  find: async (t, k, o) => t.findSync(k, o),
  findOrInsert: async (t, k, o) => t.findOrInsertSync(k, o),
  upsert: async (t, k, v, o) => t.upsertSync(k, v, o),
  assign: async (t, k, v, o) => t.assignSync(k, v, o),
  accum: async (t, k, d, e, o) => t.accumSync(k, d, e, o),
  remove: async (t, k) => t.removeSync(k),
  clear: async (t) => t.clearSync(),
  export: async (t, o) => t.exportSync(o),
  importRows: async (t, k, v, s, sc) => t.importRowsSync(k, v, s, sc),
  lookupCombined: async (t, ids, o) => t.lookupCombinedSync(ids, o),
  lookupCombinedPartial: async (t, ids, o) => t.lookupCombinedPartialSync(ids, o),
  lookupCombinedShards: async (shards, ids, o) => lookupCombinedShardsSync(shards, ids, o),
  lookupCombinedBackward: async (t, ids, g, o) => t.lookupCombinedBackwardSync(ids, g, o),
  applyCombinedGradients: async (t, ids, g, opt, step, o) => t.applyCombinedGradientsSync(ids, g, opt, step, o),
  applyCombinedGradientsShards: async (shards, ids, g, opt, step, o) => applyCombinedGradientsShardsSync(shards, ids, g, opt, step, o),
  applyGradients: async (t, k, g, opt, step, o) => t.applyGradientsSync(k, g, opt, step, o),
  restrict: async (t, n) => t.restrictSync(n),
};

/** The operations of `form`. */
export function opsFor(form: Form): Ops {
  return form === 'sync' ? syncOps : promiseOps;
}

/** Shared state of one suite run: the backend (set in beforeAll) and the tables to dispose. */
export class SuiteContext {
  readonly name: string;
  readonly forms: readonly Form[];
  readonly propertyRuns: number;
  readonly sync: boolean;
  #backend: EmbeddingBackend | undefined;
  #tables: EmbeddingTable[] = [];

  constructor(name: string, sync: boolean, propertyRuns: number) {
    this.name = name;
    this.sync = sync;
    this.forms = sync ? ['promise', 'sync'] : ['promise'];
    this.propertyRuns = propertyRuns;
  }

  setBackend(b: EmbeddingBackend): void {
    this.#backend = b;
  }

  get backend(): EmbeddingBackend {
    if (!this.#backend) throw new Error('conformance suite: the backend factory has not run yet');
    return this.#backend;
  }

  /** Creates a table on the backend under test; disposed after the test. */
  make(options: TableOptions, backend: EmbeddingBackend = this.backend): EmbeddingTable {
    const t = createTable(options, { backend });
    this.#tables.push(t);
    return t;
  }

  disposeAll(): void {
    for (const t of this.#tables) t.dispose();
    this.#tables = [];
  }
}

// ---- comparisons -------------------------------------------------------------

/** |a - e| <= rel * max(|a|, |e|) + abs, element-wise; lists the first mismatches on failure. */
export function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, label = 'values', rel = 1e-5, abs = 1e-6): void {
  expect(actual.length, `${label}: length`).toBe(expected.length);
  const bad: string[] = [];
  for (let i = 0; i < expected.length && bad.length < 5; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    const ok = a === e || Math.abs(a - e) <= rel * Math.max(Math.abs(a), Math.abs(e)) + abs;
    if (!ok) bad.push(`[${i}] got ${a} expected ${e}`);
  }
  expect(bad, `${label}: elements outside tolerance (rel ${rel}, abs ${abs})`).toEqual([]);
}

/** One exported row, keyed by the key's decimal string. */
export interface RowState {
  /** The row's values. */
  value: number[];
  /** The row's optimizer slots. */
  slots: number[][];
  /** The row's score. */
  score: bigint;
}

/** The table's full content read through `export` pages of `page` rows, keyed by decimal key. */
export async function snapshot(t: EmbeddingTable, page = 1 << 30): Promise<Map<string, RowState>> {
  const out = new Map<string, RowState>();
  for (let offset = 0; ; offset += page) {
    const b = await t.export({ offset, limit: page });
    addBatch(out, b, t.dim, t.slotWidths);
    if (b.keys.length < page) break;
  }
  return out;
}

export function addBatch(out: Map<string, RowState>, b: ExportBatch, dim: number, widths: number[]): void {
  for (let i = 0; i < b.keys.length; i++) {
    const k = String(b.keys[i]);
    expect(out.has(k), `export lists key ${k} twice`).toBe(false);
    out.set(k, {
      value: Array.from(b.values.subarray(i * dim, (i + 1) * dim)),
      slots: b.slots.map((s, j) => Array.from(s.subarray(i * widths[j]!, (i + 1) * widths[j]!))),
      score: b.scores[i]!,
    });
  }
}

/** Compares two snapshots as sets: same keys; values and slots within tolerance; scores exactly (unless `scores` false). */
export function expectSameState(actual: Map<string, RowState>, expected: Map<string, RowState>, label = 'state', scores = true): void {
  expect([...actual.keys()].sort(), `${label}: keys`).toEqual([...expected.keys()].sort());
  for (const [k, e] of expected) {
    const a = actual.get(k)!;
    expectClose(a.value, e.value, `${label}: value of key ${k}`);
    expect(a.slots.length, `${label}: slot count of key ${k}`).toBe(e.slots.length);
    e.slots.forEach((s, j) => expectClose(a.slots[j]!, s, `${label}: slot ${j} of key ${k}`));
    if (scores) expect(a.score, `${label}: score of key ${k}`).toBe(e.score);
  }
}

/** Values of `keys` read with find (flat). */
export async function valuesOf(ops: Ops, t: EmbeddingTable, keys: KeyInput): Promise<number[]> {
  return Array.from((await ops.find(t, keys)).values);
}

/**
 * Runs `call` and checks it throws/rejects an EmbeddingError with `code` whose
 * message names `argument`; then that the table's content and size are unchanged.
 */
export async function expectRejected(
  t: EmbeddingTable | null,
  call: () => unknown,
  code: ErrorCode,
  argument: string | RegExp,
): Promise<EmbeddingError> {
  const before = t && !t.disposed ? await snapshot(t) : null;
  const size = t && !t.disposed ? t.size() : 0;
  let error: unknown;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  expect(error, `expected ${code} naming ${String(argument)}`).toBeInstanceOf(EmbeddingError);
  const err = error as EmbeddingError;
  expect(err.code, err.message).toBe(code);
  if (typeof argument === 'string') expect(err.message).toContain(argument);
  else expect(err.message).toMatch(argument);
  if (t && before) {
    expect(t.size(), 'size after a rejected call').toBe(size);
    expectSameState(await snapshot(t), before, 'state after a rejected call');
  }
  return err;
}

/** Keys as strings, for order-independent comparisons. */
export function keyStrings(keys: Keys | ArrayLike<number | bigint>): string[] {
  return Array.from(keys as ArrayLike<number | bigint>, (k) => String(k));
}

export const INT64_MIN = -(1n << 63n);
export const INT64_MAX = (1n << 63n) - 1n;
export const INT32_MIN = -2147483648;
export const INT32_MAX = 2147483647;

/** Special keys per key dtype: extremes, -1, 0 and a large positive key. */
export function specialKeys(dtype: 'int64' | 'int32'): bigint[] | number[] {
  return dtype === 'int64' ? [INT64_MIN, INT64_MAX, -1n, 0n, 1n << 40n] : [INT32_MIN, INT32_MAX, -1, 0, 1 << 30];
}
