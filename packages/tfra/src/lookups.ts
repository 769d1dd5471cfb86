import {
  type Combiner,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  type Keys,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
  validateCombiner,
  validateMaxNorm,
} from '@embedstack/core';
import { INTERNAL } from './internal.js';
import { storageDtype, takeKeys, toKeys, uniqueKeys, type VariableKeys } from './keys.js';
import { clipRows, gatherRows } from './partition.js';
import { getModelMode, ShadowVariable } from './shadow.js';
import { checkBoolean, checkOptionsObject } from './values.js';
import { Variable } from './variable.js';

export interface EmbeddingLookupOptions {
  /** Name of the trainable view registered on `params`. Default 'embedding_lookup'. */
  name?: string | null;
  /** Clip each row to this L2 norm (after the read; gradients apply to the stored row). Default none. */
  maxNorm?: number | null;
  /** Also resolve to the trainable view: `[embeddings, trainable]`. Default false. */
  returnTrainable?: boolean | null;
}

export interface SparseLookupOptions extends EmbeddingLookupOptions {
  /** 'mean' (default), 'sqrtn' or 'sum'. */
  combiner?: Combiner | null;
}

export interface SafeSparseLookupOptions extends SparseLookupOptions {
  /** Id looked up for rows without ids (weight 1). Default: such rows are zeros. */
  defaultId?: number | bigint | string | null;
}

const LOOKUP_OPTIONS = ['name', 'maxNorm', 'returnTrainable'];

function checkParams(params: unknown, argument = 'params'): Variable {
  if (!(params instanceof Variable)) throw invalidParameter(argument, 'a de.Variable', params, InvalidTypeError);
  return params;
}

function checkName(v: unknown, fallback: string): string {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'string' || v.length === 0) throw invalidParameter('name', 'a non-empty string', v, InvalidTypeError);
  return v;
}

function trainableOf(v: Variable, name: string, maxNorm: number): ShadowVariable {
  const store = v[INTERNAL].trainables;
  let t = store.get(name);
  if (!t) {
    t = new ShadowVariable(v, name, maxNorm);
    store.set(name, t);
  }
  t.maxNorm = maxNorm;
  return t;
}

/** Reads `keys` of `v`, records them on the trainable `name` (train mode), returns clipped rows. */
async function readRows(v: Variable, keys: Keys, shape: readonly number[], name: string, maxNorm: number): Promise<[Float32Array, ShadowVariable]> {
  const trainable = trainableOf(v, name, maxNorm);
  const { values, exists } = await v[INTERNAL].find(keys);
  if (getModelMode() === 'train') trainable.record(keys, shape, values, exists);
  return [clipRows(values, v.dim, maxNorm), trainable];
}

type WithTrainable<T> = [T, ShadowVariable];

/** Validated arguments of the dense lookups (everything is checked before any read). */
function denseArgs(params: unknown, ids: unknown, options: unknown, defaultName: string) {
  const v = checkParams(params);
  const o = checkOptionsObject(options, 'options', LOOKUP_OPTIONS);
  const name = checkName(o.name, defaultName);
  const maxNorm = validateMaxNorm(o.maxNorm);
  const returnTrainable = checkBoolean(o.returnTrainable, 'returnTrainable', false);
  return { v, k: toKeys(ids, v.keyDtype, 'ids', true), name, maxNorm, returnTrainable };
}

/**
 * TFRA's `embedding_lookup`: the rows of `ids` (any shape; flat arrays are [n]),
 * as a Tensor of shape ids.shape + [dim]. Never inserts. In train mode the
 * trainable view `name` records the ids and values for `applyGradients`.
 * @throws InvalidTypeError when `params` is not a Variable or `ids` have another key dtype
 */
