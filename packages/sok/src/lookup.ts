import {
  type Bag,
  type BagInput,
  type BagWeights,
  checkBoolean,
  checkOptions,
  type Combiner,
  FailedPreconditionError,
  RaggedTensor,
  SparseTensor,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  type KeyInput,
  type Keys,
  keyShape,
  ShapeMismatchError,
  Tensor,
} from '@embedstack/core';
import { context } from './context.js';
import { DynamicVariable } from './dynamicVariable.js';
import { poolRows, trimToRatio } from './exchange.js';
import { bagFor, idsFor, singletonBag } from './keys.js';
import { GradientTape } from './tape.js';
import { SokVariable, stamp } from './variable.js';

/** Options of `lookupSparse`. */
export interface LookupSparseOptions {
  /** Per table: weights like its ids (SparseTensor / RaggedTensor of float32, or a Float32Array [nnz]); null entries = all 1. Default none. */
  spWeights?: readonly BagWeights[] | null;
  /** Per table (or one for all): 'sum' | 'mean' ['mean']. */
  combiners?: readonly Combiner[] | Combiner | null;
  /** Records the lookups for `tape.gradient`. Default none. */
  tape?: GradientTape | null;
  /** Training (SOK's lookups): missing dynamic keys are inserted; false: inference, nothing is inserted [true]. */
  training?: boolean | null;
  /**
   * Per table: a Float32Array of exactly batch_i * dim_i floats that result i is written into
   * (the returned Tensor's data is that array; for a subclass of Float32Array, or an array with
   * its own `length`, `buffer` or `byteOffset` property, a plain Float32Array over the same
   * memory), or null for a new array. Reusing arrays from call to call saves making (and the
   * collector reclaiming) one per call. No two tables' arrays may share memory, nor an array
   * share memory with the call's ids, row splits or weights (a detached array is refused too).
   * Memory is compared by buffer object: two SharedArrayBuffer objects over the same memory (one
   * received back through `postMessage` or `structuredClone`) are not recognised as one, and
   * such an overlap gives unspecified results. If the call fails after its checks, their
   * contents are unspecified. Default none.
   */
  out?: readonly (Float32Array | null | undefined)[] | null;
}

/** Options of `embeddingLookup`. */
export interface EmbeddingLookupOptions {
  /** Records the lookups for `tape.gradient`. Default none. */
  tape?: GradientTape | null;
  /** Training (SOK's `sparse_read`): missing dynamic keys are inserted; false: inference, nothing is inserted [true]. */
  training?: boolean | null;
}

/** @internal a SOK variable of the current init. */
export function checkVariable(v: unknown, argument: string): SokVariable {
  if (!(v instanceof SokVariable)) throw invalidParameter(argument, 'a sok.DynamicVariable or sok.Variable', v, InvalidTypeError);
  const ctx = context();
  if (v.ctx !== ctx) throw new FailedPreconditionError(`Expected ${argument} ("${v.name}") to belong to the current sok.init, but it was created under an earlier one`, { argument });
  v.checkUsable();
  return v;
}

function checkTape(t: unknown): GradientTape | null {
  if (t === undefined || t === null) return null;
  if (!(t instanceof GradientTape)) throw invalidParameter('options.tape', 'a sok.GradientTape', t, InvalidTypeError);
  t.checkOpen('options.tape');
  return t;
}

/** spWeights[i] when its values are float32 (a plain-number `fromNestedArray` of whole numbers gives int64 values). */
function checkWeights(w: BagWeights, i: number): BagWeights {
  if (w === null || w === undefined) return null;
  const values = w instanceof RaggedTensor || w instanceof SparseTensor ? w.values : w;
  if (!(values instanceof Float32Array)) {
    const got = w instanceof RaggedTensor || w instanceof SparseTensor ? `a ${w.constructor.name} of ${w.dtype} values` : w;
    throw invalidParameter(`options.spWeights[${i}]`, `float32 weights like spIds[${i}] (a RaggedTensor or SparseTensor of Float32Array values, or a Float32Array [nnz])`, got, InvalidTypeError);
  }
  return w;
}

/** The engine's own getters of a typed array (no getter of a subclass or Proxy runs). */
const typedGet = (name: string): ((this: unknown) => unknown) => Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), name)!.get!;
const tagOf = typedGet(Symbol.toStringTag as unknown as string);
const lengthOf = typedGet('length');
const bufferOf = typedGet('buffer');
const byteOffsetOf = typedGet('byteOffset');
const byteLengthOf = typedGet('byteLength');

