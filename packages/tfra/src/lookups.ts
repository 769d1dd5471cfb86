import {
  type Bag,
  bagFromSegments,
  checkBoolean,
  checkName,
  checkOptions,
  type Combiner,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  type Keys,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
  toOrderedBag,
  validateCombiner,
  validateMaxNorm,
  layoutDifference,
} from '@embedstack/core';
import { storageDtype, takeKeys, toKeys, type VariableKeys } from './keys.js';
import { copyForRecord, getModelMode, type LookupRecord, type RecordCopies, recordLookup, ShadowVariable } from './shadow.js';
import type { AnyVariable } from './variable.js';
import { stateOf, type VariableState } from './variableState.js';

/** Options of {@link embeddingLookup} / {@link embeddingLookupUnique} (TFRA's `embedding_lookup(name, max_norm, return_trainable)`). */
export interface EmbeddingLookupOptions {
  /** Name of the trainable view registered on `params`. Default 'embedding_lookup'. */
  name?: string | null;
  /** Clip each row to this L2 norm (TF clip_by_norm; training differentiates through it). Default none. */
  maxNorm?: number | null;
  /** Also resolve to the trainable view: `[embeddings, trainable]`. Default false. */
  returnTrainable?: boolean | null;
  /** Float32Array the output is written to (and the Tensor is over); an embedstack extension. Default: a fresh array. */
  out?: Float32Array | null;
}

/** Options of {@link embeddingLookupSparse} (TFRA's `embedding_lookup_sparse(combiner, ...)`). */
export interface SparseLookupOptions extends EmbeddingLookupOptions {
  /** 'mean' (default), 'sqrtn' or 'sum'. */
  combiner?: Combiner | null;
}

/** Options of {@link safeEmbeddingLookupSparse} (TFRA's `safe_embedding_lookup_sparse(default_id, ...)`). */
export interface SafeSparseLookupOptions extends SparseLookupOptions {
  /** Id looked up for rows without ids (weight 1). Default: such rows are zeros. */
  defaultId?: number | bigint | string | null;
}

const LOOKUP_OPTIONS = ['name', 'maxNorm', 'returnTrainable', 'out'];

/** A lookup's result with the trainable that records it (`returnTrainable: true`). */
export type WithTrainable<T> = [T, ShadowVariable];

export function checkParams(params: unknown, argument = 'params'): { v: AnyVariable; st: VariableState } {
  const st = stateOf(params);
  if (!st) throw invalidParameter(argument, 'a de.Variable', params, InvalidTypeError);
  return { v: params as AnyVariable, st };
}

/** The caller's output array of `n` floats, or null (the backend's result is used). */
function outArray(out: unknown, n: number): Float32Array | null {
  if (out === undefined || out === null) return null;
  if (!(out instanceof Float32Array)) throw invalidParameter('out', 'a Float32Array', out, InvalidTypeError);
  if (out.length !== n) throw new ShapeMismatchError(`Expected out to hold ${n} floats (the output's size) but received ${out.length}`, { argument: 'out' });
  return out;
}

/** The trainable `name` of `v` (registered on first use). @throws for a disposed variable, before registering */
function trainableOf(v: AnyVariable, st: VariableState, name: string, maxNorm: number): ShadowVariable {
  st.checkAlive(); // a disposed variable registers nothing
  let t = st.trainables.get(name);
  if (!t) {
    t = new ShadowVariable(v, name, maxNorm);
    st.trainables.set(name, t);
  }
  t.maxNorm = maxNorm;
  return t;
}

/** The intrinsic `buffer` getter of typed arrays (no getter of the caller's runs). */
const bufferOf = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype) as object, 'buffer')!.get!;

/** Whether `a` lies in the memory of one of `callers` (the caller's arrays, which it may reuse before the training step). */
function inCallers(a: ArrayBufferView | null, callers: readonly unknown[]): boolean {
  if (a === null) return false;
  const buffer = bufferOf.call(a) as ArrayBufferLike;
  return callers.some((c) => ArrayBuffer.isView(c) && bufferOf.call(c) === buffer);
}

/** What a lookup records of its ids and weights; null in inference mode (nothing is recorded). */
interface Recorded {
  ids: Keys;
  weights: Float32Array | null;
  copies: RecordCopies | null;
}

/**
 * The ids (and weights) a lookup records in train mode: those in the memory of
 * `callers` (the caller may reuse its arrays before the training step) copied into
 * the trainable's buffers (reused from an earlier record when free), arrays the
 * lookup made as they are. Called while the backend works (the copies overlap it).
 */
