import {
  describeValue,
  formatShape,
  InvalidTypeError,
  invalidParameter,
  type KeyDtype,
  type Keys,
  normalizeKeys,
  ShapeMismatchError,
  Tensor,
} from '@embedstack/core';

/** Key types of a Variable. 'string' keys are hashed to int64 with {@link hashString64}. */
export type TfraKeyDtype = 'int64' | 'int32' | 'string';

/**
 * Every form a Variable takes keys in (string[] for 'string' variables). A flat
 * array or typed array has shape [n]; a Tensor keeps its shape, and so does a
 * rectangular nested array (`[[1, 2], [3, 4]]` has shape [2, 2]).
 */
export type VariableKeys =
  | BigInt64Array
  | Int32Array
  | readonly number[]
  | readonly bigint[]
  | readonly string[]
  | NestedKeys
  | Tensor<BigInt64Array>
  | Tensor<Int32Array>;

/** A rectangular nested array of keys (`[[23, 12, 0], [9, 13, 10]]`), any depth. */
export type NestedKeys = ReadonlyArray<readonly number[] | readonly bigint[] | readonly string[] | NestedKeys>;

const FNV64_OFFSET = 0xcbf29ce484222325n;
const FNV64_PRIME = 0x100000001b3n;
const MASK64 = (1n << 64n) - 1n;
const encoder = new TextEncoder();

/**
 * The stable 64-bit hash of 'string' keys: FNV-1a 64 over the UTF-8 bytes, read as
 * a signed int64. Same string -> same key on every run, machine and shard.
 * @throws InvalidTypeError when `text` is not a string
 */
export function hashString64(text: string): bigint {
  if (typeof text !== 'string') throw invalidParameter('text', 'a string', text, InvalidTypeError);
  let h = FNV64_OFFSET;
  for (const b of encoder.encode(text)) {
    h ^= BigInt(b);
    h = (h * FNV64_PRIME) & MASK64;
  }
  return BigInt.asIntN(64, h);
}

/** The key dtype of the tables that hold a Variable (strings are stored as their int64 hash). */
export function storageDtype(keyDtype: TfraKeyDtype): KeyDtype {
  return keyDtype === 'int32' ? 'int32' : 'int64';
}

export interface NormalizedKeys {
  keys: Keys;
  /** Shape of the input: a Tensor keeps its shape, anything else is [n]. */
  shape: number[];
}

function typedDtype(input: unknown): KeyDtype | 'float32' | 'float64' | null {
  const data = input instanceof Tensor ? input.data : input;
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) return 'int64';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Float64Array) return 'float64';
  return null;
}

/**
 * Normalises keys for a Variable of `keyDtype`. Plain JS arrays carry no dtype and
 * are converted (unsafe numbers are errors). With `strict` (embedding lookups, as
 * TF's "params.key_dtype should be same with ids.dtype"), a typed array or Tensor
 * of another dtype than the storage dtype is an InvalidTypeError.
 *
 * @throws InvalidTypeError naming `argument`
 */
export function toKeys(input: unknown, keyDtype: TfraKeyDtype, argument = 'keys', strict = false): NormalizedKeys {
  if (Array.isArray(input) && input.length > 0 && Array.isArray(input[0])) {
    const { flat, shape } = flattenNested(input, argument);
    return { keys: toKeys(flat, keyDtype, argument, strict).keys, shape };
  }
  const dtype = storageDtype(keyDtype);
  const typed = typedDtype(input);
  if (strict && typed !== null && typed !== dtype) {
    throw invalidParameter(argument, `ids of the variable's key dtype (${keyDtype})`, `${typed} ids`, InvalidTypeError);
  }
  if (keyDtype === 'string' && Array.isArray(input) && input.length > 0 && input.every((k) => typeof k === 'string')) {
    const keys = new BigInt64Array(input.length);
    for (let i = 0; i < input.length; i++) keys[i] = hashString64(input[i] as string);
    return { keys, shape: [input.length] };
  }
  if (keyDtype !== 'string' && Array.isArray(input) && input.some((k) => typeof k === 'string')) {
    const i = input.findIndex((k) => typeof k === 'string');
    throw invalidParameter(`${argument}[${i}]`, `a ${keyDtype} key (strings need keyDtype 'string')`, input[i], InvalidTypeError);
  }
  const keys = normalizeKeys(input, dtype, argument);
  const shape = input instanceof Tensor ? input.shape.slice() : [keys.length];
  return { keys, shape };
}

/**
 * A rectangular nested array of keys (`[[23, 12, 0], [9, 13, 10]]`) as a flat list
 * and its shape, like `Tensor.fromNestedArray`.
 * @throws ShapeMismatchError naming `argument` when it is ragged
 */
function flattenNested(input: readonly unknown[], argument: string): { flat: unknown[]; shape: number[] } {
  const shape: number[] = [];
  for (let probe: unknown = input; Array.isArray(probe); probe = probe[0]) {
    shape.push(probe.length);
    if (probe.length === 0) break;
  }
  const flat: unknown[] = [];
  const walk = (node: unknown, d: number, at: string): void => {
    if (d === shape.length) {
      if (Array.isArray(node)) throw new ShapeMismatchError(`Expected ${at} to be a key (rectangular ${argument} of shape ${formatShape(shape)}) but received an array`, { argument });
      flat.push(node);
      return;
    }
    if (!Array.isArray(node) || node.length !== shape[d]) {
      const got = Array.isArray(node) ? `an array of length ${node.length}` : describeValue(node);
      throw new ShapeMismatchError(`Expected ${at} to be an array of length ${shape[d]} (rectangular ${argument} of shape ${formatShape(shape)}) but received ${got}`, {
        argument,
      });
    }
    node.forEach((v, i) => walk(v, d + 1, `${at}[${i}]`));
  };
  walk(input, 0, argument);
  return { flat, shape };
}

/** Distinct keys in order of first appearance, and for each input position the index of its key. */
export function uniqueKeys(keys: Keys): { unique: Keys; index: Int32Array } {
  const seen = new Map<bigint | number, number>();
  const index = new Int32Array(keys.length);
  const order: (bigint | number)[] = [];
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    let at = seen.get(k);
    if (at === undefined) {
      at = order.length;
      seen.set(k, at);
      order.push(k);
    }
    index[i] = at;
  }
  const unique = keys instanceof BigInt64Array ? BigInt64Array.from(order as bigint[]) : Int32Array.from(order as number[]);
  return { unique, index };
}

export { takeKeys } from '@embedstack/core';