export function embeddingLookup(params: Variable, ids: VariableKeys, options?: EmbeddingLookupOptions & { returnTrainable?: false | null }): Promise<Tensor<Float32Array>>;
export function embeddingLookup(params: Variable, ids: VariableKeys, options: EmbeddingLookupOptions & { returnTrainable: true }): Promise<WithTrainable<Tensor<Float32Array>>>;
export async function embeddingLookup(
  params: Variable,
  ids: VariableKeys,
  options: EmbeddingLookupOptions = {},
): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  const { v, k, name, maxNorm, returnTrainable } = denseArgs(params, ids, options, 'embedding_lookup');
  const [rows, trainable] = await readRows(v, k.keys, k.shape, name, maxNorm);
  const out = new Tensor(rows, [...k.shape, v.dim]);
  return returnTrainable ? [out, trainable] : out;
}

/**
 * TFRA's `embedding_lookup_unique`: the same result as `embeddingLookup`, computed
 * as unique -> lookup -> gather (the trainable records the unique ids).
 */
export function embeddingLookupUnique(params: Variable, ids: VariableKeys, options?: EmbeddingLookupOptions & { returnTrainable?: false | null }): Promise<Tensor<Float32Array>>;
export function embeddingLookupUnique(params: Variable, ids: VariableKeys, options: EmbeddingLookupOptions & { returnTrainable: true }): Promise<WithTrainable<Tensor<Float32Array>>>;
export async function embeddingLookupUnique(
  params: Variable,
  ids: VariableKeys,
  options: EmbeddingLookupOptions = {},
): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  const { v, k, name, maxNorm, returnTrainable } = denseArgs(params, ids, options, 'embedding_lookup_unique');
  const { unique, index } = uniqueKeys(k.keys);
  const [rows, trainable] = await readRows(v, unique, [unique.length], name, maxNorm);
  const out = new Tensor(gatherRows(rows, index, v.dim), [...k.shape, v.dim]);
  return returnTrainable ? [out, trainable] : out;
}

interface Segments {
  /** Output row of each entry. */
  rows: Int32Array;
  keys: Keys;
  weights: Float32Array | null;
  nrows: number;
}

function checkSparse(v: Variable, spIds: unknown, spWeights: unknown, idsArg: string, weightsArg: string): void {
  if (!(spIds instanceof SparseTensor)) throw invalidParameter(idsArg, 'a SparseTensor', spIds, InvalidTypeError);
  if (spWeights !== undefined && spWeights !== null) {
    if (!(spWeights instanceof SparseTensor)) throw invalidParameter(weightsArg, 'null or a SparseTensor', spWeights, InvalidTypeError);
    if (!(spWeights.values instanceof Float32Array)) {
      throw invalidParameter(weightsArg, 'float32 weights (the variable value dtype)', `${spWeights.dtype} weights`, InvalidTypeError);
    }
    if (spWeights.nnz !== spIds.nnz || spWeights.rank !== spIds.rank || spWeights.indices.some((x, i) => x !== spIds.indices[i])) {
      throw new ShapeMismatchError(`Expected ${weightsArg} to have the same indices and shape as ${idsArg}`, { argument: weightsArg });
    }
  }
  const want = storageDtype(v.keyDtype);
  if (spIds.dtype !== want) {
    throw invalidParameter(idsArg, `ids of the variable's key dtype (${v.keyDtype})`, `${spIds.dtype} ids`, InvalidTypeError);
  }
}

