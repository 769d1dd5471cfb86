import {
  type Bag,
  bagFromSegments,
  checkRowIndices,
  type Combiner,
  firstOutOfRange,
  formatShape,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  type KeyDtype,
  type Keys,
  layoutDifference,
  normalizeKeys,
  OutOfRangeError,
  RaggedTensor,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
  toOrderedBag,
} from '@embedstack/core';

/**
 * Turns one feature's input (dense ids, SparseTensor or RaggedTensor, plus optional
 * weights of the same kind) into the embedding bag core's ops take: one bag row per
 * activation row, with global row ids (the table's key dtype) and weights. Pooling,
 * its combiner and its backward are core's (`lookupCombined`, `applyCombinedGradients`);
 * this module only validates and lays out. Ragged and row-sorted sparse inputs pass
 * their arrays through without a copy (`ownBatch` copies what a queued batch would
 * otherwise share with the caller); sequence features make one bag row per
 * (example, position < maxSequenceLength): positions past the length are dropped,
 * missing ones stay empty (zero rows).
 */

/** Dense ids, SparseTensor or RaggedTensor. */
export type InputKind = 'dense' | 'sparse' | 'ragged';

/** What the caller knows about a feature. */
export interface FeatureSpec {
  /** Path of the input, for messages (`features.watched`). */
  path: string;
  /** Path of its weights (`weights.watched`). */
  weightPath: string;
  tableName: string;
  vocabularySize: number;
  dim: number;
  combiner: Combiner;
  maxSequenceLength: number;
  /** Per-replica leading shape (FeatureConfig.outputShape) and the replica count; undefined in serving. */
  outputShape: readonly number[] | undefined;
  numReplicas: number;
  /** Key dtype of the table's row ids. */
  keyDtype: KeyDtype;
}

/** One feature's normalised batch. Bag row b <-> activation row b (row-major over `shape` without dim). */
export interface FeatureBatch {
  kind: InputKind;
  /** Activation shape: leading dims, [maxSequenceLength] for sequence features, [dim]. */
  shape: number[];
  /** One id per activation row, weight 1, nothing to pool: read with a gather (find). */
  gather: boolean;
  /** Global row ids (validated), their weights (null: all 1) and the row splits. */
  bag: Bag<Keys>;
}

/** 'train': every id must be a row (enqueue). 'serve': TF's safe lookup for sparse ids (see normalizeFeature). */
export type InputMode = 'train' | 'serve';

const INTEGER_ARRAYS = [Int8Array, Uint8Array, Int16Array, Uint16Array, Int32Array, Uint32Array] as const;

/** Every id in [0, rows), as keys of `dtype` (the caller's array when it already is one). @throws OutOfRangeError */
function rowIds(values: unknown, spec: FeatureSpec, argument: string): Keys {
  const rows = spec.vocabularySize;
  if (values instanceof BigInt64Array && spec.keyDtype === 'int32') {
    checkRowIndices(values, rows, argument, spec.tableName);
    // Every id is in [0, rows) within int32: its low word is the id.
    const words = new Int32Array(values.buffer, values.byteOffset, values.length * 2);
    const out = new Int32Array(values.length);
    for (let i = 0; i < out.length; i++) out[i] = words[2 * i]!;
    return out;
  }
  if (Array.isArray(values)) {
    for (let i = 0; i < values.length; i++) {
      const v: unknown = values[i];
      const n = typeof v === 'bigint' ? Number(v) : v;
      if (typeof n !== 'number' || !Number.isInteger(n)) throw invalidParameter(`${argument}[${i}]`, 'an integer id (number or bigint)', v, InvalidTypeError);
      if (!(n >= 0 && n < rows)) throw outOfRange(argument, i, v, spec);
    }
  }
  let keys: Keys;
  try {
    keys = normalizeKeys(values, spec.keyDtype, argument);
  } catch (e) {
    // An int64 id that does not fit the table's int32 ids is out of range, not a type error.
    if (values instanceof BigUint64Array || values instanceof BigInt64Array) {
      const i = Array.from(values as ArrayLike<bigint>).findIndex((v) => v < 0n || v >= BigInt(rows));
      if (i >= 0) throw outOfRange(argument, i, values[i], spec);
    }
    throw e;
  }
  const bad = firstOutOfRange(keys, rows);
  if (bad >= 0) throw outOfRange(argument, bad, keys[bad], spec);
  return keys;
}

function outOfRange(argument: string, i: number, v: unknown, spec: FeatureSpec): OutOfRangeError {
  return new OutOfRangeError(
    `Expected ${argument}[${i}] to be a row index in [0, ${spec.vocabularySize}) of table "${spec.tableName}" but received ${String(v)}`,
    { argument: spec.path },
  );
}

