import {
  type Combiner,
  formatShape,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  OutOfRangeError,
  RaggedTensor,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
} from '@embedstack/core';

/**
 * Turns one feature's input (dense ids, SparseTensor or RaggedTensor, plus optional
 * weights of the same kind) into "bags": groups of (row id, scale) whose weighted sum
 * is one activation row. The combiner is folded into the scale (sum: w; mean:
 * w / Σw; sqrtn: w / sqrt(Σw²); a zero denominator gives 0, div-no-nan), so forward
 * is `act[b] = Σ scale_j * row(id_j)` and backward is `grad(row id_j) += scale_j * g[b]`.
 * Sequence features make one bag per (example, position < maxSequenceLength);
 * positions past the length are dropped, missing ones stay empty (zero rows).
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
}

/** One feature's normalised batch. Bag b <-> activation row b (row-major over `shape` without dim). */
export interface FeatureBatch {
  kind: InputKind;
  /** Activation shape: leading dims, [maxSequenceLength] for sequence features, [dim]. */
  shape: number[];
  /** Bags: [nBags + 1] offsets into ids/scale. */
  splits: Int32Array;
  /** Global row ids, validated. */
  ids: Float64Array;
  /** Effective weight of each id (combiner folded in). */
  scale: Float64Array;
}

/** 'train': every id must be a row (enqueue). 'serve': sparse ids < 0 and weights <= 0 are dropped (safe lookup). */
export type InputMode = 'train' | 'serve';

interface IdSource {
  n: number;
  at(i: number): number;
}

const INTEGER_ARRAYS = [Int8Array, Uint8Array, Int16Array, Uint16Array, Int32Array, Uint32Array] as const;

function typedSource(data: ArrayLike<number | bigint>): IdSource {
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) return { n: data.length, at: (i) => Number(data[i]!) };
  return { n: data.length, at: (i) => data[i] as number };
}

