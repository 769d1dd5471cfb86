import * as tf from '@tensorflow/tfjs-core';
import {
  InvalidTypeError,
  OutOfRangeError,
  RaggedTensor,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
  checkOptions,
  invalidParameter,
  type DataArray,
} from '@embedstack/core';

/**
 * How int64 data crosses into tfjs, which has no int64 dtype:
 * - `'positions'` (default, lossless): the tfjs tensor is an int32 tensor of the same
 *   shape holding the positions `0 .. n-1`, and the `BigInt64Array` stays beside the
 *   graph (registered on that tfjs tensor: `int64KeysOf(t)`, `fromTf(t)` gives it back).
 *   A tfjs op on the positions (slice, gather, reshape) keeps them meaningful:
 *   `fromTf(result, { keys })` maps each position back to its key.
 * - `'int32'`: the keys themselves as int32 (a copy), when every key fits in int32;
 *   else OUT_OF_RANGE naming the first key that does not.
 */
export type Int64Mode = 'positions' | 'int32';

/** Options of `toTf`, `toTfSparse` and `toTfRagged`. */
export interface ToTfOptions {
  /** How int64 data crosses over (see `Int64Mode`). Default `'positions'`. */
  int64?: Int64Mode | null;
}

/** Options of `fromTf`. */
export interface FromTfOptions {
  /**
   * Int64 keys kept beside the graph: the tfjs tensor (int32) then holds positions
   * into `keys` and the result is an int64 Tensor of `keys[position]` (a fresh array).
   * Default: the keys registered on the tensor by `toTf`, else none.
   */
  keys?: BigInt64Array | null;
}

/** tfjs has no sparse tensor type: a SparseTensor crosses as its three parts (tf.sparse's layout). */
export interface TfSparse {
  /** int32 [nnz, rank], row-major (over the SparseTensor's own `indices` array on the cpu backend). */
  indices: tf.Tensor2D;
  /** `[nnz]`: float32, int32, or int64 as `ToTfOptions.int64` says. */
  values: tf.Tensor1D;
  /** The dense shape (plain numbers, as core keeps it). */
  denseShape: number[];
}

/** A RaggedTensor as tfjs's ragged ops take it (`tf.raggedTensorToTensor` with a 'ROW_SPLITS' partition). */
export interface TfRagged {
  /** `[nnz]`: float32, int32, or int64 as `ToTfOptions.int64` says. */
  values: tf.Tensor1D;
  /** int32 [nrows + 1]. */
  rowSplits: tf.Tensor1D;
}

const int64Keys = new WeakMap<tf.Tensor, BigInt64Array>();

/** The int64 keys registered beside tfjs tensor `t` by `toTf` (positions mode), or undefined. */
export function int64KeysOf(t: tf.Tensor): BigInt64Array | undefined {
  return int64Keys.get(t);
}

function int64Mode(options: unknown, argument: string): Int64Mode {
  const o = checkOptions<ToTfOptions>(options, ['int64'], argument);
  const m = o.int64 ?? 'positions';
  if (m !== 'positions' && m !== 'int32') throw invalidParameter(`${argument}.int64`, "'positions' or 'int32'", m);
  return m;
}

function fromCore(data: DataArray, shape: readonly number[], mode: Int64Mode, argument: string): tf.Tensor {
  if (data instanceof Float32Array) return tf.tensor(data, [...shape], 'float32');
  if (data instanceof Int32Array) return tf.tensor(data, [...shape], 'int32');
  if (mode === 'int32') {
    const out = new Int32Array(data.length);
    for (let i = 0; i < data.length; i++) {
      const k = data[i]!;
      if (k < -2147483648n || k > 2147483647n) {
        throw new OutOfRangeError(`Expected ${argument}[${i}] to fit in int32 (int64: 'int32') but received ${k}; use int64: 'positions' to keep int64 keys beside the graph`, {
          argument,
        });
      }
      out[i] = Number(k);
    }
    return tf.tensor(out, [...shape], 'int32');
  }
  const positions = new Int32Array(data.length);
  for (let i = 0; i < positions.length; i++) positions[i] = i;
  const t = tf.tensor(positions, [...shape], 'int32');
  int64Keys.set(t, data);
  return t;
}

/**
 * An embedstack `Tensor` as a tfjs tensor of the same shape. float32 and int32 data
 * are not copied where the tfjs backend keeps host arrays (the cpu backend stores this
 * very array: do not write to it afterwards, tfjs treats tensors as immutable); int64
 * crosses as `options.int64` says. The caller owns (disposes) the result.
 * @throws InvalidTypeError when `tensor` is not a core Tensor; OutOfRangeError for an
 *   int64 key outside int32 with `int64: 'int32'`
 */
