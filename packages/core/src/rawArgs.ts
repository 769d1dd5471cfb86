import { type Combiner, COMBINERS, LOOKUP_COMBINERS, type LookupCombiner } from './combiners.js';
import type { Keys } from './dtypes.js';
import { InvalidArgumentError, InvalidTypeError, invalidParameter, OutOfRangeError, ShapeMismatchError } from './errors.js';
import { type OptimizerHyper, optimizers, sameSlotLayout, slotLayoutOf } from './optimizers.js';
import type { RawTableSync } from './rawTable.js';
import { localKeyOf, type ResolvedShardPlan } from './shardPlan.js';
import type { ResolvedTableOptions } from './tableOptions.js';
import { isTypedArrayOf, plainTypedArray, type TypedArrayConstructor, typedLength } from './typed.js';
import { errorClassFor } from './validation.js';

/**
 * The argument checks of a raw table (the RawTable contract, rawTable.ts) for backends whose
 * tables run plain JavaScript over their arguments: core's reference backend and the Redis
 * store. Core's EmbeddingTable only ever passes valid arguments; a caller of `table.raw`
 * may pass anything, and each check turns junk (a wrong type, a wrong length, a detached
 * buffer, a key outside a static table, an optimizer of other slots, a bad plan) into a coded
 * EmbeddingError before the table is touched, so a refused call changes nothing. The native
 * backends check the same in their addons (cpu-backend rawArgs.ts).
 */

type Args = unknown[];

/** A real typed array of `ctor` on a live buffer (a detached one is refused), of `length` elements when given. */
function typed<C extends TypedArrayConstructor>(v: unknown, ctor: C, argument: string, length?: number, what = 'elements'): InstanceType<C> {
  if (!isTypedArrayOf(v, ctor)) throw invalidParameter(argument, `a ${ctor.name}`, v, InvalidTypeError);
  const a = plainTypedArray(v, ctor, argument);
  if (length !== undefined && typedLength(a) !== length) {
    throw new ShapeMismatchError(`Expected ${argument} to hold ${length} ${what} but received ${typedLength(a)}`, { argument });
  }
  return a;
}

const absent = (v: unknown): v is null | undefined => v === null || v === undefined;

function integer(v: unknown, argument: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    throw invalidParameter(argument, `an integer in [${min}, ${max}]`, v, errorClassFor(v, 'number'));
  }
  return v;
}

function bool(v: unknown, argument: string): boolean {
  if (typeof v !== 'boolean') throw invalidParameter(argument, 'a boolean', v, InvalidTypeError);
  return v;
}

/** A resolved shard plan (resolveShardPlan's), or null for none; every field read is checked. */
function plan(v: unknown, argument = 'plan'): ResolvedShardPlan | null {
  if (absent(v)) return null;
  if (typeof v !== 'object') throw invalidParameter(argument, 'a resolved shard plan (resolveShardPlan) or null', v, InvalidTypeError);
  const p = v as Record<string, unknown>;
  if (p.placement !== 'mod' && p.placement !== 'range' && p.placement !== 'localized') {
    throw invalidParameter(`${argument}.placement`, "'mod', 'range' or 'localized'", p.placement, errorClassFor(p.placement, 'string'));
  }
  const numShards = integer(p.numShards, `${argument}.numShards`, 1, 1 << 20);
  integer(p.shard, `${argument}.shard`, 0, numShards - 1);
  const start = integer(p.start, `${argument}.start`, -Number.MAX_SAFE_INTEGER);
  integer(p.end, `${argument}.end`, start);
  bool(p.roundRobin, `${argument}.roundRobin`);
  return v as ResolvedShardPlan;
}

const HYPER_NUMBERS: readonly (keyof OptimizerHyper)[] = ['initialAccumulatorValue', 'beta1', 'beta2', 'epsilon', 'momentum', 'exponent', 'l1', 'l2', 'beta', 'learningRatePower', 'rho'];
const HYPER_FLAGS: readonly (keyof OptimizerHyper)[] = ['useNesterov', 'sumInsideSqrt', 'lazyAdam'];
const CLIPS = ['clipWeightMin', 'clipWeightMax', 'clipGradMin', 'clipGradMax'] as const;

