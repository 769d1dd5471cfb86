/** Element types. Values are float32; ids are int32 or int64. */
export type ValueDtype = 'float32';
export type KeyDtype = 'int64' | 'int32';
export type Dtype = ValueDtype | KeyDtype;

/** Normalised key arrays: int64 keys are `BigInt64Array`, int32 keys are `Int32Array`. */
export type Keys = BigInt64Array | Int32Array;

export type TypedArrayFor<D extends Dtype> = D extends 'float32'
  ? Float32Array
  : D extends 'int32'
    ? Int32Array
    : BigInt64Array;

export type DataArray = Float32Array | Int32Array | BigInt64Array;

export const DTYPES: readonly Dtype[] = ['float32', 'int32', 'int64'];
export const KEY_DTYPES: readonly KeyDtype[] = ['int64', 'int32'];

export function dtypeOf(data: DataArray): Dtype {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Int32Array) return 'int32';
  return 'int64';
}

export function isDataArray(value: unknown): value is DataArray {
  return value instanceof Float32Array || value instanceof Int32Array || value instanceof BigInt64Array;
}

export function isKeyDtype(value: unknown): value is KeyDtype {
  return value === 'int64' || value === 'int32';
}
