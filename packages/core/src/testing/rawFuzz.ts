import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Keys } from '../dtypes.js';
import { optimizers, resolveOptimizer } from '../optimizers.js';
import type { RawTable } from '../rawTable.js';
import { resolveShardPlan } from '../shardPlan.js';
import { resolveTableOptions, type ResolvedTableOptions, type TableOptions } from '../tableOptions.js';
import { codedOrOk, junkArbitrary } from './junk.js';

/**
 * The property tests of a backend's raw table (what `table.raw` returns), for backends whose
 * raw tables are plain JavaScript (core's reference backend, the Redis store); the CPU
 * backend's live in its own tests (rawJunk.test.ts). Two properties:
 * - junk: every method of raw.sync (when present), raw.async and the raw table, called with
 *   junk types, wrong lengths, detached buffers, out-of-range row indices in place of valid
 *   arguments, either runs or rejects with a coded EmbeddingError (not INTERNAL), and a
 *   rejected call leaves the table as it was;
 * - model: random sequences of valid calls (find, findOrInsert, upsert, assign, accum, remove,
 *   clear, importRows, applyGradients with SGD, lookupCombined with 'sum', size, exportBatch)
 *   agree, call by call and in the final rows, with a plain Map written here.
 */
export interface RawFuzzTarget {
  /** The backend, for test names. */
  name: string;
  /** A fresh raw table of `options` (each call: a new, empty table). */
  make: (options: ResolvedTableOptions) => RawTable | Promise<RawTable>;
  /** Frees a table of `make` (default: raw.dispose()). */
  free?: (raw: RawTable) => void | Promise<void>;
  /** Whether the backend has static tables (the junk property runs on one too). Default true. */
  staticTables?: boolean;
  /** Runs per method of the junk property. Default 40 (JUNK_RUNS). */
  runs?: number;
  /** Call sequences of the model property. Default 30. */
  modelRuns?: number;
  /** Timeout of each test, ms. */
  timeout?: number;
}

const DIM = 4;

/** A typed array whose buffer is detached (transferred away). */
function detached<T extends ArrayBufferView>(make: (n: number) => T, n = 4): T {
  const a = make(n);
  structuredClone(a.buffer, { transfer: [a.buffer as ArrayBuffer] });
  return a;
}

/** Junk plus what a raw table's caller gets wrong most: detached buffers, arrays of the wrong size or type, bad plans, parts and optimizers. */
export function rawJunkArbitrary(options: ResolvedTableOptions): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 4, arbitrary: junkArbitrary() },
    {
      weight: 3,
      arbitrary: fc
        .constantFrom<() => unknown>(
          () => detached((n) => new BigInt64Array(n)),
          () => detached((n) => new Int32Array(n)),
          () => detached((n) => new Float32Array(n)),
          () => detached((n) => new Uint8Array(n)),
          () => detached((n) => new BigUint64Array(n)),
          () => new Float32Array(3),
          () => new Float32Array(8 * DIM),
          () => new Float64Array(2 * DIM),
          () => BigInt64Array.from([1n, 1n << 62n, -5n]),
          () => BigInt64Array.from([7n, 99n]),
          () => Int32Array.from([0, 5, 2]),
          () => Int32Array.from([-1, 1]),
          () => BigUint64Array.from([1n]),
          () => ({ rowSplits: Int32Array.from([0, 3]), keys: detached((n) => new BigInt64Array(n), 3), weights: null }),
          () => ({ rowSplits: Int32Array.from([0, 9]), keys: BigInt64Array.from([1n]), weights: null }),
          () => ({ rowSplits: Int32Array.from([0, 2, 1]), keys: BigInt64Array.from([1n]), weights: null }),
          () => ({ rowSplits: Int32Array.from([0, 1]), keys: BigInt64Array.from([1n]), weights: new Float32Array(3) }),
          () => ({ values: detached((n) => new Float32Array(n), 8), exists: new Uint8Array(2) }),
          () => ({ values: new Float32Array(2 * DIM), exists: new Uint8Array(1) }),
          () => ({ kind: 'adam', lr: 1n }),
          () => ({ ...resolveOptimizer(optimizers.adagrad(), 1), lr: '0.1' }),
          () => ({ ...resolveOptimizer(optimizers.adagrad(), 1), step: 0 }),
          () => resolveOptimizer(optimizers.adam(), 1),
          () => resolveOptimizer(optimizers.sgd(), 1),
          () => ({ placement: 'mod', numShards: 0, shard: 0, start: 0, end: 0, roundRobin: false }),
          () => ({ placement: 'mod', numShards: 2, shard: 5, start: 0, end: 0, roundRobin: false }),
          () => ({ placement: 'range', numShards: 1, shard: 0, start: 5, end: 2, roundRobin: false }),
          () => ({ placement: 'mod', numShards: 2, shard: 1 }),
          () => resolveShardPlan({ placement: 'mod', numShards: 2, shard: 1 }, options),
          () => [new Float32Array(1)],
          () => [{ raw: {}, plan: null }],
          () => new Float32Array(1 << 12),
          () => 'max',
          () => 'sqrtn',
          () => 2 ** 40,
          () => -1,
          () => Infinity,
          () => NaN,
        )
        .map((f) => f()),
    },
  );
}