/** Dense ids (flat, any integer form) and their shape. */
function denseIds(input: unknown, path: string): { ids: unknown; shape: number[] } {
  if (input instanceof Tensor) {
    if (input.dtype === 'float32') throw invalidParameter(path, 'int32 or int64 ids', 'a float32 Tensor', InvalidTypeError);
    if (input.rank < 1) throw invalidParameter(`${path}.shape`, 'rank >= 1 ([batch, ...])', formatShape(input.shape));
    return { ids: input.data, shape: input.shape.slice() };
  }
  if (input instanceof BigInt64Array || input instanceof BigUint64Array || input instanceof Int32Array) return { ids: input, shape: [input.length] };
  if (INTEGER_ARRAYS.some((C) => input instanceof C)) return { ids: Array.from(input as ArrayLike<number>), shape: [(input as ArrayLike<number>).length] };
  if (ArrayBuffer.isView(input)) throw invalidParameter(path, 'integer ids', input, InvalidTypeError);
  if (!Array.isArray(input)) {
    throw invalidParameter(path, 'a Tensor, an integer typed array, a nested array of ids, a SparseTensor or a RaggedTensor', input, InvalidTypeError);
  }
  const shape: number[] = [];
  for (let probe: unknown = input; Array.isArray(probe); probe = probe[0]) {
    shape.push(probe.length);
    if (probe.length === 0) break;
  }
  const flat: unknown[] = [];
  const walk = (node: unknown, d: number, at: string): void => {
    if (d === shape.length) {
      if (Array.isArray(node)) throw new ShapeMismatchError(`Expected ${at} to be an id (rectangular ids) but received an array`, { argument: path });
      flat.push(node);
      return;
    }
    if (!Array.isArray(node) || node.length !== shape[d]) {
      throw new ShapeMismatchError(`Expected ${at} to be an array of length ${shape[d]} (rectangular ids) but received ${Array.isArray(node) ? `length ${node.length}` : typeof node}`, {
        argument: path,
      });
    }
    node.forEach((v, i) => walk(v, d + 1, `${at}[${i}]`));
  };
  walk(input, 0, path);
  return { ids: flat, shape };
}

function floatWeights(w: SparseTensor | RaggedTensor, path: string): Float32Array {
  if (!(w.values instanceof Float32Array)) throw invalidParameter(path, 'float32 weights', `${w.dtype} values`, InvalidTypeError);
  return w.values;
}

function checkIdDtype(dtype: string, path: string): void {
  if (dtype === 'float32') throw invalidParameter(`${path}.values`, 'int32 or int64 ids', 'float32 values', InvalidTypeError);
}

/** Leading (per-example) shape, checked against outputShape when given. */
function leadingShape(natural: number[], spec: FeatureSpec, kind: InputKind, sequence: boolean): number[] {
  const o = spec.outputShape;
  if (!o) return natural;
  const expected = [o[0]! * spec.numReplicas, ...o.slice(1)];
  const count = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);
  const ok =
    sequence || kind === 'dense'
      ? natural.length === expected.length && natural.every((d, i) => d === expected[i])
      : count(natural) === count(expected);
  if (!ok) {
    throw new ShapeMismatchError(
      `Expected ${spec.path} to have the leading shape ${formatShape(expected)} (outputShape ${formatShape(o)} x ${spec.numReplicas} replicas) but received ${formatShape(natural)}`,
      { argument: spec.path },
    );
  }
  return expected;
}

function checkSparseWeights(input: SparseTensor, weight: unknown, spec: FeatureSpec): Float32Array | null {
  if (weight === undefined || weight === null) return null;
  if (!(weight instanceof SparseTensor)) throw invalidParameter(spec.weightPath, 'a SparseTensor (like its ids)', weight, InvalidTypeError);
  const w = floatWeights(weight, `${spec.weightPath}.values`);
  const difference = layoutDifference(input, weight);
  if (difference !== null) throw new ShapeMismatchError(`Expected ${spec.weightPath} to have the indices and denseShape of ${spec.path} but received ${difference}`, { argument: spec.weightPath });
  return w;
}

function checkRaggedWeights(input: RaggedTensor, weight: unknown, spec: FeatureSpec): Float32Array | null {
  if (weight === undefined || weight === null) return null;
  if (!(weight instanceof RaggedTensor)) throw invalidParameter(spec.weightPath, 'a RaggedTensor (like its ids)', weight, InvalidTypeError);
  const w = floatWeights(weight, `${spec.weightPath}.values`);
  const difference = layoutDifference(input, weight);
  if (difference !== null) {
    throw new ShapeMismatchError(`Expected ${spec.weightPath} to have the row splits of ${spec.path} but received ${difference}`, { argument: spec.weightPath });
  }
  return w;
}

