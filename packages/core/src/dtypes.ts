/** Element types. Values are float32; ids are int32 or int64. */
export type ValueDtype = 'float32';
/** Key (id) types: 64-bit keys (BigInt64Array) or 32-bit keys (Int32Array). */
export type KeyDtype = 'int64' | 'int32';
/** Any element type: a value dtype or a key dtype. */
export type Dtype = ValueDtype | KeyDtype;

/** Normalised key arrays: int64 keys are `BigInt64Array`, int32 keys are `Int32Array`. */
export type Keys = BigInt64Array | Int32Array;

/** The typed array holding elements of dtype `D`: Float32Array, Int32Array or BigInt64Array. */
export type TypedArrayFor<D extends Dtype> = D extends 'float32'
  ? Float32Array
  : D extends 'int32'
    ? Int32Array
    : BigInt64Array;

/** A typed array of any {@link Dtype}. */
export type DataArray = Float32Array | Int32Array | BigInt64Array;

/** Every {@link Dtype}: `['float32', 'int32', 'int64']`. */
export const DTYPES: readonly Dtype[] = ['float32', 'int32', 'int64'];
/** Every {@link KeyDtype}: `['int64', 'int32']`. */
export const KEY_DTYPES: readonly KeyDtype[] = ['int64', 'int32'];

/** The dtype of a typed array: 'float32' for Float32Array, 'int32' for Int32Array, 'int64' otherwise (BigInt64Array). */
export function dtypeOf(data: DataArray): Dtype {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Int32Array) return 'int32';
  return 'int64';
}

/** Whether `value` is a Float32Array, Int32Array or BigInt64Array. */
export function isDataArray(value: unknown): value is DataArray {
  return value instanceof Float32Array || value instanceof Int32Array || value instanceof BigInt64Array;
}

/** Whether `value` is 'int64' or 'int32'. */
export function isKeyDtype(value: unknown): value is KeyDtype {
  return value === 'int64' || value === 'int32';
}
