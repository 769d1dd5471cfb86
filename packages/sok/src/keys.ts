import { type Bag, type BagInput, type BagWeights, checkRowIndices, type Keys, normalizeKeys, OutOfRangeError, RaggedTensor, SparseTensor, toOrderedBag } from '@embedstack/core';
import type { SokVariable } from './variable.js';

/**
 * Ids for `v` in its key type: a DynamicVariable's keys (int64, or int32 with
 * values out of int32 an OUT_OF_RANGE error); a Variable's global row ids checked
 * against [0, rows) (OUT_OF_RANGE) and returned as int32.
 *
 * @throws InvalidTypeError (not ids), OutOfRangeError naming `argument[i]`
 */
export function idsFor(v: SokVariable, input: unknown, argument: string): Keys {
  const rows = v.staticRows;
  if (rows !== null) {
    if (input instanceof Int32Array || (input as { data?: unknown })?.data instanceof Int32Array) {
      const k = normalizeKeys(input, 'int32', argument);
      checkRowIndices(k, rows, argument, v.name);
      return k;
    }
    const k = normalizeKeys(input, 'int64', argument);
    checkRowIndices(k, rows, argument, v.name);
    return Int32Array.from(k as BigInt64Array, (x) => Number(x));
  }
  try {
    return normalizeKeys(input, v.keyDtype, argument);
  } catch (e) {
    // core's OUT_OF_RANGE names the element (argument[i]); say which variable and key type refused it
    const at = e instanceof OutOfRangeError && v.keyDtype === 'int32' ? /\[(\d+)\]$/.exec(e.argument ?? '') : null;
    if (at === null) throw e;
    const arr = ((input as { data?: unknown })?.data ?? input) as ArrayLike<unknown>;
    const i = Number(at[1]);
    throw new OutOfRangeError(`Expected ${argument}[${i}] to be an int32 key of DynamicVariable "${v.name}" (keyType 'int32') but received ${String(arr[i])}`, { argument: `${argument}[${i}]` });
  }
}

/**
 * Sparse or ragged ids (and weights like them) of `v` as the ragged bag core's ops
 * take (keys in `v`'s key type, checked as {@link idsFor}).
 * @throws InvalidTypeError / ShapeMismatchError / OutOfRangeError naming `argument` (the ids) or `weightsArgument`
 */
export function bagFor(v: SokVariable, ids: BagInput, weights: BagWeights, argument: string, weightsArgument = 'weights'): Bag<Keys> {
  // int32 ids stay int32 through the bag (no BigInt round trip per id); idsFor converts to v's key type
  const values = ids instanceof RaggedTensor || ids instanceof SparseTensor ? ids.values : null;
  const { bag } = toOrderedBag(ids, weights, values instanceof Int32Array ? 'int32' : 'int64', argument, weightsArgument);
  return { rowSplits: bag.rowSplits, keys: idsFor(v, bag.keys, `${argument}.values`), weights: bag.weights };
}

/** One id per row: the bag of a plain lookup (`embeddingLookup`, v1 All2All). */
export function singletonBag(keys: Keys): Bag<Keys> {
  const splits = new Int32Array(keys.length + 1);
  for (let i = 0; i <= keys.length; i++) splits[i] = i;
  return { rowSplits: splits, keys, weights: null };
}
