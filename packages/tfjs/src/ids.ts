import * as tf from '@tensorflow/tfjs-core';
import {
  InvalidTypeError,
  OutOfRangeError,
  RaggedTensor,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
  invalidParameter,
  type KeyDtype,
  type Keys,
} from '@embedstack/core';
import { fromTf, fromTfRagged, fromTfSparse, type TfRagged, type TfSparse } from './convert.js';

/**
 * Ids of one lookup as the layers take them: a tfjs int32 tensor (or a positions
 * tensor made by `toTf` from int64 keys), a core `Tensor` / `SparseTensor` /
 * `RaggedTensor`, `TfSparse` / `TfRagged` parts, an `Int32Array` or a `BigInt64Array`
 * (the int64 keys then never enter tfjs), or (nested) arrays of numbers/bigints.
 */
export type IdsInput =
  | tf.Tensor
  | Tensor
  | SparseTensor
  | RaggedTensor
  | TfSparse
  | TfRagged
  | Int32Array
  | BigInt64Array
  | readonly (number | bigint)[]
  | readonly (readonly (number | bigint)[])[];

function isParts(v: unknown, keys: string[]): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && keys.every((k) => (v as Record<string, unknown>)[k] instanceof tf.Tensor);
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** One element of ids / weights given as (nested) arrays, checked here so the error names it (`ids[1][0]`). */
function checkElement(v: unknown, at: string, kind: 'ids' | 'weights'): void {
  if (kind === 'weights') {
    if (typeof v !== 'number') throw invalidParameter(at, 'a number (a float weight)', v, InvalidTypeError);
    return;
  }
  if (typeof v === 'bigint') {
    if (v < INT64_MIN || v > INT64_MAX) throw new OutOfRangeError(`Expected ${at} to be an int64 id but received ${v}`, { argument: at });
    return;
  }
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw invalidParameter(at, 'an integer id: a safe integer number, or a bigint (ids beyond 2^53 as bigints)', v, InvalidTypeError);
  }
}

/** Ids (or float weights) as a core Tensor, SparseTensor or RaggedTensor, or the input unchanged when it is none of the known kinds. */
export function toCore(input: unknown, argument: string, kind: 'ids' | 'weights' = 'ids'): Tensor | SparseTensor | RaggedTensor {
  const dtype = kind === 'ids' ? 'int64' : 'float32';
  if (input instanceof Tensor || input instanceof SparseTensor || input instanceof RaggedTensor) return input;
  if (input instanceof tf.Tensor) return fromTf(input);
  if (input instanceof Int32Array || input instanceof BigInt64Array || input instanceof Float32Array) return new Tensor(input);
  if (isParts(input, ['indices', 'values'])) return fromTfSparse(input as TfSparse);
  if (isParts(input, ['values', 'rowSplits'])) return fromTfRagged(input as TfRagged);
  if (Array.isArray(input)) {
    if (input.length > 0 && Array.isArray(input[0])) {
      const rows = input as unknown[];
      rows.forEach((row, r) => {
        if (!Array.isArray(row)) throw invalidParameter(`${argument}[${r}]`, `an array of ${kind} (a row, as ${argument}[0] is)`, row, InvalidTypeError);
        row.forEach((v, c) => checkElement(v, `${argument}[${r}][${c}]`, kind));
      });
      const rect = rows.every((r) => (r as unknown[]).length === (rows[0] as unknown[]).length);
      return rect ? Tensor.fromNestedArray(rows as never, { dtype }) : RaggedTensor.fromNestedArray(rows as never, { dtype });
    }
    input.forEach((v, i) => checkElement(v, `${argument}[${i}]`, kind));
    return Tensor.fromNestedArray(input as never, { dtype });
  }
  if (kind === 'weights') throw invalidParameter(argument, 'weights: a tfjs float32 Tensor, a core Tensor/SparseTensor/RaggedTensor, Float32Array or an array', input, InvalidTypeError);
  throw invalidParameter(argument, 'ids: a tfjs int32 Tensor, a core Tensor/SparseTensor/RaggedTensor, Int32Array, BigInt64Array or an array', input, InvalidTypeError);
}

/**
 * `keys` in the storage dtype `want`: the same array when it already is; int32 -> int64
 * widened (a copy); int64 -> int32 narrowed when every key fits (a copy).
 * @throws InvalidTypeError for float data; OutOfRangeError naming the first key outside int32
 */
export function keysAs(data: Float32Array | Int32Array | BigInt64Array, want: KeyDtype, argument: string): Keys {
  if (data instanceof Float32Array) throw invalidParameter(argument, 'integer ids (int32 or int64)', 'float32 data', InvalidTypeError);
  if (want === 'int64') return data instanceof BigInt64Array ? data : BigInt64Array.from(data, (v) => BigInt(v));
  if (data instanceof Int32Array) return data;
  const out = new Int32Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const k = data[i]!;
    if (k < -2147483648n || k > 2147483647n) {
      throw new OutOfRangeError(`Expected ${argument}[${i}] to be an int32 key (the variable's key dtype) but received ${k}`, { argument });
    }
    out[i] = Number(k);
  }
  return out;
}

/** A RaggedTensor as the SparseTensor of the same rows (indices [row, position]); dense shape [nrows, max(1, longest row)]. */
export function raggedToSparse(r: RaggedTensor): SparseTensor {
  const nnz = r.values.length;
  const indices = new Int32Array(nnz * 2);
  let longest = 1;
  for (let row = 0; row < r.nrows; row++) {
    const a = r.rowSplits[row]!;
    const b = r.rowSplits[row + 1]!;
    longest = Math.max(longest, b - a);
    for (let j = a; j < b; j++) {
      indices[2 * j] = row;
      indices[2 * j + 1] = j - a;
    }
  }
  return new SparseTensor(indices, r.values, [r.nrows, longest]);
}

/** A dense [batch, n] Tensor as the SparseTensor holding every entry (each row one bag of n ids); [batch] is [batch, 1]. */
export function denseToSparse(t: Tensor, argument: string): SparseTensor {
  if (t.rank !== 1 && t.rank !== 2) throw invalidParameter(argument, 'dense ids of shape [batch] or [batch, n] to pool', `shape [${t.shape.join(', ')}]`, ShapeMismatchError);
  const [b, n] = (t.rank === 1 ? [t.shape[0]!, 1] : t.shape) as [number, number];
  const indices = new Int32Array(b * n * 2);
  for (let i = 0; i < b * n; i++) {
    indices[2 * i] = Math.floor(i / n);
    indices[2 * i + 1] = i % n;
  }
  return new SparseTensor(indices, t.data, [b, Math.max(1, n)]);
}

/** Ids as a SparseTensor of rows to pool (rank-2 dense ids: every entry; ragged: its rows). */
export function toSparse(x: Tensor | SparseTensor | RaggedTensor, argument: string): SparseTensor {
  if (x instanceof SparseTensor) return x;
  if (x instanceof RaggedTensor) return raggedToSparse(x);
  return denseToSparse(x, argument);
}