/** No output arrays given (shared: nothing is written into it). */
const NO_OUTS: readonly (Float32Array | null)[] = Object.freeze([]);

/** A typed array's memory as a byte range of its (intrinsic) buffer. */
interface Span {
  buffer: unknown;
  start: number;
  end: number;
}
const spanOf = (a: ArrayBufferView): Span => {
  const start = byteOffsetOf.call(a) as number;
  return { buffer: bufferOf.call(a), start, end: start + (byteLengthOf.call(a) as number) };
};
const overlap = (a: Span, b: Span): boolean => a.buffer === b.buffer && a.start < b.end && b.start < a.end;

/** Whether a Float32Array's buffer was detached (transferred): only a 0-length view can be on one. */
function detached(o: ArrayBufferView): boolean {
  const buffer = bufferOf.call(o);
  if (!(buffer instanceof ArrayBuffer)) return false; // a SharedArrayBuffer cannot be detached
  try {
    new Uint8Array(buffer);
    return false;
  } catch {
    return true;
  }
}

/**
 * options.out of lookupSparse, checked before any device works: per table (shapes[i] =
 * [rows, dim]) a Float32Array of exactly rows * dim elements (by the engine's length; a
 * subclass or an array shadowing `length`, `buffer` or `byteOffset` is taken as a plain view of
 * its memory, so the Tensor sees that length too) on a live buffer, or null; no two of them
 * sharing memory, and none sharing memory with the bags' arrays (ids, row splits, weights:
 * a table's result written before another table reads its inputs would change them, in an
 * order that depends on the device count). NO_OUTS when none is given.
 */
function checkOuts(out: unknown, shapes: number[][], bags: Bag<Keys>[]): readonly (Float32Array | null)[] {
  if (out === undefined || out === null) return NO_OUTS;
  const n = shapes.length;
  if (!Array.isArray(out) || out.length !== n) {
    throw invalidParameter('options.out', `an array of ${n} Float32Arrays or nulls (one per param)`, out, InvalidTypeError);
  }
  // Plain loops (a loop reusing its arrays calls this every step).
  const outs = new Array<Float32Array | null>(n);
  let given = 0;
  for (let i = 0; i < n; i++) {
    const floats = shapes[i]![0]! * shapes[i]![1]!;
    const o: unknown = out[i];
    if (o === undefined || o === null) {
      outs[i] = null;
      continue;
    }
    if (!ArrayBuffer.isView(o) || tagOf.call(o) !== 'Float32Array') throw invalidParameter(`options.out[${i}]`, `a Float32Array [${floats}] or null`, o, InvalidTypeError);
    const length = lengthOf.call(o) as number;
    if (length === 0 && detached(o)) throw new InvalidArgumentError(`Expected options.out[${i}] to be a Float32Array on a live buffer but its buffer was detached (transferred)`, { argument: `options.out[${i}]` });
    if (length !== floats) throw new ShapeMismatchError(`Expected options.out[${i}] to hold ${floats} floats (batch * dim) but it holds ${length}`, { argument: `options.out[${i}]` });
    const plain = Object.getPrototypeOf(o) === Float32Array.prototype && !Object.hasOwn(o, 'length') && !Object.hasOwn(o, 'buffer') && !Object.hasOwn(o, 'byteOffset');
    outs[i] = plain ? (o as Float32Array) : new Float32Array(bufferOf.call(o) as ArrayBuffer, byteOffsetOf.call(o) as number, length);
    given++;
  }
  checkApart(outs, given, bags);
  return outs;
}

/** The first given output whose memory overlaps `a`'s (below `before` when given), or -1. */
function firstOverlap(spans: readonly (Span | null)[], a: Span, before = spans.length): number {
  for (let i = 0; i < before; i++) if (spans[i] !== null && overlap(spans[i]!, a)) return i;
  return -1;
}