function recorded(t: ShadowVariable, keys: Keys, weights: Float32Array | null, callers: readonly unknown[]): Recorded | null {
  if (getModelMode() !== 'train') return null;
  const copyKeys = inCallers(keys, callers);
  const copyWeights = inCallers(weights, callers);
  if (!copyKeys && !copyWeights) return { ids: keys, weights, copies: null };
  const c = copyForRecord(t, copyKeys ? keys : null, copyWeights ? weights : null);
  return { ids: c.keys ?? keys, weights: c.weights ?? weights, copies: c.copies };
}

/**
 * Records a lookup on its trainable (`rec` from {@link recorded}; null: inference
 * mode, nothing). Remote stores (written by other processes) get the rows read now;
 * in-memory variables copy them lazily (shadow.ts).
 */
async function record(st: VariableState, t: ShadowVariable, rec: Recorded | null, r: Omit<LookupRecord, 'ids'>): Promise<void> {
  if (rec === null) return;
  recordLookup(t, { ...r, ids: rec.ids }, st.cfg.kvCreator.local ? null : await st.find(rec.ids), rec.copies);
}

/** One bag row per id (identity row splits). */
function rowsBag(keys: Keys): Bag<Keys> {
  const rowSplits = new Int32Array(keys.length + 1);
  for (let i = 0; i <= keys.length; i++) rowSplits[i] = i;
  return { rowSplits, keys, weights: null };
}

/** Validated arguments of the dense lookups (everything is checked before any read). */
function denseArgs(params: unknown, ids: unknown, options: unknown, defaultName: string) {
  const { v, st } = checkParams(params);
  const o = checkOptions<EmbeddingLookupOptions>(options, LOOKUP_OPTIONS);
  const name = checkName(o.name, 'name', defaultName);
  const maxNorm = validateMaxNorm(o.maxNorm);
  const returnTrainable = checkBoolean(o.returnTrainable, 'returnTrainable', false);
  const k = toKeys(ids, v.keyDtype, 'ids', true);
  return { v, st, k, name, maxNorm, returnTrainable, out: outArray(o.out, k.keys.length * v.dim) };
}

async function denseLookup(params: unknown, ids: unknown, options: unknown, defaultName: string): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  const { v, st, k, name, maxNorm, returnTrainable, out } = denseArgs(params, ids, options, defaultName);
  const trainable = trainableOf(v, st, name, maxNorm);
  const pending = maxNorm > 0 ? st.pool(rowsBag(k.keys), 'sum', maxNorm, out) : st.find(k.keys, out ? { values: out } : undefined).then((r) => r.values);
  const rec = recorded(trainable, k.keys, null, [ids, ids instanceof Tensor ? ids.data : null]);
  const rows = await pending;
  await record(st, trainable, rec, { shape: k.shape, bag: null, maxNorm });
  const t = new Tensor(rows, [...k.shape, v.dim]);
  return returnTrainable ? [t, trainable] : t;
}

/**
 * TFRA's `embedding_lookup`: the rows of `ids` (any shape; flat arrays are [n]),
 * as a Tensor of shape ids.shape + [dim], read by core (`find`; with maxNorm, core's
 * clip). Never inserts. In train mode the trainable view `name` records the lookup
 * for `applyGradients`, whose gradient is then the gradient of this output.
 * @throws InvalidTypeError when `params` is not a Variable or `ids` have another key dtype
 */
export function embeddingLookup(params: AnyVariable, ids: VariableKeys, options?: EmbeddingLookupOptions & { returnTrainable?: false | null }): Promise<Tensor<Float32Array>>;
export function embeddingLookup(params: AnyVariable, ids: VariableKeys, options: EmbeddingLookupOptions & { returnTrainable: true }): Promise<WithTrainable<Tensor<Float32Array>>>;
export async function embeddingLookup(
  params: AnyVariable,
  ids: VariableKeys,
  options: EmbeddingLookupOptions = {},
): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  return denseLookup(params, ids, options, 'embedding_lookup');
}

/**
 * TFRA's `embedding_lookup_unique`: the same result as `embeddingLookup` (TF computes
 * it as unique -> lookup -> gather; core's reads already touch each row once per id,
 * so it is `embeddingLookup` with its own default trainable name).
 */