/** Dense ids as a flat source plus shape. */
function denseIds(input: unknown, path: string): { src: IdSource; shape: number[] } {
  if (input instanceof Tensor) {
    if (input.dtype === 'float32') throw invalidParameter(path, 'int32 or int64 ids', 'a float32 Tensor', InvalidTypeError);
    if (input.rank < 1) throw invalidParameter(`${path}.shape`, 'rank >= 1 ([batch, ...])', formatShape(input.shape));
    return { src: typedSource(input.data as Int32Array | BigInt64Array), shape: input.shape.slice() };
  }
  if (input instanceof BigInt64Array || input instanceof BigUint64Array || INTEGER_ARRAYS.some((C) => input instanceof C)) {
    const a = input as ArrayLike<number | bigint>;
    return { src: typedSource(a), shape: [a.length] };
  }
  if (ArrayBuffer.isView(input)) throw invalidParameter(path, 'integer ids', input, InvalidTypeError);
  if (!Array.isArray(input)) {
    throw invalidParameter(path, 'a Tensor, an integer typed array, a nested array of ids, a SparseTensor or a RaggedTensor', input, InvalidTypeError);
  }
  const shape: number[] = [];
  for (let probe: unknown = input; Array.isArray(probe); probe = probe[0]) {
    shape.push(probe.length);
    if (probe.length === 0) break;
  }
  const flat: number[] = [];
  const walk = (node: unknown, d: number, at: string): void => {
    if (d === shape.length) {
      if (typeof node === 'bigint') flat.push(Number(node));
      else if (typeof node === 'number' && Number.isInteger(node)) flat.push(node);
      else throw invalidParameter(at, 'an integer id (number or bigint)', node, InvalidTypeError);
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
  return { src: { n: flat.length, at: (i) => flat[i]! }, shape };
}

function floatWeights(w: SparseTensor | RaggedTensor, path: string): Float32Array {
  if (!(w.values instanceof Float32Array)) throw invalidParameter(path, 'float32 weights', `${w.dtype} values`, InvalidTypeError);
  return w.values;
}

function checkIdValues(values: ArrayLike<number | bigint>, dtype: string, path: string): IdSource {
  if (dtype === 'float32') throw invalidParameter(`${path}.values`, 'int32 or int64 ids', 'float32 values', InvalidTypeError);
  return typedSource(values);
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

/**
 * Validates and normalises one feature.
 * @throws InvalidTypeError (wrong input or weight kind/dtype), InvalidArgumentError
 *   (weights for dense ids, bad rank), ShapeMismatchError (weights layout, outputShape),
 *   OutOfRangeError (ids outside [0, vocabularySize))
 */
export function normalizeFeature(input: unknown, weight: unknown, spec: FeatureSpec, mode: InputMode): FeatureBatch {
  const L = spec.maxSequenceLength;
  const sequence = L > 0;
  const hasWeight = weight !== undefined && weight !== null;
  let kind: InputKind;
  let src: IdSource;
  let w: Float32Array | null = null;
  let natural: number[];
  /** (example, position) of entry i */
  let rowOf: (i: number) => number;
  let posOf: (i: number) => number;

  if (input instanceof SparseTensor) {
    kind = 'sparse';
    src = checkIdValues(input.values, input.dtype, spec.path);
    if (input.rank < 2) throw invalidParameter(`${spec.path}.denseShape`, 'rank >= 2 ([batch, ids])', formatShape(input.denseShape));
    if (hasWeight) {
      if (!(weight instanceof SparseTensor)) throw invalidParameter(spec.weightPath, 'a SparseTensor (like its ids)', weight, InvalidTypeError);
      w = floatWeights(weight, `${spec.weightPath}.values`);
      const same =
        weight.nnz === input.nnz &&
        weight.denseShape.length === input.denseShape.length &&
        weight.denseShape.every((d, i) => d === input.denseShape[i]) &&
        weight.indices.every((v, i) => v === input.indices[i]);
      if (!same) throw new ShapeMismatchError(`Expected ${spec.weightPath} to have the indices and denseShape of ${spec.path}`, { argument: spec.weightPath });
    }
    natural = [input.denseShape[0]!];
    const rank = input.rank;
    const idx = input.indices;
    rowOf = (i) => idx[i * rank]!;
    posOf = (i) => idx[i * rank + 1]!;
  } else if (input instanceof RaggedTensor) {
    kind = 'ragged';
    src = checkIdValues(input.values, input.dtype, spec.path);
    if (hasWeight) {
      if (!(weight instanceof RaggedTensor)) throw invalidParameter(spec.weightPath, 'a RaggedTensor (like its ids)', weight, InvalidTypeError);
      w = floatWeights(weight, `${spec.weightPath}.values`);
      const a = weight.rowSplits;
      const b = input.rowSplits;
      if (a.length !== b.length || a.some((v, i) => v !== b[i])) {
        throw new ShapeMismatchError(`Expected ${spec.weightPath} to have the row splits of ${spec.path}`, { argument: spec.weightPath });
      }
    }
    natural = [input.nrows];
    const rows = new Int32Array(src.n);
    const splits = input.rowSplits;
    for (let r = 0; r < input.nrows; r++) rows.fill(r, splits[r]!, splits[r + 1]!);
    rowOf = (i) => rows[i]!;
    posOf = (i) => i - splits[rows[i]!]!;
  } else {
    kind = 'dense';
    const d = denseIds(input, spec.path);
    src = d.src;
    if (hasWeight) {
      throw invalidParameter(spec.weightPath, 'undefined or null (dense ids take no weights; each weight is 1)', weight);
    }
    if (sequence) {
      if (d.shape.length > 2) throw invalidParameter(`${spec.path}.shape`, 'rank 1 or 2 ([batch] or [batch, length]) for a sequence feature', formatShape(d.shape));
      const T = d.shape.length === 2 ? d.shape[1]! : 1;
      natural = [d.shape[0]!];
      rowOf = (i) => Math.floor(i / T);
      posOf = (i) => i % T;
    } else {
      natural = d.shape;
      rowOf = (i) => i;
      posOf = () => 0;
    }
  }

  const leading = mode === 'train' ? leadingShape(natural, spec, kind, sequence) : natural;
  const batch = natural[0]!;
  const nBags = sequence ? batch * L : leading.reduce((a, b) => a * b, 1);
  const shape = sequence ? [batch, L, spec.dim] : [...leading, spec.dim];

  // Validate ids, pick kept entries and their bag.
  const n = src.n;
  const bagOf = new Int32Array(n).fill(-1);
  const idOf = new Float64Array(n);
  const counts = new Int32Array(nBags + 1);
  for (let i = 0; i < n; i++) {
    const id = src.at(i);
    const dropSafe = mode === 'serve' && kind === 'sparse' && (id < 0 || (w !== null && !(w[i]! > 0)));
    if (dropSafe) continue;
    if (!(id >= 0 && id < spec.vocabularySize)) {
      throw new OutOfRangeError(
        `Expected ${spec.path}${kind === 'dense' ? '' : '.values'}[${i}] to be a row index in [0, ${spec.vocabularySize}) of table "${spec.tableName}" but received ${id}`,
        { argument: spec.path },
      );
    }
    let bag: number;
    if (sequence) {
      const t = posOf(i);
      if (t >= L) continue;
      bag = rowOf(i) * L + t;
    } else bag = rowOf(i);
    bagOf[i] = bag;
    idOf[i] = id;
    counts[bag + 1]!++;
  }
  for (let b = 0; b < nBags; b++) counts[b + 1]! += counts[b]!;
  const splits = counts;
  const kept = splits[nBags]!;
  const ids = new Float64Array(kept);
  const wts = new Float64Array(kept);
  const cursor = splits.slice(0, nBags);
  for (let i = 0; i < n; i++) {
    const b = bagOf[i]!;
    if (b < 0) continue;
    const at = cursor[b]!++;
    ids[at] = idOf[i]!;
    wts[at] = w ? w[i]! : 1;
  }
  const scale = foldCombiner(splits, wts, spec.combiner);
  return { kind, shape, splits, ids, scale };
}

/**
 * The activations of bags [b0, b1): out[b] = Σ_{j in bag b} scale[j] * row(j), where
 * row(j) is `dim` floats of `values` at offset `rowAt(j)`. Accumulated in float64 in
 * entry order and rounded to float32 once, so training (`dequeue`, whatever the
 * sharding) and serving (`servingEmbeddingLookup`) give the same bits. Returns a
 * fresh [(b1 - b0) * dim] array.
 */
export function reduceBags(
  splits: Int32Array,
  scale: Float64Array,
  b0: number,
  b1: number,
  dim: number,
  values: Float32Array,
  rowAt: (entry: number) => number,
): Float32Array {
  const out = new Float32Array((b1 - b0) * dim);
  const acc = new Float64Array(dim);
  for (let bag = b0; bag < b1; bag++) {
    acc.fill(0);
    for (let j = splits[bag]!; j < splits[bag + 1]!; j++) {
      const s = scale[j]!;
      const base = rowAt(j);
      for (let c = 0; c < dim; c++) acc[c] = acc[c]! + s * values[base + c]!;
    }
    out.set(acc, (bag - b0) * dim);
  }
  return out;
}

/** scale_j = w_j / denom(bag) with div-no-nan. Returns a new array. */
function foldCombiner(splits: Int32Array, w: Float64Array, combiner: Combiner): Float64Array {
  const out = new Float64Array(w.length);
  for (let b = 0; b + 1 < splits.length; b++) {
    const lo = splits[b]!;
    const hi = splits[b + 1]!;
    let denom = 1;
    if (combiner !== 'sum') {
      let s = 0;
      for (let j = lo; j < hi; j++) s += combiner === 'mean' ? w[j]! : w[j]! * w[j]!;
      denom = combiner === 'mean' ? s : Math.sqrt(s);
    }
    for (let j = lo; j < hi; j++) out[j] = denom === 0 ? 0 : w[j]! / denom;
  }
  return out;
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