/** The checks of one table's raw arguments (see the module comment), by RawTableSync method. */
function checksFor(o: ResolvedTableOptions): Partial<Record<keyof RawTableSync, (...a: Args) => void>> {
  const { dim, keyDtype } = o;
  const KeyArray = keyDtype === 'int64' ? BigInt64Array : Int32Array;
  const staticRows = o.kind === 'static' ? o.vocabularySize : -1;

  /** Keys of the table's dtype; a static table's (owned, local) keys are row indices. Returns their count. */
  const keys = (v: unknown, p: ResolvedShardPlan | null, argument = 'keys'): number => {
    const k = typed(v, KeyArray, argument) as Keys;
    const n = typedLength(k);
    if (staticRows >= 0) {
      for (let i = 0; i < n; i++) {
        const local = p ? localKeyOf(k[i]!, p) : k[i]!;
        if (local !== null && !(local >= 0 && local < staticRows)) {
          throw new OutOfRangeError(`Expected ${argument}[${i}] to be a row index in [0, ${staticRows}) but received ${k[i]}`, { argument: `${argument}[${i}]` });
        }
      }
    }
    return n;
  };
  const rows = (v: unknown, n: number, argument: string) => typed(v, Float32Array, argument, n * dim, 'floats');
  const scores = (v: unknown, n: number) => absent(v) || typed(v, BigUint64Array, 'scores', n, 'scores');
  const findOut = (v: unknown, n: number): void => {
    if (absent(v)) return;
    if (typeof v !== 'object') throw invalidParameter('out', '{ values, exists } or null', v, InvalidTypeError);
    rows((v as { values?: unknown }).values, n, 'out.values');
    typed((v as { exists?: unknown }).exists, Uint8Array, 'out.exists', n, 'flags');
  };
  /** A bag of the table's keys; returns [nrows, nnz]. */
  const bag = (v: unknown, p: ResolvedShardPlan | null): [number, number] => {
    if (typeof v !== 'object' || v === null) throw invalidParameter('bag', 'a bag ({ rowSplits, keys, weights })', v, InvalidTypeError);
    const b = v as { rowSplits?: unknown; keys?: unknown; weights?: unknown };
    const nnz = keys(b.keys, p, 'bag.keys');
    const s = typed(b.rowSplits, Int32Array, 'bag.rowSplits');
    const len = typedLength(s);
    if (len < 1 || s[0] !== 0 || s[len - 1] !== nnz) throw invalidParameter('bag.rowSplits', `row splits from 0 to ${nnz} (bag.keys.length)`, s);
    for (let i = 1; i < len; i++) if (s[i]! < s[i - 1]!) throw invalidParameter('bag.rowSplits', 'non-decreasing row splits', s);
    if (!absent(b.weights)) typed(b.weights, Float32Array, 'bag.weights', nnz, 'weights');
    return [len - 1, nnz];
  };
  const combiner = (v: unknown, lookup = false): void => {
    const known: readonly string[] = lookup ? LOOKUP_COMBINERS : COMBINERS;
    if (typeof v !== 'string' || !known.includes(v)) throw invalidParameter('combiner', `one of ${known.join(', ')}`, v, errorClassFor(v, 'string'));
  };
  const maxNorm = (v: unknown): void => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw invalidParameter('maxNorm', 'a finite number >= 0 (0: no clipping)', v, errorClassFor(v, 'number'));
  };
  /** A resolved optimizer (resolveOptimizer's) whose slots are this table's. */
  const optimizer = (v: unknown): void => {
    if (typeof v !== 'object' || v === null) throw invalidParameter('optimizer', 'a resolved optimizer (resolveOptimizer)', v, InvalidTypeError);
    const r = v as Record<string, unknown>;
    if (typeof r.kind !== 'string' || !Object.prototype.hasOwnProperty.call(optimizers, r.kind)) throw invalidParameter('optimizer.kind', `one of ${Object.keys(optimizers).join(', ')}`, r.kind, errorClassFor(r.kind, 'string'));
    for (const f of HYPER_FLAGS) bool(r[f], `optimizer.${f}`);
    for (const f of [...HYPER_NUMBERS, 'lr', 'weightDecay']) {
      if (typeof r[f] !== 'number' || !Number.isFinite(r[f])) throw invalidParameter(`optimizer.${f}`, 'a finite number', r[f], errorClassFor(r[f], 'number'));
    }
    for (const f of CLIPS) if (typeof r[f] !== 'number' || Number.isNaN(r[f])) throw invalidParameter(`optimizer.${f}`, 'a number', r[f], errorClassFor(r[f], 'number'));
    integer(r.step, 'optimizer.step', 1);
    const layout = slotLayoutOf(r.kind as never, r as unknown as OptimizerHyper);
    if (!sameSlotLayout(layout, o.slots)) {
      throw invalidParameter('optimizer', `an optimizer whose slots are [${o.slots.names.join(', ')}] (the table's)`, `${String(r.kind)} with slots [${layout.names.join(', ')}]`);
    }
  };

  return {
    find: (k, out, p) => findOut(out, keys(k, plan(p))),
    findOrInsert: (k, s, out, p) => {
      const n = keys(k, plan(p));
      scores(s, n);
      findOut(out, n);
    },
    upsert: (k, v, s) => {
      const n = keys(k, null);
      rows(v, n, 'values');
      scores(s, n);
    },
    assign: (k, v, s) => {
      const n = keys(k, null);
      rows(v, n, 'values');
      scores(s, n);
    },
    accum: (k, d, e, s) => {
      const n = keys(k, null);
      rows(d, n, 'deltas');
      typed(e, Uint8Array, 'exists', n, 'flags');
      scores(s, n);
    },
    remove: (k) => void keys(k, null),
    exportBatch: (offset, limit) => {
      integer(offset, 'offset', 0);
      if (limit !== Infinity) integer(limit, 'limit', 0);
    },
    importRows: (k, v, sl, s) => {
      const n = keys(k, null);
      rows(v, n, 'values');
      if (!absent(sl)) {
        const widths = o.slots.widths;
        if (!Array.isArray(sl) || sl.length !== widths.length) throw invalidParameter('slots', `an array of ${widths.length} Float32Arrays (one per slot) or null`, sl, Array.isArray(sl) ? InvalidArgumentError : InvalidTypeError);
        widths.forEach((w, i) => typed(sl[i], Float32Array, `slots[${i}]`, n * (w === 'dim' ? dim : 1), 'floats'));
      }
      scores(s, n);
    },
    lookupCombined: (b, c, m, ins, out) => {
      const [nrows] = bag(b, null);
      combiner(c as LookupCombiner, true);
      maxNorm(m);
      bool(ins, 'insertMissing');
      if (!absent(out)) rows(out, nrows, 'out');
    },
    lookupCombinedPartial: (b, c, m, ins, p, out) => {
      const resolved = plan(p);
      if (resolved === null) throw invalidParameter('plan', 'a resolved shard plan', p, InvalidTypeError);
      const [nrows] = bag(b, resolved);
      combiner(c as Combiner);
      maxNorm(m);
      bool(ins, 'insertMissing');
      typed(out, Float64Array, 'out', nrows * dim, 'floats');
    },
    lookupCombinedBackward: (b, g, c, m, p, out) => {
      const [nrows, nnz] = bag(b, plan(p));
      rows(g, nrows, 'grads');
      combiner(c as Combiner);
      maxNorm(m);
      rows(out, nnz, 'out');
    },
    applyCombinedGradients: (b, g, c, m, p, opt) => {
      const [nrows] = bag(b, plan(p));
      rows(g, nrows, 'grads');
      combiner(c as Combiner);
      maxNorm(m);
      optimizer(opt);
    },
    applyGradients: (k, g, opt, p) => {
      rows(g, keys(k, plan(p)), 'grads');
      optimizer(opt);
    },
    restrict: (n) => void integer(n, 'numReserved', 0),
    setEpoch: (e) => void integer(e, 'epoch', 0, 0xffffffff),
  };
}