export function embeddingLookupUnique(params: AnyVariable, ids: VariableKeys, options?: EmbeddingLookupOptions & { returnTrainable?: false | null }): Promise<Tensor<Float32Array>>;
export function embeddingLookupUnique(params: AnyVariable, ids: VariableKeys, options: EmbeddingLookupOptions & { returnTrainable: true }): Promise<WithTrainable<Tensor<Float32Array>>>;
export async function embeddingLookupUnique(
  params: AnyVariable,
  ids: VariableKeys,
  options: EmbeddingLookupOptions = {},
): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  return denseLookup(params, ids, options, 'embedding_lookup_unique');
}

function checkSparse(v: AnyVariable, spIds: unknown, spWeights: unknown, idsArg: string, weightsArg: string): asserts spIds is SparseTensor {
  if (!(spIds instanceof SparseTensor)) throw invalidParameter(idsArg, 'a SparseTensor', spIds, InvalidTypeError);
  if (spWeights !== undefined && spWeights !== null) {
    if (!(spWeights instanceof SparseTensor)) throw invalidParameter(weightsArg, 'null or a SparseTensor', spWeights, InvalidTypeError);
    if (!(spWeights.values instanceof Float32Array)) {
      throw invalidParameter(weightsArg, 'float32 weights (the variable value dtype)', `${spWeights.dtype} weights`, InvalidTypeError);
    }
    const difference = layoutDifference(spIds, spWeights);
    if (difference !== null) throw new ShapeMismatchError(`Expected ${weightsArg} to have the same indices and shape as ${idsArg} but received ${difference}`, { argument: weightsArg });
  }
  const want = storageDtype(v.keyDtype);
  if (spIds.dtype !== want) {
    throw invalidParameter(idsArg, `ids of the variable's key dtype (${v.keyDtype})`, `${spIds.dtype} ids`, InvalidTypeError);
  }
}

/**
 * Pools `bag` of `v` with core's combiner and records it on the trainable `name` (the
 * Keras layers use it too). `callers`: the caller's own arrays (its SparseTensors'
 * values): bag.keys or bag.weights among them are copied for the record while the
 * backend pools (the caller may reuse them before the training step); arrays the
 * lookup made are recorded as they are.
 */
export async function pooledLookup(
  v: AnyVariable,
  st: VariableState,
  bag: Bag<Keys>,
  shape: number[],
  combiner: Combiner,
  maxNorm: number,
  name: string,
  out: Float32Array | null,
  callers: readonly object[],
): Promise<[Tensor<Float32Array>, ShadowVariable]> {
  const trainable = trainableOf(v, st, name, maxNorm);
  const pending = st.pool(bag, combiner, maxNorm, out);
  const rec = recorded(trainable, bag.keys, bag.weights, callers);
  const pooled = await pending;
  await record(st, trainable, rec, { shape, bag: rec && { rowSplits: bag.rowSplits, weights: rec.weights, combiner }, maxNorm });
  return [new Tensor(pooled, [...shape, v.dim]), trainable];
}

/**
 * TFRA's `embedding_lookup_sparse`: rows of `spIds` segmented by their first
 * index column and pooled by core with `spWeights` (null: all 1). Output [d0, dim];
 * rows without ids are zeros. The trainable's gradient is the gradient of this output.
 * @throws InvalidArgumentError (ValueError) for a bad combiner; InvalidTypeError
 *   when spIds is not a SparseTensor, spWeights neither null nor a float32
 *   SparseTensor, or the ids' dtype is not the variable's; ShapeMismatchError when
 *   the weights' indices differ
 */