/** Weighted segment reduction of looked-up rows (float64 accumulation). Empty rows and zero denominators give zeros. */
async function combine(v: Variable, seg: Segments, combiner: Combiner, maxNorm: number, name: string): Promise<[Float32Array, ShadowVariable]> {
  const dim = v.dim;
  const { unique, index } = uniqueKeys(seg.keys);
  const [rows, trainable] = await readRows(v, unique, [unique.length], name, maxNorm);
  const acc = new Float64Array(seg.nrows * dim);
  const wsum = new Float64Array(seg.nrows);
  const wsq = new Float64Array(seg.nrows);
  for (let i = 0; i < seg.keys.length; i++) {
    const r = seg.rows[i]!;
    const w = seg.weights ? seg.weights[i]! : 1;
    const u = index[i]! * dim;
    for (let c = 0; c < dim; c++) acc[r * dim + c]! += w * rows[u + c]!;
    wsum[r]! += w;
    wsq[r]! += w * w;
  }
  const out = new Float32Array(seg.nrows * dim);
  for (let r = 0; r < seg.nrows; r++) {
    const den = combiner === 'sum' ? 1 : combiner === 'mean' ? wsum[r]! : Math.sqrt(wsq[r]!);
    if (den === 0) continue;
    for (let c = 0; c < dim; c++) out[r * dim + c] = acc[r * dim + c]! / den;
  }
  return [out, trainable];
}

/**
 * TFRA's `embedding_lookup_sparse`: rows of `spIds` segmented by their first
 * index column and combined with `spWeights` (null: all 1). Output [d0, dim];
 * rows without ids are zeros.
 * @throws InvalidArgumentError (ValueError) for a bad combiner; InvalidTypeError
 *   when spIds is not a SparseTensor, spWeights neither null nor a float32
 *   SparseTensor, or the ids' dtype is not the variable's; ShapeMismatchError when
 *   the weights' indices differ
 */
export function embeddingLookupSparse(params: Variable, spIds: SparseTensor, spWeights?: SparseTensor | null, options?: SparseLookupOptions & { returnTrainable?: false | null }): Promise<Tensor<Float32Array>>;
export function embeddingLookupSparse(params: Variable, spIds: SparseTensor, spWeights: SparseTensor | null | undefined, options: SparseLookupOptions & { returnTrainable: true }): Promise<WithTrainable<Tensor<Float32Array>>>;
export async function embeddingLookupSparse(
  params: Variable,
  spIds: SparseTensor,
  spWeights: SparseTensor | null = null,
  options: SparseLookupOptions = {},
): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  const o = checkOptionsObject(options, 'options', [...LOOKUP_OPTIONS, 'combiner']);
  const combiner = validateCombiner(o.combiner ?? 'mean');
  const v = checkParams(params);
  checkSparse(v, spIds, spWeights, 'spIds', 'spWeights');
  const name = checkName(o.name, 'embedding_lookup_sparse');
  const maxNorm = validateMaxNorm(o.maxNorm);
  const returnTrainable = checkBoolean(o.returnTrainable, 'returnTrainable', false);
  const rank = spIds.rank;
  const rows = Int32Array.from({ length: spIds.nnz }, (_, i) => spIds.indices[i * rank]!);
  const keys = toKeys(spIds.values, v.keyDtype, 'spIds.values').keys;
  const seg: Segments = { rows, keys, weights: spWeights ? (spWeights.values as Float32Array) : null, nrows: spIds.denseShape[0]! };
  const [out, trainable] = await combine(v, seg, combiner, maxNorm, `${name}/embedding_lookup`);
  const t = new Tensor(out, [seg.nrows, v.dim]);
  return returnTrainable ? [t, trainable] : t;
}

/**
 * TFRA's `safe_embedding_lookup_sparse`: like `embeddingLookupSparse` for ids of
 * any rank n >= 1, flattened to [d0 * ... * d(n-2), d(n-1)] and reshaped back to
 * [d0, ..., d(n-2), dim]. Weights <= 0 are pruned (unless combiner is 'sum');
 * rows left empty get the `defaultId` embedding, or zeros (no id is then looked
 * up, so training does not insert a phantom key).
 * @throws InvalidArgumentError when `embeddingWeights` is missing or the combiner is bad; the errors of `embeddingLookupSparse`
 */