/** No two given outputs share memory, and none shares memory with a bag's arrays (the first overlap found is named; loops, names made only then). */
function checkApart(outs: readonly (Float32Array | null)[], given: number, bags: Bag<Keys>[]): void {
  const spans = new Array<Span | null>(outs.length);
  for (let j = 0; j < outs.length; j++) spans[j] = outs[j] === null ? null : spanOf(outs[j]!);
  if (given > 1) {
    for (let j = 1; j < spans.length; j++) {
      const i = spans[j] === null ? -1 : firstOverlap(spans, spans[j]!, j);
      if (i >= 0) throw new InvalidArgumentError(`Expected options.out[${j}] not to share memory with options.out[${i}] (each table writes its own result)`, { argument: `options.out[${j}]` });
    }
  }
  const apart = (a: ArrayBufferView | null, what: () => string): void => {
    const i = a === null ? -1 : firstOverlap(spans, spanOf(a));
    if (i >= 0) throw new InvalidArgumentError(`Expected options.out[${i}] not to share memory with ${what()} (the call reads them while results are written)`, { argument: `options.out[${i}]` });
  };
  for (let j = 0; j < bags.length; j++) {
    const b = bags[j]!;
    apart(b.keys, () => `spIds[${j}]'s ids`);
    apart(b.rowSplits, () => `spIds[${j}]'s row splits`);
    apart(b.weights, () => `spWeights[${j}]`);
  }
}

/** Runs one pooled lookup of each variable concurrently (into outs[i] when given), then the hybrid trim and the tape record. */
async function run(vars: SokVariable[], bags: Bag<Keys>[], combiners: Combiner[], shapes: number[][], insert: boolean, tape: GradientTape | null, outs: readonly (Float32Array | null)[] = NO_OUTS): Promise<Tensor<Float32Array>[]> {
  stamp(vars);
  const n = vars.length;
  const pending = new Array<Promise<Float32Array>>(n);
  for (let i = 0; i < n; i++) pending[i] = poolRows(vars[i]!, bags[i]!, combiners[i]!, insert, outs[i] ?? null);
  // The tape keeps copies, made while the devices pool: the bags hold the caller's arrays
  // (ids, weights, row splits), which it may reuse before tape.gradient.
  const recorded = tape ? bags.map(copyBag) : null;
  const results = n === 1 ? [await pending[0]!] : await Promise.all(pending);
  if (insert) {
    const trims: Promise<void>[] = [];
    for (const v of new Set(vars)) if (v instanceof DynamicVariable) trims.push(trimToRatio(v, v.deviceCapacity, v.filterRatio));
    await Promise.all(trims);
  }
  if (tape) vars.forEach((v, i) => tape.record({ variable: v, bag: recorded![i]!, combiner: combiners[i]!, shape: shapes[i]! }));
  const tensors = new Array<Tensor<Float32Array>>(n);
  for (let i = 0; i < n; i++) tensors[i] = new Tensor(results[i]!, shapes[i]!);
  return tensors;
}

/** A copy of a bag's arrays. */
function copyBag(b: Bag<Keys>): Bag<Keys> {
  return { rowSplits: b.rowSplits.slice(), keys: b.keys.slice() as Keys, weights: b.weights ? b.weights.slice() : null };
}

/**
 * @internal Pooled lookups of validated bags (the v1 layers): `shapes[i]` is output i's
 * shape (its size must be rows * dim). Options as embeddingLookup's.
 */
export async function lookupBags(vars: SokVariable[], bags: Bag<Keys>[], combiners: Combiner[], shapes: number[][], options: EmbeddingLookupOptions): Promise<Tensor<Float32Array>[]> {
  const tape = checkTape(options.tape);
  const insert = checkBoolean(options.training, 'options.training', true);
  return run(vars, bags, combiners, shapes, insert, tape);
}

/**
 * Pooled lookups of several tables in one call (SOK v2 `sok.lookup_sparse`): per
 * table, `spIds[i]` (SparseTensor [batch, maxNnz] or RaggedTensor [batch, (nnz)]) is
 * looked up on `params[i]` with `combiners[i]` and `spWeights[i]`; the result i is
 * Tensor [batch_i, dim_i]. Each key is read on its owning device, only pooled partial
 * vectors travel back (see exchange.ts). Missing dynamic keys are inserted (SOK's
 * lookups do) unless `training: false` (inference: they read their initial value). The
 * tape, when given, records either way. Every input is validated before any device
 * works: a rejected call changes nothing. `options.out` gives arrays to write the results
 * into (see {@link LookupSparseOptions.out}).
 *
 * @throws FailedPreconditionError (before init, tape used), InvalidArgumentError / InvalidTypeError / ShapeMismatchError / OutOfRangeError naming the argument
 */