/**
 * Valid argument lists of every RawTableSync method on a table of `o` with an adagrad optimizer
 * (two keys, 1 and 2; scores when the policy is 'customized'), for junk tests to mutate.
 */
export function rawTableExamples(o: ResolvedTableOptions): Record<string, () => unknown[]> {
  const DIM = o.dim;
  const keys = (): Keys => (o.keyDtype === 'int64' ? BigInt64Array.from([1n, 2n]) : Int32Array.from([1, 2]));
  const values = () => Float32Array.from({ length: 2 * DIM }, (_, i) => i / 8);
  const scores = () => (o.scorePolicy === 'customized' ? BigUint64Array.from([3n, 4n]) : null);
  const bag = () => ({ rowSplits: Int32Array.from([0, 1, 2]), keys: keys(), weights: null });
  const out = () => ({ values: new Float32Array(2 * DIM), exists: new Uint8Array(2) });
  const plan = () => resolveShardPlan({ placement: 'mod', numShards: 1, shard: 0 }, o);
  const opt = () => resolveOptimizer(optimizers.adagrad(), 1);
  const slots = () => o.slots.widths.map((w) => new Float32Array(2 * (w === 'dim' ? DIM : 1)));
  return {
    find: () => [keys(), out(), plan()],
    findOrInsert: () => [keys(), scores(), out(), null],
    upsert: () => [keys(), values(), scores()],
    assign: () => [keys(), values(), null],
    accum: () => [keys(), values(), Uint8Array.from([1, 0]), scores()],
    remove: () => [keys()],
    clear: () => [],
    size: () => [],
    capacity: () => [],
    memoryUsage: () => [],
    exportBatch: () => [0, 10],
    importRows: () => [keys(), values(), slots(), scores()],
    lookupCombined: () => [bag(), 'sum', 0, false, new Float32Array(2 * DIM)],
    lookupCombinedPartial: () => [bag(), 'mean', 0, false, plan(), new Float64Array(2 * DIM)],
    lookupCombinedBackward: () => [bag(), values(), 'sum', 0, null, new Float32Array(2 * DIM)],
    applyCombinedGradients: () => [bag(), values(), 'sum', 0, null, opt()],
    applyGradients: () => [keys(), values(), opt(), null],
    restrict: () => [1],
    setEpoch: () => [1],
  };
}

/** Keys, values, slots and scores of every row, sorted by key. */
async function state(raw: RawTable): Promise<unknown> {
  const b = await raw.async.exportBatch(0, Infinity);
  const dim = b.keys.length === 0 ? DIM : b.values.length / b.keys.length;
  const order = Array.from(b.keys as ArrayLike<bigint | number>, (k, i) => [BigInt(k), i] as const).sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  const rows = (a: Float32Array, w: number) => order.map(([, i]) => Array.from(a.subarray(i * w, (i + 1) * w)));
  return { keys: order.map(([k]) => k), values: rows(b.values, dim), slots: b.slots.map((s) => rows(s, s.length / Math.max(1, b.keys.length))), scores: order.map(([, i]) => b.scores[i]), size: raw.size() };
}

