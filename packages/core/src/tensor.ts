import { type DataArray, type Dtype, dtypeOf, isDataArray } from './dtypes.js';
import { InvalidArgumentError, InvalidTypeError, invalidParameter, OutOfRangeError, ShapeMismatchError, argName } from './errors.js';
import { formatShape, shapeSize, validateShape } from './shape.js';
import { checkOptions } from './validation.js';

/** A number, a bigint, or a nested array of them (the input and output of the nested-array conversions). */
export type Nested = number | bigint | readonly Nested[];

/**
 * A dense, row-major tensor over a typed array (host memory, owned by the caller).
 * `dtype` is inferred from the array: Float32Array -> 'float32',
 * Int32Array -> 'int32', BigInt64Array -> 'int64'.
 */
export class Tensor<D extends DataArray = DataArray> {
  /** The elements, row-major (the caller's array, not copied). */
  readonly data: D;
  /** Dimensions (frozen); their product is data.length. */
  readonly shape: readonly number[];
  /** Element type, from the array's class. */
  readonly dtype: Dtype;

  /**
   * @param data  typed array with exactly `prod(shape)` elements
   * @param shape dimensions; defaults to `[data.length]`
   * @throws InvalidTypeError when data is not a Float32Array/Int32Array/BigInt64Array
   * @throws ShapeMismatchError when the shape does not hold `data.length` elements
   */
  constructor(data: D, shape?: readonly number[]) {
    if (!isDataArray(data)) {
      throw invalidParameter('data', 'a Float32Array, Int32Array or BigInt64Array', data, InvalidTypeError);
    }
    const s = shape === undefined ? [data.length] : validateShape(shape, 'shape');
    if (shapeSize(s) !== data.length) {
      throw new ShapeMismatchError(
        `Expected shape ${formatShape(s)} to hold ${shapeSize(s)} elements but received data of ${data.length}`,
        { argument: 'shape' },
      );
    }
    this.data = data;
    this.shape = Object.freeze(s);
    this.dtype = dtypeOf(data);
  }

  /** Number of dimensions. */
  get rank(): number {
    return this.shape.length;
  }

  /** Number of elements (data.length). */
  get size(): number {
    return this.data.length;
  }

  /** A view with another shape over the same data. */
  reshape(shape: readonly number[]): Tensor<D> {
    return new Tensor(this.data, shape);
  }

  /** Nested JS arrays (numbers; bigints for int64). */
  toNestedArray(): Nested {
    const data = Array.from(this.data as ArrayLike<number | bigint>);
    if (this.shape.length === 0) return data[0] as number;
    const build = (dim: number, offset: number): Nested[] => {
      const n = this.shape[dim]!;
      const stride = shapeSize(this.shape.slice(dim + 1));
      const out: Nested[] = [];
      for (let i = 0; i < n; i++) {
        out.push(dim === this.shape.length - 1 ? data[offset + i]! : build(dim + 1, offset + i * stride));
      }
      return out;
    };
    return build(0, 0);
  }

  /**
   * Build a tensor from nested arrays of numbers (or bigints for int64).
   * Rows must be rectangular. dtype defaults to 'float32'.
   */
  static fromNestedArray(rows: Nested, options: { dtype?: Dtype } | null = {}): Tensor {
    const dtype = checkOptions<{ dtype?: Dtype }>(options, ['dtype']).dtype ?? 'float32';
    const shape: number[] = [];
    let probe: Nested = rows;
    while (Array.isArray(probe)) {
      shape.push(probe.length);
      probe = (probe as readonly Nested[])[0] as Nested;
      if (probe === undefined) break;
    }
    const flat: (number | bigint)[] = [];
    const walk = (node: Nested, dim: number): void => {
      if (dim === shape.length) {
        if (Array.isArray(node)) throw invalidParameter('rows', 'a rectangular nested array', rows);
        flat.push(node as number | bigint);
        return;
      }
      if (!Array.isArray(node) || node.length !== shape[dim]) {
        throw invalidParameter('rows', `a rectangular nested array with shape ${formatShape(shape)}`, rows);
      }
      for (const child of node) walk(child, dim + 1);
    };
    walk(rows, 0);
    return new Tensor(toTypedArray(flat, dtype, 'rows'), shape);
  }
}

/**
 * `v` (element `i` of `argument`) as an int32: an integer past int32 is OutOfRangeError (as a key
 * is); anything else that is no int32 (a fraction, NaN, a number past 2**53, a string) InvalidTypeError.
 */
export function int32Element(v: unknown, argument: string, i: number): number {
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n === 'number' && Number.isInteger(n) && n >= -2147483648 && n <= 2147483647) return n;
  const integer = typeof v === 'bigint' || Number.isSafeInteger(v);
  throw invalidParameter(`${argument}[${i}]`, 'an int32 integer', v, integer ? OutOfRangeError : InvalidTypeError);
}

/** Converts plain numbers/bigints to a typed array of `dtype`, validating each element. */
export function toTypedArray(values: readonly (number | bigint)[], dtype: Dtype, argument: string): DataArray {
  argument = argName(argument, 'values');
  if (!Array.isArray(values)) throw invalidParameter(argument, 'an array of numbers', values, InvalidTypeError);
  switch (dtype) {
    case 'float32': {
      const out = new Float32Array(values.length);
      for (let i = 0; i < values.length; i++) {
        const v = values[i];
        if (typeof v !== 'number') throw invalidParameter(`${argument}[${i}]`, 'a number', v, InvalidTypeError);
        out[i] = v;
      }
      return out;
    }
    case 'int32': {
      const out = new Int32Array(values.length);
      for (let i = 0; i < values.length; i++) {
        out[i] = int32Element(values[i], argument, i);
      }
      return out;
    }
    case 'int64': {
      const out = new BigInt64Array(values.length);
      for (let i = 0; i < values.length; i++) {
        const v = values[i];
        if (typeof v === 'bigint') {
          if (v < -(1n << 63n) || v >= 1n << 63n) {
            throw invalidParameter(`${argument}[${i}]`, 'an int64 integer', v, OutOfRangeError);
          }
          out[i] = v;
        } else if (typeof v === 'number' && Number.isSafeInteger(v)) {
          out[i] = BigInt(v);
        } else {
          throw invalidParameter(`${argument}[${i}]`, 'a safe integer or bigint', v, InvalidTypeError);
        }
      }
      return out;
    }
    default:
      throw invalidParameter('dtype', "'float32', 'int32' or 'int64'", dtype, typeof dtype === 'string' ? InvalidArgumentError : InvalidTypeError);
  }
}