export function toTf(tensor: Tensor, options?: ToTfOptions | null): tf.Tensor {
  if (!(tensor instanceof Tensor)) throw invalidParameter('tensor', 'an embedstack Tensor', tensor, InvalidTypeError);
  return fromCore(tensor.data, tensor.shape, int64Mode(options, 'options'), 'tensor');
}

function checkTf(t: unknown, argument: string): asserts t is tf.Tensor {
  if (!(t instanceof tf.Tensor)) throw invalidParameter(argument, 'a tfjs Tensor', t, InvalidTypeError);
  if (t.isDisposed) throw invalidParameter(argument, 'a live tfjs Tensor', 'a disposed tfjs Tensor', InvalidTypeError);
}

/** The host array of `t` (the backend's own array on the cpu backend: no copy). */
function hostData(t: tf.Tensor, argument: string): Float32Array | Int32Array {
  const d = t.dataSync();
  if (t.dtype === 'float32' && d instanceof Float32Array) return d;
  if (t.dtype === 'int32' && d instanceof Int32Array) return d;
  if (t.dtype === 'bool') return Int32Array.from(d as Uint8Array);
  throw invalidParameter(argument, 'a float32, int32 or bool tfjs Tensor', `a ${t.dtype} tfjs Tensor`, InvalidTypeError);
}

function keysAt(positions: Float32Array | Int32Array, keys: BigInt64Array, argument: string): BigInt64Array {
  if (!(positions instanceof Int32Array)) throw invalidParameter(argument, 'an int32 tfjs Tensor of positions into options.keys', 'a float32 tfjs Tensor', InvalidTypeError);
  const out = new BigInt64Array(positions.length);
  for (let i = 0; i < positions.length; i++) {
    const p = positions[i]!;
    if (p < 0 || p >= keys.length) {
      throw new OutOfRangeError(`Expected ${argument}[${i}] to be a position in [0, ${keys.length}) of options.keys but received ${p}`, { argument });
    }
    out[i] = keys[p]!;
  }
  return out;
}

function coreData(t: tf.Tensor, keys: BigInt64Array | null | undefined, argument: string): DataArray {
  if (keys === undefined || keys === null) {
    const registered = int64Keys.get(t);
    if (registered) return registered;
    return hostData(t, argument);
  }
  if (!(keys instanceof BigInt64Array)) throw invalidParameter('options.keys', 'a BigInt64Array', keys, InvalidTypeError);
  return keysAt(hostData(t, argument), keys, argument);
}

/**
 * A tfjs tensor as an embedstack `Tensor` of the same shape, over the backend's own
 * array where it has one (cpu backend: `dataSync()` returns it; no copy; do not write
 * to it). int32 and bool become int32, float32 stays float32. A tensor made by
 * `toTf` in positions mode gives back its int64 keys; `options.keys` maps positions
 * to keys. The core Tensor stays valid after the tfjs tensor is disposed.
 * @throws InvalidTypeError (not a live tfjs tensor, another dtype, keys not a
 *   BigInt64Array); OutOfRangeError (a position outside `keys`)
 */
export function fromTf(t: tf.Tensor, options?: FromTfOptions | null): Tensor {
  checkTf(t, 't');
  const o = checkOptions<FromTfOptions>(options, ['keys']);
  return new Tensor(coreData(t, o.keys, 't'), t.shape);
}

/**
 * An embedstack `SparseTensor` as tfjs parts (`TfSparse`); indices and float32/int32
 * values are not copied on the cpu backend. The caller disposes `indices` and `values`.
 * @throws InvalidTypeError when `sparse` is not a core SparseTensor
 */
export function toTfSparse(sparse: SparseTensor, options?: ToTfOptions | null): TfSparse {
  if (!(sparse instanceof SparseTensor)) throw invalidParameter('sparse', 'an embedstack SparseTensor', sparse, InvalidTypeError);
  const mode = int64Mode(options, 'options');
  const rank = sparse.denseShape.length;
  const nnz = sparse.values.length;
  const values = fromCore(sparse.values, [nnz], mode, 'sparse.values') as tf.Tensor1D;
  return { indices: tf.tensor2d(sparse.indices, [nnz, rank], 'int32'), values, denseShape: [...sparse.denseShape] };
}