/** Identity row splits [0, 1, ..., n]: one id per bag row. */
function identitySplits(n: number): Int32Array {
  const s = new Int32Array(n + 1);
  for (let i = 0; i <= n; i++) s[i] = i;
  return s;
}

/**
 * The general layout: entry i (kept when `bagOf(i) >= 0`) goes to bag row bagOf(i),
 * entries keep their order within a row. Used for sequence features and for the
 * serving-time pruning of sparse ids.
 */
function layOut(keys: Keys, weights: Float32Array | null, nBags: number, bagOf: (i: number) => number): Bag<Keys> {
  return bagFromSegments(Int32Array.from({ length: keys.length }, (_, i) => bagOf(i)), keys, weights, nBags);
}

/**
 * Validates and normalises one feature.
 * Serving (`mode` 'serve') follows TF's safe lookup for a SparseTensor: ids < 0 are
 * dropped, and so are entries of weight <= 0 unless the combiner is 'sum'; ids of
 * rank n > 2 are grouped by their first n - 1 index columns (output
 * [d0, ..., d(n-2), dim]).
 * @throws InvalidTypeError (wrong input or weight kind/dtype), InvalidArgumentError
 *   (weights for dense ids, bad rank), ShapeMismatchError (weights layout, outputShape),
 *   OutOfRangeError (ids outside [0, vocabularySize))
 */
export function normalizeFeature(input: unknown, weight: unknown, spec: FeatureSpec, mode: InputMode): FeatureBatch {
  const L = spec.maxSequenceLength;
  const sequence = L > 0;
  if (input instanceof SparseTensor) {
    checkIdDtype(input.dtype, spec.path);
    if (input.rank < 2) throw invalidParameter(`${spec.path}.denseShape`, 'rank >= 2 ([batch, ids])', formatShape(input.denseShape));
    const w = checkSparseWeights(input, weight, spec);
    const rank = input.rank;
    const idx = input.indices;
    const serveRanked = mode === 'serve' && !sequence && rank > 2;
    const natural = serveRanked ? input.denseShape.slice(0, rank - 1) : [input.denseShape[0]!];
    const leading = mode === 'train' ? leadingShape(natural, spec, 'sparse', sequence) : natural;
    const batch = natural[0]!;
    const shape = sequence ? [batch, L, spec.dim] : [...leading, spec.dim];
    const prune = mode === 'serve';
    if (!sequence && !prune) {
      const { bag } = toOrderedBag(input, w, spec.keyDtype === 'int32' && input.dtype === 'int64' ? 'int64' : spec.keyDtype, spec.path);
      return { kind: 'sparse', shape, gather: false, bag: { ...bag, keys: rowIds(bag.keys, spec, `${spec.path}.values`) } };
    }
    // Serving prunes before validating: a dropped id may be anything.
    const dropWeights = w !== null && spec.combiner !== 'sum';
    const raw = input.values as ArrayLike<number | bigint>;
    const keep = (i: number) => !(prune && (raw[i]! < 0 || (dropWeights && !(w![i]! > 0))));
    const strides = natural.map((_, d) => natural.slice(d + 1).reduce((a, b) => a * b, 1));
    const rowOf = (i: number) => {
      let r = 0;
      for (let d = 0; d < natural.length; d++) r += idx[i * rank + d]! * strides[d]!;
      return r;
    };
    const kept = Array.from({ length: input.nnz }, (_, i) => i).filter(keep);
    const keptIds = input.values instanceof BigInt64Array ? BigInt64Array.from(kept, (i) => raw[i] as bigint) : Int32Array.from(kept, (i) => raw[i] as number);
    const keys = rowIds(keptIds, spec, `${spec.path}.values`);
    const kw = w ? Float32Array.from(kept, (i) => w[i]!) : null;
    const nBags = sequence ? batch * L : natural.reduce((a, b) => a * b, 1);
    const bagOf = sequence
      ? (k: number) => {
          const t = idx[kept[k]! * rank + 1]!;
          return t < L ? idx[kept[k]! * rank]! * L + t : -1;
        }
      : (k: number) => rowOf(kept[k]!);
    return { kind: 'sparse', shape, gather: false, bag: layOut(keys, kw, nBags, bagOf) };
  }

  if (input instanceof RaggedTensor) {
    checkIdDtype(input.dtype, spec.path);
    const w = checkRaggedWeights(input, weight, spec);
    const natural = [input.nrows];
    const leading = mode === 'train' ? leadingShape(natural, spec, 'ragged', sequence) : natural;
    const keys = rowIds(input.values, spec, `${spec.path}.values`);
    if (!sequence) return { kind: 'ragged', shape: [...leading, spec.dim], gather: false, bag: { rowSplits: input.rowSplits, keys, weights: w } };
    const splits = input.rowSplits;
    const rows = new Int32Array(keys.length);
    for (let r = 0; r < input.nrows; r++) rows.fill(r, splits[r]!, splits[r + 1]!);
    const bag = layOut(keys, w, input.nrows * L, (i) => {
      const t = i - splits[rows[i]!]!;
      return t < L ? rows[i]! * L + t : -1;
    });
    return { kind: 'ragged', shape: [input.nrows, L, spec.dim], gather: false, bag };
  }

  const d = denseIds(input, spec.path);
  if (weight !== undefined && weight !== null) {
    throw invalidParameter(spec.weightPath, 'undefined or null (dense ids take no weights; each weight is 1)', weight);
  }
  const keys = rowIds(d.ids, spec, spec.path);
  if (!sequence) {
    const leading = mode === 'train' ? leadingShape(d.shape, spec, 'dense', false) : d.shape;
    return { kind: 'dense', shape: [...leading, spec.dim], gather: true, bag: { rowSplits: identitySplits(keys.length), keys, weights: null } };
  }
  if (d.shape.length > 2) throw invalidParameter(`${spec.path}.shape`, 'rank 1 or 2 ([batch] or [batch, length]) for a sequence feature', formatShape(d.shape));
  const natural = [d.shape[0]!];
  if (mode === 'train') leadingShape(natural, spec, 'dense', true);
  const T = d.shape.length === 2 ? d.shape[1]! : 1;
  const bag = layOut(keys, null, natural[0]! * L, (i) => (i % T < L ? Math.floor(i / T) * L + (i % T) : -1));
  return { kind: 'dense', shape: [natural[0]!, L, spec.dim], gather: false, bag };
}

