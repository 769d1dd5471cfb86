import type { Bag } from './combiners.js';
import type { KeyDtype, Keys } from './dtypes.js';
import { InvalidArgumentError, InvalidTypeError, invalidParameter, ShapeMismatchError, argName } from './errors.js';
import { normalizeKeys, takeKeys } from './keys.js';
import { orderedRowSplits, RaggedTensor, SparseTensor } from './sparse.js';
import { unknownKeys } from './validation.js';

/** Ids for a pooled lookup: a SparseTensor (rows = its first index column), a RaggedTensor, or an already normalised {@link Bag}. */
export type BagInput = SparseTensor | RaggedTensor | Bag<Keys>;
/** Per-id weights of a pooled lookup, float32 and in the same kind and layout as the ids, or a Float32Array of one weight per id in entry order; null / undefined = every weight 1. */
export type BagWeights = SparseTensor | RaggedTensor | Float32Array | null | undefined;

function floatValues(w: SparseTensor | RaggedTensor, argument: string): Float32Array {
  if (!(w.values instanceof Float32Array)) {
    throw invalidParameter(argument, 'float32 weights', `${w.dtype} values`, InvalidTypeError);
  }
  return w.values;
}

/**
 * Converts sparse or ragged ids (and weights of the same kind and layout) to the
 * ragged `Bag` a backend takes. SparseTensor rows are its first index column
 * (any rank >= 2 is segmented by the first index, as TF's embedding_lookup_sparse);
 * entries keep their order within a row. Errors name the ids `argument` and the weights
 * `weightsArgument` (a Bag's own weights as `argument.weights`).
 */
export function toBag(ids: BagInput, weights: BagWeights, keyDtype: KeyDtype, argument = 'ids', weightsArgument = 'weights'): Bag<Keys> {
  return toOrderedBag(ids, weights, keyDtype, argument, weightsArgument).bag;
}

/** The first index where two equally long arrays differ, or -1 (a plain loop: it runs on every weighted lookup). */
function firstDifference(a: Int32Array, b: Int32Array): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/**
 * Where the layout of `weights` first differs from that of `ids`, phrased as the "received" part of
 * a message ("3 rows where the ids have 4", "rowSplits[2] = 2 where the ids' is 3", "entry 1 at
 * [0, 1] where the ids' is at [1, 0]"), or null when weights fit these ids (the same kind, row
 * splits, or dense shape and indices entry by entry).
 *
 * @throws InvalidTypeError unless both are SparseTensors or RaggedTensors
 */
export function layoutDifference(ids: SparseTensor | RaggedTensor, weights: SparseTensor | RaggedTensor): string | null {
  const kind = (x: unknown, argument: string): string => {
    if (x instanceof SparseTensor) return 'SparseTensor';
    if (x instanceof RaggedTensor) return 'RaggedTensor';
    throw invalidParameter(argument, 'a SparseTensor or RaggedTensor', x, InvalidTypeError);
  };
  const [ik, wk] = [kind(ids, 'ids'), kind(weights, 'weights')];
  if (ik !== wk) return `a ${wk} where the ids are a ${ik}`;
  if (ids instanceof RaggedTensor) {
    const [a, b] = [ids.rowSplits, (weights as RaggedTensor).rowSplits];
    if (b.length !== a.length) return `${b.length - 1} rows where the ids have ${a.length - 1}`;
    const i = firstDifference(a, b);
    return i < 0 ? null : `rowSplits[${i}] = ${b[i]} where the ids' is ${a[i]}`;
  }
  const w = weights as SparseTensor;
  const [a, b] = [ids.denseShape, w.denseShape];
  if (a.length !== b.length || a.some((d, i) => d !== b[i])) return `denseShape [${b.join(', ')}] where the ids' is [${a.join(', ')}]`;
  if (w.nnz !== ids.nnz) return `${w.nnz} entries where the ids have ${ids.nnz}`;
  const at = firstDifference(ids.indices, w.indices);
  if (at < 0) return null;
  const rank = a.length;
  const entry = Math.floor(at / rank);
  const index = (x: SparseTensor): string => `[${Array.from(x.indices.subarray(entry * rank, (entry + 1) * rank)).join(', ')}]`;
  return `entry ${entry} at ${index(w)} where the ids' is at ${index(ids)}`;
}