export function safeEmbeddingLookupSparse(embeddingWeights: Variable, sparseIds: SparseTensor, sparseWeights?: SparseTensor | null, options?: SafeSparseLookupOptions & { returnTrainable?: false | null }): Promise<Tensor<Float32Array>>;
export function safeEmbeddingLookupSparse(embeddingWeights: Variable, sparseIds: SparseTensor, sparseWeights: SparseTensor | null | undefined, options: SafeSparseLookupOptions & { returnTrainable: true }): Promise<WithTrainable<Tensor<Float32Array>>>;
export async function safeEmbeddingLookupSparse(
  embeddingWeights: Variable,
  sparseIds: SparseTensor,
  sparseWeights: SparseTensor | null = null,
  options: SafeSparseLookupOptions = {},
): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  if (embeddingWeights === undefined || embeddingWeights === null) {
    throw new InvalidArgumentError(`Missing embedding weights: expected embeddingWeights to be a de.Variable but received ${String(embeddingWeights)}`, {
      argument: 'embeddingWeights',
    });
  }
  const o = checkOptionsObject(options, 'options', [...LOOKUP_OPTIONS, 'combiner', 'defaultId']);
  const combiner = validateCombiner(o.combiner ?? 'mean');
  const v = checkParams(embeddingWeights, 'embeddingWeights');
  checkSparse(v, sparseIds, sparseWeights, 'sparseIds', 'sparseWeights');
  const name = checkName(o.name, 'safe_embedding_lookup_sparse');
  const maxNorm = validateMaxNorm(o.maxNorm);
  const returnTrainable = checkBoolean(o.returnTrainable, 'returnTrainable', false);
  const defaultId = o.defaultId ?? null;
  const defaultKey = defaultId === null ? null : toKeys([defaultId], v.keyDtype, 'defaultId').keys;

  const shape = sparseIds.denseShape;
  const rank = shape.length;
  const outer = shape.slice(0, rank - 1);
  const nrows = outer.reduce((a, b) => a * b, 1);
  const strides = outer.map((_, d) => outer.slice(d + 1).reduce((a, b) => a * b, 1));
  const allKeys = toKeys(sparseIds.values, v.keyDtype, 'sparseIds.values').keys;
  const w = sparseWeights ? (sparseWeights.values as Float32Array) : null;
  const keep: number[] = [];
  const rowOf: number[] = [];
  for (let i = 0; i < sparseIds.nnz; i++) {
    if (w && combiner !== 'sum' && !(w[i]! > 0)) continue;
    let r = 0;
    for (let d = 0; d < rank - 1; d++) r += sparseIds.indices[i * rank + d]! * strides[d]!;
    keep.push(i);
    rowOf.push(r);
  }
  let keys = takeKeys(allKeys, keep);
  let weights = w ? Float32Array.from(keep, (i) => w[i]!) : null;
  const rows = rowOf.slice();
  if (defaultKey) {
    const filled = new Uint8Array(nrows);
    for (const r of rows) filled[r] = 1;
    const empty: number[] = [];
    for (let r = 0; r < nrows; r++) if (!filled[r]) empty.push(r);
    if (empty.length > 0) {
      const extra = takeKeys(defaultKey, new Int32Array(empty.length));
      const merged = keys instanceof BigInt64Array ? new BigInt64Array(keys.length + extra.length) : new Int32Array(keys.length + extra.length);
      (merged as BigInt64Array).set(keys as BigInt64Array);
      (merged as BigInt64Array).set(extra as BigInt64Array, keys.length);
      keys = merged;
      if (weights) {
        const mw = new Float32Array(weights.length + empty.length).fill(1);
        mw.set(weights);
        weights = mw;
      }
      rows.push(...empty);
    }
  }
  const seg: Segments = { rows: Int32Array.from(rows), keys, weights, nrows };
  const [out, trainable] = await combine(v, seg, combiner, maxNorm, `${name}/embedding_lookup_sparse/embedding_lookup`);
  const t = new Tensor(out, [...outer, v.dim]);
  return returnTrainable ? [t, trainable] : t;
}