export async function lookupSparse(params: readonly SokVariable[], spIds: readonly BagInput[], options: LookupSparseOptions = {}): Promise<Tensor<Float32Array>[]> {
  // The checks in the order below, each a plain loop (no closure, object or argument name per
  // call unless it throws): this runs on every forward step.
  const ctx = context();
  const o = checkOptions<LookupSparseOptions>(options, LOOKUP_SPARSE_OPTIONS, 'options');
  if (!Array.isArray(params) || params.length === 0) throw invalidParameter('params', 'a non-empty array of SOK variables', params, InvalidTypeError);
  const n = params.length;
  const vars = new Array<SokVariable>(n);
  for (let i = 0; i < n; i++) {
    const v: unknown = params[i];
    vars[i] = v instanceof SokVariable && v.ctx === ctx && v.usable() ? v : checkVariable(v, `params[${i}]`);
  }
  if (!Array.isArray(spIds) || spIds.length !== n) throw invalidParameter('spIds', `an array of ${n} SparseTensor or RaggedTensor ids (one per param)`, spIds, InvalidTypeError);
  const w = o.spWeights;
  if (w !== undefined && w !== null && (!Array.isArray(w) || w.length !== n)) throw invalidParameter('options.spWeights', `an array of ${n} weights (or nulls)`, w, InvalidTypeError);
  const c = o.combiners ?? 'mean';
  const perTable = Array.isArray(c) && c.length === n;
  const combiners = new Array<Combiner>(n);
  for (let i = 0; i < n; i++) {
    const x: unknown = typeof c === 'string' ? c : perTable ? c[i] : undefined;
    if (x !== 'sum' && x !== 'mean') throw invalidParameter(typeof c === 'string' ? 'options.combiners' : `options.combiners[${i}]`, `'sum' or 'mean' (one per param, ${n} in all)`, perTable ? x : c);
    combiners[i] = x;
  }
  const tape = checkTape(o.tape);
  const insert = checkBoolean(o.training, 'options.training', true);
  const bags = new Array<Bag<Keys>>(n);
  const shapes = new Array<number[]>(n);
  for (let i = 0; i < n; i++) {
    const v = vars[i]!;
    const b = bagFor(v, spIds[i]!, checkWeights(w?.[i] ?? null, i), SP_IDS[i] ?? `spIds[${i}]`, SP_WEIGHTS[i] ?? `options.spWeights[${i}]`);
    bags[i] = b;
    shapes[i] = [b.rowSplits.length - 1, v.dimension];
  }
  const outs = checkOuts(o.out, shapes, bags);
  return run(vars, bags, combiners, shapes, insert, tape, outs);
}

/** lookupSparse's option names. */
const LOOKUP_SPARSE_OPTIONS: readonly string[] = Object.freeze(['spWeights', 'combiners', 'tape', 'training', 'out']);
/** The argument names of the first tables' ids and weights (made once). */
const SP_IDS: readonly string[] = Object.freeze(Array.from({ length: 16 }, (_, i) => `spIds[${i}]`));
const SP_WEIGHTS: readonly string[] = Object.freeze(Array.from({ length: 16 }, (_, i) => `options.spWeights[${i}]`));

/**
 * Rows of `param` for `ids` (SOK `sok.embedding_lookup`): Tensor [...ids.shape, dim]
 * (a flat array or typed array is [n]). Reads go to the owning devices; missing
 * dynamic keys are inserted (SOK's `sparse_read` does) unless `training: false`.
 * Bit-identical for any device count.
 *
 * @throws as lookupSparse
 */
export async function embeddingLookup(param: SokVariable, ids: KeyInput, options: EmbeddingLookupOptions = {}): Promise<Tensor<Float32Array>> {
  context();
  const o = checkOptions<EmbeddingLookupOptions>(options, ['tape', 'training'], 'options');
  const v = checkVariable(param, 'param');
  const tape = checkTape(o.tape);
  const insert = checkBoolean(o.training, 'options.training', true);
  const keys = idsFor(v, ids, 'ids');
  const shape = [...keyShape(ids), v.dimension];
  if (shape.slice(0, -1).reduce((a, b) => a * b, 1) !== keys.length) throw new ShapeMismatchError(`Expected ids of ${keys.length} entries`, { argument: 'ids' });
  const [out] = await run([v], [singletonBag(keys)], ['sum'], [shape], insert, tape);
  return out!;
}
