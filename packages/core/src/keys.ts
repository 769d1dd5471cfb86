import type { KeyDtype, Keys } from './dtypes.js';
import { InvalidArgumentError, InvalidTypeError, OutOfRangeError, invalidParameter, argName } from './errors.js';
import { asTypedArray } from './typed.js';
import { int32Element, Tensor } from './tensor.js';

/** Every form a caller may pass keys in. A `Tensor` of int ids keeps its shape. */
export type KeyInput =
  | BigInt64Array
  | Int32Array
  | readonly number[]
  | readonly bigint[]
  | Tensor<BigInt64Array>
  | Tensor<Int32Array>;

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

/** Shape of a key input: a Tensor keeps its shape, everything else is `[n]`. */
export function keyShape(input: KeyInput): number[] {
  if (input instanceof Tensor) return input.shape.slice();
  return [(input as ArrayLike<unknown>).length];
}

/**
 * Normalise any key form to `BigInt64Array` (int64) or `Int32Array` (int32).
 * Returns the caller's array itself when it already has the wanted type (no copy).
 * A `number` that is not a safe integer is an error, never rounded.
 *
 * @throws InvalidTypeError naming `argument` (or the element) for an input that is no key form or
 *   an element that is no integer key: a string, a hole, or a number that is not a safe integer
 *   (1.5, NaN, 2**53: the wrong dtype, as TF's TypeError for a float where int ids go; a bigint
 *   carries keys past 2**53)
 * @throws OutOfRangeError for an integer outside the key dtype's range (2**31 for int32 keys, 2n**63n for int64)
 * @throws InvalidArgumentError for an unknown `dtype` name
 */
export function normalizeKeys(input: unknown, dtype: KeyDtype, argument = 'keys'): Keys {
  argument = argName(argument, 'keys');
  let src: unknown = input;
  if (src instanceof Tensor) {
    if (src.dtype === 'float32') {
      throw invalidParameter(argument, 'int32 or int64 ids', 'a float32 Tensor', InvalidTypeError);
    }
    src = src.data;
  }
  const int64 = asTypedArray(src, BigInt64Array, argument);
  const int32 = asTypedArray(src, Int32Array, argument);
  const uint64 = asTypedArray(src, BigUint64Array, argument);
  if (Array.isArray(src)) checkDenseArray(src, argument);
  if (dtype === 'int64') {
    if (int64) return int64;
    if (int32) {
      const out = new BigInt64Array(int32.length);
      for (let i = 0; i < int32.length; i++) out[i] = BigInt(int32[i]!);
      return out;
    }
    if (uint64) {
      const out = new BigInt64Array(uint64.length);
      for (let i = 0; i < uint64.length; i++) {
        const v = uint64[i]!;
        if (v > INT64_MAX) throw invalidParameter(`${argument}[${i}]`, 'an int64 value', v, OutOfRangeError);
        out[i] = v;
      }
      return out;
    }
    if (Array.isArray(src)) {
      const out = new BigInt64Array(src.length);
      for (let i = 0; i < src.length; i++) {
        const v: unknown = src[i];
        if (typeof v === 'bigint') {
          if (v < INT64_MIN || v > INT64_MAX) {
            throw invalidParameter(`${argument}[${i}]`, 'an int64 value', v, OutOfRangeError);
          }
          out[i] = v;
        } else if (typeof v === 'number' && Number.isSafeInteger(v)) {
          out[i] = BigInt(v);
        } else {
          throw invalidParameter(`${argument}[${i}]`, 'a safe integer or a bigint', v, InvalidTypeError);
        }
      }
      return out;
    }
  } else if (dtype === 'int32') {
    if (int32) return int32;
    if (int64 || uint64 || Array.isArray(src)) {
      const arr = (int64 ?? uint64 ?? src) as ArrayLike<unknown>;
      const out = new Int32Array(arr.length);
      for (let i = 0; i < arr.length; i++) out[i] = int32Element(arr[i], argument, i);
      return out;
    }
  } else {
    throw invalidParameter('dtype', "'int64' or 'int32'", dtype, typeof dtype === 'string' ? InvalidArgumentError : InvalidTypeError);
  }
  throw invalidParameter(
    argument,
    'a BigInt64Array, Int32Array, number[], bigint[] or an int Tensor',
    input,
    InvalidTypeError,
  );
}

/** Keys given as a plain array: at most 2^32 - 1 of them, no holes (checked before any key array is allocated). */
function checkDenseArray(src: readonly unknown[], argument: string): void {
  if (src.length >= 2 ** 32 - 1) {
    throw new InvalidArgumentError(`Expected ${argument} to hold fewer than 2^32 - 1 keys but received an array of length ${src.length}`, { argument });
  }
  for (let i = 0; i < src.length; i++) {
    if (!(i in src)) throw new InvalidTypeError(`Expected ${argument}[${i}] to be a key but it is a hole (a sparse array)`, { argument: `${argument}[${i}]` });
  }
}

/** keys[positions[i]] for every i, in the dtype of `keys`. */
export function takeKeys(keys: Keys, positions: ArrayLike<number>): Keys {
  if (keys instanceof BigInt64Array) return BigInt64Array.from(positions, (p) => keys[p]!);
  return Int32Array.from(positions, (p) => keys[p]!);
}

/** A keys array of `dtype` holding at(0), ..., at(n - 1) (int32 keys as numbers, int64 as bigints). */
export function makeKeys(dtype: KeyDtype, n: number, at: (i: number) => bigint | number): Keys {
  if (dtype === 'int64') return BigInt64Array.from({ length: n }, (_, i) => BigInt(at(i)));
  return Int32Array.from({ length: n }, (_, i) => Number(at(i)));
}

/** The key at position i as a bigint (for messages and oracles). */
export function keyAt(keys: Keys, i: number): bigint {
  const v = keys[i]!;
  return typeof v === 'bigint' ? v : BigInt(v);
}

/**
 * The non-negative floor modulo TF uses to place keys on shards:
 * `((key % n) + n) % n` computed exactly on 64-bit keys.
 */
export function floorMod(key: bigint | number, n: number): number {
  if (typeof key === 'number') return ((key % n) + n) % n;
  const m = BigInt(n);
  return Number(((key % m) + m) % m);
}