export function embeddingLookupSparse(params: AnyVariable, spIds: SparseTensor, spWeights?: SparseTensor | null, options?: SparseLookupOptions & { returnTrainable?: false | null }): Promise<Tensor<Float32Array>>;
export function embeddingLookupSparse(params: AnyVariable, spIds: SparseTensor, spWeights: SparseTensor | null | undefined, options: SparseLookupOptions & { returnTrainable: true }): Promise<WithTrainable<Tensor<Float32Array>>>;
export async function embeddingLookupSparse(
  params: AnyVariable,
  spIds: SparseTensor,
  spWeights: SparseTensor | null = null,
  options: SparseLookupOptions = {},
): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  const o = checkOptions<SparseLookupOptions>(options, [...LOOKUP_OPTIONS, 'combiner']);
  const combiner = validateCombiner(o.combiner ?? 'mean');
  const { v, st } = checkParams(params);
  checkSparse(v, spIds, spWeights, 'spIds', 'spWeights');
  const name = checkName(o.name, 'name', 'embedding_lookup_sparse');
  const maxNorm = validateMaxNorm(o.maxNorm);
  const returnTrainable = checkBoolean(o.returnTrainable, 'returnTrainable', false);
  const nrows = spIds.denseShape[0]!;
  // rows in order: the SparseTensor's own ids, no pass over them (core found the row splits at construction)
  const { bag } = toOrderedBag(spIds, spWeights ? (spWeights.values as Float32Array) : null, storageDtype(v.keyDtype), 'spIds');
  const out = outArray(o.out, nrows * v.dim);
  const [t, trainable] = await pooledLookup(v, st, bag, [nrows], combiner, maxNorm, `${name}/embedding_lookup`, out, spWeights ? [spIds.values, spWeights.values] : [spIds.values]);
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
export function safeEmbeddingLookupSparse(embeddingWeights: AnyVariable, sparseIds: SparseTensor, sparseWeights?: SparseTensor | null, options?: SafeSparseLookupOptions & { returnTrainable?: false | null }): Promise<Tensor<Float32Array>>;
export function safeEmbeddingLookupSparse(embeddingWeights: AnyVariable, sparseIds: SparseTensor, sparseWeights: SparseTensor | null | undefined, options: SafeSparseLookupOptions & { returnTrainable: true }): Promise<WithTrainable<Tensor<Float32Array>>>;
export async function safeEmbeddingLookupSparse(
  embeddingWeights: AnyVariable,
  sparseIds: SparseTensor,
  sparseWeights: SparseTensor | null = null,
  options: SafeSparseLookupOptions = {},
): Promise<Tensor<Float32Array> | WithTrainable<Tensor<Float32Array>>> {
  if (embeddingWeights === undefined || embeddingWeights === null) {
    throw new InvalidArgumentError(`Missing embedding weights: expected embeddingWeights to be a de.Variable but received ${String(embeddingWeights)}`, {
      argument: 'embeddingWeights',
    });
  }
  const o = checkOptions<SafeSparseLookupOptions>(options, [...LOOKUP_OPTIONS, 'combiner', 'defaultId']);
  const combiner = validateCombiner(o.combiner ?? 'mean');
  const { v, st } = checkParams(embeddingWeights, 'embeddingWeights');
  checkSparse(v, sparseIds, sparseWeights, 'sparseIds', 'sparseWeights');
  const name = checkName(o.name, 'name', 'safe_embedding_lookup_sparse');
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
  // One segment (output row) per entry; pruned entries -1.
  const segments = new Int32Array(sparseIds.nnz);
  const filled = new Uint8Array(nrows);
  for (let i = 0; i < sparseIds.nnz; i++) {
    if (w && combiner !== 'sum' && !(w[i]! > 0)) {
      segments[i] = -1;
      continue;
    }
    let r = 0;
    for (let d = 0; d < rank - 1; d++) r += sparseIds.indices[i * rank + d]! * strides[d]!;
    segments[i] = r;
    filled[r] = 1;
  }
  let keys: Keys = allKeys;
  let weights = w;
  let segs = segments;
  if (defaultKey) {
    const empty: number[] = [];
    for (let r = 0; r < nrows; r++) if (!filled[r]) empty.push(r);
    if (empty.length > 0) {
      const extra = takeKeys(defaultKey, new Int32Array(empty.length));
      const merged = allKeys instanceof BigInt64Array ? new BigInt64Array(allKeys.length + extra.length) : new Int32Array(allKeys.length + extra.length);
      (merged as BigInt64Array).set(allKeys as BigInt64Array);
      (merged as BigInt64Array).set(extra as BigInt64Array, allKeys.length);
      keys = merged;
      if (w) {
        const mw = new Float32Array(w.length + empty.length).fill(1);
        mw.set(w);
        weights = mw;
      }
      segs = new Int32Array(segments.length + empty.length);
      segs.set(segments);
      segs.set(empty, segments.length);
    }
  }
  const bag = bagFromSegments(segs, keys, weights, nrows);
  const out = outArray(o.out, nrows * v.dim);
  const [t, trainable] = await pooledLookup(v, st, bag, outer, combiner, maxNorm, `${name}/embedding_lookup_sparse/embedding_lookup`, out, []);
  return returnTrainable ? [t, trainable] : t;
}