/** An example with 1 to all positions replaced by junk (or 0-4 arguments of pure junk). */
function argsFor(example: () => unknown[], j: fc.Arbitrary<unknown>): fc.Arbitrary<unknown[]> {
  const mutated = fc.array(fc.tuple(fc.nat(7), j), { minLength: 1, maxLength: 4 }).map((subs) => {
    const a = example();
    for (const [pos, v] of subs) if (a.length > 0) a[pos % a.length] = v;
    return a;
  });
  return fc.oneof({ weight: 3, arbitrary: mutated }, { weight: 1, arbitrary: fc.array(j, { maxLength: 4 }) });
}

type Method = (...a: unknown[]) => unknown;

/** fc.stringify, which throws on a detached typed array (then each argument is shown alone). */
function show(v: unknown): string {
  try {
    return fc.stringify(v);
  } catch {
    return Array.isArray(v) ? `[${v.map((x) => (ArrayBuffer.isView(x) ? `detached ${x.constructor.name}` : show(x))).join(', ')}]` : String(v);
  }
}

/** The function members of `o`, own and inherited (a class instance's methods), but Object's. */
function methodNames(o: object): string[] {
  const names = new Set<string>();
  for (let p: object | null = o; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
    for (const n of Object.getOwnPropertyNames(p)) if (n !== 'constructor' && typeof (o as Record<string, unknown>)[n] === 'function') names.add(n);
  }
  return [...names];
}

/** A call's outcome: 'ok', or the refused call's coded error checked (not INTERNAL). */
async function outcome(fn: () => unknown, label: string): Promise<'ok' | 'rejected'> {
  const r = await codedOrOk(fn, label);
  if (r === 'rejected') {
    try {
      await fn();
    } catch (e) {
      expect((e as { code?: string }).code, `${label}: ${(e as Error).message}`).not.toBe('INTERNAL');
    }
  }
  return r;
}

// ---- the model ------------------------------------------------------------------------------

/** One valid call of the model property. */
type Op =
  | { op: 'find' | 'findOrInsert' | 'remove'; keys: bigint[] }
  | { op: 'upsert' | 'assign' | 'importRows'; keys: bigint[]; values: number[] }
  | { op: 'accum'; keys: bigint[]; values: number[]; exists: boolean[] }
  | { op: 'applyGradients'; keys: bigint[]; values: number[] }
  | { op: 'lookupCombined'; keys: bigint[]; splits: number[]; insert: boolean }
  | { op: 'findPlanned'; keys: bigint[]; shard: number; insert: boolean }
  | { op: 'exportPaged'; page: number }
  | { op: 'clear' | 'size' | 'export' };

const KEY = fc.integer({ min: -4, max: 12 }).map(BigInt);
/** Multiples of 1/8 in [-4, 4]: sums and SGD steps of a few of them are exact in float32. */
const VALUE = fc.integer({ min: -32, max: 32 }).map((v) => v / 8);
const keysArb = fc.array(KEY, { maxLength: 6 });
const rowsOf = (n: number) => fc.array(VALUE, { minLength: n * DIM, maxLength: n * DIM });

const opArb: fc.Arbitrary<Op> = fc.oneof(
  keysArb.map((keys) => ({ op: 'find' as const, keys })),
  keysArb.map((keys) => ({ op: 'findOrInsert' as const, keys })),
  keysArb.map((keys) => ({ op: 'remove' as const, keys })),
  ...(['upsert', 'assign', 'importRows', 'applyGradients'] as const).map((op) => keysArb.chain((keys) => rowsOf(keys.length).map((values) => ({ op, keys, values })))),
  keysArb.chain((keys) => fc.tuple(rowsOf(keys.length), fc.array(fc.boolean(), { minLength: keys.length, maxLength: keys.length })).map(([values, exists]) => ({ op: 'accum' as const, keys, values, exists }))),
  keysArb.chain((keys) =>
    fc.tuple(fc.array(fc.nat(keys.length), { maxLength: 3 }), fc.boolean()).map(([cuts, insert]) => ({ op: 'lookupCombined' as const, keys, splits: [0, ...cuts.sort((a, b) => a - b), keys.length], insert })),
  ),
  fc.tuple(keysArb, fc.nat(1), fc.boolean()).map(([keys, shard, insert]) => ({ op: 'findPlanned' as const, keys, shard, insert })),
  fc.integer({ min: 1, max: 4 }).map((page) => ({ op: 'exportPaged' as const, page })),
  fc.constantFrom<Op>({ op: 'clear' }, { op: 'size' }, { op: 'export' }),
);