/**
 * tfjs parts as an embedstack `SparseTensor` (no copy of int32 indices or of
 * float32/int32 values on the cpu backend; int64 values through `options.keys` or the
 * keys registered on `parts.values`).
 * @throws InvalidTypeError / ShapeMismatchError for parts of the wrong kind or shape;
 *   the SparseTensor constructor's errors
 */
export function fromTfSparse(parts: TfSparse, options?: FromTfOptions | null): SparseTensor {
  if (typeof parts !== 'object' || parts === null) throw invalidParameter('parts', 'an object { indices, values, denseShape }', parts, InvalidTypeError);
  const o = checkOptions<FromTfOptions>(options, ['keys']);
  checkTf(parts.indices, 'parts.indices');
  checkTf(parts.values, 'parts.values');
  if (parts.indices.rank !== 2) throw invalidParameter('parts.indices', 'an int32 tensor of shape [nnz, rank]', `shape [${parts.indices.shape.join(', ')}]`, ShapeMismatchError);
  if (parts.indices.dtype !== 'int32') throw invalidParameter('parts.indices', 'an int32 tfjs Tensor', `a ${parts.indices.dtype} tfjs Tensor`, InvalidTypeError);
  if (parts.values.rank !== 1) throw invalidParameter('parts.values', 'a tensor of shape [nnz]', `shape [${parts.values.shape.join(', ')}]`, ShapeMismatchError);
  const shape = Array.isArray(parts.denseShape) ? parts.denseShape : parts.denseShape === undefined ? undefined : null;
  if (!shape) throw invalidParameter('parts.denseShape', 'an array of dimensions', parts.denseShape, InvalidTypeError);
  const [nnz, rank] = parts.indices.shape as [number, number];
  if (rank !== shape.length) {
    throw invalidParameter('parts.indices', `shape [nnz, ${shape.length}] (one column per dimension of parts.denseShape)`, `shape [${nnz}, ${rank}]`, ShapeMismatchError);
  }
  if (nnz !== parts.values.shape[0]) {
    throw invalidParameter('parts.values', `shape [${nnz}] (one value per row of parts.indices)`, `shape [${parts.values.shape[0]}]`, ShapeMismatchError);
  }
  const indices = parts.indices.dataSync() as Int32Array;
  return new SparseTensor(indices, coreData(parts.values, o.keys, 'parts.values'), shape);
}

/**
 * An embedstack `RaggedTensor` as tfjs parts (`TfRagged`): values and row splits, not
 * copied on the cpu backend (int64 values as `options.int64` says). The caller disposes both.
 * @throws InvalidTypeError when `ragged` is not a core RaggedTensor
 */
export function toTfRagged(ragged: RaggedTensor, options?: ToTfOptions | null): TfRagged {
  if (!(ragged instanceof RaggedTensor)) throw invalidParameter('ragged', 'an embedstack RaggedTensor', ragged, InvalidTypeError);
  const mode = int64Mode(options, 'options');
  const values = fromCore(ragged.values, [ragged.values.length], mode, 'ragged.values') as tf.Tensor1D;
  return { values, rowSplits: tf.tensor1d(ragged.rowSplits, 'int32') };
}

/**
 * tfjs parts as an embedstack `RaggedTensor` (no copy on the cpu backend; int64
 * values through `options.keys` or the keys registered on `parts.values`).
 * @throws InvalidTypeError / ShapeMismatchError for parts of the wrong kind or
 *   shape; RaggedTensor.fromRowSplits's errors (splits not from 0 to nnz, decreasing)
 */
export function fromTfRagged(parts: TfRagged, options?: FromTfOptions | null): RaggedTensor {
  if (typeof parts !== 'object' || parts === null) throw invalidParameter('parts', 'an object { values, rowSplits }', parts, InvalidTypeError);
  const o = checkOptions<FromTfOptions>(options, ['keys']);
  checkTf(parts.values, 'parts.values');
  checkTf(parts.rowSplits, 'parts.rowSplits');
  if (parts.values.rank !== 1) throw invalidParameter('parts.values', 'a tensor of shape [nnz]', `shape [${parts.values.shape.join(', ')}]`, ShapeMismatchError);
  if (parts.rowSplits.rank !== 1 || parts.rowSplits.dtype !== 'int32') {
    throw invalidParameter('parts.rowSplits', 'an int32 tensor of shape [nrows + 1]', `a ${parts.rowSplits.dtype} tensor of shape [${parts.rowSplits.shape.join(', ')}]`, InvalidTypeError);
  }
  return RaggedTensor.fromRowSplits(coreData(parts.values, o.keys, 'parts.values'), parts.rowSplits.dataSync() as Int32Array);
}