/** A bag and where each input entry went: `order[i]` is the bag entry of input entry i (null: the same position). */
export interface OrderedBag {
  /** The bag, rows in order. */
  bag: Bag<Keys>;
  /** [nnz] bag entry of each input entry, or null when entries kept their positions. */
  order: Int32Array | null;
}

/** The fields of a Bag given as a plain object. */
const BAG_FIELDS: readonly string[] = Object.freeze(['rowSplits', 'keys', 'weights']);

/** {@link toBag}, also saying how a SparseTensor's entries were reordered (only when they were not in row order). */
export function toOrderedBag(ids: BagInput, weights: BagWeights, keyDtype: KeyDtype, argument = 'ids', weightsArgument = 'weights'): OrderedBag {
  argument = argName(argument, 'ids');
  const wa = argName(weightsArgument, 'weights');
  if (ids instanceof RaggedTensor) {
    const keys = normalizeKeys(ids.values, keyDtype, `${argument}.values`);
    let w: Float32Array | null = null;
    if (weights !== undefined && weights !== null) {
      if (weights instanceof RaggedTensor) {
        w = floatValues(weights, wa);
        const difference = layoutDifference(ids, weights);
        if (difference !== null) throw new ShapeMismatchError(`Expected ${wa} to have the same row splits as ${argument} but received ${difference}`, { argument: wa });
      } else if (weights instanceof Float32Array) {
        w = weights;
        if (w.length !== keys.length) throw new ShapeMismatchError(`Expected ${wa} of length ${keys.length} (one per id of ${argument}) but received ${w.length}`, { argument: wa });
      } else {
        throw invalidParameter(wa, `a RaggedTensor like ${argument} (or a Float32Array)`, weights, InvalidTypeError);
      }
    }
    return { bag: { rowSplits: ids.rowSplits, keys, weights: w }, order: null };
  }
  if (ids instanceof SparseTensor) {
    if (ids.rank < 2) throw invalidParameter(`${argument}.denseShape`, 'rank >= 2', ids.denseShape);
    const nrows = ids.denseShape[0]!;
    const nnz = ids.nnz;
    const src = normalizeKeys(ids.values, keyDtype, `${argument}.values`);
    let wsrc: Float32Array | null = null;
    if (weights !== undefined && weights !== null) {
      if (weights instanceof SparseTensor) {
        wsrc = floatValues(weights, wa);
        const difference = layoutDifference(ids, weights);
        if (difference !== null) throw new ShapeMismatchError(`Expected ${wa} to have the same indices as ${argument} but received ${difference}`, { argument: wa });
      } else if (weights instanceof Float32Array) {
        wsrc = weights;
        if (wsrc.length !== nnz) throw new ShapeMismatchError(`Expected ${wa} of length ${nnz} (one per id of ${argument}) but received ${wsrc.length}`, { argument: wa });
      } else {
        throw invalidParameter(wa, `a SparseTensor like ${argument} (or a Float32Array)`, weights, InvalidTypeError);
      }
    }
    // Rows in order (found by the constructor's pass): its splits, the entries as they are.
    const ordered = orderedRowSplits(ids);
    if (ordered) return { bag: { rowSplits: ordered, keys: src, weights: wsrc }, order: null };
    // Else row splits by counting entries per row; a stable counting sort only when rows are out of order.
    const idx = ids.indices;
    const rank = ids.rank;
    const splits = new Int32Array(nrows + 1);
    let sorted = true;
    let prev = 0;
    for (let i = 0; i < nnz; i++) {
      const r = idx[i * rank]!;
      splits[r + 1]!++;
      if (r < prev) sorted = false;
      prev = r;
    }
    for (let r = 0; r < nrows; r++) splits[r + 1]! += splits[r]!;
    if (sorted) return { bag: { rowSplits: splits, keys: src, weights: wsrc }, order: null };
    const cursor = splits.slice(0, nrows);
    const w = wsrc ? new Float32Array(nnz) : null;
    const order = new Int32Array(nnz);
    const inverse = new Int32Array(nnz);
    for (let i = 0; i < nnz; i++) {
      const at = cursor[idx[i * rank]!]!++;
      order[i] = at;
      inverse[at] = i;
      if (w) w[at] = wsrc![i]!;
    }
    const keys = takeKeys(src, inverse);
    return { bag: { rowSplits: splits, keys, weights: w }, order };
  }
  if (typeof ids === 'object' && ids !== null && 'rowSplits' in ids && 'keys' in ids) {
    // a misspelt `weights` would otherwise weigh every id 1, silently
    unknownKeys(ids, BAG_FIELDS, argument, 'fields');
    const keys = normalizeKeys(ids.keys, keyDtype, `${argument}.keys`);
    const s = ids.rowSplits;
    if (!(s instanceof Int32Array) || s.length < 1 || s[0] !== 0 || s[s.length - 1] !== keys.length) {
      throw invalidParameter(`${argument}.rowSplits`, `an Int32Array from 0 to ${keys.length}`, s, s instanceof Int32Array ? InvalidArgumentError : InvalidTypeError);
    }
    for (let i = 1; i < s.length; i++) if (s[i]! < s[i - 1]!) throw invalidParameter(`${argument}.rowSplits`, 'non-decreasing', s);
    // The weights come from the bag or from the weights argument, never both (one would be ignored).
    const own = ids.weights !== undefined && ids.weights !== null;
    const given = weights !== undefined && weights !== null;
    if (own && given) throw new InvalidArgumentError(`Expected the weights in one place, ${argument}.weights or ${wa}, but received both`, { argument: wa });
    const w: unknown = own ? ids.weights : given ? weights : null;
    if (w !== null && (!(w instanceof Float32Array) || w.length !== keys.length)) {
      throw invalidParameter(own ? `${argument}.weights` : wa, `a Float32Array of length ${keys.length} (one per id of ${argument})`, w, w instanceof Float32Array ? InvalidArgumentError : InvalidTypeError);
    }
    return { bag: { rowSplits: s, keys, weights: w as Float32Array | null }, order: null };
  }
  throw invalidParameter(argument, 'a SparseTensor or RaggedTensor', ids, InvalidTypeError);
}

/**
 * A bag from one segment (output row) id per entry, -1 dropping the entry: rows
 * [0, nrows), entries in their input order within a row (stable counting sort).
 * `keys` and `weights` ([n]) are copied; segment ids are trusted to be < nrows.
 */
export function bagFromSegments(segments: Int32Array, keys: Keys, weights: Float32Array | null, nrows: number): Bag<Keys> {
  const n = keys.length;
  const splits = new Int32Array(nrows + 1);
  for (let i = 0; i < n; i++) if (segments[i]! >= 0) splits[segments[i]! + 1]!++;
  for (let r = 0; r < nrows; r++) splits[r + 1]! += splits[r]!;
  const kept = splits[nrows]!;
  const w = weights ? new Float32Array(kept) : null;
  const from = new Int32Array(kept);
  const cursor = splits.slice(0, nrows);
  for (let i = 0; i < n; i++) {
    const r = segments[i]!;
    if (r < 0) continue;
    const at = cursor[r]!++;
    from[at] = i;
    if (w) w[at] = weights![i]!;
  }
  return { rowSplits: splits, keys: takeKeys(keys, from), weights: w };
}