/** The plain model: a Map from key to its row (initial value: zeros). */
class Model {
  readonly rows = new Map<bigint, number[]>();
  row(k: bigint): number[] {
    return this.rows.get(k) ?? new Array<number>(DIM).fill(0);
  }
  insert(k: bigint): number[] {
    let r = this.rows.get(k);
    if (!r) this.rows.set(k, (r = new Array<number>(DIM).fill(0)));
    return r;
  }
}

const slice = (v: number[], i: number) => v.slice(i * DIM, (i + 1) * DIM);
const f32 = (a: ArrayLike<number>) => Array.from(a, (x) => Math.fround(x));

/** Applies `op` to the model and to the raw table; the raw table's result must match the model's. */
async function step(raw: RawTable, m: Model, op: Op, keyDtype: 'int64' | 'int32'): Promise<void> {
  const label = JSON.stringify(op, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
  const K = (): Keys => (keyDtype === 'int64' ? BigInt64Array.from((op as { keys: bigint[] }).keys) : Int32Array.from((op as { keys: bigint[] }).keys, Number));
  switch (op.op) {
    case 'find':
    case 'findOrInsert': {
      const want = { values: op.keys.flatMap((k) => m.row(k)), exists: op.keys.map((k) => (m.rows.has(k) ? 1 : 0)) };
      if (op.op === 'findOrInsert') for (const k of op.keys) m.insert(k);
      const r = op.op === 'find' ? await raw.async.find(K(), null, null) : await raw.async.findOrInsert(K(), null, null, null);
      expect({ values: Array.from(r.values), exists: Array.from(r.exists) }, label).toEqual(want);
      return;
    }
    case 'remove': {
      const distinct = new Set(op.keys.filter((k) => m.rows.has(k)));
      for (const k of distinct) m.rows.delete(k);
      expect(await raw.async.remove(K()), label).toBe(distinct.size);
      return;
    }
    case 'upsert':
    case 'importRows':
      op.keys.forEach((k, i) => m.rows.set(k, slice(op.values, i)));
      if (op.op === 'upsert') await raw.async.upsert(K(), Float32Array.from(op.values), null);
      else await raw.async.importRows(K(), Float32Array.from(op.values), null, null);
      return;
    case 'assign':
      op.keys.forEach((k, i) => m.rows.has(k) && m.rows.set(k, slice(op.values, i)));
      await raw.async.assign(K(), Float32Array.from(op.values), null);
      return;
    case 'accum':
      op.keys.forEach((k, i) => {
        const present = m.rows.has(k);
        if (present && op.exists[i]) m.rows.set(k, f32(m.row(k).map((v, c) => v + op.values[i * DIM + c]!)));
        else if (!present && !op.exists[i]) m.rows.set(k, slice(op.values, i));
      });
      await raw.async.accum(K(), Float32Array.from(op.values), Uint8Array.from(op.exists, Number), null);
      return;
    case 'applyGradients': {
      // SGD, lr 1: duplicate keys' gradients summed, missing keys inserted first, w -= g
      const sums = new Map<bigint, number[]>();
      op.keys.forEach((k, i) => sums.set(k, (sums.get(k) ?? new Array<number>(DIM).fill(0)).map((v, c) => v + op.values[i * DIM + c]!)));
      for (const [k, g] of sums) m.rows.set(k, f32(m.insert(k).map((v, c) => v - g[c]!)));
      await raw.async.applyGradients(K(), Float32Array.from(op.values), resolveOptimizer(optimizers.sgd({ learningRate: 1 }), 1), null);
      return;
    }
    case 'lookupCombined': {
      const want: number[] = [];
      for (let r = 0; r + 1 < op.splits.length; r++) {
        const acc = new Array<number>(DIM).fill(0);
        for (let j = op.splits[r]!; j < op.splits[r + 1]!; j++) m.row(op.keys[j]!).forEach((v, c) => (acc[c]! += v));
        want.push(...f32(acc));
      }
      if (op.insert) for (const k of op.keys) m.insert(k);
      const bag = { rowSplits: Int32Array.from(op.splits), keys: K(), weights: null };
      expect(Array.from(await raw.async.lookupCombined(bag, 'sum', 0, op.insert, null)), label).toEqual(want);
      return;
    }
    case 'clear':
      m.rows.clear();
      await raw.async.clear();
      return;
    case 'size':
      expect(raw.size(), label).toBe(m.rows.size);
      return;
    case 'findPlanned': {
      // shard `shard` of 2 under 'mod': the owned keys (floorMod(k, 2) === shard) read or inserted at their
      // positions of the caller's out; the others' positions keep what was there (-9, and flag 7)
      const owned = op.keys.map((k) => ((k % 2n) + 2n) % 2n === BigInt(op.shard));
      const want = {
        values: op.keys.flatMap((k, i) => (owned[i] ? m.row(k) : new Array<number>(DIM).fill(-9))),
        exists: op.keys.map((k, i) => (owned[i] ? (m.rows.has(k) ? 1 : 0) : 7)),
      };
      if (op.insert) op.keys.forEach((k, i) => owned[i] && m.insert(k));
      const plan = { placement: 'mod' as const, numShards: 2, shard: op.shard, start: 0, end: 0, roundRobin: false };
      const out = { values: new Float32Array(op.keys.length * DIM).fill(-9), exists: new Uint8Array(op.keys.length).fill(7) };
      const r = op.insert ? await raw.async.findOrInsert(K(), null, out, plan) : await raw.async.find(K(), out, plan);
      expect(r === out, `${label}: the caller's out is returned`).toBe(true);
      expect({ values: Array.from(out.values), exists: Array.from(out.exists) }, label).toEqual(want);
      return;
    }
    case 'exportPaged': {
      // pages of `page` rows while the table is not written: every row exactly once
      const seen: bigint[] = [];
      for (let offset = 0; ; offset += op.page) {
        const b = await raw.async.exportBatch(offset, op.page);
        seen.push(...Array.from(b.keys as ArrayLike<bigint | number>, BigInt));
        if (b.keys.length < op.page) break;
      }
      const sorted = (a: bigint[]) => a.slice().sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
      expect(sorted(seen), label).toEqual(sorted([...m.rows.keys()]));
      return;
    }
    case 'export': {
      const s = (await state(raw)) as { keys: bigint[]; values: number[][] };
      const keys = [...m.rows.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      expect({ keys: s.keys, values: s.values }, label).toEqual({ keys, values: keys.map((k) => m.rows.get(k)) });
    }
  }
}

/** Declares the junk and model properties of a backend's raw tables (vitest). */
export function describeRawTableFuzz(t: RawFuzzTarget): void {
  const runs = t.runs ?? Number(process.env.JUNK_RUNS ?? 40);
  const free = async (raw: RawTable) => (t.free ? t.free(raw) : raw.dispose());
  const kinds: [string, TableOptions][] = [
    ['dynamic (adagrad, customized scores)', { dim: DIM, name: 'fuzz', optimizer: optimizers.adagrad(), scorePolicy: 'customized' }],
    ['dynamic int32, capped', { dim: DIM, name: 'fuzz32', keyDtype: 'int32', maxCapacity: 3, optimizer: optimizers.adagrad() }],
  ];
  if (t.staticTables ?? true) kinds.push(['static', { kind: 'static', dim: DIM, name: 'fuzzs', vocabularySize: 8, optimizer: optimizers.adagrad() }]);

  describe(`raw tables of ${t.name}: junk is refused with a coded error and changes nothing`, () => {
    for (const [kind, opts] of kinds) {
      const options = resolveTableOptions(opts);
      const ex = rawTableExamples(options);
      const j = rawJunkArbitrary(options);
      /** A fresh table holding two rows (keys 1 and 7, or rows 1 and 7). */
      const make = async (): Promise<RawTable> => {
        const raw = await t.make(options);
        const keys = options.keyDtype === 'int64' ? BigInt64Array.from([1n, 7n]) : Int32Array.from([1, 7]);
        await raw.async.importRows(keys, Float32Array.from({ length: 2 * DIM }, (_, i) => i), null, options.scorePolicy === 'customized' ? BigUint64Array.from([5n, 6n]) : null);
        return raw;
      };
      const fuzz = async (label: string, pick: (raw: RawTable) => Method, example: () => unknown[]): Promise<string | null> => {
        const r = await fc.check(
          fc.asyncProperty(argsFor(example, j), async (a) => {
            const raw = await make();
            try {
              const before = await state(raw);
              if ((await outcome(() => pick(raw)(...a), `${label}(${a.length} args)`)) === 'rejected') expect(await state(raw), `${label}: state after a rejected call`).toEqual(before);
            } finally {
              await free(raw);
            }
          }),
          { numRuns: runs },
        );
        return r.failed ? `${label}: ${String((r.errorInstance as Error | undefined)?.message ?? r.errorInstance).split('\n')[0]} (args ${show(r.counterexample)})` : null;
      };

      it(`${kind}: every example is a valid call (so the junk replaces a valid argument)`, async () => {
        for (const form of ['sync', 'async'] as const) {
          for (const [m, args] of Object.entries(ex)) {
            if (m === 'restrict' && options.kind === 'static') continue; // dynamic tables only (UNSUPPORTED)
            const raw = await make();
            try {
              const o = raw[form] as unknown as Record<string, Method | undefined> | null;
              const f = o?.[m]?.bind(o);
              if (f) await f(...args());
            } finally {
              await free(raw);
            }
          }
        }
      }, t.timeout);

      for (const form of ['sync', 'async'] as const) {
        it(`${kind}: raw.${form}, every method`, async () => {
          const probe = await make();
          const ops = probe[form] as unknown as Record<string, Method> | null;
          await free(probe);
          if (ops === null) return; // async-only backend
          const methods = methodNames(ops).filter((m) => m !== 'dispose');
          expect(methods.filter((m) => !(m in ex))).toEqual([]);
          const failures: string[] = [];
          for (const m of methods) {
            const f = await fuzz(`raw.${form}.${m}`, (raw) => {
              const o = raw[form] as unknown as Record<string, Method>;
              return o[m]!.bind(o);
            }, ex[m]!);
            if (f) failures.push(f);
          }
          expect(failures).toEqual([]);
        }, t.timeout);
      }

      it(`${kind}: the raw table's own methods (size, capacity, memoryUsage, setEpoch)`, async () => {
        const failures: string[] = [];
        for (const m of ['size', 'capacity', 'memoryUsage', 'setEpoch']) {
          const f = await fuzz(`raw.${m}`, (raw) => (raw as unknown as Record<string, Method>)[m]!.bind(raw), ex[m]!);
          if (f) failures.push(f);
        }
        expect(failures).toEqual([]);
      }, t.timeout);
    }
  });

  describe(`raw tables of ${t.name}: random valid call sequences agree with a plain Map`, () => {
    it.each(['int64', 'int32'] as const)('dynamic %s table (SGD, zeros): find, findOrInsert, upsert, assign, accum, remove, clear, importRows, applyGradients, lookupCombined, size, export', async (keyDtype) => {
      const options = resolveTableOptions({ dim: DIM, name: 'model', keyDtype });
      const r = await fc.check(
        fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), async (ops) => {
          const raw = await t.make(options);
          const m = new Model();
          try {
            for (const op of ops) await step(raw, m, op, keyDtype);
            await step(raw, m, { op: 'export' }, keyDtype);
          } finally {
            await free(raw);
          }
        }),
        { numRuns: Number(process.env.MODEL_RUNS ?? t.modelRuns ?? 30) },
      );
      expect(r.failed ? `${String((r.errorInstance as Error | undefined)?.message ?? r.errorInstance)} (ops ${show(r.counterexample)})` : null).toBeNull();
    }, t.timeout);
  });
}