/** The methods of RawTableSync (RawTableAsync has a subset). */
const METHODS: readonly (keyof RawTableSync)[] = [
  'find',
  'findOrInsert',
  'upsert',
  'assign',
  'accum',
  'remove',
  'clear',
  'size',
  'capacity',
  'memoryUsage',
  'exportBatch',
  'importRows',
  'lookupCombined',
  'lookupCombinedPartial',
  'lookupCombinedBackward',
  'applyCombinedGradients',
  'applyGradients',
  'restrict',
  'setEpoch',
  'dispose',
];

/**
 * A raw table's sync or async operations `ops` (an object or class instance with RawTableSync's
 * methods, or RawTableAsync's) as a plain object of the same methods, each that takes arguments
 * checking them first against the table's resolved `options` (see the module comment): junk
 * throws a coded EmbeddingError (`async`: the returned promise rejects with it) before the
 * operation runs. The other methods are `ops`' own, bound to it.
 * @throws InvalidTypeError when `ops` is not an object or `options` not resolved table options
 */
export function checkedRawOps<T extends object>(ops: T, options: ResolvedTableOptions, async: boolean): T {
  if (typeof ops !== 'object' || ops === null) throw invalidParameter('ops', "a raw table's operations", ops, InvalidTypeError);
  const o = options as Partial<ResolvedTableOptions> | null;
  const resolved =
    typeof o === 'object' &&
    o !== null &&
    (o.kind === 'dynamic' || o.kind === 'static') &&
    Number.isSafeInteger(o.dim) &&
    Number.isSafeInteger(o.vocabularySize) &&
    (o.keyDtype === 'int64' || o.keyDtype === 'int32') &&
    typeof o.slots === 'object' &&
    o.slots !== null &&
    Array.isArray(o.slots.names) &&
    Array.isArray(o.slots.widths);
  if (!resolved) throw invalidParameter('options', 'resolved table options (resolveTableOptions)', options, InvalidTypeError);
  if (typeof async !== 'boolean') throw invalidParameter('async', 'a boolean', async, InvalidTypeError);
  const checks = checksFor(options);
  const out: Record<string, unknown> = {};
  for (const name of METHODS) {
    const op = (ops as Record<string, unknown>)[name];
    if (typeof op !== 'function') continue;
    const f = op as (...a: Args) => unknown;
    const check = checks[name];
    out[name] = !check
      ? (...a: Args) => f.apply(ops, a)
      : async
        ? (...a: Args) => {
            try {
              check(...a);
            } catch (e) {
              return Promise.reject(e);
            }
            return f.apply(ops, a);
          }
        : (...a: Args) => {
            check(...a);
            return f.apply(ops, a);
          };
  }
  return out as T;
}