/** The array buffers of a feature's input and weights (what a normalised batch may share with the caller). */
function callerBuffers(values: readonly unknown[]): Set<ArrayBufferLike> {
  const out = new Set<ArrayBufferLike>();
  for (const v of values) {
    if (v instanceof Tensor) out.add(v.data.buffer);
    else if (ArrayBuffer.isView(v)) out.add(v.buffer);
    else if (v instanceof SparseTensor) {
      out.add(v.values.buffer);
      out.add(v.indices.buffer);
    } else if (v instanceof RaggedTensor) {
      out.add(v.values.buffer);
      out.add(v.rowSplits.buffer);
    }
  }
  return out;
}

/**
 * `batch` with copies of the arrays it shares with the caller's `input` and `weight`
 * (its ids, weights and row splits), so a queued batch does not change when the
 * caller refills its buffers after `enqueue` (TF copies at enqueue too). Arrays
 * normalizeFeature made itself are kept. Each copy is a view of the first bytes of an
 * ArrayBuffer from `take` (bytes), which `taken` records, reused batch after batch (fresh
 * memory faults in page by page). Plain memory: the CPU backend's sync calls read it in
 * place (an input over a SharedArrayBuffer they copy, as another thread could rewrite it);
 * its Promise calls copy either kind once.
 */
export function ownBatch(batch: FeatureBatch, input: unknown, weight: unknown, take: (bytes: number) => ArrayBuffer, taken: ArrayBuffer[]): FeatureBatch {
  const shared = callerBuffers([input, weight]);
  if (shared.size === 0) return batch;
  const own = <T extends Keys | Float32Array | Int32Array>(a: T): T => {
    if (!shared.has(a.buffer)) return a;
    const buffer = take(a.byteLength);
    taken.push(buffer);
    const copy = new (a.constructor as new (b: ArrayBuffer, offset: number, length: number) => T)(buffer, 0, a.length);
    (copy as unknown as { set(x: T): void }).set(a);
    return copy;
  };
  const { bag } = batch;
  return { ...batch, bag: { rowSplits: own(bag.rowSplits), keys: own(bag.keys), weights: bag.weights && own(bag.weights) } };
}

/** Checks that features do not mix SparseTensor and RaggedTensor inputs (TF's rule). */
export function checkInputKinds(batches: readonly FeatureBatch[], paths: readonly string[]): void {
  const sparse = batches.findIndex((b) => b.kind === 'sparse');
  const ragged = batches.findIndex((b) => b.kind === 'ragged');
  if (sparse >= 0 && ragged >= 0) {
    throw new InvalidArgumentError(
      `Expected features to be all SparseTensor or all RaggedTensor (dense ids may mix with either) but received a SparseTensor for ${paths[sparse]} and a RaggedTensor for ${paths[ragged]}`,
      { argument: 'features' },
    );
  }
}
